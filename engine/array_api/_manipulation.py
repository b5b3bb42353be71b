"""Manipulation, indexing and linear algebra functions of the standard."""
import builtins
import math
import numbers

from .. import creation, dispatch, manipulation
from .. import dtypes as dt
from ..ir import Op
from ..tensor import Tensor
from ._dtypes import _check_array


def _axes(name, axis, ndim):
    """None -> every axis; an int or a sequence of ints -> a tuple of normalised axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
    return tuple(dispatch.normalize_dim(name, int(a), ndim) for a in axes)


def _arrays(name, arrays):
    arrays = list(arrays)
    if not arrays:
        raise ValueError(f"{name}: expected at least one array")
    for a in arrays:
        _check_array(name, a)
    return arrays


def broadcast_arrays(*arrays):
    return manipulation.broadcast_tensors(*_arrays("broadcast_arrays", arrays))


def broadcast_to(x, /, shape):
    _check_array("broadcast_to", x)
    shape = tuple(shape)
    if dispatch.broadcast_shapes("broadcast_to", x.shape, shape) != shape:
        raise ValueError(f"broadcast_to: cannot broadcast shape {x.shape} to {shape}")
    return x.expand(shape) if x.shape != shape else +x


def concat(arrays, /, *, axis=0):
    """Join arrays along ``axis`` (``None``: flattened first)."""
    arrays = _arrays("concat", arrays)
    if axis is None:
        arrays = [a.reshape(-1) for a in arrays]
        axis = 0
    return creation.cat(arrays, axis)


def expand_dims(x, /, axis=0):
    _check_array("expand_dims", x)
    if not isinstance(axis, numbers.Integral) or not -x.ndim - 1 <= axis <= x.ndim:
        raise IndexError(f"expand_dims: axis {axis} is out of range for an array with {x.ndim} dims")
    return x.unsqueeze(int(axis))


def flip(x, /, *, axis=None):
    _check_array("flip", x)
    return x.flip(_axes("flip", axis, x.ndim))


def moveaxis(x, source, destination, /):
    _check_array("moveaxis", x)
    return manipulation.movedim(x, source, destination)


def permute_dims(x, /, axes):
    _check_array("permute_dims", x)
    return x.permute(tuple(axes))


def repeat(x, repeats, /, *, axis=None):
    """Each element repeated ``repeats`` times (an int, or an array of one count per element
    along ``axis``); without ``axis`` the flattened array."""
    _check_array("repeat", x)
    return manipulation.repeat_interleave(x, repeats, axis)


def reshape(x, /, shape, *, copy=None):
    """``x`` in a new shape (one entry may be -1)."""
    _check_array("reshape", x)
    out = x.reshape(tuple(shape))
    if copy and out is x:
        out = +x
    return out


def roll(x, /, shift, *, axis=None):
    _check_array("roll", x)
    return manipulation.roll(x, shift, axis)


def squeeze(x, /, axis):
    """``x`` without the given axes, which must have size 1 (else ValueError)."""
    _check_array("squeeze", x)
    axes = _axes("squeeze", axis, x.ndim)
    if len(set(axes)) != len(axes):
        raise ValueError(f"squeeze: repeated axis in {axis!r}")
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"squeeze: axis {a} has size {x.shape[a]}, not 1 (shape {x.shape})")
    return x.reshape(tuple(n for d, n in enumerate(x.shape) if d not in axes))


def stack(arrays, /, *, axis=0):
    arrays = _arrays("stack", arrays)
    dtype = arrays[0].dtype
    for a in arrays[1:]:
        dtype = dt.promote(dtype, a.dtype)
    return creation.stack([a if a.dtype is dtype else a.cast(dtype) for a in arrays], axis)


def tile(x, repetitions, /):
    _check_array("tile", x)
    return manipulation.tile(x, tuple(repetitions))


def unstack(x, /, *, axis=0):
    _check_array("unstack", x)
    return manipulation.unbind(x, axis)


def take(x, indices, /, *, axis=None):
    """Entries of ``x`` at ``indices`` (a 1-D integer array, negative entries from the end)
    along ``axis`` (required unless ``x`` is 1-D)."""
    _check_array("take", x)
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"take: axis is required for an array of {x.ndim} dims")
        axis = 0
    a = dispatch.normalize_dim("take", axis, x.ndim)
    if not isinstance(indices, Tensor):
        indices = creation.tensor(indices, dtype=dt.int64, device=x.device.base())
    if indices.ndim != 1:
        raise ValueError(f"take: indices must be 1-D, got shape {indices.shape}")
    key = (slice(None),) * a + (indices,)
    return x[key]


def take_along_axis(x, indices, /, *, axis=-1):
    _check_array("take_along_axis", x)
    return manipulation.take_along_dim(x, indices, axis)


def matmul(x1, x2, /):
    _check_array("matmul", x1)
    return x1.matmul(x2)


def matrix_transpose(x, /):
    _check_array("matrix_transpose", x)
    return x.mT


def tensordot(x1, x2, /, *, axes=2):
    """Sum of products over ``axes`` (an int: the last ``axes`` of ``x1`` with the first of
    ``x2``; or two sequences of axes), as permute + reshape + matmul."""
    _check_array("tensordot", x1)
    _check_array("tensordot", x2)
    if isinstance(axes, numbers.Integral):
        n = int(axes)
        if n < 0 or n > x1.ndim or n > x2.ndim:
            raise ValueError(f"tensordot: axes={n} is out of range for shapes {x1.shape} and {x2.shape}")
        a1 = tuple(range(x1.ndim - n, x1.ndim))
        a2 = tuple(range(n))
    else:
        a1, a2 = (tuple(a) if not isinstance(a, numbers.Integral) else (a,) for a in axes)
        a1 = tuple(dispatch.normalize_dim("tensordot", int(a), x1.ndim) for a in a1)
        a2 = tuple(dispatch.normalize_dim("tensordot", int(a), x2.ndim) for a in a2)
    if len(a1) != len(a2) or builtins.any(x1.shape[i] != x2.shape[j] for i, j in zip(a1, a2)):
        raise ValueError(f"tensordot: axes {a1} of {x1.shape} and {a2} of {x2.shape} do not match")
    dtype = dt.promote(x1.dtype, x2.dtype)
    x1, x2 = x1.cast(dtype), x2.cast(dtype)
    free1 = [d for d in range(x1.ndim) if d not in a1]
    free2 = [d for d in range(x2.ndim) if d not in a2]
    k = math.prod(x1.shape[i] for i in a1)
    m = math.prod(x1.shape[i] for i in free1)
    n = math.prod(x2.shape[i] for i in free2)
    left = x1.permute(free1 + list(a1)).reshape(m, k)
    right = x2.permute(list(a2) + free2).reshape(k, n)
    out_shape = tuple(x1.shape[i] for i in free1) + tuple(x2.shape[i] for i in free2)
    if k == 0:
        return creation.full(out_shape, 0, dtype, x1.device)
    return (left @ right).reshape(out_shape)


def vecdot(x1, x2, /, *, axis=-1):
    """``sum(conj(x1) * x2, axis)`` after broadcasting."""
    _check_array("vecdot", x1)
    _check_array("vecdot", x2)
    shape = dispatch.broadcast_shapes("vecdot", x1.shape, x2.shape)
    if not shape:
        raise ValueError("vecdot: expected arrays with at least one dim")
    a = dispatch.normalize_dim("vecdot", axis, len(shape))
    for x in (x1, x2):
        d = a - (len(shape) - x.ndim)
        if d < 0 or x.shape[d] != shape[a]:
            raise ValueError(f"vecdot: axis {axis} of shapes {x1.shape} and {x2.shape} must have "
                             f"the same size in both")
    prod = dispatch.elementwise(Op.MUL, x1.conj(), x2)
    return prod.sum(a, dtype=prod.dtype)

