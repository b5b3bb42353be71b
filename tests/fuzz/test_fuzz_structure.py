"""Fuzz: layout and views, indexing, gather/scatter, sorting and matmul against numpy.

A chain of random layout ops (reshape with -1, permute, transpose, flip, basic indexing with
ints, steps, None and ``...``, expand, squeeze/unsqueeze, narrow, split, repeat, cat, stack,
contiguous) runs on an Ember tensor and on the numpy array holding the same values; at the
end the values must agree, and an elementwise op over the final view must agree too (the
kernels read views through their strides).
"""
import functools

import numpy as np
import pytest
from hypothesis import strategies as st

import ember

from .settings import fuzz
from .strategies import (ALL, NUMERIC, assert_matches, assert_raises_clearly, edtype, kind,
                         numpy_call, operands, shapes)


def _divisor_shape(draw, n):
    """A shape with ``n`` elements (up to 4 dims), one entry maybe -1."""
    if n == 0:
        dims = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
        if 0 not in dims:
            dims[0] = 0
        return tuple(dims)
    dims, rest = [], n
    for _ in range(draw(st.integers(0, 3))):
        divs = [d for d in range(1, rest + 1) if rest % d == 0]
        d = draw(st.sampled_from(divs))
        dims.append(d)
        rest //= d
    dims.append(rest)
    dims = draw(st.permutations(dims))
    if draw(st.booleans()):
        i = draw(st.integers(0, len(dims) - 1))
        dims = dims[:i] + [-1] + dims[i + 1:]
    return tuple(dims)


@st.composite
def index_tuple(draw, shape):
    """A basic index: ints (negative too), slices with any step, None and one ``...``."""
    out, d = [], 0
    ellipsis = False
    while d < len(shape) and draw(st.integers(0, 4)):
        n = shape[d]
        choice = draw(st.integers(0, 5))
        if choice == 0 and n:
            out.append(draw(st.integers(-n, n - 1)))
        elif choice == 1:
            out.append(None)
            continue
        elif choice == 2 and not ellipsis:
            out.append(Ellipsis)
            ellipsis = True
            d = len(shape) - draw(st.integers(0, len(shape) - d))
            continue
        else:
            start = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            step = draw(st.one_of(st.none(), st.sampled_from([1, 2, 3, -1, -2, -3])))
            out.append(slice(start, stop, step))
        d += 1
    return tuple(out)


