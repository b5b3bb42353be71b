"""Gradients through complex values and Fourier transforms (DESIGN §12), both strategies.

PyTorch's convention: for a real loss ``L`` of ``z = x + iy`` the gradient of ``z`` is
``dL/dx + i dL/dy``.  ``CASES`` is the table: each row is a function written once against a
small namespace (``E`` for Ember, ``T`` for PyTorch: the few names the two spell apart) and
its inputs (complex or real float64 leaves, or constants).  ``test_gradient`` builds

    loss = sum(real(out) * Wr + imag(out) * Wi)      (fixed random weights; real outputs: Wr)

runs backward under each checkpointing strategy (the ``device`` fixture) and compares every
leaf's gradient with central differences of the real and imaginary parts (Ember, without
autodiff) and, where PyTorch is installed, with ``leaf.grad`` of the same function in torch.
"""
import types
import warnings
import zlib

import numpy as np
import pytest

import ember
import ember.fft

try:
    import torch
except ImportError:   # the PyTorch comparison is skipped, the finite differences still run
    torch = None

F64, C128 = ember.float64, ember.complex128

E = types.SimpleNamespace(
    fft=ember.fft, recip=lambda t: t.recip(), sgn=lambda t: t.sign(), complex=ember.complex,
    polar=ember.polar, const=lambda a: ember.tensor(a), cat=ember.cat, stack=ember.stack,
    where=ember.where, index=lambda a: ember.tensor(np.asarray(a)),
    to=lambda t, name: t.cast(getattr(ember, name)), mixed_matmul=lambda a, b: a @ b,
    linalg=ember.linalg, eye=lambda n, like: ember.eye(n, dtype=like.dtype, device=like.device))
T = None if torch is None else types.SimpleNamespace(
    fft=torch.fft, recip=torch.reciprocal, sgn=torch.sgn, complex=torch.complex,
    polar=torch.polar, const=torch.tensor, cat=torch.cat, stack=torch.stack, where=torch.where,
    index=lambda a: torch.tensor(np.asarray(a)), to=lambda t, name: t.to(getattr(torch, name)),
    mixed_matmul=lambda a, b: a.to(b.dtype) @ b,   # (torch's matmul does not promote)
    linalg=torch.linalg, eye=lambda n, like: torch.eye(n, dtype=like.dtype))


# --- inputs ----------------------------------------------------------------------------------
def cplx(*shape, lo=0.3, hi=2.0):
    """A complex leaf, |z| in [lo, hi] at any angle (away from 0: abs, angle, log, division)."""
    def make(rng):
        return rng.uniform(lo, hi, shape) * np.exp(1j * rng.uniform(-np.pi, np.pi, shape))
    return ("complex", make)


def real(*shape, lo=-1.0, hi=1.0):
    return ("real", lambda rng: rng.uniform(lo, hi, shape))


def right_half(*shape):
    """Complex values with positive real part (no branch cut of log, sqrt, pow)."""
    def make(rng):
        return rng.uniform(0.3, 2, shape) * np.exp(1j * rng.uniform(-1.3, 1.3, shape))
    return ("complex", make)


def upper_half(*shape):
    """Complex values with imaginary part in [0.2, 2] (no branch cut of acosh)."""
    def make(rng):
        return rng.uniform(-2, 2, shape) + 1j * rng.uniform(0.2, 2, shape)
    return ("complex", make)


class Case:
    def __init__(self, name, fn, *args, rtol=1e-6, atol=1e-8):
        self.name, self.fn, self.args, self.rtol, self.atol = name, fn, args, rtol, atol

    def __repr__(self):
        return self.name


def _matmul_batched(m, a, b):
    return a @ b


# --- ember.linalg of complex matrices: Hermitian for symmetric, unitary for orthogonal ------------
def mH(x):
    return x.transpose(-2, -1).conj()


def herm(m, x):
    """A well-conditioned Hermitian positive-definite matrix from any square x."""
    return x @ mH(x) + m.eye(x.shape[-1], x) * x.shape[-1]


def hsym(x):
    return (x + mH(x)) * 0.5


def well(m, x):
    return x + m.eye(x.shape[-1], x) * 3


def tri(m, x, upper):
    return (x.triu() if upper else x.tril()) + m.eye(x.shape[-1], x) * 3


