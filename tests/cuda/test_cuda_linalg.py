"""ember.linalg on CUDA (the simulator, or a GPU): every factorisation and solve against the CPU
backend, float32, float64, complex64 and complex128, one matrix and a batch; errors; gradients
(both checkpointing strategies) against the CPU's, which tests/autograd/test_linalg_gradients.py
and test_complex_gradients.py check against central differences and PyTorch."""
import numpy as np
import pytest
from cuda_helpers import DEV, assert_same

import ember
from ember import linalg as LA

F64 = ember.float64


def pair(a, dtype):
    c = ember.from_numpy(np.ascontiguousarray(np.asarray(a, dtype)))
    return c, c.to(DEV)


class ComplexRng:
    """The makers' generator for a complex dtype: standard normal real and imaginary parts."""

    def __init__(self, rng):
        self.rng = rng

    def standard_normal(self, shape):
        return self.rng.standard_normal(shape) + 1j * self.rng.standard_normal(shape)


def spd(rng, shape):
    # (Hermitian positive-definite of a complex generator)
    x = rng.standard_normal(shape)
    return x @ np.swapaxes(x.conj(), -1, -2) + shape[-1] * np.eye(shape[-1])


def general(rng, shape):
    return rng.standard_normal(shape) + 3 * np.eye(*shape[-2:])


def _trmm(a, b, upper):
    from ember import dispatch
    from ember.ir import Op
    return dispatch.apply(Op.TRIANGULAR_MATMUL, a, b, upper=upper)


def _cholesky_backward(l, gl):
    from ember import dispatch
    from ember.ir import Op
    return dispatch.apply(Op.CHOLESKY_BACKWARD, l, gl)


def absolute(ts):
    return [t.abs() for t in ts]


def svd_defined(a):
    """|U|, S, |Vh| of the full SVD without the extra basis vectors past min(m, n): those span
    the null space in an arbitrary basis (gesvd on CUDA, gesdd on the CPU pick different ones)."""
    u, s, vh = LA.svd(a)
    k = s.shape[-1]
    assert u.shape[-1] == a.shape[-2] and vh.shape[-2] == a.shape[-1]
    return [u[..., :, :k].abs(), s, vh[..., :k, :].abs()]


