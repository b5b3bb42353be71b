"""The quantization ops on CUDA arrays: calibrate, quantize, dequantize, pack, unpack and
the quantized matmul (``kernels/cuda/quant.py``; geometry and packing as on the CPU).

Each returns new arrays; bad data is reported (``finite``, from a device flag read back
once) and the message left to ``ember.quant``.
"""
import numpy as np

from ember.kernels.cpu.quant import scale_of, words_per_row
from ember.kernels.cuda import builder as B
from ember.kernels.cuda import quant as skeletons

from .elementwise import dense, full

_F32 = np.dtype(np.float32)
_I32 = np.dtype(np.int32)


def _run(b, template, n, *args, dtype=None):
    if n:
        b.launch(skeletons.kernel(template, dtype), B.grid(n), B.THREADS, *args)


def _ok(b, flag):
    return not int(b.to_host(flag)[0])


def calibrate(b, op, x, *, bm, bn, half):
    """(float32 ``(L, GR, GC)`` scales, finite) of ``(L, R, C)`` x over ``(bm, bn)`` blocks."""
    L, R, C = x.shape
    GR, GC = -(-R // bm), -(-C // bn)
    flag = full(b, (1,), 0, _I32)
    half = np.float32(half)
    if L == 1 and bm >= R and bn >= C:   # one block (an empty tensor too): per tensor
        amax = full(b, (1,), 0, x.dtype)
        _run(b, skeletons.absmax_all, x.size, x.buf, x.offset, x.strides, L, R, C, amax.buf,
             flag.buf)
        scale = scale_of(b.to_host(amax)[0], half)
        return full(b, (1, 1, 1), scale, _F32), _ok(b, flag)
    scales = b.empty((L, GR, GC), np.float32)
    _run(b, skeletons.absmax_blocks, scales.size, x.buf, x.offset, x.strides, L, R, C, bm, bn, GR,
         GC, half, scales.buf, flag.buf)
    return scales, _ok(b, flag)


def quantize(b, op, x, scales, *, bm, bn, lo, hi, check):
    """(int8 ``(L, R, C)`` values, finite) of ``x`` with ``(L, GR, GC)`` scales."""
    L, R, C = x.shape
    out = b.empty(x.shape, np.int8)
    flag = full(b, (1,), 0, _I32)
    _run(b, skeletons.quantize_values, out.size, x.buf, x.offset, x.strides, scales.buf,
         scales.offset, scales.strides, L, R, C, bm, bn, np.float32(lo), np.float32(hi), out.buf,
         flag.buf)
    return out, (_ok(b, flag) if check else True)


def dequantize(b, op, q, scales, *, bm, bn, bits, C, dtype):
    """The whole ``(L, R, C)`` tensor dequantized, in ``dtype``."""
    out = b.empty((q.shape[0], q.shape[1], C), dtype)
    L, TR, TC = out.shape
    _run(b, skeletons.dequantize_window, out.size, q.buf, q.offset, q.strides, scales.buf,
         scales.offset, scales.strides, bm, bn, bits, 0, 0, L, TR, TC, out.buf)
    return out


def pack(b, op, q, *, bits):
    """``(rows, C)`` int8 values -> ``(rows, ceil(C / (32 // bits)))`` uint32 words."""
    rows, C = q.shape
    q = dense(b, q)
    nw = words_per_row(C, bits)
    words = b.empty((rows, nw), np.uint32)
    _run(b, skeletons.pack_words, words.size, q.buf, q.offset, rows, C, nw, bits, words.buf)
    return words


def unpack(b, op, words, *, C, bits):
    """``(rows, nw)`` words -> the ``(rows, C)`` int8 values."""
    rows = words.shape[0]
    out = b.empty((rows, C), np.int8)
    _run(b, skeletons.unpack_words, out.size, words.buf, words.offset, words.strides, rows, C,
         bits, out.buf)
    return out


def qmatmul(b, op, q, scales, other, *, bm, bn, bits, shape, qleft, dtype):
    """``Q @ other`` (``qleft``) or ``other @ Q`` for the 2-D quantized matrix ``Q`` of ``shape``."""
    R, C = shape
    m, k, n = (R, C, other.shape[1]) if qleft else (other.shape[0], R, C)
    out = b.empty((m, n), dtype)
    if out.size:
        ntr, ntc = -(-m // B.TILE), -(-n // B.TILE)
        blocks = (min(ntc, B.MAX_BLOCKS), min(ntr, B.MAX_BLOCKS))
        b.launch(skeletons.kernel(skeletons.qmatmul_tiled, dtype), blocks, (B.TILE, B.TILE),
                 other.buf, other.offset, other.strides, q.buf, q.offset, q.strides, scales.buf,
                 scales.offset, scales.strides, bm, bn, bits, bool(qleft), out.buf, m, k, n)
    return out
