"""The one dispatch path: every op goes through here on its way to a backend.

It checks kinds and devices, promotes dtypes (numpy rules), broadcasts shapes
and normalises dims, then hands one IR op to the device's backend.  Errors are
raised here, in Python, naming the op and the offending shapes or kinds, so no
Numba typing error ever reaches the user.  Autodiff and fusion wrap this seam:
with fusion on, ``apply`` defers elementwise ops (``ember.fusion``) instead of
running them.
"""
import math

from numpy import ndarray as _ndarray

from . import dtypes as dt
from . import fusion
from .device import DeviceError, StrategyError
from .device import parse as parse_device  # noqa: F401  (used by Tensor.to)
from .fusion import Deferred
from .ir import BOOL, FLOAT, Op

prod = math.prod

_tensor_cls = None  # ember.Tensor, set by tensor.py (avoids an import cycle)


def op_name(op):
    """The user-facing name of an IR op, for error messages (``Op.ANY_`` -> "any")."""
    return op.name.lower().rstrip("_")


def wrap(data, device, dtype, node=None):
    """A new Tensor around backend storage ``data`` (an array, or a deferred ``fusion`` node)."""
    # (Tensor has no __init__: calling the class is the cheapest way to make one, ~14 ns
    # less than object.__new__(Tensor))
    t = _tensor_cls()
    t._buf = data
    t._device = device
    t._dtype = dtype
    t._node = node
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
    """numpy broadcasting; ValueError naming the op (a name or an ``Op``) and the shapes."""
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        off = ndim - len(s)
        for i, n in enumerate(s):
            o = out[off + i]
            if o == 1:
                out[off + i] = n
            elif n != 1 and n != o:
                name = op_name(name) if isinstance(name, Op) else name
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
    return apply(Op.CAST, t, shape=t._buf.shape, dtype=dtype)


_CONSTANTS = {}
_CACHED_TYPES = (int, float, bool)


def constant(value, device, dtype):
    """A Python scalar as a 0-d tensor without autodiff (a constant for any op).

    Tensors are values, so equal constants share one tensor: no allocation per op, and a
    fused kernel gets the repeated constants of a loop as one argument.  Floats equal to
    zero (+0.0 and -0.0 compare equal) and NaN are not shared.
    """
    tv = type(value)
    if tv in _CACHED_TYPES and not (tv is float and (value == 0.0 or value != value)):
        key = (tv, value, dtype.name, device.type, device.index)
        t = _CONSTANTS.get(key)
        if t is None:
            if len(_CONSTANTS) >= 4096:
                _CONSTANTS.clear()
            t = _CONSTANTS[key] = _constant(value, device, dtype)
        return t
    return _constant(value, device, dtype)


def _constant(value, device, dtype):
    base = device.base() if device._autodiff else device
    return wrap(device.backend.execute(Op.FULL, shape=(), value=value, dtype=dtype), base, dtype)


def promote_args(tensors, args):
    """The dtype ``tensors`` and the weak Python scalars among ``args`` compute in (numpy's rules)."""
    dtype = tensors[0]._dtype
    for t in tensors[1:]:
        if t._dtype is not dtype:
            dtype = dt.promote(dtype, t._dtype)
    if len(tensors) < len(args):
        for a in args:
            if not isinstance(a, _tensor_cls):
                sd = dt.scalar_dtype(a, dtype)
                if sd is not dtype:
                    dtype = dt.promote(dtype, sd)
    return dtype


def operands(args, dtype, device):
    """Tensors cast to ``dtype``, Python scalars as 0-d constants on ``device``."""
    return [cast(a, dtype) if isinstance(a, _tensor_cls) else constant(a, device, dtype)
            for a in args]


# The promotion and kind decisions of ``elementwise``, made once per signature of its
# operands: (op, dtype name of each tensor or type of each Python scalar, in order) ->
# (dtype the op computes in, result dtype), or () where the general path decides: quantized
# operands, and kinds the op refuses (it raises there).  Only calls with one or two
# operands, tensors and int, float or bool scalars, have a signature.  Per-op overhead on
# small tensors: no promotion, kind check or list building per call.
_PLANS = {}
_SCALARS = frozenset((int, float, bool))


def _plan(key, op, args):
    plan = ()
    tensors = [a for a in args if isinstance(a, _tensor_cls)]
    if not any(t._dtype.quantized for t in tensors):
        dtype = promote_args(tensors, args)
        if dtype.kind in op.kinds:
            if op.result is FLOAT and dtype.kind is not dt.Float:
                dtype = dt.float64
            plan = (dtype, dt.bool_ if op.result is BOOL else dtype)
    _PLANS[key] = plan
    return plan


