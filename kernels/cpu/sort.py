"""Stable sort of the rows of a matrix by keys (launched by engine/backends/cpu/sort.py).

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
import numpy as np
from numba import prange

# Rows longer than RADIX_PER_BYTE * itemsize are radix-sorted (one pass per
# key byte); shorter ones are merge-sorted, runs of SMALL_ROW by insertion
# first.  Measured crossovers: n ~ 16 for 1-byte keys, ~ 64 for 8-byte keys.
SMALL_ROW = 16
RADIX_PER_BYTE = 8

KIND_UNSIGNED, KIND_SIGNED, KIND_FLOAT = 0, 1, 2   # the key kinds ``sort_rows`` takes


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
                if kind == KIND_FLOAT:
                    a = u & absmask
                    if a > inf:
                        u = full
                    elif a == zero:
                        u = sign
                    elif (u & sign) != zero:
                        u = (~u) & full
                    else:
                        u = u | sign
                elif kind == KIND_SIGNED:
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
