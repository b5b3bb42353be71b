"""Quantization kernels on CUDA: calibration, quantize, dequantize, pack/unpack, matmul.

The scalar math is ``kernels/cpu/quant.py``'s (``SCALARS``: the one definition), compiled
here as device functions and bound into the skeletons below under the same upper-case
names.  Geometry and packing are the CPU module's: a tensor is an ``(L, R, C)`` array cut
into ``(bm, bn)`` blocks whose scales form an ``(L, GR, GC)`` grid; packed rows hold
``32 // bits`` values per uint32 word, the first in the lowest bits.  Operands arrive as
``(buffer, offset, strides)`` in elements, like the other CUDA skeletons, so strided views
(a transposed weight) cost no copy.

Launched by ``engine/backends/cuda/quant.py``.
"""
import functools
import math

import numpy as np
from numba import cuda

from ..cpu import quant as _cpu
from ..rebind import specialize
from .builder import TILE

INF = math.inf


@functools.cache
def _scalars():
    """The CPU module's scalar definitions as device functions, plus ``QLOAD``."""
    out = {k: cuda.jit(device=True)(specialize(f, "cuda_" + f.__name__))
           for k, f in _cpu.SCALARS.items()}
    out["QLOAD"] = cuda.jit(device=True)(specialize(qload, "cuda_qload", **out))
    return out


@functools.cache
def kernel(template, dtype=None):
    """``template`` with the scalars bound (and ``DT``, a shared-memory dtype), as one cuda.jit kernel."""
    name = "quant_" + template.__name__ + (f"__{np.dtype(dtype).name}" if dtype else "")
    bindings = dict(_scalars())
    if dtype is not None:
        bindings["DT"] = np.dtype(dtype).type
    return cuda.jit(specialize(template, name, **bindings))


# --------------------------------------------------------------------------
# skeletons


