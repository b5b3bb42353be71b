"""Complex tensors (complex64, complex128, kind ember.Complex) against numpy.

Elementwise ops run from the table ``op_table.COMPLEX_ROWS`` over both complex dtypes and a
few shapes (0-d, empty, broadcast, non-contiguous); then promotion with real tensors and weak
Python scalars, casts, reductions and scans, matmul, layout and indexing ops, creation,
printing and interop, fusion of complex chains, and the ops that refuse complex input.
"""
import warnings

import numpy as np
import pytest

import ember
from checks import LAYOUTS, as_tensor, assert_not_numba, check
from ember.backends.cpu.elementwise import PARALLEL_MIN
from op_table import (COMPLEX, COMPLEX_ROWS, SPECIAL_FUNCTIONS, SPECIAL_GRID,
                      assert_same_special_values, d_cnonzero, d_cplx, operand_dtypes)

SHAPES = {"0d": (), "empty": (0,), "vec7": (7,), "mat3x4": (3, 4)}
BROADCAST = {2: ((4, 1), (1, 5)), 3: ((4, 1), (1, 5), ())}


def _inputs(row, dtype, shapes, rng):
    return [np.asarray(dom(rng, shape, dt))
            for dom, shape, dt in zip(row.domain, shapes, operand_dtypes(row, dtype))]


def _run(row, dtype, arrays, views=None):
    tensors = [as_tensor(a) for a in arrays]
    if views is not None:
        tensors = [views[0](t) for t in tensors]
        arrays = [views[1](a) for a in arrays]
    with np.errstate(all="ignore"):
        want = np.asarray(row.ref(*arrays))
    rtol, atol = row.tolerance(dtype) or (None, 0.0)
    check(row.fn(*tensors), want, rtol=rtol, atol=atol)


def _cases():
    for row in COMPLEX_ROWS:
        for dtype in row.dtypes:
            for sid, shape in SHAPES.items():
                yield pytest.param(row, dtype, (shape,) * row.arity, id=f"{row.name}-{dtype}-{sid}")
        if row.arity in BROADCAST:
            yield pytest.param(row, row.dtypes[0], BROADCAST[row.arity],
                               id=f"{row.name}-{row.dtypes[0]}-broadcast")


@pytest.mark.parametrize("row, dtype, shapes", list(_cases()))
def test_complex_op(row, dtype, shapes, rng):
    _run(row, dtype, _inputs(row, dtype, shapes, rng))


@pytest.mark.parametrize("row", COMPLEX_ROWS, ids=repr)
@pytest.mark.parametrize("layout", ["transposed", "step_neg_2d"])
def test_complex_op_non_contiguous(row, layout, rng):
    base, tview, aview = LAYOUTS[layout]
    _run(row, "complex64", _inputs(row, "complex64", (base,) * row.arity, rng), (tview, aview))


@pytest.mark.parametrize("name", ["mul", "exp", "div"])
def test_complex_op_parallel(name, rng):
    """Above the parallel threshold (prange kernels, fused or not)."""
    row = next(r for r in COMPLEX_ROWS if r.name == name)
    _run(row, "complex128", _inputs(row, "complex128", ((PARALLEL_MIN + 5,),) * row.arity, rng))


@pytest.mark.parametrize("name", sorted(SPECIAL_FUNCTIONS))
def test_special_values_follow_c99(name):
    """Infinite, NaN, signed-zero and huge parts give C99's values (the array API standard's)."""
    with np.errstate(all="ignore"):
        want = SPECIAL_FUNCTIONS[name](SPECIAL_GRID)
    assert_same_special_values(getattr(ember.tensor(SPECIAL_GRID), name)().numpy(), want, name)


def test_division_by_zero_follows_numpy():
    """Numba's own complex division raises on 0; Ember's gives numpy's inf/NaN parts."""
    a = np.array([1 + 1j, 0j, -2 + 0j, 1j], np.complex128)
    b = np.zeros(4, np.complex128)
    with np.errstate(all="ignore"):
        check(as_tensor(a) / as_tensor(b), a / b)
        check(as_tensor(a).recip(), 1 / a)


# --- promotion --------------------------------------------------------------------------------
PROMOTIONS = [
    ("float32", "complex64", "complex64"), ("float64", "complex64", "complex128"),
    ("float32", "complex128", "complex128"), ("int32", "complex64", "complex128"),
    ("int8", "complex64", "complex64"), ("bool", "complex128", "complex128"),
    ("complex64", "complex128", "complex128"),
]


