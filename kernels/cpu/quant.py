"""Quantization kernels on the CPU: calibration, quantize, dequantize, pack/unpack, matmul.

The math is DESIGN §5's symmetric scheme.  Its scalar definitions are the functions in the
first section below, written once: the CPU templates call them njit-compiled and inlined,
``kernels/cuda/quant.py`` compiles the same functions as CUDA device functions.  Templates
call them through upper-case globals (``QUANTIZE``, ``DEQUANTIZE``, ...) that ``kernel``
binds, as ``builder.kernel`` binds ``OP``; packed templates also get their width as the
compile-time constants ``BITS`` and ``VPB`` (values per byte), so a kernel exists per width.

Geometry.  A quantized tensor is seen as a 3-D array ``(L, R, C)`` (``C`` the innermost
dim) cut into blocks of ``(bm, bn)`` over its last two dims; block ``(l, gr, gc)`` covers
rows ``gr*bm ..`` and columns ``gc*bn ..`` of slice ``l`` (the last blocks may be partial)
and has the scale ``scales[l, gr, gc]``.  A per-tensor scale is the single block
``(bm, bn) = (R, C)`` of ``L = 1``.

Packing (PACKED_U32).  A row of ``C`` values becomes ``ceil(C / PER)`` uint32 words, with
``PER = 32 // BITS``: value ``c`` sits in bits ``(c % PER) * BITS ..`` of word ``c // PER``
(the first value in the lowest bits), as a ``BITS``-bit two's complement; padding bits are 0.
On a little-endian machine that is also "value ``c`` in field ``c % VPB`` of byte ``c // VPB``",
which is how the CPU kernels read and write them (bytes vectorise better than words).

Launched by ``engine/backends/cpu/quant.py``.
"""
import functools

import numpy as np
from numba import njit, prange

from ..rebind import specialize
from .builder import JIT_OPTIONS, Kernel

FLT_MIN = np.float32(np.finfo(np.float32).tiny)  # the scale of a zero range (never a division by 0)
RNE_MAGIC = 4503599627370496.0                   # 2**52: (a + M) - M rounds 0 <= a < 2**51 to even
CHUNK = 1 << 14                                  # elements of a row per parallel task


# --------------------------------------------------------------------------
# scalar definitions (also compiled for CUDA by kernels/cuda/quant.py)


def scale_of(amax, half):
    """``2 * max|x| / (b - a)``, written ``max|x| / half`` with ``half = (b - a) / 2`` (exact in
    float32, and no overflow near the float32 maximum); a zero range gives FLT_MIN.  NaN stays NaN."""
    s = amax / half
    return FLT_MIN if s < FLT_MIN else s


def quantize_value(x, scale, lo, hi):
    """``clamp(round_half_away_from_zero(x / scale), lo, hi)`` as a float holding an integer.

    The division runs in ``x``'s precision (the contract's ``x / scale``).  Rounding adds and
    subtracts 2**52 in float64, exact for the clamped magnitudes (<= 128), then moves ties
    away from zero: plain arithmetic, so the CPU loop vectorises.
    """
    v = x / scale
    v = hi if v > hi else v
    v = lo if v < lo else v
    a = np.float64(abs(v))
    r = (a + RNE_MAGIC) - RNE_MAGIC
    r = r + 1.0 if a - r == 0.5 else r
    return -r if v < 0 else r


def dequantize_value(q, scale):
    """``scale * q`` in float32 (the value every target and layout agrees on)."""
    return np.float32(q) * scale


def pack_value(q, shift, bits):
    """Integer ``q`` as a ``bits``-bit two's complement field at ``shift`` (an int64 to OR into a word)."""
    return (np.int64(q) & ((1 << bits) - 1)) << shift


def unpack_value(word, shift, bits):
    """The signed ``bits``-bit field of ``word`` at ``shift`` (bits <= 8), as an int8.

    The field is moved to the top of a byte, and an arithmetic shift back sign-extends it;
    staying in int8 lets the CPU loop convert to float with vector instructions."""
    return np.int8(np.int8((word >> shift) << (8 - bits)) >> (8 - bits))


