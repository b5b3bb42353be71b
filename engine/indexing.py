"""``t[key]`` and ``t[key] = value`` beyond basic indexing: Bool masks and integer arrays.

Basic keys (ints, slices, None, ``...``) stay views (``Op.SLICE``).  A key holding tensors
(or numpy arrays, or lists of ints) follows numpy's vectorised indexing, which the array API
standard's integer-array and boolean-array indexing are subsets of:

- a Bool mask of ``m`` dims stands for the ``m`` integer arrays of its ``nonzero()``; it may
  cover the leading dims only (``X[y == k]`` on a 2-D ``X``) or sit anywhere in the key;
- integer arrays (and, next to them, plain ints) broadcast together; the dims they index are
  replaced by the broadcast shape, in place when those indices are adjacent in the key, at the
  front otherwise (numpy's rule);
- the rest of the key (slices, None) is applied first, as a view.

Everything is composed from existing ops (slice, permute, reshape, index_select), so autodiff
and every device work unchanged.  Assignment (``__setitem__``) computes a new value with
``slice_assign`` (basic keys), ``where`` (a mask and one value) or ``scatter`` (anything else)
and rebinds the tensor to it: copy-on-write, docs/decisions.md "__setitem__".
"""
import math
import numbers

import numpy as np

from . import dispatch
from . import dtypes as dt
from .ir import Op
from .storage import TensorBase


def _as_index_tensor(obj, like):
    """A list / numpy array used as an index, as a tensor on ``like``'s device."""
    from .creation import tensor
    a = np.asarray(obj)
    if a.dtype == object or a.dtype.kind not in "biu":
        if a.size == 0 and a.dtype.kind == "f":   # [] is float64 to numpy
            a = a.astype(np.int64)
        else:
            raise TypeError(f"getitem: arrays used as indices must be of integer or boolean "
                            f"type, got {a.dtype}")
    return tensor(a, device=like._device.base())


_BASIC = frozenset((int, slice, type(None), type(Ellipsis)))   # (Tensor.__getitem__ reads it too)


def normalize_key(key, t):
    """``key`` as a tuple whose array entries are tensors; None when the key is basic."""
    if not isinstance(key, tuple):
        key = (key,)
    for k in key:   # the common case, decided without building anything (per-op overhead)
        if type(k) not in _BASIC:
            break
    else:
        return None
    T = TensorBase
    advanced = False
    out = []
    for k in key:
        if isinstance(k, T):
            advanced = True
        elif isinstance(k, (np.ndarray, list)):
            k = _as_index_tensor(k, t)
            advanced = True
        elif isinstance(k, (bool, np.bool_)):
            from .creation import tensor
            k = tensor(bool(k), device=t._device.base())
            advanced = True
        out.append(k)
    return tuple(out) if advanced else None


def _check_array_index(k, t):
    if k._dtype.quantized or k._dtype.kind is dt.Float:
        raise TypeError(f"getitem: tensors used as indices must be Int or Bool, got {k._dtype.name}")
    dispatch.same_device("getitem", [t, k])


def _plan(t, key):
    """Split an advanced ``key``: (basic key of slices/None, [(dim of the basic view, Int
    tensor)], True when the advanced entries are adjacent in the key)."""
    T = TensorBase
    consumed = 0
    for k in key:
        if isinstance(k, T):
            _check_array_index(k, t)
            consumed += k.ndim if k._dtype is dt.bool_ else 1
        elif k is not None and k is not Ellipsis:
            consumed += 1
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("getitem: an index can only have a single ellipsis ('...')")
    if consumed > t.ndim:
        raise IndexError(f"getitem: too many indices ({consumed}) for a tensor of shape {t.shape}")
    basic = []
    arrays = []        # (dim in the basic view, index tensor or int)
    positions = []     # entry number in the key of each advanced index (adjacency)
    dim = 0            # dim of t
    vdim = 0           # dim of the basic view
    for pos, k in enumerate(key):
        if k is Ellipsis:
            skip = t.ndim - consumed
            basic.extend([slice(None)] * skip)
            dim += skip
            vdim += skip
        elif k is None:
            basic.append(None)
            vdim += 1
        elif isinstance(k, slice):
            basic.append(k)
            dim += 1
            vdim += 1
        elif isinstance(k, T) and k._dtype is dt.bool_:
            m = k.ndim
            if m == 0:   # a new dim of length 1 (True) or 0 (False)
                basic.append(None)
                count = 1 if bool(k.item()) else 0
                from .creation import zeros
                arrays.append((vdim, zeros((count,), dtype=dt.int64, device=t._device.base())))
                positions.append(pos)
                vdim += 1
                continue
            shape = t.shape[dim:dim + m]
            # each mask dim has the indexed dim's size, or 0 (an empty mask: the standard)
            if len(shape) != m or any(a != b and a != 0 for a, b in zip(k.shape, shape)):
                raise IndexError(f"getitem: a boolean mask of shape {k.shape} does not match the "
                                 f"indexed dims {shape} of the tensor's shape {t.shape}")
            coords = k.argwhere()
            for j in range(m):
                basic.append(slice(None))
                arrays.append((vdim, coords[:, j]))
                positions.append(pos)
                vdim += 1
            dim += m
        elif isinstance(k, T) or (isinstance(k, numbers.Integral) and not isinstance(k, bool)):
            basic.append(slice(None))
            arrays.append((vdim, k))
            positions.append(pos)
            dim += 1
            vdim += 1
        else:
            raise IndexError(f"getitem: unsupported index {k!r} (use ints, slices, None, ..., "
                             f"Int or Bool tensors)")
    adjacent = all(b - a <= 1 for a, b in zip(positions, positions[1:]))
    return tuple(basic), arrays, adjacent


