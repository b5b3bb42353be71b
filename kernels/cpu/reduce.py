"""Reduction loops (sum, prod, max, min, any, all, argmax, argmin) on C-contiguous views.

Every reduction runs on a C-contiguous ``(outer, red, inner)`` view whose middle dim is
reduced (``engine/backends/cpu/reduce.py`` finds such views and chooses the tasks).

``fold`` is the one reduction skeleton, parametrised by the binary combiner ``OP``
(``kernels.scalar.add``, ``mul``, ``maximum``, ``minimum``, ``logical_and``,
``logical_or``).  A task keeps ``w`` independent accumulators in a small array and adds
blocks of ``w`` contiguous inputs to them, ``ROWS`` blocks per pass (``rows == 1``: one):
``acc[j] = OP(acc[j], OP(OP(b0[j], b1[j]), OP(b2[j], b3[j])))``, a loop LLVM vectorises
without fastmath (a single accumulator is a serial dependence chain) and that loads and
stores the accumulators once per ``ROWS`` blocks.  The order of the operations is fixed by
the code and its arguments, not by the machine's vector width, so results are reproducible.

- ``inner`` narrow (1 included): ``k`` consecutive rows side by side, ``w = k * inner``
  lanes (at most ``pack``); the ``k`` groups are folded together, halving, at the end;
- ``inner`` wide: one tile of up to ``TILE`` columns, rows one after another;
- fewer than ``LANES_MIN`` lanes (short rows, few of them): one plain accumulator per column.

Lanes accumulate ``flush`` blocks in ``init``'s dtype, then go into wide lanes of
``winit``'s dtype (a float32 sum flushes into float64: as accurate as a pairwise sum).
With ``nsplit > 1`` the reduced dim is cut into chunks whose partial results land in
``part`` and are combined at the end, with ``head`` (a full reduction's first elements,
before its first cache line).  ``arg_fold`` keeps ``LANES`` (value, index) lanes.
"""
import functools

import numba
import numpy as np
from numba import prange

from ..rebind import specialize
from .builder import JIT_OPTIONS, kernel, scalar_op

TILE = 4096            # outputs per task when inner is wide
ROWS = 4               # blocks of rows added per pass over the accumulators
LANES_MIN = 16         # fewer lanes than this: one plain accumulator per column
LANES = 256            # (value, index) lanes per task of an arg-reduction
SHORT_LANES = 32       # lanes of a row shorter than LANES_MIN_ROW
LANES_MIN_ROW = 1 << 13
ARG_GROUP = 1 << 14    # elements of an arg-reduction's rows per group of tasks (one lane buffer)
ARG_SHORT = 64         # rows up to this long: a plain scan, no lanes


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
    if inner == 1 and nsplit == 1 and n <= ARG_SHORT:
        # whole short rows (the argmax over 2 logits of each point): one scan per row straight
        # into ``out``, without the per-task buffers and their merge (2048 x 2: 31 -> ~7 us)
        for o in prange(outer):
            best = x[o * n]
            k = 0
            for j in range(1, n):
                v = x[o * n + j]
                if OP(v, best) or (v != v and best == best):
                    best = v
                    k = j
            out[o] = k
    elif inner == 1:
        csize = (n + nsplit - 1) // nsplit
        pv = np.empty(outer * nsplit, x.dtype)
        pi = np.full(outer * nsplit, -1, np.int64)
        # tasks in groups of about ARG_GROUP elements, each group's lane buffers made once
        # (two allocations per row of 100 were most of a 2048 x 100 argmax)
        ntasks = outer * nsplit
        per_group = max(1, ARG_GROUP // max(csize, 1))
        for g in prange((ntasks + per_group - 1) // per_group):
            lanes_v = np.empty(LANES, x.dtype)
            lanes_i = np.empty(LANES, np.int64)
            for t in range(g * per_group, min(ntasks, g * per_group + per_group)):
                o = t // nsplit
                lo = min(n, (t - o * nsplit) * csize)
                hi = min(n, lo + csize)
                if lo < hi and hi - lo <= ARG_SHORT:
                    # a short row (argmax over a last dim of a few): one scan, no lanes (when
                    # each row allocated its lanes, they cost 10x the scan: 2048 x 2, 160 us)
                    best = x[o * n + lo]
                    k = 0
                    for j in range(1, hi - lo):
                        v = x[o * n + lo + j]
                        if OP(v, best) or (v != v and best == best):
                            best = v
                            k = j
                    pv[t] = best
                    pi[t] = lo + k
                elif lo < hi:
                    row = x[o * n + lo:o * n + hi]
                    # lanes: their merge is a branchy scan, so a row shorter than LANES_MIN_ROW
                    # takes few of them (256 lanes over rows of 256 merged every value: 512 x
                    # 256 took 234 us, numpy 18)
                    w = min(hi - lo, LANES if hi - lo >= LANES_MIN_ROW else SHORT_LANES)
                    bv = lanes_v[:w]
                    bi = lanes_i[:w]
                    for j in range(w):
                        bv[j] = row[j]
                        bi[j] = j
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


