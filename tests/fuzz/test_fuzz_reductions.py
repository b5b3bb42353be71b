"""Fuzz: reductions and scans against numpy.

sum, prod, mean, var, std, max, min, any, all, argmax, argmin over no dim, one dim or a tuple
of dims (negative ones too), with and without ``keepdim``, over 0-d, empty and broadcast
inputs in random layouts with special values; cumsum and cumprod along every dim.  Sums of
floats are compared within their rounding bound (Ember's order of additions is not numpy's
pairwise one); everything else exactly, NaN and signed infinities included.
"""
import numpy as np
import pytest
from hypothesis import strategies as st

from .settings import fuzz
from .strategies import (ALL, NUMERIC, assert_matches, assert_raises_clearly, kind, moderate,
                         numpy_call, operands, shapes)

EPS = {"float32": float(np.finfo(np.float32).eps), "float64": float(np.finfo(np.float64).eps)}


@st.composite
def dims(draw, ndim, single=False):
    """None, an int or (unless ``single``) a tuple of distinct dims, negative ones included."""
    if ndim == 0:
        return draw(st.sampled_from([None, 0, -1] if not single else [None, 0]))
    one = st.integers(-ndim, ndim - 1)
    if single:
        return draw(st.one_of(st.none(), one))
    many = st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim).map(
        lambda ds: tuple(d - ndim if i % 2 else d for i, d in enumerate(ds)))
    return draw(st.one_of(st.none(), one, many))


def _accumulator(dtype):
    """numpy's accumulator of a sum, product or scan of a non-float ``dtype``: int64 for signed
    ints and bools, uint64 for unsigned ints (docs/decisions.md, "The array API namespace")."""
    return np.uint64 if np.dtype(dtype).kind == "u" else np.int64


def _axis(dim, ndim):
    if ndim == 0:
        return None
    return dim


def _rounding_bound(a, axis, keepdims, dtype, power=1):
    """An absolute bound on the rounding error of a sum over ``axis``: n * eps * sum|x|**power."""
    finite = np.where(np.isfinite(a), np.abs(a.astype(np.float64)) ** power, 0.0)
    n = max(1, finite.size // max(1, np.sum(np.ones_like(finite), axis=axis, keepdims=keepdims).size))
    return 4 * n * EPS[dtype] * np.sum(finite, axis=axis, keepdims=keepdims) + 1e-300


SUMS = ("sum", "mean", "var", "std", "prod")


@pytest.mark.parametrize("name", ["sum", "prod", "mean", "var", "std", "max", "min", "any", "all"])
@fuzz("reductions", 25, data=st.data())
def test_reductions_match_numpy(name, data):
    dtypes = ("float32", "float64") if name in ("var", "std") else ALL
    dtype = data.draw(st.sampled_from(dtypes), "dtype")
    shape = data.draw(shapes(), "shape")
    values = moderate(dtype, 1.5 if name == "prod" else 100.0) if name in SUMS else None
    a, t = data.draw(operands(dtype, shape, values=values))
    dim = data.draw(dims(len(shape)), "dim")
    keepdim = data.draw(st.booleans(), "keepdim")
    correction = data.draw(st.sampled_from([0, 1, 2]), "correction") if name in ("var", "std") else None
    axis = _axis(dim, len(shape))
    if name in ("max", "min") and kind(dtype) == "bool":
        assert_raises_clearly(lambda: getattr(t, name)(dim, keepdim), name)
        return
    ref = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "max": np.max, "min": np.min,
           "any": np.any, "all": np.all, "var": np.var, "std": np.std}[name]
    kw = {"axis": axis, "keepdims": keepdim}
    if name in ("sum", "prod") and kind(dtype) != "float":
        kw["dtype"] = _accumulator(dtype)
    if correction is not None:
        kw["ddof"] = correction
    want, err = numpy_call(lambda: ref(a, **kw))
    if len(shape) == 0 and keepdim:
        want = None if want is None else np.asarray(want)
    if err is not None:
        assert_raises_clearly(lambda: getattr(t, name)(dim, keepdim), name)
        return
    got = (getattr(t, name)(dim, keepdim) if correction is None
           else getattr(t, name)(dim, keepdim, correction))
    want = np.asarray(want)
    tol = None
    if want.dtype.kind == "f":
        wd = want.dtype.name
        if name in ("sum", "mean"):
            tol = (4 * EPS[wd], _rounding_bound(a, axis, keepdim, wd) / (1 if name == "sum" else max(1, a.size // max(1, want.size))))
        elif name == "var":
            tol = (64 * EPS[wd] * max(1, a.size), _rounding_bound(a, axis, keepdim, wd, 2))
        elif name == "std":
            tol = (64 * EPS[wd] * max(1, a.size), np.sqrt(_rounding_bound(a, axis, keepdim, wd, 2)))
        elif name == "prod":
            tol = (8 * EPS[wd] * max(1, a.size), float(np.finfo(want.dtype).tiny) * 4)
    assert_matches(got, want, tol, zero_sign=name not in ("max", "min", "sum", "mean", "var", "std"),
                   what=f"{name}({dim!r}, keepdim={keepdim}) {dtype} {shape}")


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@fuzz("reductions", 30, data=st.data())
def test_arg_reductions_match_numpy(name, data):
    dtype = data.draw(st.sampled_from(NUMERIC), "dtype")
    shape = data.draw(shapes(), "shape")
    a, t = data.draw(operands(dtype, shape))
    dim = data.draw(dims(len(shape), single=True), "dim")
    keepdim = data.draw(st.booleans(), "keepdim")
    want, err = numpy_call(lambda: getattr(np, name)(a, axis=_axis(dim, len(shape)), keepdims=keepdim))
    if err is not None:
        assert_raises_clearly(lambda: getattr(t, name)(dim, keepdim), name)
        return
    assert_matches(getattr(t, name)(dim, keepdim), np.asarray(want, np.int64),
                   what=f"{name}({dim!r}, keepdim={keepdim}) {dtype} {shape}")


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@fuzz("scans", 30, data=st.data())
def test_scans_match_numpy(name, data):
    dtype = data.draw(st.sampled_from(ALL), "dtype")
    shape = data.draw(shapes(min_dims=1), "shape")
    a, t = data.draw(operands(dtype, shape, values=moderate(dtype, 1.5 if name == "cumprod" else 100.0)))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1), "dim")
    kw = {"axis": dim}
    if kind(dtype) != "float":
        kw["dtype"] = _accumulator(dtype)
    want, err = numpy_call(lambda: getattr(np, name)(a, **kw))
    assert err is None
    tol = None
    if want.dtype.kind == "f":
        wd = want.dtype.name
        if name == "cumsum":
            finite = np.where(np.isfinite(a), np.abs(a.astype(np.float64)), 0.0)
            tol = (4 * EPS[wd], 4 * shape[dim] * EPS[wd] * np.cumsum(finite, axis=dim) + 1e-300)
        else:
            tol = (8 * EPS[wd] * max(1, shape[dim]), float(np.finfo(want.dtype).tiny) * 4)
    assert_matches(getattr(t, name)(dim), want, tol, zero_sign=name == "cumprod",
                   what=f"{name}({dim}) {dtype} {shape}")
