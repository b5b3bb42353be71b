"""Scans (cumsum, cumprod) on CUDA arrays: one thread per line along the scanned axis
(``kernels/cuda/reduce.py``'s ``scan_lines``).  Calls arrive validated."""
import math

from ember.kernels.cuda import builder as B
from ember.kernels.cuda import reduce as skeletons

from .elementwise import dense


def cumulative(b, op, x, *, axis, dtype):
    opname = "add" if op.name == "CUMSUM" else "mul"
    src = dense(b, x, dtype.np)
    out = b.empty(x.shape, dtype.np)
    outer = math.prod(x.shape[:axis])
    n = x.shape[axis]
    inner = math.prod(x.shape[axis + 1:])
    if out.size:
        b.launch(B.kernel(skeletons.scan_lines, opname), B.grid(outer * inner), B.THREADS, src.buf,
                 out.buf, outer, n, inner)
    return out
