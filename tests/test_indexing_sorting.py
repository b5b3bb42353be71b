"""Indexing, layout, joining, sorting and matmul against numpy.

Layout ops are views in Ember, but the contract is about values: each test compares the
result with numpy's and checks that the input is unchanged.
"""
import math

import numpy as np
import pytest

import ember
from checks import as_tensor, check
from ember.backends.cpu.elementwise import PARALLEL_MIN


def arange_array(shape, dtype=np.float64):
    return np.arange(math.prod(shape)).reshape(shape).astype(dtype)


# --- __getitem__ --------------------------------------------------------------------------------
GETITEM = {
    "int": 1,
    "neg_int": -1,
    "two_ints": (1, 2),
    "three_neg_ints": (-1, -2, -3),
    "slice": slice(1, 3),
    "slice_step": slice(None, None, 2),
    "slice_neg_step": slice(None, None, -1),
    "slice_neg_start": slice(-2, None),
    "slice_rev_step2": slice(3, 0, -2),
    "slice_out_of_bounds": slice(2, 100),
    "slice_empty": slice(3, 1),
    "col": (slice(None), 2),
    "ellipsis_int": (Ellipsis, 1),
    "none_int": (None, 1),
    "int_none_negstep": (1, None, slice(None, None, -2)),
    "ellipsis_none": (Ellipsis, None),
    "slice_ellipsis_step": (slice(1, None), Ellipsis, slice(None, None, 3)),
    "none_ellipsis_none": (None, Ellipsis, None),
    "all_ints_0d": (1, 2, 3),
    "mixed": (-1, slice(None, None, -2), None, slice(1, 5, 2)),
    "ellipsis_only": Ellipsis,
    "empty_tuple": (),
}


@pytest.mark.parametrize("key", list(GETITEM))
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_getitem(key, dtype):
    a = arange_array((4, 5, 6)).astype(dtype)
    idx = GETITEM[key]
    check(as_tensor(a)[idx], a[idx])


@pytest.mark.parametrize("idx", [(), Ellipsis, None, (None, None)], ids=["()", "...", "None", "None,None"])
def test_getitem_0d(idx):
    a = np.array(3.5)
    check(as_tensor(a)[idx], a[idx])


@pytest.mark.parametrize("key", ["int", "slice_neg_step", "mixed", "col"])
def test_getitem_of_non_contiguous(key):
    a = arange_array((6, 5, 4))
    v = a.transpose(2, 1, 0)[::-1]
    t = as_tensor(a).permute(2, 1, 0)[::-1]
    check(t[GETITEM[key]], v[GETITEM[key]])


def test_getitem_result_feeds_ops():
    a = arange_array((4, 5))
    t = as_tensor(a)
    check(t[::2, ::-1] * 2 + t[1::2, :], a[::2, ::-1] * 2 + a[1::2, :])


def test_iteration_and_len():
    a = arange_array((3, 2))
    t = as_tensor(a)
    assert len(t) == 3
    rows = list(t)
    assert len(rows) == 3
    for r, ar in zip(rows, a):
        check(r, ar)


# --- tensor indices in [] ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_getitem_bool_mask(dtype, rng):
    a = np.asarray(rng.integers(0, 2, (4, 5))).astype(dtype)
    m = rng.random((4, 5)) < 0.5
    check(as_tensor(a)[as_tensor(m)], a[m])


def test_getitem_bool_mask_all_false_and_0d():
    a = arange_array((2, 3))
    check(as_tensor(a)[as_tensor(np.zeros((2, 3), bool))], np.zeros((0,)))
    check(as_tensor(np.array(5.0))[as_tensor(np.array(True))], np.array([5.0]))


@pytest.mark.parametrize("idx", [[2, 0, 2], [], [-1, 0], [4], [-5]],
                         ids=["dups", "empty", "negative", "out_of_range", "negative_out_of_range"])
