"""Reductions and arg-reductions on numpy arrays: views, passes, tasks and lanes.

Every reduction runs ``kernels/cpu/reduce.py``'s ``fold`` on a C-contiguous
``(outer, red, inner)`` view whose middle dim is reduced.  ``reduce`` finds such a view
without copying whenever it can: a block of reduced dims that is contiguous in memory order,
in a dense array of any stride order (transposed, reversed).  Axes that form several blocks
take one pass per block, each reading the previous, smaller result.  Only an array that is
not dense (a strided slice, a broadcast) is copied, as is one whose dtype must change for a
max/min (sums and products read a narrower dtype directly: bool or int32 into int64).

Lanes (``fold_params``): ``inner`` narrow (1 included) puts ``k`` consecutive rows side by
side, about ``PACK_ROWS`` lanes (``PACK_STREAM`` for inputs that come from memory, or
``PACK`` with one block per pass; ``ROW_LANE_BYTES`` of input for a parallel fold of many
contiguous rows); ``inner`` wide takes tiles of ``TILE`` columns.  A parallel full
reduction leaves the few elements before the array's first cache line to the final combine,
so that every block's vector loads are aligned.  A float32 sum keeps its lanes in float32
for ``FLUSH`` blocks only, then adds them into float64 lanes.

Parallel launches cut the work into about ``TASKS_PER_THREAD`` tasks per thread: blocks of
outer rows when there are enough, otherwise ``nsplit`` chunks of the reduced dim whose
partial results are combined at the end (how a full reduction of a large array uses every
core: one contiguous chunk per thread).

Calls arrive validated (``engine/tensor.py``: kinds, dims, empty max/min): axes are distinct
and in range, the combiner and dtypes are ones the kernels take.
"""
import math

import numba
import numpy as np

from ember.kernels.cpu.builder import kernel
from ember.kernels.cpu.reduce import LANES_MIN, ROWS, TILE, arg_fold, fold_kernel  # noqa: F401

from ...memory import empty as alloc
from ..shared import identity
from .elementwise import elementwise

PACK = 512             # accumulators per task when inner is narrow, one block per pass
PACK_ROWS = 2048       # accumulators per task when inner is narrow, ROWS blocks per pass
PACK_STREAM = 16384    # the same for inputs larger than the last-level cache (STREAM_MIN)
STREAM_MIN = 32 << 20  # bytes: from this size on, a fold streams its input from memory
ROW_LANE_BYTES = 128   # a parallel fold of many contiguous rows: lanes over this many bytes of input
FLUSH = 32             # blocks a float32 sum's lanes take before going into float64
SPLIT_MIN = 1 << 14    # fewest elements worth a task of their own
TASKS_PER_THREAD = 4   # enough tasks that uneven ones still balance
# A fold streams ~15 elements/ns on one core (arg_fold ~8), while a parallel
# launch with sleeping workers (engine/threads.py sets OMP_WAIT_POLICY=PASSIVE) costs
# 10-40 us here: below these sizes one core wins (2-core VM, see perf/).
FOLD_PARALLEL_MIN = 1 << 21
ARG_PARALLEL_MIN = 1 << 20


def _copy(x, dtype):
    """A fresh C-contiguous copy of ``x`` in ``dtype``."""
    out = alloc(x.shape, dtype)
    return elementwise("identity" if dtype.kind != "b" or x.dtype.kind == "b" else "to_bool",
                       [x], out)


