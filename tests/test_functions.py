"""Module-level functions: every elementwise op as ``ember.<name>``, and the layout, search
and set functions composed of existing ops, against numpy.

``SPELLINGS`` pairs each ``ember.<name>`` function with the method or operator it must equal
(the same IR op, so one row per function costs no compile).  ``ROWS`` is the declarative
table of the composed functions: (id, Ember call, numpy reference, inputs).
"""
import numpy as np
import pytest

import ember
from checks import check

RNG = np.random.default_rng(20)
A = RNG.uniform(-2, 2, (3, 4))
B = RNG.uniform(0.5, 2, (3, 4))
U = RNG.uniform(-0.9, 0.9, (3, 4))
I = RNG.integers(-5, 6, (3, 4))
J = RNG.integers(0, 4, (3, 4))
M = RNG.random((3, 4)) < 0.5


def T(a):
    return ember.tensor(a)


# (function name, the method / operator spelling, inputs)
SPELLINGS = [
    ("neg", lambda x: -x, (A,)), ("negative", lambda x: -x, (A,)), ("abs", abs, (I,)),
    ("absolute", abs, (A,)), ("sign", lambda x: x.sign(), (A,)), ("exp", lambda x: x.exp(), (A,)),
    ("expm1", lambda x: x.expm1(), (A,)), ("log", lambda x: x.log(), (B,)),
    ("log1p", lambda x: x.log1p(), (B,)), ("log2", lambda x: x.log2(), (B,)),
    ("log10", lambda x: x.log10(), (B,)), ("sqrt", lambda x: x.sqrt(), (B,)),
    ("rsqrt", lambda x: x.rsqrt(), (B,)), ("reciprocal", lambda x: x.recip(), (B,)),
    ("recip", lambda x: x.recip(), (B,)), ("square", lambda x: x.square(), (I,)),
    ("sin", lambda x: x.sin(), (A,)), ("cos", lambda x: x.cos(), (A,)),
    ("tan", lambda x: x.tan(), (U,)), ("asin", lambda x: x.asin(), (U,)),
    ("arcsin", lambda x: x.arcsin(), (U,)), ("acos", lambda x: x.acos(), (U,)),
    ("arccos", lambda x: x.arccos(), (U,)), ("atan", lambda x: x.atan(), (A,)),
    ("arctan", lambda x: x.arctan(), (A,)), ("sinh", lambda x: x.sinh(), (A,)),
    ("cosh", lambda x: x.cosh(), (A,)), ("tanh", lambda x: x.tanh(), (A,)),
    ("asinh", lambda x: x.asinh(), (A,)), ("arcsinh", lambda x: x.arcsinh(), (A,)),
    ("acosh", lambda x: x.acosh(), (B + 1,)), ("arccosh", lambda x: x.arccosh(), (B + 1,)),
    ("atanh", lambda x: x.atanh(), (U,)), ("arctanh", lambda x: x.arctanh(), (U,)),
    ("sigmoid", lambda x: x.sigmoid(), (A,)), ("erf", lambda x: x.erf(), (A,)),
    ("relu", lambda x: x.relu(), (A,)), ("gelu", lambda x: x.gelu(), (A,)),
    ("silu", lambda x: x.silu(), (A,)), ("round", lambda x: x.round(), (A,)),
    ("floor", lambda x: x.floor(), (A,)), ("ceil", lambda x: x.ceil(), (A,)),
    ("trunc", lambda x: x.trunc(), (A,)), ("isnan", lambda x: x.isnan(), (A,)),
    ("isinf", lambda x: x.isinf(), (A,)), ("isfinite", lambda x: x.isfinite(), (I,)),
    ("signbit", lambda x: x.signbit(), (A,)), ("bitwise_not", lambda x: ~x, (I,)),
    ("logical_not", lambda x: ~x, (M,)),
    ("add", lambda x, y: x + y, (A, B)), ("sub", lambda x, y: x - y, (A, B)),
    ("subtract", lambda x, y: x - y, (I, J)), ("mul", lambda x, y: x * y, (A, B)),
    ("multiply", lambda x, y: x * y, (I, J)), ("div", lambda x, y: x / y, (A, B)),
    ("divide", lambda x, y: x / y, (A, B)), ("true_divide", lambda x, y: x / y, (I, J + 1)),
    ("floor_divide", lambda x, y: x // y, (I, J + 1)), ("remainder", lambda x, y: x % y, (A, B)),
    ("pow", lambda x, y: x ** y, (B, A)), ("maximum", lambda x, y: x.maximum(y), (A, B)),
    ("minimum", lambda x, y: x.minimum(y), (I, J)), ("eq", lambda x, y: x == y, (I, J)),
    ("equal", lambda x, y: x == y, (I, J)), ("ne", lambda x, y: x != y, (I, J)),
    ("not_equal", lambda x, y: x != y, (I, J)), ("lt", lambda x, y: x < y, (A, B)),
    ("less", lambda x, y: x < y, (A, B)), ("le", lambda x, y: x <= y, (I, J)),
    ("less_equal", lambda x, y: x <= y, (I, J)), ("gt", lambda x, y: x > y, (A, B)),
    ("greater", lambda x, y: x > y, (A, B)), ("ge", lambda x, y: x >= y, (I, J)),
    ("greater_equal", lambda x, y: x >= y, (I, J)), ("bitwise_and", lambda x, y: x & y, (I, J)),
    ("bitwise_or", lambda x, y: x | y, (I, J)), ("bitwise_xor", lambda x, y: x ^ y, (I, J)),
    ("bitwise_left_shift", lambda x, y: x << y, (I, J)),
    ("bitwise_right_shift", lambda x, y: x >> y, (I, J)),
    ("logical_and", lambda x, y: x & y, (M, ~M)), ("logical_or", lambda x, y: x | y, (M, ~M)),
    ("logical_xor", lambda x, y: x ^ y, (M, ~M)), ("atan2", lambda x, y: x.atan2(y), (A, B)),
    ("arctan2", lambda x, y: x.arctan2(y), (A, B)), ("hypot", lambda x, y: x.hypot(y), (A, B)),
    ("copysign", lambda x, y: x.copysign(y), (B, A)),
    ("nextafter", lambda x, y: x.nextafter(y), (A, B)),
    ("logaddexp", lambda x, y: x.logaddexp(y), (A, B)),
    ("clamp", lambda x: x.clamp(-1, 1), (A,)), ("clip", lambda x: x.clamp(-1, 1), (A,)),
]


@pytest.mark.parametrize("name, method, inputs", SPELLINGS, ids=[s[0] for s in SPELLINGS])
def test_function_spelling_equals_the_method(name, method, inputs):
    tensors = [T(a) for a in inputs]
    fn = getattr(ember, name)
    got = fn(*tensors, -1, 1) if name in ("clamp", "clip") else fn(*tensors)
    want = method(*tensors)
    check(got, want.numpy())


def test_every_function_is_also_a_method():
    """PyTorch's pairing: ``ember.<name>(t, ...)`` and ``t.<name>(...)``."""
    x = T(A)
    for name, _, inputs in SPELLINGS:
        if name in ("logical_and", "logical_or", "logical_xor", "logical_not"):
            continue   # the methods are the operators (& | ^ ~), for Bool tensors
        assert callable(getattr(x, name, None)), name
        method = getattr(T(inputs[0]), name)
        others = [T(a) for a in inputs[1:]] + ([-1, 1] if name in ("clamp", "clip") else [])
        fn = getattr(ember, name)
        check(method(*others), fn(T(inputs[0]), *others).numpy())


def test_functions_take_scalars_and_numpy_arrays_on_either_side():
    x = T(np.array([1.0, 4.0]))
    check(ember.maximum(2.0, x), np.array([2.0, 4.0]))
    check(ember.sub(10, x), np.array([9.0, 6.0]))
    check(ember.add(np.array([1.0, 1.0]), x), np.array([2.0, 5.0]))
    with pytest.raises(TypeError, match="expected a tensor"):
        ember.add(1, 2)


def test_logical_functions_take_any_kind_as_truth_values():
    check(ember.logical_and(T(np.array([0, 2, 3])), T(np.array([1.0, 0.0, 5.0]))),
          np.array([False, False, True]))
    check(ember.logical_not(T(np.array([0, 7]))), np.array([True, False]))


@pytest.mark.parametrize("a, b, kw", [
    (np.array([1.0, 1.0, np.nan, np.inf, np.inf, 1e-9]),
     np.array([1.0 + 1e-9, 1.1, np.nan, np.inf, -np.inf, 0.0]), {}),
    (np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), {"equal_nan": True}),
    (np.array([1.0, 2.0]), np.array([1.05, 2.5]), {"rtol": 0.1, "atol": 0.0}),
    (np.array([1, 2, 3]), np.array([1, 3, 3]), {}),
], ids=["defaults", "equal_nan", "rtol", "ints"])
def test_isclose(a, b, kw):
    check(ember.isclose(T(a), T(b), **kw), np.isclose(a, b, **kw))


