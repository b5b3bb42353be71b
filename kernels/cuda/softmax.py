"""Fused softmax and log_softmax over the rows of a C-contiguous ``(rows, n)`` array.

One block per row (grid-stride over rows): its threads fold the row's maximum
``m`` with the NaN-propagating ``scalar.maximum``, then the sum ``s`` of
``OP(x - m)`` (``OP`` is ``exp_f32`` for float32, ``exp`` for float64), each
with a shared-memory tree as in ``reduce.fold``, and write ``exp(x - m) / s``
or ``(x - m) - log(s)``.  Recomputing the exp in the last pass costs less than
a second trip through global memory.  The launcher moves the softmax dim last
(a transposed copy when it is not already there).
"""
import math

from numba import cuda

from .builder import THREADS, device_fn

MAX = device_fn("maximum")


def softmax_rows(x, xo, out, rows, n, init, one, log):
    buf = cuda.shared.array(THREADS, DT)
    tid = cuda.threadIdx.x
    zero = one - one
    for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
        base = xo + r * n
        m = init
        for j in range(tid, n, THREADS):
            m = MAX(m, x[base + j])
        buf[tid] = m
        cuda.syncthreads()
        h = THREADS // 2
        while h > 0:
            if tid < h:
                buf[tid] = MAX(buf[tid], buf[tid + h])
            cuda.syncthreads()
            h //= 2
        m = buf[0]
        cuda.syncthreads()
        s = zero
        for j in range(tid, n, THREADS):
            s += OP(x[base + j] - m)
        buf[tid] = s
        cuda.syncthreads()
        h = THREADS // 2
        while h > 0:
            if tid < h:
                buf[tid] += buf[tid + h]
            cuda.syncthreads()
            h //= 2
        s = buf[0]
        cuda.syncthreads()
        if log:
            lse = math.log(s)
            for j in range(tid, n, THREADS):
                out[r * n + j] = (x[base + j] - m) - lse
        else:
            inv = one / s
            for j in range(tid, n, THREADS):
                out[r * n + j] = OP(x[base + j] - m) * inv
