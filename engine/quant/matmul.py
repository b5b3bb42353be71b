"""matmul with a quantized operand on either side (numpy's rules: 1-D operands, broadcast
batch dims): the backend's ``QMATMUL`` on 2-D quantized matrices, never a dequantized copy of
the whole operand."""
import math

import numpy as np

from ..ir import Op
from .storage import QuantData, _reshape, _x


def matmul(a, b):
    """``a @ b`` (validated) where exactly one of them holds quantized storage: the quantized
    matmul kernels, which dequantize tiles as they go.  Returns (storage, dtype)."""
    qleft = type(a._buf) is QuantData
    q, f = (a, b) if qleft else (b, a)
    return _qmatmul(q, f._data, qleft, f._dtype), f._dtype


def _kernel(device, mat, other, qleft, dtype):
    values, scales, bm, bn, bits, shape = mat
    return _x(device, Op.QMATMUL, values, scales, other, bm=bm, bn=bn, bits=bits, shape=shape,
              qleft=qleft, dtype=dtype)


def _matrix(qd, device):
    """A 2-D quantized storage as the kernels take it: (values, 2-D scales, bm, bn, bits, shape)."""
    R, C = qd.shape
    block = qd.scheme.block_size
    scales = qd.scales
    if block is None:
        bm, bn = max(R, 1), max(C, 1)
        scales = _reshape(device, scales, (1, 1))
    elif len(block) == 1:
        bm, bn = 1, block[0]
    else:
        bm, bn = block
    return qd.values, scales, bm, bn, qd.scheme.bits, (R, C)


def _qmatmul(q, fa, qleft, dtype):
    """``q @ fa`` (``qleft``) or ``fa @ q`` with numpy's rules: 1-D operands, broadcast batch dims.

    ``q`` is the quantized tensor, ``fa`` the other operand's backend array (in ``dtype``)."""
    device = q._device
    fs = tuple(fa.shape)
    drop = []   # result dims of 1-D operands (numpy removes them again)
    if len(fs) == 1:
        fa = _reshape(device, fa, (fs[0], 1) if qleft else (1, fs[0]))
        drop.append(-1 if qleft else -2)
    if q.ndim == 1:
        q = q.reshape((1, q.shape[0]) if qleft else (q.shape[0], 1))   # exact: only a unit dim
        drop.append(-2 if qleft else -1)
    qd = q._data
    qlead, flead = qd.shape[:-2], tuple(fa.shape[:-2])
    if not qlead:
        mat = _matrix(qd, device)
        if not qleft:   # F (..., M, K) @ Q: the batch folds into the rows of F
            M, K = fa.shape[-2:]
            out = _kernel(device, mat, _reshape(device, fa, (math.prod(flead) * M, K)), False, dtype.np)
            out = _reshape(device, out, flead + (M, qd.shape[1]))
        elif flead:     # Q @ F (..., K, N): the batch folds into the columns of F
            K, N = fa.shape[-2:]
            nd = len(fa.shape)
            cols = _x(device, Op.PERMUTE, fa, dims=(nd - 2,) + tuple(range(nd - 2)) + (nd - 1,))
            out = _kernel(device, mat, _reshape(device, cols, (K, math.prod(flead) * N)), True, dtype.np)
            out = _reshape(device, out, (qd.shape[0],) + flead + (N,))
            out = _x(device, Op.PERMUTE, out, dims=tuple(range(1, nd - 1)) + (0, nd - 1))
        else:
            out = _kernel(device, mat, fa, True, dtype.np)
    else:           # a batch of quantized matrices: one product per broadcast batch index
        lead = np.broadcast_shapes(qlead, flead)
        parts = []
        for idx in np.ndindex(*lead):
            qi = tuple(i if n != 1 else 0 for i, n in zip(idx[len(lead) - len(qlead):], qlead))
            fi = tuple(i if n != 1 else 0 for i, n in zip(idx[len(lead) - len(flead):], flead))
            sub = QuantData(qd.values[qi], qd.scales if qd.scheme.block_size is None else qd.scales[qi],
                            qd.shape[-2:], qd.scheme)
            part = _kernel(device, _matrix(sub, device), fa[fi] if fi else fa, qleft, dtype.np)
            parts.append(_reshape(device, part, (1,) + tuple(part.shape)))
        m, n = (qd.shape[-2], fa.shape[-1]) if qleft else (fa.shape[-2], qd.shape[-1])
        if parts:
            out = _x(device, Op.CAT, *parts, axis=0, dtype=dtype)
        else:
            out = _x(device, Op.FULL, shape=(0, m, n), value=0, dtype=dtype)
        out = _reshape(device, out, lead + (m, n))
    if drop:
        shape = list(out.shape)
        for d in sorted(drop):
            del shape[d]
        out = _reshape(device, out, shape)
    return out
