"""Quantized tensors (DESIGN §5): schemes, their storage, and every op on them.

A quantized tensor is an ordinary ``Tensor`` whose dtype is a ``QFloat`` (kind Float,
carrying its ``QuantScheme``) and whose storage is a ``QuantData``: integer values and
float32 scales.  Symmetric quantization with the value range ``[a, b]``::

    scale = 2 * max(|min|, |max|) / (b - a)        (per tensor, or per block)
    q     = clamp(round_half_away_from_zero(x / scale), a, b)
    x_hat = scale * q                               (float32)

A zero range gets the scale FLT_MIN (1.1754944e-38, the smallest normal float32), so every
``q`` is 0 and nothing is divided by zero.

Storage.  NATIVE keeps one int8 per value, in the tensor's shape.  PACKED_U32 packs
``32 // bits`` values per uint32 word along the innermost dim, the first value in the lowest
bits (two's complement fields), each row padded to whole words with zero bits: the values
array has shape ``shape[:-1] + (ceil(shape[-1] / (32 // bits)),)`` (a 0-d tensor: one word).
Scales have shape ``()`` per tensor, else one per block: ``block_size=[n]`` gives
``shape[:-1] + (ceil(C / n),)``, ``[m, n]`` gives ``shape[:-2] + (ceil(R / m), ceil(C / n))``
(partial blocks at the ends have their own scale).

Ops (``dispatch.apply`` sends every op with a quantized input to ``apply`` here):

- movement (reshape, permute, expand, slicing, flip, contiguous, index_select, gather, cat)
  moves the integer values and keeps the scale, or moves the scales along when whole blocks
  move with the values (``x.T`` of blocks ``[16]`` is blocks ``[16, 1]``: the scheme follows
  the blocks).  Otherwise (blocks split or mixed, ``cat`` of tensors with different
  per-tensor scales) the values are dequantized, moved and re-quantized with the same scheme,
  which changes them; a result too small for the scheme's blocks stays float.
- matmul with a quantized operand on either side runs the quantized matmul kernels, which
  dequantize tiles of it as they go (never the whole matrix).
- every other op dequantizes, computes in float and returns float; with
  ``set_quant_propagation("propagate")`` Float results are re-quantized with the (first)
  quantized input's scheme.  Casts (also the ones numpy promotion inserts when a quantized
  tensor meets a float tensor) always give float.

Autodiff: quantized tensors never take part in a graph (``quantize`` detaches, results of
movement have no node); a float op output of a tracked input records as usual, keeping the
quantized operand itself (not a dequantized copy) when backward needs it.
"""
import enum
import functools
import math
import numbers
from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import dispatch
from . import dtypes as dt
from .device import DeviceError, StrategyError
from .ir import Op


# --- schemes -------------------------------------------------------------------------------
class QuantValue(enum.Enum):
    """The integer value types: bits and range ``[lo, hi]`` (S: symmetric, F: full range)."""

    Q8S = (8, -127, 127)
    Q8F = (8, -128, 127)
    Q4S = (4, -7, 7)
    Q4F = (4, -8, 7)
    Q2S = (2, -1, 1)
    Q2F = (2, -2, 1)

    def __init__(self, bits, lo, hi):
        self.bits = bits
        self.lo = lo
        self.hi = hi

    @property
    def half_range(self):
        """``(b - a) / 2``: ``scale = max|x| / half_range`` (exact in float32)."""
        return (self.hi - self.lo) / 2

    def __repr__(self):
        return f"QuantValue.{self.name}"


class QuantStore(enum.Enum):
    """How the integer values are stored: NATIVE (one int8 each) or PACKED_U32 (in uint32 words)."""

    NATIVE = "native"
    PACKED_U32 = "packed_u32"

    def __repr__(self):
        return f"QuantStore.{self.name}"


