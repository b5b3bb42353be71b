"""The CPU backend's reductions, arg-reductions and scans (their launchers and kernels)
against numpy.

Inputs cover every dtype kind, 0-d / empty / one-element shapes, views that are
not C-contiguous (transposed, reversed, sliced), every combination of axes of a
3-D array, and sizes on both sides of the serial/parallel threshold.  The launchers
receive validated calls (normalised axes, no max/min of empty dims); the checks live
at the dispatch seam and are tested through the Tensor API here too.
"""
import itertools

import numpy as np
import pytest

import ember
from ember.backends.cpu import reduce, scan

RNG = np.random.default_rng(1234)
TEST_PARALLEL_MIN = 1 << 16  # the thresholds the `parallel` fixture sets
BIG = 1 << 17  # above the parallel threshold in tests that use the `parallel` fixture
assert BIG >= TEST_PARALLEL_MIN


@pytest.fixture
def parallel(monkeypatch):
    """Run kernels in parallel from TEST_PARALLEL_MIN elements, so small tests cover them.

    The real thresholds of folds, arg-folds and scans are higher (a few MB: a
    parallel launch costs more than a fast serial pass below that)."""
    monkeypatch.setattr(reduce, "FOLD_PARALLEL_MIN", TEST_PARALLEL_MIN)
    monkeypatch.setattr(reduce, "ARG_PARALLEL_MIN", TEST_PARALLEL_MIN)
    monkeypatch.setattr(scan, "SCAN_PARALLEL_MIN", TEST_PARALLEL_MIN)

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]
NP_REDUCE = {"add": np.add, "mul": np.multiply, "maximum": np.maximum,
             "minimum": np.minimum, "logical_and": np.logical_and, "logical_or": np.logical_or}


