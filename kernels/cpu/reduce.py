"""Reductions (sum, prod, max, min, any, all) and arg-reductions on numpy arrays.

Every reduction runs on a C-contiguous ``(outer, red, inner)`` view whose
middle dim is reduced.  ``reduce`` finds such a view without copying whenever
it can: a block of reduced dims that is contiguous in memory order, in a dense
array of any stride order (transposed, reversed).  Axes that form several
blocks take one pass per block, each reading the previous, smaller result.
Only an array that is not dense (a strided slice, a broadcast) is copied, as
is one whose dtype must change for a max/min (sums and products read a
narrower dtype directly: bool or int32 into int64).

``fold`` is the one reduction skeleton, parametrised by the binary combiner
``OP`` (``kernels.scalar.add``, ``mul``, ``maximum``, ``minimum``,
``logical_and``, ``logical_or``).  A task keeps ``w`` independent
accumulators in a small array and adds blocks of ``w`` contiguous inputs to
them, ``ROWS`` blocks per pass (one for float max/min, see ``_run_fold``):
``acc[j] = OP(acc[j], OP(OP(b0[j], b1[j]), OP(b2[j], b3[j])))``, a loop LLVM
vectorises without fastmath (a single accumulator is a serial dependence
chain) and that loads and stores the accumulators once per ``ROWS`` blocks.
The order of the operations is fixed by the code, not by the machine's vector
width, so results are reproducible.

- ``inner`` narrow (1 included): ``k`` consecutive rows side by side,
  ``w = k * inner`` (about ``PACK_ROWS``, ``PACK_STREAM`` for inputs that come
  from memory, or ``PACK`` with one block per pass; ``ROW_LANE_BYTES`` of input
  for a parallel fold of many contiguous rows); the ``k`` groups are folded
  together, halving, at the end;
- ``inner`` wide: one tile of up to ``TILE`` columns, rows one after another;
- fewer than ``LANES_MIN`` lanes (short rows, few of them): one plain
  accumulator per column.

A parallel full reduction leaves the few elements before the array's first
cache line to the final combine, so that every block's vector loads are aligned.

A float32 sum keeps its lanes in float32 (16 per AVX-512 vector) for
``FLUSH`` blocks only, then adds them into float64 lanes: each float32
partial sums a few dozen inputs, so the result is at least as accurate as
numpy's pairwise float32 sum, at the speed of float32 arithmetic.

Parallel launches cut the work into about ``TASKS_PER_THREAD`` tasks per
thread: blocks of outer rows when there are enough, otherwise ``nsplit``
chunks of the reduced dim whose partial results land in ``part`` and are
combined at the end (how a full reduction of a large array uses every core:
one contiguous chunk per thread).  ``fold_params`` makes these choices.
"""
import functools
import math

import numba
import numpy as np
from numba import prange

from . import launch
from ..rebind import specialize
from .builder import JIT_OPTIONS, kernel, scalar_op
from .launch import PARALLEL_MIN, elementwise

TILE = 4096            # outputs per task when inner is wide
PACK = 512             # accumulators per task when inner is narrow, one block per pass
ROWS = 4               # blocks of rows added per pass over the accumulators
PACK_ROWS = 2048       # accumulators per task when inner is narrow, ROWS blocks per pass
PACK_STREAM = 16384    # the same for inputs larger than the last-level cache (STREAM_MIN)
STREAM_MIN = 32 << 20  # bytes: from this size on, a fold streams its input from memory
ROW_LANE_BYTES = 128   # a parallel fold of many contiguous rows: lanes over this many bytes of input
FLUSH = 32             # blocks a float32 sum's lanes take before going into float64
LANES_MIN = 16         # fewer lanes than this: one plain accumulator per column
LANES = 256            # (value, index) lanes per task of an arg-reduction
SPLIT_MIN = 1 << 14    # fewest elements worth a task of their own
TASKS_PER_THREAD = 4   # enough tasks that uneven ones still balance
# A fold streams ~15 elements/ns on one core (arg_fold ~8), while a parallel
# launch with sleeping workers (builder sets OMP_WAIT_POLICY=PASSIVE) costs
# 10-40 us here: below these sizes one core wins (2-core VM, see perf/).
FOLD_PARALLEL_MIN = 1 << 21
ARG_PARALLEL_MIN = 1 << 20

OPS = ("add", "mul", "maximum", "minimum", "logical_and", "logical_or")
_NAMES = {"add": "sum", "mul": "prod", "maximum": "max", "minimum": "min",
          "logical_and": "all", "logical_or": "any"}
_DTYPES = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64,
    np.uint8, np.uint16, np.uint32, np.uint64, np.float32, np.float64, np.complex64,
    np.complex128))


