"""``t[key]`` with Bool masks and integer arrays, and ``t[key] = value``, against numpy.

Keys are rows of two tables (``GET_KEYS``, ``SET_CASES``): each is applied unchanged to a
numpy array and to an Ember tensor of the same values (numpy's vectorised indexing is the
reference).  The interactions of assignment with views, aliases, fusion and autodiff are in
``tests/autograd/test_setitem_autodiff.py``; docs/decisions.md "__setitem__" explains them.
"""
import numpy as np
import pytest

import ember
from checks import check

BASE = np.arange(60, dtype=np.float64).reshape(3, 4, 5) - 20.5


def _t(a):
    return ember.tensor(np.asarray(a))


def _idx(values, dtype=np.int64):
    return np.asarray(values, dtype=dtype)


# (id, key builder: array module -> key); numpy gets numpy arrays, Ember gets tensors
GET_KEYS = {
    "int_array_dim0": lambda T: T(_idx([2, 0, 2])),
    "int_array_negative": lambda T: T(_idx([-1, 0, -3])),
    "int_array_2d": lambda T: T(_idx([[0, 1], [2, 2]])),
    "int_array_dim1": lambda T: (slice(None), T(_idx([3, 0]))),
    "int_array_last_dim": lambda T: (Ellipsis, T(_idx([4, 4, 1]))),
    "two_arrays_adjacent": lambda T: (slice(None), T(_idx([0, 3])), T(_idx([1, 4]))),
    "two_arrays_broadcast": lambda T: (T(_idx([[0], [2]])), T(_idx([1, 3, 2]))),
    "arrays_separated_by_slice": lambda T: (T(_idx([0, 2])), slice(1, 3), T(_idx([4, 0]))),
    "int_and_array": lambda T: (1, T(_idx([0, 3, 3]))),
    "int_array_int": lambda T: (T(_idx([2, 1])), slice(None), 3),
    "0d_int_array": lambda T: (T(_idx(2)), 1),
    "array_none_slice": lambda T: (T(_idx([1])), None, slice(None, None, -2)),
    "uint8_index": lambda T: T(_idx([2, 1], np.uint8)),
    "int32_index": lambda T: (slice(None), slice(None), T(_idx([0, 4], np.int32))),
    "empty_index": lambda T: T(_idx([], np.int64)),
    "mask_full": lambda T: T(BASE > 0),
    "mask_leading_1d": lambda T: T(np.array([True, False, True])),
    "mask_leading_2d": lambda T: T((BASE[:, :, 0] > -5)),
    "mask_after_slice": lambda T: (slice(None), T(np.array([False, True, True, False]))),
    "mask_all_false": lambda T: T(np.zeros(3, bool)),
    "mask_0d_true": lambda T: T(np.array(True)),
    "mask_0d_false": lambda T: (T(np.array(False)), 0),
}


@pytest.mark.parametrize("key", GET_KEYS.values(), ids=GET_KEYS.keys())
def test_getitem_matches_numpy(key):
    want = BASE[key(np.asarray)]
    got = _t(BASE)[key(_t)]
    check(got, want)


@pytest.mark.parametrize("key", [[2, 0], np.array([1, 1]), (slice(None), [0, 2]),
                                 (np.array([True, False, True]),)],
                         ids=["list", "numpy_int", "list_in_tuple", "numpy_mask"])
def test_getitem_with_lists_and_numpy_arrays(key):
    check(_t(BASE)[key], BASE[key])


def test_getitem_mask_over_leading_dims_of_2d():
    """``X[y == k]`` selects rows (scikit-learn's per-class statistics)."""
    X = np.arange(12.0).reshape(6, 2)
    y = np.array([0, 1, 0, 2, 1, 0])
    for k in range(3):
        check(_t(X)[_t(y) == k], X[y == k])


@pytest.mark.parametrize("key, error", [
    (lambda T: T(_idx([3])), IndexError),
    (lambda T: (slice(None), T(_idx([-5]))), IndexError),
    (lambda T: T(np.ones((3, 5), bool)), IndexError),         # wrong mask shape
    (lambda T: T(np.array([0.5, 1.0])), TypeError),            # float index: a wrong kind
    (lambda T: (T(_idx([0, 1])), T(_idx([0, 1, 2]))), ValueError),   # no common shape
    (lambda T: (0, 0, 0, T(_idx([0]))), IndexError),           # too many indices
], ids=["out_of_range", "negative_out_of_range", "mask_shape", "float", "broadcast",
        "too_many"])
def test_getitem_bad_keys_raise(key, error):
    with pytest.raises(error):
        _t(BASE)[key(_t)]