def make(shape, dtype, kind="any"):
    """Random data of ``dtype``; ``kind="prod"`` keeps products tame."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return RNG.random(shape) < 0.5
    if dtype.kind == "f":
        if kind == "prod":
            return RNG.uniform(0.5, 1.5, shape).astype(dtype)
        return RNG.standard_normal(shape).astype(dtype)
    hi = 3 if kind == "prod" else 100
    return RNG.integers(-hi, hi, shape).astype(dtype)


def views(base):
    """``base`` and views of it with other layouts, all of the same shape."""
    yield base
    if base.ndim >= 2:
        yield np.ascontiguousarray(np.swapaxes(base, 0, -1)).swapaxes(0, -1)  # transposed
        yield np.asfortranarray(base)
    if base.ndim >= 1:
        yield np.ascontiguousarray(base[::-1])[::-1]  # negative strides
        big = np.concatenate([base, base], axis=-1)
        yield big[..., ::2]  # strided slice
        yield big[..., base.shape[-1]:]  # offset slice


def sum_dtype(dtype):
    return np.dtype(np.int64) if np.dtype(dtype).kind in "biu" else np.dtype(dtype)


def reference(op, x, axes, out_dtype):
    if op in ("maximum", "minimum") or op.startswith("logical"):
        return NP_REDUCE[op].reduce(x, axis=axes).astype(out_dtype)
    return NP_REDUCE[op].reduce(x.astype(out_dtype), axis=axes, dtype=out_dtype)


def check_reduce(op, x, axes, out_dtype):
    out_dtype = np.dtype(out_dtype)
    got = reduce.reduce(op, x, axes, out_dtype)
    want = reference(op, x, axes, out_dtype)
    assert got.dtype == out_dtype
    assert got.shape == want.shape
    assert not np.shares_memory(got, x)
    if out_dtype.kind == "f" and op in ("add", "mul"):
        if op == "add":
            scale = np.add.reduce(np.abs(x.astype(np.float64)), axis=axes)
        else:
            scale = np.abs(want.astype(np.float64))
        tol = 1e-5 if out_dtype == np.float32 else 1e-12
        np.testing.assert_array_less(np.abs(got - want), tol * scale + 1e-30)
    else:
        np.testing.assert_array_equal(got, want)


def ops_for(dtype):
    """(op, input, out_dtype) combinations a caller would ask for."""
    dtype = np.dtype(dtype)
    yield "add", sum_dtype(dtype)
    yield "mul", sum_dtype(dtype)
    yield "maximum", dtype
    yield "minimum", dtype
    if dtype.kind == "b":
        yield "logical_and", dtype
        yield "logical_or", dtype


def all_axes(ndim):
    for r in range(ndim + 1):
        yield from itertools.combinations(range(ndim), r)


# --- reduce -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3, 4), (5, 1, 6), (1, 7, 1)])
def test_reduce_all_axes_and_layouts(dtype, shape):
    for op, out_dtype in ops_for(dtype):
        base = make(shape, dtype, "prod" if op == "mul" else "any")
        for x in views(base):
            for axes in all_axes(len(shape)):
                check_reduce(op, x, axes, out_dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (1,), (9,), (3, 17), (33, 2)])
def test_reduce_small_shapes(dtype, shape):
    for op, out_dtype in ops_for(dtype):
        x = make(shape, dtype, "prod" if op == "mul" else "any")
        for axes in all_axes(len(shape)):
            check_reduce(op, x, axes, out_dtype)


@pytest.mark.parametrize("shape, axes", [
    ((1000, 5), (0,)), ((7, 1000, 3), (1,)), ((5, 999), (1,)), ((3, 4097), (1,)),
    ((4100, 2), (0,)), ((2, 100, 4500), (1,)), ((2, 3, 4500), (1,)), ((3, 4500), (0,))])
def test_reduce_odd_sizes(shape, axes):
    # leftover rows after the packed blocks, tiles narrower than TILE, odd lanes
    x = make(shape, np.float64)
    check_reduce("add", x, axes, np.float64)
    check_reduce("maximum", x, axes, np.float64)
    i = make(shape, np.int64)
    check_reduce("add", i, axes, np.int64)


def test_reduce_permuted_4d():
    x = make((3, 4, 5, 6), np.float64).transpose(2, 0, 3, 1)
    for axes in all_axes(4):
        check_reduce("add", x, axes, np.float64)
        check_reduce("maximum", x, axes, np.float64)


@pytest.mark.parametrize("shape, axes", [
    ((0,), (0,)), ((3, 0), (1,)), ((3, 0), (0,)), ((0, 4), (0,)), ((0, 4), (1,)),
    ((2, 0, 3), (0, 2)), ((2, 0, 3), (1,)), ((0,), ()), ((3, 0), (0, 1))])
def test_reduce_empty(shape, axes):
    x = np.zeros(shape, np.float32)
    n_red = int(np.prod([shape[a] for a in axes]))
    for op, identity in (("add", 0), ("mul", 1)):
        got = reduce.reduce(op, x, axes, np.float32)
        np.testing.assert_array_equal(got, NP_REDUCE[op].reduce(x, axis=axes))
        if n_red == 0 and got.size:
            assert (got == identity).all()
    b = np.zeros(shape, bool)
    np.testing.assert_array_equal(reduce.reduce("logical_and", b, axes, bool), b.all(axis=axes))
    np.testing.assert_array_equal(reduce.reduce("logical_or", b, axes, bool), b.any(axis=axes))
    for op, name in (("maximum", "max"), ("minimum", "min")):
        if n_red == 0:   # refused at the dispatch seam, before the backend
            with pytest.raises(ValueError, match=f"{name}: cannot reduce an empty dim"):
                getattr(ember.tensor(x), name)(dim=axes)
        else:
            assert reduce.reduce(op, x, axes, np.float32).shape == np.max(x, axis=axes).shape


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reduce_nan_propagates(dtype):
    x = make((6, 40), dtype)
    x[2, 5] = np.nan
    x[4, 39] = np.nan
    for op in ("maximum", "minimum"):
        for axes in ((0,), (1,), (0, 1)):
            for v in (x, x.T):
                ax = axes if v is x else tuple(1 - a for a in axes)
                got = reduce.reduce(op, v, ax, dtype)
                np.testing.assert_array_equal(got, NP_REDUCE[op].reduce(v, axis=ax))
    assert np.isnan(reduce.reduce("add", x, (0, 1), dtype))


def test_reduce_casts_and_bool_sums():
    b = make((5, 7), np.bool_)
    np.testing.assert_array_equal(reduce.reduce("add", b, (1,), np.int64), b.sum(1))
    i = make((4, 9), np.int32)
    got = reduce.reduce("add", i, (0, 1), np.float64)
    assert got.dtype == np.float64 and got == i.sum(dtype=np.float64)
    # int32 sums accumulate in int64 without overflow
    big = np.full(1000, 2 ** 30, np.int32)
    assert reduce.reduce("add", big, (0,), np.int64) == 1000 * 2 ** 30


def test_reduce_no_axes_is_a_copy():
    x = make((3, 4), np.float32).T
    got = reduce.reduce("add", x, (), np.float32)
    assert not np.shares_memory(got, x)
    np.testing.assert_array_equal(got, x)
    got = reduce.reduce("maximum", x, (), np.float64)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, x)


def test_reduce_errors_at_the_seam():
    x = ember.ones((2, 3))
    with pytest.raises(IndexError, match="sum: dim 2 is out of range"):
        x.sum(2)
    with pytest.raises(ValueError, match="sum: repeated dim"):
        x.sum((0, 0))
    with pytest.raises(TypeError, match="sum: dim must be an int"):
        x.sum(1.5)
    with pytest.raises(TypeError, match="unsupported dtype float16"):
        ember.from_numpy(np.ones(3, np.float16))


@pytest.mark.parametrize("shape, axes", [
    ((BIG,), (0,)),                     # full reduction, split into chunks
    ((512, 256), (1,)),                 # many rows
    ((512, 256), (0,)),                 # row accumulation
    ((4, BIG // 4), (1,)),              # few long rows: split
    ((BIG // 4, 4), (0,)),              # narrow inner
    ((BIG // 4, 4), (1,)),              # short rows: one accumulator per output
    ((64, 32, 64), (0, 2)),             # two blocks: two passes
    ((2, 4096, 16), (1,)),              # few outer rows, split rows
])
def test_reduce_parallel(shape, axes, parallel):
    # a parallel kernel compiles for seconds: float64 add and max cover the logic
    x = make(shape, np.float64)
    check_reduce("add", x, axes, np.float64)
    check_reduce("maximum", x, axes, np.float64)
    check_reduce("maximum", x.T, tuple(len(shape) - 1 - a for a in axes), np.float64)


@pytest.mark.parametrize("dtype, ops", [
    (np.float32, ("add", "maximum")), (np.float64, ("add",)), (np.int32, ("add", "minimum")),
    (np.int8, ("add", "mul")), (np.bool_, ("add", "logical_or"))])
def test_reduce_parallel_rows(dtype, ops, parallel):
    # many contiguous rows, spread over tasks: lanes over ROW_LANE_BYTES of input, one block
    # per pass (rows of 333: a tail after the blocks of every lane count).  The lane count
    # depends on the input's itemsize and the accumulator on the op (sums of int8 and bool in
    # int64): every itemsize with its sum and one other op (a parallel kernel compiles for ~6 s,
    # cold; the serial tests above run every op on every dtype of DTYPES)
    x = make((1024, 333), dtype)
    init = np.zeros((), sum_dtype(dtype))[()]
    params = reduce.fold_params("add", x.dtype, init, 1024, 333, 1)
    assert params[0] and params[2] == 1, params   # parallel, rows spread over tasks
    assert params[5:] == (1, reduce.ROW_LANE_BYTES // x.dtype.itemsize), params
    for op, out_dtype in ops_for(dtype):
        if op in ops:
            check_reduce(op, x, (1,), out_dtype)


def test_reduce_parallel_nan_and_ints(parallel):
    x = make((BIG,), np.float64)
    x[BIG - 3] = np.nan
    assert np.isnan(reduce.reduce("maximum", x, (0,), np.float64))
    assert np.isnan(reduce.reduce("maximum", x.reshape(256, -1), (0, 1), np.float64))
    # bool and int sums accumulate in int64, in parallel too
    b = make((4, BIG // 4), np.bool_)
    check_reduce("add", b, (0, 1), np.int64)
    check_reduce("add", b[:, ::-1], (1,), np.int64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.bool_])
def test_reduce_any_alignment(dtype):
    # contiguous rows start their blocks on a cache line: a head of up to 63 bytes is
    # folded on its own, before blocks, rows and leftovers
    base = make(40000 + 64, dtype)
    for off in (0, 1, 3, 7, 15, 17, 63):
        for size in (40000, 4099, 700):
            x = base[off:off + size]
            for op, out_dtype in ops_for(dtype):
                if op != "mul":
                    check_reduce(op, x, (0,), out_dtype)
            check_reduce("add", x[:size - size % 7].reshape(-1, 7).T, (1,), sum_dtype(dtype))


def test_reduce_parallel_any_alignment(parallel):
    # a parallel full reduction splits at cache lines; the elements before the first one
    # are combined at the end
    base = make(BIG + 64, np.float64)
    for off in (0, 1, 3, 7):
        x = base[off:off + BIG - off]
        check_reduce("add", x, (0,), np.float64)
        check_reduce("maximum", x, (0,), np.float64)
    x = base.copy()
    x[1] = np.nan       # the first element of x[1:]: before its first cache line, or not
    assert np.isnan(reduce.reduce("maximum", x[1:], (0,), np.float64))


@pytest.mark.parametrize("outer, n, inner, ob, nsplit", [
    (1, BIG, 1, 1, 37),          # a full sum in many chunks, the last one short
    (2, 4096, 16, 1, 8),         # few rows, split
    (64, 512, 1, 3, 1),          # blocks of rows
    (3, 64, 2 * 4096 + 5, 1, 2),  # wide rows: tiles
])
def test_fold_parallel_same_bits_as_serial(outer, n, inner, ob, nsplit):
    # threads claim tasks as they get free, so which thread runs which task changes from run
    # to run; each task writes its own result and chunks combine in order, so the bits do
    # not: the parallel kernel equals the serial one (tasks in order) given the same split
    k = reduce.fold_kernel("add")
    x = make((outer * n * inner,), np.float32)
    results = []
    for fn in [k.serial] + [k.parallel] * 5:
        out = np.full(outer * inner, np.nan, np.float32)
        part = np.full(outer * nsplit * inner if nsplit > 1 else 0, np.nan)
        fn(x, x[:0], part, out, np.float32(0), np.float64(0), outer, n, inner, ob, nsplit,
           reduce.ROWS, reduce.PACK_ROWS, reduce.FLUSH)
        results.append(out)
    want = x.reshape(outer, n, inner).sum(1, dtype=np.float64).reshape(-1)
    np.testing.assert_allclose(results[0], want, rtol=1e-5, atol=1e-3)
    for got in results[1:]:
        np.testing.assert_array_equal(got, results[0])


@pytest.mark.parametrize("shape, axes", [
    ((BIG,), (0,)), ((3, BIG // 3), (1,)), ((64, 4096), (0,)), ((BIG // 4, 4), (0,)),
    ((BIG // 16, 16), (1,)),
])
def test_reduce_streamed_lanes(shape, axes, parallel, monkeypatch):
    # inputs past STREAM_MIN take PACK_STREAM lanes (longer runs per block), serial or not
    monkeypatch.setattr(reduce, "STREAM_MIN", 1 << 12)
    for dtype, out_dtype in ((np.float32, np.float32), (np.float64, np.float64),
                             (np.int64, np.int64)):
        x = make(shape, dtype)
        check_reduce("add", x, axes, out_dtype)
        check_reduce("maximum", x, axes, out_dtype)
        check_reduce("add", x[: shape[0] // 2], axes, out_dtype)   # a shorter input


def test_float32_sum_accuracy():
    x = RNG.uniform(0, 1, 1 << 20).astype(np.float32)
    got = reduce.reduce("add", x, (0,), np.float32)
    assert abs(float(got) - x.astype(np.float64).sum()) < 1e-5 * x.sum(dtype=np.float64)


def float32_sum_inputs(n):
    rng = np.random.default_rng(7)
    yield "randn", rng.standard_normal(n, dtype=np.float32)
    # each term changes the sum by less than a float32 ulp of a long running sum
    yield "1 + tiny", np.float32(1) + rng.uniform(0, 2 ** -20, n).astype(np.float32)


@pytest.mark.parametrize("n, parallel_min", [(16 << 20, None), (3 << 20, None), (123457, None),
                                             (123457, TEST_PARALLEL_MIN)])
def test_float32_sum_as_accurate_as_pairwise(n, parallel_min, monkeypatch):
    # float32 lanes for a few dozen rows, then float64: at least as accurate as numpy's
    # pairwise float32 sum (whose error here is about the final rounding), serial and parallel
    if parallel_min is not None:
        monkeypatch.setattr(reduce, "FOLD_PARALLEL_MIN", parallel_min)
    for name, x in float32_sum_inputs(n):
        exact = x.astype(np.float64).sum()
        err = abs(float(reduce.reduce("add", x, (0,), np.float32)) - exact)
        err_numpy = abs(float(x.sum()) - exact)
        ulp = float(np.spacing(np.float32(abs(exact))))
        assert err <= max(err_numpy, ulp), (name, err, err_numpy, ulp)
    # along a dim (rows side by side; rows of 64): the largest error over the outputs
    x = next(float32_sum_inputs(n))[1][:n - n % 64].reshape(-1, 64)
    for axis in (0, 1):
        exact = x.astype(np.float64).sum(axis)
        err = np.abs(reduce.reduce("add", x, (axis,), np.float32) - exact).max()
        err_numpy = np.abs(x.sum(axis) - exact).max()
        assert err <= max(err_numpy, float(np.spacing(np.float32(np.abs(exact).max())))), axis


# --- arg_reduce ------------------------------------------------------------------------
def check_arg(op, x, axis):
    got = reduce.arg_reduce(op, x, None if axis is None else axis % x.ndim)
    want = getattr(np, op)(x, axis=axis)
    assert got.dtype == np.int64
    assert got.shape == np.shape(want)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_arg_reduce(dtype):
    base = make((4, 5, 6), dtype)
    if np.dtype(dtype).kind in "iu":
        base = base % 3  # many ties: the first occurrence must win
    # argmin differs from argmax only in OP: fewer dtypes keep the compile time down
    ops = ("argmax", "argmin") if dtype in (np.float32, np.int32) else ("argmax",)
    for x in views(base):
        for op in ops:
            check_arg(op, x, None)
            for axis in (0, 1, 2, -1):
                check_arg(op, x, axis)
    for shape in ((), (1,), (7,), (1, 1)):
        x = make(shape, dtype)
        for op in ops:
            check_arg(op, x, None)
            for axis in range(len(shape)):
                check_arg(op, x, axis)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_arg_reduce_nan(dtype):
    x = make((5, 40), dtype)
    x[1, 7] = x[1, 3] = np.nan
    x[3, 0] = np.nan
    x[0, 20] = np.nan
    for op in ("argmax", "argmin"):
        for axis in (None, 0, 1):
            check_arg(op, x, axis)
            check_arg(op, x.T, axis)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_arg_reduce_rows_on_short_lanes(dtype):
    """Rows longer than ARG_SHORT and shorter than LANES_MIN_ROW run on SHORT_LANES lanes:
    ties (the first wins) and NaN (the first NaN wins) in every lane and block."""
    from ember.kernels.cpu.reduce import ARG_SHORT, LANES_MIN_ROW, SHORT_LANES
    for n in (ARG_SHORT + 1, 100, 3 * SHORT_LANES, 256, 1000, LANES_MIN_ROW - 1):
        x = np.round(make((6, n), dtype) * 2)   # many ties
        x[1, [n - 1, n // 2, SHORT_LANES + 3]] = np.nan
        x[2, n - 1] = np.nan
        x[3, :] = 7.0
        x[4, [5, n - 2]] = 99.0
        for op in ("argmax", "argmin"):
            check_arg(op, x, 1)


@pytest.mark.parametrize("threads", ["serial", "parallel"])
def test_arg_reduce_many_short_rows(threads, request):
    """Whole rows of at most ARG_SHORT values (argmax over 2 logits per point) scan straight
    into the result: ties (the first wins), NaN (the first NaN wins), one-value rows, on the
    serial and the parallel kernel."""
    from ember.kernels.cpu.reduce import ARG_SHORT
    if threads == "parallel":
        request.getfixturevalue("parallel")
    for n in (1, 2, 3, ARG_SHORT):
        x = np.round(make((BIG // n, n), np.float64))   # many ties
        x[5, n - 1] = np.nan
        x[9, 0] = np.nan
        if n > 2:
            x[11, [1, n - 1]] = np.nan
        x[13, :] = 3.0
        for op in ("argmax", "argmin"):
            check_arg(op, x, 1)
            check_arg(op, x.astype(np.float32), 1)


def test_arg_reduce_big_and_empty(parallel):
    x = make((BIG,), np.float64)
    check_arg("argmax", x, None)
    check_arg("argmax", x.reshape(512, -1), 0)
    check_arg("argmax", x.reshape(512, -1).T, 0)
    # ties and NaN across the chunks and lanes of the parallel kernel
    t = np.round(make((BIG,), np.float64))
    check_arg("argmax", t, None)
    check_arg("argmax", t.reshape(2, -1), 1)
    t[[70001, 100, 5000]] = np.nan
    check_arg("argmax", t, None)
    check_arg("argmax", t.reshape(2, -1), 1)
    x = np.zeros((3, 0), np.float32)
    for op in ("argmax", "argmin"):
        assert reduce.arg_reduce(op, x, 0).shape == (0,)
        with pytest.raises(ValueError, match=f"{op}: cannot reduce an empty"):   # at the seam
            getattr(ember.tensor(x), op)()
    with pytest.raises(IndexError, match="argmax: dim 2 is out of range"):
        ember.ones((3, 2)).argmax(2)


# --- scan ------------------------------------------------------------------------------
def check_scan(op, x, axis, out_dtype):
    out_dtype = np.dtype(out_dtype)
    got = scan.scan(op, x, axis % max(x.ndim, 1), out_dtype)
    fn = np.cumsum if op == "add" else np.cumprod
    want = fn(x, axis=axis, dtype=out_dtype)
    assert got.dtype == out_dtype
    assert got.shape == x.shape
    assert got.flags.c_contiguous
    assert not np.shares_memory(got, x)
    if out_dtype.kind == "f":
        tol = 1e-5 if out_dtype == np.float32 else 1e-12
        if op == "add":
            scale = np.cumsum(np.abs(x.astype(np.float64)), axis=axis)
        else:
            scale = np.abs(want.astype(np.float64))
        np.testing.assert_array_less(np.abs(got - want), tol * scale + 1e-30)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype, op", [(d, "add") for d in DTYPES] + [
    (np.float64, "mul"), (np.int64, "mul"), (np.bool_, "mul")])
def test_scan(dtype, op):
    out_dtype = sum_dtype(dtype)
    base = make((3, 4, 5), dtype, "prod" if op == "mul" else "any")
    for x in views(base):
        for axis in (0, 1, 2, -1):
            check_scan(op, x, axis, out_dtype)
    for shape in ((1,), (9,), (1, 1), (0,), (2, 0, 3)):
        x = make(shape, dtype, "prod")
        for axis in range(len(shape)):
            check_scan(op, x, axis, out_dtype)


def test_scan_0d_and_bool():
    got = scan.scan("add", np.array(2.5, np.float32), 0, np.float32)
    assert got.shape == () and got == 2.5
    b = make((6, 7), np.bool_)
    check_scan("add", b, 1, np.int64)
    check_scan("mul", b, 0, np.int64)
    with pytest.raises(IndexError, match="cumsum: dim 2 is out of range"):   # at the seam
        ember.tensor(b).cumsum(2)


@pytest.mark.parametrize("shape, axis", [
    ((BIG,), 0), ((3, BIG // 3), 1), ((512, 256), 0), ((512, 256), 1), ((2, 256, 256), 1)])
def test_scan_parallel(shape, axis, parallel):
    x = make(shape, np.float64)
    check_scan("add", x, axis, np.float64)
    check_scan("add", np.swapaxes(x, 0, -1), len(shape) - 1 - axis, np.float64)