def fold_blocks(acc, src, at, step, w, nb, rows):
    # acc[j] = OP(acc[j], .) over ``nb`` blocks of ``w`` values of ``src``, the first at
    # ``at``, the others ``step`` apart: ROWS blocks per pass (when ``rows == ROWS``) while
    # ROWS are left, then one at a time.  ``fold`` and the fused reductions
    # (fused_reduce.fold_chain_task) both accumulate here: their bits must match.
    q = 0
    while rows == ROWS and q + ROWS <= nb:
        b0 = src[at:at + w]
        b1 = src[at + step:at + step + w]
        b2 = src[at + 2 * step:at + 2 * step + w]
        b3 = src[at + 3 * step:at + 3 * step + w]
        for j in range(w):
            acc[j] = OP(acc[j], OP(OP(b0[j], b1[j]), OP(b2[j], b3[j])))
        at += ROWS * step
        q += ROWS
    while q < nb:
        blk = src[at:at + w]
        for j in range(w):
            acc[j] = OP(acc[j], blk[j])
        at += step
        q += 1


@functools.cache
def blocks_op(op):
    """``fold_blocks`` with ``OP`` bound, inlined (Numba IR) into the loops that call it."""
    return numba.njit(inline="always", **JIT_OPTIONS)(
        specialize(fold_blocks, "fold_blocks__" + op, OP=scalar_op(op)))


def fold_kernel(op):
    """``fold`` with combiner ``op`` (serial and parallel builds)."""
    return kernel(fold, op, BLOCKS=blocks_op(op))


def fold(x, head, part, out, init, winit, outer, n, inner, ob, nsplit, rows, pack, flush):
    # x: (outer, n, inner) flat C order, out: (outer, inner); with nsplit > 1 the
    # chunks' results go to part: (outer, nsplit, inner), combined at the end with
    # ``head`` (a full reduction's first elements, before x's first cache line).
    # Lanes accumulate up to ``flush`` blocks in ``init``'s dtype, then go into
    # wide lanes of ``winit``'s dtype (float64 for float32 sums, else the same).
    csize = (n + nsplit - 1) // nsplit
    if nsplit > 1:  # whole cache lines per chunk when rows are contiguous (see _run_fold)
        csize = (csize + 63) // 64 * 64
    tw = min(inner, TILE)
    ntiles = (inner + tw - 1) // tw
    # rows side by side (> 1 only when inner < pack): a power of two, small
    # against the rows (about 1/16) so that folding the groups stays cheap
    k = 1
    while 2 * k * tw <= pack and 16 * k <= max(csize, 128) and 4 * k <= csize:
        k *= 2
    step = k * inner  # from one block of rows to the next
    nob = (outer + ob - 1) // ob
    for t in prange(nob * nsplit * ntiles):
        b = t // (nsplit * ntiles)
        rest = t - b * (nsplit * ntiles)
        c = rest // ntiles
        j0 = (rest - c * ntiles) * tw
        m = min(inner - j0, tw)
        w = k * m
        lo = min(n, c * csize)
        hi = min(n, lo + csize)
        nblocks = (hi - lo) // k
        if w < LANES_MIN:  # a few short rows: one accumulator per output
            for o in range(b * ob, min(outer, b * ob + ob)):
                for j in range(m):
                    a = winit
                    first = o * n * inner + lo * inner + j0 + j
                    for r in range(hi - lo):
                        a = OP(a, x[first + r * inner])
                    if nsplit == 1:
                        out[o * inner + j0 + j] = a
                    else:
                        part[(o * nsplit + c) * inner + j0 + j] = a
            continue
        acc = np.full(w, init)
        wide = np.full(w, winit)
        for o in range(b * ob, min(outer, b * ob + ob)):
            base = o * n * inner
            for j in range(w):
                wide[j] = winit
            # k whole rows (or one tile of one row) per block: w independent
            # accumulators, loaded and stored once per ``rows`` blocks
            start = base + lo * inner + j0
            q = 0
            while q < nblocks:
                qe = min(nblocks, q + flush)
                for j in range(w):
                    acc[j] = init
                BLOCKS(acc, x, start, step, w, qe - q, rows)
                start += (qe - q) * step
                q = qe
                for j in range(w):
                    wide[j] = OP(wide[j], acc[j])
            # leftover rows: fewer than k, so only when k > 1 and rows are whole
            tail = x[base + (lo + nblocks * k) * inner:base + hi * inner]
            for j in range(tail.shape[0]):
                wide[j] = OP(wide[j], tail[j])
            # fold the k groups of m lanes into the first, halving each step
            g = k
            while g > 1:
                h = g // 2
                src = (g - h) * m
                for j in range(h * m):
                    wide[j] = OP(wide[j], wide[src + j])
                g -= h
            if nsplit == 1:
                dst = out[o * inner + j0:o * inner + j0 + m]
                for j in range(m):
                    dst[j] = wide[j]
            else:
                dst = part[(o * nsplit + c) * inner + j0:(o * nsplit + c) * inner + j0 + m]
                for j in range(m):
                    dst[j] = wide[j]
    if nsplit > 1:  # small: outer * inner < a few tasks' worth
        # chunk by chunk into chunk 0's row of part (contiguous rows: vectorised; an
        # element at a time, the chunks lie inner apart: 15 us for 8 x 4096), in chunk order
        for o in range(outer):
            a = part[o * nsplit * inner:(o * nsplit + 1) * inner]
            for c in range(1, nsplit):
                src = part[(o * nsplit + c) * inner:(o * nsplit + c + 1) * inner]
                for j in range(inner):
                    a[j] = OP(a[j], src[j])
            for j in range(inner):
                v = a[j]
                for i in range(head.shape[0]):
                    v = OP(v, head[i])
                out[o * inner + j] = v


