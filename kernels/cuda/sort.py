"""Stable sort along the last dim of a C-contiguous ``(rows, n)`` array.

One thread per row runs a bottom-up merge sort of positions (``idx``, with
``tmp`` as the second buffer), then writes the values in sorted order.  The
order matches the CPU's: stable in both directions, ``-0.0`` ties ``+0.0``,
NaN sorts as the largest value (last ascending, first descending).  Simple
and correct; a block-parallel sort is future work for long rows on a GPU.
"""
from numba import cuda


@cuda.jit(device=True)
def _before(v, w, descending):
    """Value ``v`` strictly precedes ``w``."""
    if descending:
        return v > w or (v != v and w == w)
    return v < w or (w != w and v == v)


def sort_rows(x, values, idx, tmp, rows, n, descending):
    for r in range(cuda.grid(1), rows, cuda.gridsize(1)):
        base = r * n
        for i in range(n):
            idx[base + i] = i
        src = idx
        dst = tmp
        width = 1
        while width < n:
            for lo in range(0, n, 2 * width):
                mid = min(lo + width, n)
                hi = min(lo + 2 * width, n)
                ia = lo
                ic = mid
                for p in range(lo, hi):
                    right = ia >= mid
                    if not right and ic < hi:
                        right = _before(x[base + src[base + ic]], x[base + src[base + ia]], descending)
                    if right:
                        dst[base + p] = src[base + ic]
                        ic += 1
                    else:
                        dst[base + p] = src[base + ia]
                        ia += 1
            src, dst = dst, src
            width *= 2
        for i in range(n):
            j = src[base + i]
            idx[base + i] = j
            values[base + i] = x[base + j]
