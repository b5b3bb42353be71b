"""Fuzz: elementwise ops, Python scalars and casts against numpy.

Every row of the op table (``tests/op_table.py``) over the dtypes it accepts (plus int8 and
uint8 where it takes integers), broadcast shapes with 0-d, empty and size-1 dims, random
layouts and special values.  numpy's answer is the reference: the same values (NaN, signed
infinities and signed zeros included), the same result dtype, and an exception exactly where
numpy raises one.
"""
import operator

import numpy as np
import pytest
from hypothesis import strategies as st

import ember
import op_table
from ember.dispatch import op_name
from ember.ir import Op
from op_table import ROWS, TRANSCENDENTAL, operand_dtypes

from .settings import fuzz
from .strategies import (ALL, assert_matches, assert_raises_clearly, broadcast_shapes,
                         edtype, kind, numpy_call, operands, shapes)

# ops whose zero results may carry either sign: numpy's own maximum/minimum return either
# zero for (-0.0, +0.0) depending on its SIMD path (docs/decisions.md, "Integer semantics")
ZERO_SIGN_FREE = {"maximum", "minimum", "relu", "clamp", "clamp_min", "clamp_max"}


def _gelu_limit(x):
    # the table's reference is the naive formula, NaN at -inf where gelu's limit is -0.0
    out = op_table.ref_gelu(x)
    return np.where(np.isneginf(x), np.array(-0.0, out.dtype), out)


REFS = {"gelu": _gelu_limit}


def dtypes_of(row):
    names = list(dict.fromkeys(row.dtypes + row.extra_dtypes))
    if any(kind(d) == "int" for d in names):
        names += [d for d in ("int8", "uint8") if d not in names]
    return names


def reference(row, dtype):
    ref = REFS.get(row.name, row.ref)
    if row.tol is TRANSCENDENTAL and dtype == "float32":
        # float32 functions: numpy's own float32 loops may be a few ulp off; the reference
        # is the float64 result rounded once
        def ref32(*arrays):
            wide = [a.astype(np.float64) if a.dtype == np.float32 else a for a in arrays]
            return np.asarray(ref(*wide)).astype(np.float32)
        return ref32
    return ref


@pytest.mark.parametrize("row", ROWS, ids=repr)
@fuzz("elementwise", 8, data=st.data())
def test_elementwise_matches_numpy(row, data):
    dtype = data.draw(st.sampled_from(dtypes_of(row)), "dtype")
    shps = data.draw(broadcast_shapes(row.arity), "shapes")
    pairs = [data.draw(operands(d, s)) for d, s in zip(operand_dtypes(row, dtype), shps)]
    want, err = numpy_call(reference(row, dtype), *[a for a, _ in pairs])
    tensors = [t for _, t in pairs]
    if err is not None:
        assert_raises_clearly(lambda: row.fn(*tensors).numpy(), _op_word(row))
        return
    got = row.fn(*tensors)
    assert_matches(got, want, row.tolerance(dtype), zero_sign=row.name not in ZERO_SIGN_FREE,
                   what=f"{row.name} {dtype} {shps}")


def _op_word(row):
    return {"pow_method": "pow"}.get(row.name, row.name)


# --- Python scalars on either side ---------------------------------------------------------
BINARY_OPERATORS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge, "bitwise_and": operator.and_,
    "bitwise_or": operator.or_, "bitwise_xor": operator.xor, "shl": operator.lshift,
    "shr": operator.rshift,
}
NUMPY_OPERATORS = dict(BINARY_OPERATORS, eq=np.equal, ne=np.not_equal)
METHODS = {"maximum": np.maximum, "minimum": np.minimum}

SCALARS = st.one_of(
    st.integers(-10, 10), st.sampled_from([127, 128, 255, 256, -128, -129, 2 ** 31, -2 ** 31 - 1,
                                           2 ** 63 - 1, 2 ** 63, -2 ** 63, -2 ** 63 - 1, 2 ** 64,
                                           2 ** 70, -2 ** 70, 64, 65, -1]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.5, -0.0, 2.5, 1e300]),
    st.booleans())


@pytest.mark.parametrize("name", sorted(BINARY_OPERATORS) + sorted(METHODS))
@fuzz("scalars", 12, data=st.data())
def test_python_scalar_operands_match_numpy(name, data):
    """``t op s`` and ``s op t`` with int, float and bool scalars of any size: numpy 2's weak
    promotion, comparisons by value for out-of-range ints, OverflowError where numpy raises."""
    dtype = data.draw(st.sampled_from(ALL), "dtype")
    a, t = data.draw(operands(dtype, data.draw(shapes(3), "shape")))
    s = data.draw(SCALARS, "scalar")
    reflected = name not in METHODS and data.draw(st.booleans(), "reflected")
    if name in METHODS:
        want, err = numpy_call(METHODS[name], a, s)
        call = lambda: getattr(t, name)(s)   # noqa: E731
    else:
        ref = NUMPY_OPERATORS[name]
        want, err = numpy_call((lambda: ref(s, a)) if reflected else (lambda: ref(a, s)))
        op = BINARY_OPERATORS[name]
        call = (lambda: op(s, t)) if reflected else (lambda: op(t, s))   # noqa: E731
    word = op_name(OPS[name])
    if reflected and name in SWAPPED:   # Python calls ``t.__gt__(s)`` for ``s < t``
        word = SWAPPED[name]
    if _refused(name, dtype, s):
        # a kind the op does not take (bool arithmetic, bool ordering): TypeError by design
        e = assert_raises_clearly(call, word)
        assert isinstance(e, TypeError), e
        return
    if err is not None and name in SWAPPED and kind(dtype) != "float" and type(s) is int:
        # numpy raises for a bool tensor against an int beyond int64; Ember compares every
        # integer by value (what numpy 2 does for int tensors)
        exact = BINARY_OPERATORS[name]
        want = np.array([exact(s, v) if reflected else exact(v, s) for v in a.astype(object).ravel()],
                        bool).reshape(a.shape)
        err = None
    if err is not None:
        assert_raises_clearly(lambda: call().numpy(), word)
        return
    got = call()
    want = np.asarray(want)
    tol = (1e-6, 0.0) if want.dtype == np.float32 else (1e-12, 0.0)
    if name == "pow":
        tol = TRANSCENDENTAL.get(want.dtype.name, tol)
        if want.dtype == np.float32:
            tol = (1e-5, 1e-30)
    assert_matches(got, want, tol, zero_sign=name not in ZERO_SIGN_FREE,
                   what=f"{name} {dtype} {'s op t' if reflected else 't op s'} s={s!r}")