def test_getitem_int_tensor(idx):
    a = arange_array((4, 3))
    i = np.array(idx, np.int64)
    if ((i < -4) | (i >= 4)).any():
        with pytest.raises(IndexError):  # indices lie in [-n, n) (negative: from the end, numpy)
            as_tensor(a)[as_tensor(i)]
        return
    check(as_tensor(a)[as_tensor(i)], a[i])


def test_getitem_int32_tensor_on_transposed():
    a = arange_array((4, 3))
    i = np.array([1, 0], np.int32)
    check(as_tensor(a).T[as_tensor(i)], a.T[i])


# --- slice_assign ------------------------------------------------------------------------------
SLICE_ASSIGN = {
    "rows_tensor": (slice(0, 2), lambda rng: rng.standard_normal((2, 5, 6))),
    "int_scalar": (1, lambda rng: 7.0),
    "col_tensor": ((slice(None), 0), lambda rng: rng.standard_normal((4, 6))),
    "ellipsis_step_broadcast": ((Ellipsis, slice(None, None, 2)), lambda rng: rng.standard_normal(3)),
    "neg_step": ((slice(None, None, -1), slice(1, 4)), lambda rng: rng.standard_normal((4, 3, 6))),
    "single_element": ((1, 2, 3), lambda rng: -1.0),
    "none_in_index": ((None, 0), lambda rng: rng.standard_normal((1, 5, 6))),
    "empty_slice": (slice(2, 2), lambda rng: 1.0),
    "0d_tensor_value": ((0, 0), lambda rng: np.array(9.0)),
}


@pytest.mark.parametrize("key", list(SLICE_ASSIGN))
def test_slice_assign(key, rng):
    a = arange_array((4, 5, 6))
    idx, make = SLICE_ASSIGN[key]
    v = make(rng)
    want = a.copy()
    want[idx] = v
    t = as_tensor(a)
    got = t.slice_assign(idx, as_tensor(np.asarray(v)) if isinstance(v, np.ndarray) else v)
    check(got, want)
    check(t, arange_array((4, 5, 6)))  # a value: the original is unchanged


@pytest.mark.parametrize("dtype", ["int32", "bool", "float32"])
def test_slice_assign_casts_values_to_dtype(dtype):
    a = np.zeros((3, 4), dtype)
    v = np.array([1, 0, 1, 1], np.int64)
    want = a.copy()
    want[1] = v
    check(as_tensor(a).slice_assign(1, as_tensor(v)), want)


def test_slice_assign_on_non_contiguous():
    a = arange_array((4, 5))
    want = a.T.copy()
    want[::2, 1] = -1
    check(as_tensor(a).T.slice_assign((slice(None, None, 2), 1), -1.0), want)


def test_slice_assign_on_0d():
    check(as_tensor(np.array(1.0)).slice_assign((), 5.0), np.array(5.0))


# --- narrow / chunk / split ------------------------------------------------------------------------
@pytest.mark.parametrize("dim, start, length", [(0, 1, 2), (1, 0, 5), (-1, 2, 3), (1, -3, 2),
                                                (0, 4, 0), (2, 5, 1)])
def test_narrow(dim, start, length):
    a = arange_array((4, 5, 6))
    d = dim % 3
    s = start % a.shape[d] if start < 0 else start
    want = np.take(a, np.arange(s, s + length), axis=d)
    check(as_tensor(a).narrow(dim, start, length), want)