def _eigh_phase_free(m, x, uplo="L"):
    # eigenvalues, and |v|^2 (an eigenvector's phase e^{i phi} is arbitrary)
    w, v = m.linalg.eigh(x, UPLO=uplo)
    return (v * v.conj()).real * w.unsqueeze(-2)


def _svd_phase_free(m, x, full=False):
    # U diag(c) Vh and the singular values: unchanged by U -> U D, Vh -> D^H Vh (D unitary diagonal)
    u, s, vh = m.linalg.svd(x, full_matrices=full)
    k = s.shape[-1]
    c = m.const(np.array([0.5, -1.0, 2.0, 1.5][:k]))
    return (u[..., :, :k] * c) @ vh[..., :k, :] + s.sum(-1, keepdim=True).unsqueeze(-1)


def _svd_left_vectors(m, x):
    # |U|^2 alone: only the left vectors take a gradient (svd's has_u branch, tall or wide)
    u, _, _ = m.linalg.svd(x, full_matrices=False)
    return (u * u.conj()).real


def _slogdet_both(m, a):
    sign, logabsdet = m.linalg.slogdet(a)
    return sign * logabsdet


CASES = [
    # arithmetic and functions of complex leaves
    Case("add_sub_neg", lambda m, z, w: -(z + w) - w * 2 + (1 - 2j), cplx(3, 4), cplx(3, 4)),
    Case("mul", lambda m, z, w: z * w, cplx(3, 4), cplx(3, 4)),
    Case("mul_broadcast", lambda m, z, w: z * w, cplx(3, 1), cplx(1, 4)),
    Case("div", lambda m, z, w: z / w + 1 / z, cplx(3, 4), cplx(3, 4)),
    Case("pow", lambda m, z, w: z ** w, right_half(3, 4), cplx(3, 4, lo=0.1, hi=1.0)),
    Case("pow_scalar", lambda m, z: z ** 3 + z ** 0.5, right_half(3, 4)),
    Case("exp", lambda m, z: z.exp(), cplx(3, 4)),
    Case("log", lambda m, z: z.log(), right_half(3, 4)),
    Case("sqrt", lambda m, z: z.sqrt(), right_half(3, 4)),
    Case("rsqrt", lambda m, z: z.rsqrt(), right_half(3, 4)),
    Case("recip", lambda m, z: m.recip(z), cplx(3, 4)),
    Case("sin_cos_tan", lambda m, z: z.sin() + z.cos() * 2 + z.tan() * 0.5, cplx(3, 4, hi=1.0)),
    Case("tanh", lambda m, z: z.tanh(), cplx(3, 4, hi=1.0)),
    Case("cosh_sinh", lambda m, z: z.cosh() + z.sinh() * 2, cplx(3, 4)),
    # the inverse functions inside |z| < 0.8, away from their branch cuts (|re| > 1 or
    # |im| > 1), acosh in the upper half plane (its cut is the real axis below 1)
    Case("acos_asin_atan", lambda m, z: z.acos() + z.asin() * 2 + z.atan() * 0.5, cplx(3, 4, hi=0.8)),
    Case("asinh_atanh", lambda m, z: z.asinh() + z.atanh() * 2, cplx(3, 4, hi=0.8)),
    Case("acosh", lambda m, z: z.acosh(), upper_half(3, 4)),
    Case("expm1_log1p", lambda m, z: z.expm1() + (z * 0.5).log1p(), cplx(3, 4, hi=1.0)),
    Case("log2_log10_square", lambda m, z: z.log2() + z.log10() * 2 + z.square(), right_half(3, 4)),
    Case("abs", lambda m, z: z.abs(), cplx(3, 4)),
    Case("sgn", lambda m, z: m.sgn(z), cplx(3, 4)),
    Case("angle", lambda m, z: z.angle(), cplx(3, 4)),
    Case("conj", lambda m, z, w: z.conj() * w, cplx(3, 4), cplx(3, 4)),
    Case("real_imag", lambda m, z: z.real * 2 - z.imag * z.real, cplx(3, 4)),
    # between real and complex
    Case("complex", lambda m, x, y: m.complex(x, y) ** 2, real(3, 4), real(3, 4)),
    Case("polar", lambda m, r, t: m.polar(r, t), real(3, 4, lo=0.5, hi=2), real(3, 4, lo=-3, hi=3)),
    Case("real_leaf_times_complex", lambda m, x, z: (x * z).exp() + x * 1j, real(3, 4), cplx(3, 4)),
    Case("cast_real_to_complex", lambda m, x: m.to(x, "complex128") * (1 + 1j), real(3, 4)),
    Case("cast_complex_to_real", lambda m, z: m.to(z * z, "float64"), cplx(3, 4)),
    Case("abs_of_real_times_complex", lambda m, x: (x * (0.5 - 2j)).abs(), real(3, 4, lo=0.2)),
    # reductions, scans, matmul
    Case("sum_mean", lambda m, z: z.sum(0) * z.mean(1, keepdim=True), cplx(3, 4)),
    Case("prod", lambda m, z: z.prod(1), cplx(3, 4, lo=0.5, hi=1.5)),
    Case("cumsum", lambda m, z: z.cumsum(1), cplx(3, 4)),
    Case("cumprod", lambda m, z: z.cumprod(0), cplx(3, 4, lo=0.5, hi=1.5)),
    Case("matmul", lambda m, a, b: a @ b, cplx(3, 4), cplx(4, 2)),
    Case("matmul_vec", lambda m, a, b: a @ b, cplx(4), cplx(4, 3)),
    Case("matmul_batched", _matmul_batched, cplx(2, 3, 4), cplx(4, 2)),
    Case("matmul_real_complex", lambda m, a, b: m.mixed_matmul(a, b), real(3, 4), cplx(4, 2)),
    # layout and indexing
    Case("layout", lambda m, z: z.reshape(4, 3).T.flip(0)[1:, ::2] * 1j, cplx(3, 4)),
    Case("cat_stack", lambda m, z, w: m.cat([z, m.stack([w, w * 1j]).sum(0)], 1),
         cplx(3, 2), cplx(3, 4)),
    Case("index_select_gather",
         lambda m, z: z.index_select(1, m.index([3, 0, 3])) + z.gather(1, m.index([[1, 0, 2]] * 3)),
         cplx(3, 4)),
    Case("where", lambda m, z, w: m.where(m.const(np.array([True, False, True, False])), z, w),
         cplx(3, 4), cplx(3, 4)),
    # linear algebra of complex matrices (torch's formulas with conjugate transposes)
    Case("la_cholesky", lambda m, x: m.linalg.cholesky(herm(m, x)), cplx(3, 3)),
    Case("la_cholesky_upper_batched", lambda m, x: m.linalg.cholesky(herm(m, x), upper=True),
         cplx(2, 3, 3)),
    Case("la_solve", lambda m, a, b: m.linalg.solve(well(m, a), b), cplx(3, 3), cplx(3, 2)),
    Case("la_solve_vector_real_rhs", lambda m, a, b: m.linalg.solve(well(m, a), m.to(b, "complex128")),
         cplx(3, 3), real(3)),
    Case("la_solve_left_false_batched", lambda m, a, b: m.linalg.solve(well(m, a), b, left=False),
         cplx(2, 3, 3), cplx(2, 2, 3)),
    Case("la_solve_triangular", lambda m, a, b: m.linalg.solve_triangular(tri(m, a, False), b, upper=False),
         cplx(3, 3), cplx(3, 2)),
    Case("la_solve_triangular_unit_right", lambda m, a, b: m.linalg.solve_triangular(
        a, b, upper=True, left=False, unitriangular=True), cplx(3, 3, hi=0.8), cplx(2, 3)),
    Case("la_inv", lambda m, a: m.linalg.inv(well(m, a)), cplx(2, 3, 3)),
    Case("la_det", lambda m, a: m.linalg.det(a), cplx(3, 3)),
    Case("la_slogdet", _slogdet_both, cplx(2, 3, 3)),
    Case("la_eigh", lambda m, x: _eigh_phase_free(m, hsym(x)), cplx(4, 4)),
    Case("la_eigh_upper_batched", lambda m, x: _eigh_phase_free(m, hsym(x), "U"), cplx(2, 3, 3)),
    Case("la_eigvalsh", lambda m, x: m.linalg.eigvalsh(hsym(x)), cplx(2, 3, 3)),
    Case("la_svd_square", lambda m, x: _svd_phase_free(m, x), cplx(3, 3)),
    Case("la_svd_tall", lambda m, x: _svd_phase_free(m, x), cplx(4, 3)),
    Case("la_svd_wide_batched", lambda m, x: _svd_phase_free(m, x), cplx(2, 2, 4)),
    Case("la_svd_full_matrices", lambda m, x: _svd_phase_free(m, x, full=True), cplx(4, 2)),
    Case("la_svd_left_vectors_tall", _svd_left_vectors, cplx(4, 2)),
    Case("la_svd_left_vectors_wide", _svd_left_vectors, cplx(2, 4)),
    Case("la_svdvals", lambda m, x: m.linalg.svdvals(x), cplx(2, 3, 4)),
    Case("la_qr_q_tall", lambda m, x: m.linalg.qr(x).Q, cplx(4, 3)),
    Case("la_qr_r_square_batched", lambda m, x: m.linalg.qr(x).R, cplx(2, 3, 3)),
    Case("la_qr_wide", lambda m, x: (lambda q, r: q @ (r * r))(*m.linalg.qr(x)), cplx(2, 4)),
    Case("la_pinv_tall", lambda m, x: m.linalg.pinv(x), cplx(4, 3)),
    Case("la_pinv_wide_batched", lambda m, x: m.linalg.pinv(x), cplx(2, 2, 4)),
    Case("la_pinv_hermitian", lambda m, x: m.linalg.pinv(herm(m, x), hermitian=True), cplx(3, 3)),
    Case("la_lstsq", lambda m, a, b: m.linalg.lstsq(a, b).solution, cplx(5, 3), cplx(5, 2)),
    Case("la_matrix_norms", lambda m, x: m.linalg.matrix_norm(x) + m.linalg.matrix_norm(x, "nuc")
         + m.linalg.matrix_norm(x, 2) + m.linalg.matrix_norm(x, 1), cplx(2, 3, 4)),
    Case("la_vector_norms", lambda m, x: m.linalg.vector_norm(x, dim=-1) + m.linalg.vector_norm(x, 3, dim=-1)
         + m.linalg.vector_norm(x, float("inf"), dim=-1), cplx(3, 4)),
    Case("la_vecdot", lambda m, a, b: m.linalg.vecdot(a, b), cplx(2, 4), cplx(4)),
    Case("la_matrix_power", lambda m, x: m.linalg.matrix_power(x, 3) + m.linalg.matrix_power(well(m, x), -2),
         cplx(3, 3, hi=1.0)),
    # Fourier transforms: batched (leading dims) and unbatched, every norm
    Case("fft", lambda m, z: m.fft.fft(z), cplx(8)),
    Case("fft_batched_ortho", lambda m, z: m.fft.fft(z, norm="ortho"), cplx(3, 8)),
    Case("ifft_forward", lambda m, z: m.fft.ifft(z, dim=0, norm="forward"), cplx(5, 3)),
    Case("fft_pad", lambda m, z: m.fft.fft(z, n=11), cplx(2, 8)),
    Case("fft_trim", lambda m, z: m.fft.fft(z, n=5, dim=0), cplx(7, 3)),
    Case("fft_of_real", lambda m, x: m.fft.fft(x), real(3, 6)),
    Case("fft2", lambda m, z: m.fft.fft2(z), cplx(2, 4, 5)),
    Case("ifft2_s", lambda m, z: m.fft.ifft2(z, s=(3, 6)), cplx(4, 5)),
    Case("fftn", lambda m, z: m.fft.fftn(z, dim=(0, 2), norm="ortho"), cplx(3, 2, 4)),
    Case("ifftn", lambda m, z: m.fft.ifftn(z), cplx(3, 4)),
    Case("rfft_even", lambda m, x: m.fft.rfft(x), real(8)),
    Case("rfft_odd_batched", lambda m, x: m.fft.rfft(x, norm="forward"), real(3, 7)),
    Case("rfft_pad", lambda m, x: m.fft.rfft(x, n=10, dim=0, norm="ortho"), real(6, 2)),
    Case("rfft2", lambda m, x: m.fft.rfft2(x), real(2, 4, 6)),
    Case("rfftn_order", lambda m, x: m.fft.rfftn(x, dim=(1, 0)), real(4, 5)),
    Case("irfft", lambda m, z: m.fft.irfft(z), cplx(5)),
    Case("irfft_odd_batched", lambda m, z: m.fft.irfft(z, n=9, norm="ortho"), cplx(3, 5)),
    Case("irfft_trim", lambda m, z: m.fft.irfft(z, n=4, norm="forward"), cplx(2, 6)),
    Case("irfft2", lambda m, z: m.fft.irfft2(z), cplx(2, 3, 4)),
    Case("irfftn_s", lambda m, z: m.fft.irfftn(z, s=(4, 7)), cplx(3, 4)),
    Case("hfft", lambda m, z: m.fft.hfft(z), cplx(2, 5)),
    Case("hfft_odd", lambda m, z: m.fft.hfft(z, n=7, norm="ortho"), cplx(4)),
    Case("ihfft", lambda m, x: m.fft.ihfft(x), real(2, 6)),
    Case("ihfft_odd", lambda m, x: m.fft.ihfft(x, norm="forward"), real(7)),
    Case("fftshift", lambda m, z: m.fft.fftshift(m.fft.fft(z)) * 1j, cplx(2, 5)),
    Case("ifftshift", lambda m, z: m.fft.ifftshift(z, dim=1) * 1j, cplx(3, 6)),
    Case("spectral_chain",
         lambda m, x, k: m.fft.irfft(m.fft.rfft(x) * k, n=8).abs(), real(3, 8), cplx(5)),
]