@pytest.mark.parametrize("a, b, want", PROMOTIONS)
def test_promotion_follows_numpy(a, b, want, rng):
    x = (rng.uniform(-2, 2, 5) if a != "bool" else rng.random(5) < 0.5).astype(a)
    y = d_cplx(rng, (5,), b)
    assert np.result_type(x, y) == np.dtype(want)   # the table is numpy's
    check(as_tensor(x) * as_tensor(y), x * y)
    check(as_tensor(y) + as_tensor(x), y + x)


WEAK = [  # (tensor dtype, Python scalar, result dtype): Python complex is weak like float
    ("complex64", 1j, "complex64"), ("complex64", 2.5, "complex64"), ("complex64", 3, "complex64"),
    ("complex128", 1j, "complex128"), ("float32", 1j, "complex64"), ("float64", 1j, "complex128"),
    ("int64", 2j, "complex128"), ("bool", 1j, "complex128"),
]


@pytest.mark.parametrize("dtype, scalar, want", WEAK)
def test_python_scalars_are_weak(dtype, scalar, want):
    x = np.array([1, 0, 1]).astype(dtype)
    t = as_tensor(x)
    for got in (t * scalar, scalar * t, t + scalar, scalar - t):
        assert got.dtype == getattr(ember, want), (dtype, scalar, got.dtype)
    check(t * scalar, (x * scalar).astype(want))
    check(scalar - t, (scalar - x).astype(want))


# --- casts ---------------------------------------------------------------------------------------
CAST_TARGETS = ("float32", "float64", "int32", "int64", "uint8", "bool", "complex64", "complex128")


@pytest.mark.parametrize("src", COMPLEX)
@pytest.mark.parametrize("dst", CAST_TARGETS)
def test_cast_from_complex(src, dst, rng):
    """Complex -> real keeps the real part (numpy's astype, without its ComplexWarning);
    -> bool is ``!= 0`` (either part)."""
    z = np.array([1.5 - 2j, 0j, 0 + 1j, -3.25 + 0.5j, 100 + 0j], src)
    if dst == "uint8":
        z = z.real.clip(0) + 1j * z.imag
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = z.astype(dst)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # no warning from Ember
        got = as_tensor(z).cast(getattr(ember, "bool_" if dst == "bool" else dst))
    check(got, want)


@pytest.mark.parametrize("src", ("float32", "float64", "int32", "uint8", "bool"))
@pytest.mark.parametrize("dst", COMPLEX)
def test_cast_to_complex(src, dst):
    x = np.array([1, 0, 2, 1]).astype(src)
    check(as_tensor(x).cast(getattr(ember, dst)), x.astype(dst))


# --- reductions, scans, matmul ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("dim", [None, 0, 1, (0, 2)], ids=str)
def test_reductions(dtype, dim, rng):
    z = d_cplx(rng, (3, 4, 5), dtype) * 0.5
    t = as_tensor(z)
    axis = dim
    rtol = 2e-5 if dtype == "complex64" else 1e-12
    check(t.sum(dim), np.sum(z, axis=axis), rtol=rtol, atol=1e-5)
    check(t.mean(dim), np.mean(z, axis=axis), rtol=rtol, atol=1e-5)
    check(t.prod(dim), np.prod(z, axis=axis), rtol=1e-4 if dtype == "complex64" else 1e-11)
    check(t.sum(dim, keepdim=True), np.sum(z, axis=axis, keepdims=True), rtol=rtol, atol=1e-5)


def test_large_complex64_sum_is_accurate(rng):
    """complex64 sums keep float64-class lanes (as float32 sums do): large sums stay close."""
    z = d_cplx(rng, (1 << 21,), "complex64")
    got = as_tensor(z).sum().numpy()
    want = z.astype(np.complex128).sum()
    assert abs(got - want) < 1e-5 * np.abs(z).sum()


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("dim", [0, 1])
def test_scans(dtype, dim, rng):
    z = d_cnonzero(rng, (4, 6), dtype)
    t = as_tensor(z)
    check(t.cumsum(dim), np.cumsum(z, axis=dim), rtol=1e-5 if dtype == "complex64" else 1e-12)
    check(t.cumprod(dim), np.cumprod(z, axis=dim), rtol=1e-5 if dtype == "complex64" else 1e-12)


def test_var_std_any_all(rng):
    z = d_cplx(rng, (4, 5), "complex128")
    t = as_tensor(z)
    check(t.var(), np.var(z, ddof=1))
    check(t.var(1, correction=0), np.var(z, axis=1))
    check(t.std(0), np.std(z, axis=0, ddof=1))
    zz = np.array([[0j, 1j], [0j, 0j]])
    check(as_tensor(zz).any(1), zz.any(1))
    check(as_tensor(zz).all(0), zz.all(0))
    check(as_tensor(zz).argwhere(), np.argwhere(zz))