# (name, ember call, input makers); sign-ambiguous factors are compared in absolute value
ROWS = [
    ("cholesky", lambda a: LA.cholesky(a), [spd]),
    ("cholesky_upper", lambda a: LA.cholesky(a, upper=True), [spd]),
    ("solve", lambda a, b: LA.solve(a, b), [general, lambda r, s: r.standard_normal(s[:-1] + (2,))]),
    ("solve_vector", lambda a, b: LA.solve(a, b), [general, lambda r, s: r.standard_normal(s[:-1])]),
    ("solve_triangular", lambda a, b: LA.solve_triangular(a, b, upper=True),
     [lambda r, s: np.triu(general(r, s)), lambda r, s: r.standard_normal(s[:-1] + (2,))]),
    ("solve_triangular_unit_right", lambda a, b: LA.solve_triangular(a, b, upper=False, left=False,
                                                                     unitriangular=True),
     [lambda r, s: np.tril(general(r, s)), lambda r, s: r.standard_normal(s[:-2] + (2, s[-1]))]),
    ("triangular_matmul", lambda a, b: [_trmm(a, b, True), _trmm(a, b, False)],
     [general, lambda r, s: r.standard_normal(s[:-1] + (2,))]),
    ("cholesky_backward", _cholesky_backward,
     [lambda r, s: np.linalg.cholesky(spd(r, s)), lambda r, s: r.standard_normal(s)]),
    ("inv", lambda a: LA.inv(a), [general]),
    ("det", lambda a: LA.det(a), [lambda r, s: general(r, s) - 3 * np.eye(s[-1])]),
    ("slogdet", lambda a: list(LA.slogdet(a)), [lambda r, s: general(r, s) - 3 * np.eye(s[-1])]),
    ("eigh", lambda a: [LA.eigh(a)[0], LA.eigh(a)[1].abs()], [spd]),
    ("eigvalsh_upper", lambda a: LA.eigvalsh(a, UPLO="U"), [lambda r, s: np.triu(spd(r, s))]),
    ("svd_wide", svd_defined, [lambda r, s: r.standard_normal(s[:-1] + (s[-1] + 2,))]),
    ("svd_tall_reduced", lambda a: absolute(LA.svd(a, full_matrices=False)),
     [lambda r, s: r.standard_normal(s[:-2] + (s[-2] + 2, s[-1]))]),
    ("svd_tall_full", svd_defined, [lambda r, s: r.standard_normal(s[:-2] + (s[-2] + 1, s[-1]))]),
    ("svdvals", lambda a: LA.svdvals(a), [general]),
    ("qr", lambda a: absolute(LA.qr(a)), [lambda r, s: r.standard_normal(s[:-2] + (s[-2] + 2, s[-1]))]),
    ("qr_wide", lambda a: absolute(LA.qr(a)), [lambda r, s: r.standard_normal(s[:-1] + (s[-1] + 2,))]),
    ("qr_complete", lambda a: absolute(LA.qr(a, mode="complete")),
     [lambda r, s: r.standard_normal(s[:-2] + (s[-2] + 2, s[-1]))]),
    ("qr_r", lambda a: LA.qr(a, mode="r").R.abs(), [general]),
    ("pinv", lambda a: LA.pinv(a), [lambda r, s: r.standard_normal(s[:-1] + (s[-1] + 1,))]),
    ("pinv_hermitian", lambda a: LA.pinv(a, hermitian=True), [spd]),
    ("lstsq", lambda a, b: LA.lstsq(a, b).solution,
     [lambda r, s: r.standard_normal(s[:-2] + (s[-2] + 2, s[-1])), lambda r, s: r.standard_normal(s[:-2] + (s[-2] + 2, 1))]),
    ("matrix_norm_2", lambda a: LA.matrix_norm(a, 2), [general]),
    ("matrix_rank", lambda a: LA.matrix_rank(a), [general]),
    ("einsum", lambda a, b: ember.einsum("...ij,...jk->...ik", a, b), [general, general]),
]


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)], ids=["single", "batched"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("name,fn,makers", ROWS, ids=[r[0] for r in ROWS])
def test_cuda_linalg_agrees_with_cpu(cuda, name, fn, makers, dtype, shape):
    rng = np.random.default_rng(5)
    if dtype.startswith("complex"):
        rng = ComplexRng(rng)
    pairs = [pair(m(rng, shape), dtype) for m in makers]
    want = fn(*[c for c, _ in pairs])
    got = fn(*[g for _, g in pairs])
    want = want if isinstance(want, list) else [want]
    got = got if isinstance(got, list) else [got]
    for g, w in zip(got, want):
        assert_same(g, w, rtol=2e-4 if dtype in ("float32", "complex64") else 1e-10)


def test_cuda_linalg_errors(cuda):
    bad, _ = pair([[1.0, 2.0], [2.0, 1.0]], "float64")
    with pytest.raises(LA.LinAlgError, match="cholesky: the input is not positive-definite"):
        LA.cholesky(bad.to(DEV))
    with pytest.raises(LA.LinAlgError, match=r"solve: the input matrix is singular.*\(1,\) of the batch"):
        LA.solve(ember.tensor(np.stack([np.eye(2), np.ones((2, 2))]), dtype=F64).to(DEV),
                 ember.ones((2, 2, 1), dtype=F64).to(DEV))
    with pytest.raises(TypeError, match="linalg.det"):
        LA.det(ember.tensor([[1, 2], [3, 4]]).to(DEV))
    sign, logabsdet = LA.slogdet(ember.ones((2, 2), dtype=F64).to(DEV))
    assert sign.item() == 0 and logabsdet.item() == -np.inf


# gradients: the same loss on CUDA and on the CPU
def _gp(x, y, log_ls):
    d = x.unsqueeze(-1) - x.unsqueeze(-2)
    k = (d * d * (log_ls * -2).exp() * -0.5).exp() + ember.eye(x.shape[-1], dtype=F64).to(x.device) * 0.1
    c = LA.cholesky(k)
    alpha = LA.solve_triangular(c, y.unsqueeze(-1), upper=False)
    return (alpha * alpha).sum() * 0.5 + LA.diagonal(c).log().sum()


def _sym(x):
    return x + x.transpose(-2, -1)


def _spd_of(x):
    return x @ x.transpose(-2, -1) + ember.eye(x.shape[-1], dtype=F64).to(x.device) * 3


GRADS = [
    ("cholesky", lambda x: LA.cholesky(_spd_of(x)), [(2, 3, 3)]),
    ("solve", lambda a, b: LA.solve(_spd_of(a), b), [(3, 3), (3, 2)]),
    ("solve_triangular", lambda a, b: LA.solve_triangular(_spd_of(a), b, upper=True), [(3, 3), (3, 2)]),
    ("det_slogdet", lambda a: [LA.det(a), LA.slogdet(a)[1]], [(2, 3, 3)]),
    ("eigh", lambda x: [LA.eigh(_sym(x))[0], LA.eigh(_sym(x))[1] ** 2], [(3, 3)]),
    ("svd", lambda x: [LA.svd(x, full_matrices=False)[1], LA.svd(x, full_matrices=False)[0] ** 2], [(4, 3)]),
    ("qr", lambda x: [LA.qr(x)[0] ** 2, LA.qr(x)[1] ** 2], [(4, 3)]),
    ("pinv", lambda x: LA.pinv(x), [(2, 4)]),
    ("gp", _gp, [(5,), (5,), ()]),
]


def _grads(fn, arrays, weights, device):
    leaves = [ember.tensor(a, dtype=F64).to(device.base()).autodiff()
              .with_gradient_checkpointing_strategy(device.checkpointing).require_grad() for a in arrays]
    outs = fn(*leaves)
    outs = outs if isinstance(outs, list) else [outs]
    loss = None
    for o, w in zip(outs, weights):
        term = (o * ember.tensor(w, dtype=F64).to(device.base())).sum()
        loss = term if loss is None else loss + term
    grads = loss.backward()
    return [t.grad(grads).numpy() for t in leaves]


@pytest.mark.parametrize("strategy", [ember.CheckpointingStrategy.NONE, ember.CheckpointingStrategy.BALANCED])
@pytest.mark.parametrize("name,fn,shapes", GRADS, ids=[g[0] for g in GRADS])
def test_cuda_linalg_gradients_match_the_cpu(cuda, name, fn, shapes, strategy):
    rng = np.random.default_rng(11)
    arrays = [np.asarray(rng.standard_normal(s) * (0.3 if s == () else 1.0)) for s in shapes]
    probe = fn(*[ember.tensor(a, dtype=F64) for a in arrays])
    probe = probe if isinstance(probe, list) else [probe]
    weights = [rng.standard_normal(p.shape) for p in probe]
    cpu = _grads(fn, arrays, weights, ember.Device.cpu().gradient_checkpointing(strategy))
    gpu = _grads(fn, arrays, weights, DEV.gradient_checkpointing(strategy))
    for g, w in zip(gpu, cpu):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11, err_msg=name)