def arg_fold(x, out, outer, n, inner, nsplit):
    # x: (outer, n, inner) flat.  OP is the strict comparison (gt for argmax,
    # lt for argmin), so the first extreme wins ties; the first NaN beats all.
    # Each task keeps a best (value, index) per lane, updated with selects so
    # the loops vectorise, and then merges its lanes.
    if inner == 1:
        csize = (n + nsplit - 1) // nsplit
        pv = np.empty(outer * nsplit, x.dtype)
        pi = np.full(outer * nsplit, -1, np.int64)
        for t in prange(outer * nsplit):
            o = t // nsplit
            lo = min(n, (t - o * nsplit) * csize)
            hi = min(n, lo + csize)
            if lo < hi:
                row = x[o * n + lo:o * n + hi]
                w = min(hi - lo, LANES)
                bv = row[:w].copy()
                bi = np.arange(w)
                nb = (hi - lo) // w
                for q in range(1, nb + 1):
                    blk = row[q * w:q * w + w]
                    for j in range(blk.shape[0]):
                        v = blk[j]
                        b = bv[j]
                        take = OP(v, b) | ((v != v) & (b == b))
                        bv[j] = v if take else b
                        bi[j] = q * w + j if take else bi[j]
                best = bv[0]
                k = bi[0]
                for j in range(1, w):
                    v = bv[j]
                    i = bi[j]
                    if v != v:
                        take = best == best or i < k
                    elif best != best:
                        take = False
                    else:
                        take = OP(v, best) or (v == best and i < k)
                    if take:
                        best = v
                        k = i
                pv[t] = best
                pi[t] = lo + k
        for o in range(outer):  # chunks in order: a strict win replaces
            best = pv[o * nsplit]
            k = pi[o * nsplit]
            for c in range(1, nsplit):
                v = pv[o * nsplit + c]
                if pi[o * nsplit + c] >= 0 and (OP(v, best) or (v != v and best == best)):
                    best = v
                    k = pi[o * nsplit + c]
            out[o] = k
    else:
        ntiles = (inner + TILE - 1) // TILE
        for t in prange(outer * ntiles):
            o = t // ntiles
            j0 = (t - o * ntiles) * TILE
            m = min(inner - j0, TILE)
            base = o * n * inner + j0
            best = x[base:base + m].copy()
            idx = out[o * inner + j0:o * inner + j0 + m]
            for j in range(m):
                idx[j] = 0
            for r in range(1, n):
                row = x[base + r * inner:base + r * inner + m]
                for j in range(m):
                    v = row[j]
                    b = best[j]
                    take = OP(v, b) | ((v != v) & (b == b))
                    best[j] = v if take else b
                    idx[j] = r if take else idx[j]


# --- launching ------------------------------------------------------------------
@functools.cache
def _identity(op, dtype):
    """The value ``init`` with ``OP(init, v) == v`` for every ``v`` of ``dtype``."""
    if op == "add":
        v = 0
    elif op == "mul":
        v = 1
    elif op == "logical_and":
        v = True
    elif op == "logical_or":
        v = False
    elif dtype.kind == "f":
        v = -np.inf if op == "maximum" else np.inf
    elif dtype.kind == "b":
        v = op == "minimum"
    else:
        info = np.iinfo(dtype)
        v = info.min if op == "maximum" else info.max
    return dtype.type(v)


def _copy(x, dtype):
    """A fresh C-contiguous copy of ``x`` in ``dtype``."""
    out = launch.alloc(x.shape, dtype)
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
    out = launch.alloc((outer, inner), init.dtype)
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