def _draw(case):
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    arrays = [gen(rng) for _, gen in case.args]
    return arrays, rng


def _weights(out, rng):
    wr = rng.uniform(0.5, 1.5, out.shape) * rng.choice([-1.0, 1.0], out.shape)
    wi = rng.uniform(0.5, 1.5, out.shape) * rng.choice([-1.0, 1.0], out.shape)
    return wr, wi


def _loss(m, out, wr, wi):
    if out.dtype.is_complex:
        return (out.real * m.const(wr) + out.imag * m.const(wi)).sum()
    return (out * m.const(wr)).sum()


def _ember_inputs(case, arrays, device=None):
    return [ember.tensor(a, dtype=C128 if kind == "complex" else F64, device=device)
            for (kind, _), a in zip(case.args, arrays)]


def _numeric(case, arrays, wr, wi, eps=1e-6):
    """Central differences: dL/dx + i dL/dy per element of each complex leaf, dL/dx of real."""
    def loss(values):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return float(_loss(E, case.fn(E, *_ember_inputs(case, values)), wr, wi).item())
    grads = []
    for i, ((kind, _), a) in enumerate(zip(case.args, arrays)):
        g = np.zeros(a.shape, np.complex128 if kind == "complex" else np.float64)
        steps = (1.0, 1j) if kind == "complex" else (1.0,)
        for idx in np.ndindex(a.shape):
            for step in steps:
                vals = [x.copy() for x in arrays]
                vals[i][idx] = a[idx] + eps * step
                up = loss(vals)
                vals[i][idx] = a[idx] - eps * step
                down = loss(vals)
                g[idx] += (up - down) / (2 * eps) * step
        grads.append(g)
    return grads


