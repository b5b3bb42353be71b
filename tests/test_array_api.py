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
    w = ember.tensor(np.linspace(-1, 1, 16), dtype=ember.float64, device=dev).require_grad()
    previous = fusion.set_enabled(True)
    try:
        y = xp.multiply(xp.exp(w), xp.sin(w))
        assert isinstance(y._buf, fusion.Deferred)          # deferred like the methods
        loss = xp.sum(xp.square(y))
    finally:
        fusion.set_enabled(previous)
    g = w.grad(loss.backward()).numpy()
    v = np.linspace(-1, 1, 16)
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
