"""Reductions, scans, var/std and softmax against numpy.

A table of reductions (Ember call, numpy reference, dtypes, domain) runs over shapes × dims
(None, ints, negative ints, tuples) × keepdim; then non-contiguous inputs, empty and 0-d
edge cases, NaN handling and sizes above the parallel threshold.

Result dtypes (docs/decisions.md): sum/prod/cumsum/cumprod of Int or Bool are int64, mean of
Int is float64, max/min keep the dtype, argmax/argmin are int64, any/all are Bool.
"""
import warnings
from dataclasses import dataclass

import numpy as np
import pytest

import ember
from checks import LAYOUTS, as_tensor, check
from ember.backends.cpu.elementwise import PARALLEL_MIN

FLOATS = ("float32", "float64")
INTS = ("int32", "int64")
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ("bool",)

# float tolerance for sums over at most a few dozen values in a different order than numpy
TOL = {"float32": (2e-6, 1e-5), "float64": (1e-12, 1e-12)}


def acc_dtype(dtype):
    """Accumulation dtype of sum/prod/cumsum/cumprod: int64 for Int and Bool."""
    return np.dtype(dtype) if np.dtype(dtype).kind == "f" else np.dtype(np.int64)


def values(rng, shape, dtype, lo=-3, hi=3):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.asarray(rng.random(shape) < 0.6)
    if dtype.kind == "f":
        return np.asarray(rng.uniform(lo, hi, shape)).astype(dtype)
    return np.asarray(rng.integers(max(lo, 0) if dtype.kind == "u" else lo, hi + 1, shape)).astype(dtype)


def d_generic(rng, shape, dtype):
    return values(rng, shape, dtype)


