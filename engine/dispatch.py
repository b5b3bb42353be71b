"""The one dispatch path: every op goes through here on its way to a backend.

It checks kinds and devices, promotes dtypes (numpy rules), broadcasts shapes
and normalises dims, then hands one IR op to the device's backend.  Errors are
raised here, in Python, naming the op and the offending shapes or kinds, so no
Numba typing error ever reaches the user.  Autodiff (and later fusion) wraps
this seam.
"""
from . import dtypes as dt
from .device import DeviceError
from .device import parse as parse_device  # noqa: F401  (used by Tensor.to)
from .ir import BOOL, FLOAT, Op

_tensor_cls = None  # ember.Tensor, set by tensor.py (avoids an import cycle)
_op_names = {}


def op_name(op):
    return _op_names.get(op) or op.name.lower().rstrip("_")


def wrap(data, device, dtype):
    """A new Tensor around backend storage ``data``."""
    t = object.__new__(_tensor_cls)
    t._data = data
    t._device = device
    t._dtype = dtype
    return t


def check_kind(name, op, t):
    if t._dtype.kind not in op.kinds:
        allowed = " or ".join(sorted(k.name for k in op.kinds))
        raise TypeError(f"{name}: expected a {allowed} tensor, got {t._dtype.kind.name} ({t._dtype.name})")


def same_device(name, tensors):
    """The tensors' common device; ``name`` is an op name or an ``Op``."""
    dev = tensors[0]._device
    for t in tensors[1:]:
        if t._device != dev:
            name = op_name(name) if isinstance(name, Op) else name
            raise DeviceError(f"{name}: tensors are on different devices ({dev} and {t._device})")
    return dev


def broadcast_shapes(name, *shapes):
    """numpy broadcasting; ValueError naming the op and the shapes."""
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        off = ndim - len(s)
        for i, n in enumerate(s):
            o = out[off + i]
            if o == 1:
                out[off + i] = n
            elif n != 1 and n != o:
                raise ValueError(f"{name}: shapes {' and '.join(str(tuple(x)) for x in shapes)} "
                                 f"cannot be broadcast together")
    return tuple(out)


def normalize_dim(name, dim, ndim):
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"{name}: dim must be an int, got {dim!r}")
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{name}: dim {dim} is out of range for a tensor with {ndim} dims")
    return dim % n


def normalize_dims(name, dim, ndim):
    """``None`` -> all dims; an int or a tuple -> sorted tuple of distinct dims."""
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = sorted({normalize_dim(name, d, ndim) for d in dims})
    if len(out) != len(dims):
        raise ValueError(f"{name}: repeated dim in {dim!r}")
    if ndim == 0:
        return ()
    return tuple(out)


def cast(t, dtype):
    if t._dtype is dtype:
        return t
    data = t._device.backend.execute(Op.CAST, t._data, shape=t._data.shape, dtype=dtype)
    return wrap(data, t._device, dtype)


def elementwise(op, *args):
    """Run elementwise ``op`` over tensors and Python scalars, with broadcasting."""
    tensors = [a for a in args if isinstance(a, _tensor_cls)]
    first = tensors[0]
    device = first._device
    if len(tensors) > 1:
        same_device(op, tensors)
    # dtype the op computes in
    dtype = first._dtype
    for t in tensors[1:]:
        if t._dtype is not dtype:
            dtype = dt.promote(dtype, t._dtype)
    if len(tensors) < len(args):
        for a in args:
            if not isinstance(a, _tensor_cls):
                sd = dt.scalar_dtype(a, dtype)
                if sd is not dtype:
                    dtype = dt.promote(dtype, sd)
    if op is Op.WHERE:  # the condition keeps its bool dtype
        return _where(args, device)
    if dtype.kind not in op.kinds:
        bad = next((t for t in tensors if t._dtype.kind not in op.kinds), first)
        check_kind(op_name(op), op, bad)
        check_kind(op_name(op), op, wrap(None, device, dtype))
    if op.result is FLOAT and dtype.kind is not dt.Float:
        dtype = dt.float64
    out_dtype = dt.bool_ if op.result is BOOL else dtype
    # shapes
    shape = first._data.shape
    for t in tensors[1:]:
        if t._data.shape != shape:
            shape = broadcast_shapes(op_name(op), *(t._data.shape for t in tensors))
            break
    backend = device.backend
    inputs = [backend.execute(Op.FULL, shape=(), value=a, dtype=dtype)
              if not isinstance(a, _tensor_cls) else cast(a, dtype)._data for a in args]
    data = backend.execute(op, *inputs, shape=shape, dtype=out_dtype)
    return wrap(data, device, out_dtype)


def _where(args, device):
    cond, a, b = args
    if not isinstance(cond, _tensor_cls) or cond._dtype is not dt.bool_:
        raise TypeError("where: the condition must be a Bool tensor")
    vals = [x for x in (a, b) if isinstance(x, _tensor_cls)]
    if not vals:
        raise TypeError("where: at least one of the values must be a tensor")
    dtype = vals[0]._dtype if len(vals) == 1 else dt.promote(vals[0]._dtype, vals[1]._dtype)
    for x in (a, b):
        if not isinstance(x, _tensor_cls):
            sd = dt.scalar_dtype(x, dtype)
            if sd is not dtype:
                dtype = dt.promote(dtype, sd)
    shape = broadcast_shapes("where", *(x._data.shape for x in (cond, *vals)))
    backend = device.backend
    inputs = [cond._data] + [cast(x, dtype)._data if isinstance(x, _tensor_cls)
                             else backend.execute(Op.FULL, shape=(), value=x, dtype=dtype)
                             for x in (a, b)]
    return wrap(backend.execute(Op.WHERE, *inputs, shape=shape, dtype=dtype), device, dtype)


def execute(op, t, *more, **params):
    """Run a non-elementwise op on ``t``; the result has ``params["dtype"]`` or t's dtype."""
    data = t._device.backend.execute(op, t._data, *more, **params)
    return wrap(data, t._device, params.get("dtype") or t._dtype)
