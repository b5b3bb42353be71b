"""Every elementwise op as a function, ``ember.<name>(x, ...)``, as PyTorch has them.

``ember.exp(t)`` is ``t.exp()``, ``ember.maximum(a, b)`` is ``a.maximum(b)``; either operand
of a binary function may be a Python scalar or a numpy array (``ember.add(2, t)``).  Each
function is the op's dispatch call: the same kernels, promotion, autodiff and fusion as the
method and operator spellings.

>>> ember.maximum(ember.tensor([1.0, 5.0]), 3)
tensor([3., 5.], dtype=float32)
"""
import cmath
from builtins import abs as builtins_abs

from . import dispatch
from . import dtypes as dt
from .ir import Op
from .tensor import Tensor

_ew = dispatch.elementwise


def _unary(op, name, doc):
    def fn(input, /):
        return _ew(op, input)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _binary(op, name, doc):
    def fn(input, other, /):
        return _ew(op, input, other)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


neg = negative = _unary(Op.NEG, "neg", "``-input``.")
abs = absolute = _unary(Op.ABS, "abs", "``|input|``.")
sign = _unary(Op.SIGN, "sign", "-1, 0 or 1 by the sign of ``input`` (NaN stays NaN).")
exp = _unary(Op.EXP, "exp", "``e ** input``.")
expm1 = _unary(Op.EXPM1, "expm1", "``exp(input) - 1``, accurate near 0.")
log = _unary(Op.LOG, "log", "The natural logarithm.")
log1p = _unary(Op.LOG1P, "log1p", "``log(1 + input)``, accurate near 0.")
log2 = _unary(Op.LOG2, "log2", "The base-2 logarithm (exact at powers of two).")
log10 = _unary(Op.LOG10, "log10", "The base-10 logarithm.")
sqrt = _unary(Op.SQRT, "sqrt", "The square root (NaN below 0).")
rsqrt = _unary(Op.RSQRT, "rsqrt", "``1 / sqrt(input)``.")
reciprocal = recip = _unary(Op.RECIP, "reciprocal", "``1 / input``.")
square = _unary(Op.SQUARE, "square", "``input * input``.")
sin = _unary(Op.SIN, "sin", "The sine (radians).")
cos = _unary(Op.COS, "cos", "The cosine (radians).")
tan = _unary(Op.TAN, "tan", "The tangent (radians).")
asin = arcsin = _unary(Op.ASIN, "asin", "The inverse sine (NaN outside [-1, 1]).")
acos = arccos = _unary(Op.ACOS, "acos", "The inverse cosine (NaN outside [-1, 1]).")
atan = arctan = _unary(Op.ATAN, "atan", "The inverse tangent.")
sinh = _unary(Op.SINH, "sinh", "The hyperbolic sine.")
cosh = _unary(Op.COSH, "cosh", "The hyperbolic cosine.")
tanh = _unary(Op.TANH, "tanh", "The hyperbolic tangent.")
asinh = arcsinh = _unary(Op.ASINH, "asinh", "The inverse hyperbolic sine.")
acosh = arccosh = _unary(Op.ACOSH, "acosh", "The inverse hyperbolic cosine (NaN below 1).")
atanh = arctanh = _unary(Op.ATANH, "atanh", "The inverse hyperbolic tangent (±inf at ±1).")
sigmoid = _unary(Op.SIGMOID, "sigmoid", "``1 / (1 + exp(-input))``.")
erf = _unary(Op.ERF, "erf", "The error function.")
relu = _unary(Op.RELU, "relu", "``max(input, 0)``.")
gelu = _unary(Op.GELU, "gelu", "Exact GELU, ``input * Φ(input)``.")
silu = _unary(Op.SILU, "silu", "``input * sigmoid(input)``.")
round = _unary(Op.ROUND, "round", "Round half to even (integers are returned as they are).")
floor = _unary(Op.FLOOR, "floor", "The largest integer <= input (integers as they are).")
ceil = _unary(Op.CEIL, "ceil", "The smallest integer >= input (integers as they are).")
trunc = _unary(Op.TRUNC, "trunc", "Round towards zero (integers as they are).")

def _part_test(method, op, name, doc):
    # complex tensors test their parts (Tensor's method); anything else is the op's call
    def fn(input, /):
        return method(input) if isinstance(input, Tensor) else _ew(op, input)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


isnan = _part_test(Tensor.is_nan, Op.ISNAN, "isnan",
                   "True where ``input`` is NaN (complex: either part; never for Int and Bool).")
isinf = _part_test(Tensor.is_inf, Op.ISINF, "isinf",
                   "True where ``input`` is ±inf (complex: either part; never for Int and Bool).")
isfinite = _part_test(Tensor.is_finite, Op.ISFINITE, "isfinite",
                      "True where ``input`` is finite (complex: both parts; always for Int and Bool).")
