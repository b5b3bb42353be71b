"""Reduction and scan skeletons over a C-contiguous ``(rows, n)`` view.

``fold``: a block per (row, chunk) pair; each thread folds a strided slice of
the chunk with the binary combiner ``OP`` (``kernels.scalar.add``, ``mul``,
``maximum``, ``minimum``, ``logical_and``, ``logical_or``), then the block
combines its threads' partials with a shared-memory tree.  The launcher runs
it twice when rows are long and few (chunks, then their partial results), so a
full reduction still fills the GPU.  (No warp shuffles: the simulator, which
the tests run on, has none; the tree is the same on both.)

``arg_fold`` does the same with (value, index) pairs; ``OP`` is the strict
comparison (``gt`` for argmax, ``lt`` for argmin), the first extreme wins
ties and the first NaN beats everything, as on the CPU.

``scan_lines``: one thread per line of an ``(outer, n, inner)`` view, an
inclusive scan with ``OP`` along ``n``.
"""
from numba import cuda

import numpy as np

from .builder import THREADS

DTI = np.int64


def fold(x, out, rows, n, nsplit, csize, init):
    buf = cuda.shared.array(THREADS, DT)
    tid = cuda.threadIdx.x
    for b in range(cuda.blockIdx.x, rows * nsplit, cuda.gridDim.x):
        r = b // nsplit
        lo = (b - r * nsplit) * csize
        hi = min(n, lo + csize)
        acc = init
        for j in range(lo + tid, hi, THREADS):
            acc = OP(acc, x[r * n + j])
        buf[tid] = acc
        cuda.syncthreads()
        s = THREADS // 2
        while s > 0:
            if tid < s:
                buf[tid] = OP(buf[tid], buf[tid + s])
            cuda.syncthreads()
            s //= 2
        if tid == 0:
            out[b] = buf[0]
        cuda.syncthreads()


@cuda.jit(device=True)
def _beats(v, i, b, bi, strict):
    """(v, i) replaces the best (b, bi): ``strict`` is OP(v, b)."""
    if bi < 0:
        return i >= 0
    if i < 0:
        return False
    if v != v:
        return b == b or i < bi
    if b != b:
        return False
    return strict or (v == b and i < bi)


def arg_fold(x, out, rows, n):
    vals = cuda.shared.array(THREADS, DT)
    idx = cuda.shared.array(THREADS, DTI)
    tid = cuda.threadIdx.x
    for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        base = r * n
        bi = -1
        best = x[base]
        for j in range(tid, n, THREADS):
            v = x[base + j]
            if _beats(v, j, best, bi, OP(v, best)):
                best = v
                bi = j
        vals[tid] = best
        idx[tid] = bi
        cuda.syncthreads()
        s = THREADS // 2
        while s > 0:
            if tid < s:
                v = vals[tid + s]
                i = idx[tid + s]
                if _beats(v, i, vals[tid], idx[tid], OP(v, vals[tid])):
                    vals[tid] = v
                    idx[tid] = i
            cuda.syncthreads()
            s //= 2
        if tid == 0:
            out[r] = idx[0]
        cuda.syncthreads()


def scan_lines(x, out, outer, n, inner):
    for line in range(cuda.grid(1), outer * inner, cuda.gridsize(1)):
        o = line // inner
        p = o * n * inner + (line - o * inner)
        acc = x[p]
        out[p] = acc
        for r in range(1, n):
            p += inner
            acc = OP(acc, x[p])
            out[p] = acc