def qload(q, qo, qst, sc, so, sst, bm, bn, bits, r, c):
    """Element ``(r, c)`` of a 2-D quantized matrix, dequantized (``bits == 0``: int8 values)."""
    s = sc[so + (r // bm) * sst[0] + (c // bn) * sst[1]]
    if bits:
        per = 32 // bits
        v = UNPACK(q[qo + r * qst[0] + (c // per) * qst[1]], (c % per) * bits, bits)
        return DEQUANTIZE(v, s)
    return DEQUANTIZE(q[qo + r * qst[0] + c * qst[1]], s)


def absmax_all(x, xo, xst, L, R, C, amax, flag):
    """``amax[0]``: the largest ``|x|``, by a grid-stride pass and atomics; ``flag[0] = 1`` on NaN/inf."""
    n = L * R * C
    start = cuda.grid(1)
    if start < n:
        m = abs(x[xo])
        for i in range(start, n, cuda.gridsize(1)):
            c = i % C
            r = (i // C) % R
            l = i // (C * R)
            a = abs(x[xo + l * xst[0] + r * xst[1] + c * xst[2]])
            if a > m:
                m = a
            if a != a or a == INF:
                flag[0] = 1
        cuda.atomic.max(amax, 0, m)


def absmax_blocks(x, xo, xst, L, R, C, bm, bn, GR, GC, half, scales, flag):
    """One thread per ``(bm, bn)`` block: ``scales[b] = SCALE(max |x| of the block, half)``."""
    for b in range(cuda.grid(1), L * GR * GC, cuda.gridsize(1)):
        gc = b % GC
        gr = (b // GC) % GR
        l = b // (GC * GR)
        base = xo + l * xst[0]
        m = abs(x[base + gr * bm * xst[1] + gc * bn * xst[2]])
        for r in range(gr * bm, min(R, gr * bm + bm)):
            for c in range(gc * bn, min(C, gc * bn + bn)):
                a = abs(x[base + r * xst[1] + c * xst[2]])
                if a > m:
                    m = a
                if a != a or a == INF:
                    flag[0] = 1
        scales[b] = SCALE(m, half)


def quantize_values(x, xo, xst, sc, so, sst, L, R, C, bm, bn, lo, hi, out, flag):
    """``out[i] = QUANTIZE(x, scale of its block)`` over the C-order elements of ``(L, R, C)``."""
    for i in range(cuda.grid(1), L * R * C, cuda.gridsize(1)):
        c = i % C
        r = (i // C) % R
        l = i // (C * R)
        v = x[xo + l * xst[0] + r * xst[1] + c * xst[2]]
        if v != v or abs(v) == INF:
            flag[0] = 1
            out[i] = 0
        else:
            s = sc[so + l * sst[0] + (r // bm) * sst[1] + (c // bn) * sst[2]]
            out[i] = QUANTIZE(v, s, lo, hi)


def dequantize_window(q, qo, qst, sc, so, sst, bm, bn, bits, r0, c0, L, TR, TC, out):
    """The ``(L, TR, TC)`` window at ``(r0, c0)`` of a quantized ``(L, R, C)`` tensor, dequantized."""
    for i in range(cuda.grid(1), L * TR * TC, cuda.gridsize(1)):
        j = i % TC
        t = (i // TC) % TR
        l = i // (TC * TR)
        out[i] = QLOAD(q, qo + l * qst[0], (qst[1], qst[2]), sc, so + l * sst[0], (sst[1], sst[2]),
                       bm, bn, bits, r0 + t, c0 + j)


def pack_words(q, qo, rows, C, nw, bits, words):
    """Contiguous int8 rows ``(rows, C)`` at ``qo`` -> ``(rows, nw)`` words, one thread per word."""
    per = 32 // bits
    for i in range(cuda.grid(1), rows * nw, cuda.gridsize(1)):
        w = i % nw
        r = i // nw
        acc = np.int64(0)
        for k in range(min(per, C - w * per)):
            acc |= PACK(q[qo + r * C + w * per + k], k * bits, bits)
        words[i] = acc


def unpack_words(words, wo, wst, rows, C, bits, out):
    """``(rows, nw)`` words (strided) -> contiguous ``(rows, C)`` int8 values."""
    per = 32 // bits
    for i in range(cuda.grid(1), rows * C, cuda.gridsize(1)):
        c = i % C
        r = i // C
        out[i] = UNPACK(words[wo + r * wst[0] + (c // per) * wst[1]], (c % per) * bits, bits)


def qmatmul_tiled(f, fo, fst, q, qo, qst, sc, so, sst, bm, bn, bits, qleft, out, m, k, n):
    """``out = Q @ F`` (``qleft``) or ``F @ Q``: the tiled shared-memory matmul of
    ``kernels/cuda/linalg.py``, whose quantized operand is dequantized as its tiles are staged
    (no dequantized copy of it exists).  ``DT``: the float operand's and the output's dtype."""
    sa = cuda.shared.array((TILE, TILE), DT)
    sb = cuda.shared.array((TILE, TILE), DT)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    ntr = (m + TILE - 1) // TILE
    ntc = (n + TILE - 1) // TILE
    for rt in range(cuda.blockIdx.y, ntr, cuda.gridDim.y):
        row = rt * TILE + ty
        for ct in range(cuda.blockIdx.x, ntc, cuda.gridDim.x):
            col = ct * TILE + tx
            acc = DT(0)
            for k0 in range(0, k, TILE):
                if row < m and k0 + tx < k:
                    if qleft:
                        sa[ty, tx] = QLOAD(q, qo, qst, sc, so, sst, bm, bn, bits, row, k0 + tx)
                    else:
                        sa[ty, tx] = f[fo + row * fst[0] + (k0 + tx) * fst[1]]
                else:
                    sa[ty, tx] = 0
                if col < n and k0 + ty < k:
                    if qleft:
                        sb[ty, tx] = f[fo + (k0 + ty) * fst[0] + col * fst[1]]
                    else:
                        sb[ty, tx] = QLOAD(q, qo, qst, sc, so, sst, bm, bn, bits, k0 + ty, col)
                else:
                    sb[ty, tx] = 0
                cuda.syncthreads()
                for p in range(TILE):
                    acc += sa[ty, p] * sb[p, tx]
                cuda.syncthreads()
            if row < m and col < n:
                out[row * n + col] = acc