def elementwise(op, *args):
    """Run elementwise ``op`` over tensors and Python scalars, with broadcasting."""
    if len(args) == 2:
        a, b = args
        if type(a) is _tensor_cls:
            if type(b) is _tensor_cls:                       # tensor (op) tensor
                key = (op, a._dtype.name, b._dtype.name)
                plan = _PLANS.get(key)
                if plan is None:
                    plan = _plan(key, op, args)
                if plan:
                    sa = a._buf.shape
                    sb = b._buf.shape
                    if sa == sb or not sb:
                        shape = sa
                    elif not sa:
                        shape = sb
                    else:
                        shape = broadcast_shapes(op, sa, sb)
                    dtype = plan[0]
                    if a._dtype is not dtype:
                        a = cast(a, dtype)
                    if b._dtype is not dtype:
                        b = cast(b, dtype)
                    return _apply(op, (a, b), shape, plan[1], None, None)
            elif type(b) in _SCALARS:                        # tensor (op) scalar
                key = (op, a._dtype.name, type(b))
                plan = _PLANS.get(key)
                if plan is None:
                    plan = _plan(key, op, args)
                if plan:
                    dtype = plan[0]
                    c = constant(b, a._device, dtype)
                    if a._dtype is not dtype:
                        a = cast(a, dtype)
                    return _apply(op, (a, c), a._buf.shape, plan[1], None, None)
        elif type(b) is _tensor_cls and type(a) in _SCALARS:  # scalar (op) tensor
            key = (op, type(a), b._dtype.name)
            plan = _PLANS.get(key)
            if plan is None:
                plan = _plan(key, op, args)
            if plan:
                dtype = plan[0]
                c = constant(a, b._device, dtype)
                if b._dtype is not dtype:
                    b = cast(b, dtype)
                return _apply(op, (c, b), b._buf.shape, plan[1], None, None)
    elif len(args) == 1:
        a = args[0]
        if type(a) is _tensor_cls:
            key = (op, a._dtype.name)
            plan = _PLANS.get(key)
            if plan is None:
                plan = _plan(key, op, args)
            if plan:
                if a._dtype is not plan[0]:
                    a = cast(a, plan[0])
                return _apply(op, (a,), a._buf.shape, plan[1], None, None)
    args = _numpy_operands(op, args)
    if op is Op.WHERE:  # the condition keeps its bool dtype
        return _where(*args)
    tensors = [a for a in args if isinstance(a, _tensor_cls)]
    first = tensors[0]
    dtype = promote_args(tensors, args)
    if dtype.kind not in op.kinds:
        bad = next((t for t in tensors if t._dtype.kind not in op.kinds), first)
        check_kind(op_name(op), op, bad)
        check_kind(op_name(op), op, wrap(None, first._device, dtype))
    if op.result is FLOAT and dtype.kind is not dt.Float:
        dtype = dt.float64
    out_dtype = dt.bool_ if op.result is BOOL else dtype
    shape = first._buf.shape
    for t in tensors[1:]:
        if t._buf.shape != shape:
            shape = broadcast_shapes(op, *(t._buf.shape for t in tensors))
            break
    return apply(op, *operands(args, dtype, first._device), shape=shape, dtype=out_dtype)


def _numpy_operands(op, args):
    """numpy arrays among ``args`` as tensors (of their dtype) on the first tensor's device, as
    PyTorch and JAX take them; TypeError without any tensor."""
    device = None
    arrays = False
    for a in args:
        if isinstance(a, _tensor_cls):
            if device is None:
                device = a._device
        elif isinstance(a, _ndarray):
            arrays = True
    if device is None:
        kinds = ", ".join(type(a).__name__ for a in args)
        raise TypeError(f"{op_name(op)}: expected at least one tensor, got {kinds}")
    if not arrays:
        return args
    from .creation import tensor
    base = device.base() if device._autodiff else device
    return tuple(tensor(a, device=base) if isinstance(a, _ndarray) else a for a in args)


def _where(cond, a, b):
    if not isinstance(cond, _tensor_cls) or cond._dtype is not dt.bool_:
        raise TypeError("where: the condition must be a Bool tensor")
    vals = [x for x in (a, b) if isinstance(x, _tensor_cls)]
    if not vals:
        raise TypeError("where: at least one of the values must be a tensor")
    dtype = promote_args(vals, (a, b))
    shape = broadcast_shapes("where", *(x._buf.shape for x in (cond, *vals)))
    return apply(Op.WHERE, cond, *operands((a, b), dtype, cond._device), shape=shape, dtype=dtype)


