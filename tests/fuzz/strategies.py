"""Hypothesis strategies of the fuzz tier: dtypes, shapes, layouts and special values, and
the comparison of an Ember result with numpy's.

An operand is drawn as a pair (numpy array, Ember tensor) holding the same values in the same
layout: a base array whose values mix ordinary numbers with the special ones (+-0, +-inf,
NaN, subnormals, the largest finite values, integer extremes), then views of it —
transposed, stepped, flipped, expanded — made by Ember's own view ops or handed over as a
numpy view (``from_numpy`` of a strided array), so both the view ops and the kernels'
stride handling are exercised.
"""
import math
import warnings

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember

FLOATS = ("float32", "float64")
INTS = ("int8", "int16", "int32", "int64", "uint8")
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ("bool",)


def edtype(name):
    return ember.bool_ if name == "bool" else getattr(ember, name)


def kind(name):
    k = np.dtype(name).kind
    return "float" if k == "f" else "bool" if k == "b" else "int"


# --- values ------------------------------------------------------------------------------
def float_specials(dtype):
    f = np.finfo(dtype)
    return [0.0, -0.0, math.inf, -math.inf, math.nan, float(f.smallest_subnormal),
            -float(f.smallest_subnormal), float(f.tiny), float(f.max), -float(f.max), 1.0, -1.0,
            0.5, -0.5, 2.5, -2.5]


def int_specials(dtype):
    i = np.iinfo(dtype)
    return sorted({i.min, i.min + 1, -1 if i.min < 0 else 0, 0, 1, 2, i.bits - 1, i.bits,
                   i.max - 1, i.max})


