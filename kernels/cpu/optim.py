"""Fused optimizer updates: one pass over a parameter, its gradient and its state.

Each template reads parameter ``p`` and gradient ``g`` (1-D, C-contiguous, one
dtype), updates the state buffers in place and writes the new parameter into
``out``: the optimizer returns new parameters, it never writes into the old
ones.  Arithmetic runs in float64 and each state value is stored in the
parameter's dtype and read back before use, so float32 state rounds as
PyTorch's does.  The formulas and their order follow ``torch.optim``'s
single-tensor implementations.

Templates are compiled through ``builder.kernel`` (serial below
``PARALLEL_MIN`` elements, ``prange`` over chunks above), so they hit the disk
cache.  The launchers below take numpy arrays.
"""
import math

import numpy as np
from numba import prange

from . import launch
from .builder import kernel
from .launch import PARALLEL_MIN

CHUNK = 1 << 14


# --------------------------------------------------------------------------
# templates


def sgd_update(p, g, buf, out, lr, momentum, dampening, weight_decay, nesterov, maximize, first):
    """SGD with weight decay, (Nesterov) momentum and dampening; ``buf`` unused without momentum."""
    n = p.shape[0]
    ntasks = (n + CHUNK - 1) // CHUNK
    for t in prange(ntasks):
        lo = t * CHUNK
        hi = min(n, lo + CHUNK)
        for i in range(lo, hi):
            d = 1.0 * g[i]
            if maximize:
                d = -d
            if weight_decay != 0.0:
                d = d + weight_decay * p[i]
            if momentum != 0.0:
                if first:
                    buf[i] = d                                    # buf = clone(grad)
                else:
                    buf[i] = buf[i] * momentum + (1.0 - dampening) * d
                b = 1.0 * buf[i]
                if nesterov:
                    d = d + momentum * b
                else:
                    d = b
            out[i] = p[i] - lr * d


def adam_update(p, g, m, v, vmax, out, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad,
                maximize, step_size, bc2_sqrt):
    """Adam (L2 weight decay) or AdamW (``decoupled``); ``vmax`` unused without amsgrad."""
    n = p.shape[0]
    w1 = 1.0 - beta1
    for t in prange((n + CHUNK - 1) // CHUNK):
        lo = t * CHUNK
        hi = min(n, lo + CHUNK)
        for i in range(lo, hi):
            d = 1.0 * g[i]
            if maximize:
                d = -d
            x = 1.0 * p[i]
            if weight_decay != 0.0:
                if decoupled:
                    x = x * (1.0 - lr * weight_decay)
                else:
                    d = d + weight_decay * x
            mi = 1.0 * m[i]
            if w1 < 0.5:                                          # torch's lerp, both branches
                m[i] = mi + w1 * (d - mi)
            else:
                m[i] = d - (d - mi) * (1.0 - w1)
            v[i] = v[i] * beta2 + (1.0 - beta2) * d * d
            vi = 1.0 * v[i]
            if amsgrad:
                if vmax[i] > vi:
                    vi = 1.0 * vmax[i]
                vmax[i] = vi
            denom = math.sqrt(vi) / bc2_sqrt + eps
            out[i] = x - step_size * (m[i] / denom)


# --------------------------------------------------------------------------
# launchers


def _pick(k, n):
    return k.parallel if n >= PARALLEL_MIN and n > CHUNK else k.serial


_DUMMY = {}


def _dummy(dtype):
    """A 1-element buffer standing for state a variant does not use (one kernel signature)."""
    a = _DUMMY.get(dtype)
    if a is None:
        a = _DUMMY[dtype] = np.zeros(1, dtype)
    return a


def sgd(p, g, buf, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
        maximize=False, first=False):
    """The new parameter after one SGD step; updates momentum buffer ``buf`` (or None) in place."""
    out = launch.alloc(p.shape, p.dtype)
    if p.size:
        _pick(kernel(sgd_update), p.size)(
            p, g, _dummy(p.dtype) if buf is None else buf, out, float(lr), float(momentum),
            float(dampening), float(weight_decay), bool(nesterov), bool(maximize), bool(first))
    return out


def adam(p, g, m, v, vmax, step, lr, beta1, beta2, eps, weight_decay=0.0, decoupled=False,
         maximize=False):
    """The new parameter after Adam/AdamW step number ``step`` (1-based); updates the moments in place."""
    out = launch.alloc(p.shape, p.dtype)
    if p.size:
        bc1 = 1 - beta1 ** step
        bc2_sqrt = (1 - beta2 ** step) ** 0.5
        _pick(kernel(adam_update), p.size)(
            p, g, m, v, _dummy(p.dtype) if vmax is None else vmax, out, float(lr), float(beta1),
            float(beta2), float(eps), float(weight_decay), bool(decoupled), vmax is not None,
            bool(maximize), float(lr / bc1), float(bc2_sqrt))
    return out
