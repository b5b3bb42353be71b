"""The declarative table of Ember's elementwise ops (DESIGN §7, STYLE "declarative op tests").

One ``Row`` per op: the Ember call, the numpy reference, the dtypes it accepts, an input
domain per operand and a tolerance class.  ``tests/test_elementwise.py`` runs every row over
dtypes × shapes × layouts; nothing about an individual op is written anywhere else.

The reference must produce numpy's result dtype for the inputs it gets (that is Ember's
promotion contract, docs/decisions.md), so float functions numpy lacks (erf, gelu, sigmoid,
rsqrt, ...) are computed in float64 and cast back to the input dtype.
"""
import math
from dataclasses import dataclass

import numpy as np

import ember
from ember import dispatch
from ember.ir import Op

# --- dtype groups -------------------------------------------------------------------
FLOATS = ("float32", "float64")
INTS = ("int32", "int64")
SMALL_INTS = ("int8", "uint8")  # only for a few cheap ops: each op x dtype is a compile
BOOL = ("bool",)
NUMERIC = FLOATS + INTS
ALL = FLOATS + INTS + BOOL
KIND_PROBES = ("float32", "int32", "bool")  # one dtype per kind, for "wrong kind" checks

def kind_of(dtype):
    k = np.dtype(dtype).kind
    return "float" if k == "f" else "bool" if k == "b" else "complex" if k == "c" else "int"


# --- input domains: (rng, shape, numpy dtype) -> array --------------------------------
def _cast(a, dtype):
    return np.asarray(a).astype(dtype)


def d_any(rng, shape, dtype):
    """Generic values: floats in [-3, 3), small ints (non-negative for unsigned), random bools."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return _cast(rng.uniform(-3, 3, shape), dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    lo = 0 if dtype.kind == "u" else -9
    return _cast(rng.integers(lo, 10, shape), dtype)


def d_ties(rng, shape, dtype):
    """Few distinct values so that comparisons see equal pairs."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    lo = 0 if dtype.kind == "u" else -2
    return _cast(rng.integers(lo, 3, shape), dtype)


def d_positive(rng, shape, dtype):
    return _cast(rng.uniform(0.1, 4.0, shape), dtype)


def d_above_m1(rng, shape, dtype):
    return _cast(rng.uniform(-0.9, 3.0, shape), dtype)


def d_exp(rng, shape, dtype):
    return _cast(rng.uniform(-5.0, 5.0, shape), dtype)


def d_tan(rng, shape, dtype):
    return _cast(rng.uniform(-1.2, 1.2, shape), dtype)


def d_nonzero(rng, shape, dtype):
    """Divisors: |x| >= 1 for ints, |x| >= 0.5 for floats, either sign (unsigned: positive)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        mag = rng.uniform(0.5, 3.0, shape)
    else:
        mag = rng.integers(1, 6, shape)
    if dtype.kind == "u":
        return _cast(mag, dtype)
    sign = np.where(rng.random(shape) < 0.5, -1, 1)
    return _cast(mag * sign, dtype)


def d_halves(rng, shape, dtype):
    """Multiples of 0.5 (ties for round), mixed with arbitrary values (ints: generic values)."""
    if np.dtype(dtype).kind != "f":
        return d_any(rng, shape, dtype)
    halves = rng.integers(-10, 11, shape) / 2.0
    other = rng.uniform(-5, 5, shape)
    return _cast(np.where(rng.random(shape) < 0.6, halves, other), dtype)


def d_special(rng, shape, dtype):
    """Finite values mixed with NaN, +inf and -inf (predicates is_nan/is_inf/is_finite); ints
    and bools: generic values."""
    if np.dtype(dtype).kind != "f":
        return d_any(rng, shape, dtype)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5])
    pick = specials[rng.integers(0, len(specials), shape)]
    return _cast(np.where(rng.random(shape) < 0.5, pick, rng.uniform(-3, 3, shape)), dtype)


def d_unit(rng, shape, dtype):
    """Around [-1, 1] (the domain of acos, asin, atanh): values beyond it, and ±1 exactly."""
    v = rng.uniform(-1.2, 1.2, shape)
    edge = rng.choice([-1.0, 1.0], shape)
    return _cast(np.where(rng.random(shape) < 0.15, edge, v), dtype)


def d_acosh(rng, shape, dtype):
    """Around acosh's domain [1, inf): 1 exactly and values below it."""
    v = rng.uniform(0.5, 5.0, shape)
    return _cast(np.where(rng.random(shape) < 0.15, 1.0, v), dtype)