SWAPPED = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
OPS = {"add": Op.ADD, "sub": Op.SUB, "mul": Op.MUL, "div": Op.DIV, "floordiv": Op.FLOORDIV,
       "mod": Op.MOD, "pow": Op.POW, "eq": Op.EQ, "ne": Op.NE, "lt": Op.LT, "le": Op.LE,
       "gt": Op.GT, "ge": Op.GE, "bitwise_and": Op.AND, "bitwise_or": Op.OR,
       "bitwise_xor": Op.XOR, "shl": Op.SHL, "shr": Op.SHR, "maximum": Op.MAXIMUM,
       "minimum": Op.MINIMUM}


def _refused(name, dtype, s):
    """Whether Ember's op refuses the kind a tensor of ``dtype`` and scalar ``s`` promote to."""
    k = kind(dtype)
    if isinstance(s, float):
        k = "float"
    elif not isinstance(s, bool) and k == "bool":
        k = "int"
    kinds = {"float": ember.Float, "int": ember.Int, "bool": ember.Bool}
    return kinds[k] not in OPS[name].kinds


# --- clamp with every kind of bound --------------------------------------------------------
BOUNDS = st.one_of(st.none(), st.integers(-300, 300), st.floats(allow_nan=True),
                   st.sampled_from([-2 ** 63, 2 ** 63 - 1, -5, 50, 0.0, -0.0]))


@fuzz("elementwise", 40, data=st.data())
def test_clamp_matches_numpy_clip(data):
    """Scalar bounds of any kind (NaN, crossed, beyond the dtype's range) and tensor bounds."""
    dtype = data.draw(st.sampled_from(("float32", "float64", "int8", "int32", "int64", "uint8")))
    a, t = data.draw(operands(dtype, data.draw(shapes(3))))
    lo, hi = data.draw(BOUNDS, "min"), data.draw(BOUNDS, "max")
    if lo is None and hi is None:
        assert_raises_clearly(lambda: t.clamp(lo, hi), "clamp")
        return
    if data.draw(st.booleans(), "tensor bounds") and kind(dtype) == "float":
        # tensor bounds of the input's dtype (broadcast)
        lo_a = None if lo is None else np.asarray(lo, dtype)
        hi_a = None if hi is None else np.asarray(hi, dtype)
        want, err = numpy_call(np.clip, a, lo_a, hi_a)
        got = t.clamp(None if lo is None else ember.from_numpy(lo_a),
                      None if hi is None else ember.from_numpy(hi_a))
    else:
        want, err = numpy_call(np.clip, a, lo, hi)
        if err is not None:
            assert_raises_clearly(lambda: t.clamp(lo, hi).numpy(), "clamp")
            return
        got = t.clamp(lo, hi)
    assert err is None
    assert_matches(got, want, (0.0, 0.0), zero_sign=False, what=f"clamp({lo!r}, {hi!r}) {dtype}")


# --- casts ------------------------------------------------------------------------------------
CAST_DTYPES = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")


@fuzz("casts", 60, data=st.data())
def test_casts_match_numpy(data):
    """Every pair of dtypes over layouts.  Float -> int only inside the target's range
    (outside it the result is undefined, in numpy too: docs/decisions.md)."""
    src = data.draw(st.sampled_from(CAST_DTYPES), "src")
    dst = data.draw(st.sampled_from(CAST_DTYPES), "dst")
    lo = hi = None
    special = True
    if kind(src) == "float" and kind(dst) == "int":
        info = np.iinfo(dst)
        # the largest float below the bound (float32 rounds 2**31 - 1 up to 2**31)
        lo = float(np.nextafter(np.asarray(info.min - 1, src), np.asarray(0, src)))
        hi = float(np.nextafter(np.asarray(info.max + 1, src), np.asarray(0, src)))
        lo, hi = max(lo, -1e9), min(hi, 1e9)
        special = False
    a, t = data.draw(operands(src, data.draw(shapes()), special=special, lo=lo, hi=hi))
    want, err = numpy_call(lambda: a.astype(dst))
    assert err is None
    assert_matches(t.cast(edtype(dst)), want, (0.0, 0.0), what=f"cast {src} -> {dst}")

