"""Elementwise ops against numpy, driven by the table in ``op_table.py``.

Every row runs over its dtypes × shapes (0-d, empty, broadcast), over non-contiguous layouts,
and (for a handful of rows) on both sides of the parallel threshold.  Tests marked ``devices``
take the device axis (``checks.DEVICE``): the CPU here, CUDA in the simulator tier.  Also here: weak Python
scalars, dtype promotion between tensors, casts between every pair of dtypes, special values
(NaN, inf, division by zero, ties) and wrong kinds.
"""
import math

import numpy as np
import pytest

import ember
from checks import DEVICE, LAYOUTS, as_tensor, check, ember_dtype
from ember.backends.cpu.elementwise import PARALLEL_MIN
from op_table import (CAST_DTYPES, ROWS, ROWS_BY_NAME, cast_source, d_any, d_nonzero,
                      d_pow_exp, operand_dtypes)

SHAPES = {
    "0d": (),
    "empty": (0,),
    "one": (1,),
    "vec7": (7,),
    "empty2d": (3, 0),
    "mat4x5": (4, 5),
    "3d": (2, 3, 4),
}

BROADCAST = {
    2: {
        "col_row": ((4, 1), (1, 5)),
        "vec_mat": ((3,), (2, 3)),
        "0d_mat": ((), (2, 2)),
        "mat_0d": ((2, 2), ()),
        "empty_bcast": ((0, 1), (1, 3)),
    },
    3: {
        "col_row_0d": ((4, 1), (1, 5), ()),
        "vec_mat_col": ((3,), (2, 3), (2, 1)),
    },
}

EXTRA_SHAPES = {"vec7": (7,), "mat4x5": (4, 5)}


# The simulator runs a kernel as Python threads (~0.1-1 s per case): the CUDA tier takes each
# row and dtype on one shape of each family (0-d, empty, a matrix) and one broadcast.
ON_CUDA = DEVICE.type == "cuda"
CUDA_SHAPES = ("0d", "empty", "mat4x5")


def _cases():
    # Broadcast shapes run at each row's first dtype only: every broadcast operand is a
    # read-only view, a new Numba signature, and the broadcasting logic is dtype-independent.
    for row in ROWS:
        for dtype in row.dtypes:
            for sid, shape in SHAPES.items():
                if ON_CUDA and sid not in CUDA_SHAPES:
                    continue
                yield pytest.param(row, dtype, (shape,) * row.arity, id=f"{row.name}-{dtype}-{sid}")
        for bid, shapes in BROADCAST.get(row.arity, {}).items():
            dtype = row.dtypes[0]
            yield pytest.param(row, dtype, shapes, id=f"{row.name}-{dtype}-{bid}")
            if ON_CUDA:
                break
        for dtype in () if ON_CUDA else row.extra_dtypes:
            for sid, shape in EXTRA_SHAPES.items():
                yield pytest.param(row, dtype, (shape,) * row.arity, id=f"{row.name}-{dtype}-{sid}")


def make_inputs(row, dtype, shapes, rng):
    return [np.asarray(dom(rng, shape, dt))
            for dom, shape, dt in zip(row.domain, shapes, operand_dtypes(row, dtype))]


def run_row(row, dtype, arrays, views=None):
    """Run ``row`` on ``arrays`` (optionally through ember/numpy ``views``) and compare."""
    before = [a.copy() for a in arrays]
    tensors = [as_tensor(a) for a in arrays]
    if views is not None:
        tview, aview = views
        tensors = [tview(t) for t in tensors]
        arrays_in = [aview(a) for a in arrays]
    else:
        arrays_in = arrays
    with np.errstate(all="ignore"):
        expected = np.asarray(row.ref(*arrays_in))
    got = row.fn(*tensors)
    tol = row.tolerance(dtype)
    rtol, atol = tol if tol else (None, 0.0)
    check(got, expected, rtol=rtol, atol=atol)
    for a, b in zip(arrays, before):  # ops never write into their inputs
        np.testing.assert_array_equal(a, b)


@pytest.mark.devices
@pytest.mark.parametrize("row, dtype, shapes", list(_cases()))
def test_op(row, dtype, shapes, rng):
    run_row(row, dtype, make_inputs(row, dtype, shapes, rng))


# An expanded (stride-0, read-only) operand is a Numba signature of its own: run it on a few
# rows only; the stride logic is the same template for every op.
EXPANDED_ROWS = ("neg", "exp", "is_nan", "add", "lt", "bitwise_and", "logical_and", "where")


def _layout_cases():
    for row in ROWS:
        for lid in LAYOUTS:
            if lid == "expanded" and row.name not in EXPANDED_ROWS:
                continue
            if ON_CUDA and row.name not in EXPANDED_ROWS:   # (the simulator: a few rows)
                continue
            yield pytest.param(row, row.dtypes[0], lid, id=f"{row.name}-{row.dtypes[0]}-{lid}")


@pytest.mark.devices
@pytest.mark.parametrize("row, dtype, layout", list(_layout_cases()))
def test_op_non_contiguous(row, dtype, layout, rng):
    base, tview, aview = LAYOUTS[layout]
    arrays = make_inputs(row, dtype, (base,) * row.arity, rng)
    run_row(row, dtype, arrays, (tview, aview))