def d_log_edges(rng, shape, dtype):
    """Positive values, powers of two (log2 is exact there), zeros and negatives."""
    v = rng.uniform(0.05, 8.0, shape)
    pick = np.array([0.0, -0.0, -1.0, 0.25, 1.0, 2.0, 1024.0, np.inf])[rng.integers(0, 8, shape)]
    return _cast(np.where(rng.random(shape) < 0.3, pick, v), dtype)


def d_overflow(rng, shape, dtype):
    """exp-like inputs up to overflow (cosh, sinh, expm1 beyond 710 are inf)."""
    v = rng.uniform(-5.0, 5.0, shape)
    big = rng.choice([-800.0, -90.0, 90.0, 800.0, np.inf, -np.inf, np.nan], shape)
    return _cast(np.where(rng.random(shape) < 0.2, big, v), dtype)


def d_pow_base(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return _cast(rng.uniform(0.5, 2.0, shape), dtype)
    return _cast(rng.integers(-4, 5, shape), dtype)


def d_pow_exp(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return _cast(rng.uniform(-2.0, 2.0, shape), dtype)
    return _cast(rng.integers(0, 5, shape), dtype)


def d_shift_value(rng, shape, dtype):
    return _cast(rng.integers(-50, 50, shape), dtype)


def d_shift_amount(rng, shape, dtype):
    return _cast(rng.integers(0, 7, shape), dtype)


def d_bool(rng, shape, dtype):
    return rng.random(shape) < 0.5


# --- tolerances -------------------------------------------------------------------------
# Arithmetic is one IEEE operation (or a handful): tight.  Transcendental functions may use
# different (vectorisable) implementations than numpy: a few ulp, plus an absolute floor for
# results near zero (sin near pi, gelu's tail).
EXACT = {"float32": (1e-6, 0.0), "float64": (1e-12, 0.0)}
TRANSCENDENTAL = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-14)}


# --- references for functions numpy does not have --------------------------------------
_erf64 = np.vectorize(math.erf, otypes=[np.float64])


def _in_f64(f):
    """Compute ``f`` in float64 and give the result the input's dtype."""
    def ref(x):
        return np.asarray(f(np.asarray(x, np.float64))).astype(np.asarray(x).dtype)
    return ref


ref_erf = _in_f64(_erf64)
ref_gelu = _in_f64(lambda x: 0.5 * x * (1.0 + _erf64(x / math.sqrt(2.0))))
ref_sigmoid = _in_f64(lambda x: 1.0 / (1.0 + np.exp(-x)))
ref_silu = _in_f64(lambda x: x / (1.0 + np.exp(-x)))
ref_rsqrt = _in_f64(lambda x: 1.0 / np.sqrt(x))


def ref_tanh_grad(g, y):
    return g * (np.ones((), y.dtype) - y * y)


def ref_sigmoid_grad(g, y):
    return g * (y * (np.ones((), y.dtype) - y))


def ref_relu(x):
    return np.maximum(x, np.zeros((), x.dtype))


def ref_recip(x):
    return np.ones((), x.dtype) / x


