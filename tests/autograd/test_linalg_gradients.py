"""Gradients of ember.linalg and the contractions: central differences and PyTorch float64.

``ROWS`` is the table: one row per function (or variant: batched, vector right-hand side,
upper, wide/tall...), written once over a library adapter so the same expression runs in
Ember (``gradcheck.check_case`` against central differences, under both checkpointing
strategies) and in PyTorch (the same weighted loss, ``torch.autograd.grad``; skipped without
torch).  Eigen- and singular vectors are only defined up to sign, so rows use sign-free
functions of them (``v * v``, ``U diag(c) Vh``).  Inputs of the factorisations are kept
well-conditioned with distinct eigen/singular values: degenerate cases have their own tests
at the end, with the behaviour written out.
"""
import numpy as np
import pytest

import ember
from .gradcheck import case, check_case, draw, gradients, normal, _outputs, _weights, as_tensor

try:
    import torch
except ImportError:   # the PyTorch comparisons skip; the finite differences still run
    torch = None

F64 = ember.float64


class E:
    """Ember spelled like the torch adapter below."""
    linalg = ember.linalg

    @staticmethod
    def trmm(a, b, upper):
        """The IR op behind the Cholesky gradient's L^H gL: triu(a) or tril(a) @ b."""
        from ember import dispatch
        from ember.ir import Op
        return dispatch.apply(Op.TRIANGULAR_MATMUL, a, b, upper=upper)
    einsum = staticmethod(ember.einsum)
    tensordot = staticmethod(ember.tensordot)
    outer = staticmethod(ember.outer)
    trace = staticmethod(ember.trace)

    @staticmethod
    def eye(n, like):
        return ember.eye(n, dtype=like.dtype)

    @staticmethod
    def const(a, like):
        return ember.tensor(np.asarray(a), dtype=like.dtype)


class T:
    if torch is not None:
        linalg = torch.linalg
        einsum = staticmethod(torch.einsum)
        tensordot = staticmethod(torch.tensordot)
        outer = staticmethod(torch.outer)
        trace = staticmethod(torch.trace)

    @staticmethod
    def eye(n, like):
        return torch.eye(n, dtype=like.dtype)

    @staticmethod
    def trmm(a, b, upper):
        return (a.triu() if upper else a.tril()) @ b

    @staticmethod
    def const(a, like):
        return torch.tensor(np.asarray(a), dtype=like.dtype)


def mT(x):
    return x.transpose(-2, -1)


def spd(L, x):
    """A well-conditioned symmetric positive-definite matrix from any square x."""
    n = x.shape[-1]
    return x @ mT(x) + L.eye(n, x) * n


def sym(x):
    return (x + mT(x)) * 0.5


def well(L, x):
    """A well-conditioned general square matrix."""
    return x + L.eye(x.shape[-1], x) * 3


def tri(L, x, upper):
    n = x.shape[-1]
    t = x.triu() if upper else x.tril()
    return t + L.eye(n, x) * 3


C4 = [0.5, -1.0, 2.0, 1.5]


def _svd_parts(L, x, full=False):
    u, s, vh = L.linalg.svd(x, full_matrices=full)
    k = s.shape[-1]
    u, vh = u[..., :, :k], vh[..., :k, :]
    return s, u * u, vh * vh, (u * L.const(C4[:k], x)) @ vh


def _qr_parts(L, x, mode="reduced"):
    q, r = L.linalg.qr(x, mode=mode)
    return q * q, r * r, q @ r


def _gp_nll(L, log_ls, x, y):
    """The GP negative log marginal likelihood of examples/gaussian_process.py, n = 6."""
    d = x.unsqueeze(-1) - x.unsqueeze(-2)
    k = (d * d * (log_ls * -2).exp() * -0.5).exp() + L.eye(x.shape[-1], x) * 0.1
    c = L.linalg.cholesky(k)
    alpha = L.linalg.solve_triangular(c, y.unsqueeze(-1), upper=False)
    diag = L.linalg.diagonal(c)
    return (alpha * alpha).sum() * 0.5 + diag.log().sum()


