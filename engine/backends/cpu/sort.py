"""Stable sort and top-k along one axis of a numpy array; searchsorted in a sorted 1-D one.

The sorted axis is moved last and made contiguous, so the kernel (``kernels/cpu/sort.py``)
sees a ``(rows, n)`` matrix of unsigned keys whose integer order is the wanted order (see
there).  Descending order inverts every key, so both directions are one stable ascending
sort.  Values are copied from the input by the sorted indices, so NaN payloads and the sign
of zero survive.  Calls arrive validated (a normalised axis, ``0 <= k <= n``).
"""
import numpy as np

from ember.kernels.cpu.builder import kernel
from ember.kernels.cpu.search import search
from ember.kernels.cpu.sort import KIND_FLOAT, KIND_SIGNED, KIND_UNSIGNED, sort_rows

from ...memory import empty as alloc
from .elementwise import PARALLEL_MIN

# Each parallel task sorts whole rows, at least this many elements in all.
TASK_ELEMS = 1 << 14

_U32 = np.empty(0, np.uint32)
_I64 = np.empty(0, np.int64)


def _key_masks(dtype):
    """(unsigned view dtype, kind, full, sign, absmask, inf) for a sortable dtype."""
    udtype = np.dtype(f"u{dtype.itemsize}")
    bits = 8 * dtype.itemsize
    full = np.uint64((1 << bits) - 1)
    sign = np.uint64(1 << (bits - 1))
    absmask = np.uint64((1 << (bits - 1)) - 1)
    inf = np.uint64(0)
    if dtype.kind == "f":
        kind = KIND_FLOAT
        inf = np.uint64(int(np.array(np.inf, dtype).view(udtype)))
    elif dtype.kind == "i":
        kind = KIND_SIGNED
    else:
        kind = KIND_UNSIGNED
    return udtype, kind, full, sign, absmask, inf


def _sort_last(x, descending):
    """Sort the rows of ``x`` (any ndim >= 1, the sorted axis last)."""
    udtype, kind, full, sign, absmask, inf = _key_masks(x.dtype)
    shape = x.shape
    n = shape[-1]
    values = alloc(shape, x.dtype)
    indices = alloc(shape, np.int64)
    if x.size == 0:
        return values, indices
    bits = np.ascontiguousarray(x.view(udtype)).reshape(-1, n)
    nrows = bits.shape[0]
    rows_per_task = max(1, TASK_ELEMS // n)
    k = kernel(sort_rows)
    fn = k.parallel if x.size >= PARALLEL_MIN and nrows > rows_per_task else k.serial
    # Positions within a row are kept as uint32 while sorting (less memory
    # traffic per radix pass) unless a row is too long for that.
    iproto = _U32 if n <= 0xFFFFFFFF else _I64
    fn(bits, values.view(udtype).reshape(nrows, n), indices.reshape(nrows, n), iproto,
       rows_per_task, kind, full, sign, absmask, inf, bool(descending))
    return values, indices


def _sort(x, axis, descending, k=None):
    """Sort along ``axis`` (already normalised); keep the first ``k`` when given."""
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    moved = axis != x.ndim - 1
    values, indices = _sort_last(np.moveaxis(x, axis, -1) if moved else x, descending)
    if k is not None and k != x.shape[axis]:
        values = values[..., :k]
        indices = indices[..., :k]
    if moved:
        values = np.moveaxis(values, -1, axis)
        indices = np.moveaxis(indices, -1, axis)
    return np.ascontiguousarray(values), np.ascontiguousarray(indices)


def sort(x, axis, descending):
    """Stable sort of ``x`` along ``axis``: ``(values, indices)``, new C-contiguous arrays
    of ``x``'s shape; ``indices`` (int64) holds each value's position along ``axis``.  Ties
    keep their original order in both directions; NaN sorts as the largest value.  A 0-d
    ``x`` sorts as one element."""
    return _sort(x, axis, descending)


def topk(x, k, axis, largest):
    """The ``k`` largest (or smallest) values along ``axis``, sorted: ``(values, indices)``
    (a full sort, then the first ``k``: no partial selection yet)."""
    return _sort(x, axis, largest, k)


def searchsorted(seq, values, right):
    """int64 positions of ``values`` (any shape) in the sorted 1-D array ``seq``: the first
    position whose entry is not before (``right``: is after) the value, in the sort's order
    (NaN last)."""
    seq = np.ascontiguousarray(seq)
    flat = np.ascontiguousarray(values).reshape(-1)
    out = alloc(flat.shape, np.int64)
    if flat.size:
        k = kernel(search)
        work = flat.size * max(1, int(np.log2(seq.size + 1)))
        fn = k.parallel if work >= PARALLEL_MIN else k.serial
        fn(seq, flat, out, bool(right))
    return out.reshape(np.shape(values))
