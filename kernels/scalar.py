"""Every elementwise formula of Ember, written once as a scalar function.

The CPU builder compiles each into an ``@njit`` loop; the CUDA builder (later)
compiles the same function as a device function.  Keep them plain arithmetic
and ``math`` calls so both targets accept them.  Reductions and scans use the
binary combiners (``add``, ``mul``, ``maximum``, ``minimum``, ``logical_and``,
``logical_or``).
"""
import math

import numpy as np

from .bits import f32_from_bits, f64_from_bits

SQRT1_2 = 0.7071067811865476
LOG2E = 1.4426950408889634
LN2_HI = 0.6931471803691238        # ln 2 split so that k * LN2_HI is exact
LN2_LO = 1.9082149292705877e-10
ROUND_MAGIC = 6755399441055744.0    # 1.5 * 2**52: x + M - M rounds x to an integer

# 1/17!, 1/16!, ..., 1/1!: Horner coefficients of expm1(u) / u
EXPM1_TAYLOR = tuple(1.0 / math.factorial(n) for n in range(17, 0, -1))

# float32 constants (numpy scalars type as float32 inside kernels, so float32
# math stays float32 and vectorises twice as wide)
F32 = np.float32
LOG2E_F32, ROUND_MAGIC_F32 = F32(1.4426950408889634), F32(12582912.0)   # 1.5 * 2**23
LN2_HI_F32, LN2_LO_F32 = F32(0.693359375), F32(-2.12194440e-4)
EXP_LO_F32, EXP_HI_F32, HALF_F32, ONE_F32 = F32(-104.0), F32(89.0), F32(0.5), F32(1.0)
EXP_TAYLOR_F32 = tuple(F32(1.0 / math.factorial(i)) for i in range(8))


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
    # min(max(a, lo), hi) as numpy.clip and torch.clamp: hi wins when lo > hi; NaN stays
    r = lo if a < lo else a
    return hi if r > hi else r


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
def _pow2(k):
    # 2**k for an integral float k in [-1022, 1023], from its exponent bits
    return f64_from_bits((int(k) + 1023) << 52)


def exp(a):
    """exp in plain arithmetic, so loops over it vectorise (libm's exp does not).

    Computed in float64 for every input type: within 1 ulp of float64 exp, and
    correctly rounded for float32.  x = k ln2 + r with |r| <= ln2 / 2, exp(r)
    by its Taylor series to degree 12, then scaled by 2**k in two halves so
    that results in the subnormal range and overflow to inf come out right.
    """
    x = a if a > -746.0 else -746.0
    x = x if x < 710.0 else 710.0
    k = (x * LOG2E + ROUND_MAGIC) - ROUND_MAGIC
    r = (x - k * LN2_HI) - k * LN2_LO
    p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120 + r * (
        1.0 / 720 + r * (1.0 / 5040 + r * (1.0 / 40320 + r * (1.0 / 362880 + r * (
            1.0 / 3628800 + r * (1.0 / 39916800 + r * (1.0 / 479001600))))))))))))
    half = (k * 0.5 + ROUND_MAGIC) - ROUND_MAGIC
    y = p * _pow2(half) * _pow2(k - half)
    return y if a == a else a


def _pow2_f32(k):
    return f32_from_bits(np.int32((int(k) + 127) << 23))


def exp_f32(a):
    """exp for float32 in float32 arithmetic (the launcher picks it for float32 data).

    The same method as ``exp`` with a degree-7 polynomial: within 2 ulp of the
    correctly rounded result.
    """
    c = EXP_TAYLOR_F32
    x = a if a > EXP_LO_F32 else EXP_LO_F32
    x = x if x < EXP_HI_F32 else EXP_HI_F32
    k = (x * LOG2E_F32 + ROUND_MAGIC_F32) - ROUND_MAGIC_F32
    r = (x - k * LN2_HI_F32) - k * LN2_LO_F32
    p = c[0] + r * (c[1] + r * (c[2] + r * (c[3] + r * (c[4] + r * (c[5] + r * (c[6] + r * c[7]))))))
    half = (k * HALF_F32 + ROUND_MAGIC_F32) - ROUND_MAGIC_F32
    y = p * _pow2_f32(half) * _pow2_f32(k - half)
    return y if a == a else a


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


def _expm1_small(u):
    # expm1 by its Taylor series to degree 17, for |u| <= 0.7 (no cancellation, ~1 ulp)
    c = EXPM1_TAYLOR
    p = c[0] * u + c[1]
    p = p * u + c[2]
    p = p * u + c[3]
    p = p * u + c[4]
    p = p * u + c[5]
    p = p * u + c[6]
    p = p * u + c[7]
    p = p * u + c[8]
    p = p * u + c[9]
    p = p * u + c[10]
    p = p * u + c[11]
    p = p * u + c[12]
    p = p * u + c[13]
    p = p * u + c[14]
    p = p * u + c[15]
    p = p * u + c[16]
    return p * u


def tanh(a):
    """tanh in plain arithmetic (vectorises): -expm1(-2|a|) / (2 + expm1(-2|a|)), sign restored.

    Computed in float64 for every input type; within a few ulp of float64 tanh.
    """
    u = -2.0 * abs(a)
    em = _expm1_small(u) if u > -0.7 else exp(u) - 1.0
    # copysign rather than a three-way branch: random signs would mispredict and stop SIMD;
    # it also keeps -0.0, and NaN stays NaN
    return math.copysign(-em / (2.0 + em), a)


def sigmoid(a):
    e = exp(-abs(a))            # never overflows
    s = 1 / (1 + e)
    return s if a >= 0 else e * s   # NaN: e and s are NaN already


def erf(a):
    return math.erf(a)


def relu(a):
    return a if (a > 0 or a != a) else 0.0  # keeps NaN; -0.0 and -inf give +0


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
