"""``ember.array_api`` beyond what the consortium's suite checks (that suite runs under
``make test-array-api``; a 4-example pass of it under ``make test``): the entry point, the
inspection and dtype functions, the promotion table of every dtype pair, that the namespace's
functions reach autodiff and fusion, and numpy arrays as operands."""
import numpy as np
import pytest

import ember
import ember.array_api as xp
from checks import check
from ember import fusion

NUMERIC = [xp.int8, xp.int16, xp.int32, xp.int64, xp.uint8, xp.uint16, xp.uint32, xp.uint64,
           xp.float32, xp.float64, xp.complex64, xp.complex128]


@pytest.mark.parametrize("version", [None, "2021.12", "2022.12", "2023.12", "2024.12"])
def test_array_namespace(version):
    t = ember.tensor([1.0])
    assert t.__array_namespace__(api_version=version) is xp
    assert xp.__array_api_version__ == "2024.12"


@pytest.mark.parametrize("version", ["2020.10", "2025.12", "latest", 2024.12])
def test_array_namespace_refuses_other_versions(version):
    with pytest.raises(ValueError, match="array API version"):
        ember.tensor([1.0]).__array_namespace__(api_version=version)


def test_inspection():
    info = xp.__array_namespace_info__()
    assert info.capabilities()["boolean indexing"] and info.capabilities()["data-dependent shapes"]
    assert info.default_device() in info.devices()
    assert info.default_dtypes() == {"real floating": xp.float32, "complex floating": xp.complex64,
                                     "integral": xp.int64, "indexing": xp.int64}
    assert list(info.dtypes(kind="unsigned integer")) == ["uint8", "uint16", "uint32", "uint64"]
    assert set(info.dtypes(kind=("bool", "real floating"))) == {"bool", "float32", "float64"}
    assert len(info.dtypes()) == 13
    assert list(info.dtypes(kind="complex floating")) == ["complex64", "complex128"]
    with pytest.raises(ValueError):
        info.dtypes(kind="text")


def test_dtype_functions():
    assert xp.isdtype(xp.uint16, "unsigned integer") and xp.isdtype(xp.int8, ("bool", "integral"))
    assert not xp.isdtype(xp.float32, "integral") and xp.isdtype(xp.float64, xp.float64)
    assert xp.isdtype(xp.complex64, "complex floating") and xp.isdtype(xp.complex128, "numeric")
    assert not xp.isdtype(xp.complex64, "real floating")
    assert xp.result_type(xp.float32, 1j) is xp.complex64
    assert xp.finfo(xp.complex128).dtype is xp.float64
    assert xp.result_type(xp.int8, xp.uint8) is xp.int16
    assert xp.result_type(xp.asarray([1], dtype=xp.int8), 1000) is xp.int8   # a weak scalar
    assert xp.result_type(xp.float32, 1.5, True) is xp.float32
    assert xp.can_cast(xp.uint8, xp.int16) and not xp.can_cast(xp.int16, xp.uint8)
    assert not xp.can_cast(xp.bool, xp.int8) and xp.can_cast(xp.int32, xp.float64)
    assert xp.finfo(xp.float32).eps == float(np.finfo(np.float32).eps)
    assert xp.iinfo(xp.uint64).max == 2 ** 64 - 1 and xp.iinfo(xp.asarray(1)).bits == 64
    with pytest.raises(ValueError):
        xp.finfo(xp.int8)


@pytest.mark.parametrize("a", NUMERIC + [xp.bool], ids=lambda d: d.name)
def test_promotion_table_is_numpys(a):
    """Every pair of dtypes promotes as numpy's result_type (the standard's table where it
    defines one; uint64 with a signed int gives float64, numpy's answer)."""
    for b in NUMERIC + [xp.bool]:
        if (a is xp.bool) != (b is xp.bool):
            continue   # bool with numbers: not in the standard's table
        assert xp.result_type(a, b).np == np.result_type(a.np, b.np), (a, b)


def test_namespace_functions_reach_autodiff_and_fusion():
    dev = ember.Device.cpu().autodiff()
    w = ember.tensor(np.linspace(-1, 1, 128), dtype=ember.float64, device=dev).require_grad()
    previous = fusion.set_enabled(True)
    try:
        y = xp.multiply(xp.exp(w), xp.sin(w))
        assert isinstance(y._buf, fusion.Deferred)          # deferred like the methods
        loss = xp.sum(xp.square(y))
    finally:
        fusion.set_enabled(previous)
    g = w.grad(loss.backward()).numpy()
    v = np.linspace(-1, 1, 128)
    want = 2 * np.exp(v) * np.sin(v) * (np.exp(v) * np.sin(v) + np.exp(v) * np.cos(v))
    np.testing.assert_allclose(g, want, rtol=1e-12)


