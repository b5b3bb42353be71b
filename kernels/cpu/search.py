"""Binary search: ``searchsorted`` of many values in one sorted 1-D sequence (launched by
engine/backends/cpu/sort.py).

The order is the sort's (``kernels/cpu/sort.py``): NaN sorts as the largest value, so a
sequence sorted by Ember (or numpy) with NaNs at the end is searched consistently: a NaN
value goes after every number (``side="left"``: before the first NaN, ``"right"``: after
the last).  One compiled kernel per (sequence dtype, values dtype), parallel over values.
"""
from numba import prange


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

