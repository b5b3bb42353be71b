"""Stable sort and top-k on CUDA arrays: the sorted dim moved last and made dense, one
thread per row (``kernels/cuda/sort.py``); searchsorted, one thread per value
(``kernels/cuda/search.py``).  Calls arrive validated."""
import math

import numpy as np

from ember.kernels.cuda import builder as B
from ember.kernels.cuda import search as search_skeletons
from ember.kernels.cuda import sort as skeletons

from .elementwise import copy, dense, full


def _permuted(x, dims):
    return x.view(x.offset, [x.shape[d] for d in dims], [x.strides[d] for d in dims])


def sort(b, op, x, *, axis, descending):
    if x.ndim == 0:
        return copy(b, x), full(b, (), 0, np.dtype(np.int64))
    dims = tuple(d for d in range(x.ndim) if d != axis) + (axis,)
    y = dense(b, _permuted(x, dims))
    values = b.empty(y.shape, x.dtype)
    idx = b.empty(y.shape, np.int64)
    n = x.shape[axis]
    rows = math.prod(y.shape[:-1])
    if values.size:
        tmp = b.empty(y.shape, np.int64)
        b.launch(B.kernel(skeletons.sort_rows), B.grid(rows), B.THREADS, y.buf, values.buf,
                 idx.buf, tmp.buf, rows, n, bool(descending))
    back = tuple(int(d) for d in np.argsort(dims))
    return dense(b, _permuted(values, back)), dense(b, _permuted(idx, back))


def topk(b, op, x, *, k, axis, largest):
    values, idx = sort(b, op, x, axis=axis, descending=largest)
    if x.ndim == 0:
        return values, idx
    index = (slice(None),) * axis + (slice(0, k),)
    return dense(b, values[index]), dense(b, idx[index])


def searchsorted(b, op, seq, values, *, right, dtype=None):
    seq = dense(b, seq)
    vals = dense(b, values)
    out = b.empty(values.shape, np.int64)
    m = out.size
    if m:
        b.launch(B.kernel(search_skeletons.search), B.grid(m), B.THREADS, seq.buf, seq.size,
                 vals.buf, out.buf, m, bool(right))
    return out