def d_prod(rng, shape, dtype):
    """Small factors: products of two dozen values stay far from overflow."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.asarray(rng.uniform(0.5, 1.5, shape)).astype(dtype)
    return values(rng, shape, dtype, -2, 2)


def d_ties(rng, shape, dtype):
    """Few distinct values: the first of several equal extremes must win."""
    return values(rng, shape, dtype, -1, 1)


def d_sparse(rng, shape, dtype):
    """Mostly zeros, so any/all see both outcomes on small dims."""
    dtype = np.dtype(dtype)
    nz = rng.random(shape) < 0.3
    if dtype.kind == "b":
        return np.asarray(nz)
    return np.asarray(np.where(nz, rng.integers(1, 4, shape), 0)).astype(dtype)


def d_dense(rng, shape, dtype):
    """Mostly non-zero."""
    dtype = np.dtype(dtype)
    nz = rng.random(shape) < 0.9
    if dtype.kind == "b":
        return np.asarray(nz)
    return np.asarray(np.where(nz, rng.integers(1, 4, shape), 0)).astype(dtype)


def _axis(a, dim):
    return None if dim is None or a.ndim == 0 else dim


def ref_sum(a, dim, keep):
    d = acc_dtype(a.dtype)
    if d.kind == "f":  # float64 reference, cast to the tensor's dtype
        return np.asarray(np.sum(a, axis=_axis(a, dim), keepdims=keep, dtype=np.float64)).astype(d)
    return np.asarray(np.sum(a, axis=_axis(a, dim), keepdims=keep, dtype=d))


def ref_prod(a, dim, keep):
    d = acc_dtype(a.dtype)
    r = np.prod(a, axis=_axis(a, dim), keepdims=keep, dtype=np.float64 if d.kind == "f" else d)
    return np.asarray(r).astype(d)


def ref_mean(a, dim, keep):
    out = np.dtype(a.dtype) if a.dtype.kind == "f" else np.dtype(np.float64)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # mean of an empty slice is NaN
        r = np.mean(a.astype(np.float64), axis=_axis(a, dim), keepdims=keep)
    return np.asarray(r).astype(out)


def _plain(f):
    def ref(a, dim, keep):
        return np.asarray(f(a, axis=_axis(a, dim), keepdims=keep))
    return ref


def _arg(f):
    def ref(a, dim, keep):
        if a.ndim == 0:
            return np.zeros((), np.int64)
        return np.asarray(f(a, axis=dim, keepdims=keep)).astype(np.int64)
    return ref


@dataclass(frozen=True)
class Red:
    name: str
    fn: object       # (tensor, dim, keepdim) -> tensor
    ref: object      # (array, dim, keepdim) -> array
    dtypes: tuple
    domain: object
    tuple_dims: bool = True  # arg-reductions take one int dim
    empty_ok: bool = True    # sum of nothing is 0; max of nothing raises

    def __repr__(self):
        return self.name


REDUCTIONS = [
    Red("sum", lambda t, d, k: t.sum(d, k), ref_sum, ALL, d_generic),
    Red("mean", lambda t, d, k: t.mean(d, k), ref_mean, NUMERIC, d_generic),
    Red("prod", lambda t, d, k: t.prod(d, k), ref_prod, ALL, d_prod),
    Red("max", lambda t, d, k: t.max(d, k), _plain(np.max), NUMERIC, d_ties, empty_ok=False),
    Red("min", lambda t, d, k: t.min(d, k), _plain(np.min), NUMERIC, d_ties, empty_ok=False),
    Red("argmax", lambda t, d, k: t.argmax(d, k), _arg(np.argmax), NUMERIC, d_ties,
        tuple_dims=False, empty_ok=False),
    Red("argmin", lambda t, d, k: t.argmin(d, k), _arg(np.argmin), NUMERIC, d_ties,
        tuple_dims=False, empty_ok=False),
    Red("any", lambda t, d, k: t.any(d, k), _plain(np.any), ALL, d_sparse),
    Red("all", lambda t, d, k: t.all(d, k), _plain(np.all), ALL, d_dense),
]
BY_NAME = {r.name: r for r in REDUCTIONS}

DIMS = {
    (): [None, 0, -1],
    (0,): [None, 0],
    (7,): [None, 0, -1],
    (3, 0): [None, 0, 1],
    (4, 5): [None, 0, 1, -1, (0, 1)],
    (2, 3, 4): [None, 0, 1, 2, -1, (0, 2), (-1, 0), (1, 2), (0, 1)],
}


def _is_empty_reduction(shape, dim):
    if 0 not in shape:
        return False
    if dim is None:
        return True
    dims = dim if isinstance(dim, tuple) else (dim,)
    return any(shape[d] == 0 for d in dims)


def _cases():
    for red in REDUCTIONS:
        for dtype in red.dtypes:
            for shape, dims in DIMS.items():
                for dim in dims:
                    if isinstance(dim, tuple) and not red.tuple_dims:
                        continue
                    if not red.empty_ok and _is_empty_reduction(shape, dim):
                        continue
                    if red.name.startswith("arg") and 0 in shape:
                        continue  # arg-reductions of empty tensors: see test_empty_*
                    for keep in (False, True):
                        sid = "x".join(map(str, shape)) or "0d"
                        yield pytest.param(red, dtype, shape, dim, keep,
                                           id=f"{red.name}-{dtype}-{sid}-dim{dim}-keep{int(keep)}")


def _compare(red, got, expected):
    dt = expected.dtype
    if dt.kind == "f":
        rtol, atol = TOL[dt.name]
        check(got, expected, rtol=rtol, atol=atol)
    else:
        check(got, expected)


@pytest.mark.parametrize("red, dtype, shape, dim, keep", list(_cases()))
def test_reduction(red, dtype, shape, dim, keep, rng):
    a = red.domain(rng, shape, dtype)
    before = a.copy()
    got = red.fn(as_tensor(a), dim, keep)
    _compare(red, got, red.ref(a, dim, keep))
    np.testing.assert_array_equal(a, before)


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "max", "min", "any", "all"])
def test_reduction_defaults_whole_tensor_0d(name, rng):
    """No ``dim`` reduces everything to a 0-d tensor."""
    red = BY_NAME[name]
    a = red.domain(rng, (3, 4), red.dtypes[0])
    got = getattr(as_tensor(a), name)()
    assert got.shape == ()
    _compare(red, got, red.ref(a, None, False))


@pytest.mark.parametrize("name", ["sum", "mean", "max", "any"])
def test_reduction_keyword_arguments(name, rng):
    red = BY_NAME[name]
    a = red.domain(rng, (3, 4), red.dtypes[0])
    got = getattr(as_tensor(a), name)(dim=1, keepdim=True)
    _compare(red, got, red.ref(a, 1, True))


# --- non-contiguous inputs ---------------------------------------------------------------
def _layout_cases():
    for name, dtypes in [("sum", ("float64", "int32")), ("max", ("float64", "int32")),
                         ("argmax", ("float64",)), ("argmin", ("int32",)), ("prod", ("float64",)),
                         ("mean", ("float32",)), ("any", ("bool",)), ("all", ("int64",))]:
        for dtype in dtypes:
            for lid, (base, _, _) in LAYOUTS.items():
                ndim = len(base)
                dims = [None, 0, -1] + ([(0, 2)] if ndim == 3 and name not in ("argmax", "argmin") else [])
                for dim in dims:
                    yield pytest.param(BY_NAME[name], dtype, lid, dim,
                                       id=f"{name}-{dtype}-{lid}-dim{dim}")


@pytest.mark.parametrize("red, dtype, layout, dim", list(_layout_cases()))
def test_reduction_non_contiguous(red, dtype, layout, dim, rng):
    base, tview, aview = LAYOUTS[layout]
    a = red.domain(rng, base, dtype)
    _compare(red, red.fn(tview(as_tensor(a)), dim, False), red.ref(aview(a), dim, False))


# --- empty and 0-d edge cases ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_sum_of_empty_is_zero(dtype):
    t = as_tensor(np.zeros((0,), dtype))
    check(t.sum(), np.zeros((), acc_dtype(dtype)))
    check(t.prod(), np.ones((), acc_dtype(dtype)))
    check(as_tensor(np.zeros((3, 0), dtype)).sum(1), np.zeros(3, acc_dtype(dtype)))
    check(as_tensor(np.zeros((3, 0), dtype)).sum(0), np.zeros(0, acc_dtype(dtype)))


def test_any_all_of_empty():
    t = as_tensor(np.zeros((0,), np.float32))
    check(t.any(), np.array(False))
    check(t.all(), np.array(True))
    check(as_tensor(np.zeros((2, 0), bool)).all(dim=1), np.array([True, True]))


def test_mean_of_empty_is_nan():
    check(as_tensor(np.zeros((0,), np.float64)).mean(), np.array(np.nan))


@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin"])
@pytest.mark.parametrize("shape, dim", [((0,), None), ((0,), 0), ((3, 0), 1), ((3, 0), None)],
                         ids=["empty-all", "empty-dim0", "empty2d-dim1", "empty2d-all"])
def test_extremum_of_empty_raises(name, shape, dim):
    t = as_tensor(np.zeros(shape, np.float32))
    with pytest.raises(ValueError, match=name):
        getattr(t, name)(dim)


def test_max_over_non_empty_dim_of_empty_tensor():
    """(3, 0).max(dim=0) reduces a dim of size 3: the result is simply empty (numpy)."""
    check(as_tensor(np.zeros((3, 0), np.float32)).max(0), np.zeros((0,), np.float32))


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "any", "all",
                                  "argmax", "argmin"])
def test_reduction_of_0d(name):
    a = np.array(2.5, np.float64)
    t = as_tensor(a)
    red = BY_NAME[name]
    for dim in (None, 0, -1):
        for keep in (False, True):
            got = red.fn(t, dim, keep)
            assert got.shape == ()
            _compare(red, got, red.ref(a, dim, keep))


# --- NaN -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_handling(dtype):
    a = np.array([[1.0, np.nan, 3.0], [np.nan, 5.0, 0.0], [2.0, 2.0, -1.0]], dtype)
    t = as_tensor(a)
    check(t.max(1), np.max(a, 1))
    check(t.min(0), np.min(a, 0))
    check(t.max(), np.max(a))
    check(t.sum(1), np.sum(a, 1))
    check(t.argmax(1), np.argmax(a, 1))  # the first NaN counts as the extreme (numpy)
    check(t.argmin(1), np.argmin(a, 1))
    check(t.argmax(), np.argmax(a))
    check(t.any(), np.array(True))  # NaN is non-zero
    check(as_tensor(np.array([np.nan, 0.0], dtype)).all(), np.array(False))


def test_argmax_first_of_ties():
    a = np.array([[3, 1, 3, 3], [0, 0, 0, 0], [1, 2, 2, 1]], np.int64)
    check(as_tensor(a).argmax(1), np.array([0, 0, 1]))
    check(as_tensor(a).argmin(1), np.array([1, 0, 0]))
    check(as_tensor(a).argmax(0), np.array([0, 2, 0, 0]))
    check(as_tensor(a).argmax(), np.array(0))


def test_sum_of_small_ints_does_not_overflow():
    a = np.full(1000, 100, np.int8)
    check(as_tensor(a).sum(), np.array(100000, np.int64))
    u = np.full((4, 300), 200, np.uint8)
    check(as_tensor(u).sum(1), np.full(4, 60000, np.uint64))    # unsigned sum to uint64 (numpy)
    check(as_tensor(u).cumsum(1), np.cumsum(u, 1))


def test_bool_sum_counts_true():
    a = np.array([[True, False, True], [True, True, True]])
    check(as_tensor(a).sum(), np.array(5, np.int64))
    check(as_tensor(a).sum(0), np.array([2, 1, 2], np.int64))
    check(as_tensor(a).mean(1), np.mean(a, 1))


# --- scans --------------------------------------------------------------------------------------
SCAN_SHAPES = {"0d": ((), [0, -1]), "empty": ((0,), [0]), "vec7": ((7,), [0, -1]),
               "empty2d": ((3, 0), [0, 1]), "mat": ((4, 5), [0, 1, -1]),
               "3d": ((2, 3, 4), [0, 1, 2, -2])}


def _scan_cases():
    for name in ("cumsum", "cumprod"):
        for dtype in NUMERIC:
            for sid, (shape, dims) in SCAN_SHAPES.items():
                for dim in dims:
                    yield pytest.param(name, dtype, shape, dim, id=f"{name}-{dtype}-{sid}-dim{dim}")
    # docs/decisions.md: "sum/prod/cumsum of Int or Bool give int64" (numpy counts the Trues)
    for sid in ("vec7", "mat"):
        shape, dims = SCAN_SHAPES[sid]
        yield pytest.param("cumsum", "bool", shape, dims[-1], id=f"cumsum-bool-{sid}-dim{dims[-1]}")


def ref_scan(name, a, dim):
    d = acc_dtype(a.dtype)
    if a.ndim == 0:
        return a.astype(d)
    f = np.cumsum if name == "cumsum" else np.cumprod
    if d.kind == "f":
        return f(a.astype(np.float64), axis=dim).astype(d)
    return f(a, axis=dim, dtype=d)


@pytest.mark.parametrize("name, dtype, shape, dim", list(_scan_cases()))
def test_scan(name, dtype, shape, dim, rng):
    a = (d_prod if name == "cumprod" else d_generic)(rng, shape, dtype)
    before = a.copy()
    got = getattr(as_tensor(a), name)(dim)
    expected = ref_scan(name, a, dim)
    if expected.dtype.kind == "f":
        check(got, expected, *TOL[expected.dtype.name])
    else:
        check(got, expected)
    np.testing.assert_array_equal(a, before)


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("layout", ["transposed", "reversed", "step_neg_2d", "expanded",
                                    "permuted3d"])
def test_scan_non_contiguous(name, layout, rng):
    base, tview, aview = LAYOUTS[layout]
    a = d_prod(rng, base, "float64")
    for dim in range(len(aview(a).shape)):
        check(getattr(tview(as_tensor(a)), name)(dim), ref_scan(name, aview(a), dim))


def test_scan_nan_propagates():
    a = np.array([1.0, np.nan, 2.0])
    check(as_tensor(a).cumsum(0), np.cumsum(a))
    check(as_tensor(a).cumprod(0), np.cumprod(a))


# --- var / std ----------------------------------------------------------------------------------
VAR_CASES = [((7,), None), ((4, 5), None), ((4, 5), 0), ((4, 5), -1), ((2, 3, 4), (0, 2)),
             ((2, 3, 4), 1)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("shape, dim", VAR_CASES, ids=[f"{s}-dim{d}" for s, d in VAR_CASES])
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("name", ["var", "std"])
def test_var_std(name, shape, dim, correction, keep, dtype, rng):
    a = rng.uniform(-3, 3, shape).astype(dtype)
    got = getattr(as_tensor(a), name)(dim, keepdim=keep, correction=correction)
    ref = getattr(np, name)(a.astype(np.float64), axis=dim, ddof=correction, keepdims=keep)
    check(got, np.asarray(ref).astype(dtype), rtol=1e-5 if dtype == "float32" else 1e-12,
          atol=1e-6 if dtype == "float32" else 0)


def test_var_default_correction_is_1(rng):
    a = rng.standard_normal((6, 4))
    check(as_tensor(a).var(), np.var(a, ddof=1))
    check(as_tensor(a).std(dim=0), np.std(a, axis=0, ddof=1))


def test_var_non_contiguous(rng):
    a = rng.standard_normal((5, 6))
    check(as_tensor(a).T[::-1].var(1, correction=0), np.var(a.T[::-1], axis=1))


# --- softmax / log_softmax --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, dim", [((7,), 0), ((4, 5), 1), ((4, 5), 0), ((4, 5), -1),
                                        ((2, 3, 4), 1), ((2, 3, 4), -1)],
                         ids=lambda v: str(v))
@pytest.mark.parametrize("how", ["method", "function"])
def test_softmax_and_log_softmax(how, shape, dim, dtype, rng):
    a = rng.uniform(-5, 5, shape).astype(dtype)
    x = a.astype(np.float64)
    shifted = x - x.max(axis=dim, keepdims=True)
    lse = np.log(np.exp(shifted).sum(axis=dim, keepdims=True))
    want_log = (shifted - lse).astype(dtype)
    want = np.exp(shifted - lse).astype(dtype)
    t = as_tensor(a)
    if how == "method":
        sm, lsm = t.softmax(dim), t.log_softmax(dim)
    else:
        sm, lsm = ember.softmax(t, dim), ember.log_softmax(t, dim)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-15)
    check(sm, want, **tol)
    check(lsm, want_log, **tol)
    check(sm.sum(dim), np.ones(np.delete(np.array(shape), dim % len(shape)), dtype), **tol)


def test_softmax_is_stable_for_large_inputs():
    a = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -1000.0]])
    e = np.exp(a - a.max(1, keepdims=True))
    check(as_tensor(a).softmax(1), e / e.sum(1, keepdims=True))
    check(as_tensor(a).log_softmax(1), np.log(e / e.sum(1, keepdims=True)))


def test_softmax_non_contiguous(rng):
    a = rng.standard_normal((5, 6))
    v = a.T[::2]
    e = np.exp(v - v.max(1, keepdims=True))
    check(as_tensor(a).T[::2].softmax(1), e / e.sum(1, keepdims=True))


# --- above the parallel threshold ------------------------------------------------------------
N = PARALLEL_MIN * 2 + 3


@pytest.mark.parametrize("name, dtype", [("sum", "float32"), ("max", "float64"), ("argmax", "float32"),
                                         ("all", "bool")],
                         ids=lambda v: v)
def test_reduction_large_1d(name, dtype, rng):
    red = BY_NAME[name]
    a = red.domain(rng, (N,), dtype)
    if name == "all":
        a = np.ones(N, bool)
        a[N - 5] = False
    got = red.fn(as_tensor(a), None, False)
    expected = red.ref(a, None, False)
    if expected.dtype.kind == "f":
        check(got, expected, rtol=1e-4 if dtype == "float32" else 1e-10, atol=1e-3)
    else:
        check(got, expected)


@pytest.mark.parametrize("name, dim", [("sum", 0), ("sum", 1), ("max", 0), ("argmin", 1),
                                       ("mean", None), ("sum", (0, 2)), ("prod", 1)],
                         ids=lambda v: str(v))
def test_reduction_large_nd(name, dim, rng):
    red = BY_NAME[name]
    shape = (64, 50, 64) if isinstance(dim, tuple) else (600, 300)
    a = red.domain(rng, shape, "float64")
    check(red.fn(as_tensor(a), dim, False), red.ref(a, dim, False), rtol=1e-9, atol=1e-9)


def test_reduction_large_transposed(rng):
    a = rng.standard_normal((600, 300))
    check(as_tensor(a).T.sum(1), a.T.sum(1), rtol=1e-9, atol=1e-9)
    check(as_tensor(a).T.max(0), a.T.max(0))


def test_scan_large(rng):
    a = rng.uniform(0.9999, 1.0001, (N,))
    check(as_tensor(a).cumsum(0), ref_scan("cumsum", a, 0), rtol=1e-9)
    b = rng.integers(-3, 4, (300, 600)).astype(np.int32)
    check(as_tensor(b).cumsum(0), np.cumsum(b, 0, dtype=np.int64))
    check(as_tensor(b).cumsum(1), np.cumsum(b, 1, dtype=np.int64))