def fold_params(op, dtype, init, outer, n, inner):
    """How ``fold`` reduces a C-contiguous (outer, n, inner) input of ``dtype`` into
    ``init``'s dtype: ``(parallel, ob, nsplit, winit, flush, rows, pack)``.  One place for
    the choice, so that other callers of ``fold``'s loops (``fused_reduce``) can keep
    its order of operations, hence its bits."""
    nsplit = 1
    ob = outer
    size = outer * n * inner
    parallel = size >= FOLD_PARALLEL_MIN
    if parallel:
        ntiles = -(-inner // TILE)
        threads = numba.get_num_threads()
        want = TASKS_PER_THREAD * threads
        if outer * ntiles >= want:
            ob = -(-outer // -(-want // ntiles))
        else:
            ob = 1
            if outer * inner == 1:
                # a full reduction: one contiguous chunk per thread, equal by construction.
                # Threads streaming far-apart halves beat 4 chunks each (2-core VM, 16M
                # float32: ~3 %), and beat tasks claimed as threads get free (+15 %: two
                # threads reading neighbouring chunks at once stream slower).
                want = threads
            rows_min = -(-SPLIT_MIN // min(inner, TILE))
            nsplit = max(1, min(-(-want // (outer * ntiles)), n // rows_min))
    if op == "add" and init.dtype == np.float32:
        # float32 lanes for FLUSH blocks at a time, then float64: as accurate as a pairwise sum
        winit, flush = np.float64(0), FLUSH
    elif op == "add" and init.dtype == np.complex64:   # the same for complex64 into complex128
        winit, flush = np.complex128(0), FLUSH
    else:
        winit, flush = init, n
    # ROWS blocks per pass, over PACK_ROWS lanes, where the loop stays light.  From memory,
    # float max/min (their NaN-propagating selects) and inputs widened on the fly (int32
    # into int64) stream slower that way, and best with fewer lanes (2-core VM, serial,
    # 16M elements: float32 max 1.8 ms -> 2.9 ms, int32 sum 1.9 -> 2.4 ms), while the
    # others gain (float32 sum 3.1 -> 1.7 ms with PACK lanes -> 1.6 ms with PACK_ROWS).
    heavy = dtype != init.dtype or (op in ("maximum", "minimum") and init.dtype.kind == "f")
    rows, pack = (1, PACK) if heavy else (ROWS, PACK_ROWS)
    if parallel and inner == 1 and nsplit == 1:
        # many contiguous rows (``x.sum(-1)``), spread over tasks: lanes over 128 bytes of
        # input, one block per pass, for every op and dtype.  Per row, the wider lanes'
        # fixed work (setting, flushing and halving them) cost more than the row itself
        # (2-core VM, parallel, rows of 4096 / 1024: float32 sum 1.75 / 2.1 ms -> 1.2 / 1.3
        # ms, torch ~1.0; float64 sum 3.1 / 4.3 -> 2.7 / 3.1; int32 into int64 1.7 / 2.5 ->
        # 1.25 / 1.5; float64 max 4.1 / 4.4 -> 3.2 / 3.3).  Fewer than LANES_MIN lanes fall
        # to one accumulator per row: 8 float64 lanes took 15 ms.
        return parallel, ob, nsplit, winit, flush, 1, ROW_LANE_BYTES // dtype.itemsize
    if not heavy and size * dtype.itemsize >= STREAM_MIN:
        # From memory, longer runs per block stream faster: each of the ROWS blocks of a pass
        # is a run of pack elements (2-core VM, perf's blocked timing, 16M float32, sum of
        # all: 1.13x torch with 2048 lanes, 1.06x with 8192, 1.03x with 16384), while from
        # cache more lanes only add their fixed work per task (8192 lanes, serial, float32:
        # 1M elements +9 %, 64K +36 %).
        pack = PACK_STREAM
    return parallel, ob, nsplit, winit, flush, rows, pack


def _run_fold(op, x3, init):
    """Fold the middle dim of C-contiguous ``x3`` in ``init``'s dtype.

    Returns a fresh (outer, inner) array of that dtype."""
    outer, n, inner = x3.shape
    out = alloc((outer, inner), init.dtype)
    parallel, ob, nsplit, winit, flush, rows, pack = fold_params(op, x3.dtype, init, outer,
                                                                 n, inner)
    k = fold_kernel(op)
    fn = k.parallel if parallel else k.serial
    part = np.empty(outer * nsplit * inner if nsplit > 1 else 0, winit.dtype)
    x = x3.reshape(-1)
    head = x[:0]
    if nsplit > 1 and outer * inner == 1:
        # the chunks' blocks start on a cache line, the elements before it are combined at
        # the end: aligned vector loads (16M float32 from memory, serial: 1.9 -> 1.5 ms)
        skip = (-x.ctypes.data) % 64 // x.itemsize
        head, x, n = x[:skip], x[skip:], n - skip
    fn(x, head, part, out.reshape(-1), init, winit, outer, n, inner, ob, nsplit, rows, pack,
       flush)
    return out


# (combiner, input dtype, result dtype, shape, axes) -> ``_serial_fold`` of that reduction:
# per-op overhead on small arrays (``reduce``'s checks and ``fold_params`` ran ~3 us a call)
_SERIAL_FOLDS = {}


def _serial_fold(op, dtype, init, outer, n, inner, out_shape):
    """``_run_fold`` of a C-contiguous (outer, n, inner) input of ``dtype`` on one thread,
    reshaped to ``out_shape``, with its parameters found once: a function of the input."""
    parallel, ob, nsplit, winit, flush, rows, pack = fold_params(op, dtype, init, outer, n,
                                                                 inner)
    assert not parallel and nsplit == 1
    fn = fold_kernel(op).serial
    part = np.empty(0, winit.dtype)   # (read only by split folds)
    out_dtype = init.dtype

    def run(x):
        out = alloc((outer, inner), out_dtype)
        x = x.reshape(-1)
        fn(x, x[:0], part, out.reshape(-1), init, winit, outer, n, inner, ob, nsplit, rows,
           pack, flush)
        return out.reshape(out_shape)

    return run


def _dense_order(y):
    """Dims of ``y`` in memory order if ``y`` is a permuted C-contiguous array, else None."""
    order = sorted(range(y.ndim), key=lambda d: -y.strides[d])
    if y.transpose(order).flags.c_contiguous:
        return order
    return None


def reduce(op, x, axes, out_dtype):
    """Reduce ``x`` over ``axes`` (distinct non-negative ints) with combiner ``op``.

    Returns a new array of ``out_dtype`` with the reduced axes removed, accumulated in
    ``out_dtype``; ``axes == ()`` returns a cast copy.  Empty reduced dims give the
    identity (max/min of empty dims never arrive: dispatch refuses them).
    """
    out_dtype = np.dtype(out_dtype)
    shape = x.shape
    contiguous = x.flags.c_contiguous
    if contiguous:   # a signature met before, folded on one thread: its launch, found once
        key = (op, x.dtype, out_dtype, shape, tuple(axes))
        fold = _SERIAL_FOLDS.get(key)
        if fold is not None:
            return fold(x)
    out_shape = tuple(n for d, n in enumerate(shape) if d not in axes)
    n_red = 1
    for a in axes:
        n_red *= shape[a]
    if n_red == 0:
        return np.full(out_shape, identity(op, out_dtype), out_dtype)
    if n_red == 1:  # nothing to combine: every reduced dim has size 1
        return _copy(x.reshape(out_shape), out_dtype)
    if x.size == 0:
        return np.empty(out_shape, out_dtype)
    init = identity(op, out_dtype)
    # sums and products read a narrower dtype directly (bool or int32 into int64)
    fused = x.dtype == out_dtype or (op in ("add", "mul")
                                     and np.can_cast(x.dtype, out_dtype, "safe"))

    # fast path: one block of reduced dims in a C-contiguous array
    lo, hi = min(axes), max(axes) + 1
    if contiguous and fused and hi - lo == len(axes):
        outer = math.prod(shape[:lo])
        inner = math.prod(shape[hi:])
        if outer * n_red * inner < FOLD_PARALLEL_MIN:
            if len(_SERIAL_FOLDS) >= 4096:
                _SERIAL_FOLDS.clear()
            fold = _SERIAL_FOLDS[key] = _serial_fold(op, x.dtype, init, outer, n_red, inner,
                                                     out_shape)
            return fold(x)
        return _run_fold(op, x.reshape(outer, n_red, inner), init).reshape(out_shape)

    # drop size-1 dims, undo negative strides, then look at dims in memory order
    dims = [d for d in range(x.ndim) if shape[d] != 1]
    y = x.squeeze(tuple(d for d in range(x.ndim) if shape[d] == 1))
    flipped = [d for d, s in zip(dims, y.strides) if s < 0]
    if flipped and op in ("add", "mul") and out_dtype.kind in "fc":
        # float sums and products round (and overflow, and meet 0 * inf) in the order they
        # combine: a copy combines a flipped view in its logical order, as numpy does
        y, flipped, fused = _copy(y, out_dtype), [], True
    elif flipped:
        y = y[tuple(slice(None, None, -1) if s < 0 else slice(None) for s in y.strides)]
    order = _dense_order(y)
    if order is None:
        y = _copy(y, out_dtype)
    else:
        y = y.transpose(order)
        dims = [dims[d] for d in order]
        if not fused:
            y = _copy(y, out_dtype)

    # one pass per block of reduced dims, the largest block first
    groups = []  # [size, reduced?, original dims]
    for d, n in zip(dims, y.shape):
        red = d in axes
        if groups and groups[-1][1] == red:
            groups[-1][0] *= n
            groups[-1][2].append(d)
        else:
            groups.append([n, red, [d]])
    while True:
        reds = [i for i, g in enumerate(groups) if g[1]]
        if not reds:
            break
        i = max(reds, key=lambda i: (groups[i][0], i))
        outer = math.prod([g[0] for g in groups[:i]])
        inner = math.prod([g[0] for g in groups[i + 1:]])
        y = _run_fold(op, y.reshape(outer, groups[i][0], inner), init)
        del groups[i]
        if 0 < i < len(groups) and not groups[i - 1][1] and not groups[i][1]:
            groups[i - 1][0] *= groups[i][0]
            groups[i - 1][2] += groups.pop(i)[2]
    kept = [d for g in groups for d in g[2]]
    flipped = [d for d in flipped if d not in axes]
    if kept == sorted(kept) and not flipped:
        return y.reshape(out_shape)
    # the kept dims came out in memory order and unflipped: restore the caller's view
    y = y.reshape([shape[d] for d in kept]).transpose(np.argsort(kept))
    kept.sort()
    y = y[tuple(slice(None, None, -1) if d in flipped else slice(None) for d in kept)]
    return _copy(y, out_dtype).reshape(out_shape)


def arg_reduce(op, x, axis):
    """Index of the first maximum (``argmax``) or minimum (``argmin``) along ``axis``.

    ``axis=None`` looks at the flattened (non-empty) array and returns a 0-d int64 array.
    NaN counts as the extreme: the first NaN's index is returned, as in numpy.
    """
    if axis is None:
        x3 = (x if x.flags.c_contiguous else _copy(x, x.dtype)).reshape(1, x.size, 1)
        out_shape = ()
    else:
        n = x.shape[axis]
        out_shape = x.shape[:axis] + x.shape[axis + 1:]
        if x.size == 0:
            return np.empty(out_shape, np.int64)
        if not x.flags.c_contiguous:
            x = _copy(x, x.dtype)
        x3 = x.reshape(math.prod(x.shape[:axis]), n, math.prod(x.shape[axis + 1:]))
    outer, n, inner = x3.shape
    out = alloc(outer * inner, np.int64)
    k = kernel(arg_fold, "gt" if op == "argmax" else "lt")
    nsplit = 1
    if x3.size < ARG_PARALLEL_MIN:
        fn = k.serial
    else:
        fn = k.parallel
        want = TASKS_PER_THREAD * numba.get_num_threads()
        if inner == 1 and outer < want:
            nsplit = max(1, min(-(-want // outer), n // SPLIT_MIN))
    fn(x3.reshape(-1), out, outer, n, inner, nsplit)
    return out.reshape(out_shape)
