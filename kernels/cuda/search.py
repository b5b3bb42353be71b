"""Binary search on CUDA: one thread per value, the order of ``kernels/cuda/sort.py``
(NaN last), as ``kernels/cpu/search.py`` (launched by engine/backends/cuda/sort.py)."""
from numba import cuda


@cuda.jit(device=True)
def _before(a, b):
    return a < b or (b != b and a == a)


def search(seq, n, values, out, m, right):
    for i in range(cuda.grid(1), m, cuda.gridsize(1)):
        v = values[i]
        lo = 0
        hi = n
        while lo < hi:
            mid = (lo + hi) >> 1
            s = seq[mid]
            if right:
                go_right = not _before(v, s)
            else:
                go_right = _before(s, v)
            if go_right:
                lo = mid + 1
            else:
                hi = mid
        out[i] = lo
