"""Errors: the right exception class, a message that names the op (and the shapes), never a
Numba exception and never a crash (DESIGN §3).

One table row per error: (id, call, exception class, substrings the message must contain).
"""
import numpy as np
import pytest

import ember
from checks import as_tensor, assert_not_numba


def f32(*shape):
    return as_tensor(np.ones(shape, np.float32))


def f64(*shape):
    return as_tensor(np.ones(shape, np.float64))


def i32(*shape):
    return as_tensor(np.ones(shape, np.int32))


def i64(values):
    return as_tensor(np.array(values, np.int64))


def b(*shape):
    return as_tensor(np.ones(shape, bool))


# --- wrong kind -> TypeError ----------------------------------------------------------------------
WRONG_KIND = [
    ("exp_of_int", lambda: i32(3).exp(), ["exp"]),
    ("log_of_bool", lambda: b(3).log(), ["log"]),
    ("sqrt_of_int", lambda: i32(3).sqrt(), ["sqrt"]),
    ("sigmoid_of_int", lambda: i32(3).sigmoid(), ["sigmoid"]),
    # (round and the NaN predicates take ints since the array API work: identity / constants)
    ("round_of_bool", lambda: b(3).round(), ["round"]),
    ("acos_of_int", lambda: i32(3).acos(), ["acos"]),
    ("atan2_of_bool", lambda: b(3).atan2(b(3)), ["atan2"]),
    ("bitwise_and_float", lambda: f32(3) & f32(3), []),
    ("bitwise_or_float_int", lambda: f32(3) | i32(3), []),
    ("invert_float", lambda: ~f32(3), []),
    ("shift_float", lambda: f32(3) << i32(3), []),
    ("shift_bool", lambda: b(3) >> b(3), []),
    ("logical_not_float", lambda: f32(3).logical_not(), []),
    ("add_bool_bool", lambda: b(3) + b(3), ["add"]),
    ("neg_bool", lambda: -b(3), ["neg"]),
    ("lt_bool", lambda: b(3) < b(3), []),
    ("max_of_bool", lambda: b(3).max(), ["max"]),
    ("argmax_of_bool", lambda: b(3).argmax(), ["argmax"]),
    ("softmax_of_int", lambda: i32(2, 3).softmax(1), ["softmax"]),
    ("log_softmax_of_int", lambda: i32(2, 3).log_softmax(1), ["log_softmax"]),
    ("var_of_int", lambda: i32(3).var(), ["var"]),
    ("std_of_bool", lambda: b(3).std(), []),
    ("sort_of_bool", lambda: b(3).sort(), ["sort"]),
    ("topk_of_bool", lambda: b(3).topk(1), ["topk"]),
    ("matmul_bool", lambda: b(2, 2) @ b(2, 2), ["matmul"]),
    ("matmul_non_tensor", lambda: f32(2, 2) @ [[1.0, 1.0], [1.0, 1.0]], ["matmul"]),
    ("one_hot_of_float", lambda: f32(3).one_hot(3), ["one_hot"]),
    ("index_select_float_indices", lambda: f32(3).index_select(0, f32(2)), ["index_select"]),
    ("gather_float_index", lambda: f32(3).gather(0, f32(3)), ["gather"]),
    ("scatter_float_index", lambda: f32(3).scatter(0, f32(3), f32(3)), ["scatter"]),
    ("mask_fill_int_mask", lambda: f32(3).mask_fill(i32(3), 0.0), ["mask_fill"]),
    ("mask_where_float_mask", lambda: f32(3).mask_where(f32(3), f32(3)), ["mask_where"]),
    ("where_int_condition", lambda: ember.where(i32(3), f32(3), f32(3)), ["where"]),
    ("getitem_float_tensor", lambda: f32(3)[f32(2)], []),
    ("getitem_float_list", lambda: f32(3)[[0.5, 1.0]], []),
    ("getitem_float_index", lambda: f32(3)[1.5], []),
    ("add_string", lambda: f32(3) + "a", []),
    ("index_of_float_tensor", lambda: [1, 2][f32(1)], []),
]


@pytest.mark.parametrize("call, words", [pytest.param(c, w, id=i) for i, c, w in WRONG_KIND])
def test_wrong_kind_raises_type_error(call, words):
    with pytest.raises(TypeError) as e:
        call()
    assert_not_numba(e)
    for w in words:
        assert w in str(e.value), f"message {str(e.value)!r} does not name {w!r}"