def getitem(t, key):
    """``t[key]`` for an advanced ``key`` (see the module docstring)."""
    from .creation import tensor
    basic, arrays, adjacent = _plan(t, key)
    v = t[basic] if basic else t
    dims = [d for d, _ in arrays]
    sizes = [v.shape[d] for d in dims]
    idx = []
    for (d, a), n in zip(arrays, sizes):
        if not isinstance(a, TensorBase):
            if not -n <= a < n:
                raise IndexError(f"getitem: index {a} is out of range for dim {d} with size {n}")
            a = tensor(int(a) % n if n else int(a), device=t._device.base())
        else:
            a = _checked(a, n, d)
        idx.append(a)
    bshape = dispatch.broadcast_shapes("getitem", *(a.shape for a in idx))
    rest = [d for d in range(v.ndim) if d not in dims]
    moved = v.permute(dims + rest) if dims + rest != list(range(v.ndim)) else v
    rest_shape = tuple(v.shape[d] for d in rest)
    flat = moved.reshape((math.prod(sizes),) + rest_shape)
    lin = idx[0].cast(dt.int64)
    for a, n in zip(idx[1:], sizes[1:]):
        lin = lin * n + a.cast(dt.int64)
    lin = lin.expand(bshape) if lin.shape != bshape else lin
    out = flat.index_select(0, lin.reshape(-1)).reshape(bshape + rest_shape)
    if adjacent and dims[0] > 0:
        nb, first = len(bshape), dims[0]
        order = (list(range(nb, nb + first)) + list(range(nb)) +
                 list(range(nb + first, out.ndim)))
        out = out.permute(order)
    return out


def _checked(a, n, d):
    """Int tensor ``a`` indexing a dim of size ``n``: negative entries wrap once, anything
    outside ``[-n, n)`` raises (one host round trip for the bounds)."""
    if a.numel():
        lo, hi = int(a.min().item()), int(a.max().item())
        if lo < -n or hi >= n:
            bad = lo if lo < -n else hi
            raise IndexError(f"getitem: index {bad} is out of range for dim {d} with size {n}")
        if lo < 0:
            a = dispatch.elementwise(Op.WHERE, a < 0, a + n, a)
    return a


# --- assignment ----------------------------------------------------------------------------
def setitem(t, key, value):
    """The new value of ``t`` after ``t[key] = value`` (the caller rebinds ``t`` to it)."""
    T = TensorBase
    if t._dtype.quantized:
        raise TypeError("setitem: quantized tensors cannot be assigned to; dequantize() first")
    if t.is_require_grad():
        raise ValueError("setitem: cannot assign into a marked leaf (its gradient would be lost); "
                         "assign into a copy (x = x.clone()) or into x.detach()")
    v = _value_tensor(value, t)
    adv = normalize_key(key, t)
    if adv is None:
        from . import layout
        idx = layout.basic_index(key, t.shape, "setitem")
        target = np.broadcast_to(np.empty((), np.bool_), t.shape)[idx].shape   # (no storage)
        return t.slice_assign(key, _fit(v, target))
    if (len(adv) == 1 and isinstance(adv[0], T) and adv[0]._dtype is dt.bool_
            and adv[0].ndim and v.numel() == 1):
        mask = adv[0]
        _plan(t, adv)   # validates the mask's shape
        if mask.ndim < t.ndim:
            mask = mask.reshape(mask.shape + (1,) * (t.ndim - mask.ndim))
        return dispatch.elementwise(Op.WHERE, mask, v.reshape(()), t)
    from .creation import arange
    positions = getitem(arange(t.numel(), device=t._device.base()).reshape(t.shape), adv)
    target = positions.shape
    v = _fit(v, target)
    if dispatch.broadcast_shapes("setitem", v.shape, target) != target:
        raise ValueError(f"setitem: values of shape {v.shape} do not fit the selection of shape "
                         f"{target}")
    if not positions.numel():
        return t
    vals = v.expand(target) if v.shape != target else v
    flat = t.reshape(-1).scatter(0, positions.reshape(-1), vals.reshape(-1))
    return flat.reshape(t.shape)


def _fit(v, target):
    """``v`` without leading dims of size 1 beyond ``target``'s rank (numpy drops them)."""
    extra = v.ndim - len(target)
    if extra > 0 and all(n == 1 for n in v.shape[:extra]):
        return v.reshape(v.shape[extra:])
    return v


def _value_tensor(value, t):
    T = TensorBase
    if isinstance(value, T):
        dispatch.same_device("setitem", [t, value])
        return value if value._dtype is t._dtype else value.cast(t._dtype)
    from .creation import tensor
    if isinstance(value, (bool, numbers.Number, np.generic, np.ndarray, list, tuple)):
        return tensor(value, dtype=t._dtype, device=t._device.base())
    raise TypeError(f"setitem: cannot assign a {type(value).__name__} to a tensor")

