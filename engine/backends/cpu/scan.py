"""Scans (cumsum, cumprod) on numpy arrays: the ``(outer, n, inner)`` view and its tasks.

The scan runs ``kernels/cpu/scan.py``'s ``scan_fold`` on a C-contiguous view of its output:
``inner > 1`` scans rows of ``inner`` values (tiles of ``tw`` columns per task, narrowed when
there are fewer tasks than threads); ``inner == 1`` scans each row as one dependence chain,
a few long rows cut into ``nsplit`` chunks combined by a second pass.  Calls arrive
validated (a known combiner, an axis in range).
"""
import math

import numba
import numpy as np

from ember.kernels.cpu.builder import kernel
from ember.kernels.cpu.scan import scan_fold

from ...memory import empty as alloc
from .reduce import SPLIT_MIN, TASKS_PER_THREAD, TILE, _copy

# A scan runs ~2 elements/ns on one core (a row-at-a-time scan ~5): with a
# parallel launch costing 10-40 us (sleeping workers), smaller ones stay serial.
SCAN_PARALLEL_MIN = 1 << 20


def scan(op, x, axis, out_dtype):
    """Inclusive scan of ``x`` along ``axis``: ``add`` is cumsum, ``mul`` cumprod.

    Returns a new C-contiguous array of ``x``'s shape in ``out_dtype``, which
    is also the dtype the scan accumulates in.  Into bool, ``add``/``mul`` are
    logical or/and (numpy's rule).  A 0-d ``x`` (axis 0 or -1) is copied.
    """
    out_dtype = np.dtype(out_dtype)
    if x.ndim == 0 or x.size == 0:
        return _copy(x, out_dtype)
    if x.flags.c_contiguous and (x.dtype == out_dtype or (
            op in ("add", "mul") and np.can_cast(x.dtype, out_dtype, "safe"))):
        src = x  # read directly, a narrower dtype included (bool or int32 into int64)
        out = alloc(x.shape, out_dtype)
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