# --- impossible shapes -> ValueError naming the op and both shapes -----------------------------------
SHAPE_MISMATCH = [
    ("add", lambda: f32(3) + f32(4), ["add", "(3,)", "(4,)"]),
    ("mul_2d", lambda: f32(2, 3) * f32(3, 2), ["mul", "(2, 3)", "(3, 2)"]),
    ("lt", lambda: f32(2, 3) < f32(4), ["lt", "(2, 3)", "(4,)"]),
    ("where", lambda: ember.where(b(3), f32(4), f32(3)), ["where", "(3,)", "(4,)"]),
    ("matmul", lambda: f32(2, 3) @ f32(4, 5), ["matmul", "(2, 3)", "(4, 5)"]),
    ("matmul_1d", lambda: f32(3) @ f32(4), ["matmul", "(3,)", "(4,)"]),
    ("matmul_batch", lambda: f32(2, 3, 4) @ f32(3, 4, 5), ["matmul"]),
    ("matmul_0d", lambda: f32() @ f32(3), ["matmul"]),
    ("cat", lambda: ember.cat([f32(2, 3), f32(2, 4)], 0), ["cat", "(2, 3)", "(2, 4)"]),
    ("cat_ndim", lambda: ember.cat([f32(2, 3), f32(3)], 0), ["cat"]),
    ("cat_empty_list", lambda: ember.cat([], 0), ["cat"]),
    ("cat_0d", lambda: ember.cat([f32(), f32()], 0), ["cat"]),
    ("stack", lambda: ember.stack([f32(2), f32(3)]), ["stack"]),
    ("expand", lambda: f32(3).expand(4), ["expand", "(3,)", "(4,)"]),
    ("expand_fewer_dims", lambda: f32(2, 3).expand(3), ["expand"]),
    ("reshape", lambda: f32(2, 3).reshape(4), ["reshape", "(2, 3)", "(4,)"]),
    ("reshape_minus1", lambda: f32(2, 3).reshape(4, -1), ["reshape"]),
    ("reshape_two_minus1", lambda: f32(2, 3).reshape(-1, -1), ["reshape"]),
    ("mask_fill_mask_shape", lambda: f32(3).mask_fill(b(4), 0.0), ["mask_fill", "(4,)", "(3,)"]),
    ("slice_assign_values", lambda: f32(4, 5).slice_assign(0, f32(4)), ["slice_assign"]),
    ("gather_index_ndim", lambda: f32(3, 4).gather(1, i64([0, 1])), ["gather"]),
    ("gather_index_too_wide", lambda: f32(3, 4).gather(1, i64([[0]] * 4)), ["gather"]),
    ("scatter_values_shape", lambda: f32(3).scatter(0, i64([0, 1]), f32(3)), ["scatter"]),
    ("index_select_2d_indices", lambda: f32(3).index_select(0, i64([[0]])), ["index_select"]),
    ("T_of_3d", lambda: f32(2, 3, 4).T, ["T"]),
    ("tril_1d", lambda: f32(3).tril(), ["tril"]),
]


@pytest.mark.parametrize("call, words", [pytest.param(c, w, id=i) for i, c, w in SHAPE_MISMATCH])
def test_shape_mismatch_raises_value_error(call, words):
    with pytest.raises(ValueError) as e:
        call()
    assert_not_numba(e)
    for w in words:
        assert w in str(e.value), f"message {str(e.value)!r} does not name {w!r}"


# --- bad dims -> IndexError or ValueError -----------------------------------------------------------
BAD_DIMS = [
    ("sum_dim", lambda: f32(2, 3).sum(2)),
    ("sum_negative_dim", lambda: f32(2, 3).sum(-3)),
    ("sum_repeated_dims", lambda: f32(2, 3).sum((0, 0))),
    ("sum_repeated_neg_dims", lambda: f32(2, 3).sum((1, -1))),
    ("mean_dim", lambda: f32(2, 3).mean(5)),
    ("max_dim", lambda: f32(2, 3).max(2)),
    ("argmax_dim", lambda: f32(2, 3).argmax(-3)),
    ("any_dim", lambda: b(2, 3).any(3)),
    ("cumsum_dim", lambda: f32(2, 3).cumsum(2)),
    ("softmax_dim", lambda: f32(2, 3).softmax(4)),
    ("var_dim", lambda: f32(2, 3).var(2)),
    ("transpose_dim", lambda: f32(2, 3).transpose(0, 2)),
    ("permute_repeated", lambda: f32(2, 3).permute(0, 0)),
    ("permute_too_few", lambda: f32(2, 3, 4).permute(0, 1)),
    ("unsqueeze_dim", lambda: f32(2, 3).unsqueeze(4)),
    ("squeeze_dim", lambda: f32(2, 3).squeeze(3)),
    ("flip_dim", lambda: f32(2, 3).flip(2)),
    ("cat_dim", lambda: ember.cat([f32(2, 3), f32(2, 3)], 2)),
    ("stack_dim", lambda: ember.stack([f32(2), f32(2)], 3)),
    ("sort_dim", lambda: f32(2, 3).sort(2)),
    ("topk_dim", lambda: f32(2, 3).topk(1, 2)),
    ("gather_dim", lambda: f32(2, 3).gather(2, i64([[0]]))),
    ("index_select_dim", lambda: f32(2, 3).index_select(2, i64([0]))),
    ("narrow_dim", lambda: f32(2, 3).narrow(2, 0, 1)),
    ("split_dim", lambda: f32(2, 3).split(1, 2)),
    ("chunk_dim", lambda: f32(2, 3).chunk(2, -3)),
    ("flatten_dims", lambda: f32(2, 3, 4).flatten(2, 1)),
]


