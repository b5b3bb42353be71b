"""Stable sort and top-k along one axis of a numpy array.

The sorted axis is moved last and made contiguous, so the kernel sees a
``(rows, n)`` matrix and sorts each row.  It never compares values of the
input dtype: every value becomes an unsigned *key* whose integer order is the
wanted order, and the kernel sorts keys (an LSD radix sort, one byte a pass;
a merge sort of insertion-sorted runs for short rows).  Keys make one compiled kernel per item size
serve every dtype of that size, and they settle the corner cases in one place:

- floats: the sign bit is flipped for positives and every bit for negatives,
  so keys order like the values; ``-0.0`` gets the key of ``+0.0`` (they tie)
  and every NaN, whatever its sign or payload, gets the largest key, so NaN
  sorts last ascending and first descending, as in numpy and PyTorch;
- signed integers: the sign bit is flipped;
- unsigned integers and bool: the bits are the key.

Descending order inverts every key, so both directions are one stable
ascending sort: ties keep their original order (ascending index) in both.
Values are copied from the input by the sorted indices, so NaN payloads and
the sign of zero survive.
"""
import operator

import numpy as np
from numba import prange

from . import launch
from .builder import kernel
from .launch import PARALLEL_MIN

# Rows longer than RADIX_PER_BYTE * itemsize are radix-sorted (one pass per
# key byte); shorter ones are merge-sorted, runs of SMALL_ROW by insertion
# first.  Measured crossovers: n ~ 16 for 1-byte keys, ~ 64 for 8-byte keys.
SMALL_ROW = 16
RADIX_PER_BYTE = 8
# Each parallel task sorts whole rows, at least this many elements in all.
TASK_ELEMS = 1 << 14

_KIND_UNSIGNED, _KIND_SIGNED, _KIND_FLOAT = 0, 1, 2
_U32 = np.empty(0, np.uint32)
_I64 = np.empty(0, np.int64)


def sort_rows(bits, out_bits, out_idx, iproto, rows_per_task, kind, full, sign, absmask, inf,
              descending):
    """Sort each row of ``bits`` (unsigned view of the values) by its keys.

    Writes the sorted values (as bits) to ``out_bits`` and the original
    positions to ``out_idx``.  ``full``, ``sign``, ``absmask`` and ``inf`` are
    uint64 bit masks of the item size: all ones, the sign bit, all but the sign
    bit, and the bits of +inf (floats only).  Keys and positions ping-pong
    between the two planes of ``kb`` and ``ib``; ``s`` is the plane holding
    the current order.
    """
    nrows = bits.shape[0]
    n = bits.shape[1]
    nbytes = bits.itemsize
    zero = np.uint64(0)
    byte = np.uint64(255)
    flip = full if descending else zero
    ntasks = (nrows + rows_per_task - 1) // rows_per_task
    for t in prange(ntasks):
        keys = np.empty(n, bits.dtype)
        kb = np.empty((2, n), bits.dtype)
        ib = np.empty((2, n), iproto.dtype)
        counts = np.empty((nbytes, 256), np.int64)
        pos = np.empty(256, np.int64)
        for r in range(t * rows_per_task, min(nrows, (t + 1) * rows_per_task)):
            row = bits[r]
            for i in range(n):
                u = np.uint64(row[i])
                if kind == _KIND_FLOAT:
                    a = u & absmask
                    if a > inf:
                        u = full
                    elif a == zero:
                        u = sign
                    elif (u & sign) != zero:
                        u = (~u) & full
                    else:
                        u = u | sign
                elif kind == _KIND_SIGNED:
                    u = u ^ sign
                keys[i] = u ^ flip
            if n <= RADIX_PER_BYTE * nbytes:
                # Stable insertion sort of runs of SMALL_ROW keys, then bottom-up
                # merges; a key only moves past strictly larger keys.
                for lo in range(0, n, SMALL_ROW):
                    hi = min(n, lo + SMALL_ROW)
                    for i in range(lo, hi):
                        key = keys[i]
                        j = i
                        while j > lo and kb[0, j - 1] > key:
                            kb[0, j] = kb[0, j - 1]
                            ib[0, j] = ib[0, j - 1]
                            j -= 1
                        kb[0, j] = key
                        ib[0, j] = i
                s = 0
                width = SMALL_ROW
                while width < n:
                    for lo in range(0, n, 2 * width):
                        mid = min(lo + width, n)
                        hi = min(lo + 2 * width, n)
                        ia = lo
                        ic = mid
                        for p in range(lo, hi):
                            if ic >= hi or (ia < mid and kb[s, ia] <= kb[s, ic]):
                                kb[1 - s, p] = kb[s, ia]
                                ib[1 - s, p] = ib[s, ia]
                                ia += 1
                            else:
                                kb[1 - s, p] = kb[s, ic]
                                ib[1 - s, p] = ib[s, ic]
                                ic += 1
                    s = 1 - s
                    width *= 2
            else:
                # LSD radix sort, one byte a pass, least significant first; a
                # byte that is the same in every key needs no pass.
                counts[:, :] = 0
                for i in range(n):
                    key = keys[i]
                    for b in range(nbytes):
                        counts[b, (key >> np.uint64(8 * b)) & byte] += 1
                s = -1  # positions are still implicit (0..n-1), keys in ``keys``
                for b in range(nbytes):
                    useful = True
                    for d in range(256):
                        if counts[b, d] == n:
                            useful = False
                        if counts[b, d] != 0:
                            break
                    if not useful:
                        continue
                    total = 0
                    for d in range(256):
                        pos[d] = total
                        total += counts[b, d]
                    shift = np.uint64(8 * b)
                    if s < 0:
                        for i in range(n):
                            key = keys[i]
                            d = (key >> shift) & byte
                            p = pos[d]
                            pos[d] = p + 1
                            kb[0, p] = key
                            ib[0, p] = i
                        s = 0
                    else:
                        for i in range(n):
                            key = kb[s, i]
                            d = (key >> shift) & byte
                            p = pos[d]
                            pos[d] = p + 1
                            kb[1 - s, p] = key
                            ib[1 - s, p] = ib[s, i]
                        s = 1 - s
                if s < 0:  # every key equal: already in order
                    s = 0
                    for i in range(n):
                        ib[0, i] = i
            ob = out_bits[r]
            oi = out_idx[r]
            for i in range(n):
                j = ib[s, i]
                oi[i] = j
                ob[i] = row[j]