def test_spellings_the_standard_changes():
    x = xp.asarray([[1.0, 2.0, 4.0], [3.0, 5.0, 7.0]])
    check(xp.var(x, axis=1), np.var(x.numpy(), axis=1))                # correction=0
    check(x.var(1), np.var(x.numpy(), axis=1, ddof=1))                  # Ember: correction=1
    check(xp.repeat(x, 2, axis=1), np.repeat(x.numpy(), 2, axis=1))     # elements, not tile
    check(xp.tile(x, (2,)), np.tile(x.numpy(), (2,)))
    check(xp.concat([x, x], axis=None), np.concatenate([x.numpy()] * 2, axis=None))
    with pytest.raises(ValueError, match="size 3"):
        xp.squeeze(x, axis=1)
    with pytest.raises(ValueError, match="0-d"):
        xp.nonzero(xp.asarray(1))
    check(xp.zeros((2,)), np.zeros(2, np.float32))                      # default float
    check(xp.eye(3, k=1, dtype=xp.int8), np.eye(3, k=1, dtype=np.int8))
    check(xp.linspace(0, 1, 4, endpoint=False), np.linspace(0, 1, 4, endpoint=False, dtype=np.float32))
    check(xp.clip(xp.asarray([-5, 5, 300], dtype=xp.int16), min=-1000, max=2.5),
          np.array([-5, 2, 2], np.int16))


def test_asarray_copy_semantics():
    a = np.arange(3.0)
    shared = xp.asarray(a, copy=False)     # zero-copy from numpy
    assert np.shares_memory(shared.numpy(), a)
    with pytest.raises(ValueError):
        xp.asarray([1, 2], copy=False)
    with pytest.raises(ValueError):
        xp.asarray(shared, dtype=xp.float32, copy=False)
    with pytest.raises(OverflowError):
        xp.asarray(2 ** 70)
    check(xp.asarray([xp.asarray(1.0), 2.0]), np.array([1.0, 2.0], np.float32))


@pytest.mark.parametrize("expr, ref", [
    (lambda t, a: t + a, None), (lambda t, a: a + t, None), (lambda t, a: a * t - t, None),
    (lambda t, a: t < a, None), (lambda t, a: a == t, None), (lambda t, a: a @ t, None),
    (lambda t, a: t @ a, None), (lambda t, a: np.float64(2.0) * t, None),
    (lambda t, a: ember.maximum(a, t), lambda a: np.maximum(a, a)),
    (lambda t, a: ember.where(t > 0, a, t), lambda a: np.where(a > 0, a, a)),
], ids=["t+a", "a+t", "a*t-t", "t<a", "a==t", "a@t", "t@a", "np_scalar", "maximum", "where"])
def test_numpy_arrays_are_operands(expr, ref):
    """``tensor op ndarray`` and ``ndarray op tensor`` give tensors (numpy defers to the
    tensor's operators: ``__array_priority__``), as with PyTorch and JAX."""
    a = np.array([[1.0, -2.0], [3.0, 0.5]])
    t = ember.tensor(a)
    got = expr(t, a)
    assert isinstance(got, ember.Tensor)
    check(got, ref(a) if ref else expr(a, a))


def test_core_creation_dtype_none_is_the_default_float():
    """``dtype=None`` means float32 in Ember's own creation functions too (it gave the fill
    value's int64 in zeros/ones/empty and numpy's float64 in eye/linspace)."""
    for t in (ember.zeros(2, dtype=None), ember.ones((2, 2), dtype=None),
              ember.empty(3, dtype=None), ember.eye(2, dtype=None),
              ember.linspace(0, 1, 3, dtype=None)):
        assert t.dtype is ember.float32


# --- the linalg and fft extensions (xp.linalg over ember.linalg, xp.fft over ember.fft) -----
_A = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
_STACK = np.stack([_A, _A + np.eye(3)])
_B = np.arange(6.0).reshape(3, 2) - 2.5
_V = np.array([1.0, -2.0, 0.5])
_SIGNAL = np.array([1.0, 2.0, 0.0, -1.0, 0.5, 3.0])


