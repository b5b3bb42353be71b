"""The quantization ops on numpy arrays: calibrate, quantize, dequantize, pack, unpack and
the quantized matmul (``kernels/cpu/quant.py`` holds the loops and the scalar definitions).

They take numpy arrays and return new ones; they never raise for bad data, they report it
(``finite``) and leave the message to ``ember.quant``.  Geometry and packing are described
in ``kernels/cpu/quant.py``.
"""
import numpy as np

from ember.kernels.cpu.quant import (CHUNK, absmax_blocks, absmax_flat, dequantize_blocks, kernel,
                                     pack_rows, quantize_blocks, scale_of, scales_from_amax,
                                     unpack_rows, words_per_row)

from .elementwise import PARALLEL_MIN


def _pick(k, n):
    return k.parallel if n >= PARALLEL_MIN else k.serial


def _bits(x):
    """``x`` viewed as integers of its width, the mask of |x| and the bits of +inf."""
    if x.dtype == np.float32:
        return x.view(np.int32), np.int32(0x7FFFFFFF), 0x7F800000
    return x.view(np.int64), np.int64(0x7FFFFFFFFFFFFFFF), 0x7FF0000000000000


def calibrate(x, bm, bn, half):
    """Min-max scales of C-contiguous ``(L, R, C)`` float ``x`` over ``(bm, bn)`` blocks.

    Returns ``(scales, finite)``: float32 ``(L, GR, GC)`` scales and False when ``x`` holds NaN
    or inf (the scales are then meaningless).
    """
    L, R, C = x.shape
    GR, GC = -(-R // bm), -(-C // bn)
    bits, absmask, inf = _bits(x)
    half = np.float32(half)
    if L == 1 and bm >= R and bn >= C:   # one scale (also when empty): a flat reduction
        flat = bits.reshape(-1)
        parts = np.zeros(max(1, -(-flat.size // CHUNK)), bits.dtype)
        if flat.size:
            _pick(kernel(absmax_flat), flat.size)(flat, absmask, parts)
        top = parts.max()
        amax = np.array(top).view(x.dtype)[()]
        return np.full((1, 1, 1), scale_of(amax, half), np.float32), bool(top < inf)
    grid = np.zeros((L, GR, GC), bits.dtype)
    if x.size:
        _pick(kernel(absmax_blocks), x.size)(bits, absmask, bm, bn, grid)
    scales = np.empty((L, GR, GC), np.float32)
    if grid.size:
        kernel(scales_from_amax).serial(grid.view(x.dtype).reshape(-1), half, scales.reshape(-1))
    return scales, not bool((grid >= inf).any())


def all_finite(x):
    """False when float ``x`` (any layout) holds NaN or inf."""
    x = np.ascontiguousarray(x).reshape(-1)
    if not x.size:
        return True
    bits, absmask, inf = _bits(x)
    parts = np.zeros(-(-x.size // CHUNK), bits.dtype)
    _pick(kernel(absmax_flat), x.size)(bits, absmask, parts)
    return bool(parts.max() < inf)


def quantize(x, scales, bm, bn, lo, hi, check=False):
    """(int8 ``(L, R, C)`` values, finite) of C-contiguous float ``x`` with ``(L, GR, GC)``
    scales; with ``check``, first makes sure ``x`` holds no NaN or inf (given scales)."""
    if check and not all_finite(x):
        return None, False
    out = np.empty(x.shape, np.int8)
    if x.size:
        _pick(kernel(quantize_blocks), x.size)(x, scales, bm, bn, np.float32(lo), np.float32(hi), out)
    return out, True


def _bytes(words):
    """The bytes of uint32 ``words`` (their last dim must be contiguous for the view)."""
    if words.strides[-1] != 4:
        words = np.ascontiguousarray(words)
    return words.view(np.uint8)


def dequantize(q, scales, bm, bn, bits, C, dtype):
    """The whole ``(L, R, C)`` tensor dequantized, in ``dtype``: from int8 values ``q``
    (``bits == 0``) or from packed uint32 words of ``bits``-bit values."""
    return dequantize_into(q, scales, bm, bn, bits, np.empty((q.shape[0], q.shape[1], C), dtype))


def dequantize_into(q, scales, bm, bn, bits, out, r0=0, c0=0, serial=False):
    """Fill ``out`` ``(L, TR, TC)`` with the dequantized window of ``q`` at ``(r0, c0)``."""
    if out.size:
        k = kernel(dequantize_blocks, bits)
        fn = k.serial if serial else _pick(k, out.size)
        fn(_bytes(q) if bits else q, scales, bm, bn, r0, c0, out)
    return out


def pack(q, bits):
    """``(rows, C)`` int8 values -> ``(rows, ceil(C / (32 // bits)))`` uint32 words."""
    rows, C = q.shape
    words = np.empty((rows, words_per_row(C, bits)), np.uint32)
    if words.size:
        _pick(kernel(pack_rows, bits), q.size)(q, words.view(np.uint8))
    return words


def unpack(words, C, bits):
    """``(rows, nw)`` uint32 words -> the ``(rows, C)`` int8 values."""
    out = np.empty((words.shape[0], C), np.int8)
    if out.size:
        _pick(kernel(unpack_rows, bits), out.size)(_bytes(words), out)
    return out


# Tile of the quantized operand dequantized per BLAS call: about this many elements (4 MiB
# of float32).  256K to 4M measured the same on the 2-core VM (1024 rows @ 1024x1024: as fast
# as the float32 matmul; 128 rows @ 4096x4096: 1.4x, the dequantizing pass).  Tiles are
# dequantized on the calling thread: BLAS's threads are the parallel part, and waking Numba's
# workers between BLAS calls would compete with BLAS's still-spinning ones for the cores.
TILE_ELEMENTS = 1 << 20


def _scratch(shape, dtype, cache):
    """One buffer per tile shape, reused across the tiles of a call (fresh pages cost faults)."""
    buf = cache.get(shape)
    if buf is None:
        buf = cache[shape] = np.empty(shape, dtype)
    return buf


def matmul(q, scales, bm, bn, bits, shape, other, qleft, dtype):
    """``Q @ other`` (``qleft``) or ``other @ Q`` for the 2-D quantized matrix ``Q``, in ``dtype``.

    ``Q`` has logical ``shape`` ``(R, C)``: int8 values or packed words ``q`` and ``(GR, GC)``
    float32 ``scales`` over ``(bm, bn)`` blocks.  Tiles of ``Q`` (rows on the left, columns on
    the right, so that every output element is written once) are dequantized into a scratch
    buffer and multiplied by BLAS (``np.matmul``) straight into the result: no dequantized
    copy of ``Q`` exists at any time.
    """
    R, C = shape
    q3, s3 = q[None], scales[None]
    bufs = {}
    if qleft:
        out = np.empty((R, other.shape[1]), dtype)
        step = max(1, min(R, TILE_ELEMENTS // max(C, 1)))
        for r0 in range(0, R, step):
            n = min(step, R - r0)
            tile = dequantize_into(q3, s3, bm, bn, bits, _scratch((1, n, C), dtype, bufs), r0, 0, True)
            np.matmul(tile[0], other, out=out[r0:r0 + n])
    else:
        out = np.empty((other.shape[0], C), dtype)
        align = 32 // bits if bits else 16
        step = max(align, (TILE_ELEMENTS // max(R, 1)) // align * align)
        for c0 in range(0, C, step):
            n = min(step, C - c0)
            tile = dequantize_into(q3, s3, bm, bn, bits, _scratch((1, R, n), dtype, bufs), 0, c0, True)
            np.matmul(other, tile[0], out=out[:, c0:c0 + n])
    return out