# --- assignment ---------------------------------------------------------------------------
# (id, key builder, value builder: array module -> value); values are scalars or arrays
SET_CASES = {
    "int": (lambda T: 1, lambda T: 7.5),
    "negative_int": (lambda T: (-1, 2), lambda T: T(np.arange(5.0))),
    "slice": (lambda T: (slice(0, 2), slice(None), 1), lambda T: -1.0),
    "step_slice_tensor_value": (lambda T: (slice(None, None, -2),), lambda T: T(np.ones((4, 5)))),
    "ellipsis_broadcast_value": (lambda T: (Ellipsis, slice(1, 3)), lambda T: T(np.array([9.0, 8.0]))),
    "none_in_key": (lambda T: (None, 0), lambda T: 3.0),
    "full_mask_scalar": (lambda T: T(BASE > 5), lambda T: 0.0),
    "full_mask_values": (lambda T: T(BASE > 30), lambda T: T(np.arange(9.0))),
    "leading_mask_scalar": (lambda T: T(np.array([True, False, True])), lambda T: 2.0),
    "leading_mask_rows": (lambda T: T(np.array([False, True, True])), lambda T: T(np.ones(5))),
    "mask_after_slice": (lambda T: (slice(None), T(np.array([1, 0, 0, 1], bool))), lambda T: 4.0),
    "int_array": (lambda T: T(_idx([2, 0])), lambda T: -3.0),
    "int_array_values": (lambda T: (slice(None), T(_idx([1, 3]))), lambda T: T(np.arange(10.0).reshape(2, 5))),
    "two_int_arrays": (lambda T: (T(_idx([0, 2])), T(_idx([3, 1]))), lambda T: T(np.array([1.0, 2.0]))[:, None]),
    "int_arrays_and_int": (lambda T: (T(_idx([[0], [1]])), 2, T(_idx([0, 4]))), lambda T: 5.0),
    "numpy_value": (lambda T: 0, lambda T: np.full((4, 5), 6.0)),
    "list_value": (lambda T: (0, 0), lambda T: [1.0, 2.0, 3.0, 4.0, 5.0]),
    "empty_selection": (lambda T: T(np.zeros(3, bool)), lambda T: 1.0),
    "0d_key": (lambda T: (), lambda T: 1.5),
}


@pytest.mark.parametrize("key, value", SET_CASES.values(), ids=SET_CASES.keys())
def test_setitem_matches_numpy(key, value):
    want = BASE.copy()
    want[key(np.asarray)] = value(np.asarray)
    t = _t(BASE)
    before = t
    t[key(_t)] = value(_t)
    assert t is before           # the same object, rebound
    check(t, want)


@pytest.mark.parametrize("dtype, value, want", [
    ("int64", 2.9, 2),           # float into int: truncates, as numpy
    ("float32", 3, 3.0),
    ("bool", 1, True),
    ("uint8", True, 1),
    ("int32", ember.tensor([7.0]), 7),
], ids=["float_into_int", "int_into_float", "int_into_bool", "bool_into_uint8", "tensor_cast"])
def test_setitem_casts_to_the_tensor_dtype(dtype, value, want):
    a = np.zeros(3, dtype)
    t = _t(a)
    t[1] = value
    a[1] = want
    check(t, a)


def test_setitem_0d_tensor():
    t = ember.tensor(1.0)
    t[()] = 4.0
    check(t, np.array(4.0, np.float32))
    t[...] = ember.tensor(2.5)
    check(t, np.array(2.5, np.float32))


@pytest.mark.parametrize("key, value, error", [
    (slice(0, 2), np.ones((3, 5)), ValueError),                # value does not fit
    (7, 1.0, IndexError),
    ((0, 9), 1.0, IndexError),
    (0, "text", TypeError),
    (0, object(), TypeError),
], ids=["shape", "out_of_range", "out_of_range_dim1", "string", "object"])
def test_setitem_bad_input_raises(key, value, error):
    t = _t(BASE)
    with pytest.raises(error):
        t[key] = value
    check(t, BASE)               # a failed assignment leaves the tensor as it was


def test_setitem_refuses_quantized_tensors():
    q = ember.tensor([1.0, -2.0]).quantize(ember.QuantScheme(ember.QuantValue.Q8S))
    with pytest.raises(TypeError, match="quantized"):
        q[0] = 1.0


def test_slice_bounds_may_be_0d_int_tensors():
    t = _t(BASE)
    check(t[ember.tensor(1):ember.tensor(3)], BASE[1:3])