signbit = _unary(Op.SIGNBIT, "signbit", "True where the sign bit is set (``-0.0`` included).")
bitwise_not = _unary(Op.BIT_NOT, "bitwise_not", "``~input`` of an Int tensor.")

add = _binary(Op.ADD, "add", "``input + other``.")
sub = subtract = _binary(Op.SUB, "sub", "``input - other``.")
mul = multiply = _binary(Op.MUL, "mul", "``input * other``.")
div = divide = true_divide = _binary(Op.DIV, "div", "``input / other`` (integers give float64).")
floor_divide = _binary(Op.FLOORDIV, "floor_divide", "``input // other``.")
remainder = _binary(Op.MOD, "remainder", "``input % other`` (the sign follows ``other``).")
pow = _binary(Op.POW, "pow", "``input ** other``.")
maximum = _binary(Op.MAXIMUM, "maximum", "The larger of the two (NaN propagates).")
minimum = _binary(Op.MINIMUM, "minimum", "The smaller of the two (NaN propagates).")
eq = equal = _binary(Op.EQ, "eq", "``input == other``.")
ne = not_equal = _binary(Op.NE, "ne", "``input != other``.")
lt = less = _binary(Op.LT, "lt", "``input < other``.")
le = less_equal = _binary(Op.LE, "le", "``input <= other``.")
gt = greater = _binary(Op.GT, "gt", "``input > other``.")
ge = greater_equal = _binary(Op.GE, "ge", "``input >= other``.")
bitwise_and = _binary(Op.AND, "bitwise_and", "``input & other``.")
bitwise_or = _binary(Op.OR, "bitwise_or", "``input | other``.")
bitwise_xor = _binary(Op.XOR, "bitwise_xor", "``input ^ other``.")
bitwise_left_shift = _binary(Op.SHL, "bitwise_left_shift", "``input << other``.")
bitwise_right_shift = _binary(Op.SHR, "bitwise_right_shift", "``input >> other``.")
atan2 = arctan2 = _binary(Op.ATAN2, "atan2", "The angle of the point ``(other, input)``.")
hypot = _binary(Op.HYPOT, "hypot", "``sqrt(input**2 + other**2)`` without overflow.")
copysign = _binary(Op.COPYSIGN, "copysign", "The magnitude of ``input``, the sign of ``other``.")
nextafter = _binary(Op.NEXTAFTER, "nextafter", "The next value after ``input`` towards ``other``.")
logaddexp = _binary(Op.LOGADDEXP, "logaddexp", "``log(exp(input) + exp(other))`` without overflow.")


def _truth(x):
    """``x`` as a Bool tensor (non-zero is true), or a Python bool."""
    if isinstance(x, Tensor):
        return x if x.dtype is dt.bool_ else x != 0
    return x


def logical_not(input, /):
    """``not input`` elementwise (non-zero values are true, as in PyTorch)."""
    return _ew(Op.LOGICAL_NOT, _truth(input))


def logical_and(input, other, /):
    """``input and other`` elementwise, a Bool tensor (non-zero values are true)."""
    return _ew(Op.AND, _truth(input), _truth(other))


def logical_or(input, other, /):
    return _ew(Op.OR, _truth(input), _truth(other))


def logical_xor(input, other, /):
    return _ew(Op.XOR, _truth(input), _truth(other))


def clamp(input, min=None, max=None):
    """``input`` limited to ``[min, max]`` (``Tensor.clamp``)."""
    return input.clamp(min, max)


clip = clamp


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True where ``|input - other| <= atol + rtol * |other|`` (numpy's test, so not symmetric);
    infinities are close only to themselves, NaNs only with ``equal_nan``.

    >>> ember.isclose(ember.tensor([1.0, float("nan")]), ember.tensor([1.0 + 1e-9, float("nan")]))
    tensor([ True, False], dtype=bool)
    """
    a, b = input, other
    kinds = {x.dtype.kind for x in (a, b) if isinstance(x, Tensor)}
    if not kinds:
        raise TypeError("isclose: expected at least one tensor")
    same = _ew(Op.EQ, a, b)
    if dt.Float not in kinds and dt.Complex not in kinds:   # ints and bools: exact equality
        return same
    near = _ew(Op.LE, _ew(Op.ABS, _ew(Op.SUB, a, b)), _abs(b) * rtol + atol)
    # |finite - inf| <= inf would pass the test: only equal infinities are close
    close = (near & (_finite(a) & _finite(b))) | same
    if equal_nan:
        close = close | (_nan(a) & _nan(b))
    return close


def _abs(x):
    return _ew(Op.ABS, x) if isinstance(x, Tensor) else builtins_abs(x)


def _finite(x):
    return x.is_finite() if isinstance(x, Tensor) else cmath.isfinite(x)


def _nan(x):
    return x.is_nan() if isinstance(x, Tensor) else cmath.isnan(x)