def _ember_grads(case, arrays, wr, wi, device):
    leaves = [t.require_grad() for t in _ember_inputs(case, arrays, device)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = case.fn(E, *leaves)
        grads = _loss(E, out, wr, wi).backward()
    result = []
    for t in leaves:
        g = t.grad(grads)
        assert g is not None, f"{case.name}: a leaf got no gradient"
        assert g.shape == t.shape and g.dtype == t.dtype, (case.name, g.shape, g.dtype, t.dtype)
        assert not g.is_autodiff()
        result.append(g.numpy())
    return out, result


def _torch_grads(case, arrays, wr, wi):
    leaves = [torch.tensor(a, requires_grad=True) for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _loss(T, case.fn(T, *leaves), wr, wi).backward()
    return [t.grad.resolve_conj().numpy() for t in leaves]


def _prepare(case):
    arrays, rng = _draw(case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        probe = case.fn(E, *_ember_inputs(case, arrays))
    return arrays, _weights(probe, rng)


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_gradient_matches_finite_differences(case, device, unfused):
    arrays, (wr, wi) = _prepare(case)
    _, got = _ember_grads(case, arrays, wr, wi, device)
    for i, (g, want) in enumerate(zip(got, _numeric(case, arrays, wr, wi))):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-7,
                                   err_msg=f"{case.name}: input {i} vs central differences")


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed (pip install torch==2.13.0)")
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_gradient_matches_torch(case, device):
    arrays, (wr, wi) = _prepare(case)
    out, got = _ember_grads(case, arrays, wr, wi, device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_out = case.fn(T, *[torch.tensor(a) for a in arrays])
    np.testing.assert_allclose(out.numpy(), t_out.resolve_conj().numpy(), rtol=1e-10, atol=1e-12,
                               err_msg=f"{case.name}: forward vs torch")
    for i, (g, want) in enumerate(zip(got, _torch_grads(case, arrays, wr, wi))):
        np.testing.assert_allclose(g, want, rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name}: input {i} vs torch's leaf.grad")


# rows whose forward and backward are elementwise chains of complex values: fused (hot at their
# first force), their gradients are the unfused ones bit for bit; the finite-difference rows
# above run unfused
FUSION_ROWS = ("div", "exp", "tanh", "abs", "polar")


@pytest.mark.parametrize("name", FUSION_ROWS)
def test_gradient_fused_equals_unfused(name, device, hot_chains):
    case = next(c for c in CASES if c.name == name)
    arrays, (wr, wi) = _prepare(case)
    previous = ember.fusion.set_enabled(False)
    try:
        _, want = _ember_grads(case, arrays, wr, wi, device)
        ember.fusion.set_enabled(True)
        ember.fusion.stats(reset=True)
        _, got = _ember_grads(case, arrays, wr, wi, device)
        assert ember.fusion.stats()["fused_ops"] > 0, f"{name}: nothing fused"
    finally:
        ember.fusion.set_enabled(previous)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w, err_msg=f"{name}: fused gradient differs")


# --- the contract around complex leaves ---------------------------------------------------------
def test_complex_leaf_and_its_gradient_dtype(device):
    z = ember.tensor([1 + 2j, -1j], dtype=ember.complex64, device=device).require_grad()
    assert z.is_require_grad()
    grads = (z * z.conj()).real.sum().backward()   # |z|^2: gradient 2z
    g = z.grad(grads)
    assert g.dtype == ember.complex64
    np.testing.assert_allclose(g.numpy(), [2 + 4j, -2j], rtol=1e-6)


def test_complex_root_is_refused(device):
    z = ember.tensor([1 + 2j], device=device).require_grad()
    with pytest.raises(ember.AutodiffError, match="complex"):
        (z * 2).sum().backward()


def test_int_leaf_still_refused(device):
    with pytest.raises(TypeError, match="Float and Complex"):
        ember.tensor([1, 2], device=device).require_grad()


# --- ember.linalg of complex matrices: direct Hermitian leaves and phase-dependent losses -------
DIRECT = [
    ("cholesky", lambda m, a: m.linalg.cholesky(a)),
    ("cholesky_upper", lambda m, a: m.linalg.cholesky(a, upper=True)),
    ("eigh", lambda m, a: _eigh_phase_free(m, a)),
    ("eigvalsh_upper", lambda m, a: m.linalg.eigvalsh(a, UPLO="U")),
]


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed (pip install torch==2.13.0)")
@pytest.mark.parametrize("name,f", DIRECT, ids=[d[0] for d in DIRECT])
def test_direct_hermitian_leaves_match_torch(name, f, device):
    # the rules' own (Hermitian) gradient, not its projection through a symmetrising function
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 3)) + 1j * rng.standard_normal((2, 3, 3))
    a = x @ np.swapaxes(x.conj(), -1, -2) + 3 * np.eye(3)
    probe = f(E, ember.tensor(a, dtype=C128))
    wr, wi = _weights(probe, rng)
    leaf = ember.tensor(a, dtype=C128, device=device).require_grad()
    got = leaf.grad(_loss(E, f(E, leaf), wr, wi).backward()).numpy()
    ta = torch.tensor(a, requires_grad=True)
    _loss(T, f(T, ta), wr, wi).backward()
    np.testing.assert_allclose(got, ta.grad.resolve_conj().numpy(), rtol=1e-9, atol=1e-11)


def test_losses_that_depend_on_a_vectors_phase_are_refused(device):
    # v itself (not |v|^2) depends on the arbitrary phase LAPACK picked: torch raises too
    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))
    a = ember.tensor(x + x.conj().T, dtype=C128, device=device).require_grad()
    _, v = ember.linalg.eigh(a)
    with pytest.raises(RuntimeError, match="linalg.eigh: .*phase"):
        v.real.sum().backward()
    b = ember.tensor(x, dtype=C128, device=device).require_grad()
    u, _, _ = ember.linalg.svd(b)
    with pytest.raises(RuntimeError, match="linalg.svd: .*phase"):
        u.imag.sum().backward()