@pytest.mark.devices
@pytest.mark.parametrize("name", ["add", "lt", "where"])
def test_op_mixed_layouts(name, rng):
    """One transposed operand next to a contiguous one, and a reversed one."""
    row = ROWS_BY_NAME[name]
    dtype = row.dtypes[0]
    dts = operand_dtypes(row, dtype)
    arrays = [np.asarray(dom(rng, (5, 4), dt)) for dom, dt in zip(row.domain, dts)]
    arrays[0] = np.asarray(row.domain[0](rng, (4, 5), dts[0]))
    tensors = [as_tensor(a) for a in arrays]
    tensors[0] = tensors[0].T
    tensors[-1] = tensors[-1][::-1]
    views = [arrays[0].T] + arrays[1:-1] + [arrays[-1][::-1]]
    check(row.fn(*tensors), row.ref(*views))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8])
def test_a_scalar_operand_of_a_small_op_is_read_once(dtype, rng):
    """``x - 3`` and ``3 - x`` on small tensors: the flat kernels that read the one-element
    operand once (a scalar first or second), with numpy's values."""
    from ember.backends.cpu import elementwise as launcher
    x = np.asarray(rng.integers(1, 9, 7)).astype(dtype)
    t = as_tensor(x)
    launcher._FLAT_KERNELS.clear()
    for got, want in ((t - 3, x - dtype(3)), (3 - t, dtype(3) - x), (t * 2, x * dtype(2)),
                      (t.reshape(7, 1) // as_tensor(np.full((1, 1), 2, dtype)),
                       x.reshape(7, 1) // dtype(2))):
        check(got, want)
    names = {key[:2] for key in launcher._FLAT_KERNELS}
    assert {(launcher.SECOND_ONE, "sub"), (launcher.FIRST_ONE, "sub"),
            (launcher.SECOND_ONE, "mul")} <= names, names
    assert not any(key[0] == 2 for key in launcher._FLAT_KERNELS), names   # no stride-0 view


# the strided templates compile one loop per kernel (MODE, kernels/cpu/elementwise.py), picked
# by the launcher from the innermost strides: each layout runs its own mode's kernel.  Columns:
# above SCALAR_FLAT_MAX, where a one-element operand takes the template too
_COLS = 2053
_MODE_LAYOUTS = {   # name: (operands from a (3, 2 * _COLS) array w, the mode)
    "column_slices": (lambda w: (w[:, :_COLS], w[:, _COLS:]), "CONTIGUOUS"),
    "row_broadcast": (lambda w: (w[:, :_COLS], w[:1, :_COLS]), "CONTIGUOUS"),
    "scalar_second": (lambda w: (w[:, :_COLS], w[:1, :1]), "B_SCALAR"),
    "column_broadcast": (lambda w: (w[:, :_COLS], w[:, :1]), "B_SCALAR"),
    "scalar_first": (lambda w: (w[:1, :1], w[:, :_COLS]), "A_SCALAR"),
    "step": (lambda w: (w[:, :_COLS], w[:, ::2][:, :_COLS]), "STRIDED"),
    "transposed": (lambda w: (w[:, :6].T, w[:, 6:12].T), "STRIDED"),
}


@pytest.mark.parametrize("layout", list(_MODE_LAYOUTS))
def test_strided_template_mode_per_layout(layout, rng):
    from ember.backends.cpu import elementwise as launcher
    from ember.kernels.cpu import elementwise as templates
    make, mode = _MODE_LAYOUTS[layout]
    w = rng.standard_normal((3, 2 * _COLS)).astype(np.float32)
    x, y = make(as_tensor(w))
    want_x, want_y = make(w)
    launcher._KERNELS.clear()
    check(x - y, want_x - want_y)
    modes = {key[3] for key in launcher._KERNELS if key[:2] == (2, "sub")}
    assert modes == {getattr(templates, mode)}, (layout, modes)


# map3 hoists each operand broadcast along the row (HOISTED + a bit per operand) when the
# others are of unit stride: clamp by two numbers, by a column and a number, where with a
# number or a column for a branch (the general strided loop took clamp 6x numpy's time)
_MAP3_LAYOUTS = {   # name: (ember, numpy, the op's scalar function, the operands hoisted)
    "clamp_numbers": (lambda x, col: x.clamp(-0.5, 0.5), lambda x, col: np.clip(x, -0.5, 0.5),
                      "clamp", (1, 2)),
    "clamp_column": (lambda x, col: x.clamp(col, 0.5),
                     lambda x, col: np.minimum(np.maximum(x, col), np.float32(0.5)), "clamp", (1, 2)),
    "where_number": (lambda x, col: ember.where(x > 0, x, 0.0), lambda x, col: np.where(x > 0, x, 0),
                     "where", (2,)),
    "where_column": (lambda x, col: ember.where(x > 0, col, x), lambda x, col: np.where(x > 0, col, x),
                     "where", (1,)),
}


@pytest.mark.parametrize("layout", list(_MAP3_LAYOUTS))
def test_map3_hoists_broadcast_operands(layout, rng):
    from ember.backends.cpu import elementwise as launcher
    from ember.kernels.cpu import elementwise as templates
    fn, ref, op, hoisted = _MAP3_LAYOUTS[layout]
    x = rng.standard_normal((3, _COLS)).astype(np.float32)
    x[0, :5] = [np.nan, -np.inf, np.inf, -0.0, 0.5]
    col = rng.standard_normal((3, 1)).astype(np.float32)
    launcher._KERNELS.clear()
    got = fn(as_tensor(x), as_tensor(col)).numpy()
    np.testing.assert_array_equal(got, ref(x, col))
    if DEVICE.type == "cpu":
        modes = {key[3] for key in launcher._KERNELS if key[:2] == (3, op)}
        assert modes == {templates.HOISTED + sum(1 << i for i in hoisted)}, (layout, modes)


# --- broadcasts and strided operands in tasks of many rows ------------------------------
# (name, x's shape, y's shape, how x is viewed): rows and columns of contiguous arrays take
# the launcher's (rows, cols) description, the others merge dims; every task of the strided
# template runs many short rows, stepping by the second-innermost strides and dividing where
# that dim wraps (a task can start in the middle of a run)
_ROW_CASES = {
    "bias": ((2048, 64), (64,), None),
    "bias_leading_one": ((4, 16), (1, 16), None),
    "column": ((128, 2), (128, 1), None),
    "row_and_column": ((4, 1), (16,), None),
    "column_of_three_dims": ((6, 5, 7), (6, 1, 1), None),
    "middle_broadcast": ((3, 40, 7), (40, 1), None),                 # nd 3, wraps at 40 rows
    "sliced_rows": ((600, 60), (30,), lambda v: v[:, ::2]),
    "reversed_inner_3d": ((40, 30, 20), (30, 1), lambda v: v[:, :, ::-1]),   # 2 tasks
    "long_rows": ((3, 16484), (16484,), None),                       # a chunk and a tail
    "transposed_long_rows": ((16484, 3), (3, 1), lambda v: v.T),
    # short rows joined with the bias repeated (32 rows of 2; all 7 rows of 3), and not
    # joined (a prime count of rows; a column beside the bias)
    "short_bias": ((2048, 2), (2,), None),
    "short_bias_seven_rows": ((7, 3), (3,), None),
    "short_bias_prime_rows": ((97, 2), (2,), None),
}


@pytest.mark.parametrize("case", list(_ROW_CASES))
def test_broadcast_and_strided_rows(case, rng, unfused):
    """Each template (map1, map2, map3) against numpy, exact (add, where and neg round once)."""
    xs, ys, view = _ROW_CASES[case]
    x = rng.standard_normal(xs).astype(np.float32)
    y = rng.standard_normal(ys).astype(np.float32)
    if view is not None:
        x = view(x)
    tx, ty = as_tensor(x), as_tensor(y)
    check(tx + ty, x + y, rtol=0)
    check(ember.where(ty > 0, tx, ty), np.where(y > 0, x, y), rtol=0)
    check(-tx, -x, rtol=0)


@pytest.mark.parametrize("x_shape, y_shape, merged", [
    ((4, 16), (16,), (4, 16)), ((4, 16), (1, 16), (4, 16)), ((8, 8), (8, 1), (8, 8)),
    ((4, 1), (16,), (4, 16)), ((2, 3, 4), (3, 4), (2, 12)), ((2, 3, 4), (2, 1, 1), (2, 12)),
    ((5, 6), (5, 6), None), ((5, 6), (1,), None),
    # short rows joined into rows of up to 64 when no operand is a column
    ((2048, 2), (2,), (64, 64)), ((7, 3), (3,), (1, 21)), ((97, 2), (2,), (97, 2)),
    ((6, 4), (1, 4), (1, 24)), ((128, 2), (128, 1), (128, 2)),
])
def test_row_operands_describe_rows_and_columns(x_shape, y_shape, merged):
    from ember.backends.cpu.elementwise import row_operands
    x, y = np.ones(x_shape, np.float32), np.ones(y_shape, np.float32)
    shape = np.broadcast_shapes(x_shape, y_shape)
    got = row_operands([x, y], shape, math.prod(shape))
    assert got is not None
    assert (None if got[0] is None else tuple(got[0])) == merged


def test_row_operands_take_one_broadcast_value_as_a_scalar(rng, unfused):
    from ember.backends.cpu.elementwise import row_operands
    x = rng.standard_normal((4, 16)).astype(np.float32)
    seed = np.broadcast_to(np.float32(2.5), (4, 16))   # all strides 0, like a backward's seed
    merged, args, inner = row_operands([x, seed], (4, 16), 64)
    assert merged is None and inner == [1, 0] and args[3].shape == (1,)
    check(as_tensor(x) * as_tensor(seed), x * seed, rtol=0)
    check(as_tensor(x)[:, :1] - as_tensor(seed), x[:, :1] - seed, rtol=0)


@pytest.mark.parametrize("x_shape, y_shape", [((3, 40, 7), (40, 1)), ((2, 3, 4), (1, 3, 1))])
def test_row_operands_leave_other_broadcasts_to_merged_dims(x_shape, y_shape):
    from ember.backends.cpu.elementwise import row_operands
    x, y = np.ones(x_shape, np.float32), np.ones(y_shape, np.float32)
    shape = np.broadcast_shapes(x_shape, y_shape)
    assert row_operands([x, y], shape, math.prod(shape)) is None


# --- both sides of the parallel threshold -----------------------------------------------
LARGE = PARALLEL_MIN * 2 + 3  # odd: not a multiple of any chunk size
SMALL = PARALLEL_MIN - 1


@pytest.mark.parametrize("n", [SMALL, LARGE], ids=["below_parallel", "above_parallel"])
@pytest.mark.parametrize("name, dtype", [
    ("add", "float32"), ("mul", "int64"), ("exp", "float64"), ("lt", "float32"),
    ("where", "float32"), ("neg", "int32"),
], ids=lambda v: str(v))
def test_op_large(name, dtype, n, rng):
    row = ROWS_BY_NAME[name]
    run_row(row, dtype, make_inputs(row, dtype, ((n,),) * row.arity, rng))


def test_large_broadcast_and_transposed(rng):
    """Parallel kernels on broadcast and strided operands."""
    cols = (PARALLEL_MIN * 2) // 512
    a = rng.standard_normal((512, 1)).astype(np.float32)
    b = rng.standard_normal((1, cols)).astype(np.float32)
    check(as_tensor(a) + as_tensor(b), a + b)
    m = rng.standard_normal((cols, 512)).astype(np.float32)
    check(-as_tensor(m).T, -m.T)
    check(as_tensor(m)[::-1, ::2] * 2.0, m[::-1, ::2] * np.float32(2.0))


# --- kinds ----------------------------------------------------------------------------------
def _reject_cases():
    for row in ROWS:
        for dtype in row.rejected():
            yield pytest.param(row, dtype, id=f"{row.name}-{dtype}")


@pytest.mark.devices
@pytest.mark.parametrize("row, dtype", list(_reject_cases()))
def test_op_rejects_wrong_kind(row, dtype, rng):
    arrays = make_inputs(row, dtype, ((3,),) * row.arity, rng)
    arrays = [np.ones(3, a.dtype) if a.dtype == np.dtype(dtype) else a for a in arrays]
    tensors = [as_tensor(a) for a in arrays]
    with pytest.raises(TypeError) as e:
        row.fn(*tensors)
    assert type(e.value).__module__.split(".")[0] != "numba"


@pytest.mark.devices
@pytest.mark.parametrize("name", ["eq", "lt", "is_nan", "logical_and"])
def test_predicates_return_bool_kind(name, rng):
    row = ROWS_BY_NAME[name]
    t = row.fn(*[as_tensor(a) for a in make_inputs(row, row.dtypes[0], ((3,),) * row.arity, rng)])
    assert t.dtype == ember.bool_
    assert t.kind is ember.Bool


# --- Python scalars on either side (weak scalars, docs/decisions.md) ---------------------------
# Each expression is applied, unchanged, to a numpy array and to an Ember tensor: numpy 2
# (NEP 50) gives the reference dtype and values.
SCALAR_EXPRS = {
    "t+2": (lambda x: x + 2, d_any),
    "2+t": (lambda x: 2 + x, d_any),
    "t-1.5": (lambda x: x - 1.5, d_any),
    "3-t": (lambda x: 3 - x, d_any),
    "t*0.5": (lambda x: x * 0.5, d_any),
    "0.5*t": (lambda x: 0.5 * x, d_any),
    "t*3": (lambda x: x * 3, d_any),
    "1/t": (lambda x: 1 / x, d_nonzero),
    "t/2": (lambda x: x / 2, d_any),
    "t//2": (lambda x: x // 2, d_any),
    "7//t": (lambda x: 7 // x, d_nonzero),
    "t%3": (lambda x: x % 3, d_any),
    "7%t": (lambda x: 7 % x, d_nonzero),
    "t**2": (lambda x: x ** 2, d_any),
    "2**t": (lambda x: 2 ** x, d_pow_exp),
    "t==1": (lambda x: x == 1, d_any),
    "t!=1": (lambda x: x != 1, d_any),
    "2<t": (lambda x: 2 < x, d_any),
    "t>=0.5": (lambda x: x >= 0.5, d_any),
    "t<=-1": (lambda x: x <= -1, d_any),
}


def _scalar_cases():
    for key in SCALAR_EXPRS:
        for dtype in ("float32", "int32"):
            yield pytest.param(key, dtype, (5,), id=f"{key}-{dtype}")
    for key in ("t+2", "t*0.5", "1/t", "2<t"):
        yield pytest.param(key, "float64", (), id=f"{key}-float64-0d")
        yield pytest.param(key, "int64", (2, 3), id=f"{key}-int64-2d")


@pytest.mark.devices
@pytest.mark.parametrize("key, dtype, shape", list(_scalar_cases()))
def test_python_scalar_operand(key, dtype, shape, rng):
    fn, domain = SCALAR_EXPRS[key]
    a = np.asarray(domain(rng, shape, dtype))
    with np.errstate(all="ignore"):
        expected = np.asarray(fn(a))
    check(fn(as_tensor(a)), expected)


@pytest.mark.parametrize("expr, dtype, want", [
    (lambda x: x + 2, "int32", "int32"),
    (lambda x: x * 0.5, "float32", "float32"),
    (lambda x: x * 0.5, "int32", "float64"),
    (lambda x: 1 / x, "int32", "float64"),
    (lambda x: x + 1, "float32", "float32"),
    (lambda x: x + 1, "bool", "int64"),
    (lambda x: x & True, "bool", "bool"),
    (lambda x: x | 1, "int32", "int32"),
    (lambda x: x + 200, "uint8", "uint8"),
    (lambda x: x * 2, "int8", "int8"),
    (lambda x: x + 1.5, "int64", "float64"),
], ids=["int32+2", "f32*0.5", "int32*0.5", "1/int32", "f32+1", "bool+1", "bool&True",
        "int32|1", "uint8+200", "int8*2", "int64+1.5"])
def test_weak_scalar_dtype(expr, dtype, want):
    a = np.ones(4, dtype)
    t = expr(as_tensor(a))
    assert t.dtype == ember_dtype(want)
    check(t, expr(a))


# --- promotion between tensors ------------------------------------------------------------
PROMOTION_PAIRS = [
    ("int32", "float32"), ("int8", "uint8"), ("bool", "int32"), ("float32", "float64"),
    ("int32", "int64"), ("uint8", "int32"), ("int8", "float32"), ("bool", "float32"),
]


def _promotion_cases():
    for a_dtype, b_dtype in PROMOTION_PAIRS:
        yield pytest.param("add", a_dtype, b_dtype, id=f"add-{a_dtype}-{b_dtype}")
    for op in ("mul", "lt", "div"):
        for a_dtype, b_dtype in PROMOTION_PAIRS[:3]:
            yield pytest.param(op, a_dtype, b_dtype, id=f"{op}-{a_dtype}-{b_dtype}")


@pytest.mark.devices
@pytest.mark.parametrize("op, a_dtype, b_dtype", list(_promotion_cases()))
def test_promotion_between_tensors(op, a_dtype, b_dtype, rng):
    fns = {
        "add": lambda a, b: a + b, "mul": lambda a, b: a * b,
        "lt": lambda a, b: a < b, "div": lambda a, b: a / b,
    }
    fn = fns[op]
    a = np.asarray(d_any(rng, (2, 3), a_dtype))
    b = np.asarray(d_nonzero(rng, (2, 3), b_dtype) if b_dtype != "bool" else np.ones((2, 3), bool))
    with np.errstate(all="ignore"):  # b / a divides by False (0) where a is a bool
        check(fn(as_tensor(a), as_tensor(b)), fn(a, b))
        check(fn(as_tensor(b), as_tensor(a)), fn(b, a))


def test_int16_promotion_result_is_usable(rng):
    """int8 + uint8 gives int16 (numpy): the result supports further ops."""
    a = np.array([-3, 100, 7], np.int8)
    b = np.array([250, 3, 0], np.uint8)
    t = as_tensor(a) + as_tensor(b)
    check(t, a + b)
    check(t * 2, (a + b) * 2)


# --- where / mask_where / mask_fill with scalars and broadcasting ------------------------------
@pytest.mark.parametrize("case", ["tensor_scalar", "scalar_tensor", "float_scalar_int",
                                  "both_tensor_promote"])
def test_where_scalars_and_promotion(case, rng):
    c = rng.random((3, 4)) < 0.5
    x32 = rng.standard_normal((3, 4)).astype(np.float32)
    i32 = rng.integers(-5, 5, (3, 4)).astype(np.int32)
    if case == "tensor_scalar":
        got, want = ember.where(as_tensor(c), as_tensor(x32), 0.0), np.where(c, x32, np.float32(0))
    elif case == "scalar_tensor":
        got, want = ember.where(as_tensor(c), 1, as_tensor(i32)), np.where(c, np.int32(1), i32)
    elif case == "float_scalar_int":
        got, want = ember.where(as_tensor(c), 1.5, as_tensor(i32)), np.where(c, 1.5, i32)
    else:
        got, want = ember.where(as_tensor(c), as_tensor(i32), as_tensor(x32)), np.where(c, i32, x32)
    check(got, want)


@pytest.mark.parametrize("dtype, value", [("float32", 0.5), ("float64", -2.0), ("int64", 7),
                                          ("int32", -1), ("bool", True)])
@pytest.mark.parametrize("mask_shape", [(3, 4), (3, 1), (4,), ()], ids=lambda s: f"mask{s}")
def test_mask_fill(dtype, value, mask_shape, rng):
    x = np.asarray(d_any(rng, (3, 4), dtype))
    m = np.asarray(rng.random(mask_shape) < 0.5)
    before = x.copy()
    got = as_tensor(x).mask_fill(as_tensor(m), value)
    check(got, np.where(m, value, x).astype(x.dtype))
    np.testing.assert_array_equal(x, before)


def test_mask_fill_with_0d_tensor_value(rng):
    x = rng.standard_normal((2, 3))
    m = rng.random((2, 3)) < 0.5
    check(as_tensor(x).mask_fill(as_tensor(m), as_tensor(np.array(9.0))), np.where(m, 9.0, x))


def test_mask_where_keeps_self_dtype(rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    v = rng.standard_normal((3, 4))  # float64
    m = rng.random((3, 4)) < 0.5
    got = as_tensor(x).mask_where(as_tensor(m), as_tensor(v))
    check(got, np.where(m, v, x).astype(np.float32))


def test_mask_where_broadcast_values(rng):
    x = rng.integers(0, 9, (3, 4))
    v = rng.integers(-9, 0, (4,))
    m = rng.random((3, 1)) < 0.5
    check(as_tensor(x).mask_where(as_tensor(m), as_tensor(v)), np.where(m, v, x))


# --- casts ------------------------------------------------------------------------------------
@pytest.mark.devices
@pytest.mark.parametrize("dst", CAST_DTYPES)
@pytest.mark.parametrize("src", CAST_DTYPES)
def test_cast_all_pairs(src, dst, rng):
    a = cast_source(rng, (3, 4), src, dst)
    before = a.copy()
    t = as_tensor(a)
    got = t.cast(ember_dtype(dst))
    check(got, a.astype(dst))
    assert got.kind is {"f": ember.Float, "b": ember.Bool}.get(np.dtype(dst).kind, ember.Int)
    assert t.dtype == np.dtype(src)
    np.testing.assert_array_equal(a, before)


@pytest.mark.parametrize("spec, want", [
    (float, "float32"), (int, "int64"), (bool, "bool"), (np.float64, "float64"),
    (np.dtype(np.int8), "int8"), ("int32", "int32"), (ember.uint8, "uint8"),
], ids=["float", "int", "bool", "np.float64", "np.dtype(int8)", "str_int32", "ember.uint8"])
def test_cast_dtype_spellings(spec, want):
    a = np.array([0.0, 1.7, 2.2, 3.0])
    check(as_tensor(a).cast(spec), a.astype(want))
    check(as_tensor(a).astype(spec), a.astype(want))


def test_cast_float_to_int_truncates_towards_zero():
    a = np.array([2.7, -2.7, 0.5, -0.5, 1e9, -1e9], np.float64)
    check(as_tensor(a).cast(ember.int64), np.array([2, -2, 0, 0, 1000000000, -1000000000]))
    check(as_tensor(a.astype(np.float32)).cast(ember.int32), a.astype(np.float32).astype(np.int32))


@pytest.mark.devices
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_cast_non_contiguous(layout, rng):
    base, tview, aview = LAYOUTS[layout]
    a = rng.uniform(-50, 50, base)
    check(tview(as_tensor(a)).cast(ember.int32), aview(a).astype(np.int32))


@pytest.mark.parametrize("shape", [(), (0,), (3, 0)], ids=["0d", "empty", "empty2d"])
def test_cast_degenerate_shapes(shape, rng):
    a = np.asarray(rng.uniform(-5, 5, shape))
    check(as_tensor(a).cast(ember.float32), a.astype(np.float32))
    check(as_tensor(a).cast(ember.bool_), a.astype(bool))


def test_cast_large(rng):
    a = rng.uniform(-1e4, 1e4, LARGE).astype(np.float32)
    check(as_tensor(a).cast(ember.int32), a.astype(np.int32))


# --- special values -----------------------------------------------------------------------------
NAN, INF = math.nan, math.inf


SPECIAL = [
    ("log", lambda t: t.log(), [0.0, -1.0, INF, NAN], [-INF, NAN, INF, NAN]),
    ("log1p", lambda t: t.log1p(), [-1.0, -2.0, 0.0, INF], [-INF, NAN, 0.0, INF]),
    ("sqrt", lambda t: t.sqrt(), [-1.0, 0.0, INF, NAN], [NAN, 0.0, INF, NAN]),
    ("rsqrt", lambda t: t.rsqrt(), [0.0, 4.0, INF, -1.0], [INF, 0.5, 0.0, NAN]),
    ("exp", lambda t: t.exp(), [-INF, INF, 1000.0, NAN], [0.0, INF, INF, NAN]),
    ("recip", lambda t: t.recip(), [0.0, -0.0, INF, 4.0], [INF, -INF, 0.0, 0.25]),
    ("tanh", lambda t: t.tanh(), [-INF, INF, 50.0, -50.0], [-1.0, 1.0, 1.0, -1.0]),
    ("sigmoid", lambda t: t.sigmoid(), [-1000.0, 1000.0, -INF, INF], [0.0, 1.0, 0.0, 1.0]),
    ("erf", lambda t: t.erf(), [-INF, INF, 0.0, NAN], [-1.0, 1.0, 0.0, NAN]),
    ("relu", lambda t: t.relu(), [NAN, -INF, INF, -0.0], [NAN, 0.0, INF, 0.0]),
    ("gelu", lambda t: t.gelu(), [INF, 0.0, 10.0, NAN], [INF, 0.0, 10.0, NAN]),
    ("silu", lambda t: t.silu(), [INF, 0.0, -1000.0, NAN], [INF, 0.0, 0.0, NAN]),
    ("round", lambda t: t.round(),
     [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 4503599627370495.5, INF, NAN, 8388607.5,
      -3.5, -0.4, 1e300],
     [0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 0.0, 4503599627370496.0, INF, NAN, 8388608.0, -4.0,
      -0.0, 1e300]),
    ("floor", lambda t: t.floor(), [-0.5, 0.5, -INF, NAN, 1e30], [-1.0, 0.0, -INF, NAN, 1e30]),
    ("ceil", lambda t: t.ceil(), [-0.5, 0.5, INF, NAN], [-0.0, 1.0, INF, NAN]),
    ("trunc", lambda t: t.trunc(), [-1.7, 1.7, -INF, NAN], [-1.0, 1.0, -INF, NAN]),
    ("sign", lambda t: t.sign(), [-3.0, 0.0, 2.0, NAN, -INF], [-1.0, 0.0, 1.0, NAN, -1.0]),
    ("abs", lambda t: abs(t), [-INF, -0.0, NAN, -2.5], [INF, 0.0, NAN, 2.5]),
    ("clamp", lambda t: t.clamp(-1, 1), [NAN, -INF, INF, 0.5], [NAN, -1.0, 1.0, 0.5]),
    ("is_nan", lambda t: t.is_nan(), [NAN, INF, 0.0], [True, False, False]),
    ("is_inf", lambda t: t.is_inf(), [NAN, INF, -INF, 0.0], [False, True, True, False]),
    ("is_finite", lambda t: t.is_finite(), [NAN, INF, -INF, 0.0], [False, False, False, True]),
    ("acos", lambda t: t.acos(), [1.0, -1.0, 1.5, NAN], [0.0, math.pi, NAN, NAN]),
    ("atanh", lambda t: t.atanh(), [1.0, -1.0, 2.0, NAN], [INF, -INF, NAN, NAN]),
    ("acosh", lambda t: t.acosh(), [1.0, 0.5, INF, NAN], [0.0, NAN, INF, NAN]),
    ("cosh", lambda t: t.cosh(), [INF, -INF, -800.0, NAN], [INF, INF, INF, NAN]),
    ("sinh", lambda t: t.sinh(), [INF, -INF, -800.0, NAN], [INF, -INF, -INF, NAN]),
    ("expm1", lambda t: t.expm1(), [-INF, INF, 800.0, NAN], [-1.0, INF, INF, NAN]),
    ("log2", lambda t: t.log2(), [0.0, -1.0, 8.0, INF], [-INF, NAN, 3.0, INF]),
    ("log10", lambda t: t.log10(), [0.0, -1.0, 1000.0, INF], [-INF, NAN, 3.0, INF]),
    ("signbit", lambda t: t.signbit(), [-0.0, 0.0, -INF, -NAN], [True, False, True, True]),
    ("logaddexp", lambda t: t.logaddexp(t), [INF, -INF, NAN, 0.0], [INF, -INF, NAN, math.log(2)]),
    ("hypot", lambda t: t.hypot(t * 0 + NAN), [INF, -INF, 0.0, 1.0], [INF, INF, NAN, NAN]),
]


ZERO_SIGNS = [
    ("sign", lambda t: t.sign(), np.sign, [-0.0, 0.0, -2.0]),
    ("copysign", lambda t: t.copysign(-1.0), lambda x: np.copysign(x, -1), [0.0, 2.0, -0.0]),
    ("nextafter_up", lambda t: t.nextafter(1.0), lambda x: np.nextafter(x, np.ones((), x.dtype)),
     [0.0, -0.0, 1.0]),
    ("nextafter_down", lambda t: t.nextafter(-1.0), lambda x: np.nextafter(x, -np.ones((), x.dtype)),
     [0.0, 1.0, -np.finfo(np.float32).tiny]),
    ("neg", lambda t: -t, np.negative, [0.0, -0.0]),
    ("round", lambda t: t.round(), np.round, [-0.4, 0.4, -0.0, -0.5, 0.5, -2.5]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_an_exponent_of_two_squares_bit_for_bit(dtype):
    """``x ** 2`` runs as the product (``kernels/scalar.py`` ``power``: powf is a call per
    element): bit for bit numpy's power, which squares too, over special values, subnormals
    and overflow, for a scalar exponent (Python, numpy, ``ember.pow``), a tensor exponent
    with 2 among other values, and a fused outer-product chain."""
    tiny = np.finfo(dtype).smallest_subnormal
    a = np.array([-0.0, 0.0, INF, -INF, NAN, 3.0, -1.5, 1e30, -1e-30, tiny, 1.1, -7.25], dtype)

    def bits(x):
        return x.view(f"u{x.itemsize}")

    want = bits(np.power(a, 2))
    for got in (as_tensor(a) ** 2, as_tensor(a) ** 2.0, as_tensor(a) ** np.float32(2),
                ember.pow(as_tensor(a), 2)):
        np.testing.assert_array_equal(bits(got.numpy()), want)
    # (numpy's power over an exponent array is its SIMD pow, off by an ulp at 1e30 ** 2 in
    # float64: the squares are compared with the products, the rest within a tolerance)
    e = np.array([2, 2.5, 2, 3, 2, 2, 0.5, 2, 2, 2, -2, 2], dtype)
    got = (as_tensor(a) ** as_tensor(e)).numpy()
    two = e == 2
    np.testing.assert_array_equal(bits(got[two]), bits(a[two] * a[two]))
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(got[~two], np.power(a[~two], e[~two]), rtol=1e-6)
    rng = np.random.default_rng(7)
    c, r = rng.standard_normal((300, 1)).astype(dtype), rng.standard_normal(40).astype(dtype)
    got = ((as_tensor(c) - as_tensor(r)) ** 2 + 1).numpy()
    np.testing.assert_array_equal(bits(got), bits((c - r) * (c - r) + 1))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn, ref, inputs", [pytest.param(*c[1:], id=c[0]) for c in ZERO_SIGNS])
def test_signs_of_zeros_and_next_values(fn, ref, inputs, dtype):
    """Results that differ from numpy's only in the sign of a zero or by one ulp (what
    ``check``'s tolerances cannot see): compared bit for bit."""
    a = np.array(inputs, dtype)
    got = fn(as_tensor(a)).numpy()
    want = ref(a)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


@pytest.mark.devices
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, fn, inputs, expected", [pytest.param(*c, id=c[0]) for c in SPECIAL])
def test_special_values(name, fn, inputs, expected, dtype):
    a = np.array(inputs, dtype)
    want = np.array(expected)
    want = want if want.dtype == bool else want.astype(dtype)
    check(fn(as_tensor(a)), want, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_clamp_min_above_max_gives_max(dtype):
    """numpy.clip and torch.clamp: when min > max every element becomes max."""
    a = np.array([0, 1, 5, -3], dtype)
    check(as_tensor(a).clamp(2, 1), np.clip(a, 2, 1))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_round_matches_numpy_on_float_ties(dtype, rng):
    halves = (np.arange(-40, 41) / 2.0).astype(dtype)
    check(as_tensor(halves).round(), np.round(halves))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_propagate_nan(op, dtype):
    a = np.array([NAN, 1.0, NAN, 2.0], dtype)
    b = np.array([1.0, NAN, NAN, 3.0], dtype)
    got = getattr(as_tensor(a), op)(as_tensor(b))
    check(got, getattr(np, op)(a, b))


def test_nan_comparisons():
    a = as_tensor(np.array([NAN, 1.0, NAN]))
    b = as_tensor(np.array([NAN, NAN, 1.0]))
    check(a == b, [False, False, False])
    check(a != b, [True, True, True])
    check(a < b, [False, False, False])
    check(a >= b, [False, False, False])


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_division_by_zero_gives_zero(dtype):
    """docs/decisions.md: integer // and % by zero give 0, as numpy does."""
    a = as_tensor(np.array([7, -7, 0], dtype))
    z = as_tensor(np.zeros(3, dtype))
    check(a // z, np.zeros(3, dtype))
    check(a % z, np.zeros(3, dtype))
    check(a // 0, np.zeros(3, dtype))
    check(a % 0, np.zeros(3, dtype))


def test_integer_true_division_by_zero_follows_ieee():
    a = np.array([7, -7, 0], np.int32)
    got = as_tensor(a) / as_tensor(np.zeros(3, np.int32))
    check(got, np.array([INF, -INF, NAN]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_division_by_zero(dtype):
    a = np.array([1.0, -1.0, 0.0], dtype)
    z = np.zeros(3, dtype)
    check(as_tensor(a) / as_tensor(z), np.array([INF, -INF, NAN], dtype))
    with np.errstate(all="ignore"):
        check(as_tensor(a) // as_tensor(z), np.floor_divide(a, z))
        check(as_tensor(a) % as_tensor(z), np.remainder(a, z))


@pytest.mark.parametrize("dtype", ["int32", "int64", "float64"])
def test_remainder_sign_follows_divisor(dtype):
    a = np.array([7, -7, 7, -7, 6, -6], dtype)
    b = np.array([3, 3, -3, -3, 3, -3], dtype)
    check(as_tensor(a) % as_tensor(b), np.remainder(a, b))
    check(as_tensor(a) // as_tensor(b), np.floor_divide(a, b))
    check(as_tensor(a).remainder(as_tensor(b)), np.array([1, 2, -2, -1, 0, 0], dtype))


def test_float_remainder_sign_follows_divisor():
    a = np.array([-7.5, 7.5, -7.5, 7.5])
    b = np.array([2.0, -2.0, -2.0, 2.0])
    check(as_tensor(a) % as_tensor(b), np.array([0.5, -0.5, -1.5, 1.5]))


def test_integer_overflow_wraps_as_numpy():
    a = np.array([np.iinfo(np.int32).max, np.iinfo(np.int32).min], np.int32)
    with np.errstate(all="ignore"):
        check(as_tensor(a) + 1, a + np.int32(1))
        check(as_tensor(a) - 1, a - np.int32(1))


@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_pow_edge_cases(dtype):
    a = np.array([0, 2, -3, 5], dtype)
    b = np.array([0, 10, 3, 1], dtype)
    check(as_tensor(a) ** as_tensor(b), np.power(a, b))


@pytest.mark.parametrize("dtype, exponent", [("float32", 2), ("float32", 0.5), ("float64", -1.5),
                                             ("int64", 3), ("int32", 0), ("int32", 2.5)],
                         ids=lambda v: str(v))
def test_pow_method_with_scalar_exponent(dtype, exponent, rng):
    a = np.asarray(d_pow_exp(rng, (5,), dtype) + 1).astype(dtype)
    check(as_tensor(a).pow(exponent), a ** exponent, rtol=1e-6)


def test_pow_float_negative_base_fraction_is_nan():
    check(as_tensor(np.array([-8.0])) ** (1 / 3), np.array([NAN]))


def test_shift_and_bitwise_values():
    a = np.array([1, -8, 255, 0x0F0F], np.int32)
    check(as_tensor(a) << 3, a << 3)
    check(as_tensor(a) >> 2, a >> 2)  # arithmetic shift for signed ints, as numpy
    check(as_tensor(a) & 0xFF, a & 0xFF)
    check(as_tensor(a) ^ -1, a ^ -1)
    check(~as_tensor(a), ~a)
    check(as_tensor(a).bitwise_and(as_tensor(a)), a)


def test_bool_and_int_bitwise_promote():
    b = np.array([True, False, True])
    i = np.array([3, 3, 2], np.int32)
    check(as_tensor(b) & as_tensor(i), b & i)
    check(as_tensor(b) | as_tensor(i), b | i)