# --- the table --------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    """One elementwise op.

    ``fn``/``ref`` take one array per operand (Ember tensors / numpy arrays); ``dtypes`` are
    the dtypes the table runs it over (all operands get the same dtype); ``domain`` gives one
    input generator per operand; ``tol`` maps a float dtype to ``(rtol, atol)``; ``rejects``
    are dtypes whose kind the op refuses with ``TypeError`` (by default every kind probe not
    covered by ``dtypes``).
    """
    name: str
    fn: object
    ref: object
    dtypes: tuple
    domain: tuple
    tol: dict = None
    rejects: tuple = None
    extra_dtypes: tuple = ()  # run only on the basic shapes (compile budget)

    @property
    def arity(self):
        return len(self.domain)

    def tolerance(self, dtype):
        kind = np.dtype(dtype).kind
        if kind not in "fc":
            return None
        # a complex dtype takes the tolerance of its parts' dtype
        return (self.tol or EXACT)[dtype if kind == "f" else REAL_PARTS[dtype]]

    def rejected(self):
        if self.rejects is not None:
            return self.rejects
        kinds = {kind_of(d) for d in self.dtypes + self.extra_dtypes}
        return tuple(d for d in KIND_PROBES if kind_of(d) not in kinds)

    def __repr__(self):
        return self.name


def unary(name, fn, ref, dtypes, domain=d_any, tol=None, **kw):
    return Row(name, fn, ref, dtypes, (domain,), tol, **kw)


def binary(name, fn, ref, dtypes, domain=(d_any, d_any), tol=None, **kw):
    return Row(name, fn, ref, dtypes, tuple(domain), tol, **kw)


T = TRANSCENDENTAL

UNARY = [
    unary("neg", lambda x: -x, np.negative, NUMERIC, extra_dtypes=("int8",)),
    unary("neg_method", lambda x: x.neg(), np.negative, ("float32",), rejects=("bool",)),
    unary("abs", abs, np.abs, NUMERIC),
    unary("abs_method", lambda x: x.abs(), np.abs, ("int64",), rejects=("bool",)),
    unary("sign", lambda x: x.sign(), np.sign, NUMERIC),
    unary("exp", lambda x: x.exp(), np.exp, FLOATS, d_exp, T),
    unary("log", lambda x: x.log(), np.log, FLOATS, d_positive, T),
    unary("log1p", lambda x: x.log1p(), np.log1p, FLOATS, d_above_m1, T),
    unary("sqrt", lambda x: x.sqrt(), np.sqrt, FLOATS, d_positive, T),
    unary("rsqrt", lambda x: x.rsqrt(), ref_rsqrt, FLOATS, d_positive, T),
    unary("recip", lambda x: x.recip(), ref_recip, FLOATS, d_nonzero),
    unary("sin", lambda x: x.sin(), np.sin, FLOATS, d_any, T),
    unary("cos", lambda x: x.cos(), np.cos, FLOATS, d_any, T),
    unary("tan", lambda x: x.tan(), np.tan, FLOATS, d_tan, T),
    unary("tanh", lambda x: x.tanh(), np.tanh, FLOATS, d_any, T),
    unary("sigmoid", lambda x: x.sigmoid(), ref_sigmoid, FLOATS, d_exp, T),
    unary("erf", lambda x: x.erf(), ref_erf, FLOATS, d_any, T),
    unary("relu", lambda x: x.relu(), ref_relu, FLOATS),
    unary("gelu", lambda x: x.gelu(), ref_gelu, FLOATS, d_any, T),
    unary("silu", lambda x: x.silu(), ref_silu, FLOATS, d_any, T),
    # integers round to themselves (the array API standard; numpy agrees)
    unary("round", lambda x: x.round(), np.round, FLOATS, d_halves, extra_dtypes=("int64",)),
    unary("floor", lambda x: x.floor(), np.floor, FLOATS, d_halves, extra_dtypes=("int32",)),
    unary("ceil", lambda x: x.ceil(), np.ceil, FLOATS, d_halves, extra_dtypes=("uint8",)),
    unary("trunc", lambda x: x.trunc(), np.trunc, FLOATS, d_halves, extra_dtypes=("int16",)),
    # the array API standard's functions (DESIGN §13)
    unary("acos", lambda x: x.acos(), np.arccos, FLOATS, d_unit, T),
    unary("asin", lambda x: x.asin(), np.arcsin, FLOATS, d_unit, T),
    unary("atan", lambda x: x.atan(), np.arctan, FLOATS, d_special, T),
    unary("acosh", lambda x: x.acosh(), np.arccosh, FLOATS, d_acosh, T),
    unary("asinh", lambda x: x.asinh(), np.arcsinh, FLOATS, d_special, T),
    unary("atanh", lambda x: x.atanh(), np.arctanh, FLOATS, d_unit, T),
    unary("cosh", lambda x: x.cosh(), np.cosh, FLOATS, d_overflow, T),
    unary("sinh", lambda x: x.sinh(), np.sinh, FLOATS, d_overflow, T),
    unary("expm1", lambda x: x.expm1(), np.expm1, FLOATS, d_overflow, T),
    unary("log2", lambda x: x.log2(), np.log2, FLOATS, d_log_edges, T),
    unary("log10", lambda x: x.log10(), np.log10, FLOATS, d_log_edges, T),
    unary("square", lambda x: x.square(), np.square, NUMERIC),
    unary("signbit", lambda x: x.signbit(), np.signbit, FLOATS, d_special, extra_dtypes=("int32",),
          rejects=("bool",)),
    unary("is_nan", lambda x: x.is_nan(), np.isnan, FLOATS, d_special, extra_dtypes=("int32", "bool")),
    unary("is_inf", lambda x: x.is_inf(), np.isinf, FLOATS, d_special, extra_dtypes=("uint8", "bool")),
    unary("is_finite", lambda x: x.is_finite(), np.isfinite, FLOATS, d_special,
          extra_dtypes=("int64", "bool")),
    # a Bool tensor clamped by Python ints promotes to int64, as numpy.clip does: no reject
    unary("clamp", lambda x: x.clamp(-1, 2), lambda x: np.clip(x, -1, 2), NUMERIC, rejects=()),
    unary("clamp_min", lambda x: x.clamp(min=0), lambda x: np.maximum(x, 0), ("float64", "int32"),
          rejects=()),
    unary("clamp_max", lambda x: x.clamp(max=1), lambda x: np.minimum(x, 1), ("float32", "int64"),
          rejects=()),
    unary("bitwise_not", lambda x: ~x, np.invert, INTS, extra_dtypes=SMALL_INTS,
          rejects=("float32",)),
    unary("logical_not", lambda x: ~x, np.logical_not, BOOL, rejects=("float32",)),
    unary("logical_not_method", lambda x: x.logical_not(), np.logical_not, BOOL,
          rejects=("float32",)),
]

BINARY = [
    binary("add", lambda a, b: a + b, np.add, NUMERIC, extra_dtypes=SMALL_INTS),
    binary("sub", lambda a, b: a - b, np.subtract, NUMERIC),
    binary("mul", lambda a, b: a * b, np.multiply, NUMERIC, extra_dtypes=SMALL_INTS),
    binary("div", lambda a, b: a / b, np.true_divide, NUMERIC, (d_any, d_nonzero)),
    binary("floordiv", lambda a, b: a // b, np.floor_divide, NUMERIC, (d_any, d_nonzero)),
    binary("mod", lambda a, b: a % b, np.remainder, NUMERIC, (d_any, d_nonzero)),
    binary("pow", lambda a, b: a ** b, np.power, NUMERIC, (d_pow_base, d_pow_exp), T),
    binary("pow_method", lambda a, b: a.pow(b), np.power, ("float64", "int64"),
           (d_pow_base, d_pow_exp), T, rejects=("bool",)),
    binary("maximum", lambda a, b: a.maximum(b), np.maximum, NUMERIC, (d_ties, d_ties)),
    binary("minimum", lambda a, b: a.minimum(b), np.minimum, NUMERIC, (d_ties, d_ties)),
    binary("eq", lambda a, b: a == b, np.equal, ALL, (d_ties, d_ties), extra_dtypes=SMALL_INTS),
    binary("ne", lambda a, b: a != b, np.not_equal, ALL, (d_ties, d_ties)),
    binary("lt", lambda a, b: a < b, np.less, NUMERIC, (d_ties, d_ties), extra_dtypes=SMALL_INTS),
    binary("le", lambda a, b: a <= b, np.less_equal, NUMERIC, (d_ties, d_ties)),
    binary("gt", lambda a, b: a > b, np.greater, NUMERIC, (d_ties, d_ties)),
    binary("ge", lambda a, b: a >= b, np.greater_equal, NUMERIC, (d_ties, d_ties)),
    binary("bitwise_and", lambda a, b: a & b, np.bitwise_and, INTS, extra_dtypes=("uint8",),
           rejects=("float32",)),
    binary("bitwise_or", lambda a, b: a | b, np.bitwise_or, INTS, rejects=("float32",)),
    binary("bitwise_xor", lambda a, b: a ^ b, np.bitwise_xor, INTS, rejects=("float32",)),
    binary("shl", lambda a, b: a << b, np.left_shift, INTS, (d_shift_value, d_shift_amount)),
    binary("shr", lambda a, b: a >> b, np.right_shift, INTS, (d_shift_value, d_shift_amount)),
    binary("logical_and", lambda a, b: a & b, np.logical_and, BOOL, rejects=("float32",)),
    # backward formulas of tanh and sigmoid (IR ops the autodiff rules use, no Tensor method)
    binary("tanh_grad", lambda g, y: dispatch.elementwise(Op.TANH_GRAD, g, y), ref_tanh_grad,
           FLOATS),
    binary("sigmoid_grad", lambda g, y: dispatch.elementwise(Op.SIGMOID_GRAD, g, y),
           ref_sigmoid_grad, FLOATS),
    binary("logical_or", lambda a, b: a | b, np.logical_or, BOOL, rejects=("float32",)),
    binary("atan2", lambda a, b: a.atan2(b), np.arctan2, FLOATS, (d_special, d_special), T),
    binary("hypot", lambda a, b: a.hypot(b), np.hypot, FLOATS, (d_special, d_special), T),
    binary("copysign", lambda a, b: a.copysign(b), np.copysign, FLOATS, (d_special, d_special)),
    binary("logaddexp", lambda a, b: a.logaddexp(b), np.logaddexp, FLOATS, (d_special, d_special), T),
    binary("nextafter", lambda a, b: a.nextafter(b), np.nextafter, FLOATS, (d_special, d_special)),
    binary("logical_xor", lambda a, b: a ^ b, np.logical_xor, BOOL, rejects=("float32",)),
    binary("equal_method", lambda a, b: a.equal(b), np.equal, ("int64",), (d_ties, d_ties),
           rejects=()),
    binary("not_equal_method", lambda a, b: a.not_equal(b), np.not_equal, ("bool",),
           (d_ties, d_ties), rejects=()),
    binary("greater_method", lambda a, b: a.greater(b), np.greater, ("float64",), (d_ties, d_ties),
           rejects=("bool",)),
    binary("lower_equal_method", lambda a, b: a.lower_equal(b), np.less_equal, ("int32",),
           (d_ties, d_ties), rejects=("bool",)),
    binary("remainder_method", lambda a, b: a.remainder(b), np.remainder, ("float32",),
           (d_any, d_nonzero), rejects=("bool",)),
    binary("bitwise_xor_method", lambda a, b: a.bitwise_xor(b), np.bitwise_xor, ("int64",),
           rejects=("float32",)),
    binary("logical_and_method", lambda a, b: a.logical_and(b), np.logical_and, BOOL,
           rejects=("float32",)),
]


def _where(c, a, b):
    return ember.where(c, a, b)


TERNARY = [
    Row("where", _where, np.where, ALL, (d_bool, d_any, d_any)),
    Row("mask_where", lambda x, m, v: x.mask_where(m, v), lambda x, m, v: np.where(m, v, x),
        ALL, (d_any, d_bool, d_any)),
]

ROWS = UNARY + BINARY + TERNARY
ROWS_BY_NAME = {r.name: r for r in ROWS}
assert len(ROWS_BY_NAME) == len(ROWS), "row names must be unique"


def operand_dtypes(row, dtype):
    """The dtype of each operand of ``row`` when the table runs it at ``dtype``."""
    if row.name == "where":
        return ("bool", dtype, dtype)
    if row.name == "mask_where":
        return (dtype, "bool", dtype)
    return (dtype,) * row.arity


# --- complex numbers (tests/test_complex.py; tests/cuda/test_cuda_complex.py) ---------------
COMPLEX = ("complex64", "complex128")
REAL_PARTS = {"complex64": "float32", "complex128": "float64"}


def _polar(rng, shape, lo, hi, dtype):
    r = rng.uniform(lo, hi, shape)
    return _cast(r * np.exp(1j * rng.uniform(-np.pi, np.pi, shape)), dtype)


def d_cplx(rng, shape, dtype):
    """Real and imaginary parts in [-3, 3)."""
    return _cast(rng.uniform(-3, 3, shape) + 1j * rng.uniform(-3, 3, shape), dtype)


def d_cnonzero(rng, shape, dtype):
    """|z| in [0.5, 3], any angle: divisors, logs, reciprocals."""
    return _polar(rng, shape, 0.5, 3.0, dtype)


def d_cexp(rng, shape, dtype):
    return _cast(rng.uniform(-5, 5, shape) + 1j * rng.uniform(-3, 3, shape), dtype)


def d_cpow_base(rng, shape, dtype):
    return _polar(rng, shape, 0.5, 2.0, dtype)


def d_cpow_exp(rng, shape, dtype):
    return _cast(rng.uniform(-2, 2, shape) + 1j * rng.uniform(-1, 1, shape), dtype)


def d_cties(rng, shape, dtype):
    """Parts in {-1, 0, 1}: equal pairs for == and !=."""
    return _cast(rng.integers(-1, 2, shape) + 1j * rng.integers(-1, 2, shape), dtype)


def ref_c(f):
    """``f`` with the result cast to the input's dtype (numpy gives complex128 for some)."""
    def ref(*xs):
        return np.asarray(f(*xs)).astype(np.result_type(*xs))
    return ref