# (name, f(library, *inputs), input generators); every input is a float64 leaf
ROWS = [
    ("cholesky", lambda L, x: L.linalg.cholesky(spd(L, x)), [normal(3, 3)]),
    ("cholesky_upper", lambda L, x: L.linalg.cholesky(spd(L, x), upper=True), [normal(3, 3)]),
    ("cholesky_batched", lambda L, x: L.linalg.cholesky(spd(L, x)), [normal(2, 3, 3)]),
    ("cholesky_small_batch", lambda L, x: L.linalg.cholesky(spd(L, x)), [normal(9, 2, 2)]),
    ("solve", lambda L, a, b: L.linalg.solve(well(L, a), b), [normal(3, 3), normal(3, 2)]),
    ("solve_vector", lambda L, a, b: L.linalg.solve(well(L, a), b), [normal(3, 3), normal(3)]),
    ("solve_batched_broadcast", lambda L, a, b: L.linalg.solve(well(L, a), b),
     [normal(2, 1, 3, 3), normal(4, 3, 1)]),
    ("solve_small_batch", lambda L, a, b: L.linalg.solve(well(L, a), b),
     [normal(8, 2, 2), normal(8, 2, 1)]),
    ("solve_left_false", lambda L, a, b: L.linalg.solve(well(L, a), b, left=False),
     [normal(3, 3), normal(2, 3)]),
    ("solve_triangular_lower", lambda L, a, b: L.linalg.solve_triangular(
        tri(L, a, False), b, upper=False), [normal(3, 3), normal(3, 2)]),
    ("solve_triangular_upper_batched", lambda L, a, b: L.linalg.solve_triangular(
        tri(L, a, True), b, upper=True), [normal(2, 3, 3), normal(2, 3, 2)]),
    ("solve_triangular_unit_right", lambda L, a, b: L.linalg.solve_triangular(
        a, b, upper=True, left=False, unitriangular=True), [normal(3, 3), normal(2, 3)]),
    ("solve_triangular_small_batch", lambda L, a, b: L.linalg.solve_triangular(
        tri(L, a, False), b, upper=False), [normal(8, 2, 2), normal(8, 2, 1)]),
    ("triangular_matmul_lower", lambda L, a, b: L.trmm(a, b, False), [normal(3, 3), normal(3, 2)]),
    ("triangular_matmul_upper_batched", lambda L, a, b: L.trmm(a, b, True), [normal(2, 3, 3), normal(2, 3, 4)]),
    ("inv", lambda L, a: L.linalg.inv(well(L, a)), [normal(3, 3)]),
    ("inv_batched", lambda L, a: L.linalg.inv(well(L, a)), [normal(2, 3, 3)]),
    ("det", lambda L, a: L.linalg.det(a), [normal(3, 3)]),
    ("det_batched", lambda L, a: L.linalg.det(a), [normal(2, 3, 3)]),
    ("slogdet", lambda L, a: tuple(L.linalg.slogdet(a)), [normal(2, 3, 3)]),
    ("eigh", lambda L, x: (lambda w, v: (w, v * v))(*L.linalg.eigh(sym(x))), [normal(4, 4)]),
    ("eigh_upper_batched", lambda L, x: (lambda w, v: (w, v * v))(*L.linalg.eigh(sym(x), UPLO="U")),
     [normal(2, 3, 3)]),
    ("eigvalsh", lambda L, x: L.linalg.eigvalsh(sym(x)), [normal(2, 4, 4)]),
    ("svd_square", lambda L, x: _svd_parts(L, x), [normal(3, 3)]),
    ("svd_tall", lambda L, x: _svd_parts(L, x), [normal(4, 3)]),
    ("svd_wide_batched", lambda L, x: _svd_parts(L, x), [normal(2, 2, 4)]),
    ("svd_full_matrices", lambda L, x: _svd_parts(L, x, full=True), [normal(4, 2)]),
    ("svdvals", lambda L, x: L.linalg.svdvals(x), [normal(2, 3, 4)]),
    ("qr_tall", lambda L, x: _qr_parts(L, x), [normal(4, 3)]),
    ("qr_square_batched", lambda L, x: _qr_parts(L, x), [normal(2, 3, 3)]),
    ("qr_wide", lambda L, x: _qr_parts(L, x), [normal(2, 4)]),
    ("qr_complete_wide", lambda L, x: _qr_parts(L, x, "complete"), [normal(2, 3)]),
    ("pinv_tall", lambda L, x: L.linalg.pinv(x), [normal(4, 3)]),
    ("pinv_wide_batched", lambda L, x: L.linalg.pinv(x), [normal(2, 2, 4)]),
    ("pinv_hermitian", lambda L, x: L.linalg.pinv(spd(L, x), hermitian=True), [normal(3, 3)]),
    ("lstsq_tall", lambda L, a, b: L.linalg.lstsq(a, b).solution, [normal(5, 3), normal(5, 2)]),
    ("lstsq_vector", lambda L, a, b: L.linalg.lstsq(a, b).solution, [normal(4, 2), normal(4)]),
    ("lstsq_wide", lambda L, a, b: L.linalg.lstsq(a, b).solution, [normal(2, 4), normal(2, 1)]),
    ("matrix_norm_fro", lambda L, x: L.linalg.matrix_norm(x), [normal(2, 3, 4)]),
    ("matrix_norm_nuc", lambda L, x: L.linalg.matrix_norm(x, "nuc"), [normal(3, 4)]),
    ("matrix_norm_2", lambda L, x: L.linalg.matrix_norm(x, 2), [normal(2, 3, 3)]),
    ("matrix_norm_minus2", lambda L, x: L.linalg.matrix_norm(x, -2), [normal(4, 3)]),
    ("matrix_norm_1_keepdim", lambda L, x: L.linalg.matrix_norm(x, 1, keepdim=True), [normal(2, 3, 4)]),
    ("matrix_norm_inf_dims", lambda L, x: L.linalg.matrix_norm(x, float("inf"), dim=(0, 2)),
     [normal(3, 2, 4)]),
    ("vector_norm_2", lambda L, x: L.linalg.vector_norm(x), [normal(3, 4)]),
    ("vector_norm_3_dim", lambda L, x: L.linalg.vector_norm(x, 3, dim=1), [normal(3, 4)]),
    ("vector_norm_1_keepdim", lambda L, x: L.linalg.vector_norm(x, 1, dim=(0,), keepdim=True),
     [normal(3, 4)]),
    ("vector_norm_inf", lambda L, x: L.linalg.vector_norm(x, float("inf"), dim=-1),
     [lambda rng, prev: np.array([[0.3, -2.0, 1.1], [1.5, 0.2, -0.7]])]),
    ("norm_default", lambda L, x: L.linalg.norm(x), [normal(2, 3)]),
    ("norm_matrix_ord", lambda L, x: L.linalg.norm(x, "nuc"), [normal(3, 3)]),
    ("matrix_power_3", lambda L, x: L.linalg.matrix_power(x, 3), [normal(2, 3, 3)]),
    ("matrix_power_minus2", lambda L, x: L.linalg.matrix_power(well(L, x), -2), [normal(3, 3)]),
    ("cross", lambda L, a, b: L.linalg.cross(a, b), [normal(2, 3), normal(2, 3)]),
    ("cross_dim0_broadcast", lambda L, a, b: L.linalg.cross(a, b, dim=0), [normal(3, 2), normal(3, 1)]),
    ("vecdot", lambda L, a, b: L.linalg.vecdot(a, b), [normal(2, 4), normal(4)]),
    ("diagonal", lambda L, x: L.linalg.diagonal(x), [normal(2, 3, 4)]),
    ("diagonal_offset_dims", lambda L, x: L.linalg.diagonal(x, offset=-1, dim1=0, dim2=2),
     [normal(4, 2, 3)]),
    ("einsum_bmm", lambda L, a, b: L.einsum("bij,bjk->bik", a, b), [normal(2, 3, 4), normal(2, 4, 2)]),
    ("einsum_chain", lambda L, a, b, c: L.einsum("ij,jk,kl->il", a, b, c),
     [normal(3, 4), normal(4, 5), normal(5, 2)]),
    ("einsum_trace_outer", lambda L, a, b: L.einsum("ii,j->j", a, b), [normal(3, 3), normal(4)]),
    ("einsum_ellipsis_sum", lambda L, a, b: L.einsum("...ij,...j->...i", a, b),
     [normal(2, 3, 4), normal(4)]),
    ("einsum_implicit", lambda L, a, b: L.einsum("ij,jk", a, b), [normal(2, 3), normal(3, 2)]),
    ("tensordot", lambda L, a, b: L.tensordot(a, b, dims=([1, 0], [0, 2])),
     [normal(3, 2, 4), normal(2, 4, 3)]),
    ("outer", lambda L, a, b: L.outer(a, b), [normal(3), normal(4)]),
    ("trace", lambda L, a: L.trace(a), [normal(3, 4)]),
    ("gp_nll", _gp_nll, [lambda rng, prev: np.array(0.3), normal(6), normal(6)]),
]

