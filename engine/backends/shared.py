"""What both backends share: stride arithmetic, reduction identities, chain keys, ``cat``,
and the linear-algebra ops' packing and errors.

A backend hands its kernels ``(buffer, offset, strides)`` per operand; these helpers shape
that description: C strides of a shape, broadcasting as stride 0, merging the dims that are
contiguous in every operand.  Besides: the identity element of a reduction's combiner, the
kernel key of a fused chain, and ``cat`` over any backend's allocation and copy.  No device
code, no allocation policy.

A factorisation with several outputs (``SLOGDET``, ``EIGH``, ``SVD``, ``QR``) returns ONE
buffer: for a batch of shape ``batch``, the outputs flattened (C order) one after the other
along a last dim, ``batch + (sum of their sizes,)``.  ``ember.linalg`` hands the user views
of it, so the autodiff graph sees one op with one output, and the slices' gradients add up
into the packed gradient the op's rule splits again (no multi-output nodes in the graph
walk).
"""
import functools
import math

import numpy as np


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
    from ember.kernels.rebind import variant   # (kernels load Numba: not at import)
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


# --- linear algebra -------------------------------------------------------------------------
class LinAlgError(ValueError):
    """A factorisation or solve that cannot be done: a matrix that is not positive-definite
    (cholesky), singular (solve, inv), or an iteration that did not converge (eigh, svd).
    A ``ValueError``, as numpy's ``LinAlgError`` is; the message names the op."""


def batch_of(a):
    return tuple(a.shape[:-2])


def where(batch, index):
    """`` (matrix (i, j) of the batch)`` for error messages (nothing for a single matrix)."""
    return f" (matrix {tuple(int(i) for i in index)} of the batch)" if batch else ""


def packed_shapes(op, shape, params):
    """The shapes (without the batch) of the outputs ``op`` packs, for an input of ``shape``."""
    from ..ir import Op
    m, n = shape[-2], shape[-1]
    k = min(m, n)
    if op is Op.SLOGDET:
        return [(), ()]
    if op is Op.EIGH:
        return [(n,), (n, n)]
    if op is Op.SVD:
        full = params["full_matrices"]
        return [(m, m if full else k), (k,), (n if full else k, n)]
    if op is Op.QR:
        complete = params["mode"] == "complete"
        return [(m, m if complete else k), (m if complete else k, n)]
    raise ValueError(f"{op!r} packs no outputs")


def offsets(shapes):
    """``([(start, stop)] per output, total size)`` of outputs of ``shapes`` packed in a row."""
    out, off = [], 0
    for s in shapes:
        size = math.prod(s)
        out.append((off, off + size))
        off += size
    return out, off
