"""The one dispatch path: every op goes through here on its way to a backend.

It checks kinds and devices, promotes dtypes (numpy rules), broadcasts shapes and
normalises dims, so that the layers below receive only valid calls; errors are raised
here, in Python, naming the op and the offending shapes or kinds.  Then ``_apply`` joins
the inputs' devices, hands the op to the planning layer (``ember.fusion``: defer an
elementwise op, fuse a reduction with its pending input, or run it on the device's
backend) and wraps the result.  Autodiff is a hook at this seam: a float result of a
tracked input is recorded by ``ember.autograd.graph.record``.  Quantized inputs take one
detour (``_apply_quantized``): their storage algebra lives in ``ember.quant``.
"""
import math
import operator

import numpy as np

from . import backends
from . import dtypes as dt
from . import fusion
from . import quant
from .device import DeviceError, StrategyError
from .ir import BOOL, FLOAT, TO_COMPLEX, TO_REAL, Op
from .storage import TensorBase, make

prod = math.prod


_OP_NAMES = {}


def op_name(op):
    """The user-facing name of an IR op, for error messages (``Op.ANY_`` -> "any")."""
    if not isinstance(op, Op):
        return op
    name = _OP_NAMES.get(op)   # (an Enum's ``name`` is a slow Python property)
    if name is None:
        name = _OP_NAMES[op] = op.name.lower().rstrip("_")
    return name


def check_kind(name, op, t):
    if t._dtype.kind not in op.kinds:
        allowed = " or ".join(sorted(k.name for k in op.kinds))
        raise TypeError(f"{name}: expected a {allowed} tensor, got {t._dtype.kind.name} ({t._dtype.name})")


def same_device(name, tensors):
    """The tensors' common device; ``name`` is an op name or an ``Op``."""
    dev = tensors[0]._device
    for t in tensors[1:]:
        if t._device != dev:
            raise DeviceError(f"{op_name(name)}: tensors are on different devices ({dev} and {t._device})")
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
                raise ValueError(f"{op_name(name)}: shapes {' and '.join(str(tuple(x)) for x in shapes)} "
                                 f"cannot be broadcast together")
    return tuple(out)


def normalize_dim(name, dim, ndim):
    if type(dim) is not int:
        dim = _as_dim(name, dim)
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{name}: dim {dim} is out of range for a tensor with {ndim} dims")
    return dim % n