CASES = {name: case(name, lambda *xs, f=f: f(E, *xs), *gens) for name, f, gens in ROWS}
TORCH = {name: f for name, f, gens in ROWS}


@pytest.mark.parametrize("name", list(CASES))
def test_linalg_gradient_finite_differences(name, device, unfused):
    check_case(CASES[name], device)


def torch_gradients(c, f):
    """The row's gradients from PyTorch: the same inputs, weights and loss."""
    arrays, rng = draw(c)
    probe = _outputs(c.fn(*[as_tensor(v, F64) for v in arrays]))
    weights = _weights(probe, rng)
    leaves = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    out = f(T, *leaves)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    loss = sum((o * torch.tensor(w)).sum() for o, w in zip(outs, weights))
    return [g.numpy() for g in torch.autograd.grad(loss, leaves)]


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed (pip install torch==2.13.0)")
@pytest.mark.parametrize("name", list(CASES))
def test_linalg_gradient_matches_torch(name, device, unfused):
    got = gradients(CASES[name], device)
    want = torch_gradients(CASES[name], TORCH[name])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-10, err_msg=name)


# direct leaves (no symmetrising composition): the rules' own output, against torch
DIRECT = [
    ("cholesky", lambda L, a: L.linalg.cholesky(a), "spd"),
    ("cholesky_upper", lambda L, a: L.linalg.cholesky(a, upper=True), "spd"),
    ("eigh", lambda L, a: (lambda w, v: (w, v * v))(*L.linalg.eigh(a)), "sym"),
    ("eigvalsh_upper", lambda L, a: L.linalg.eigvalsh(a, UPLO="U"), "sym"),
]


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed (pip install torch==2.13.0)")
@pytest.mark.parametrize("name,f,kind", DIRECT, ids=[d[0] for d in DIRECT])
def test_direct_symmetric_inputs_match_torch(name, f, kind, device):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 4))
    a = x @ np.swapaxes(x, -1, -2) + 4 * np.eye(4) if kind == "spd" else x + np.swapaxes(x, -1, -2)
    w = [rng.standard_normal(o.shape) for o in _outputs(f(E, as_tensor(a, F64)))]
    leaf = ember.tensor(a, dtype=F64, device=device).require_grad()
    outs = _outputs(f(E, leaf))
    loss = sum((o * as_tensor(wi, F64)).sum() for o, wi in zip(outs, w))
    got = leaf.grad(loss.backward()).numpy()
    ta = torch.tensor(a, requires_grad=True)
    touts = f(T, ta)
    touts = list(touts) if isinstance(touts, tuple) else [touts]
    tloss = sum((o * torch.tensor(wi)).sum() for o, wi in zip(touts, w))
    np.testing.assert_allclose(got, torch.autograd.grad(tloss, ta)[0].numpy(), rtol=1e-9, atol=1e-11)


