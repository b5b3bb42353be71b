"""A quantized tensor's storage (``QuantData``: integer values and float32 scales) and the
conversions between it and float tensors: quantize, dequantize, pack, unpack, copies.

Every computation is an IR op of the tensor's device (``QUANT_CALIBRATE``, ``QUANTIZE``,
``DEQUANTIZE``, ``PACK``, ``UNPACK``, layout ops on the raw arrays); this module decides
shapes and checks data (NaN or infinite input raises here).
"""
import math

import numpy as np

from .. import dtypes as dt
from ..ir import Op
from ..storage import TensorBase, make
from .scheme import QuantScheme, check_fits, fits, geometry, grid3, grid_shape, qfloat


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


def _words_shape(shape, bits):
    if not shape:
        return (1,)
    return tuple(shape[:-1]) + (-(-shape[-1] // (32 // bits)),)


def _pack(device, ints, bits):
    """int8 values of any shape -> packed words (rows along the innermost dim)."""
    shape = tuple(ints.shape)
    C = shape[-1] if shape else 1
    rows = _reshape(device, _x(device, Op.CONTIGUOUS, ints), (math.prod(shape[:-1]), C))
    return _reshape(device, _x(device, Op.PACK, rows, bits=bits), _words_shape(shape, bits))


def _ints(device, qd):
    """The int8 values of ``qd`` in its logical shape (unpacked when packed)."""
    bits = qd.scheme.bits
    if not bits:
        return qd.values
    shape = qd.shape
    C = shape[-1] if shape else 1
    words = _reshape(device, qd.values, (math.prod(shape[:-1]), _words_shape(shape, bits)[-1]))
    return _reshape(device, _x(device, Op.UNPACK, words, C=C, bits=bits), shape)


def _store(device, ints, scheme):
    return _pack(device, ints, scheme.bits) if scheme.bits else ints


def _wrap(like, qd, device):
    """A quantized tensor of ``like``'s class around storage ``qd``."""
    return make(type(like), qd, device, qfloat(qd.scheme))


def quantize(t, scheme, scales=None):
    """``t`` quantized with ``scheme``: min-max scales, or the given ``scales``; see ``Tensor.quantize``."""
    if not isinstance(scheme, QuantScheme):
        raise TypeError(f"quantize: expected a QuantScheme, got {type(scheme).__name__}")
    if t._dtype.kind is not dt.Float:
        raise TypeError(f"quantize: expected a Float tensor, got {t._dtype.kind.name} ({t._dtype.name})")
    if t._dtype.quantized:
        t = dequantize(t)
    shape = t.shape
    check_fits("quantize", shape, scheme)
    device = t._device
    L, R, C, bm, bn = geometry(shape, scheme)
    x = _reshape(device, _x(device, Op.CONTIGUOUS, t._data), (L, R, C))
    if scales is None:
        s3, finite = _x(device, Op.QUANT_CALIBRATE, x, bm=bm, bn=bn, half=scheme.value.half_range)
        if not finite:
            raise ValueError("quantize: the tensor holds NaN or infinite values, which cannot be quantized")
    else:
        s3 = _reshape(device, _given_scales(scales, shape, scheme, device), grid3(shape, scheme))
    q, finite = _x(device, Op.QUANTIZE, x, s3, bm=bm, bn=bn, lo=scheme.value.lo,
                   hi=scheme.value.hi, check=scales is not None)
    if not finite:
        raise ValueError("quantize: the tensor holds NaN or infinite values, which cannot be quantized")
    values = _store(device, _reshape(device, q, shape), scheme)
    qd = QuantData(values, _reshape(device, s3, grid_shape(shape, scheme)), shape, scheme)
    return _wrap(t, qd, device)   # no node: quantizing detaches (the autodiff association stays)


def _given_scales(scales, shape, scheme, device):
    grid = grid_shape(shape, scheme)
    if isinstance(scales, TensorBase):
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
    out = _x(device, Op.DEQUANTIZE, q, s, bm=bm, bn=bn, bits=bits, C=C, dtype=dtype.np)
    return make(type(t), _reshape(device, out, qd.shape), device, dtype)


def scales_of(t):
    """The float32 scales of quantized ``t`` (shape ``grid_shape``)."""
    return make(type(t), t._data.scales, t._device, dt.float32)


def values_of(t):
    """The int8 values of quantized ``t``, in its shape (unpacked when packed)."""
    return make(type(t), _ints(t._device, t._data), t._device, dt.int8)


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

    return _wrap(t, QuantData(copy(qd.values), copy(qd.scales), qd.shape, qd.scheme), dst)


def as_float(t):
    """``t`` as a float tensor: dequantized when it holds quantized storage; a constant that
    promotion gave a quantized dtype (a Python scalar next to a quantized tensor) as the
    float32 array it is."""
    if type(t._buf) is QuantData:
        return dequantize(t)
    if t._dtype.quantized:
        return make(type(t), t._data, t._device, dt.float32, t._node)
    return t


def requantize(out, scheme):
    """``out`` quantized with ``scheme`` when it is float and large enough for its blocks."""
    if type(out) is tuple:
        return (requantize(out[0], scheme),) + out[1:]
    if out._dtype.kind is not dt.Float or out._dtype.quantized or not fits(out.shape, scheme):
        return out
    return quantize(out, scheme)
