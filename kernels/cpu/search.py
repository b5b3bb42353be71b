"""Binary search: ``searchsorted`` of many values in one sorted 1-D sequence.

The order is the sort's (``kernels/cpu/sort.py``): NaN sorts as the largest value, so a
sequence sorted by Ember (or numpy) with NaNs at the end is searched consistently: a NaN
value goes after every number (``side="left"``: before the first NaN, ``"right"``: after
the last).  One compiled kernel per (sequence dtype, values dtype), parallel over values.
"""
import numpy as np
from numba import prange

from .builder import kernel
from . import launch
from .launch import PARALLEL_MIN


def search(seq, values, out, right):
    n = seq.shape[0]
    for i in prange(values.shape[0]):
        v = values[i]
        lo = 0
        hi = n
        while lo < hi:
            mid = (lo + hi) >> 1
            s = seq[mid]
            # "a sorts before b" is a < b with NaN last: a < b or (b is NaN and a is not)
            if right:
                go_right = not (v < s or (s != s and v == v))
            else:
                go_right = s < v or (v != v and s == s)
            if go_right:
                lo = mid + 1
            else:
                hi = mid
        out[i] = lo


def searchsorted(seq, values, right):
    """int64 positions of ``values`` (any shape) in the sorted 1-D array ``seq``: the first
    position whose entry is not before (``right``: is after) the value."""
    seq = np.ascontiguousarray(seq)
    flat = np.ascontiguousarray(values).reshape(-1)
    out = launch.alloc(flat.shape, np.int64)
    if flat.size:
        k = kernel(search)
        fn = k.parallel if flat.size * max(1, int(np.log2(seq.size + 1))) >= PARALLEL_MIN else k.serial
        fn(seq, flat, out, bool(right))
    return out.reshape(np.shape(values))