def ref_chunk(a, chunks, dim):
    n = a.shape[dim]
    size = max(1, -(-n // chunks))
    return ref_split(a, size, dim)


def ref_split(a, size, dim):
    n = a.shape[dim]
    if isinstance(size, int):
        bounds = list(range(size, n, size))
    else:
        bounds = list(np.cumsum(size)[:-1])
    return np.split(a, bounds, axis=dim)


@pytest.mark.parametrize("shape, chunks, dim", [((7, 3), 3, 0), ((6, 4), 4, 0), ((2, 5), 2, 1),
                                                ((2, 5), 10, -1), ((4, 4), 1, 0), ((6,), 3, 0)])
def test_chunk(shape, chunks, dim):
    a = arange_array(shape)
    got = as_tensor(a).chunk(chunks, dim)
    want = ref_chunk(a, chunks, dim)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        check(g, w)


@pytest.mark.parametrize("shape, size, dim", [((7, 3), 3, 0), ((6, 4), 2, 1), ((5, 2), [1, 4], 0),
                                              ((2, 6), [2, 0, 4], -1), ((4,), 4, 0), ((4,), 10, 0)])
def test_split(shape, size, dim):
    a = arange_array(shape)
    got = as_tensor(a).split(size, dim)
    want = ref_split(a, size, dim)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        check(g, w)


# --- cat / stack / repeat ------------------------------------------------------------------------------
@pytest.mark.parametrize("shapes, dim", [
    ([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 0)], 1), ([(2, 3, 4), (2, 2, 4)], -2),
    ([(0, 3), (2, 3)], 0), ([(5,)], 0), ([(1,), (2,), (3,)], -1),
], ids=lambda v: str(v))
def test_cat(shapes, dim, rng):
    arrays = [rng.standard_normal(s) for s in shapes]
    check(ember.cat([as_tensor(x) for x in arrays], dim), np.concatenate(arrays, axis=dim))


@pytest.mark.parametrize("dtypes", [("int32", "float32"), ("bool", "int64"), ("int8", "uint8"),
                                    ("float32", "float64")], ids=lambda v: "+".join(v))
def test_cat_promotes(dtypes, rng):
    arrays = [np.asarray(rng.integers(0, 3, (2, 2))).astype(d) for d in dtypes]
    check(ember.cat([as_tensor(x) for x in arrays], 1), np.concatenate(arrays, axis=1))


def test_cat_non_contiguous(rng):
    a = rng.standard_normal((3, 4))
    b = rng.standard_normal((4, 2))
    check(ember.cat([as_tensor(a)[:, ::-1], as_tensor(b).T], 0), np.concatenate([a[:, ::-1], b.T], 0))


def test_cat_accepts_a_generator():
    a = arange_array((2, 2))
    check(ember.cat(as_tensor(a) for _ in range(3)), np.concatenate([a] * 3))


@pytest.mark.parametrize("shape, dim", [((3,), 0), ((3,), 1), ((3,), -1), ((2, 3), 1), ((2, 3), -3),
                                        ((), 0)], ids=lambda v: str(v))
def test_stack(shape, dim, rng):
    arrays = [np.asarray(rng.standard_normal(shape)) for _ in range(3)]
    check(ember.stack([as_tensor(x) for x in arrays], dim), np.stack(arrays, axis=dim))


@pytest.mark.parametrize("shape, sizes", [((2, 3), (2, 1)), ((2, 3), (1, 3)), ((3,), (2, 2)),
                                          ((2, 1, 2), (1, 2, 3)), ((2, 3), (0, 1)), ((), (3,))],
                         ids=lambda v: str(v))
def test_repeat(shape, sizes):
    a = np.asarray(arange_array(shape) if shape else np.array(4.0))
    check(as_tensor(a).repeat(*sizes), np.tile(a, sizes))
    check(as_tensor(a).repeat(sizes), np.tile(a, sizes))


def test_repeat_non_contiguous():
    a = arange_array((3, 2))
    check(as_tensor(a).T.repeat(2, 1), np.tile(a.T, (2, 1)))


# --- reshape family ------------------------------------------------------------------------------------
@pytest.mark.parametrize("new", [(6, 4), (-1,), (2, -1, 3), (24,), (1, 24, 1), (4, 3, 2)],
                         ids=lambda v: str(v))
@pytest.mark.parametrize("source", ["contiguous", "transposed"])
def test_reshape(new, source):
    a = arange_array((2, 3, 4))
    t = as_tensor(a)
    if source == "transposed":
        a, t = a.transpose(2, 0, 1), t.permute(2, 0, 1)
    check(t.reshape(*new), a.reshape(new))
    check(t.reshape(new), a.reshape(new))


def test_reshape_0d_and_empty():
    check(as_tensor(np.array(2.0)).reshape(1, 1), np.ones((1, 1)) * 2)
    check(as_tensor(np.ones((1, 1))).reshape(()), np.array(1.0))
    check(as_tensor(np.zeros((3, 0))).reshape(0, 5), np.zeros((0, 5)))
    check(as_tensor(np.zeros((3, 0))).reshape(-1, 3), np.zeros((0, 3)))


def test_flatten():
    a = arange_array((2, 3, 4))
    check(as_tensor(a).flatten(), a.reshape(-1))
    check(as_tensor(a).flatten(1), a.reshape(2, 12))
    check(as_tensor(a).flatten(0, 1), a.reshape(6, 4))
    check(as_tensor(a).permute(2, 1, 0).flatten(), a.T.reshape(-1))
    check(as_tensor(np.array(3.0)).flatten(), np.array([3.0]))


def test_squeeze_unsqueeze():
    a = arange_array((1, 3, 1, 2))
    t = as_tensor(a)
    check(t.squeeze(), a.squeeze())
    check(t.squeeze(0), a.squeeze(0))
    check(t.squeeze(-2), a.squeeze(2))
    check(t.squeeze((0, 2)), a.squeeze((0, 2)))
    check(t.squeeze(1), a)  # not size 1: unchanged (PyTorch, docs/decisions.md)
    check(t.unsqueeze(0), a[None])
    check(t.unsqueeze(-1), a[..., None])
    check(t.unsqueeze(2), np.expand_dims(a, 2))
    check(as_tensor(np.array(1.0)).unsqueeze(0), np.array([1.0]))
    check(as_tensor(np.array([1.0])).squeeze(), np.array(1.0))


@pytest.mark.parametrize("perm", [(0, 1, 2), (2, 0, 1), (1, 0, 2), (-1, 0, 1)], ids=lambda v: str(v))
def test_permute(perm):
    a = arange_array((2, 3, 4))
    check(as_tensor(a).permute(*perm), a.transpose(perm))
    check(as_tensor(a).permute(list(perm)), a.transpose(perm))


def test_transpose_swap_dims_T():
    a = arange_array((2, 3, 4))
    t = as_tensor(a)
    check(t.transpose(), a.swapaxes(-2, -1))
    check(t.transpose(0, 2), a.swapaxes(0, 2))
    check(t.swap_dims(0, 1), a.swapaxes(0, 1))
    check(t.transpose(-1, 0), a.swapaxes(-1, 0))
    m = arange_array((3, 5))
    check(as_tensor(m).T, m.T)
    check(as_tensor(m).T.T, m)
    check(as_tensor(np.arange(3.0)).transpose(), np.arange(3.0))


@pytest.mark.parametrize("src, new", [((3, 1), (3, 4)), ((1,), (2, 5)), ((3, 1), (2, 3, 4)),
                                      ((3, 1), (-1, 4)), ((), (2, 2)), ((2, 1), (2, 1)),
                                      ((1, 3), (0, 3))], ids=lambda v: str(v))
def test_expand(src, new):
    a = np.asarray(arange_array(src) if src else np.array(7.0))
    want = np.broadcast_to(a, tuple(n if n != -1 else a.shape[i - (len(new) - a.ndim)]
                                    for i, n in enumerate(new)))
    check(as_tensor(a).expand(*new), want)
    check(as_tensor(a).expand(new), want)


def test_expand_then_compute_does_not_alias():
    a = np.arange(3.0).reshape(3, 1)
    e = as_tensor(a).expand(3, 4)
    check(e + 1, np.broadcast_to(a, (3, 4)) + 1)
    check(e.contiguous(), np.broadcast_to(a, (3, 4)))


@pytest.mark.parametrize("dims", [0, 1, -1, (0, 2), (0, 1, 2)], ids=lambda v: str(v))
def test_flip(dims):
    a = arange_array((2, 3, 4))
    check(as_tensor(a).flip(dims), np.flip(a, dims))


def test_flip_non_contiguous():
    a = arange_array((3, 4))
    check(as_tensor(a).T.flip(0), np.flip(a.T, 0))
    check(as_tensor(a)[::-1].flip((0, 1)), np.flip(a[::-1]))


def test_flip_0d():
    check(as_tensor(np.array(1.0)).flip(0), np.array(1.0))
    check(as_tensor(np.array(1.0)).flip(()), np.array(1.0))


# --- index_select / gather / scatter -------------------------------------------------------------------
@pytest.mark.parametrize("dim, idx", [(0, [2, 0, 2]), (1, [4, 0]), (-1, [1, 1, 1, 1]), (2, []),
                                      (1, [3])], ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "uint8"])