# --- degenerate cases (docs/decisions.md, "Linear algebra: gradients at degenerate inputs") --------
def _leaf(a, device):
    return ember.tensor(np.asarray(a, dtype=np.float64), dtype=F64, device=device).require_grad()


def test_det_of_a_singular_matrix_has_the_adjugate_as_gradient(device):
    a = _leaf([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], device)   # rank 2
    g = a.grad(ember.linalg.det(a).backward()).numpy()
    an = a.numpy()
    adj_t = np.array([[np.linalg.det(np.delete(np.delete(an, i, 0), j, 1)) * (-1) ** (i + j)
                       for j in range(3)] for i in range(3)])   # the cofactor matrix
    np.testing.assert_allclose(g, adj_t, atol=1e-12)


def test_slogdet_of_a_singular_matrix_has_infinite_gradient(device):
    a = _leaf([[1.0, 2.0], [2.0, 4.0]], device)
    sign, logabsdet = ember.linalg.slogdet(a)
    assert sign.item() == 0 and logabsdet.item() == -np.inf
    g = a.grad(logabsdet.backward()).numpy()
    assert np.isinf(g).all()                 # torch: [[-inf, inf], [inf, -inf]]


def test_eigenvalues_of_repeated_eigenvalues_have_finite_gradient(device):
    a = _leaf(np.diag([2.0, 2.0, 5.0]), device)
    w = ember.linalg.eigvalsh(a)
    g = a.grad((w * ember.tensor([1.0, 1.0, 3.0], dtype=F64)).sum().backward()).numpy()
    np.testing.assert_allclose(g, np.diag([1.0, 1.0, 3.0]), atol=1e-12)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the inf/NaN itself