@st.composite
def layout_op(draw, shape):
    """(description, ember function, numpy function) of one layout op valid for ``shape``."""
    nd = len(shape)
    n = int(np.prod(shape)) if shape else 1
    choices = ["reshape", "index", "contiguous", "unsqueeze", "squeeze", "expand", "repeat", "stack"]
    if nd:
        choices += ["permute", "transpose", "flip", "narrow", "split", "cat", "flatten"]
    op = draw(st.sampled_from(choices))
    if op == "reshape":
        new = _divisor_shape(draw, n)
        return f"reshape{new}", lambda t: t.reshape(*new), lambda a: a.reshape(new)
    if op == "index":
        idx = draw(index_tuple(shape))
        return f"[{idx}]", lambda t: t[idx], lambda a: a[idx]
    if op == "contiguous":
        return "contiguous", lambda t: t.contiguous(), lambda a: np.array(a, order="C")
    if op == "unsqueeze":
        d = draw(st.integers(-nd - 1, nd))
        return f"unsqueeze({d})", lambda t: t.unsqueeze(d), lambda a: np.expand_dims(a, d)
    if op == "squeeze":
        ones = [d for d in range(nd) if shape[d] == 1]
        if not ones or draw(st.booleans()):
            return "squeeze()", lambda t: t.squeeze(), lambda a: np.squeeze(a)
        d = draw(st.sampled_from(ones))
        return f"squeeze({d})", lambda t: t.squeeze(d), lambda a: np.squeeze(a, d)
    if op == "expand":
        lead = draw(st.lists(st.integers(0, 3), max_size=1 if nd >= 4 else 2))
        new = tuple(lead) + tuple(draw(st.integers(0, 3)) if s == 1 else s for s in shape)
        return (f"expand{new}", lambda t: t.expand(*new),
                lambda a: np.broadcast_to(a, new))
    if op == "repeat":
        reps = tuple(draw(st.integers(0, 2)) for _ in range(nd + draw(st.integers(0, 1))))
        if not reps:
            reps = (2,)
        return (f"repeat{reps}", lambda t: t.repeat(*reps),
                lambda a: np.tile(a, reps))
    if op == "stack":
        d = draw(st.integers(-nd - 1, nd))
        return (f"stack(dim={d})", lambda t: ember.stack([t, t], d),
                lambda a: np.stack([a, a], d))
    if op == "permute":
        perm = tuple(draw(st.permutations(range(nd))))
        return f"permute{perm}", lambda t: t.permute(*perm), lambda a: a.transpose(perm)
    if op == "transpose":
        d0, d1 = draw(st.integers(-nd, nd - 1)), draw(st.integers(-nd, nd - 1))
        return (f"transpose({d0}, {d1})", lambda t: t.transpose(d0, d1),
                lambda a: np.swapaxes(a, d0, d1))
    if op == "flip":
        dims = tuple(sorted(set(draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd)))))
        return f"flip{dims}", lambda t: t.flip(dims), lambda a: np.flip(a, dims)
    if op == "narrow":
        d = draw(st.integers(0, nd - 1))
        start = draw(st.integers(0, shape[d]))
        length = draw(st.integers(0, shape[d] - start))
        sl = (slice(None),) * d + (slice(start, start + length),)
        return f"narrow({d}, {start}, {length})", lambda t: t.narrow(d, start, length), lambda a: a[sl]
    if op == "split":
        d = draw(st.integers(0, nd - 1))
        size = draw(st.integers(1, max(1, shape[d])))
        pieces = max(1, -(-shape[d] // size))
        k = draw(st.integers(0, pieces - 1))
        sl = (slice(None),) * d + (slice(k * size, (k + 1) * size),)
        return (f"split({size}, {d})[{k}]", lambda t: t.split(size, d)[k], lambda a: a[sl])
    if op == "cat":
        d = draw(st.integers(-nd, nd - 1))
        return (f"cat([t, t.flip], {d})", lambda t: ember.cat([t, t.flip(d)], d),
                lambda a: np.concatenate([a, np.flip(a, d)], d))
    s, e = sorted((draw(st.integers(0, nd - 1)), draw(st.integers(0, nd - 1))))
    return (f"flatten({s}, {e})", lambda t: t.flatten(s, e),
            lambda a: a.reshape(a.shape[:s] + (-1,) + a.shape[e + 1:]) if a.size or True else a)


@fuzz("layout", 60, data=st.data())
def test_layout_chains_match_numpy(data):
    dtype = data.draw(st.sampled_from(ALL), "dtype")
    shape = data.draw(shapes(max_side=3), "shape")
    a, t = data.draw(operands(dtype, shape))
    steps = []
    for _ in range(data.draw(st.integers(1, 5), "length")):
        desc, ef, nf = data.draw(layout_op(a.shape))
        want, err = numpy_call(nf, a)
        if err is not None or np.asarray(want).ndim > 6 or np.asarray(want).size > 4096:
            continue
        steps.append(desc)
        t, a = ef(t), np.asarray(want)
        assert_matches(t, a, what=" -> ".join(steps))
    # a kernel reading the final view through its strides
    if kind(dtype) == "bool":
        assert_matches(~t, ~a, what="~ after " + " -> ".join(steps))
    else:
        assert_matches(t.cast(ember.float64) * 2, a.astype(np.float64) * 2,
                       what="cast * 2 after " + " -> ".join(steps))


# --- indexing ---------------------------------------------------------------------------------
def _gather_ref(a, axis, index):
    """PyTorch's gather: ``out[pos] = a[pos with pos[axis] = index[pos]]`` (the index may be
    smaller than ``a`` along the other dims; numpy's take_along_axis would broadcast it)."""
    out = np.empty(index.shape, a.dtype)
    for pos in np.ndindex(*index.shape):
        src = list(pos)
        src[axis] = index[pos]
        out[pos] = a[tuple(src)]
    return out


def _scatter_ref(a, axis, index, values, reduce):
    """numpy reference of scatter: C order of the index; the last write wins."""
    out = a.copy()
    for pos in np.ndindex(*index.shape):
        target = list(pos)
        target[axis] = index[pos]
        v = values[pos] if values.ndim else values
        if reduce == "add":
            out[tuple(target)] = (out[tuple(target)] | v) if a.dtype == bool else out[tuple(target)] + v
        else:
            out[tuple(target)] = v
    return out


@st.composite
def index_for(draw, shape, axis, size_along, oob=False):
    """An int64 index array of ``shape`` with entries in [0, size_along) (repeats allowed);
    with ``oob`` one entry may be out of range (negative or too large)."""
    hi = max(0, size_along - 1)
    idx = draw(operands("int64", shape, values=st.integers(0, hi)))[0] if size_along else \
        np.zeros(shape, np.int64)
    idx = np.array(idx)
    if oob and idx.size and draw(st.booleans()):
        idx.flat[draw(st.integers(0, idx.size - 1))] = draw(st.sampled_from([-1, size_along, size_along + 5]))
    return idx


@fuzz("indexing", 60, data=st.data())
def test_gather_index_select_scatter_match_numpy(data):
    dtype = data.draw(st.sampled_from(ALL), "dtype")
    shape = data.draw(shapes(min_dims=1, max_dims=3), "shape")
    a, t = data.draw(operands(dtype, shape))
    nd = len(shape)
    axis = data.draw(st.integers(0, nd - 1), "axis")
    dim = axis - nd if data.draw(st.booleans()) else axis
    op = data.draw(st.sampled_from(["gather", "index_select", "scatter", "scatter_add", "take"]), "op")
    oob = data.draw(st.integers(0, 4), "oob") == 0
    if op == "index_select" or op == "take":
        n = data.draw(st.integers(0, 5))
        idx = data.draw(index_for((n,), 0, shape[axis], oob))
        it = ember.from_numpy(idx)
        # t[idx] is numpy's vectorised indexing: negative entries down to -size count from the
        # end; index_select takes [0, size) only (PyTorch's)
        low = -shape[axis] if op == "take" else 0
        bad = idx.size and (idx.min() < low or idx.max() >= shape[axis])
        if op == "take":
            if axis != 0:
                return
            call, ref = (lambda: t[it]), (lambda: a[idx])
        else:
            call, ref = (lambda: t.index_select(dim, it)), (lambda: np.take(a, idx, axis=axis))
        if bad:   # (t[idx] is vectorised indexing: its errors name getitem)
            assert_raises_clearly(call, "getitem" if op == "take" else "index_select")
            return
        assert_matches(call(), ref(), what=f"{op} dim {dim} idx {idx.tolist()}")
        return
    # gather/scatter: the index may be smaller than the input along every dim but ``axis``
    ishape = tuple(data.draw(st.integers(0, s)) if d != axis else data.draw(st.integers(0, 4))
                   for d, s in enumerate(shape))
    if op.startswith("scatter"):
        ishape = tuple(min(s, i) for s, i in zip(shape, ishape))
    idx = data.draw(index_for(ishape, axis, shape[axis], oob))
    it = ember.from_numpy(idx)
    bad = idx.size and (idx.min() < 0 or idx.max() >= shape[axis])
    name = "gather" if op == "gather" else "scatter"
    if op == "gather":
        call = lambda: t.gather(dim, it)   # noqa: E731
        ref = lambda: _gather_ref(a, axis, idx)   # noqa: E731
    else:
        v, vt = data.draw(operands(dtype, ishape), "values")
        reduce = "add" if op == "scatter_add" else "assign"
        if reduce == "add" and kind(dtype) == "int":
            v = (v % 8).astype(dtype)      # no overflow from repeated adds of extremes
            vt = ember.from_numpy(np.ascontiguousarray(v))
        call = lambda: t.scatter(dim, it, vt, reduce=reduce)   # noqa: E731
        ref = lambda: _scatter_ref(a, axis, idx, v, reduce)   # noqa: E731
    if bad:
        assert_raises_clearly(call, name)
        return
    with np.errstate(all="ignore"):
        want = ref()
    tol = (1e-6, 0.0) if op == "scatter_add" and kind(dtype) == "float" else None
    assert_matches(call(), want, tol, zero_sign=op != "scatter_add",
                   what=f"{op} dim {dim} index {idx.tolist()}")


@fuzz("indexing", 40, data=st.data())
def test_masks_slice_assign_nonzero_match_numpy(data):
    dtype = data.draw(st.sampled_from(ALL), "dtype")
    shape = data.draw(shapes(max_dims=3), "shape")
    a, t = data.draw(operands(dtype, shape))
    m, mt = data.draw(operands("bool", shape), "mask")
    op = data.draw(st.sampled_from(["select", "mask_fill", "mask_where", "slice_assign", "argwhere",
                                    "nonzero"]), "op")
    if op == "select":
        assert_matches(t[mt], a[m], what="t[mask]")
    elif op == "mask_fill":
        v = data.draw(operands(dtype, ()))[0].item()
        assert_matches(t.mask_fill(mt, v), np.where(m, np.asarray(v, a.dtype), a), what="mask_fill")
    elif op == "mask_where":
        v, vt = data.draw(operands(dtype, shape), "values")
        assert_matches(t.mask_where(mt, vt), np.where(m, v, a), what="mask_where")
    elif op == "argwhere":
        assert_matches(t.argwhere(), np.argwhere(a).astype(np.int64), what="argwhere")
    elif op == "nonzero":
        if not shape:   # numpy refuses 0-d; Ember gives one index tensor per dim: none
            assert t.nonzero() == []
            return
        for got, want in zip(t.nonzero(), np.nonzero(a)):
            assert_matches(got, want.astype(np.int64), what="nonzero")
    else:
        if not shape:
            return
        idx = data.draw(index_tuple(shape), "index")
        target = a[idx]
        v, vt = data.draw(operands(dtype, target.shape), "values")
        want = a.copy()
        want[idx] = v
        assert_matches(t.slice_assign(idx, vt), want, what=f"slice_assign {idx}")


# --- sorting ------------------------------------------------------------------------------------
def _stable_order(row, descending):
    """Stable (descending: largest first) order of a 1-D row, NaN the largest value."""
    def key(i):
        v = row[i].item()
        if v != v:
            return (1, 0)
        return (0, -v if descending else v) if not isinstance(v, bool) else (0, -int(v) if descending else int(v))
    if descending:
        return sorted(range(len(row)), key=lambda i: (-key(i)[0], key(i)[1]))
    return sorted(range(len(row)), key=key)


@fuzz("sort", 60, data=st.data())
def test_sort_argsort_topk_match_a_stable_sort(data):
    dtype = data.draw(st.sampled_from(NUMERIC), "dtype")
    shape = data.draw(shapes(min_dims=1, max_dims=3), "shape")
    a, t = data.draw(operands(dtype, shape))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1), "dim")
    descending = data.draw(st.booleans(), "descending")
    moved = np.moveaxis(a, dim, -1)
    order = np.zeros(moved.shape, np.int64)
    for pos in np.ndindex(*moved.shape[:-1]):
        order[pos] = _stable_order(moved[pos], descending)
    want_idx = np.moveaxis(order, -1, dim)
    want = np.take_along_axis(a, want_idx, dim)
    values, indices = t.sort_with_indices(dim, descending)
    assert_matches(values, want, what=f"sort({dim}, descending={descending}) {dtype}")
    assert_matches(indices, want_idx, what=f"sort indices({dim}, descending={descending})")
    n = shape[dim]
    k = data.draw(st.integers(0, n), "k")
    if descending:
        top, top_idx = t.topk_with_indices(k, dim)
        sl = (slice(None),) * (dim % len(shape)) + (slice(0, k),)
        assert_matches(top, want[sl], what=f"topk({k}, {dim})")
        assert_matches(top_idx, want_idx[sl], what=f"topk indices({k}, {dim})")
    else:
        assert_raises_clearly(lambda: t.topk(n + 1, dim), "topk")