def ref_part(f):
    """``f`` of complex input, a real result of its parts' dtype (abs, angle, real, imag)."""
    def ref(x):
        return np.asarray(f(x)).astype(np.asarray(x).real.dtype)
    return ref


# Special values: every pair of parts from SPECIAL_PARTS (signed zeros, ±1, finite, huge,
# past exp's overflow, ±inf, NaN). numpy follows C99 Annex G there, as the array API standard
# does, except expm1, which numpy computes as expm1(x) cos(y) - 2 sin(y/2)^2 + i exp(x) sin(y)
# even at infinities (there the reference is C99's cexp(z) - 1), and tanh(±inf + iy) (tan),
# whose zero takes y's sign in the standard and sin(2y)'s in C99.
SPECIAL_PARTS = (0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 30.0, -30.0, 800.0, -800.0,
                 1e300, -1e300, math.inf, -math.inf, math.nan)
SPECIAL_GRID = np.array([complex(x, y) for x in SPECIAL_PARTS for y in SPECIAL_PARTS])


def _expm1_c99(z):
    finite = np.expm1(z)
    finite.real += 0.0   # C99's exp(-0 + 0j) - 1 is +0, numpy's expm1 -0
    return np.where(np.isfinite(z) & (np.abs(z.real) < 700), finite, np.exp(z) - 1)