def elements(dtype, special=True, lo=None, hi=None):
    """Values of ``dtype``: small ordinary ones, the full range, and (``special``) the
    special values.  ``lo``/``hi`` bound them (NaN and inf then only when ``special``)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return st.booleans()
    if dtype.kind == "f":
        width = dtype.itemsize * 8
        small = st.floats(-10 if lo is None else lo, 10 if hi is None else hi, width=width)
        if lo is not None or hi is not None:
            parts = [small, st.floats(lo, hi, width=width, allow_subnormal=True)]
            if special:
                parts.append(st.sampled_from([v for v in float_specials(dtype)
                                              if (lo is None or v >= lo) and (hi is None or v <= hi)
                                              or v != v]))
            return st.one_of(*parts)
        parts = [small, st.integers(-4, 4).map(float).map(lambda v: v / 2)]
        if special:
            parts += [st.sampled_from(float_specials(dtype)), st.floats(width=width)]
        return st.one_of(*parts)
    info = np.iinfo(dtype)
    lo = info.min if lo is None else max(lo, info.min)
    hi = info.max if hi is None else min(hi, info.max)
    parts = [st.integers(max(lo, -10), min(hi, 10)), st.integers(lo, hi)]
    if special:
        parts.append(st.sampled_from([v for v in int_specials(dtype) if lo <= v <= hi]))
    return st.one_of(*parts)


# --- shapes --------------------------------------------------------------------------------
def shapes(max_dims=4, min_dims=0, max_side=4, allow_empty=True):
    """Shapes of 0 to 4 dims with sides up to ``max_side``; an empty side now and then."""
    side = st.integers(0 if allow_empty else 1, max_side)
    side = st.one_of(st.integers(1, max_side), side)   # empty sides less often than others
    return st.lists(side, min_size=min_dims, max_size=max_dims).map(tuple)


@st.composite
def broadcast_shapes(draw, n=2, max_dims=4):
    """``n`` shapes that broadcast together (size-1 dims and missing leading dims)."""
    out = draw(shapes(max_dims))
    result = []
    for _ in range(n):
        k = draw(st.integers(0, len(out)))
        s = [1 if draw(st.integers(0, 3)) == 0 else d for d in out[len(out) - k:]]
        result.append(tuple(s))
    return result


# --- layouts -------------------------------------------------------------------------------
@st.composite
def layout(draw, shape):
    """A recipe making a view of ``shape``: (base shape, permutation, slices, flipped dims,
    expanded dims), applied in that order."""
    nd = len(shape)
    if nd == 0:
        return ((), (), (), (), ())
    expand = tuple(d for d in range(nd) if shape[d] != 1 and draw(st.integers(0, 5)) == 0)
    pre = tuple(1 if d in expand else shape[d] for d in range(nd))
    flip = tuple(d for d in range(nd) if draw(st.integers(0, 3)) == 0)
    slices, sliced = [], []
    for d in range(nd):
        step = draw(st.sampled_from((1, 1, 1, 2, 3)))
        start = draw(st.sampled_from((0, 0, 1)))
        n = pre[d]
        slices.append(slice(start, start + (n - 1) * step + 1 if n else start, step))
        sliced.append(start + (n - 1) * step + 1 if n else start)
    perm = tuple(draw(st.permutations(range(nd)))) if draw(st.booleans()) else tuple(range(nd))
    base = [0] * nd
    for i, p in enumerate(perm):      # view = base.transpose(perm): view dim i is base dim p
        base[p] = sliced[i]
    return tuple(base), perm, tuple(slices), flip, expand


def apply_layout(a, recipe, shape, via_ember):
    """(numpy view, Ember tensor) of base array ``a`` laid out by ``recipe``."""
    _, perm, slices, flip, expand = recipe
    v = a.transpose(perm) if perm else a
    v = v[slices] if slices else v
    if flip:
        v = np.flip(v, flip)
    if expand:
        v = np.broadcast_to(v, shape)
    if not via_ember:
        return v, ember.from_numpy(v)
    t = ember.from_numpy(a)
    if perm:
        t = t.permute(*perm)
    if slices:
        t = t[slices]
    if flip:
        t = t.flip(flip)
    if expand:
        t = t.expand(*shape)
    return v, t


def moderate(dtype, bound=100.0):
    """Float values of at most ``bound`` in magnitude and the special ones (NaN, +-inf, +-0,
    subnormals): for results whose rounding depends on the order of operations (sums,
    products), where the largest finite values would overflow in one order and not another."""
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        return elements(dtype)
    f = np.finfo(dtype)
    return st.one_of(st.floats(-bound, bound, width=dtype.itemsize * 8),
                     st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan,
                                      float(f.smallest_subnormal), 1.0, -1.0]))


@st.composite
def operands(draw, dtype, shape, special=True, lo=None, hi=None, contiguous=False, values=None):
    """(numpy array, Ember tensor) of ``shape`` and ``dtype`` in a random layout; ``values``
    replaces the default element strategy."""
    recipe = ((tuple(shape), (), (), (), ()) if contiguous else draw(layout(tuple(shape))))
    values = values if values is not None else elements(dtype, special, lo, hi)
    base = draw(hnp.arrays(np.dtype(dtype), recipe[0], elements=values))
    return apply_layout(base, recipe, tuple(shape), draw(st.booleans()))


# --- comparison --------------------------------------------------------------------------------
def assert_matches(got, want, tol=None, zero_sign=True, what=""):
    """Ember tensor ``got`` equals numpy ``want``: shape, dtype, values (NaN where NaN,
    infinities with their sign, finite values within ``tol`` = (rtol, atol), and the sign of
    zero results when ``zero_sign``)."""
    want = np.asarray(want)
    assert isinstance(got, ember.Tensor), f"{what}: expected a tensor, got {type(got).__name__}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != numpy's {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != numpy's {want.dtype}"
    g = got.numpy()
    if want.dtype.kind != "f":
        bad = g != want
        assert not bad.any(), (f"{what}: {int(bad.sum())} values differ; first at "
                               f"{np.argwhere(bad)[0].tolist()}: {g[bad][0]!r} != {want[bad][0]!r}")
        return
    nan_g, nan_w = np.isnan(g), np.isnan(want)
    bad = nan_g != nan_w
    inf = np.isinf(want) | np.isinf(g)
    bad |= inf & ~nan_w & (g != want)
    fin = ~nan_w & ~inf
    rtol, atol = tol or (0.0, 0.0)
    with np.errstate(all="ignore"):
        bad |= fin & ~(np.abs(g.astype(np.float64) - want) <= atol + rtol * np.abs(want.astype(np.float64)))
    if zero_sign:
        zero = (want == 0) & (g == 0)
        bad |= zero & (np.signbit(g) != np.signbit(want))
    if bad.any():
        at = tuple(np.argwhere(bad)[0])
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} values differ; first at "
                             f"{list(at)}: ember {g[at]!r} != numpy {want[at]!r}")


def numpy_call(fn, *args):
    """``fn(*args)`` with numpy's floating-point warnings silenced: (result, None), or
    (None, the exception numpy raised)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args), None
        except (ValueError, OverflowError, TypeError, ZeroDivisionError, IndexError) as e:
            return None, e


def assert_raises_clearly(call, name):
    """``call()`` raises TypeError, ValueError or IndexError (Ember's DeviceError for
    devices) whose message names the op ``name``, and nothing from Numba."""
    try:
        call()
    except (TypeError, ValueError, IndexError, ember.DeviceError) as e:
        for cls in type(e).__mro__:
            assert not cls.__module__.startswith("numba"), f"a Numba error escaped: {e!r}"
        assert name in str(e), f"{type(e).__name__} {str(e)!r} does not name {name!r}"
        return e
    raise AssertionError(f"{name}: expected TypeError/ValueError/IndexError, nothing was raised")