def test_index_select(dim, idx, dtype):
    a = arange_array((3, 5, 4)).astype(dtype)
    i = np.array(idx, np.int64)
    check(as_tensor(a).index_select(dim, as_tensor(i)), np.take(a, i, axis=dim))


def test_index_select_non_contiguous_and_int32_indices():
    a = arange_array((3, 5))
    i = np.array([4, 1, 1], np.int32)
    check(as_tensor(a).T.index_select(0, as_tensor(i)), np.take(a.T, i, axis=0))
    check(as_tensor(a)[:, ::-1].index_select(1, as_tensor(i[::-1].copy())), np.take(a[:, ::-1], i[::-1], 1))


def ref_gather(x, dim, idx):
    grids = list(np.indices(idx.shape, sparse=True))
    grids[dim] = idx
    return x[tuple(grids)]


@pytest.mark.parametrize("xshape, ishape, dim", [
    ((3, 4), (3, 4), 0), ((3, 4), (3, 4), 1), ((3, 4), (2, 6), 1), ((3, 4), (5, 2), 0),
    ((2, 3, 4), (2, 3, 4), -1), ((2, 3, 4), (1, 2, 3), 1), ((5,), (8,), 0), ((3, 4), (0, 4), 0),
], ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_gather(xshape, ishape, dim, dtype, rng):
    x = np.asarray(rng.integers(0, 9, xshape)).astype(dtype)
    idx = rng.integers(0, xshape[dim], ishape)
    check(as_tensor(x).gather(dim, as_tensor(idx)), ref_gather(x, dim % len(xshape), idx))


def test_gather_non_contiguous(rng):
    x = rng.standard_normal((4, 3))
    idx = rng.integers(0, 4, (3, 5))
    check(as_tensor(x).T.gather(1, as_tensor(idx)), ref_gather(x.T, 1, idx))
    idx2 = rng.integers(0, 3, (4, 3)).astype(np.int32)
    check(as_tensor(x).gather(1, as_tensor(idx2).flip(0)), ref_gather(x, 1, idx2[::-1]))


def ref_scatter(x, dim, idx, vals, reduce):
    out = x.copy()
    vals = np.broadcast_to(vals, idx.shape)
    for pos in np.ndindex(*idx.shape):  # C order: with "assign" the last write wins
        target = list(pos)
        target[dim] = idx[pos]
        if reduce == "add":
            out[tuple(target)] += vals[pos]
        else:
            out[tuple(target)] = vals[pos]
    return out


@pytest.mark.parametrize("reduce", ["assign", "add"])
@pytest.mark.parametrize("xshape, ishape, dim", [
    ((3, 4), (3, 4), 0), ((3, 4), (2, 4), 1), ((3, 4), (3, 7), 1), ((2, 3, 4), (2, 2, 4), -2),
    ((6,), (10,), 0), ((3, 4), (0, 4), 0),
], ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", ["float64", "int64"])
def test_scatter(xshape, ishape, dim, reduce, dtype, rng):
    x = np.asarray(rng.integers(0, 9, xshape)).astype(dtype)
    idx = rng.integers(0, xshape[dim], ishape)  # with duplicates
    vals = np.asarray(rng.integers(-9, 0, ishape)).astype(dtype)
    t = as_tensor(x)
    got = t.scatter(dim, as_tensor(idx), as_tensor(vals), reduce=reduce)
    check(got, ref_scatter(x, dim % len(xshape), idx, vals, reduce))
    check(t, x)  # a value: the input is unchanged


def test_scatter_default_is_assign_and_last_write_wins():
    x = np.zeros(3)
    idx = np.array([1, 1, 1, 0])
    vals = np.array([1.0, 2.0, 3.0, 4.0])
    check(as_tensor(x).scatter(0, as_tensor(idx), as_tensor(vals)), np.array([4.0, 3.0, 0.0]))
    check(as_tensor(x).scatter(0, as_tensor(idx), as_tensor(vals), reduce="add"),
          np.array([4.0, 6.0, 0.0]))


@pytest.mark.parametrize("reduce", ["assign", "add"])
def test_scatter_scalar_value(reduce):
    x = np.zeros((2, 3))
    idx = np.array([[0, 2], [1, 1]])
    got = as_tensor(x).scatter(1, as_tensor(idx), 5.0, reduce=reduce)
    check(got, ref_scatter(x, 1, idx, np.array(5.0), reduce))


def test_scatter_bool():
    x = np.zeros((2, 3), bool)
    idx = np.array([[0, 2], [1, 1]])
    vals = np.array([[True, True], [True, False]])
    check(as_tensor(x).scatter(1, as_tensor(idx), as_tensor(vals)), ref_scatter(x, 1, idx, vals, "assign"))


def test_indexing_ops_above_parallel_threshold(rng):
    n = PARALLEL_MIN * 2 + 3
    x = rng.standard_normal(n)
    idx = rng.integers(0, n, n)
    check(as_tensor(x).index_select(0, as_tensor(idx)), x[idx])
    check(as_tensor(x).gather(0, as_tensor(idx)), x[idx])
    check(as_tensor(x).scatter(0, as_tensor(idx), as_tensor(np.ones(n)), reduce="add"),
          ref_scatter_add_1d(x, idx, np.ones(n)))
    m = rng.random((n // 3, 3)) < 0.5
    check(as_tensor(m).argwhere(), np.argwhere(m))


def ref_scatter_add_1d(x, idx, vals):
    out = x.copy()
    np.add.at(out, idx, vals)
    return out


# --- nonzero / argwhere --------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4), (0,), (3, 0)], ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", ["bool", "int32", "float64"])
def test_nonzero_argwhere(shape, dtype, rng):
    a = np.asarray(np.where(rng.random(shape) < 0.4, rng.integers(1, 3, shape), 0)).astype(dtype)
    t = as_tensor(a)
    nz = t.nonzero()
    want = np.nonzero(a)
    assert len(nz) == len(want)
    for g, w in zip(nz, want):
        check(g, w.astype(np.int64))
    check(t.argwhere(), np.argwhere(a).astype(np.int64))


def test_nonzero_special_floats():
    a = np.array([0.0, -0.0, np.nan, 1e-300, -np.inf])
    check(as_tensor(a).argwhere(), np.argwhere(a))


def test_argwhere_non_contiguous(rng):
    a = rng.random((4, 5)) < 0.5
    check(as_tensor(a).T[::-1].argwhere(), np.argwhere(a.T[::-1]))


# --- sort / argsort / topk -----------------------------------------------------------------------------
def ref_sort_indices(a, axis, descending):
    """Stable sort indices; NaN is the largest value (last ascending, first descending)."""
    a = np.moveaxis(a, axis, -1)
    out = np.empty(a.shape, np.int64)
    for pos in np.ndindex(*a.shape[:-1]):
        row = a[pos]

        def key(i):
            v = row[i]
            return (1, 0.0) if (row.dtype.kind == "f" and np.isnan(v)) else (0, v)
        # Python's sort is stable, also with reverse=True
        out[pos] = sorted(range(row.shape[0]), key=key, reverse=descending)
    return np.moveaxis(out, -1, axis)


def ref_sort(a, axis, descending):
    idx = ref_sort_indices(a, axis, descending)
    return np.take_along_axis(a, idx, axis), idx


def sort_input(rng, shape, dtype, nan=False):
    dtype = np.dtype(dtype)
    lo = 0 if dtype.kind == "u" else -3
    a = np.asarray(rng.integers(lo, 4, shape)).astype(dtype)  # many ties: stability matters
    if dtype.kind == "f":
        a = a + np.asarray(np.where(rng.random(shape) < 0.3, 0.5, 0.0)).astype(dtype)
        if nan:
            a = np.where(rng.random(shape) < 0.2, np.nan, a).astype(dtype)
    return a


SORT_SHAPES = [((9,), -1), ((4, 6), -1), ((4, 6), 0), ((2, 3, 5), 1), ((0,), 0), ((3, 0), 1),
               ((3, 0), 0), ((1,), 0)]


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize("shape, dim", SORT_SHAPES, ids=[f"{s}-dim{d}" for s, d in SORT_SHAPES])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "int8"])
def test_sort_with_indices(dtype, shape, dim, descending, rng):
    a = sort_input(rng, shape, dtype, nan=True)
    want_v, want_i = ref_sort(a, dim, descending)
    t = as_tensor(a)
    v, i = t.sort_with_indices(dim, descending=descending)
    check(v, want_v)
    check(i, want_i)
    check(t.sort(dim, descending), want_v)
    check(t.argsort(dim, descending), want_i)
    check(t, a)


def test_sort_defaults_last_dim_ascending(rng):
    a = rng.standard_normal((3, 5))
    check(as_tensor(a).sort(), np.sort(a, -1))
    check(as_tensor(a).argsort(), np.argsort(a, -1, kind="stable"))
    check(as_tensor(a).sort(descending=True), -np.sort(-a, -1))


def test_sort_stability_descending():
    a = np.array([1, 3, 1, 3, 2, 1], np.int64)
    check(as_tensor(a).argsort(descending=True), np.array([1, 3, 4, 0, 2, 5]))
    check(as_tensor(a).argsort(), np.array([0, 2, 5, 4, 1, 3]))


def test_sort_nan_and_inf():
    a = np.array([np.nan, 1.0, -np.inf, np.inf, np.nan, -1.0])
    v, i = as_tensor(a).sort_with_indices()
    check(v, np.array([-np.inf, -1.0, 1.0, np.inf, np.nan, np.nan]))
    check(i, np.array([2, 5, 1, 3, 0, 4]))
    v, i = as_tensor(a).sort_with_indices(descending=True)
    check(v, np.array([np.nan, np.nan, np.inf, 1.0, -1.0, -np.inf]))
    check(i, np.array([0, 4, 3, 1, 5, 2]))


def test_sort_non_contiguous(rng):
    a = sort_input(rng, (5, 6), "float64")
    v = a.T[::-1]
    want_v, want_i = ref_sort(v, 1, False)
    got_v, got_i = as_tensor(a).T[::-1].sort_with_indices(1)
    check(got_v, want_v)
    check(got_i, want_i)


def test_sort_0d():
    v, i = as_tensor(np.array(2.0)).sort_with_indices()
    check(v, np.array(2.0))
    check(i, np.array(0))


def test_sort_large(rng):
    a = rng.standard_normal((PARALLEL_MIN * 2 + 3) // 64 * 64).astype(np.float32).reshape(64, -1)
    check(as_tensor(a).sort(1), np.sort(a, 1))
    check(as_tensor(a).argsort(1), np.argsort(a, 1, kind="stable"))
    flat = rng.integers(-1000, 1000, PARALLEL_MIN * 2 + 3)
    check(as_tensor(flat).sort(), np.sort(flat))


@pytest.mark.parametrize("shape, k, dim", [((9,), 3, -1), ((4, 6), 1, 1), ((4, 6), 4, 0),
                                           ((2, 3, 5), 5, -1), ((4, 6), 0, 1), ((5,), 5, 0)],
                         ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_topk(shape, k, dim, dtype, rng):
    a = sort_input(rng, shape, dtype)
    want_v, want_i = ref_sort(a, dim, True)
    want_v = np.take(want_v, np.arange(k), axis=dim)
    want_i = np.take(want_i, np.arange(k), axis=dim)
    t = as_tensor(a)
    check(t.topk(k, dim), want_v)
    v, i = t.topk_with_indices(k, dim)
    check(v, want_v)
    check(i, want_i)


def test_topk_default_dim_and_nan():
    a = np.array([[1.0, np.nan, 5.0, 3.0], [2.0, 2.0, -1.0, 7.0]])
    check(as_tensor(a).topk(2), np.array([[np.nan, 5.0], [7.0, 2.0]]))


# --- one_hot / tril / triu ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5,), (2, 3), (), (0,)], ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_one_hot(shape, dtype, rng):
    a = np.asarray(rng.integers(0, 4, shape)).astype(dtype)
    want = (a[..., None] == np.arange(4)).astype(np.int64)
    check(as_tensor(a).one_hot(4), want)


@pytest.mark.parametrize("diagonal", [0, 1, -1, 3, -5])
@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (2, 3, 4)], ids=lambda v: str(v))
def test_tril_triu(shape, diagonal, rng):
    a = rng.standard_normal(shape)
    check(as_tensor(a).tril(diagonal), np.tril(a, diagonal))
    check(as_tensor(a).triu(diagonal), np.triu(a, diagonal))


def test_tril_triu_int_and_bool_keep_dtype():
    a = np.arange(1, 10, dtype=np.int32).reshape(3, 3)
    check(as_tensor(a).tril(), np.tril(a))
    b = np.ones((3, 3), bool)
    check(as_tensor(b).triu(1), np.triu(b, 1))


# --- matmul --------------------------------------------------------------------------------------------------
MATMUL = [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
          ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((1, 4), (4, 1)), ((3, 0), (0, 4)),
          ((0, 3), (3, 2)), ((2, 3, 4), (4,))]


@pytest.mark.parametrize("a_shape, b_shape", MATMUL, ids=[f"{a}@{b}" for a, b in MATMUL])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_matmul(a_shape, b_shape, dtype, rng):
    a = np.asarray(rng.integers(-3, 4, a_shape)).astype(dtype)
    b = np.asarray(rng.integers(-3, 4, b_shape)).astype(dtype)
    want = np.matmul(a, b)
    check(as_tensor(a) @ as_tensor(b), want)
    check(as_tensor(a).matmul(as_tensor(b)), want)


@pytest.mark.parametrize("dtypes", [("int32", "float32"), ("int32", "int64"), ("float32", "float64"),
                                    ("int8", "int8")], ids=lambda v: "@".join(v))
def test_matmul_promotes(dtypes, rng):
    a = np.asarray(rng.integers(-3, 4, (2, 3))).astype(dtypes[0])
    b = np.asarray(rng.integers(-3, 4, (3, 2))).astype(dtypes[1])
    check(as_tensor(a) @ as_tensor(b), np.matmul(a, b))


def test_matmul_non_contiguous(rng):
    a = rng.standard_normal((4, 3))
    b = rng.standard_normal((5, 4))
    check(as_tensor(a).T @ as_tensor(b).T, a.T @ b.T)
    check(as_tensor(a)[::-1].T @ as_tensor(b)[::2].T, a[::-1].T @ b[::2].T)
