"""Scan loops (cumsum, cumprod) on C-contiguous views (launched by engine/backends/cpu/scan.py).

Like the reductions, a scan runs on a C-contiguous ``(outer, n, inner)`` view
of its output, parametrised by the combiner ``OP`` (``kernels.scalar.add`` or
``mul``):

- ``inner > 1``: row ``r`` of the result is ``OP(row r - 1, x[o, r])``, a loop
  over ``inner`` that vectorises; tasks are tiles of ``tw`` columns, narrowed
  by the launcher when there are fewer tasks than threads.
- ``inner == 1``: each row is one dependence chain.  Many rows run in
  parallel; a few long rows are cut into ``nsplit`` chunks that are scanned
  independently, then every chunk but the first is combined with the total of
  the chunks before it (a second, vectorised pass).
"""
import numpy as np
from numba import prange


def scan_fold(x, out, outer, n, inner, ob, tw, nsplit):
    # x and out: (outer, n, inner) flat C order (possibly the same array)
    nob = (outer + ob - 1) // ob
    if inner == 1:
        csize = (n + nsplit - 1) // nsplit
        for t in prange(nob * nsplit):
            b = t // nsplit
            c = t - b * nsplit
            lo = min(n, c * csize)
            hi = min(n, lo + csize)
            if lo < hi:
                for o in range(b * ob, min(outer, b * ob + ob)):
                    src = x[o * n:o * n + n]
                    dst = out[o * n:o * n + n]
                    dst[lo] = src[lo]
                    a = dst[lo]
                    for i in range(lo + 1, hi):
                        a = OP(a, src[i])
                        dst[i] = a
        if nsplit > 1:
            # carry[o * nsplit + c]: the combined total of chunks 0 .. c-1 of row o
            carry = np.empty(outer * nsplit, out.dtype)
            for o in range(outer):
                a = out[o * n + min(n, csize) - 1]
                for c in range(1, nsplit):
                    carry[o * nsplit + c] = a
                    hi = min(n, (c + 1) * csize)
                    if c * csize < hi:
                        a = OP(a, out[o * n + hi - 1])
            for t in prange(outer * (nsplit - 1)):
                o = t // (nsplit - 1)
                c = t - o * (nsplit - 1) + 1
                lo = o * n + min(n, c * csize)
                dst = out[lo:o * n + min(n, (c + 1) * csize)]
                a = carry[o * nsplit + c]
                for i in range(dst.shape[0]):
                    dst[i] = OP(a, dst[i])
    else:
        ntiles = (inner + tw - 1) // tw
        for t in prange(nob * ntiles):
            b = t // ntiles
            j0 = (t - b * ntiles) * tw
            m = min(inner - j0, tw)
            for o in range(b * ob, min(outer, b * ob + ob)):
                start = o * n * inner + j0
                prev = out[start:start + m]
                first = x[start:start + m]
                for j in range(m):
                    prev[j] = first[j]
                for r in range(1, n):
                    start += inner
                    cur = out[start:start + m]
                    src = x[start:start + m]
                    for j in range(m):
                        cur[j] = OP(prev[j], src[j])
                    prev = cur