@pytest.mark.parametrize("fn, ref", [
    (lambda x: xp.linalg.cholesky(x(_STACK)), lambda: np.linalg.cholesky(_STACK)),
    (lambda x: xp.linalg.cholesky(x(_A), upper=True), lambda: np.linalg.cholesky(_A).T),
    (lambda x: xp.linalg.det(x(_STACK)), lambda: np.linalg.det(_STACK)),
    (lambda x: xp.linalg.inv(x(_A)), lambda: np.linalg.inv(_A)),
    (lambda x: xp.linalg.eigvalsh(x(_STACK)), lambda: np.linalg.eigvalsh(_STACK)),
    (lambda x: xp.linalg.eigh(x(_A)).eigenvalues, lambda: np.linalg.eigh(_A).eigenvalues),
    (lambda x: xp.linalg.svdvals(x(_B)), lambda: np.linalg.svd(_B, compute_uv=False)),
    (lambda x: xp.linalg.slogdet(x(_STACK)).logabsdet, lambda: np.linalg.slogdet(_STACK)[1]),
    (lambda x: xp.linalg.matrix_norm(x(_B), ord="nuc"), lambda: np.linalg.norm(_B, "nuc")),
    (lambda x: xp.linalg.matrix_norm(x(_STACK), keepdims=True, ord=1),
     lambda: np.linalg.norm(_STACK, 1, axis=(-2, -1), keepdims=True)),
    (lambda x: xp.linalg.vector_norm(x(_B), axis=0, ord=3),
     lambda: np.linalg.norm(_B, 3, axis=0)),
    (lambda x: xp.linalg.matrix_power(x(_A), -2), lambda: np.linalg.matrix_power(_A, -2)),
    (lambda x: xp.linalg.vector_norm(x(np.array(-2.0)), keepdims=True), lambda: np.array(2.0)),
    (lambda x: xp.linalg.pinv(x(_B)), lambda: np.linalg.pinv(_B)),
    (lambda x: xp.linalg.outer(x(_V), x(_V[:2])), lambda: np.outer(_V, _V[:2])),
    (lambda x: xp.linalg.cross(x(_STACK), x(_V)), lambda: np.cross(_STACK, _V)),
    (lambda x: xp.linalg.diagonal(x(_B), offset=-1), lambda: np.diagonal(_B, -1)),
    (lambda x: xp.linalg.trace(x(_STACK), offset=1), lambda: np.trace(_STACK, 1, -2, -1)),
    (lambda x: xp.linalg.vecdot(x(_B), x(_B), axis=0), lambda: np.sum(_B * _B, 0)),
    (lambda x: xp.linalg.tensordot(x(_A), x(_B), axes=1), lambda: np.tensordot(_A, _B, 1)),
    # x2 of shape x1.shape[:-1] is a stack of matrices here (torch would read vectors)
    (lambda x: xp.linalg.solve(x(_STACK), x(_STACK[0])),
     lambda: np.linalg.solve(_STACK, np.broadcast_to(_STACK[0], _STACK.shape))),
    (lambda x: xp.linalg.solve(x(_STACK), x(_V)), lambda: np.linalg.solve(_STACK, _V[None, :, None])[..., 0]),
], ids=["cholesky", "cholesky_upper", "det", "inv", "eigvalsh", "eigh", "svdvals", "slogdet",
        "norm_nuc", "norm_1_keepdims", "vector_norm_3", "matrix_power", "vector_norm_0d_keepdims", "pinv", "outer", "cross",
        "diagonal", "trace", "vecdot", "tensordot", "solve_matrices", "solve_vector"])
def test_linalg_extension(fn, ref):
    check(fn(lambda a: xp.asarray(a, dtype=xp.float64)), ref(), rtol=1e-10)


def test_linalg_extension_factorisations_and_tolerances():
    x = xp.asarray(_B, dtype=xp.float64)
    U, S, Vh = xp.linalg.svd(x, full_matrices=False)
    check(U @ (S[:, None] * Vh), _B, rtol=1e-12)
    Q, R = xp.linalg.qr(x)
    check(Q @ R, _B, rtol=1e-12)
    assert type(xp.linalg.qr(x)).__name__ == "QRResult" and xp.linalg.slogdet(x[:2]).sign.shape == ()
    low_rank = np.outer(_V, _V) + 1e-9 * np.eye(3)
    assert int(xp.linalg.matrix_rank(xp.asarray(low_rank, dtype=xp.float32))) == 1   # eps * 3
    assert int(xp.linalg.matrix_rank(xp.asarray(low_rank, dtype=xp.float64))) == 3
    # one rtol per matrix of the stack
    stack = xp.asarray(np.stack([np.diag([1.0, 0.1]), np.diag([1.0, 0.1])]), dtype=xp.float64)
    check(xp.linalg.matrix_rank(stack, rtol=xp.asarray([0.05, 0.5], dtype=xp.float64)),
          np.array([2, 1]))
    check(xp.linalg.pinv(stack, rtol=xp.asarray([0.05, 0.5], dtype=xp.float64)),
          np.stack([np.diag([1.0, 10.0]), np.diag([1.0, 0.0])]), rtol=1e-12)
    assert xp.linalg.trace(xp.asarray([[1, 2], [3, 4]], dtype=xp.int8)).dtype is xp.int64
    with pytest.raises(ValueError, match="linalg.cross"):
        xp.linalg.cross(xp.asarray(_B), xp.asarray(_B), axis=-1)
    with pytest.raises(TypeError, match="linalg.cholesky"):
        xp.linalg.cholesky(_A)