# reductions that fusion runs together with a pending elementwise input (fusion.reduce_deferred)
_FUSED_REDUCTIONS = frozenset((Op.SUM, Op.PROD, Op.MAX, Op.MIN))

# Set by ember.autograd when it is first imported: record(op, inputs, params, out).
record = None


def apply(op, *inputs, out_dtype=None, **params):
    """Run IR op ``op`` on tensors ``inputs`` through their device's backend.

    Every op ends here.  The result's dtype is ``out_dtype`` (a tuple for ops
    with several results), else ``params["dtype"]``, else the first input's.
    Tensors without autodiff combined with autodiff ones are constants; the
    result is autodiff-enabled when any input is, and an autodiff node is
    recorded when any input is tracked and the result is a float tensor.
    """
    if op in fusion.FUSABLE:
        return _apply(op, inputs, params["shape"], params["dtype"], params, None)
    return _apply(op, inputs, None, None, params, out_dtype)


def _apply(op, inputs, shape, dtype, params, out_dtype):
    # ``apply``, with an elementwise op's ``shape`` and ``dtype`` positional (else None):
    # ``elementwise`` calls it so, with ``params`` None, the dict an autodiff step keeps
    # then built only for a tracked result (per-op overhead: no keyword dict per call).
    # Every argument is passed (defaults cost ~15 ns a call); an elementwise-only copy of
    # this body measured ~1 % faster on the autodiff tanh chain: one body is worth that
    device = out_device = inputs[0]._device
    tracked = False
    for t in inputs:
        d = t._device
        # (a constant: the same place without autodiff leaves the result's device as it is)
        if d is not device and (d._autodiff or d.type != device.type or d.index != device.index):
            out_device = _join_devices(op, device, out_device, d)
        if t._node is not None:
            tracked = True
        if t._dtype.quantized:   # quantized storage: engine/quant.py runs the op (DESIGN §5)
            from .quant import apply as apply_quantized
            if params is None:
                params = {"shape": shape, "dtype": dtype}
            return apply_quantized(op, inputs, out_dtype, params)
    if shape is not None:
        # an elementwise op: fusion defers it, except an output of fewer than MIN_SIZE
        # elements, which it runs at once: decided here, without the call, for the small
        # ops that are most sensitive to per-op overhead
        if fusion.ENABLED and prod(shape) >= fusion.MIN_SIZE:
            data = fusion.defer(op, inputs, shape, dtype, device)
        else:
            if len(inputs) == 2:   # their storage, as Tensor._data reads it (no deferred one here)
                x = inputs[0]._buf
                y = inputs[1]._buf
                if type(x) is Deferred:
                    x = inputs[0]._data
                if type(y) is Deferred:
                    y = inputs[1]._data
                arrays = (x, y)
            else:
                arrays = [t._data for t in inputs]
            backend = device._backend or device.backend
            run = getattr(backend, "elementwise", None)   # the positional entry, where there is one
            if run is not None:
                data = run(op, arrays, shape, dtype)
            else:
                data = backend.execute(op, *arrays, shape=shape, dtype=dtype)
        out_dtype = dtype
        if params is None and tracked:
            params = {"shape": shape, "dtype": dtype}
    elif op in _FUSED_REDUCTIONS and type(inputs[0]._buf) is Deferred:
        data = fusion.reduce_deferred(op, inputs[0], params)   # computes the chain as it reduces
    else:
        data = device.backend.execute(op, *[t._data for t in inputs], **params)
    if out_dtype is None:
        out_dtype = params.get("dtype") or inputs[0]._dtype
    if type(data) is tuple:
        outs = tuple(wrap(x, out_device, d) for x, d in zip(data, out_dtype))
        if tracked and out_dtype[0].kind is dt.Float:
            record(op, inputs, params, outs)
        return outs
    out = _tensor_cls()   # wrap(), inlined
    out._buf = data
    out._device = out_device
    out._dtype = out_dtype
    out._node = None
    if tracked and out_dtype.kind is dt.Float:
        record(op, inputs, params, out)
    return out


def _join_devices(op, first, out_device, d):
    """The result device of an op whose inputs so far are on ``first`` and give
    ``out_device``, given one more input on ``d``: the same device is required, the first
    autodiff one wins, and autodiff inputs must share their checkpointing strategy."""
    if d.type != first.type or d.index != first.index:   # (d != first, without the call)
        raise DeviceError(f"{op_name(op)}: tensors are on different devices ({first} and {d})")
    if d._autodiff:
        if not out_device._autodiff:
            return d
        if d.checkpointing is not out_device.checkpointing:
            raise StrategyError(
                f"{op_name(op)}: tensors use different checkpointing strategies "
                f"({out_device.checkpointing.name} and {d.checkpointing.name})")
    return out_device