def normalize_axis(name, axis, ndim):
    """``axis`` as a non-negative int; a 0-d array has one implicit dim (0 or -1)."""
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"{name}: axis must be an int, got {type(axis).__name__}") from None
    size = max(ndim, 1)
    if not -size <= axis < size:
        raise np.exceptions.AxisError(
            f"{name}: axis {axis} is out of range for an array of {ndim} dims")
    return axis % size


def _key_masks(name, dtype):
    """(unsigned view dtype, kind, full, sign, absmask, inf) for a sortable dtype."""
    if dtype.kind not in "biuf" or dtype.itemsize not in (1, 2, 4, 8):
        raise TypeError(f"{name}: unsupported dtype {dtype}")
    udtype = np.dtype(f"u{dtype.itemsize}")
    bits = 8 * dtype.itemsize
    full = np.uint64((1 << bits) - 1)
    sign = np.uint64(1 << (bits - 1))
    absmask = np.uint64((1 << (bits - 1)) - 1)
    inf = np.uint64(0)
    if dtype.kind == "f":
        kind = _KIND_FLOAT
        inf = np.uint64(int(np.array(np.inf, dtype).view(udtype)))
    elif dtype.kind == "i":
        kind = _KIND_SIGNED
    else:
        kind = _KIND_UNSIGNED
    return udtype, kind, full, sign, absmask, inf


def _sort_last(name, x, descending):
    """Sort the rows of ``x`` (any ndim >= 1, the sorted axis last)."""
    udtype, kind, full, sign, absmask, inf = _key_masks(name, x.dtype)
    shape = x.shape
    n = shape[-1]
    values = launch.alloc(shape, x.dtype)
    indices = launch.alloc(shape, np.int64)
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


def _sort(name, x, axis, descending, k=None):
    """Sort along ``axis`` (already normalised); keep the first ``k`` when given."""
    if x.ndim == 0:
        _key_masks(name, x.dtype)
        return x.copy(), np.zeros((), np.int64)
    moved = axis != x.ndim - 1
    values, indices = _sort_last(name, np.moveaxis(x, axis, -1) if moved else x, descending)
    if k is not None and k != x.shape[axis]:
        values = values[..., :k]
        indices = indices[..., :k]
    if moved:
        values = np.moveaxis(values, -1, axis)
        indices = np.moveaxis(indices, -1, axis)
    return np.ascontiguousarray(values), np.ascontiguousarray(indices)


def sort(x, axis=-1, descending=False):
    """Stable sort of ``x`` along ``axis``: ``(values, indices)``.

    Both are new C-contiguous arrays of ``x``'s shape; ``indices`` (int64)
    holds each value's position along ``axis`` in ``x``.  Ties keep their
    original order in both directions; NaN sorts as the largest value (last
    ascending, first descending).  A 0-d ``x`` sorts as one element.

    >>> sort(np.array([2.0, np.nan, 1.0, 2.0]), 0, descending=True)[1]
    array([1, 0, 3, 2])
    """
    x = np.asarray(x)
    return _sort("sort", x, normalize_axis("sort", axis, x.ndim), descending)


def topk(x, k, axis=-1, largest=True):
    """The ``k`` largest (or smallest) values along ``axis``: ``(values, indices)``.

    Sorted, largest first when ``largest`` (smallest first otherwise); ties
    in original order; NaN counts as the largest value.  The outputs have
    ``x``'s shape with ``k`` along ``axis``.  A 0-d ``x`` is one element and
    needs ``k == 1``.  ValueError when ``k`` is negative or exceeds the size
    of that dim.  (A full sort, then the first ``k``: no partial selection yet.)
    """
    x = np.asarray(x)
    axis = normalize_axis("topk", axis, x.ndim)
    try:
        k = operator.index(k)
    except TypeError:
        raise TypeError(f"topk: k must be an int, got {type(k).__name__}") from None
    if x.ndim == 0:
        if k != 1:
            raise ValueError(f"topk: k={k} on a 0-d array (only k=1 is allowed)")
    elif not 0 <= k <= x.shape[axis]:
        raise ValueError(f"topk: k={k} is out of range for dim {axis} of size "
                         f"{x.shape[axis]} (x shape {x.shape})")
    return _sort("topk", x, axis, largest, k)