def words_per_row(C, bits):
    """uint32 words a packed row of ``C`` ``bits``-bit values takes."""
    return -(-C // (32 // bits))


SCALARS = {"SCALE": scale_of, "QUANTIZE": quantize_value, "DEQUANTIZE": dequantize_value,
           "PACK": pack_value, "UNPACK": unpack_value}


@functools.cache
def _compiled_scalars():
    return {k: njit(inline="always", **JIT_OPTIONS)(specialize(f, f.__name__))
            for k, f in SCALARS.items()}


class _QuantKernel(Kernel):
    """``builder.Kernel`` with the scalar definitions bound, and a packing width for packed templates."""

    def __init__(self, template, bits):
        self.name = template.__name__ + (f"__{bits}bit" if bits else "")
        bindings = dict(_compiled_scalars())
        if bits:
            bindings.update(BITS=bits, VPB=8 // bits)
        span = _unpack_span if bits else _native_span
        bindings["SPAN"] = njit(inline="always", **JIT_OPTIONS)(
            specialize(span, span.__name__ + (f"__{bits}bit" if bits else ""), **bindings))
        self._fn = (specialize(template, self.name, **bindings),
                    specialize(template, self.name + "__par", **bindings))
        self._serial = self._parallel = None


@functools.cache
def kernel(template, bits=0):
    """The compiled template (``.serial`` / ``.parallel``), disk-cached like every Ember kernel."""
    return _QuantKernel(template, bits)


# --------------------------------------------------------------------------
# templates


def absmax_flat(bits, absmask, parts):
    """``parts[t]``: the largest ``|x|`` of chunk ``t`` of flat ``x``, as the integer bits of ``x``.

    Non-negative floats order as their bits, so the maximum is an integer maximum (which
    vectorises, where a float one does not without fastmath); NaN and inf give bits >= inf's.
    """
    n = bits.shape[0]
    for t in prange(parts.shape[0]):
        seg = bits[t * CHUNK:min(n, (t + 1) * CHUNK)]
        m = absmask & 0
        for i in range(seg.shape[0]):
            v = seg[i] & absmask
            m = v if v > m else m
        parts[t] = m


def absmax_blocks(bits, absmask, bm, bn, out):
    """``out[l, gr, gc]``: the largest ``|x|`` bits of each ``(bm, bn)`` block of ``(L, R, C)`` x."""
    L, R, C = bits.shape
    GR, GC = out.shape[1], out.shape[2]
    per_task = max(1, CHUNK // bn)                 # block columns per task
    ncg = (GC + per_task - 1) // per_task
    for t in prange(L * GR * ncg):
        cg = t % ncg
        gr = (t // ncg) % GR
        l = t // (ncg * GR)
        r0 = gr * bm
        r1 = min(R, r0 + bm)
        for g in range(cg * per_task, min(GC, (cg + 1) * per_task)):
            c0 = g * bn
            m = absmask & 0
            for r in range(r0, r1):
                seg = bits[l, r, c0:min(C, c0 + bn)]
                for i in range(seg.shape[0]):
                    v = seg[i] & absmask
                    m = v if v > m else m
            out[l, gr, g] = m


def scales_from_amax(amax, half, out):
    for i in prange(amax.shape[0]):
        out[i] = SCALE(amax[i], half)


def quantize_blocks(x, scales, bm, bn, lo, hi, out):
    """``out = QUANTIZE(x, scale of its block)`` for ``(L, R, C)`` x; one task per row chunk."""
    L, R, C = x.shape
    ncc = (C + CHUNK - 1) // CHUNK
    for t in prange(L * R * ncc):
        cc = t % ncc
        r = (t // ncc) % R
        l = t // (ncc * R)
        gr = r // bm
        c = cc * CHUNK
        end = min(C, c + CHUNK)
        while c < end:                              # one block segment at a time
            g = c // bn
            seg = min(end, (g + 1) * bn)
            s = scales[l, gr, g]
            src = x[l, r, c:seg]
            dst = out[l, r, c:seg]
            for i in range(seg - c):
                dst[i] = QUANTIZE(src[i], s, lo, hi)
            c = seg


def _native_span(row, c, seg, s, dst):
    """``dst[j - c] = DEQUANTIZE(row[j], s)`` for ``c <= j < seg``: int8 values, one per byte."""
    src = row[c:seg]
    for j in range(seg - c):
        dst[j] = DEQUANTIZE(src[j], s)


def _unpack_span(row, c, seg, s, dst):
    """``dst[j - c] = DEQUANTIZE(value j of byte row, s)`` for ``c <= j < seg``.

    Works on the bytes of the words (little-endian: value ``j`` is field ``j % VPB`` of byte
    ``j // VPB``, the same field ``UNPACK`` reads from the word); whole bytes in the middle
    unroll over their ``VPB`` fields, which vectorises."""
    head = min(seg, (c + VPB - 1) // VPB * VPB)
    body = head + (seg - head) // VPB * VPB
    for j in range(c, head):
        dst[j - c] = DEQUANTIZE(UNPACK(row[j // VPB], (j % VPB) * BITS, BITS), s)
    src = row[head // VPB:body // VPB]     # slices indexed from 0: LLVM vectorises those
    mid = dst[head - c:body - c]
    for b in range(src.shape[0]):
        x = src[b]
        for k in range(VPB):
            mid[b * VPB + k] = DEQUANTIZE(UNPACK(x, k * BITS, BITS), s)
    for j in range(body, seg):
        dst[j - c] = DEQUANTIZE(UNPACK(row[j // VPB], (j % VPB) * BITS, BITS), s)


def dequantize_blocks(data, scales, bm, bn, r0, c0, out):
    """``out[l, i, j] = DEQUANTIZE(value (r0 + i, c0 + j) of data, its scale)``: the window of
    the values at ``(r0, c0)`` the size of ``out`` (the whole tensor, or a matmul tile).  ``SPAN``
    reads one block segment of a row: int8 values, or ``BITS``-bit values from packed words
    given as their bytes."""
    L, TR, TC = out.shape
    ncc = (TC + CHUNK - 1) // CHUNK
    for t in prange(L * TR * ncc):
        cc = t % ncc
        i = (t // ncc) % TR
        l = t // (ncc * TR)
        r = r0 + i
        gr = r // bm
        c = c0 + cc * CHUNK
        end = min(c0 + TC, c + CHUNK)
        row = data[l, r]
        while c < end:                              # one block segment at a time
            g = c // bn
            seg = min(end, (g + 1) * bn)
            SPAN(row, c, seg, scales[l, gr, g], out[l, i, c - c0:seg - c0])
            c = seg


def pack_rows(q, data):
    """Rows of int8 ``q`` ``(rows, C)`` -> packed words, written as their bytes ``(rows, 4 * nw)``."""
    rows, C = q.shape
    nb = data.shape[1]
    full = C // VPB                                # bytes without padding
    per_task = max(1, CHUNK // VPB)
    nt = (nb + per_task - 1) // per_task
    for t in prange(rows * nt):
        r = t // nt
        b0 = (t % nt) * per_task
        b1 = min(nb, b0 + per_task)
        m = min(b1, full)
        src = q[r, b0 * VPB:m * VPB]
        dst = data[r, b0:m]
        for b in range(dst.shape[0]):
            acc = np.int64(0)
            for k in range(VPB):                   # a constant trip count: unrolled
                acc |= PACK(src[b * VPB + k], k * BITS, BITS)
            dst[b] = acc
        for b in range(max(b0, full), b1):         # the last, padded byte(s) of the row
            acc = np.int64(0)
            for k in range(max(0, min(VPB, C - b * VPB))):
                acc |= PACK(q[r, b * VPB + k], k * BITS, BITS)
            data[r, b] = acc


def unpack_rows(data, out):
    """Packed words, given as their bytes ``(rows, 4 * nw)`` -> the ``(rows, C)`` int8 values."""
    rows, C = out.shape
    nc = (C + CHUNK - 1) // CHUNK                  # CHUNK is a multiple of VPB
    for t in prange(rows * nc):
        r = t // nc
        c0 = (t % nc) * CHUNK
        c1 = min(C, c0 + CHUNK)
        body = c0 + (c1 - c0) // VPB * VPB
        src = data[r, c0 // VPB:body // VPB]
        dst = out[r, c0:body]
        for b in range(src.shape[0]):
            x = src[b]
            for k in range(VPB):
                dst[b * VPB + k] = UNPACK(x, k * BITS, BITS)
        for j in range(body, c1):
            out[r, j] = UNPACK(data[r, j // VPB], (j % VPB) * BITS, BITS)
