"""Data type functions of the standard: astype, can_cast, finfo, iinfo, isdtype, result_type."""
import builtins
from dataclasses import dataclass

import numpy as np

from .. import dispatch
from .. import dtypes as dt
from ..storage import make
from ..tensor import Tensor

_SIGNED = (dt.int8, dt.int16, dt.int32, dt.int64)
_UNSIGNED = (dt.uint8, dt.uint16, dt.uint32, dt.uint64)
_FLOATS = (dt.float32, dt.float64)
_COMPLEX = (dt.complex64, dt.complex128)
KINDS = {
    "bool": (dt.bool_,),
    "signed integer": _SIGNED,
    "unsigned integer": _UNSIGNED,
    "integral": _SIGNED + _UNSIGNED,
    "real floating": _FLOATS,
    "complex floating": _COMPLEX,
    "numeric": _SIGNED + _UNSIGNED + _FLOATS + _COMPLEX,
}


def as_dtype(dtype, name):
    """An Ember dtype from what the standard's functions receive (dtypes; numpy dtypes too)."""
    if isinstance(dtype, dt.DType):
        return dtype
    try:
        return dt.as_dtype(dtype)
    except TypeError:
        raise TypeError(f"{name}: {dtype!r} is not a dtype") from None


def _dtype_of(x, name):
    if isinstance(x, Tensor):
        return x.dtype
    return as_dtype(x, name)


def astype(x, dtype, /, *, copy=True, device=None):
    """``x`` converted to ``dtype`` (and moved to ``device``); a new array unless ``copy=False``
    and nothing changes."""
    _check_array("astype", x)
    d = as_dtype(dtype, "astype")
    out = x if d is x.dtype else x.cast(d)
    if device is not None:
        out = out.to(device)
    if copy and out is x:
        out = make(type(x), x._buf, x._device, x._dtype, x._node)
    return out


def can_cast(from_, to, /):
    """True when ``from_`` (a dtype or an array) promotes to ``to`` without losing its kind's
    values: the standard's promotion lattice, numpy's "safe" casting across kinds."""
    a = _dtype_of(from_, "can_cast")
    b = as_dtype(to, "can_cast")
    if a is b:
        return True
    if a.kind is dt.Bool or b.kind is dt.Bool:
        return a.kind is dt.Bool and b.kind is dt.Bool
    return bool(np.can_cast(a.np, b.np, casting="safe"))


@dataclass(frozen=True)
class finfo_object:
    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: object


@dataclass(frozen=True)
class iinfo_object:
    bits: int
    max: int
    min: int
    dtype: object


def finfo(type, /):
    """Machine limits of a floating dtype (or an array of one); for a complex dtype, those of
    its real and imaginary parts (``dtype`` is the real one, as the standard says)."""
    d = _dtype_of(type, "finfo")
    if d.kind is not dt.Float and d.kind is not dt.Complex:
        raise ValueError(f"finfo: {d.name} is not a floating-point dtype")
    d = dt.real_of(d)
    f = np.finfo(d.np)
    return finfo_object(int(f.bits), float(f.eps), float(f.max), float(f.min),
                        float(f.smallest_normal), d)


def iinfo(type, /):
    """Limits of an integer dtype (or an array of one)."""
    d = _dtype_of(type, "iinfo")
    if d.kind is not dt.Int:
        raise ValueError(f"iinfo: {d.name} is not an integer dtype")
    i = np.iinfo(d.np)
    return iinfo_object(int(i.bits), int(i.max), int(i.min), d)


def isdtype(dtype, kind):
    """Whether ``dtype`` is ``kind``: a dtype, one of the standard's kind names ("bool",
    "signed integer", "unsigned integer", "integral", "real floating", "complex floating",
    "numeric"), or a tuple of those."""
    d = as_dtype(dtype, "isdtype")
    if isinstance(kind, tuple):
        return builtins.any(isdtype(d, k) for k in kind)
    if isinstance(kind, str):
        if kind not in KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
        return d in KINDS[kind]
    return d is as_dtype(kind, "isdtype")


def result_type(*arrays_and_dtypes):
    """The dtype the arguments promote to: arrays and dtypes by the promotion table, Python
    scalars weakly (they take the other operands' dtype when their kind allows)."""
    dtypes = []
    scalars = []
    for a in arrays_and_dtypes:
        if isinstance(a, Tensor):
            dtypes.append(a.dtype)
        elif isinstance(a, (builtins.bool, int, float, complex)):
            scalars.append(a)
        else:
            dtypes.append(as_dtype(a, "result_type"))
    if not dtypes:
        raise ValueError("result_type: needs at least one array or dtype")
    out = dtypes[0]
    for d in dtypes[1:]:
        out = dt.promote(out, d)
    for s in scalars:
        sd = dt.scalar_dtype(s, out)
        if sd is not out:
            out = dt.promote(out, sd)
    return out


def _check_array(name, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected an array (ember.Tensor), got {builtins.type(x).__name__}")
