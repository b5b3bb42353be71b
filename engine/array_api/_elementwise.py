"""Elementwise functions of the standard: each is one dispatch call of an IR op.

Either operand of a binary function may be a Python scalar (2024.12), taking the other
operand's dtype when its kind allows.
"""
import builtins
import math

import numpy as np

from .. import dispatch
from .. import elementwise as _core
from .. import dtypes as dt
from ..ir import Op
from ._dtypes import _check_array

_ew = dispatch.elementwise


def _unary(op, name):
    def fn(x, /):
        _check_array(name, x)
        return _ew(op, x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``{name}(x)`` elementwise (IR op ``{op.name}``)."
    return fn


def _binary(op, name):
    def fn(x1, x2, /):
        return _ew(op, x1, x2)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``{name}(x1, x2)`` elementwise with broadcasting (IR op ``{op.name}``)."
    return fn


abs = _unary(Op.ABS, "abs")
acos = _unary(Op.ACOS, "acos")
acosh = _unary(Op.ACOSH, "acosh")
asin = _unary(Op.ASIN, "asin")
asinh = _unary(Op.ASINH, "asinh")
atan = _unary(Op.ATAN, "atan")
atanh = _unary(Op.ATANH, "atanh")
ceil = _unary(Op.CEIL, "ceil")
cos = _unary(Op.COS, "cos")
cosh = _unary(Op.COSH, "cosh")
exp = _unary(Op.EXP, "exp")
expm1 = _unary(Op.EXPM1, "expm1")
floor = _unary(Op.FLOOR, "floor")
log = _unary(Op.LOG, "log")
log1p = _unary(Op.LOG1P, "log1p")
log2 = _unary(Op.LOG2, "log2")
log10 = _unary(Op.LOG10, "log10")
negative = _unary(Op.NEG, "negative")
reciprocal = _unary(Op.RECIP, "reciprocal")
round = _unary(Op.ROUND, "round")
sign = _unary(Op.SIGN, "sign")
signbit = _unary(Op.SIGNBIT, "signbit")
sin = _unary(Op.SIN, "sin")
sinh = _unary(Op.SINH, "sinh")
sqrt = _unary(Op.SQRT, "sqrt")
square = _unary(Op.SQUARE, "square")
tan = _unary(Op.TAN, "tan")
tanh = _unary(Op.TANH, "tanh")
trunc = _unary(Op.TRUNC, "trunc")

add = _binary(Op.ADD, "add")
atan2 = _binary(Op.ATAN2, "atan2")
bitwise_and = _binary(Op.AND, "bitwise_and")
bitwise_left_shift = _binary(Op.SHL, "bitwise_left_shift")
bitwise_or = _binary(Op.OR, "bitwise_or")
bitwise_right_shift = _binary(Op.SHR, "bitwise_right_shift")
bitwise_xor = _binary(Op.XOR, "bitwise_xor")
copysign = _binary(Op.COPYSIGN, "copysign")
divide = _binary(Op.DIV, "divide")
equal = _binary(Op.EQ, "equal")
floor_divide = _binary(Op.FLOORDIV, "floor_divide")
greater = _binary(Op.GT, "greater")
greater_equal = _binary(Op.GE, "greater_equal")
hypot = _binary(Op.HYPOT, "hypot")
less = _binary(Op.LT, "less")
less_equal = _binary(Op.LE, "less_equal")
logaddexp = _binary(Op.LOGADDEXP, "logaddexp")
maximum = _binary(Op.MAXIMUM, "maximum")
minimum = _binary(Op.MINIMUM, "minimum")
multiply = _binary(Op.MUL, "multiply")
nextafter = _binary(Op.NEXTAFTER, "nextafter")
not_equal = _binary(Op.NE, "not_equal")
pow = _binary(Op.POW, "pow")
remainder = _binary(Op.MOD, "remainder")
subtract = _binary(Op.SUB, "subtract")


def _logical(fn, name):
    def logical(x1, x2, /):
        return fn(x1, x2)
    logical.__name__ = logical.__qualname__ = name
    logical.__doc__ = (f"``{name}(x1, x2)`` with broadcasting: Bool arrays as they are, other "
                       f"arrays as truth values (non-zero is true, as numpy and PyTorch take them).")
    return logical


logical_and = _logical(_core.logical_and, "logical_and")
logical_or = _logical(_core.logical_or, "logical_or")
logical_xor = _logical(_core.logical_xor, "logical_xor")


def logical_not(x, /):
    _check_array("logical_not", x)
    return _core.logical_not(x)


def bitwise_invert(x, /):
    """``~x``: bitwise not of integers, logical not of bools."""
    _check_array("bitwise_invert", x)
    return ~x


def positive(x, /):
    """``+x``: a new array of the same values."""
    _check_array("positive", x)
    return +x


def _parts(method, name, doc):
    # complex arrays test or take their parts (Tensor's methods); real ones give a new array
    def fn(x, /):
        _check_array(name, x)
        out = method(x)
        return +x if out is x else out
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


isfinite = _parts(lambda x: x.isfinite(), "isfinite", "True where ``x`` is finite (complex: both parts).")
isinf = _parts(lambda x: x.isinf(), "isinf", "True where ``x`` is infinite (complex: either part).")
isnan = _parts(lambda x: x.isnan(), "isnan", "True where ``x`` is NaN (complex: either part).")
conj = _parts(lambda x: x.conj(), "conj", "The complex conjugate: real arrays are their own.")
real = _parts(lambda x: x.real, "real", "The real part: real arrays are their own.")
imag = _parts(lambda x: x.imag, "imag", "The imaginary part: zeros for real arrays.")


def clip(x, /, min=None, max=None):
    """``x`` limited to ``[min, max]`` (bounds are scalars, arrays or None), in ``x``'s dtype.

    An integer ``x`` with a Python bound outside its dtype's range takes the range's end
    (the bound itself is not representable)."""
    _check_array("clip", x)
    if min is None and max is None:
        return +x
    if x.dtype.kind is dt.Int:
        info = np.iinfo(x.dtype.np)
        min = _int_bound(min, info)
        max = _int_bound(max, info)
    lo = -math.inf if min is None else min
    hi = math.inf if max is None else max
    if x.dtype.kind is dt.Int:
        info = np.iinfo(x.dtype.np)
        lo = info.min if min is None else lo
        hi = info.max if max is None else hi
    out = _ew(Op.CLAMP, x, lo, hi)   # (array bounds broadcast with x)
    return out if out.dtype is x.dtype else out.cast(x.dtype)


def _int_bound(b, info):
    if isinstance(b, (int, float)) and not isinstance(b, builtins.bool):
        if b != b:
            return b
        return builtins.min(builtins.max(b, info.min), info.max)
    return b