def _check_dtype(name, dtype):
    if dtype not in _DTYPES:
        raise TypeError(f"{name}: unsupported dtype {dtype}")


def _dense_order(y):
    """Dims of ``y`` in memory order if ``y`` is a permuted C-contiguous array, else None."""
    order = sorted(range(y.ndim), key=lambda d: -y.strides[d])
    if y.transpose(order).flags.c_contiguous:
        return order
    return None


def reduce(op, x, axes, out_dtype):
    """Reduce ``x`` over ``axes`` (distinct non-negative ints) with combiner ``op``.

    Returns a new array of ``out_dtype`` with the reduced axes removed,
    accumulated in ``out_dtype``; ``axes == ()`` returns a cast copy.  Into
    bool, ``add``/``mul`` are ``logical_or``/``logical_and`` (numpy's rule).
    Empty reduced dims give the identity; max/min raise ValueError on them.
    """
    if op not in OPS:
        raise ValueError(f"reduce: unknown op {op!r}; expected one of {OPS}")
    x = np.asarray(x)
    out_dtype = np.dtype(out_dtype)
    name = _NAMES[op]
    _check_dtype(name, x.dtype)
    _check_dtype(name, out_dtype)
    if op in ("logical_and", "logical_or") and out_dtype.kind != "b":
        raise TypeError(f"{name}: reduces into bool, not {out_dtype}")
    if out_dtype.kind == "b" and op in ("add", "mul"):
        op = "logical_or" if op == "add" else "logical_and"
    axes = tuple(int(a) for a in axes)
    if len(set(axes)) != len(axes) or any(not 0 <= a < x.ndim for a in axes):
        raise ValueError(f"{name}: invalid axes {axes} for an array of shape {x.shape}")
    shape = x.shape
    out_shape = tuple(n for d, n in enumerate(shape) if d not in axes)
    n_red = 1
    for a in axes:
        n_red *= shape[a]
    if n_red == 0:
        if op in ("maximum", "minimum"):
            raise ValueError(f"{name}: cannot reduce an empty dim (shape {shape}, axes {axes})")
        return np.full(out_shape, _identity(op, out_dtype), out_dtype)
    if n_red == 1:  # nothing to combine: every reduced dim has size 1
        return _copy(x.reshape(out_shape), out_dtype)
    if x.size == 0:
        return np.empty(out_shape, out_dtype)
    init = _identity(op, out_dtype)
    # sums and products read a narrower dtype directly (bool or int32 into int64)
    fused = x.dtype == out_dtype or (op in ("add", "mul")
                                     and np.can_cast(x.dtype, out_dtype, "safe"))

    # fast path: one block of reduced dims in a C-contiguous array
    lo, hi = min(axes), max(axes) + 1
    if x.flags.c_contiguous and fused and hi - lo == len(axes):
        outer = math.prod(shape[:lo])
        inner = math.prod(shape[hi:])
        return _run_fold(op, x.reshape(outer, n_red, inner), init).reshape(out_shape)

    # drop size-1 dims, undo negative strides, then look at dims in memory order
    dims = [d for d in range(x.ndim) if shape[d] != 1]
    y = x.squeeze(tuple(d for d in range(x.ndim) if shape[d] == 1))
    flipped = [d for d, s in zip(dims, y.strides) if s < 0]
    if flipped:
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

    ``axis=None`` looks at the flattened array and returns a 0-d int64 array.
    NaN counts as the extreme: the first NaN's index is returned, as in numpy.
    """
    if op not in ("argmax", "argmin"):
        raise ValueError(f"arg_reduce: unknown op {op!r}; expected 'argmax' or 'argmin'")
    x = np.asarray(x)
    _check_dtype(op, x.dtype)
    if axis is None:
        if x.size == 0:
            raise ValueError(f"{op}: cannot reduce an empty array (shape {x.shape})")
        x3 = (x if x.flags.c_contiguous else _copy(x, x.dtype)).reshape(1, x.size, 1)
        out_shape = ()
    else:
        axis = int(axis)
        if not -x.ndim <= axis < x.ndim:
            raise ValueError(f"{op}: axis {axis} out of range for an array of shape {x.shape}")
        axis %= x.ndim
        n = x.shape[axis]
        out_shape = x.shape[:axis] + x.shape[axis + 1:]
        if n == 0:
            raise ValueError(f"{op}: cannot reduce an empty dim (shape {x.shape}, axis {axis})")
        if x.size == 0:
            return np.empty(out_shape, np.int64)
        if not x.flags.c_contiguous:
            x = _copy(x, x.dtype)
        x3 = x.reshape(math.prod(x.shape[:axis]), n, math.prod(x.shape[axis + 1:]))
    outer, n, inner = x3.shape
    out = launch.alloc(outer * inner, np.int64)
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
