"""Indexing skeletons: gather (and index_select), scatter, nonzero.

Operands arrive as (1-D buffer, offset, strides) with full-rank ``shape``
tuples; indices are int64 and already checked to be in range.

``scatter_lines`` gives each thread one line along ``axis`` of the index and
walks it in order: two index entries can only hit the same output element
when they differ only along ``axis``, so no atomics are needed and the result
is the CPU's (last write wins; sums in the same order).
"""
from numba import cuda


def gather_walk(x, xo, xst, ind, io, ist, out, shape, axis, total):
    nd = len(shape)
    for p in range(cuda.grid(1), total, cuda.gridsize(1)):
        rem = p
        px = xo
        pi = io
        for d in range(nd - 1, -1, -1):
            c = rem % shape[d]
            rem //= shape[d]
            if d != axis:
                px += c * xst[d]
            pi += c * ist[d]
        out[p] = x[px + ind[pi] * xst[axis]]


def scatter_lines(out, ost, ind, io, ist, val, vo, vst, shape, axis, add, lines):
    nd = len(shape)
    m = shape[axis]
    for line in range(cuda.grid(1), lines, cuda.gridsize(1)):
        rem = line
        po = 0
        pi = io
        pv = vo
        for d in range(nd - 1, -1, -1):
            if d != axis:
                c = rem % shape[d]
                rem //= shape[d]
                po += c * ost[d]
                pi += c * ist[d]
                pv += c * vst[d]
        for q in range(m):
            dst = po + ind[pi + q * ist[axis]] * ost[axis]
            if add:
                out[dst] = out[dst] + val[pv + q * vst[axis]]
            else:
                out[dst] = val[pv + q * vst[axis]]


def nonzero_write(cum, out, shape, total):
    nd = len(shape)
    for p in range(cuda.grid(1), total, cuda.gridsize(1)):
        prev = cum[p - 1] if p > 0 else 0
        if cum[p] != prev:
            row = prev
            rem = p
            for d in range(nd - 1, -1, -1):
                out[row * nd + d] = rem % shape[d]
                rem //= shape[d]