@dataclass(frozen=True)
class QuantScheme:
    """How to quantize: value type, block size and storage.

    ``block_size=None`` is one scale per tensor, ``[n]`` one scale per ``n`` values along the
    last dim, ``[m, n]`` one per ``m x n`` tile of the last two dims.  Values under 8 bits need
    ``store=QuantStore.PACKED_U32``.

    >>> s = ember.QuantScheme(ember.QuantValue.Q4S, [32], ember.QuantStore.PACKED_U32)
    >>> q = ember.random.normal((64, 64)).quantize(s)
    >>> q.quantization_scales().shape
    (64, 2)
    """

    value: QuantValue
    block_size: Optional[tuple] = None
    store: QuantStore = QuantStore.NATIVE

    def __post_init__(self):
        if not isinstance(self.value, QuantValue):
            raise ValueError(f"QuantScheme: value must be a QuantValue (Q8S, Q8F, Q4S, Q4F, Q2S, Q2F), "
                             f"got {self.value!r}")
        if not isinstance(self.store, QuantStore):
            raise ValueError(f"QuantScheme: store must be QuantStore.NATIVE or QuantStore.PACKED_U32, "
                             f"got {self.store!r}")
        block = self.block_size
        if block is not None:
            if isinstance(block, numbers.Integral) or not isinstance(block, (list, tuple)) \
                    or len(block) not in (1, 2) or not all(
                        isinstance(n, numbers.Integral) and not isinstance(n, bool) and n > 0 for n in block):
                raise ValueError(f"QuantScheme: block_size must be None, [n] or [m, n] with positive "
                                 f"ints, got {block!r}")
            object.__setattr__(self, "block_size", tuple(int(n) for n in block))
        if self.value.bits < 8 and self.store is not QuantStore.PACKED_U32:
            raise ValueError(f"QuantScheme: {self.value.name} has {self.value.bits}-bit values, which "
                             f"need store=QuantStore.PACKED_U32 (NATIVE keeps one int8 per value: "
                             f"8-bit values only)")

    @property
    def bits(self):
        """Bits per packed value, 0 for NATIVE (the kernels' ``bits`` argument)."""
        return self.value.bits if self.store is QuantStore.PACKED_U32 else 0

    def describe(self):
        blocks = "per-tensor" if self.block_size is None else f"block={list(self.block_size)}"
        return f"{self.value.name}, {blocks}, {self.store.name}"

    def __repr__(self):
        return (f"QuantScheme({self.value!r}, block_size="
                f"{None if self.block_size is None else list(self.block_size)}, store={self.store!r})")


@functools.cache
def qfloat(scheme):
    """The ``QFloat`` dtype of ``scheme`` (one instance per scheme)."""
    return dt.QFloat(scheme)


def extents(scheme, ndim):
    """Block extent along each of ``ndim`` dims (1 outside the blocked trailing dims)."""
    block = scheme.block_size or ()
    return (1,) * (ndim - len(block)) + block


