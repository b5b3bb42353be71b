"""Gather, index_select, scatter and nonzero on CUDA arrays (``kernels/cuda/index.py``).
Calls arrive validated: indices are Int arrays whose values lie in range (the dispatch
layer checked them), values of ``x``'s dtype broadcast to the index's shape."""
import numpy as np

from ember.kernels.cuda import builder as B
from ember.kernels.cuda import index as skeletons

from ...dtypes import int64
from ...ir import Op
from .elementwise import copy, map
from .scan import cumulative


def _gather_into(b, x, ind, ist, shape, axis, out):
    total = out.size
    if total:
        b.launch(B.kernel(skeletons.gather_walk), B.grid(total), B.THREADS, x.buf, x.offset,
                 x.strides, ind.buf, ind.offset, tuple(ist), out.buf, tuple(shape), axis, total)
    return out


def gather(b, op, x, index, *, axis):
    if x.ndim == 0:
        return copy(b, x.broadcast(index.shape))
    out = b.empty(index.shape, x.dtype)
    return _gather_into(b, x, index, index.strides, index.shape, axis, out)


def index_select(b, op, x, indices, *, axis):
    if x.ndim == 0:
        return copy(b, x)
    shape = x.shape[:axis] + (indices.shape[0],) + x.shape[axis + 1:]
    ist = [0] * x.ndim
    ist[axis] = indices.strides[0]
    return _gather_into(b, x, indices, ist, shape, axis, b.empty(shape, x.dtype))


def scatter(b, op, x, index, values, *, axis, reduce):
    out = copy(b, x)
    if index.size == 0:
        return out
    values = values.broadcast(index.shape)
    o = out
    if x.ndim == 0:
        o, index, values = (v.view(v.offset, (1,), (0,)) for v in (out, index, values))
    lines = index.size // index.shape[axis]
    b.launch(B.kernel(skeletons.scatter_lines), B.grid(lines), B.THREADS, o.buf, o.strides,
             index.buf, index.offset, index.strides, values.buf, values.offset, values.strides,
             index.shape, axis, reduce == "add", lines)
    return out


def nonzero(b, op, x, dtype=None):
    if x.ndim == 0:
        host = b.to_host(x)
        return b.from_host(np.zeros((1 if host.item() else 0, 0), np.int64))
    n = x.size
    if n == 0:
        return b.empty((0, x.ndim), np.int64)
    flags = map(b, "to_bool", [x], b.empty(x.shape, np.int64))
    cum = cumulative(b, Op.CUMSUM, flags.view(0, (n,), (1,)), axis=0, dtype=int64)
    count = int(b.to_host(cum[n - 1]))
    out = b.empty((count, x.ndim), np.int64)
    if count:
        b.launch(B.kernel(skeletons.nonzero_write), B.grid(n), B.THREADS, cum.buf, out.buf,
                 x.shape, n)
    return out
