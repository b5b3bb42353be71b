"""Launching the fused softmax and log_softmax loops on numpy arrays.

Both ops run on a C-contiguous view (``kernels/cpu/softmax.py``): either ``(rows, n)`` with
the softmax dim last (``rows``), or ``(outer, n, inner)`` when a wide contiguous block
follows the dim in memory (``cols``: ``inner`` columns side by side, no transposed copy).  A
few long rows are split into ``nsplit`` chunks so every thread has work (``finish`` combines
them).  Calls arrive validated (a float array, a normalised axis).
"""
import numba
import numpy as np

from ember.kernels.cpu.softmax import LANES, cols, driver, finish, rows
from ember.kernels.rebind import variant

from ...memory import empty as alloc
from .elementwise import PARALLEL_MIN, elementwise

# Column tiles: (n, tw) blocks of about TILE_BYTES (measured best, though bigger than L2),
# at least TILE_MIN columns wide: narrower tiles read a new cache line and page per row for
# a few values (4096x1024 float32 along dim 0: 8.4 ms with 16 columns, 3.9 ms with 64+)
TILE_BYTES = 1 << 21
TILE_MIN = 64
COLS_MIN = 16          # narrower blocks after the dim go through ``rows`` (a transposed copy)
TILE_MAX = 1024        # widest column tile
SPLIT_MIN = 1 << 15    # fewest elements of a row worth a chunk (a task) of their own
TASKS_PER_THREAD = 4   # enough tasks that uneven ones still balance

_CONSTANTS = {}   # dtype -> (-inf, 1) of that dtype: the kernels' typed constants


def _memory_order(x):
    """The dims of ``x`` in memory order if ``x`` is a permuted C-contiguous array, else None."""
    order = sorted(range(x.ndim), key=lambda d: -x.strides[d])
    return order if x.transpose(order).flags.c_contiguous else None


def _copy(x):
    return elementwise("identity", [x], alloc(x.shape, x.dtype))


def _unpermute(out, perm):
    """``out`` (dims in order ``perm``) viewed with the dims back in their own order."""
    if perm == sorted(perm):
        return out
    inverse = [0] * len(perm)
    for i, d in enumerate(perm):
        inverse[d] = i
    return out.transpose(inverse)


def softmax(x, axis, log=False):
    """softmax (``log=False``) or log_softmax of float array ``x`` along ``axis``.

    Returns a new array of ``x``'s dtype and shape, computed in that dtype.  A dense
    input (any dim order) gives a result with its strides, except when fewer than
    ``COLS_MIN`` elements follow the dim in memory: then the dim is moved last in a
    copy, and the result keeps that layout.  Other inputs are copied first.
    """
    dtype = x.dtype
    if x.ndim == 0:
        return softmax(x.reshape(1), 0, log).reshape(())
    if x.size == 0:
        return np.empty(x.shape, dtype)
    nd = x.ndim
    if x.flags.c_contiguous:
        order = list(range(nd))
    else:
        order = _memory_order(x)
        if order is None:
            x = _copy(x)
            order = list(range(nd))
    pos = order.index(axis)
    n = x.shape[axis]
    inner = 1
    for d in order[pos + 1:]:
        inner *= x.shape[d]
    op = variant("exp", dtype)
    consts = _CONSTANTS.get(dtype)
    if consts is None:
        consts = _CONSTANTS[dtype] = (dtype.type(-np.inf), dtype.type(1))
    init, one = consts
    parallel = x.size >= PARALLEL_MIN
    threads = numba.get_num_threads() if parallel else 1
    want = TASKS_PER_THREAD * threads
    if inner < COLS_MIN:
        # the softmax dim last, in a (rows, n) block: a view when it is already last in memory
        perm = order if pos == nd - 1 else [d for d in order if d != axis] + [axis]
        y = x if perm == sorted(perm) else x.transpose(perm)
        if not y.flags.c_contiguous:
            y = _copy(y)
        nrows = x.size // n
        out = alloc(y.shape, dtype)
        rb, nsplit = -(-nrows // want), 1
        if nrows < want and threads > 1:   # split rows cost a second exp pass
            rb, nsplit = 1, max(1, min(-(-want // nrows), n // SPLIT_MIN))
        part = np.empty(2 * nrows * nsplit if nsplit > 1 else 0, dtype)
        flat_y, flat_out = y.reshape(-1), out.reshape(-1)
        driver(rows, op, parallel)(-(-nrows // rb) * nsplit, flat_y, flat_out, part, nrows, n,
                                    rb, nsplit, LANES, init, one, log)
        if nsplit > 1:
            driver(finish, op, True)(nrows * nsplit, flat_y, flat_out, part, n, nsplit, init,
                                      one, log)
    else:
        perm = order
        outer = x.size // (n * inner)
        tw = min(inner, TILE_MAX, max(TILE_MIN, TILE_BYTES // (n * x.itemsize)))
        if parallel:   # narrower tiles when there are too few
            tw = min(tw, max(TILE_MIN, -(-inner // -(-want // outer))))
        ntiles = -(-inner // tw)
        ob = max(1, -(-outer // -(-want // ntiles))) if parallel else outer
        y = x.transpose(perm)
        out = alloc(y.shape, dtype)
        driver(cols, op, parallel)(-(-outer // ob) * ntiles, y.reshape(-1), out.reshape(-1),
                                    outer, n, inner, tw, ob, init, one, log)
    return _unpermute(out, perm)