def test_eigenvectors_of_repeated_eigenvalues_have_no_finite_gradient(device):
    a = _leaf(np.diag([2.0, 2.0, 5.0]), device)
    w, v = ember.linalg.eigh(a)
    g = a.grad((v * ember.tensor(np.arange(9.0).reshape(3, 3), dtype=F64)).sum().backward())
    assert not np.isfinite(g.numpy()).all()   # as torch: inf where the eigenvalues repeat


def test_singular_values_of_a_rank_deficient_matrix_have_finite_gradient(device):
    a = _leaf([[1.0, 2.0], [2.0, 4.0], [0.0, 0.0]], device)
    s = ember.linalg.svdvals(a)
    g = a.grad(s.sum().backward()).numpy()
    u, _, vh = np.linalg.svd(a.numpy(), full_matrices=False)
    np.testing.assert_allclose(g, u @ vh, atol=1e-12)   # d sum(s) = U Vh


def test_norms_of_zero_have_zero_gradient(device):
    for f in (lambda x: ember.linalg.vector_norm(x), lambda x: ember.linalg.matrix_norm(x),
              lambda x: ember.linalg.vector_norm(x, 3.0)):
        x = _leaf(np.zeros((2, 2)), device)
        np.testing.assert_array_equal(x.grad(f(x).backward()).numpy(), np.zeros((2, 2)))


def test_qr_mode_r_and_complete_tall_are_not_differentiable(device):
    x = _leaf(np.arange(6.0).reshape(3, 2) + np.eye(3, 2), device)
    with pytest.raises(RuntimeError, match="mode='r'"):
        ember.linalg.qr(x, mode="r").R.sum().backward()
    x = _leaf(np.arange(6.0).reshape(3, 2) + np.eye(3, 2), device)
    with pytest.raises(RuntimeError, match="complete"):
        ember.linalg.qr(x, mode="complete").Q.sum().backward()


