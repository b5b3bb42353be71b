"""Every elementwise IR op x kind on CUDA agrees with the CPU backend."""
import numpy as np
import pytest

import ember
from ember import dispatch
from ember.ir import ELEMENTWISE, FLT, INT, Op

from cuda_helpers import assert_same

DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64,
          "bool": np.bool_}
KIND_DTYPES = {ember.Float: ("float32", "float64"), ember.Int: ("int32", "int64"),
               ember.Bool: ("bool",)}
SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 0.5, -2.5, 1e-3, 40.0, -40.0])


def _values(rng, op, dtype, shape, operand):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind == "f":
        a = rng.uniform(-3, 3, shape)
        flat = a.reshape(-1)
        flat[:min(flat.size, SPECIAL.size)] = SPECIAL[:flat.size]
        return a.astype(dtype)
    lo, hi = -9, 10
    if op in (Op.SHL, Op.SHR, Op.POW) and operand == 1:
        lo, hi = 0, 6
    a = rng.integers(lo, hi, shape)
    if op in (Op.FLOORDIV, Op.MOD) and operand == 1:
        a[a == 0] = 3
    return a.astype(dtype)


ARITY = {Op.WHERE: 3, Op.CLAMP: 3}
UNARY = {op for op in ELEMENTWISE if op.name in (
    "CAST NEG ABS SIGN EXP LOG LOG1P SQRT RSQRT RECIP SIN COS TAN TANH SIGMOID ERF RELU GELU "
    "SILU ROUND FLOOR CEIL TRUNC ISNAN ISINF ISFINITE BIT_NOT LOGICAL_NOT ACOS ACOSH ASIN ASINH "
    "ATAN ATANH COSH SINH EXPM1 LOG2 LOG10 SQUARE SIGNBIT").split()}
CASES = [(op, dt) for op in sorted(ELEMENTWISE, key=lambda o: o.value)
         for kind in (ember.Float, ember.Int, ember.Bool) if kind in op.kinds
         for dt in KIND_DTYPES[kind]]


@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{o.name}-{d}" for o, d in CASES])
def test_elementwise_matches_cpu(cuda, rng, op, dtype):
    arity = ARITY.get(op, 1 if op in UNARY else 2)
    shapes = [(3, 4), (4,), (3, 1)][:arity] if arity > 1 else [(3, 4)]
    arrays = [_values(rng, op, dtype, s, i) for i, s in enumerate(shapes)]
    if op is Op.WHERE:
        arrays[0] = rng.random(shapes[0]) < 0.5
    if op is Op.CLAMP:
        arrays[1], arrays[2] = np.minimum(arrays[1], arrays[2][:, :1]), np.maximum(arrays[1], arrays[2][:, :1])
        shapes = [(3, 4), (4,), (4,)]
    cpu = [ember.from_numpy(a) for a in arrays]
    gpu = [t.to(cuda) for t in cpu]
    want = dispatch.elementwise(op, *cpu)
    got = dispatch.elementwise(op, *gpu)
    assert_same(got, want)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_strided_and_broadcast_operands(cuda, rng, dtype):
    a = rng.integers(-5, 5, (4, 3, 5)).astype(dtype)
    b = rng.integers(-5, 5, (5,)).astype(dtype)
    ca, cb = ember.from_numpy(a), ember.from_numpy(b)
    ga, gb = ca.to(cuda), cb.to(cuda)
    for f in (lambda x, y: x.permute(2, 0, 1)[::2, ::-1] * 2 + y[:3].reshape(3, 1, 1),
              lambda x, y: x.transpose(0, 2).flip((0, 1)) - y.reshape(5, 1, 1),
              lambda x, y: (x + y).sum(dim=1)):
        assert_same(f(ga, gb), f(ca, cb))


@pytest.mark.parametrize("src", ["float64", "float32", "int64", "int32", "bool"])
@pytest.mark.parametrize("dst", ["float32", "int64", "int8", "uint8", "bool"])
def test_cast(cuda, rng, src, dst):
    a = _values(rng, Op.CAST, src, (2, 5), 0)
    if np.dtype(src).kind == "f":
        a = np.where(np.isfinite(a), a, 1.5).astype(src)
    t = ember.from_numpy(a)
    want = t.cast(getattr(ember, dst if dst != "bool" else "bool_"))
    got = t.to(cuda).cast(want.dtype)
    assert_same(got, want)


def test_float_kinds_reject_ints_on_cuda(cuda):
    with pytest.raises(TypeError):
        ember.tensor([1, 2], device=cuda).exp()
    assert FLT and INT  # the kind sets the table above relies on