def normalize_dims(name, dim, ndim):
    """``None`` -> all dims; an int or a tuple -> sorted tuple of distinct dims."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (tuple, list)):
        dims = tuple(dim)
    else:
        dims = (_as_dim(name, dim),)
    out = sorted({normalize_dim(name, d, ndim) for d in dims})
    if len(out) != len(dims):
        raise ValueError(f"{name}: repeated dim in {dim!r}")
    if ndim == 0:
        return ()
    return tuple(out)


def _as_dim(name, dim):
    """A dim given as any integer (``np.int64(1)``, a one-element Int tensor) as an int;
    TypeError naming the op for anything else (floats, bools, strings)."""
    if not isinstance(dim, (bool, np.bool_)):
        try:
            return operator.index(dim)
        except TypeError:
            pass
    raise TypeError(f"{name}: dim must be an int or a tuple of ints, got {dim!r}")


def check_index_range(name, index, size, dim=None, what="index", error=IndexError):
    """IndexError naming ``name`` when a value of Int tensor ``index`` lies outside
    ``[0, size)``: the one data-dependent check of the indexing ops, made here before any
    backend runs them (a min and a max reduction of the index, and a read of both).  Inside a
    traced ``ember.compile`` step the read becomes a check of the step, made at every replay."""
    if index.numel() == 0:
        return
    check = RangeCheck(name, size, dim, what, error)
    rec = backends.recorder()
    if rec is None and index._device.type == "cpu":
        # the host's own array (no copy): numpy's min and max, ~2 us each against ~50 us for
        # two reductions and two reads through the ops
        values = index._host("an index check")
        check(values.min(), values.max())
        return
    lo, hi = index.min(), index.max()
    if rec is not None:
        rec.check(lo._device.backend, (lo._data, hi._data), check)
    else:
        check(lo.item(), hi.item())


class RangeCheck:
    """``check(lo, hi)`` raises unless ``bounds[0] <= lo`` and ``hi < bounds[1]`` (an index's
    least and greatest values; ``bounds`` is ``(0, size)``).  A compiled step's tape makes
    the comparison itself and calls the check only to raise its error."""

    __slots__ = ("name", "size", "dim", "what", "error")

    def __init__(self, name, size, dim, what, error):
        self.name, self.size, self.dim, self.what, self.error = name, size, dim, what, error

    @property
    def bounds(self):
        return 0, self.size

    def __call__(self, lo, hi):
        if lo < 0 or hi >= self.size:
            size, dim = self.size, self.dim
            where = f"for dim {dim} of size {size}" if dim is not None else f"[0, {size})"
            raise self.error(f"{self.name}: {self.what} {lo if lo < 0 else hi} is out of range "
                             f"{where}")


def cast(t, dtype):
    if t._dtype is dtype:
        return t
    if t._dtype.kind is dt.Complex and dtype.kind is not dt.Complex:
        # complex -> real keeps the real part, as numpy's astype (without its warning);
        # -> bool is ``!= 0``.  Two ops, so autodiff and the kernels see only real casts
        if dtype is dt.bool_:
            return elementwise(Op.NE, t, 0)
        t = elementwise(Op.REAL, t)
        if t._dtype is dtype:
            return t
    return _apply(Op.CAST, (t,), t._buf.shape, dtype, None, None)


_CONSTANTS = {}
_CACHED_TYPES = (int, float, bool)


def constant(value, like, dtype):
    """A Python scalar as a 0-d tensor without autodiff on ``like``'s device (a constant for
    any op), of ``like``'s class.

    Tensors are values, so equal constants share one tensor: no allocation per op, and a
    fused kernel gets the repeated constants of a loop as one argument.  Floats equal to
    zero (+0.0 and -0.0 compare equal) and NaN are not shared.
    """
    device = like._device
    tv = type(value)
    if tv in _CACHED_TYPES and not (tv is float and (value == 0.0 or value != value)):
        key = (tv, value, dtype.name, device.type, device.index)
        t = _CONSTANTS.get(key)
        if t is None:
            if len(_CONSTANTS) >= 4096:
                _CONSTANTS.clear()
            t = _CONSTANTS[key] = _constant(value, like, dtype)
        return t
    return _constant(value, like, dtype)


def _constant(value, like, dtype):
    _check_scalar_range(value, dtype)
    device = like._device
    base = device.base() if device._autodiff else device
    data = device.backend.execute(Op.FULL, shape=(), value=value, dtype=dtype)
    return make(type(like), data, base, dtype)


class ScalarRangeError(OverflowError, ValueError):
    """A Python integer that the op's dtype cannot hold (``int8_tensor + 1000``).

    An ``OverflowError`` as numpy raises, and a ``ValueError`` like Ember's other bad
    arguments.  Comparisons never raise it: they compare by value (numpy 2)."""


def _check_scalar_range(value, dtype):
    """Raise ScalarRangeError (without the op's name: ``elementwise`` adds it) when ``value``
    is an integer scalar that ``dtype`` cannot hold."""
    if dtype.kind is dt.Float:
        if isinstance(value, int) and abs(value) >= 2 ** 1024:
            raise ScalarRangeError(f"Python integer {value} is too large for {dtype.name}")
        return
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        if dtype.kind is dt.Complex:
            return
        info = np.iinfo(dtype.np)
        if not info.min <= value <= info.max:
            raise ScalarRangeError(f"Python integer {value} is out of bounds for {dtype.name}")


# comparison -> the comparison with its operands swapped (``3 < t`` is ``t > 3``)
_SWAPPED = {Op.EQ: Op.EQ, Op.NE: Op.NE, Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE}


def _out_of_range(op, args, error):
    """``op`` with an integer scalar outside its dtype's range: a comparison's answer is
    known from the value alone (numpy 2 compares by value); any other op raises, naming
    the op."""
    swapped = _SWAPPED.get(op)
    tensors = [a for a in args if isinstance(a, TensorBase)]
    if swapped is None or len(args) != 2 or len(tensors) != 1 or tensors[0]._dtype.kind is dt.Float:
        # (floats: numpy raises too, and NaN would make "by value" more than a constant)
        raise ScalarRangeError(f"{op_name(op)}: {error}") from None
    t = tensors[0]
    value = args[1] if args[0] is t else args[0]
    if args[0] is not t:
        op = swapped
    above = value > 0      # beyond the maximum (else below the minimum)
    result = {Op.EQ: False, Op.NE: True, Op.LT: above, Op.LE: above,
              Op.GT: not above, Op.GE: not above}[op]
    data = t._device.backend.execute(Op.FULL, shape=t._buf.shape, value=bool(result), dtype=dt.bool_)
    return make(type(t), data, t._device, dt.bool_)


def promote_args(tensors, args):
    """The dtype ``tensors`` and the weak Python scalars among ``args`` compute in (numpy's rules)."""
    dtype = tensors[0]._dtype
    for t in tensors[1:]:
        if t._dtype is not dtype:
            dtype = dt.promote(dtype, t._dtype)
    if len(tensors) < len(args):
        for a in args:
            if not isinstance(a, TensorBase):
                sd = dt.scalar_dtype(a, dtype)
                if sd is not dtype:
                    dtype = dt.promote(dtype, sd)
    return dtype


# --- elementwise ops ------------------------------------------------------------------------
# The promotion and kind decisions of ``elementwise``, made once per signature: (op, dtype
# name of each tensor or type of each Python scalar, in order) -> (dtype the op computes in,
# result dtype), or () where ``_elementwise_checked`` decides (quantized operands, numpy
# scalars, and kinds the op refuses: it raises there).  Per-op overhead on small tensors: no
# promotion, kind check or list building per call.
_PLANS = {}
_SCALARS = frozenset((int, float, bool, complex))


def _plan(key, op, args):
    plan = ()
    tensors = [a for a in args if isinstance(a, TensorBase)]
    if not any(t._dtype.quantized for t in tensors):
        dtype = promote_args(tensors, args)
        if dtype.kind in op.kinds:
            plan = _result(op, dtype)
    _PLANS[key] = plan
    return plan


def _result(op, dtype):
    """(dtype ``op`` computes in, result dtype) for operands promoted to ``dtype``."""
    result = op.result
    if result is FLOAT and (dtype.kind is dt.Int or dtype.kind is dt.Bool):
        dtype = dt.float64
    if result is BOOL:
        return dtype, dt.bool_
    if result is TO_REAL:
        return dtype, dt.real_of(dtype)
    if result is TO_COMPLEX:
        return dtype, dt.complex_of(dtype)
    return dtype, dtype


def elementwise(op, *args):
    """Run elementwise ``op`` over tensors and Python scalars, with numpy's broadcasting and
    promotion (Python scalars are weak)."""
    # The three common signatures, each written out (per-op overhead: no loop, list or
    # class-set test per call): tensor (op) tensor, tensor (op) scalar, one tensor; scalar
    # (op) tensor; anything else, or a signature without a plan, takes ``_elementwise_checked``.
    if len(args) == 2:
        a, b = args
        if isinstance(a, TensorBase):
            if isinstance(b, TensorBase):
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
            elif type(b) in _SCALARS:
                out = _with_scalar(op, args, a, b, (op, a._dtype.name, type(b)))
                if out is not None:
                    return out
        elif isinstance(b, TensorBase) and type(a) in _SCALARS:
            out = _with_scalar(op, args, b, a, (op, type(a), b._dtype.name))
            if out is not None:
                return out
    elif len(args) == 1:
        a = args[0]
        if isinstance(a, TensorBase):
            key = (op, a._dtype.name)
            plan = _PLANS.get(key)
            if plan is None:
                plan = _plan(key, op, args)
            if plan:
                if a._dtype is not plan[0]:
                    a = cast(a, plan[0])
                return _apply(op, (a,), a._buf.shape, plan[1], None, None)
    return _elementwise_checked(op, args)


def _with_scalar(op, args, t, scalar, key):
    """``elementwise`` of tensor ``t`` and Python number ``scalar`` (``args`` in the user's
    order) by the plan of ``key``, or None when the signature has no plan."""
    plan = _PLANS.get(key)
    if plan is None:
        plan = _plan(key, op, args)
    if not plan:
        return None
    dtype = plan[0]
    try:
        c = constant(scalar, t, dtype)
    except ScalarRangeError as e:
        return _out_of_range(op, args, e)
    if t._dtype is not dtype:
        t = cast(t, dtype)
    return _apply(op, (t, c) if scalar is args[1] else (c, t), t._buf.shape, plan[1], None,
                  None)


def _elementwise_checked(op, args):
    """``elementwise`` for the signatures without a plan: checks kinds (raising), promotes
    and broadcasts."""
    args = _numpy_operands(args)
    if op is Op.WHERE:  # the condition keeps its bool dtype
        return _where(*args)
    tensors = [a for a in args if isinstance(a, TensorBase)]
    if not tensors:
        raise TypeError(f"{op_name(op)}: expected a tensor, got "
                        f"{', '.join(type(a).__name__ for a in args)}")
    first = tensors[0]
    try:
        dtype = promote_args(tensors, args)
    except TypeError as e:   # an operand that is neither a tensor nor a number
        raise TypeError(f"{op_name(op)}: {e}") from None
    if dtype.kind not in op.kinds:
        bad = next((t for t in tensors if t._dtype.kind not in op.kinds), first)
        check_kind(op_name(op), op, bad)
        check_kind(op_name(op), op, make(type(first), None, first._device, dtype))
    dtype, out_dtype = _result(op, dtype)
    shape = broadcast_shapes(op, *(t._buf.shape for t in tensors))
    try:
        inputs = _operands(args, dtype, first)
    except ScalarRangeError as e:
        return _out_of_range(op, args, e)
    return _apply(op, inputs, shape, out_dtype, None, None)


def _operands(args, dtype, like):
    """Tensors cast to ``dtype``, Python scalars as 0-d constants on ``like``'s device."""
    return [cast(a, dtype) if isinstance(a, TensorBase) else constant(a, like, dtype)
            for a in args]


def _numpy_operands(args):
    """numpy arrays among ``args`` as tensors (of their dtype) on the first tensor's device, as
    PyTorch and JAX take them (without a tensor, ``args`` as they are)."""
    device = None
    arrays = False
    for a in args:
        if isinstance(a, TensorBase):
            if device is None:
                device = a._device
        elif isinstance(a, np.ndarray):
            arrays = True
    if device is None or not arrays:
        return args
    from .creation import tensor
    base = device.base() if device._autodiff else device
    return tuple(tensor(a, device=base) if isinstance(a, np.ndarray) else a for a in args)


def _where(cond, a, b):
    if not isinstance(cond, TensorBase) or cond._dtype is not dt.bool_:
        raise TypeError("where: the condition must be a Bool tensor")
    vals = [x for x in (a, b) if isinstance(x, TensorBase)]
    if not vals:
        raise TypeError("where: at least one of the values must be a tensor")
    try:
        dtype = promote_args(vals, (a, b))
    except TypeError as e:
        raise TypeError(f"where: {e}") from None
    shape = broadcast_shapes("where", *(x._buf.shape for x in (cond, *vals)))
    try:
        inputs = _operands((a, b), dtype, cond)
    except ScalarRangeError as e:
        raise ScalarRangeError(f"where: {e}") from None
    return _apply(Op.WHERE, (cond, *inputs), shape, dtype, None, None)


# --- every op ---------------------------------------------------------------------------------
def apply(op, *inputs, out_dtype=None, **params):
    """Run IR op ``op`` on tensors ``inputs`` with static ``params``; every op ends here.

    The result's dtype is ``out_dtype`` (a tuple for ops with several results), else
    ``params["dtype"]``, else the first input's.  Tensors without autodiff combined with
    autodiff ones are constants; the result is autodiff-enabled when any input is, and an
    autodiff node is recorded when any input is tracked and the result is a float tensor.
    """
    if op in fusion.FUSABLE:
        return _apply(op, inputs, params["shape"], params["dtype"], params, None)
    return _apply(op, inputs, None, None, params, out_dtype)


def _apply(op, inputs, shape, dtype, params, out_dtype):
    # ``apply`` with an elementwise op's ``shape`` and ``dtype`` positional (else None), and
    # ``params`` None when ``elementwise`` calls it: the dict an autodiff step keeps is then
    # built only for a tracked result (per-op overhead: no keyword dict per call).  Every
    # argument is passed: defaults cost ~15 ns a call.
    device = out_device = inputs[0]._device
    tracked = quantized = False
    for t in inputs:
        d = t._device
        # (a constant: the same place without autodiff leaves the result's device as it is)
        if d is not device and (d._autodiff or d.type != device.type or d.index != device.index):
            out_device = _join_devices(op, device, out_device, d)
        if t._node is not None:
            tracked = True
        if t._dtype.quantized:
            quantized = True
    if quantized:
        return _apply_quantized(op, inputs, shape, dtype, params, out_dtype, out_device)
    if shape is not None:   # elementwise
        data = fusion.elementwise(op, inputs, shape, dtype, device)
        out_dtype = dtype
        if params is None and tracked:
            params = {"shape": shape, "dtype": dtype}
    else:
        data = fusion.run(op, inputs, params, device)
        if out_dtype is None:
            out_dtype = params.get("dtype") or inputs[0]._dtype
    cls = type(inputs[0])
    if type(data) is tuple:
        out = tuple(make(cls, x, out_device, d) for x, d in zip(data, out_dtype))
        if tracked and out_dtype[0].kind in _RECORDED:
            _record(op, inputs, params, out)
        return out
    out = cls()   # make(), inlined
    out._buf = data
    out._device = out_device
    out._dtype = out_dtype
    out._node = None
    if tracked and out_dtype.kind in _RECORDED:
        _record(op, inputs, params, out)
    return out


_RECORDED = frozenset((dt.Float, dt.Complex))   # the kinds that take gradients


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


def _record(op, inputs, params, out):
    # The autodiff seam: the first tracked result loads ember.autograd's recorder, which is
    # then called directly (the engine imports autograd here and nowhere else; a tensor is
    # only tracked once ``require_grad`` loaded it anyway).
    global _record
    from ember.autograd.graph import record
    _record = record
    record(op, inputs, params, out)


# --- quantized inputs (DESIGN §5; the storage algebra is ember.quant's) -------------------------
def _apply_quantized(op, inputs, shape, dtype, params, out_dtype, out_device):
    """An op with a quantized input: layout ops move the integer values and scales (or, when
    blocks would split, move dequantized values and quantize again), matmul runs the
    quantized kernels, every other op computes on dequantized values and returns float
    (re-quantized with the input's scheme under ``set_quant_propagation("propagate")``)."""
    if params is None:
        params = {"shape": shape, "dtype": dtype}
    first = inputs[0]
    if op in quant.MOVES and type(first._buf) is quant.QuantData:
        qd = quant.move(op, inputs, params)
        if qd is not None:
            return make(type(first), qd, out_device, quant.qfloat(qd.scheme))
        scheme = first._dtype.scheme
        floats = [quant.as_float(t) for t in inputs]
        if "dtype" in params:
            params = dict(params, dtype=dt.float32)
        return quant.requantize(apply(op, *floats, **params), scheme)
    scheme = next(t._dtype.scheme for t in inputs if t._dtype.quantized)
    if op is Op.MATMUL:
        a, b = inputs
        if type(a._buf) is quant.QuantData and type(b._buf) is quant.QuantData:
            a = quant.as_float(a)   # one operand runs quantized: the right one (usually weights)
        data, out_dtype = quant.matmul(a, b)
        out = make(type(first), data, out_device, out_dtype)
        if any(t._node is not None for t in inputs):
            _record(Op.MATMUL, inputs, params, out)   # backward reads the quantized operand
    elif op is Op.CAST:   # dequantizing is the cast to float32; another dtype casts on from there
        x = quant.as_float(first)
        out = x if params["dtype"] is x._dtype else cast(x, params["dtype"])
        return out
    else:
        floats = [quant.as_float(t) for t in inputs]
        if "dtype" in params:
            params = dict(params, dtype=_float_dtype(params["dtype"]))
        if type(out_dtype) is tuple:
            out_dtype = tuple(_float_dtype(d) for d in out_dtype)
        else:
            out_dtype = _float_dtype(out_dtype)
        out = apply(op, *floats, out_dtype=out_dtype, **params)
    return quant.requantize(out, scheme) if quant.propagating() else out


def _float_dtype(d):
    return dt.float32 if d is not None and d.quantized else d
