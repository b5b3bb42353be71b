"""What both backends share: stride arithmetic, reduction identities, chain keys, ``cat``.

A backend hands its kernels ``(buffer, offset, strides)`` per operand; these helpers shape
that description: C strides of a shape, broadcasting as stride 0, merging the dims that are
contiguous in every operand.  Besides: the identity element of a reduction's combiner, the
kernel key of a fused chain, and ``cat`` over any backend's allocation and copy.  No device
code, no allocation policy.
"""
import functools

import numpy as np

from ember.kernels.rebind import variant


def c_strides(shape):
    """The element strides of a C-contiguous array of ``shape``."""
    strides = []
    s = 1
    for n in reversed(shape):
        strides.append(s)
        s *= n
    return tuple(reversed(strides))


def broadcast_strides(shape, strides, target):
    """Element strides of an array of ``shape`` and ``strides`` broadcast to ``target``
    (which ``shape`` broadcasts to): 0 along new and stretched dims."""
    off = len(target) - len(shape)
    return (0,) * off + tuple(s if n == m else 0 for n, m, s in zip(shape, target[off:], strides))


def merge_dims(shape, strides_list):
    """Drop size-1 dims and merge neighbours that are contiguous in every operand:
    ``(merged shape, merged strides per operand)``, lists of ints."""
    dims = [(n, [st[d] for st in strides_list]) for d, n in enumerate(shape) if n != 1]
    if not dims:
        return [1], [[0] for _ in strides_list]
    out_shape = [dims[0][0]]
    out_strides = [[s] for s in dims[0][1]]
    for n, sts in dims[1:]:
        if all(o[-1] == s * n for o, s in zip(out_strides, sts)):
            out_shape[-1] *= n
            for o, s in zip(out_strides, sts):
                o[-1] = s
        else:
            out_shape.append(n)
            for o, s in zip(out_strides, sts):
                o.append(s)
    return out_shape, out_strides


@functools.cache
def identity(op, dtype):
    """The value ``init`` of numpy ``dtype`` with ``op(init, v) == v`` for every ``v``, for
    the combiners of reductions and scans (``kernels/scalar.py`` names)."""
    if op == "add":
        v = 0
    elif op == "mul":
        v = 1
    elif op == "logical_and":
        v = True
    elif op == "logical_or":
        v = False
    elif dtype.kind == "f":
        v = -np.inf if op == "maximum" else np.inf
    elif dtype.kind == "b":
        v = op == "minimum"
    else:
        info = np.iinfo(dtype)
        v = info.min if op == "maximum" else info.max
    return dtype.type(v)


_SCALARS = {}


def chain_key(chain):
    """The kernel key of a fused chain (``kernels/fused.py``) from fusion's description of it
    (``ember.fusion``: its ops as IR ops): each op becomes the scalar function its eager
    kernel of that result dtype would use (``exp_f32`` for float32)."""
    kinds, entries, outputs = chain
    nodes = []
    for op, dtype, refs in entries:
        fn = _SCALARS.get((op, dtype))
        if fn is None:
            fn = _SCALARS[op, dtype] = variant(op.scalar, np.dtype(dtype))
        nodes.append((fn, dtype, refs))
    return kinds, tuple(nodes), tuple(outputs)


def cat_shape_and_fill(xs, axis, empty, copy):
    """``cat`` for any backend: allocate with ``empty(shape)``, copy each piece with ``copy(x, view)``."""
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    out = empty(tuple(shape))
    start = 0
    for x in xs:
        n = x.shape[axis]
        copy(x, out[(slice(None),) * axis + (slice(start, start + n),)])
        start += n
    return out