@pytest.mark.parametrize("call", [pytest.param(c, id=i) for i, c in BAD_DIMS])
def test_bad_dim_raises(call):
    with pytest.raises((IndexError, ValueError)) as e:
        call()
    assert_not_numba(e)


# --- out-of-range indices -> IndexError -----------------------------------------------------------------
OUT_OF_RANGE = [
    ("getitem_int", lambda: f32(3)[3]),
    ("getitem_negative", lambda: f32(3)[-4]),
    ("getitem_second_dim", lambda: f32(2, 3)[0, 3]),
    ("getitem_too_many", lambda: f32(2, 3)[0, 0, 0]),
    ("getitem_0d_int", lambda: f32()[0]),
    ("getitem_two_ellipses", lambda: f32(2, 3)[..., ...]),
    ("getitem_bool_mask_shape", lambda: f32(2, 3)[b(3)]),
    ("getitem_int_tensor", lambda: f32(3)[i64([0, 3])]),
    ("gather", lambda: f32(3, 4).gather(1, i64([[0, 4]]))),
    ("gather_negative", lambda: f32(3, 4).gather(0, i64([[-1]]))),
    ("index_select", lambda: f32(3, 4).index_select(0, i64([3]))),
    ("index_select_negative", lambda: f32(3, 4).index_select(1, i64([-1]))),
    ("scatter", lambda: f32(3).scatter(0, i64([5]), f32(1))),
    ("scatter_add", lambda: f32(3).scatter(0, i64([-1]), f32(1), reduce="add")),
    ("narrow", lambda: f32(3).narrow(0, 2, 5)),
    ("slice_assign_int", lambda: f32(3).slice_assign(3, 0.0)),
]


@pytest.mark.parametrize("call", [pytest.param(c, id=i) for i, c in OUT_OF_RANGE])
def test_out_of_range_index_raises_index_error(call):
    with pytest.raises(IndexError) as e:
        call()
    assert_not_numba(e)


def test_large_out_of_range_index_is_caught():
    """The bound check also runs on the parallel path (many indices)."""
    from ember.backends.cpu.elementwise import PARALLEL_MIN
    idx = np.zeros(PARALLEL_MIN * 2, np.int64)
    idx[-1] = 10
    with pytest.raises(IndexError) as e:
        f32(10).index_select(0, as_tensor(idx))
    assert_not_numba(e)
    with pytest.raises(IndexError) as e:
        f32(10).gather(0, as_tensor(idx))
    assert_not_numba(e)


# --- creation -------------------------------------------------------------------------------------------
RAGGED = [[[1, 2], [3]], [[1], [2, 3]], [1, [2]], [[1.0, 2.0], [3.0]], [[[1, 2]], [[3, 4], [5, 6]]]]


@pytest.mark.parametrize("data", RAGGED, ids=lambda v: str(v))
def test_ragged_nested_lists_raise_value_error(data):
    with pytest.raises(ValueError) as e:
        ember.tensor(data)
    assert_not_numba(e)


UNSUPPORTED = [
    # (complex64/complex128 are Ember dtypes; numpy's long double complex is not)
    ("tensor_clongdouble", lambda: ember.tensor(np.zeros(2, np.clongdouble))),
    ("from_numpy_clongdouble", lambda: ember.from_numpy(np.zeros(2, np.clongdouble))),
    ("from_numpy_float16", lambda: ember.from_numpy(np.zeros(2, np.float16))),
    ("from_numpy_object", lambda: ember.from_numpy(np.array([None, 1]))),
    ("tensor_strings", lambda: ember.tensor(["a", "b"])),
    ("zeros_dtype_clongdouble", lambda: ember.zeros(2, dtype=np.clongdouble)),
    ("cast_clongdouble", lambda: f32(2).cast(np.clongdouble)),
    ("cast_not_a_dtype", lambda: f32(2).cast("banana")),
    ("from_dlpack_float16", lambda: ember.from_dlpack(np.zeros(2, np.float16))),
]