def _parts(re, im):
    # (re + 1j * im would turn an infinite part into NaNs)
    z = np.empty(np.shape(re), np.complex128)
    z.real, z.imag = re, im
    return z


def _tanh_standard(z):
    # tanh(±inf + iy) is ±1 + 0j with y's sign of zero (the standard; C99: sin(2y)'s)
    r = np.tanh(z)
    edge = np.isinf(z.real) & np.isfinite(z.imag)
    return np.where(edge, _parts(np.copysign(1.0, z.real), np.copysign(0.0, z.imag)), r)


def _tan_standard(z):
    # tan(z) = -i tanh(iz), with tanh's rule above
    w = _tanh_standard(_parts(-z.imag, z.real))
    return _parts(w.imag, -w.real)


SPECIAL_FUNCTIONS = {
    "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh,
    "atan": np.arctan, "atanh": np.arctanh, "cosh": np.cosh, "sinh": np.sinh, "tanh": _tanh_standard,
    "expm1": _expm1_c99, "log1p": np.log1p, "log2": np.log2, "log10": np.log10, "exp": np.exp,
    "log": np.log, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tan": _tan_standard,
}


def assert_same_special_values(got, want, label):
    """Equal parts: NaN where NaN, the same infinities and the same sign of zero.

    Beside a NaN part, C99 leaves the sign of a zero or infinite part unspecified
    (``NaN ± inf j``, ``±0 + NaN j``): there only its magnitude is compared.
    """
    bad = []
    for z, g, w in zip(SPECIAL_GRID, got, want):
        for gp, wp, other in ((g.real, w.real, w.imag), (g.imag, w.imag, w.real)):
            if np.isnan(wp):
                ok = np.isnan(gp)
            elif np.isnan(other) and (wp == 0 or np.isinf(wp)):
                ok = abs(gp) == abs(wp)
            elif wp == 0 or np.isinf(wp):
                ok = gp == wp and np.signbit(gp) == np.signbit(wp)
            else:
                ok = abs(gp - wp) <= 1e-14 * abs(wp)
            if not ok:
                bad.append(f"{z} -> {g}, want {w}")
                break
    assert not bad, f"{label}: {len(bad)} of {len(want)} special values differ: " + "; ".join(bad[:6])


