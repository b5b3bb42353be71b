"""Launching the indexing loops on numpy arrays: gather, index_select, scatter, nonzero.

Operands become (1-D buffer, offset, element strides) as for the elementwise loops; dims
other than the indexed axis are merged where every operand allows (``_merge``).  Data moves
as unsigned integers of its item size; complex128 (16 bytes, no such integer) moves its real
and imaginary parts as two float64 arrays.  Calls
arrive validated by the dispatch layer: an Int index of a legal shape whose values lie in
range, values of ``x``'s dtype broadcast to the index's shape, a normalised axis.
"""
import math

import numpy as np

from ember.kernels.cpu.builder import kernel
from ember.kernels.cpu.index import CHUNK, gather_walk, nonzero_walk, scatter_walk

from ...memory import empty as alloc
from ..shared import c_strides
from .elementwise import PARALLEL_MIN, elementwise, int_array, operand


def _pick(k, work, tasks=2):
    """The parallel variant for big work that splits into several tasks."""
    return k.parallel if work >= PARALLEL_MIN and tasks > 1 else k.serial


def _bits(x):
    """``x`` viewed as unsigned integers of the same item size (no copy)."""
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def _int64(index):
    return index.astype(np.int64, copy=False)


def _wide(x):
    return x.dtype.itemsize == 16


def _joined(re, im, dtype):
    return elementwise("make_complex", [re, im], alloc(re.shape, dtype))


def _merge(shape, axis, strides_list):
    """Drop size-1 dims other than ``axis`` and merge neighbours on the same side of
    ``axis`` that are contiguous in every operand.

    Returns (shape, axis, strides per operand) as int64 arrays (``int_array``'s, shared: the
    kernels only read them).
    """
    out_shape = []
    out_strides = [[] for _ in strides_list]
    new_axis = 0
    prev_axis = False
    for d, n in enumerate(shape):
        if d == axis:
            new_axis = len(out_shape)
            out_shape.append(n)
            for o, st in zip(out_strides, strides_list):
                o.append(st[d])
            prev_axis = True
            continue
        if n == 1:
            continue
        if out_shape and not prev_axis and all(o[-1] == st[d] * n
                                              for o, st in zip(out_strides, strides_list)):
            out_shape[-1] *= n
            for o, st in zip(out_strides, strides_list):
                o[-1] = st[d]
        else:
            out_shape.append(n)
            for o, st in zip(out_strides, strides_list):
                o.append(st[d])
        prev_axis = False
    return int_array(out_shape), new_axis, [int_array(o) for o in out_strides]


def gather(x, axis, index):
    """``out[..., i, ...] = x[..., index[..., i, ...], ...]`` along ``axis`` (torch.gather):
    the output has ``index``'s shape and ``x``'s dtype."""
    if _wide(x):
        return _joined(gather(x.real, axis, index), gather(x.imag, axis, index), x.dtype)
    index = _int64(index)
    out = alloc(index.shape, x.dtype)
    if index.size == 0:
        return out
    if x.ndim == 0:
        out[()] = x
        return out
    index = np.ascontiguousarray(index)
    xb, xo, xst = operand(_bits(x))
    shape, ax, (xst, ist) = _merge(index.shape, axis, [xst, c_strides(index.shape)])
    _pick(kernel(gather_walk), index.size, index.size // shape[-1] + 1)(
        xb, xo, xst, index.reshape(-1), 0, ist, _bits(out).reshape(-1), shape, ax)
    return out


def index_select(x, axis, indices):
    """``x`` with only the entries ``indices`` (1-D) along ``axis``; a 0-d ``x`` (one index,
    0) stays 0-d, as in PyTorch."""
    if _wide(x):
        return _joined(index_select(x.real, axis, indices), index_select(x.imag, axis, indices),
                       x.dtype)
    if x.ndim == 0:
        return x.copy()
    indices = np.ascontiguousarray(_int64(indices).reshape(-1))
    shape = x.shape[:axis] + (indices.size,) + x.shape[axis + 1:]
    out = alloc(shape, x.dtype)
    if out.size == 0:
        return out
    xb, xo, xst = operand(_bits(x))
    ist = [0] * x.ndim
    ist[axis] = 1
    mshape, ax, (xst, ist) = _merge(shape, axis, [xst, ist])
    _pick(kernel(gather_walk), out.size, out.size // mshape[-1] + 1)(
        xb, xo, xst, indices, 0, ist, _bits(out).reshape(-1), mshape, ax)
    return out


def scatter(x, axis, index, values, reduce):
    """A copy of ``x`` with ``values`` (of ``index``'s shape) written at ``index`` along
    ``axis`` (``"assign"``: duplicates keep the value last in C order of ``index``) or added
    (``"add"``: duplicates accumulate)."""
    if _wide(x):
        return _joined(scatter(x.real, axis, index, values.real, reduce),
                       scatter(x.imag, axis, index, values.imag, reduce), x.dtype)
    index = _int64(index)
    out = alloc(x.shape, x.dtype)
    np.copyto(out, x)
    if index.size == 0:
        return out
    if x.ndim == 0:
        if reduce == "add":
            out += values.sum()
        else:
            out[()] = values.reshape(-1)[-1]
        return out
    index = np.ascontiguousarray(index)
    vb, vo, vst = operand(values)
    shape, ax, (ost, ist, vst) = _merge(
        index.shape, axis, [c_strides(x.shape), c_strides(index.shape), vst])
    buf = out.reshape(-1)
    if reduce == "assign":
        buf = _bits(buf)
        vb = _bits(vb)
    outer = math.prod(shape.tolist()[:ax])   # (np.prod of a few ints: ~3 us)
    _pick(kernel(scatter_walk), index.size, outer)(buf, ost, index.reshape(-1), ist, vb, vo, vst,
                                                   shape, ax, reduce == "add")
    return out


def nonzero(x):
    """Indices of the nonzero (True) elements of ``x``: int64 ``(count, x.ndim)``, C order.

    Like ``np.argwhere``: NaN counts as nonzero, ``-0.0`` as zero.  A 0-d ``x`` gives shape
    ``(1, 0)`` or ``(0, 0)``.
    """
    if x.ndim == 0:
        return np.zeros((1 if x.item() else 0, 0), np.int64)
    if x.size == 0:
        return np.zeros((0, x.ndim), np.int64)
    size = 8 * x.dtype.itemsize
    # Floats ignore the sign bit (so -0.0 is zero); other dtypes test every bit.
    mask = (1 << (size - 1)) - 1 if x.dtype.kind == "f" else (1 << size) - 1
    xb, xo, xst = operand(_bits(x))
    shape = np.array(x.shape, np.int64)
    ntasks = x.size // x.shape[-1] * ((x.shape[-1] + CHUNK - 1) // CHUNK)
    return _pick(kernel(nonzero_walk), x.size, ntasks)(xb, xo, np.array(xst, np.int64), shape,
                                                      np.uint64(mask))