def test_only_the_used_output_of_eigh_needs_distinct_eigenvalues(device):
    # the eigenvalue part alone never divides by eigenvalue gaps (the vectors' part is skipped)
    a = _leaf(np.eye(3), device)
    w, v = ember.linalg.eigh(a)
    g = a.grad(w.sum().backward()).numpy()
    np.testing.assert_allclose(g, np.eye(3), atol=1e-12)


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed (pip install torch==2.13.0)")
@pytest.mark.parametrize("upper", [False, True], ids=["lower", "upper"])
def test_cholesky_gradient_past_the_small_matrices_matches_torch(upper, device):
    # n = 40 > SMALL_N: the rule's L^H gL runs in BLAS trmm (the table's rows are 3 x 3)
    rng = np.random.default_rng(8)
    x = rng.standard_normal((40, 40))
    a = x @ x.T + 40 * np.eye(40)
    w = rng.standard_normal((40, 40))
    leaf = ember.tensor(a, dtype=F64, device=device).require_grad()
    got = leaf.grad((ember.linalg.cholesky(leaf, upper=upper) * as_tensor(w, F64)).sum().backward())
    ta = torch.tensor(a, requires_grad=True)
    (torch.linalg.cholesky(ta, upper=upper) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(got.numpy(), ta.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed (pip install torch==2.13.0)")
@pytest.mark.parametrize("upper", [False, True], ids=["lower", "upper"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128], ids=lambda d: d.__name__)
@pytest.mark.parametrize("batch", [(), (2,)], ids=["one", "batch2"])
def test_cholesky_gradient_by_blocks_matches_torch(batch, dtype, upper, device, monkeypatch):
    # blocks of 16: a 40 x 40 real factor runs the CPU backend's blocked algorithm over three
    # blocks (16, 16 and a ragged 8); complex input, and CUDA, run the formula
    from ember.backends.cpu import linalg as cpu_linalg
    monkeypatch.setattr(cpu_linalg, "CHOLESKY_BACKWARD_BLOCK", 16)
    blocked = []
    real = cpu_linalg._cholesky_backward_blocked
    monkeypatch.setattr(cpu_linalg, "_cholesky_backward_blocked",
                        lambda *a: blocked.append(1) or real(*a))
    rng = np.random.default_rng(12)
    cplx = np.dtype(dtype).kind == "c"
    x = rng.standard_normal(batch + (40, 40)) + (1j * rng.standard_normal(batch + (40, 40)) if cplx else 0)
    a = x @ np.conj(np.swapaxes(x, -1, -2)) + 40 * np.eye(40)
    w = rng.standard_normal(batch + (40, 40)) + (1j * rng.standard_normal(batch + (40, 40)) if cplx else 0)
    ed = {np.float64: ember.float64, np.float32: ember.float32, np.complex128: ember.complex128}[dtype]
    leaf = ember.tensor(a.astype(dtype), dtype=ed, device=device).require_grad()
    loss = (ember.linalg.cholesky(leaf, upper=upper) * ember.tensor(w.astype(dtype), dtype=ed, device=device))
    got = leaf.grad((loss.real if cplx else loss).sum().backward())
    ta = torch.tensor(a.astype(dtype), requires_grad=True)
    tl = torch.linalg.cholesky(ta, upper=upper) * torch.tensor(w.astype(dtype))
    (tl.real if cplx else tl).sum().backward()
    tol = 2e-4 if dtype == np.float32 else 1e-9
    np.testing.assert_allclose(got.numpy(), ta.grad.numpy(), rtol=tol, atol=tol * 1e-2)
    assert len(blocked) == (max(1, int(np.prod(batch))) if not cplx and device.type == "cpu" else 0)