MATMUL_SHAPES = [((3, 4), (4, 2)), ((4,), (4, 3)), ((2, 3), (3,)), ((2, 3, 4), (4, 5)),
                 ((1, 2, 3), (4, 3, 2))]


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("sa, sb", MATMUL_SHAPES, ids=str)
def test_matmul(dtype, sa, sb, rng):
    a, b = d_cplx(rng, sa, dtype), d_cplx(rng, sb, dtype)
    check(as_tensor(a) @ as_tensor(b), a @ b, rtol=1e-5 if dtype == "complex64" else 1e-12)


def test_matmul_mixed_real_complex(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = d_cplx(rng, (4, 2), "complex64")
    check(as_tensor(a) @ as_tensor(b), a @ b, rtol=1e-5)


# --- layout and indexing ------------------------------------------------------------------------
LAYOUT_OPS = [
    ("reshape", lambda t: t.reshape(4, 3), lambda a: a.reshape(4, 3)),
    ("permute", lambda t: t.permute(1, 0), lambda a: a.transpose(1, 0)),
    ("slice", lambda t: t[1:, ::-2], lambda a: a[1:, ::-2]),
    ("flip", lambda t: t.flip(1), lambda a: a[:, ::-1]),
    ("expand", lambda t: t[:1].expand(3, 4), lambda a: np.broadcast_to(a[:1], (3, 4))),
    ("contiguous", lambda t: t.T.contiguous(), lambda a: np.ascontiguousarray(a.T)),
    ("repeat", lambda t: t.repeat(2, 1), lambda a: np.tile(a, (2, 1))),
    ("cat", lambda t: ember.cat([t, t * 2], 1), lambda a: np.concatenate([a, a * 2], 1)),
    ("stack", lambda t: ember.stack([t, t.conj()]), lambda a: np.stack([a, a.conj()])),
    ("index_select", lambda t: t.index_select(1, ember.tensor([3, 0, 0])),
     lambda a: a[:, [3, 0, 0]]),
    ("gather", lambda t: t.gather(1, ember.tensor([[0, 3], [1, 1], [2, 0]])),
     lambda a: np.take_along_axis(a, np.array([[0, 3], [1, 1], [2, 0]]), 1)),
    ("scatter_add", lambda t: t.scatter(0, ember.tensor([[0, 2, 1, 0]]), t[:1] * 1j, reduce="add"),
     lambda a: _scatter_add(a)),
    ("scatter", lambda t: t.scatter(1, ember.tensor([[1], [0], [3]]), 2 - 1j),
     lambda a: _scatter(a)),
    ("slice_assign", lambda t: t.slice_assign((0, slice(1, 3)), 5j), lambda a: _assign(a)),
    ("mask_fill", lambda t: t.mask_fill(t.real > 0, 1j), lambda a: np.where(a.real > 0, 1j, a)),
    ("bool_mask", lambda t: t[t.imag > 0], lambda a: a[a.imag > 0]),
]


def _scatter_add(a):
    out = a.copy()
    np.add.at(out, (np.array([0, 2, 1, 0]), np.arange(4)), a[0] * 1j)
    return out


def _scatter(a):
    out = a.copy()
    out[np.arange(3), [1, 0, 3]] = 2 - 1j
    return out


def _assign(a):
    out = a.copy()
    out[0, 1:3] = 5j
    return out


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("name, op, ref", LAYOUT_OPS, ids=[r[0] for r in LAYOUT_OPS])
def test_layout_and_indexing(name, op, ref, dtype, rng):
    z = d_cplx(rng, (3, 4), dtype)
    check(op(as_tensor(z)), ref(z).astype(dtype))


# --- creation, printing, interop ------------------------------------------------------------------
def test_creation_and_interop():
    t = ember.tensor([1 + 2j, 3])
    assert t.dtype == ember.complex64 and t.kind is ember.Complex   # PyTorch's default
    assert ember.tensor(np.array([1j])).dtype == ember.complex128  # numpy arrays keep theirs
    assert ember.tensor([1, 2], dtype=complex).dtype == ember.complex64
    assert ember.full((2,), 1j).dtype == ember.complex64
    assert ember.zeros(3, dtype=ember.complex128).numpy().dtype == np.complex128
    assert ember.tensor([1 + 2j, 3j], dtype=ember.float32).tolist() == [1.0, 0.0]
    assert t.tolist() == [1 + 2j, 3 + 0j] and ember.tensor(2 - 1j).item() == 2 - 1j
    assert complex(ember.tensor([1j])) == 1j
    assert ember.complex64.is_complex and not ember.complex64.is_floating_point
    assert "1.+2.j" in repr(t) and "complex64" in repr(t)
    z = np.array([[1 + 1j, 2 - 3j]], np.complex128)
    shared = ember.from_numpy(z)
    assert np.shares_memory(shared.numpy(), z)
    check(ember.from_dlpack(z), z)
    np.testing.assert_array_equal(np.from_dlpack(shared), z)
    np.testing.assert_array_equal(np.asarray(shared), z)


def test_complex_and_polar_functions(rng):
    re, im = rng.standard_normal(5), rng.standard_normal(5)
    check(ember.complex(as_tensor(re), as_tensor(im)), re + 1j * im)
    check(ember.complex(as_tensor(re.astype(np.float32)), 0.5), (re + 0.5j).astype(np.complex64))
    r, theta = rng.uniform(0.5, 2, 5), rng.uniform(-3, 3, 5)
    check(ember.polar(as_tensor(r), as_tensor(theta)), r * np.exp(1j * theta), rtol=1e-12,
          atol=1e-15)
    z = as_tensor(re + 1j * im)
    check(ember.real(z), re)
    check(ember.imag(z), im)
    check(ember.conj(z), re - 1j * im)
    check(ember.angle(z), np.angle(re + 1j * im))
    assert ember.is_complex(z) and not ember.is_complex(as_tensor(re))
    check(as_tensor(re).real, re)        # a real tensor: itself, zeros, itself (numpy)
    check(as_tensor(re).imag, np.zeros(5))
    check(as_tensor(re).conj(), re)
    check(as_tensor(np.array([-1.0, 2.0])).angle(), np.angle(np.array([-1.0, 2.0])))


def test_predicates_and_all_close():
    z = np.array([np.nan + 0j, 1j * np.inf, 1 + 1j, complex(2, np.nan)])
    t = as_tensor(z)
    check(t.is_nan(), np.isnan(z))
    check(t.is_inf(), np.isinf(z))
    check(t.is_finite(), np.isfinite(z))
    a = as_tensor(np.array([1 + 1j, 2 - 2j]))
    assert a.all_close(a + 1e-9j) and not a.all_close(a + 1e-3j)


# --- fusion ---------------------------------------------------------------------------------------
def test_complex_chain_fuses(rng, hot_chains):
    """An elementwise chain of complex ops (and a real tail) runs as one fused kernel."""
    if not ember.fusion.is_enabled():
        pytest.skip("fusion is turned off (EMBER_FUSION=0)")
    z, w = d_cplx(rng, (64, 64), "complex64"), d_cnonzero(rng, (64, 64), "complex64")
    ember.fusion.stats(reset=True)
    t = ((as_tensor(z) * as_tensor(w)).exp() / as_tensor(w) + 1j).conj().abs() * 2.0
    got = t.numpy()
    stats = ember.fusion.stats()
    assert stats["kernels"] == 1 and stats["fused_ops"] >= 6, stats
    with np.errstate(all="ignore"):
        want = (np.abs(np.conj(np.exp(z * w) / w + 1j)) * 2.0).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_fused_complex_reduction(rng):
    z = d_cplx(rng, (1 << 17,), "complex128")
    w = d_cplx(rng, (1 << 17,), "complex128")
    check((as_tensor(z) * as_tensor(w).conj()).sum(), np.sum(z * np.conj(w)), rtol=1e-11)


# --- ops that refuse complex input ----------------------------------------------------------------
REFUSED = [
    ("lt", lambda z: z < z), ("ge", lambda z: z >= 1), ("relu", lambda z: z.relu()),
    ("floor", lambda z: z.floor()), ("max", lambda z: z.max()), ("min", lambda z: z.min(0)),
    ("argmax", lambda z: z.argmax()), ("sort", lambda z: z.sort()), ("topk", lambda z: z.topk(1)),
    ("clamp", lambda z: z.clamp(0, 1)), ("maximum", lambda z: z.maximum(z)),
    ("softmax", lambda z: z.softmax(0)), ("ceil", lambda z: z.ceil()), ("erf", lambda z: z.erf()),
    ("sigmoid", lambda z: z.sigmoid()), ("floordiv", lambda z: z // 2), ("mod", lambda z: z % 2),
    ("and", lambda z: z & z), ("complex", lambda z: ember.complex(z, z)),
    ("atan2", lambda z: z.atan2(z)), ("signbit", lambda z: z.signbit()),
]


@pytest.mark.parametrize("name, call", REFUSED, ids=[r[0] for r in REFUSED])
def test_float_only_ops_refuse_complex(name, call):
    z = ember.tensor([1 + 1j, 2 - 1j])
    with pytest.raises(TypeError, match=name) as e:
        call(z)
    assert_not_numba(e)
    assert "Complex" in str(e.value)
