"""Softmax and log_softmax on CUDA arrays: the dim moved last and made dense, one block of
threads per row (``kernels/cuda/softmax.py``).  Calls arrive validated (float, a normalised
axis)."""
import numpy as np

from ember.kernels.cuda import builder as B
from ember.kernels.cuda import softmax as skeletons

from .elementwise import dense


def softmax(b, op, x, *, axis, dtype):
    shape = x.shape
    if not shape:
        x = x.view(x.offset, (1,), (1,))
    dims = tuple(d for d in range(x.ndim) if d != axis) + (axis,)
    y = dense(b, x.view(x.offset, [x.shape[d] for d in dims], [x.strides[d] for d in dims]))
    out = b.empty(y.shape, y.dtype)
    n = y.shape[-1]
    rows = y.size // n if n else 0
    if rows:
        kern = B.kernel(skeletons.softmax_rows, B.variant("exp", y.dtype), y.dtype)
        b.launch(kern, B.grid(rows, 1), B.THREADS, y.buf, y.offset, out.buf, rows, n,
                 y.dtype.type(-np.inf), y.dtype.type(1), op.name == "LOG_SOFTMAX")
    if not shape:
        return out.view(0, (), ())
    back = [int(d) for d in np.argsort(dims)]
    return out.view(out.offset, [out.shape[d] for d in back], [out.strides[d] for d in back])