# --- matmul ------------------------------------------------------------------------------------
@st.composite
def matmul_shapes(draw):
    m, k, n = draw(st.integers(0, 4)), draw(st.integers(0, 4)), draw(st.integers(0, 4))
    batch = draw(shapes(max_dims=2, max_side=3))
    kind_ = draw(st.sampled_from(["vv", "mv", "vm", "mm", "batched"]))
    if kind_ == "vv":
        return (k,), (k,)
    if kind_ == "mv":
        return (m, k), (k,)
    if kind_ == "vm":
        return (k,), (k, n)
    if kind_ == "mm":
        return (m, k), (k, n)
    b2 = tuple(1 if draw(st.integers(0, 2)) == 0 else s for s in batch)
    return batch + (m, k), b2[len(b2) - draw(st.integers(0, len(b2))):] + (k, n)


@fuzz("matmul", 50, data=st.data())
def test_matmul_matches_numpy(data):
    da = data.draw(st.sampled_from(("float32", "float64", "int32", "int64")), "dtype a")
    db = da if data.draw(st.booleans()) else data.draw(st.sampled_from(("float32", "float64", "int64")))
    sa, sb = data.draw(matmul_shapes(), "shapes")
    values = {"f": st.one_of(st.floats(-4, 4, width=32), st.sampled_from([0.0, -0.0, np.inf, np.nan])),
              "i": st.integers(-50, 50)}
    a, ta = data.draw(operands(da, sa, values=values[np.dtype(da).kind]))
    b, tb = data.draw(operands(db, sb, values=values[np.dtype(db).kind]))
    want, err = numpy_call(np.matmul, a, b)
    if err is not None:
        assert_raises_clearly(lambda: ta @ tb, "matmul")
        return
    wd = np.asarray(want).dtype
    tol = None
    if wd.kind == "f":
        k = sa[-1]
        eps = float(np.finfo(wd).eps)
        tol = (8 * eps * max(1, k), 8 * eps * max(1, k) * 16)
    assert_matches(ta @ tb, want, tol, zero_sign=False, what=f"matmul {sa} {da} @ {sb} {db}")