# complex matrices: phase-free functions of eigen- and singular vectors, Hermitian inputs
def _herm_of(x):
    return x @ x.transpose(-2, -1).conj() + ember.eye(x.shape[-1], dtype=x.dtype).to(x.device) * 3


COMPLEX_GRADS = [
    ("cholesky", lambda x: LA.cholesky(_herm_of(x))),
    ("solve_inv", lambda x: LA.solve(_herm_of(x), x) + LA.inv(_herm_of(x))),
    ("solve_triangular", lambda x: LA.solve_triangular(_herm_of(x), x, upper=True)),
    ("det_slogdet", lambda x: LA.det(x) + LA.slogdet(x)[0] * LA.slogdet(x)[1]),
    ("eigh", lambda x: (lambda w, v: (v * v.conj()).real * w.unsqueeze(-2))(*LA.eigh(x + x.transpose(-2, -1).conj()))),
    ("svd", lambda x: (lambda u, s, vh: u @ vh * s.sum(-1).unsqueeze(-1).unsqueeze(-1))(*LA.svd(x, full_matrices=False))),
    ("qr", lambda x: LA.qr(x).Q * LA.qr(x).R.sum(-2, keepdim=True)),
    ("pinv", lambda x: LA.pinv(x)),
]


@pytest.mark.parametrize("strategy", [ember.CheckpointingStrategy.NONE, ember.CheckpointingStrategy.BALANCED])
@pytest.mark.parametrize("name,fn", COMPLEX_GRADS, ids=[g[0] for g in COMPLEX_GRADS])
def test_cuda_complex_linalg_gradients_match_the_cpu(cuda, name, fn, strategy):
    rng = np.random.default_rng(12)
    a = rng.standard_normal((2, 3, 3)) + 1j * rng.standard_normal((2, 3, 3))
    probe = fn(ember.tensor(a, dtype=ember.complex128))
    wr, wi = rng.standard_normal(probe.shape), rng.standard_normal(probe.shape)
    got = []
    for device in (ember.Device.cpu(), DEV):
        leaf = (ember.tensor(a, dtype=ember.complex128).to(device).autodiff()
                .with_gradient_checkpointing_strategy(strategy).require_grad())
        out = fn(leaf)
        if not out.dtype.is_complex:
            out = out.cast(ember.complex128)
        loss = (out.real * ember.tensor(wr, dtype=F64).to(device)
                + out.imag * ember.tensor(wi, dtype=F64).to(device)).sum()
        got.append(leaf.grad(loss.backward()).numpy())
    np.testing.assert_allclose(got[1], got[0], rtol=1e-9, atol=1e-11, err_msg=name)