def grid_shape(shape, scheme):
    """The shape of the scales of a tensor of ``shape``: () per tensor, else blocks per dim."""
    if scheme.block_size is None:
        return ()
    return tuple(-(-n // e) for n, e in zip(shape, extents(scheme, len(shape))))


def geometry(shape, scheme):
    """``(L, R, C, bm, bn)``: the 3-D view of ``shape`` the kernels work on, and its block.

    Blocks ``[m, n]`` see ``(prod(shape[:-2]), shape[-2], shape[-1])``; per tensor and ``[n]``
    see ``(1, prod(shape[:-1]), shape[-1])`` (per tensor: one block covering everything).
    """
    C = shape[-1] if shape else 1
    block = scheme.block_size
    if block is not None and len(block) == 2:
        return math.prod(shape[:-2]), shape[-2], C, block[0], block[1]
    R = math.prod(shape[:-1])
    if block is None:
        return 1, R, C, max(R, 1), max(C, 1)
    return 1, R, C, 1, block[0]


def grid3(shape, scheme):
    """The scales as the kernels see them: ``(L, GR, GC)`` over ``geometry``'s 3-D view."""
    if scheme.block_size is None:
        return (1, 1, 1)
    L, R, C, bm, bn = geometry(shape, scheme)
    return L, -(-R // bm), -(-C // bn)


def _check_fits(name, shape, scheme):
    if scheme.block_size is not None and len(scheme.block_size) > len(shape):
        raise ValueError(f"{name}: block_size {list(scheme.block_size)} needs a tensor with at least "
                         f"{len(scheme.block_size)} dims, got shape {tuple(shape)}")


def _fits(shape, scheme):
    return scheme.block_size is None or len(scheme.block_size) <= len(shape)


# --- propagation setting -----------------------------------------------------------------
_PROPAGATE = False


def set_quant_propagation(mode):
    """What math ops on quantized tensors return: ``"dequantize"`` (float, the default) or
    ``"propagate"`` (re-quantized with the input's scheme)."""
    global _PROPAGATE
    if mode not in ("dequantize", "propagate"):
        raise ValueError(f"set_quant_propagation: mode must be 'dequantize' or 'propagate', got {mode!r}")
    _PROPAGATE = mode == "propagate"


def get_quant_propagation():
    """``"dequantize"`` or ``"propagate"`` (see ``set_quant_propagation``)."""
    return "propagate" if _PROPAGATE else "dequantize"


# --- storage ---------------------------------------------------------------------------------
class QuantData:
    """A quantized tensor's storage: ``values`` (int8 of ``shape``, or packed uint32 words) and
    float32 ``scales`` (of ``grid_shape(shape, scheme)``), backend arrays of its device."""

    __slots__ = ("values", "scales", "shape", "scheme")

    def __init__(self, values, scales, shape, scheme):
        self.values = values
        self.scales = scales
        self.shape = tuple(shape)
        self.scheme = scheme

    @property
    def ndim(self):
        return len(self.shape)

    def __getitem__(self, index):
        # slice_assign reads ``data[index].shape``: a zero-byte stand-in of our shape answers it
        return np.broadcast_to(np.empty((), np.int8), self.shape)[index]

    def __repr__(self):
        return f"QuantData(shape={self.shape}, {self.scheme.describe()})"


def _x(device, op, *arrays, **params):
    """Run IR op ``op`` on raw backend arrays (values, scales, indices) of ``device``."""
    return device.backend.execute(op, *arrays, **params)


def _reshape(device, a, shape):
    shape = tuple(shape)
    return a if tuple(a.shape) == shape else _x(device, Op.RESHAPE, a, shape=shape)


def _kernels(device):
    """The quantization launchers of ``device``: ``kernels/cpu/quant.py`` or a CUDA ``Launcher``."""
    if device.type == "cpu":
        from ember.kernels.cpu import quant
        return quant
    return _cuda_launcher(device.backend)


@functools.cache
def _cuda_launcher(backend):
    from ember.kernels.cuda.quant import Launcher
    return Launcher(backend)


def _words_shape(shape, bits):
    if not shape:
        return (1,)
    return tuple(shape[:-1]) + (-(-shape[-1] // (32 // bits)),)


def _pack(device, ints, bits):
    """int8 values of any shape -> packed words (rows along the innermost dim)."""
    shape = tuple(ints.shape)
    C = shape[-1] if shape else 1
    rows = _reshape(device, _x(device, Op.CONTIGUOUS, ints), (math.prod(shape[:-1]), C))
    return _reshape(device, _kernels(device).pack(rows, bits), _words_shape(shape, bits))


def _ints(device, qd):
    """The int8 values of ``qd`` in its logical shape (unpacked when packed)."""
    bits = qd.scheme.bits
    if not bits:
        return qd.values
    shape = qd.shape
    C = shape[-1] if shape else 1
    words = _reshape(device, qd.values, (math.prod(shape[:-1]), _words_shape(shape, bits)[-1]))
    return _reshape(device, _kernels(device).unpack(words, C, bits), shape)


def _store(device, ints, scheme):
    return _pack(device, ints, scheme.bits) if scheme.bits else ints


def _wrap(qd, device):
    return dispatch.wrap(qd, device, qfloat(qd.scheme))


# --- quantize / dequantize ------------------------------------------------------------------
def quantize(t, scheme, scales=None):
    """``t`` quantized with ``scheme``: min-max scales, or the given ``scales``; see ``Tensor.quantize``."""
    if not isinstance(scheme, QuantScheme):
        raise TypeError(f"quantize: expected a QuantScheme, got {type(scheme).__name__}")
    if t._dtype.kind is not dt.Float:
        raise TypeError(f"quantize: expected a Float tensor, got {t._dtype.kind.name} ({t._dtype.name})")
    if t._dtype.quantized:
        t = dequantize(t)
    shape = t.shape
    _check_fits("quantize", shape, scheme)
    device = t._device
    L, R, C, bm, bn = geometry(shape, scheme)
    k = _kernels(device)
    x = _reshape(device, _x(device, Op.CONTIGUOUS, t._data), (L, R, C))
    if scales is None:
        s3, finite = k.calibrate(x, bm, bn, scheme.value.half_range)
        if not finite:
            raise ValueError("quantize: the tensor holds NaN or infinite values, which cannot be quantized")
    else:
        s3 = _reshape(device, _given_scales(scales, shape, scheme, device), grid3(shape, scheme))
    q, finite = k.quantize(x, s3, bm, bn, scheme.value.lo, scheme.value.hi, scales is not None)
    if not finite:
        raise ValueError("quantize: the tensor holds NaN or infinite values, which cannot be quantized")
    values = _store(device, _reshape(device, q, shape), scheme)
    qd = QuantData(values, _reshape(device, s3, grid_shape(shape, scheme)), shape, scheme)
    return _wrap(qd, device)   # no node: quantizing detaches (the autodiff association stays)


def _given_scales(scales, shape, scheme, device):
    grid = grid_shape(shape, scheme)
    if isinstance(scales, dispatch._tensor_cls):
        host = np.asarray(scales.numpy())
    else:
        try:
            host = np.asarray(scales)
        except (TypeError, ValueError):
            host = np.asarray(None)
    if host.dtype.kind not in "fiu":
        raise TypeError(f"quantize: scales must be numbers (a tensor, an array or a float), got {scales!r}")
    if host.shape != grid:
        raise ValueError(f"quantize: scales of shape {host.shape} do not match the scale grid {grid} of a "
                         f"tensor of shape {tuple(shape)} ({scheme.describe()})")
    host = np.ascontiguousarray(host, np.float32)
    if not (np.isfinite(host).all() and (host > 0).all()):
        raise ValueError("quantize: scales must be positive and finite (as float32)")
    return _x(device, Op.FROM_HOST, host)


def dequantize(t, dtype=dt.float32):
    """The float values ``scale * q`` of quantized ``t`` (a new tensor without a node)."""
    qd = t._data
    device = t._device
    scheme = qd.scheme
    L, R, C, bm, bn = geometry(qd.shape, scheme)
    bits = scheme.bits
    q = _reshape(device, qd.values, (L, R, _words_shape(qd.shape, bits)[-1] if bits else C))
    s = _reshape(device, qd.scales, grid3(qd.shape, scheme))
    out = _kernels(device).dequantize(q, s, bm, bn, bits, C, dtype.np)
    return dispatch.wrap(_reshape(device, out, qd.shape), device, dtype)


def scales_of(t):
    """The float32 scales of quantized ``t`` (shape ``grid_shape``)."""
    return dispatch.wrap(t._data.scales, t._device, dt.float32)


def values_of(t):
    """The int8 values of quantized ``t``, in its shape (unpacked when packed)."""
    return dispatch.wrap(_ints(t._device, t._data), t._device, dt.int8)


def nbytes(t):
    """Bytes of the values' storage (scales not counted)."""
    qd = t._data
    if qd.scheme.bits:
        return math.prod(_words_shape(qd.shape, qd.scheme.bits)) * 4
    return math.prod(qd.shape)


def to_device(t, device):
    """``t`` (quantized) copied to ``device``."""
    return _copy(t, t._device, device)


def clone(t):
    """A copy of quantized ``t`` with its own storage."""
    return _copy(t, t._device, t._device)


def _copy(t, src, dst):
    qd = t._data

    def copy(a):   # through the host: values and scales are small next to float tensors
        host = np.array(_x(src, Op.TO_HOST, a), copy=True, order="C")
        return _reshape(dst, _x(dst, Op.FROM_HOST, host), host.shape)   # (CUDA makes 0-d 1-d)

    return _wrap(QuantData(copy(qd.values), copy(qd.scales), qd.shape, qd.scheme), dst)


# --- ops ----------------------------------------------------------------------------------------
class _U32:
    """The words' dtype for backend ``cat`` (which reads ``dtype.np``; uint32 is no Ember dtype)."""
    np = np.dtype(np.uint32)


MOVES = frozenset((Op.RESHAPE, Op.PERMUTE, Op.EXPAND, Op.SLICE, Op.FLIP, Op.CONTIGUOUS,
                   Op.INDEX_SELECT, Op.GATHER, Op.CAT))


def apply(op, inputs, out_dtype, params):
    """``dispatch.apply`` for an op with a quantized input (see the module docstring)."""
    if op in MOVES and type(inputs[0]._data) is QuantData:
        return _move(op, inputs, params)
    if op is Op.MATMUL:
        return _matmul(inputs, params)
    return _compute(op, inputs, out_dtype, params)


def _float_dtype(d):
    return dt.float32 if d is not None and d.quantized else d


def _as_float(t):
    if type(t._data) is QuantData:
        return dequantize(t)
    if t._dtype.quantized:   # a Python scalar made a constant of the op's (quantized) dtype
        return dispatch.wrap(t._data, t._device, dt.float32, t._node)
    return t


def _quantized_scheme(inputs):
    return next(t._data.scheme for t in inputs if type(t._data) is QuantData)


def _requantize(out, scheme):
    """``out`` quantized with ``scheme`` when it is float and large enough for its blocks."""
    if type(out) is tuple:
        return (_requantize(out[0], scheme),) + out[1:]
    if out._dtype.kind is not dt.Float or out._dtype.quantized or not _fits(out.shape, scheme):
        return out
    return quantize(out, scheme)


def _compute(op, inputs, out_dtype, params):
    """Math: dequantize, compute in float, return float (re-quantized under "propagate")."""
    floats = [_as_float(t) for t in inputs]
    if op is Op.CAST:   # dequantizing is the cast to float32; another dtype casts on from there
        x = floats[0]
        return x if params["dtype"] is x._dtype else dispatch.apply(op, x, **params)
    if "dtype" in params:
        params = dict(params, dtype=_float_dtype(params["dtype"]))
    if type(out_dtype) is tuple:
        out_dtype = tuple(_float_dtype(d) for d in out_dtype)
    else:
        out_dtype = _float_dtype(out_dtype)
    out = dispatch.apply(op, *floats, out_dtype=out_dtype, **params)
    return _requantize(out, _quantized_scheme(inputs)) if _PROPAGATE else out


def _result_device(op, inputs):
    """The device of an op's result (autodiff when an input has it), as ``dispatch.apply`` checks it."""
    device = inputs[0]._device
    ad = None
    for t in inputs:
        d = t._device
        if d != device:
            raise DeviceError(f"{dispatch.op_name(op)}: tensors are on different devices ({device} and {d})")
        if d._autodiff:
            if ad is None:
                ad = d
            elif d.checkpointing is not ad.checkpointing:
                raise StrategyError(f"{dispatch.op_name(op)}: tensors use different checkpointing "
                                    f"strategies ({ad.checkpointing.name} and {d.checkpointing.name})")
    return ad or device


# --- movement ---------------------------------------------------------------------------------
def _move(op, inputs, params):
    out_device = _result_device(op, inputs)
    qd = inputs[0]._data
    scheme = qd.scheme
    out_shape = _moved_shape(op, inputs, params)
    moved = _move_scales(op, inputs, params, out_shape)
    if moved is None:   # whole blocks do not move with the values: re-quantize the moved floats
        floats = [_as_float(t) for t in inputs]
        if "dtype" in params:
            params = dict(params, dtype=dt.float32)
        return _requantize(dispatch.apply(op, *floats, **params), scheme)
    scales, new_scheme = moved
    values = _move_values(op, inputs, params, out_shape, new_scheme)
    return _wrap(QuantData(values, scales, out_shape, new_scheme), out_device)


def _moved_shape(op, inputs, params):
    shape = inputs[0].shape
    if op is Op.RESHAPE or op is Op.EXPAND:
        return tuple(params["shape"])
    if op is Op.PERMUTE:
        return tuple(shape[d] for d in params["dims"])
    if op is Op.SLICE:
        return np.broadcast_to(np.empty((), np.int8), shape)[params["index"]].shape
    if op is Op.INDEX_SELECT:
        axis = params["axis"]
        return shape[:axis] + (inputs[1].shape[0],) + shape[axis + 1:] if shape else ()
    if op is Op.GATHER:
        return inputs[1].shape
    if op is Op.CAT:
        axis = params["axis"]
        return shape[:axis] + (sum(t.shape[axis] for t in inputs),) + shape[axis + 1:]
    return shape   # FLIP, CONTIGUOUS


def _derive_scheme(scheme, ext, shape):
    """The scheme whose blocks have extents ``ext`` over ``shape``, or None when there is none."""
    block = scheme.block_size
    nd = len(ext)
    big = [i for i, e in enumerate(ext) if e > 1]
    for k in (len(block),) + tuple(n for n in (1, 2) if n != len(block)):
        if nd >= k and all(i >= nd - k for i in big):
            return QuantScheme(scheme.value, ext[nd - k:], scheme.store)
    if all(-(-n // e) == 1 for n, e in zip(shape, ext)):   # one block left: a per-tensor scale
        return QuantScheme(scheme.value, None, scheme.store)
    return None


def _index_entries(index, ndim):
    """A basic index with its Ellipsis expanded: one entry per input dim, plus the Nones."""
    n_dims = sum(1 for i in index if i is not None and i is not Ellipsis)
    out = []
    for i in index:
        out += [slice(None)] * (ndim - n_dims) if i is Ellipsis else [i]
    return out


def _move_scales(op, inputs, params, out_shape):
    """(moved scales, scheme of the result), or None when whole blocks do not move together."""
    q = inputs[0]
    qd = q._data
    scheme = qd.scheme
    device = q._device
    scales = qd.scales
    if scheme.block_size is None:   # one scale: it stays, unless cat joins different ones
        if op is Op.CAT:
            first = _x(device, Op.TO_HOST, scales)
            if any(_x(device, Op.TO_HOST, t._data.scales) != first for t in inputs[1:]):
                return None
        return scales, scheme
    shape = qd.shape
    ext = extents(scheme, len(shape))
    if op is Op.RESHAPE:
        new_ext = _reshaped_extents(shape, out_shape, ext)
        if new_ext is None:
            return None
        moved = scales
    elif op is Op.PERMUTE:
        new_ext = tuple(ext[d] for d in params["dims"])
        moved = _x(device, Op.PERMUTE, scales, dims=params["dims"])
    elif op is Op.EXPAND:
        new_ext = (1,) * (len(out_shape) - len(shape)) + ext
        moved = scales
    elif op is Op.FLIP:
        if any(ext[d] > 1 and shape[d] % ext[d] for d in params["dims"]):
            return None
        new_ext = ext
        moved = _x(device, Op.FLIP, scales, dims=params["dims"])
    elif op is Op.CONTIGUOUS:
        new_ext = ext
        moved = _x(device, Op.CONTIGUOUS, scales)
    elif op is Op.INDEX_SELECT:
        if ext[params["axis"]] > 1:
            return None
        new_ext = ext
        moved = _x(device, Op.INDEX_SELECT, scales, inputs[1]._data, axis=params["axis"])
    elif op is Op.GATHER:
        if any(e > 1 for e in ext):
            return None
        new_ext = ext
        moved = _x(device, Op.GATHER, scales, inputs[1]._data, axis=params["axis"])
    elif op is Op.CAT:
        axis = params["axis"]
        e = ext[axis]
        if e > 1 and any(t.shape[axis] % e for t in inputs[:-1]):
            return None
        new_ext = ext
        moved = _x(device, Op.CAT, *(t._data.scales for t in inputs), axis=axis, dtype=dt.float32)
    else:   # SLICE
        plan = _sliced_scales_index(params["index"], shape, ext)
        if plan is None:
            return None
        index, new_ext = plan
        moved = _x(device, Op.SLICE, scales, index=index)
    new_scheme = _derive_scheme(scheme, tuple(new_ext), out_shape)
    if new_scheme is None:
        return None
    grid = grid_shape(out_shape, new_scheme)
    if op is Op.EXPAND:
        moved = _x(device, Op.EXPAND, _reshape(device, moved, (1,) * (len(grid) - moved.ndim)
                                                + tuple(moved.shape)), shape=grid)
    return _reshape(device, moved, grid), new_scheme


def _reshaped_extents(old, new, ext):
    """Block extents after reshaping ``old`` to ``new``, or None when blocks would split or mix."""
    old_big = [n for n in old if n != 1]
    if old_big == [n for n in new if n != 1]:   # only size-1 dims come or go
        it = iter((n, e) for n, e in zip(old, ext) if n != 1)
        out = []
        for n in new:
            out.append(next(it)[1] if n != 1 else 1)
        return tuple(out)
    big = [i for i, e in enumerate(ext) if e > 1]
    k = len(old) - min(big) if big else 0   # the trailing dims blocks span
    if k and len(new) >= k and tuple(old[-k:]) == tuple(new[-k:]):
        return (1,) * (len(new) - k) + tuple(ext[-k:])
    if k == 1 and new and old[-1] % ext[-1] == 0 and new[-1] % ext[-1] == 0:
        return (1,) * (len(new) - 1) + (ext[-1],)   # whole blocks in row-major order stay whole
    return None


def _sliced_scales_index(index, shape, ext):
    """(index into the scales, extents of the result) for basic ``index``, or None."""
    entries = _index_entries(index, len(shape))
    out, new_ext = [], []
    d = 0
    for i in entries:
        if i is None:
            out.append(None)
            new_ext.append(1)
            continue
        n, e = shape[d], ext[d]
        d += 1
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if e == 1:
                out.append(i)
            elif step != 1 or start % e or (stop < n and stop % e and stop > start):
                return None
            else:
                out.append(slice(start // e, max(start // e, -(-stop // e))))
            new_ext.append(e)
        else:
            out.append((int(i) % n) // e)
    return tuple(out) + (Ellipsis,), new_ext   # the Ellipsis keeps an all-int index an array


def _move_values(op, inputs, params, out_shape, new_scheme):
    device = inputs[0]._device
    qd = inputs[0]._data
    rest = [t._data for t in inputs[1:]]
    if not qd.scheme.bits:
        if op is Op.CAT:
            return _x(device, op, qd.values, *(r.values for r in rest), axis=params["axis"], dtype=dt.int8)
        return _x(device, op, qd.values, *rest, **params)
    wparams = _words_params(op, params, qd.shape, out_shape, qd.values.shape[-1])
    if wparams is not None:   # the op leaves the packed innermost dim alone: move the words
        if op is Op.CAT:
            return _x(device, op, qd.values, *(r.values for r in rest), **wparams)
        return _x(device, op, qd.values, *rest, **wparams)
    if op is Op.CAT:
        ints = _x(device, op, *(_ints(device, t._data) for t in inputs), axis=params["axis"], dtype=dt.int8)
    else:
        ints = _x(device, op, _ints(device, qd), *rest, **params)
    return _pack(device, ints, new_scheme.bits)


def _words_params(op, params, shape, out_shape, nw):
    """The params of ``op`` on the packed words (``nw`` per row) when it keeps the innermost dim
    whole, else None."""
    if not shape or not out_shape or shape[-1] != out_shape[-1]:
        return None
    last = len(shape) - 1
    if op is Op.RESHAPE or op is Op.EXPAND:
        return dict(shape=tuple(out_shape[:-1]) + (nw,))
    if op is Op.PERMUTE:
        return params if params["dims"][-1] == last else None
    if op is Op.FLIP:
        return None if last in params["dims"] else params
    if op is Op.CONTIGUOUS:
        return params
    if op is Op.INDEX_SELECT:
        return params if params["axis"] != last else None
    if op is Op.CAT:
        return dict(axis=params["axis"], dtype=_U32) if params["axis"] != last else None
    if op is Op.SLICE:
        entries = _index_entries(params["index"], len(shape))
        d = 0
        for j, i in enumerate(entries):
            if i is None:
                continue
            if d == last:
                if any(x is None for x in entries[j + 1:]) or not isinstance(i, slice) \
                        or i.indices(shape[d]) != (0, shape[d], 1):
                    return None
                return dict(index=tuple(entries[:j]) + (slice(None),))
            d += 1
    return None   # GATHER: one index per value, not per word


# --- matmul -----------------------------------------------------------------------------------
def _matmul(inputs, params):
    """matmul with a quantized operand: the quantized kernels, recorded like any matmul."""
    out_device = _result_device(Op.MATMUL, inputs)
    a, b = inputs
    if type(a._data) is QuantData and type(b._data) is QuantData:
        a = dequantize(a)   # one operand runs quantized: the right one (usually the weights)
    qleft = type(a._data) is QuantData
    q, f = (a, b) if qleft else (b, a)
    dtype = f._dtype
    out = dispatch.wrap(_qmatmul(q, f._data, qleft, dtype), out_device, dtype)
    if _PROPAGATE:
        return _requantize(out, q._data.scheme)
    if any(t._node is not None for t in inputs):
        dispatch.record(Op.MATMUL, inputs, params, out)   # backward reads the quantized operand
    return out


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
    k = _kernels(device)
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
            out = k.matmul(*mat, _reshape(device, fa, (math.prod(flead) * M, K)), False, dtype.np)
            out = _reshape(device, out, flead + (M, qd.shape[1]))
        elif flead:     # Q @ F (..., K, N): the batch folds into the columns of F
            K, N = fa.shape[-2:]
            nd = len(fa.shape)
            cols = _x(device, Op.PERMUTE, fa, dims=(nd - 2,) + tuple(range(nd - 2)) + (nd - 1,))
            out = k.matmul(*mat, _reshape(device, cols, (K, math.prod(flead) * N)), True, dtype.np)
            out = _reshape(device, out, (qd.shape[0],) + flead + (N,))
            out = _x(device, Op.PERMUTE, out, dims=tuple(range(1, nd - 1)) + (0, nd - 1))
        else:
            out = k.matmul(*mat, fa, True, dtype.np)
    else:           # a batch of quantized matrices: one product per broadcast batch index
        lead = dispatch.broadcast_shapes("matmul", qlead, flead)
        parts = []
        for idx in np.ndindex(*lead):
            qi = tuple(i if n != 1 else 0 for i, n in zip(idx[len(lead) - len(qlead):], qlead))
            fi = tuple(i if n != 1 else 0 for i, n in zip(idx[len(lead) - len(flead):], flead))
            sub = QuantData(qd.values[qi], qd.scales if qd.scheme.block_size is None else qd.scales[qi],
                            qd.shape[-2:], qd.scheme)
            part = k.matmul(*_matrix(sub, device), fa[fi] if fi else fa, qleft, dtype.np)
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
