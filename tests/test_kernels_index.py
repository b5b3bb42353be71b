"""The CPU backend's sort and indexing (launchers and kernels) against numpy references.

Covers the dtypes Ember has, 0-d / empty / one-element shapes, non-contiguous
inputs (transposed, negative strides), both sides of ``PARALLEL_MIN``, ties
and NaN ordering.  The launchers receive validated calls; the errors of bad calls are
raised at the dispatch seam, tested here through the Tensor API.
"""
from types import SimpleNamespace

import numpy as np
import pytest

import ember
from ember.backends.cpu import index as cpu_index
from ember.backends.cpu import sort as cpu_sort
from ember.backends.cpu.elementwise import PARALLEL_MIN


def _axis(x, axis):
    return axis % max(x.ndim, 1)


# the launchers with numpy's conventions (negative axes, defaults, lists), as these tests call them
sort = SimpleNamespace(
    sort=lambda x, axis=-1, descending=False: cpu_sort.sort(x, _axis(x, axis), descending),
    topk=lambda x, k, axis=-1, largest=True: cpu_sort.topk(x, k, _axis(x, axis), largest))


def _values(x, index, values):
    return np.broadcast_to(np.asarray(values, x.dtype), np.shape(index))


index = SimpleNamespace(
    gather=lambda x, axis, i: cpu_index.gather(x, _axis(x, axis), np.asarray(i)),
    index_select=lambda x, axis, i: cpu_index.index_select(x, _axis(x, axis), np.asarray(i)),
    scatter=lambda x, axis, i, v, reduce="assign": cpu_index.scatter(
        x, _axis(x, axis), np.asarray(i), _values(x, i, v), reduce),
    nonzero=cpu_index.nonzero)

DTYPES = ["float32", "float64", "int8", "int32", "int64", "uint8", "bool"]
BIG = 2 * PARALLEL_MIN + 1
assert BIG > PARALLEL_MIN


