"""Scans (cumsum, cumprod) on numpy arrays.

Like the reductions, a scan runs on a C-contiguous ``(outer, n, inner)`` view
of its output, parametrised by the combiner ``OP`` (``kernels.scalar.add`` or
``mul``):

- ``inner > 1``: row ``r`` of the result is ``OP(row r - 1, x[o, r])``, a loop
  over ``inner`` that vectorises; tasks are tiles of ``tw`` columns, narrowed
  by the launcher when there are fewer tasks than threads.
- ``inner == 1``: each row is one dependence chain.  Many rows run in
  parallel; a few long rows are cut into ``nsplit`` chunks that are scanned
  independently, then every chunk but the first is combined with the total of
  the chunks before it (a second, vectorised pass).
"""
import math

import numba
import numpy as np
from numba import prange

from . import launch
from .builder import kernel
from .launch import PARALLEL_MIN
from .reduce import SPLIT_MIN, TASKS_PER_THREAD, TILE, _check_dtype, _copy

# A scan runs ~2 elements/ns on one core (a row-at-a-time scan ~5): with a
# parallel launch costing 10-40 us (sleeping workers), smaller ones stay serial.
SCAN_PARALLEL_MIN = 1 << 20

OPS = ("add", "mul")
_NAMES = {"add": "cumsum", "mul": "cumprod"}


def scan_fold(x, out, outer, n, inner, ob, tw, nsplit):
    # x and out: (outer, n, inner) flat C order (possibly the same array)
    nob = (outer + ob - 1) // ob
    if inner == 1:
        csize = (n + nsplit - 1) // nsplit
        for t in prange(nob * nsplit):
            b = t // nsplit
            c = t - b * nsplit
            lo = min(n, c * csize)
            hi = min(n, lo + csize)
            if lo < hi:
                for o in range(b * ob, min(outer, b * ob + ob)):
                    src = x[o * n:o * n + n]
                    dst = out[o * n:o * n + n]
                    dst[lo] = src[lo]
                    a = dst[lo]
                    for i in range(lo + 1, hi):
                        a = OP(a, src[i])
                        dst[i] = a
        if nsplit > 1:
            # carry[o * nsplit + c]: the combined total of chunks 0 .. c-1 of row o
            carry = np.empty(outer * nsplit, out.dtype)
            for o in range(outer):
                a = out[o * n + min(n, csize) - 1]
                for c in range(1, nsplit):
                    carry[o * nsplit + c] = a
                    hi = min(n, (c + 1) * csize)
                    if c * csize < hi:
                        a = OP(a, out[o * n + hi - 1])
            for t in prange(outer * (nsplit - 1)):
                o = t // (nsplit - 1)
                c = t - o * (nsplit - 1) + 1
                lo = o * n + min(n, c * csize)
                dst = out[lo:o * n + min(n, (c + 1) * csize)]
                a = carry[o * nsplit + c]
                for i in range(dst.shape[0]):
                    dst[i] = OP(a, dst[i])
    else:
        ntiles = (inner + tw - 1) // tw
        for t in prange(nob * ntiles):
            b = t // ntiles
            j0 = (t - b * ntiles) * tw
            m = min(inner - j0, tw)
            for o in range(b * ob, min(outer, b * ob + ob)):
                start = o * n * inner + j0
                prev = out[start:start + m]
                first = x[start:start + m]
                for j in range(m):
                    prev[j] = first[j]
                for r in range(1, n):
                    start += inner
                    cur = out[start:start + m]
                    src = x[start:start + m]
                    for j in range(m):
                        cur[j] = OP(prev[j], src[j])
                    prev = cur


def scan(op, x, axis, out_dtype):
    """Inclusive scan of ``x`` along ``axis``: ``add`` is cumsum, ``mul`` cumprod.

    Returns a new C-contiguous array of ``x``'s shape in ``out_dtype``, which
    is also the dtype the scan accumulates in.  Into bool, ``add``/``mul`` are
    logical or/and (numpy's rule).  A 0-d ``x`` (axis 0 or -1) is copied.
    """
    if op not in OPS:
        raise ValueError(f"scan: unknown op {op!r}; expected one of {OPS}")
    x = np.asarray(x)
    out_dtype = np.dtype(out_dtype)
    name = _NAMES[op]
    _check_dtype(name, x.dtype)
    _check_dtype(name, out_dtype)
    if out_dtype.kind == "b":
        op = "logical_or" if op == "add" else "logical_and"
    ndim = max(x.ndim, 1)
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}: axis {axis} out of range for an array of shape {x.shape}")
    if x.ndim == 0 or x.size == 0:
        return _copy(x, out_dtype)
    axis %= ndim
    if x.flags.c_contiguous and (x.dtype == out_dtype or (
            op in ("add", "mul") and np.can_cast(x.dtype, out_dtype, "safe"))):
        src = x  # read directly, a narrower dtype included (bool or int32 into int64)
        out = launch.alloc(x.shape, out_dtype)
    else:  # cast / gather once, then scan in place
        src = out = _copy(x, out_dtype)
    shape = x.shape
    outer = math.prod(shape[:axis])
    n = shape[axis]
    inner = math.prod(shape[axis + 1:])
    ob, tw, nsplit = outer, min(inner, TILE), 1
    k = kernel(scan_fold, op)
    if x.size < SCAN_PARALLEL_MIN:
        fn = k.serial
    else:
        fn = k.parallel
        threads = numba.get_num_threads()
        want = TASKS_PER_THREAD * threads
        ntiles = -(-inner // tw)
        if outer * ntiles >= want:
            ob = -(-outer // -(-want // ntiles))
        else:
            ob = 1
            if inner == 1:
                nsplit = max(1, min(-(-want // outer), n // SPLIT_MIN))
            elif outer * ntiles < threads:  # narrower tiles, one per thread
                tw = max(min(inner, 64), -(-inner // -(-threads // outer)))
    fn(src.reshape(-1), out.reshape(-1), outer, n, inner, ob, tw, nsplit)
    return out