X = RNG.uniform(-3, 3, (3, 4, 5)).round(1)
S = np.array([0.5, 1.0, 1.0, 2.5, 4.0, np.nan])
V = np.array([[1.0, np.nan], [-1.0, 2.5]])
K = np.array([3, 1, 3, 2, 1, 3, 0])
IDX = np.array([[[0, 4, 1, 1, 2]]])


def _unique_ref(a):
    values, index, inverse, counts = np.unique(a, True, True, True)
    return values, index, inverse.reshape(a.shape), counts


# (id, Ember call on tensors, numpy reference on arrays, inputs)
ROWS = [
    ("roll_flat", lambda x: ember.roll(x, 7), lambda x: np.roll(x, 7), (X,)),
    ("roll_dims", lambda x: ember.roll(x, (1, -2), (0, 2)), lambda x: np.roll(x, (1, -2), (0, 2)), (X,)),
    ("roll_empty", lambda x: ember.roll(x, 3, 0), lambda x: np.roll(x, 3, 0), (np.zeros((0, 2)),)),
    ("movedim", lambda x: ember.movedim(x, 0, -1), lambda x: np.moveaxis(x, 0, -1), (X,)),
    ("moveaxis_many", lambda x: ember.moveaxis(x, (0, 1), (2, 0)),
     lambda x: np.moveaxis(x, (0, 1), (2, 0)), (X,)),
    ("tile_fewer_reps", lambda x: ember.tile(x, (2,)), lambda x: np.tile(x, (2,)), (X,)),
    ("tile_more_reps", lambda x: ember.tile(x, (2, 1, 1, 3)), lambda x: np.tile(x, (2, 1, 1, 3)), (X,)),
    ("repeat_interleave_int", lambda x: ember.repeat_interleave(x, 2, 1),
     lambda x: np.repeat(x, 2, 1), (X,)),
    ("repeat_interleave_tensor", lambda x: ember.repeat_interleave(x, T(np.array([2, 0, 1, 3])), 1),
     lambda x: np.repeat(x, [2, 0, 1, 3], 1), (X,)),
    ("repeat_interleave_flat", lambda x: ember.repeat_interleave(x, 3), lambda x: np.repeat(x, 3), (K,)),
    ("diff", lambda x: ember.diff(x), lambda x: np.diff(x), (X,)),
    ("diff_n2_dim0", lambda x: ember.diff(x, 2, 0), lambda x: np.diff(x, 2, 0), (X,)),
    ("diff_prepend_append", lambda x: ember.diff(x, 1, 1, T(np.ones((3, 1, 5))), T(np.zeros((3, 2, 5)))),
     lambda x: np.diff(x, 1, 1, np.ones((3, 1, 5)), np.zeros((3, 2, 5))), (X,)),
    ("diff_bool", lambda x: ember.diff(x), lambda x: np.diff(x), (M,)),
    ("diff_n_too_large", lambda x: ember.diff(x, 9), lambda x: np.diff(x, 9), (K,)),
    ("meshgrid_ij", lambda a, b: ember.stack(ember.meshgrid(a, b, indexing="ij")),
     lambda a, b: np.stack(np.meshgrid(a, b, indexing="ij")), (S[:3], K[:4])),
    ("meshgrid_xy_3", lambda a, b, c: ember.stack(ember.meshgrid(a, b, c, indexing="xy")),
     lambda a, b, c: np.stack(np.meshgrid(a, b, c)), (S[:3], S[:2], S[:4])),
    ("take_along_dim", lambda x, i: ember.take_along_dim(x, i, 2),
     lambda x, i: np.take_along_axis(x, i, 2), (X, IDX)),
    ("take_along_dim_negative", lambda x, i: ember.take_along_dim(x, -1 - i, 1),
     lambda x, i: np.take_along_axis(x, -1 - i, 1), (X, IDX.reshape(1, 5, 1) % 4)),
    ("take_along_dim_flat", lambda x, i: ember.take_along_dim(x, i),
     lambda x, i: np.take_along_axis(x.reshape(-1), i.reshape(-1), 0), (X, IDX)),
    ("count_nonzero", lambda x: ember.count_nonzero(x), np.count_nonzero, (K,)),
    ("count_nonzero_dim", lambda x: ember.count_nonzero(x, (0, 2)),
     lambda x: np.count_nonzero(x, (0, 2)), (X.round(0),)),
    ("searchsorted_left", lambda s, v: ember.searchsorted(s, v), lambda s, v: np.searchsorted(s, v),
     (S, V)),
    ("searchsorted_right", lambda s, v: ember.searchsorted(s, v, right=True),
     lambda s, v: np.searchsorted(s, v, "right"), (S, V)),
    ("searchsorted_side_int", lambda s, v: ember.searchsorted(s, v, side="right"),
     lambda s, v: np.searchsorted(s, v, "right"), (np.sort(K), K)),
    ("searchsorted_sorter", lambda s, v: ember.searchsorted(s, v, sorter=s.argsort()),
     lambda s, v: np.searchsorted(s, v, sorter=np.argsort(s, kind="stable")), (K, np.arange(5))),
    ("searchsorted_scalar", lambda s: ember.searchsorted(s, 2.0), lambda s: np.searchsorted(s, 2.0),
     (S,)),
    ("searchsorted_empty", lambda s, v: ember.searchsorted(s, v), lambda s, v: np.searchsorted(s, v),
     (S[:0], V)),
    ("unique", lambda x: ember.unique(x), np.unique, (K,)),
    ("unique_all", lambda x: ember.unique(x, True, True, True), _unique_ref, (K.reshape(7, 1),)),
    ("unique_nan_and_zeros", lambda x: ember.unique(x, return_counts=True),
     lambda x: np.unique(x, return_counts=True, equal_nan=False),
     (np.array([np.nan, 0.0, -0.0, np.nan, 1.0, 0.0]),)),
    ("unique_bool", lambda x: ember.unique(x, False, True, True),
     lambda x: np.unique(x, False, True, True), (M,)),
    ("unique_empty", lambda x: ember.unique(x, True, True, True),
     lambda x: np.unique(x, True, True, True), (np.zeros((0,)),)),
]