@pytest.mark.parametrize("fn, ref", [
    (lambda x: xp.fft.fft(x(_SIGNAL), n=8, norm="ortho"), lambda: np.fft.fft(_SIGNAL, 8, norm="ortho")),
    (lambda x: xp.fft.ifft(x(_SIGNAL).astype(xp.complex128)), lambda: np.fft.ifft(_SIGNAL)),
    (lambda x: xp.fft.fftn(x(_B), s=(4, 2), axes=(0, 1)), lambda: np.fft.fftn(_B, (4, 2), (0, 1))),
    (lambda x: xp.fft.ifftn(x(_B), norm="forward"), lambda: np.fft.ifftn(_B, norm="forward")),
    (lambda x: xp.fft.rfft(x(_B), axis=0), lambda: np.fft.rfft(_B, axis=0)),
    (lambda x: xp.fft.irfft(xp.fft.rfft(x(_SIGNAL)), n=6), lambda: _SIGNAL),
    (lambda x: xp.fft.rfftn(x(_B)), lambda: np.fft.rfftn(_B)),
    (lambda x: xp.fft.irfftn(x(_B), s=(3, 4), axes=(0, 1)), lambda: np.fft.irfftn(_B, (3, 4), (0, 1))),
    (lambda x: xp.fft.hfft(x(_SIGNAL)), lambda: np.fft.hfft(_SIGNAL)),
    (lambda x: xp.fft.ihfft(x(_SIGNAL)), lambda: np.fft.ihfft(_SIGNAL)),
    (lambda x: xp.fft.fftshift(x(_B), axes=0), lambda: np.fft.fftshift(_B, 0)),
    (lambda x: xp.fft.ifftshift(x(_B)), lambda: np.fft.ifftshift(_B)),
    (lambda x: xp.fft.fftfreq(5, d=0.5, dtype=xp.float64), lambda: np.fft.fftfreq(5, 0.5)),
    (lambda x: xp.fft.rfftfreq(6, dtype=xp.float64), lambda: np.fft.rfftfreq(6)),
], ids=["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
        "fftshift", "ifftshift", "fftfreq", "rfftfreq"])
def test_fft_extension(fn, ref):
    check(fn(lambda a: xp.asarray(a, dtype=xp.float64)), ref(), rtol=1e-12, atol=1e-15)


def test_fft_extension_dtypes():
    assert xp.fft.rfft(xp.asarray(_SIGNAL, dtype=xp.float32)).dtype is xp.complex64
    assert xp.fft.irfft(xp.asarray(_SIGNAL, dtype=xp.complex128)).dtype is xp.float64
    assert xp.fft.fftfreq(4).dtype is xp.float32


def test_complex_in_the_namespace():
    z = xp.asarray([complex(-0.0, -0.0), 3 + 4j, complex(0.0, -0.0)])
    assert z.dtype is xp.complex64 and xp.linspace(0, 1j, 3).dtype is xp.complex64
    sign = xp.sign(z).numpy()
    assert not np.signbit(sign.real).any() and not np.signbit(sign.imag).any()   # +0 + 0j
    check(xp.sum(z), np.sum(z.numpy()))
    check(xp.mean(z), np.mean(z.numpy()), rtol=1e-6)
    check(xp.linalg.vecdot(z, z), np.vdot(z.numpy(), z.numpy()).astype(np.complex64))
    check(xp.isnan(xp.asarray([complex(np.nan, 0), 1j])), np.array([True, False]))
    check(xp.real(z), z.numpy().real)
    check(xp.imag(z), z.numpy().imag)
    check(xp.conj(z), np.conj(z.numpy()))
