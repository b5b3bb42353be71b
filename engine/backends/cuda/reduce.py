"""Reductions and arg-reductions on CUDA arrays: the reduced dims are moved last and made
dense, then ``kernels/cuda/reduce.py``'s ``fold`` folds each row (in ``nsplit`` chunks and a
second pass when rows are few and long).  Calls arrive validated (axes in range, no max/min
of an empty dim)."""
import math

import numpy as np

from ember.kernels.cuda import builder as B
from ember.kernels.cuda import reduce as skeletons

from ..shared import c_strides, identity
from .elementwise import copy, dense, full


def fold(b, opname, x2, rows, n, dtype):
    """Fold each row of dense (rows, n) ``x2`` -> new (rows,) array of ``dtype``."""
    init = identity(opname, dtype)
    kern = B.kernel(skeletons.fold, opname, dtype)
    nsplit = max(1, min(-(-n // (B.THREADS * 16)), -(-1024 // rows)))
    csize = -(-n // nsplit)
    part = b.empty((rows * nsplit,), dtype)
    b.launch(kern, B.grid(rows * nsplit, 1), B.THREADS, x2.buf, part.buf, rows, n, nsplit, csize,
             init)
    if nsplit == 1:
        return part
    out = b.empty((rows,), dtype)
    b.launch(kern, B.grid(rows, 1), B.THREADS, part.buf, out.buf, rows, nsplit, 1, nsplit, init)
    return out


def reduction(b, op, x, *, axes, dtype):
    opname, out_dt = op.scalar, dtype.np
    kept = [d for d in range(x.ndim) if d not in axes]
    out_shape = tuple(x.shape[d] for d in kept)
    n = math.prod(x.shape[a] for a in axes)
    rows = math.prod(out_shape)
    if n == 0:
        return full(b, out_shape, identity(opname, out_dt), out_dt)
    if not axes or n == 1:
        return copy(b, x.view(x.offset, out_shape, [x.strides[d] for d in kept]), out_dt)
    if rows == 0:
        return b.empty(out_shape, out_dt)
    y = dense(b, x.view(x.offset, out_shape + tuple(x.shape[a] for a in axes),
                        [x.strides[d] for d in kept] + [x.strides[a] for a in axes]), out_dt)
    out = fold(b, opname, y, rows, n, out_dt)
    return out.view(0, out_shape, c_strides(out_shape))


def arg_reduce(b, op, x, *, axis, dtype=None):
    if axis is None:
        y, out_shape = dense(b, x), ()
        rows, n = 1, x.size
    else:
        out_shape = x.shape[:axis] + x.shape[axis + 1:]
        dims = tuple(d for d in range(x.ndim) if d != axis) + (axis,)
        y = dense(b, x.view(x.offset, [x.shape[d] for d in dims], [x.strides[d] for d in dims]))
        rows, n = math.prod(out_shape), x.shape[axis]
    out = b.empty(out_shape, np.int64)
    if rows and n:
        kern = B.kernel(skeletons.arg_fold, "gt" if op.name == "ARGMAX" else "lt", x.dtype)
        b.launch(kern, B.grid(rows, 1), B.THREADS, y.buf, out.buf, rows, n)
    return out
