"""Every elementwise formula of Ember, written once as a scalar function.

The CPU builder compiles each into an ``@njit`` loop; the CUDA builder (later)
compiles the same function as a device function.  Keep them plain arithmetic
and ``math`` calls so both targets accept them.  Reductions and scans use the
binary combiners (``add``, ``mul``, ``maximum``, ``minimum``, ``logical_and``,
``logical_or``).
"""
import math

SQRT1_2 = 0.7071067811865476


# --- identity / casts -------------------------------------------------------
def identity(a):
    return a


def to_bool(a):
    return a != 0


# --- arithmetic -------------------------------------------------------------
def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def truediv(a, b):
    return a / b


def floordiv(a, b):
    return a // b


def mod(a, b):
    return a % b


def power(a, b):
    return a ** b


def neg(a):
    return -a


def absolute(a):
    return abs(a)


def sign(a):
    if a > 0:
        return 1
    if a < 0:
        return -1
    return a  # 0 stays 0, NaN stays NaN


def maximum(a, b):
    # NaN propagates, as in numpy.maximum
    return a if (a >= b or a != a) else b


def minimum(a, b):
    return a if (a <= b or a != a) else b


def clamp(a, lo, hi):
    if a < lo:
        return lo
    if a > hi:
        return hi
    return a


def where(c, a, b):
    return a if c else b


# --- comparisons ------------------------------------------------------------
def eq(a, b):
    return a == b


def ne(a, b):
    return a != b


def lt(a, b):
    return a < b


def le(a, b):
    return a <= b


def gt(a, b):
    return a > b


def ge(a, b):
    return a >= b


# --- float functions --------------------------------------------------------
def exp(a):
    return math.exp(a)


def log(a):
    return math.log(a) if a > 0 else (-math.inf if a == 0 else math.nan)


def log1p(a):
    return math.log1p(a) if a > -1 else (-math.inf if a == -1 else math.nan)


def sqrt(a):
    return math.sqrt(a) if a >= 0 else math.nan


def rsqrt(a):
    return 1 / math.sqrt(a) if a >= 0 else math.nan


def recip(a):
    return 1 / a


def sin(a):
    return math.sin(a)


def cos(a):
    return math.cos(a)


def tan(a):
    return math.tan(a)


def tanh(a):
    return math.tanh(a)


def sigmoid(a):
    if a >= 0:
        return 1 / (1 + math.exp(-a))
    e = math.exp(a)
    return e / (1 + e)


def erf(a):
    return math.erf(a)


def relu(a):
    return a if a > 0 else a * 0  # keeps NaN, gives +0


def gelu(a):
    return 0.5 * a * (1 + math.erf(a * SQRT1_2))


def silu(a):
    return a * sigmoid(a)


def _is_integral(a):
    # NaN, inf and |a| >= 2**52 are already integral (and do not fit an int64)
    return not (abs(a) < 4503599627370496.0)


def floor(a):
    return a if _is_integral(a) else float(math.floor(a))


def ceil(a):
    return a if _is_integral(a) else float(math.ceil(a))


def trunc(a):
    return a if _is_integral(a) else float(math.trunc(a))


def round_even(a):
    # round half to even (numpy.round, torch.round)
    if _is_integral(a):
        return a
    r = float(math.floor(a))
    d = a - r
    if d > 0.5 or (d == 0.5 and r % 2 != 0):
        r += 1
    return r


def isnan(a):
    return math.isnan(a)


def isinf(a):
    return math.isinf(a)


def isfinite(a):
    return math.isfinite(a)


# --- integer / boolean ------------------------------------------------------
def bit_and(a, b):
    return a & b


def bit_or(a, b):
    return a | b


def bit_xor(a, b):
    return a ^ b


def bit_not(a):
    return ~a


def shl(a, b):
    return a << b


def shr(a, b):
    return a >> b


def logical_and(a, b):
    return a and b


def logical_or(a, b):
    return a or b


def logical_xor(a, b):
    return a != b


def logical_not(a):
    return not a