@pytest.mark.parametrize("fn, ref, inputs", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_composed_function(fn, ref, inputs):
    got = fn(*[T(a) for a in inputs])
    want = ref(*inputs)
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            check(g, w if w.dtype != np.intp else w.astype(np.int64))
    else:
        check(got, np.asarray(want) if np.asarray(want).dtype != np.intp else want.astype(np.int64))


def test_unbind_and_broadcast_tensors():
    parts = ember.unbind(T(X), 1)
    assert len(parts) == 4
    for i, p in enumerate(parts):
        check(p, X[:, i])
    a, b = ember.broadcast_tensors(T(X[:, :1]), T(X[0]))
    check(a, np.broadcast_to(X[:, :1], X.shape))
    check(b, np.broadcast_to(X[0], X.shape))
    assert ember.broadcast_shapes((3, 1), (4,), ()) == (3, 4)


@pytest.mark.parametrize("call, error", [
    (lambda: ember.searchsorted(T(X), T(S)), ValueError),            # not 1-D
    (lambda: ember.searchsorted(T(S), T(S), side="middle"), ValueError),
    (lambda: ember.repeat_interleave(T(K), T(np.array([1, 2]))), ValueError),
    (lambda: ember.repeat_interleave(T(K), -1), ValueError),
    (lambda: ember.diff(T(np.array(1.0))), ValueError),
    (lambda: ember.meshgrid(T(X)), ValueError),
    (lambda: ember.movedim(T(X), (0, 0), (1, 2)), ValueError),
    (lambda: ember.take_along_dim(T(X), T(IDX[0]), 0), ValueError),
    (lambda: ember.roll(T(X), (1, 2), 0), ValueError),
    (lambda: ember.unique([1, 2]), TypeError),
], ids=["searchsorted_nd", "bad_side", "repeats_length", "negative_repeats", "diff_0d",
        "meshgrid_nd", "movedim_repeated", "take_along_ndim", "roll_lengths", "unique_list"])
def test_bad_input_raises(call, error):
    with pytest.raises(error):
        call()
