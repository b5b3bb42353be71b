"""Matmul on CUDA arrays: numpy's rules (1-D operands, broadcast batch dims) over the tiled
shared-memory kernel of ``kernels/cuda/linalg.py``, strided operands read in place."""
import math

from ember.kernels.cuda import builder as B
from ember.kernels.cuda import linalg as skeletons

from ..shared import broadcast_strides, c_strides


def matmul(b, op, a, x, dtype=None):
    va, vb = a.ndim == 1, x.ndim == 1
    if va:
        a = a.view(a.offset, (1,) + a.shape, (0,) + a.strides)
    if vb:
        x = x.view(x.offset, x.shape + (1,), x.strides + (0,))
    m, k = a.shape[-2:]
    n = x.shape[-1]
    ba, bb = a.shape[:-2], x.shape[:-2]
    nd = max(len(ba), len(bb))
    bshape = tuple(max(p, q) for p, q in zip((1,) * (nd - len(ba)) + ba, (1,) * (nd - len(bb)) + bb))
    abst = broadcast_strides(ba, a.strides[:-2], bshape)
    bbst = broadcast_strides(bb, x.strides[:-2], bshape)
    out = b.empty(bshape + (m, n), a.dtype)
    nbatch = math.prod(bshape)
    if out.size:
        if not bshape:
            bshape, abst, bbst = (1,), (0,), (0,)
        kern = B.kernel(skeletons.matmul_tiled, None, a.dtype)
        ntr, ntc = -(-m // B.TILE), -(-n // B.TILE)
        grid = (min(ntc, B.MAX_BLOCKS), min(ntr, B.MAX_BLOCKS), min(nbatch, B.MAX_BLOCKS))
        b.launch(kern, grid, (B.TILE, B.TILE), a.buf, a.offset, a.strides[-2:], tuple(abst),
                 x.buf, x.offset, x.strides[-2:], tuple(bbst), out.buf, tuple(bshape), m, k, n,
                 nbatch)
    shape = out.shape
    if va:
        shape = shape[:-2] + shape[-1:]
    if vb:
        shape = shape[:-1]
    return out.view(0, shape, c_strides(shape))