COMPLEX_ROWS = [
    unary("neg", lambda x: -x, np.negative, COMPLEX, d_cplx),
    unary("abs", abs, ref_part(np.abs), COMPLEX, d_cplx, T),
    unary("sign", lambda x: x.sign(), np.sign, COMPLEX, d_cplx, T),
    unary("exp", lambda x: x.exp(), np.exp, COMPLEX, d_cexp, T),
    unary("log", lambda x: x.log(), np.log, COMPLEX, d_cnonzero, T),
    unary("sqrt", lambda x: x.sqrt(), np.sqrt, COMPLEX, d_cplx, T),
    unary("rsqrt", lambda x: x.rsqrt(), ref_c(lambda x: 1 / np.sqrt(x)), COMPLEX, d_cnonzero, T),
    unary("recip", lambda x: x.recip(), ref_c(lambda x: 1 / x), COMPLEX, d_cnonzero, T),
    unary("sin", lambda x: x.sin(), np.sin, COMPLEX, d_cplx, T),
    unary("cos", lambda x: x.cos(), np.cos, COMPLEX, d_cplx, T),
    unary("tan", lambda x: x.tan(), np.tan, COMPLEX, d_cplx, T),
    unary("tanh", lambda x: x.tanh(), np.tanh, COMPLEX, d_cplx, T),
    unary("cosh", lambda x: x.cosh(), np.cosh, COMPLEX, d_cplx, T),
    unary("sinh", lambda x: x.sinh(), np.sinh, COMPLEX, d_cplx, T),
    unary("acos", lambda x: x.acos(), np.arccos, COMPLEX, d_cplx, T),
    unary("acosh", lambda x: x.acosh(), np.arccosh, COMPLEX, d_cplx, T),
    unary("asin", lambda x: x.asin(), np.arcsin, COMPLEX, d_cplx, T),
    unary("asinh", lambda x: x.asinh(), np.arcsinh, COMPLEX, d_cplx, T),
    unary("atan", lambda x: x.atan(), np.arctan, COMPLEX, d_cplx, T),
    unary("atanh", lambda x: x.atanh(), np.arctanh, COMPLEX, d_cplx, T),
    unary("expm1", lambda x: x.expm1(), np.expm1, COMPLEX, d_cexp, T),
    unary("log1p", lambda x: x.log1p(), np.log1p, COMPLEX, d_cplx, T),
    unary("log2", lambda x: x.log2(), np.log2, COMPLEX, d_cnonzero, T),
    unary("log10", lambda x: x.log10(), np.log10, COMPLEX, d_cnonzero, T),
    unary("square", lambda x: x.square(), np.square, COMPLEX, d_cplx, T),
    unary("round", lambda x: x.round(), np.round, COMPLEX, d_cexp),
    unary("conj", lambda x: x.conj(), np.conj, COMPLEX, d_cplx),
    unary("real", lambda x: x.real, ref_part(np.real), COMPLEX, d_cplx),
    unary("imag", lambda x: x.imag, ref_part(np.imag), COMPLEX, d_cplx),
    unary("angle", lambda x: x.angle(), ref_part(np.angle), COMPLEX, d_cplx, T),
    binary("add", lambda a, b: a + b, np.add, COMPLEX, (d_cplx, d_cplx)),
    binary("sub", lambda a, b: a - b, np.subtract, COMPLEX, (d_cplx, d_cplx)),
    binary("mul", lambda a, b: a * b, np.multiply, COMPLEX, (d_cplx, d_cplx)),
    binary("div", lambda a, b: a / b, np.true_divide, COMPLEX, (d_cplx, d_cnonzero), T),
    binary("pow", lambda a, b: a ** b, np.power, COMPLEX, (d_cpow_base, d_cpow_exp), T),
    binary("eq", lambda a, b: a == b, np.equal, COMPLEX, (d_cties, d_cties)),
    binary("ne", lambda a, b: a != b, np.not_equal, COMPLEX, (d_cties, d_cties)),
    Row("where", _where, np.where, COMPLEX, (d_bool, d_cplx, d_cplx)),
]


# --- casts: every pair of dtypes ----------------------------------------------------------
CAST_DTYPES = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")


def cast_source(rng, shape, src, dst):
    """Values of dtype ``src`` whose conversion to ``dst`` is defined (numpy agrees with C).

    Float -> int truncates towards zero; values stay inside the target range (out-of-range
    float -> int is undefined, docs/decisions.md).  Int -> narrower int wraps, as numpy.
    """
    src_k, dst = np.dtype(src), np.dtype(dst)
    if src_k.kind == "b":
        return rng.random(shape) < 0.5
    if src_k.kind == "f":
        if dst.kind == "u":
            v = rng.uniform(0, 120, shape)
        elif dst.kind in "ib":
            v = rng.uniform(-120, 120, shape)
        else:
            v = rng.uniform(-1e3, 1e3, shape)
        v = np.where(rng.random(shape) < 0.2, 0.0, v)
        return v.astype(src_k)
    info = np.iinfo(src_k)
    v = rng.integers(max(info.min, -300), min(info.max, 300) + 1, shape)
    return v.astype(src_k)