def make(shape, dtype, seed=0, low=-5, high=5):
    """Values with many ties; floats also get NaN, -0.0 and +-inf."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "u":
        low = 0
    x = rng.integers(low, high, shape).astype(dtype)
    if dtype.kind == "f" and x.size:
        flat = x.reshape(-1)
        flat[::7] = np.nan
        flat[3::11] = -0.0
        flat[5::13] = -np.inf
        flat[6::17] = np.inf
    return x


def ref_sort(x, axis, descending):
    """numpy stable sort; descending by the reversal trick (ties keep order)."""
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    if not descending:
        idx = np.argsort(x, axis=axis, kind="stable")
    else:
        rev = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
        idx = x.shape[axis] - 1 - np.flip(rev, axis)
    return np.take_along_axis(x, idx, axis), idx


def assert_same(got, want):
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- sort


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("shape,axis", [((10,), 0), ((5, 40), 1), ((40, 5), 0),
                                        ((3, 300), -1), ((4, 3, 9), 1), ((1,), 0)])
def test_sort_matches_numpy(dtype, descending, shape, axis):
    x = make(shape, dtype)
    values, indices = sort.sort(x, axis, descending)
    want_v, want_i = ref_sort(x, axis, descending)
    assert_same(indices, want_i.astype(np.int64))
    assert_same(values, want_v)


def test_sort_ties_and_nan_order():
    x = np.array([2.0, np.nan, 1.0, -0.0, 2.0, -np.nan, 0.0, 1.0], np.float32)
    v, i = sort.sort(x, 0)
    assert i.tolist() == [3, 6, 2, 7, 0, 4, 1, 5]  # NaN (either sign) last
    assert np.signbit(v[0]) and not np.signbit(v[1])  # -0.0 and 0.0 tie: original order
    v, i = sort.sort(x, 0, descending=True)
    assert i.tolist() == [1, 5, 0, 4, 2, 7, 3, 6]  # NaN first, ties by ascending index
    assert np.isnan(v[:2]).all()


def test_sort_extreme_integers():
    for dtype in ("int8", "int32", "int64", "uint8"):
        info = np.iinfo(dtype)
        x = np.array([info.max, info.min, 0, info.max, info.min + 1, 1, info.min], dtype)
        for descending in (False, True):
            v, i = sort.sort(x, 0, descending)
            want_v, want_i = ref_sort(x, 0, descending)
            assert_same(i, want_i)
            assert_same(v, want_v)


@pytest.mark.parametrize("view", ["transposed", "negative", "strided"])
def test_sort_non_contiguous(view):
    base = make((30, 50), "float64", seed=3)
    x = {"transposed": base.T, "negative": base[::-1, ::-2], "strided": base[::3, 1::2]}[view]
    for axis in (0, 1):
        for descending in (False, True):
            v, i = sort.sort(x, axis, descending)
            want_v, want_i = ref_sort(x, axis, descending)
            assert_same(i, want_i)
            assert_same(v, want_v)


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4)])
def test_sort_empty(shape):
    x = np.zeros(shape, np.float32)
    for axis in range(len(shape)):
        v, i = sort.sort(x, axis)
        assert v.shape == i.shape == shape and i.dtype == np.int64


def test_sort_zero_d():
    v, i = sort.sort(np.array(3.5), -1)
    assert v.shape == () and v == 3.5 and i.shape == () and i == 0
    v, i = sort.topk(np.array(7, np.int32), 1)
    assert v == 7 and i == 0


@pytest.mark.parametrize("shape,axis", [((BIG,), 0), ((256, BIG // 256), 1),
                                        ((BIG // 64, 64), 0), ((BIG // 8, 8), 1)])
def test_sort_large(shape, axis):
    x = make(shape, "float32", seed=5, low=-1000, high=1000)
    for descending in (False, True):
        v, i = sort.sort(x, axis, descending)
        want_v, want_i = ref_sort(x, axis, descending)
        assert_same(i, want_i)
        assert_same(v, want_v)


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
@pytest.mark.parametrize("largest", [True, False])
def test_topk(dtype, largest):
    x = make((6, 20), dtype, seed=2)
    for axis, k in ((1, 5), (0, 3), (1, 0), (0, 6)):
        v, i = sort.topk(x, k, axis, largest)
        want_v, want_i = ref_sort(x, axis, largest)
        cut = (slice(None),) * axis + (slice(0, k),)
        assert_same(i, want_i[cut])
        assert_same(v, want_v[cut])


def test_topk_nan_is_largest():
    x = np.array([1.0, np.nan, 3.0, 2.0])
    v, i = sort.topk(x, 2)
    assert np.isnan(v[0]) and v[1] == 3.0 and i.tolist() == [1, 2]
    v, i = sort.topk(x, 2, largest=False)
    assert v.tolist() == [1.0, 2.0] and i.tolist() == [0, 3]


def test_sort_errors_at_the_seam():
    x = ember.zeros((3, 4))
    with pytest.raises(IndexError, match="sort"):
        x.sort(2)
    with pytest.raises(IndexError, match="sort"):
        ember.tensor(1.0).sort(1)
    with pytest.raises(TypeError, match="sort"):
        x.sort(1.0)
    with pytest.raises(TypeError, match="sort"):
        ember.zeros(3, dtype=ember.bool_).sort()
    with pytest.raises(ValueError, match="topk"):
        x.topk(5, 1)
    with pytest.raises(ValueError, match="topk"):
        x.topk(-1, 1)
    with pytest.raises(IndexError, match="topk"):
        x.topk(1, -3)


# ---------------------------------------------------------------- gather / scatter


def gather_cases():
    """(x, axis, index) with index smaller than x off the axis, and views."""
    rng = np.random.default_rng(7)
    base = make((4, 5, 6), "float64", seed=8)
    for x in (base, base.transpose(2, 0, 1), base[::-1, :, ::-2]):
        for axis in range(3):
            shape = list(x.shape)
            shape[axis] = 7
            shape[(axis + 1) % 3] -= 1
            yield x, axis, rng.integers(0, x.shape[axis], shape)


def crop(x, shape, axis):
    return x[tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(shape))]


def test_gather_matches_take_along_axis():
    for x, axis, idx in gather_cases():
        want = np.take_along_axis(crop(x, idx.shape, axis), idx, axis)
        assert_same(index.gather(x, axis, idx), want)
        # a non-contiguous index and a negative axis
        idx_t = np.ascontiguousarray(idx[::-1])[::-1]
        assert_same(index.gather(x, axis - 3, idx_t), want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", ["int8", "int32", "int64", "uint8"])
def test_gather_dtypes(dtype, index_dtype):
    x = make((3, 8), dtype, seed=9)
    idx = np.random.default_rng(1).integers(0, 8, (3, 5)).astype(index_dtype)
    assert_same(index.gather(x, 1, idx), np.take_along_axis(x, idx.astype(np.int64), 1))


def test_gather_edge_shapes():
    x = np.arange(5.0)
    assert_same(index.gather(x, 0, np.zeros(0, np.int64)), np.zeros(0))
    assert_same(index.gather(np.array(4.0), 0, np.array(0)), np.array(4.0))
    assert_same(index.gather(np.zeros((0, 3)), 0, np.zeros((0, 2), int)), np.zeros((0, 2)))
    assert_same(index.gather(np.array([9]), 0, np.array([0, 0])), np.array([9, 9]))


def test_gather_large():
    x = make((BIG // 128, 128), "float32", seed=10)
    for axis in (0, 1):
        idx = np.random.default_rng(axis).integers(0, x.shape[axis], x.shape)
        assert_same(index.gather(x, axis, idx), np.take_along_axis(x, idx, axis))
        assert_same(index.gather(x.T, 1 - axis, idx.T), np.take_along_axis(x.T, idx.T, 1 - axis))


def ref_scatter(x, axis, idx, values, reduce):
    """Element by element in C order of ``idx``: the last duplicate wins."""
    out = np.array(x, copy=True)
    values = np.broadcast_to(np.asarray(values, x.dtype), idx.shape)
    if reduce == "add":
        coords = list(np.indices(idx.shape))
        coords[axis] = idx
        with np.errstate(invalid="ignore"):  # inf + -inf
            np.add.at(out, tuple(coords), values)
        return out
    for pos in np.ndindex(idx.shape):
        target = list(pos)
        target[axis] = idx[pos]
        out[tuple(target)] = values[pos]
    return out


@pytest.mark.parametrize("reduce", ["assign", "add"])
def test_scatter_matches_reference(reduce):
    rng = np.random.default_rng(11)
    for x, axis, idx in gather_cases():
        values = rng.standard_normal(idx.shape)
        want = ref_scatter(x, axis, idx, values, reduce)
        got = index.scatter(x, axis, idx, values, reduce)
        if reduce == "add":
            np.testing.assert_allclose(got, want, rtol=1e-12)
            assert got.flags.c_contiguous
        else:
            assert_same(got, want)
        # a scalar and a negative-strided values array
        assert_same(index.scatter(x, axis, idx, 2.5, "assign"),
                    ref_scatter(x, axis, idx, 2.5, "assign"))
        flipped = values[::-1].copy()[::-1]
        np.testing.assert_allclose(index.scatter(x, axis, idx, flipped, reduce), want,
                                   rtol=1e-12)


def test_scatter_assign_duplicates_last_wins():
    x = np.zeros(3)
    got = index.scatter(x, 0, np.array([1, 1, 1, 2]), np.array([5.0, 6.0, 7.0, 8.0]))
    assert got.tolist() == [0.0, 7.0, 8.0]
    assert x.tolist() == [0.0, 0.0, 0.0]  # a new array, x untouched


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduce", ["assign", "add"])
def test_scatter_dtypes(dtype, reduce):
    x = make((4, 6), dtype, seed=12)
    idx = np.random.default_rng(3).integers(0, 4, (5, 6)).astype(np.int32)
    values = make((5, 6), dtype, seed=13)
    got = index.scatter(x, 0, idx, values, reduce)
    assert_same(got, ref_scatter(x, 0, idx.astype(np.int64), values, reduce))


def test_scatter_edge_shapes():
    x = np.arange(4.0)
    assert_same(index.scatter(x, 0, np.zeros(0, int), np.zeros(0)), x)
    assert_same(index.scatter(np.array(1.0), 0, np.array(0), 5.0, "add"), np.array(6.0))
    assert_same(index.scatter(np.array(1.0), 0, np.array(0), 5.0), np.array(5.0))


@pytest.mark.parametrize("reduce", ["assign", "add"])
def test_scatter_large(reduce):
    x = make((BIG // 64, 64), "float32", seed=14, low=0, high=3)
    x[np.isnan(x) | np.isinf(x)] = 1.0
    rng = np.random.default_rng(15)
    for axis in (0, 1):
        idx = rng.integers(0, x.shape[axis], x.shape)
        values = rng.integers(0, 4, x.shape).astype(np.float32)
        assert_same(index.scatter(x, axis, idx, values, reduce),
                    ref_scatter(x, axis, idx, values, reduce))


def test_gather_scatter_errors_at_the_seam():
    x = ember.zeros((4, 5))
    for name, call in (("gather", lambda i: x.gather(1, i)),
                       ("scatter", lambda i: x.scatter(1, i, 1.0))):
        with pytest.raises(ValueError, match=rf"{name}.*\(4, 3, 1\).*\(4, 5\)"):
            call(ember.zeros((4, 3, 1), dtype=ember.int64))
        with pytest.raises(ValueError, match=rf"{name}.*\(5, 2\).*\(4, 5\)"):
            call(ember.zeros((5, 2), dtype=ember.int64))
        with pytest.raises(IndexError, match=rf"{name}.*index 5 .*size 5"):
            call(ember.full((4, 2), 5))
        with pytest.raises(IndexError, match=rf"{name}.*index -1 .*size 5"):
            call(ember.tensor([[0, -1]] * 4))
        with pytest.raises(TypeError, match=name):
            call(ember.zeros((4, 2)))
        with pytest.raises(TypeError, match=name):
            call(ember.zeros((4, 2), dtype=ember.bool_))
    with pytest.raises(IndexError, match="gather"):
        x.gather(2, ember.zeros((4, 5), dtype=ember.int64))
    with pytest.raises(IndexError, match="gather"):
        ember.zeros((0, 3)).gather(0, ember.zeros((1, 3), dtype=ember.int64))
    with pytest.raises(ValueError, match="scatter.*values shape"):
        x.scatter(0, ember.zeros((2, 5), dtype=ember.int64), ember.zeros((2, 4)))
    with pytest.raises(ValueError, match="scatter.*reduce"):
        x.scatter(0, ember.zeros((2, 5), dtype=ember.int64), 1.0, reduce="mul")


# ---------------------------------------------------------------- index_select


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_select_matches_take(dtype):
    base = make((5, 6, 7), dtype, seed=16)
    rng = np.random.default_rng(4)
    for x in (base, base.transpose(1, 2, 0), base[::-1, ::2]):
        for axis in range(3):
            sel = rng.integers(0, x.shape[axis], 9).astype(np.int32)
            assert_same(index.index_select(x, axis, sel), np.take(x, sel, axis))
            assert_same(index.index_select(x, axis, sel[:0]), np.take(x, sel[:0], axis))


def test_index_select_edges_and_large():
    assert_same(index.index_select(np.array(3.0), 0, [0]), np.array(3.0))
    assert_same(index.index_select(np.arange(3), 0, [2]), np.array([2]))
    x = make((BIG // 256, 256), "float32", seed=17)
    for axis in (0, 1):
        sel = np.random.default_rng(axis).integers(0, x.shape[axis], x.shape[axis])
        assert_same(index.index_select(x, axis, sel), np.take(x, sel, axis))


def test_index_select_errors_at_the_seam():
    x = ember.zeros((3, 4))
    with pytest.raises(IndexError, match="index_select.*index 4 .*size 4"):
        x.index_select(1, ember.tensor([0, 4]))
    with pytest.raises(IndexError, match="index_select.*index -1 "):
        x.index_select(0, ember.tensor([-1], dtype=ember.int8))
    with pytest.raises(ValueError, match="index_select"):
        x.index_select(0, ember.zeros((1, 1), dtype=ember.int64))
    with pytest.raises(ValueError, match="index_select"):
        ember.tensor(1.0).index_select(0, ember.tensor([0, 0]))
    with pytest.raises(IndexError, match="index_select"):
        ember.tensor(1.0).index_select(0, ember.tensor([1]))
    with pytest.raises(TypeError, match="index_select"):
        x.index_select(0, ember.tensor([0.0]))
    with pytest.raises(IndexError, match="index_select"):
        x.index_select(2, ember.tensor([0]))


def test_index_range_check():
    x = ember.zeros(7)
    x.index_select(0, ember.tensor(np.array([0, 4, 2], np.uint8)))
    ember.zeros(0).index_select(0, ember.zeros(0, dtype=ember.int64))
    big = np.arange(BIG) % 7
    x.index_select(0, ember.tensor(big))
    big[-1] = 7
    with pytest.raises(IndexError, match="index_select: index 7 .*size 7"):
        x.index_select(0, ember.tensor(big))
    big[3] = -2
    with pytest.raises(IndexError, match="index_select: index -2 "):
        x.index_select(0, ember.tensor(big[::-1]))


# ---------------------------------------------------------------- nonzero


@pytest.mark.parametrize("dtype", DTYPES)
def test_nonzero_matches_argwhere(dtype):
    base = make((6, 7, 5), dtype, seed=18, low=-1, high=2)
    for x in (base, base.transpose(2, 0, 1), base[::-1, :, ::2], base[0, 0], base[:0]):
        got = index.nonzero(x)
        assert_same(got, np.argwhere(x).astype(np.int64))


def test_nonzero_float_zeros_and_nan():
    x = np.array([0.0, -0.0, np.nan, 1.0, -np.inf], np.float32)
    assert index.nonzero(x).tolist() == [[2], [3], [4]]


def test_nonzero_edges_and_large():
    assert index.nonzero(np.array(2)).shape == (1, 0)
    assert index.nonzero(np.array(0.0)).shape == (0, 0)
    assert index.nonzero(np.zeros((0, 3))).shape == (0, 2)
    assert index.nonzero(np.zeros(5, bool)).shape == (0, 1)
    x = make((BIG // 2, 2), "int8", seed=19, low=-1, high=2)
    assert_same(index.nonzero(x), np.argwhere(x))
    x = make((BIG,), "bool", seed=20)
    assert_same(index.nonzero(x), np.argwhere(x))
    assert_same(index.nonzero(x[::-1]), np.argwhere(x[::-1]))


def test_read_only_and_broadcast_inputs():
    x = np.broadcast_to(np.array([3.0, 1.0, 2.0]), (2, 3))  # read-only, stride 0
    assert_same(sort.sort(x, 1)[1], np.array([[1, 2, 0]] * 2))
    assert_same(sort.sort(x, 0)[1], np.array([[0] * 3, [1] * 3]))  # ties keep order
    idx = np.array([[2, 0], [1, 1]])
    assert_same(index.gather(x, 1, idx), np.take_along_axis(x, idx, 1))
    assert_same(index.index_select(x, 0, [1, 1, 0]), np.take(x, [1, 1, 0], 0))
    assert_same(index.nonzero(x), np.argwhere(x))
    assert_same(index.scatter(x, 1, idx, np.broadcast_to(np.array(7.0), idx.shape)),
                ref_scatter(x, 1, idx, 7.0, "assign"))
