"""Elementwise launches on CUDA arrays: ``map`` (an op over broadcast, strided operands),
copies, and the dense (C-contiguous from element 0) form kernels given bare buffers need."""
import math

import numpy as np

from ember.kernels.cuda import builder as B
from ember.kernels.cuda import elementwise as skeletons

from ..shared import merge_dims
from .array import SIMULATOR

_MAPS = {1: skeletons.map1, 2: skeletons.map2, 3: skeletons.map3}


def map(b, opname, inputs, out):
    """out[...] = opname(*inputs) elementwise, inputs broadcast to ``out.shape``."""
    n = out.size
    if n == 0:
        return out
    if SIMULATOR and opname == "identity" and _narrowing(inputs[0].dtype, out.dtype):
        # a GPU's store of an int into a narrower int wraps (C); the simulator stores a Python
        # int through numpy, which refuses an out-of-range one (numpy 2): the kernel copies in
        # the source dtype, numpy's astype wraps as the device would, the kernel stores it
        from ...ir import Op
        wide = map(b, opname, inputs, b.empty(out.shape, inputs[0].dtype))
        wrapped = b.execute(Op.TO_HOST, wide).astype(out.dtype)
        return map(b, opname, [b.execute(Op.FROM_HOST, wrapped)], out)
    ops = [x.broadcast(out.shape) for x in inputs] + [out]
    merged, strides = merge_dims(out.shape, [list(o.strides) for o in ops])
    args = []
    for o, st in zip(ops, strides):
        args += (o.buf, o.offset, tuple(st))
    kern = B.kernel(_MAPS[len(inputs)], B.variant(opname, out.dtype))
    b.launch(kern, B.grid(n), B.THREADS, *args, tuple(merged), n)
    return out


def _narrowing(src, dst):
    """An int -> int conversion that can leave the target's range."""
    src, dst = np.dtype(src), np.dtype(dst)
    return src.kind in "iu" and dst.kind in "iu" and not np.can_cast(src, dst, "safe")


def elementwise(b, op, *inputs, shape, dtype):
    return map(b, op.scalar, inputs, b.empty(shape, dtype.np))


def copy(b, x, dtype=None):
    """A fresh C-contiguous copy of ``x`` (cast to ``dtype``)."""
    return map(b, "identity", [x], b.empty(x.shape, dtype or x.dtype))


def dense(b, x, dtype=None):
    """``x`` C-contiguous from element 0 of its ``buf`` (kernels given a bare buffer index
    it from 0), in ``dtype``: a view re-based at its offset, or a copy."""
    if x.c_contiguous and (dtype is None or x.dtype == dtype):
        if x.offset == 0:
            return x
        return type(x)(x.block, x.buf[x.offset:x.offset + x.size], 0, x.shape, x.strides,
                       x.dtype, x.device, x.stream)
    return copy(b, x, dtype)


def full(b, shape, value, dtype):
    """A new array of ``shape`` filled with ``value`` (numpy ``dtype``)."""
    out = b.empty(shape, dtype)
    n = out.size
    if n:
        b.launch(B.kernel(skeletons.fill), B.grid(n), B.THREADS, out.buf, n,
                 np.array(value, dtype)[()])
    return out


def arange(b, start, stop, step, dtype):
    n = max(0, math.ceil((stop - start) / step))
    out = b.empty((n,), dtype)
    if n:
        cast = float if dtype.kind == "f" else int
        b.launch(B.kernel(skeletons.arange), B.grid(n), B.THREADS, out.buf, n, cast(start),
                 cast(step))
    return out