@pytest.mark.parametrize("call", [pytest.param(c, id=i) for i, c in UNSUPPORTED])
def test_unsupported_dtype_raises_type_error(call):
    with pytest.raises(TypeError) as e:
        call()
    assert_not_numba(e)


# --- other invalid arguments: ValueError, nothing from Numba ---------------------------------------------
OTHER_VALUE_ERRORS = [
    ("int_pow_negative", lambda: i32(3) ** -1),
    ("topk_k_too_large", lambda: f32(3).topk(4)),
    ("topk_k_negative", lambda: f32(3).topk(-1)),
    ("one_hot_out_of_range", lambda: i64([0, 3]).one_hot(3)),
    ("one_hot_negative", lambda: i64([-1]).one_hot(3)),
    ("clamp_no_bounds", lambda: f32(3).clamp()),
    ("split_bad_sections", lambda: f32(4).split([1, 2])),
    ("split_zero_size", lambda: f32(4).split(0)),
    ("chunk_zero", lambda: f32(4).chunk(0)),
    ("repeat_too_few_sizes", lambda: f32(2, 3).repeat(2)),
    ("repeat_negative", lambda: f32(2).repeat(-1)),
    ("scatter_bad_reduce", lambda: f32(3).scatter(0, i64([0]), f32(1), reduce="mul")),
    ("item_of_empty", lambda: f32(0).item()),
    ("item_of_many", lambda: f32(2).item()),
    ("bool_of_many", lambda: bool(f32(2))),
    ("zeros_negative_shape", lambda: ember.zeros(-1)),
    ("random_negative_shape", lambda: ember.random.uniform((2, -1))),
    ("arange_zero_step", lambda: ember.arange(0, 5, 0)),
    ("linspace_negative_num", lambda: ember.linspace(0, 1, -1)),
    ("tensor_nan_to_int", lambda: ember.tensor([1.0, float("nan")], dtype=ember.int32)),
    ("tensor_inf_to_int", lambda: ember.tensor([float("inf")], dtype=int)),
    ("getitem_step_zero", lambda: f32(3)[::0]),
    ("max_of_empty", lambda: f32(0).max()),
]


@pytest.mark.parametrize("call", [pytest.param(c, id=i) for i, c in OTHER_VALUE_ERRORS])
def test_invalid_argument_raises_value_error(call):
    with pytest.raises(ValueError) as e:
        call()
    assert_not_numba(e)


def test_numba_never_escapes_on_odd_inputs():
    """A sweep of unusual-but-legal and illegal calls: whatever happens, no Numba exception."""
    calls = [
        lambda: as_tensor(np.array([1, 2], np.int8)) + 300,
        lambda: as_tensor(np.array([1, 2], np.uint8)) - 1,
        lambda: as_tensor(np.array([1, 2], np.int64)) << as_tensor(np.array([1, 2], np.int8)),
        lambda: f32(2, 3).sum(dim="0"),
        lambda: f32(2, 3).reshape(2.0, 3),
        lambda: f32(2, 3)[None, None, None, 0, 0],
        lambda: f32(2, 3).expand(-2, 3),
        lambda: f32(2, 3).topk(1.5),
        lambda: f32(3).one_hot(2),
        lambda: as_tensor(np.zeros(3, np.uint8)).sort(),
        lambda: as_tensor(np.zeros((0, 3))).argmax(1),
        lambda: f32(2, 2).scatter(0, i64([[0, 1]]), 1.5),
        lambda: as_tensor(np.zeros(3, np.int32)).scatter(0, i64([0]), f32(1)),
        lambda: f32(3) @ f32(3, 1, 2),
        lambda: f32(2, 3).gather(0, as_tensor(np.zeros((2, 3), np.uint8))),
    ]
    for call in calls:
        try:
            call()
        except Exception as e:  # noqa: BLE001 - the point is to inspect whatever is raised
            for cls in type(e).__mro__:
                assert not cls.__module__.startswith("numba"), f"Numba error escaped: {e!r}"


def test_tensors_on_different_devices_raise_device_error(cuda_available):
    """Only meaningful where a second device exists (a GPU, or Numba's CUDA simulator)."""
    if not cuda_available:
        pytest.skip("no CUDA device: every tensor lives on the CPU")
    gpu = ember.zeros(3, device="cuda")
    for call in (lambda: f32(3) + gpu, lambda: ember.cat([f32(3), gpu]),
                 lambda: f32(3).index_select(0, gpu.cast(ember.int64))):
        with pytest.raises(ember.DeviceError) as e:
            call()
        assert_not_numba(e)
