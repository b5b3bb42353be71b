"""Indexing loops: gather (and index_select), scatter, nonzero.

Operands arrive as a 1-D buffer plus an element offset and element strides, as the
elementwise loops take them; indices are int64 and in range (checked before any backend
runs: ``dispatch.check_index_range``).  Pure data movement (gather, scatter with
``"assign"``) runs on an unsigned view of the same item size, so one compiled kernel per
item size serves every dtype.  Launched by ``engine/backends/cpu/index.py``.
"""
import numpy as np
from numba import prange

CHUNK = 1 << 14   # elements per task


def gather_walk(x, xo, xst, ind, io, ist, out, shape, axis):
    """out[p] = x[coords of p, with ``ind`` at ``axis``] over the C order of ``shape``.

    ``out`` is C-contiguous of ``shape``; ``x`` and ``ind`` are strided (``ind``
    is broadcast, stride 0, for index_select).  Tasks are chunks of rows of the
    last dim.
    """
    nd = shape.shape[0]
    inner = shape[nd - 1]
    per_row = (inner + CHUNK - 1) // CHUNK
    ntasks = per_row
    for d in range(nd - 1):
        ntasks *= shape[d]
    sax = xst[axis]
    sl = xst[nd - 1] if axis != nd - 1 else 0
    il = ist[nd - 1]
    for t in prange(ntasks):
        r = t // per_row
        start = (t - r * per_row) * CHUNK
        m = min(inner - start, CHUNK)
        po = r * inner + start
        px = xo + start * sl
        pi = io + start * il
        for d in range(nd - 2, -1, -1):
            i = r % shape[d]
            r //= shape[d]
            if d != axis:
                px += i * xst[d]
            pi += i * ist[d]
        # Slices, not offsets, in the inner loops: LLVM vectorises those.
        z = out[po:po + m]
        if il == 0:  # one index for the whole row: a (strided) copy
            base = px + ind[pi] * sax
            if sl == 1:
                xs = x[base:base + m]
                for j in range(m):
                    z[j] = xs[j]
            else:
                for j in range(m):
                    z[j] = x[base + j * sl]
        elif il == 1:
            ids = ind[pi:pi + m]
            for j in range(m):
                z[j] = x[px + j * sl + ids[j] * sax]
        else:
            for j in range(m):
                z[j] = x[px + j * sl + ind[pi + j * il] * sax]


def scatter_walk(out, ost, ind, ist, val, vo, vst, shape, axis, add):
    """out[coords of p, with ``ind`` at ``axis``] = (or +=) val[p] over ``shape``.

    ``shape`` is the (merged) index shape; ``out`` is C-contiguous with
    strides ``ost``.  Two index elements can only hit the same output element
    when they differ only along ``axis``, so tasks are the blocks of one
    coordinate before ``axis``: each task owns its outputs, and inside it the
    elements go in C order, as a serial loop would (last write wins,
    float sums in the same order).
    """
    nd = shape.shape[0]
    outer = 1
    for d in range(axis):
        outer *= shape[d]
    rows = 1
    for d in range(axis, nd - 1):
        rows *= shape[d]
    inner = shape[nd - 1]
    sax = ost[axis]
    sl = ost[nd - 1] if axis != nd - 1 else 0
    il = ist[nd - 1]
    vl = vst[nd - 1]
    for t in prange(outer):
        po0 = 0
        pi0 = 0
        pv0 = vo
        div = outer
        for d in range(axis):
            div //= shape[d]
            i = (t // div) % shape[d]
            po0 += i * ost[d]
            pi0 += i * ist[d]
            pv0 += i * vst[d]
        for q in range(rows):
            rem = q
            po = po0
            pi = pi0
            pv = pv0
            for d in range(nd - 2, axis - 1, -1):
                i = rem % shape[d]
                rem //= shape[d]
                if d != axis:
                    po += i * ost[d]
                pi += i * ist[d]
                pv += i * vst[d]
            if il == 1 and vl == 1:  # contiguous index and values: slices
                ids = ind[pi:pi + inner]
                vs = val[pv:pv + inner]
                if add:
                    for j in range(inner):
                        out[po + j * sl + ids[j] * sax] += vs[j]
                else:
                    for j in range(inner):
                        out[po + j * sl + ids[j] * sax] = vs[j]
            elif add:
                for j in range(inner):
                    out[po + j * sl + ind[pi + j * il] * sax] += val[pv + j * vl]
            else:
                for j in range(inner):
                    out[po + j * sl + ind[pi + j * il] * sax] = val[pv + j * vl]


def nonzero_walk(x, xo, xst, shape, mask):
    """Coordinates (count, ndim) of the elements with ``x & mask != 0``, C order.

    Two passes over chunks of rows of the last dim: count per chunk, then
    each chunk writes its coordinates from its prefix-sum offset.
    """
    nd = shape.shape[0]
    inner = shape[nd - 1]
    per_row = (inner + CHUNK - 1) // CHUNK
    ntasks = per_row
    for d in range(nd - 1):
        ntasks *= shape[d]
    sl = xst[nd - 1]
    zero = np.uint64(0)
    counts = np.empty(ntasks + 1, np.int64)
    for t in prange(ntasks):
        r = t // per_row
        start = (t - r * per_row) * CHUNK
        m = min(inner - start, CHUNK)
        px = xo + start * sl
        for d in range(nd - 2, -1, -1):
            i = r % shape[d]
            r //= shape[d]
            px += i * xst[d]
        c = 0
        if sl == 1:
            xs = x[px:px + m]
            for j in range(m):
                if (np.uint64(xs[j]) & mask) != zero:
                    c += 1
        else:
            for j in range(m):
                if (np.uint64(x[px + j * sl]) & mask) != zero:
                    c += 1
        counts[t + 1] = c
    counts[0] = 0
    for t in range(ntasks):
        counts[t + 1] += counts[t]
    out = np.empty((counts[ntasks], nd), np.int64)
    for t in prange(ntasks):
        first = counts[t]
        end = counts[t + 1]
        if first == end:
            continue
        r = t // per_row
        start = (t - r * per_row) * CHUNK
        px = xo + start * sl
        for d in range(nd - 2, -1, -1):  # the same outer coordinates for the task
            i = r % shape[d]
            r //= shape[d]
            px += i * xst[d]
            for k in range(first, end):
                out[k, d] = i
        # Branch-free: write every position at row k, step k only past a
        # nonzero; a zero's write is overwritten by the next nonzero, and the
        # loop stops at the task's last nonzero (so never writes past ``end``).
        k = first
        j = 0
        while k < end:
            out[k, nd - 1] = start + j
            k += (np.uint64(x[px + j * sl]) & mask) != zero
            j += 1
    return out
