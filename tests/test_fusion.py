"""Elementwise fusion (engine/fusion.py): fused results equal unfused ones, bit for bit.

Every check runs the same code with fusion on and off (``ember.fusion.set_enabled``) and
compares values, dtypes and shapes exactly; ``ember.fusion.stats()`` shows what ran.
"""
import functools
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
from checks import compiled_in_new_process
from ember import fusion

NONE, BALANCED = ember.CheckpointingStrategy.NONE, ember.CheckpointingStrategy.BALANCED
# the defaults (the tests below defer tiny tensors: hot_chains)
EAGER_MIN_SIZE, EAGER_SHORT_CHAIN = fusion.MIN_SIZE, fusion.SHORT_CHAIN


@pytest.fixture(autouse=True)
def fusion_on(hot_chains):
    previous = fusion.set_enabled(True)
    yield
    fusion.set_enabled(previous)


def run(fn, *arrays, fused):
    """``fn`` on tensors made from ``arrays``, with fusion on or off; results as numpy arrays."""
    previous = fusion.set_enabled(fused)
    try:
        out = fn(*[ember.from_numpy(a) if isinstance(a, np.ndarray) else a for a in arrays])
        outs = out if isinstance(out, (tuple, list)) else (out,)
        return [(o.numpy().copy(), o.dtype) for o in outs]
    finally:
        fusion.set_enabled(previous)


def same(fn, *arrays):
    """``fn`` fused and unfused: identical values (NaN included), dtypes and shapes."""
    got = run(fn, *arrays, fused=True)
    want = run(fn, *arrays, fused=False)
    for (g, gd), (w, wd) in zip(got, want):
        assert gd is wd and g.shape == w.shape, (gd, wd, g.shape, w.shape)
        np.testing.assert_array_equal(g, w)
    return got


def counting(fn):
    """(result of ``fn``, fusion counters while it ran)."""
    fusion.stats(reset=True)
    out = fn()
    return out, fusion.stats(reset=True)


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# --- what runs ---------------------------------------------------------------------------
def test_a_chain_is_one_kernel_with_one_output(rng):
    a, b, c = (ember.from_numpy(randn(rng, 1000)) for _ in range(3))
    y, st = counting(lambda: (a * b + c).tanh() * 0.5 + a)
    assert isinstance(y._buf, fusion.Deferred) and st["kernels"] == 0 and st["deferred"] == 5
    _, st = counting(lambda: y.numpy())
    assert st == {"deferred": 0, "kernels": 1, "fused_ops": 5, "outputs": 1, "eager": 0, "cold": 0}


# --- hot chains: a small chain compiles only once it repeats ------------------------------
@pytest.fixture
def hot_after_three(monkeypatch):
    monkeypatch.setattr(fusion, "HOT_RUNS", 3)
    monkeypatch.setattr(fusion, "SHORT_CHAIN", 0)   # (the tests' chains are short and tiny)
    monkeypatch.setattr(fusion, "_COLD", {})
    monkeypatch.setattr(fusion, "_PROGRAMS", {})


def test_a_small_chain_runs_op_by_op_until_it_is_hot(rng, hot_after_three):
    a, b = (randn(rng, 50) for _ in range(2))

    def chain(a, b):
        return ((a * b + 0.5).tanh() * 0.25 - a).exp()

    want = run(chain, a, b, fused=False)[0][0]
    for k in range(1, 5):
        (got,), st = counting(lambda: run(chain, a, b, fused=True))
        np.testing.assert_array_equal(got[0], want)    # op by op or fused: the same bits
        if k < 3:    # forced once, twice: the eager kernels, no compile
            assert st["kernels"] == 0 and st["cold"] == 6, (k, st)
        else:        # the third force compiles the chain; later ones reuse it
            assert st["kernels"] == 1 and st["fused_ops"] == 6 and st["cold"] == 0, (k, st)


def test_a_short_chain_of_tiny_tensors_runs_node_by_node(rng, monkeypatch):
    """Fewer than SHORT_SIZE elements and at most SHORT_CHAIN ops: the eager kernels, no fused
    kernel (its planning costs more than the launches); a longer chain of them fuses."""
    monkeypatch.setattr(fusion, "SHORT_CHAIN", 8)
    a = randn(rng, 3, 2, dtype=np.float64)
    short = lambda x: (x * 0.5 + 1.0).tanh() * x                     # 4 ops
    long = lambda x: functools.reduce(lambda h, _: (h * 0.9).sin(), range(6), x)   # 12 ops
    for fn, kernels, eager in ((short, 0, 4), (long, 1, 0)):
        (got,), st = counting(lambda: run(fn, a, fused=True))
        assert st["kernels"] == kernels and st["eager"] == eager, st
        np.testing.assert_array_equal(got[0], run(fn, a, fused=False)[0][0])   # the same bits


def test_a_large_chain_compiles_at_once(rng, hot_after_three, monkeypatch):
    monkeypatch.setattr(fusion, "HOT_SIZE", 64)
    a = ember.from_numpy(randn(rng, 64))
    _, st = counting(lambda: ((a * 3.0).exp() + a).numpy())
    assert st["kernels"] == 1 and st["cold"] == 0, st


def test_a_traced_step_compiles_its_chains_at_once(rng, hot_after_three):
    a = ember.from_numpy(randn(rng, 50))
    step = ember.compile(lambda x: ((x * 2.0).tanh() + x) * 0.5)
    _, st = counting(lambda: step(a).numpy())     # the trace: its replay runs the fused kernel
    assert st["kernels"] == 1 and st["cold"] == 0, st


def test_benchmark_warms_up_until_the_chains_are_hot(rng, hot_after_three):
    a = ember.from_numpy(randn(rng, 50))

    cold = []   # per call: the ops it ran op by op

    def fn():
        before = fusion.stats()["cold"]
        ((a * 1.5 + 0.25).sin() * a).numpy()
        cold.append(fusion.stats()["cold"] - before)

    ember.benchmark(fn, warmup=1, repeat=3, number=1)
    # the first call as any script's (op by op), the next compiles (HOT_RUNS is 1 in the
    # warm-up), one more warm-up; then the three samples; HOT_RUNS is back to its value
    assert cold == [4, 0, 0, 0, 0, 0], cold
    assert fusion.HOT_RUNS == 3


def test_shape_dtype_and_size_never_compute(rng):
    a = ember.from_numpy(randn(rng, 4, 5))
    y = (a * 2).exp()
    _, st = counting(lambda: (y.shape, y.dtype, y.ndim, len(y), y.numel(), y.kind))
    assert st["kernels"] == 0 and isinstance(y._buf, fusion.Deferred)


def test_reads_from_python_compute(rng):
    a = ember.from_numpy(randn(rng, 3))
    for read in (lambda t: t.numpy(), lambda t: t.tolist(), repr, lambda t: t[0].item(),
                 lambda t: np.asarray(t), lambda t: t.cumsum(0), lambda t: t.sort()):
        y = a * 3 + 1
        _, st = counting(lambda: read(y))
        assert st["kernels"] == 1, read
        assert y._buf is not None and not isinstance(y._buf, fusion.Deferred)


def test_intermediates_held_by_the_user_are_written_by_the_same_kernel(rng):
    a, b = (ember.from_numpy(randn(rng, 1000)) for _ in range(2))
    u = a * b                  # held: written out
    v = (u + 1).exp()          # u + 1 is a temporary: never stored
    w = v * u
    _, st = counting(lambda: w.numpy())
    assert st["kernels"] == 1 and st["outputs"] == 3     # w, and u and v which we hold
    _, st = counting(lambda: (u.numpy(), v.numpy()))
    assert st["kernels"] == 0                             # already computed, shared by the node
    x, y = a.numpy(), b.numpy()
    np.testing.assert_array_equal(u.numpy(), x * y)
    np.testing.assert_array_equal(w.numpy(), v.numpy() * (x * y))


def test_tensors_sharing_a_deferred_value_compute_it_once(rng):
    a = ember.from_numpy(randn(rng, 100)).autodiff()
    y = (a * 2).exp()
    inner = y.without_autodiff()
    assert inner._buf is y._buf
    _, st = counting(lambda: (inner.numpy(), y.numpy()))
    assert st["kernels"] == 1


def test_constants_are_kernel_arguments(rng):
    from ember.kernels.cpu import fused
    a = ember.from_numpy(randn(rng, 100))
    same(lambda x: (x * 0.9 + 0.25).exp(), a.numpy())
    before = len(fused._KERNELS)
    for k in (0.8, 0.7, 3.5):
        np.testing.assert_allclose((a * k + 0.125).exp().numpy(),
                                   np.exp(a.numpy() * np.float32(k) + np.float32(0.125)), rtol=1e-6)
    assert len(fused._KERNELS) == before     # the same kernel, whatever the values


def test_generated_kernel_source_is_a_readable_module(rng):
    a = ember.from_numpy(randn(rng, 100))
    (a * 2 + 1).sigmoid().numpy()
    from ember.kernels import fused
    mod = next(m for k, m in fused._MODULES.items()
               if isinstance(k, tuple) and any(e[0].startswith("sigmoid") for e in k[1]))
    text = open(mod.__file__).read()
    assert "def chain(" in text and "def flat(" in text and "def cuda_map(" in text
    assert "sigmoid" in text and "exec(" not in text


def test_each_op_calls_a_per_op_loop_shared_by_chains_and_never_writes_in_place():
    # the CPU task is a sequence of calls to per-op loops (one per scalar op, result dtype and
    # argument kinds, compiled once for every chain); a call that writes over its own input
    # runs LLVM's scalar fallback, so no node's row is the row of one of its arguments
    from ember.kernels import fused
    from ember.kernels.cpu import fused as cpu_fused
    leaves = (("a", None), ("s", "float32"), ("a", None))
    long_chain = (leaves, (("mul", "float32", (0, 1)), ("tanh_f32", "float32", (-1,)),
                           ("exp_f32", "float32", (-2,)), ("mul", "float32", (-3, 1)),
                           ("add", "float32", (-4, 2))), (4,))
    other_chain = (leaves, (("mul", "float32", (0, 1)), ("add", "float32", (-1, 2))), (1,))
    names, _ = fused._slots(long_chain)
    for k, (_, _, args) in enumerate(long_chain[1]):
        assert all(names[k] != names[-1 - i] for i in args if i < 0), (k, names)
    text = "\n".join(fused._blocked(long_chain, 0))
    assert "tanh_f32(" not in text and "loop_a__tanh_f32__float32(" in text
    assert "loop_as__mul__float32(" in text and "loop_aa__add__float32(" in text
    a = cpu_fused.loop_kernels(long_chain)
    b = cpu_fused.loop_kernels(other_chain)
    shared = set(a) & set(b)
    assert shared == {"loop_as__mul__float32", "loop_aa__add__float32"}
    assert all(a[n] is b[n] for n in shared)


# --- results equal, across dtypes and layouts ---------------------------------------------------
FLOAT_CHAINS = [
    lambda a, b: (a * b + 1.5).tanh() * 0.5 + a,
    lambda a, b: ((a - b).exp() / (b.abs() + 1)).sqrt().log1p(),
    lambda a, b: (a.sigmoid() * b).relu().maximum(a * -1).clamp(-0.3, 0.8),
    lambda a, b: ember.where(a > b, a.sin(), b.cos() ** 2) - (a * 3).round().floor(),
    lambda a, b: (a / 0.0 + b).is_inf() | (a.silu() < b.gelu()),
    lambda a, b: ((a * 1e3).cast(ember.int32) % 7).cast(a.dtype) * b,
    lambda a, b: -(a.rsqrt() + b.recip()).is_nan().cast(a.dtype) + a.sign() * b.trunc(),
    # the array API standard's functions (nextafter's float32 twin inside a chain)
    lambda a, b: (((a * 0.3).acos() + b.asinh()).cosh().log10() + a.atan2(b) * a.hypot(b).square()
                  - a.logaddexp(b).nextafter(b).copysign(a) + a.signbit().cast(a.dtype)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", range(len(FLOAT_CHAINS)))
def test_float_chains(rng, dtype, k):
    same(FLOAT_CHAINS[k], randn(rng, 50, dtype=dtype), randn(rng, 50, dtype=dtype))


INT_CHAINS = [
    lambda a, b: (a * 3 + b) // 2 - a % 3,
    lambda a, b: ((a & b) | (a ^ 5)) << 1 >> 2,
    lambda a, b: (a > b) & (a != 0) | ~(b <= 2),
    lambda a, b: (a.maximum(b) - a.minimum(b)).abs() * (-a).sign(),
    lambda a, b: a / (b.abs() + 1) + a.clamp(1, 40),                  # true division: float64
    lambda a, b: (a * 100).cast(ember.int8) + b.cast(ember.int8),      # wraps like numpy
    lambda a, b: a.floor() + b.round() * a.square() + (a.isnan() | b.isfinite()).cast(a.dtype),
]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("k", range(len(INT_CHAINS)))
def test_int_chains(rng, dtype, k):
    a = rng.integers(0, 100, 40).astype(dtype)
    b = rng.integers(1, 50, 40).astype(dtype)
    same(INT_CHAINS[k], a, b)


def test_bool_chains(rng):
    a, b = rng.random(30) < 0.5, rng.random(30) < 0.3
    same(lambda x, y: (~x & y) ^ (x | y) == y, a, b)
    same(lambda x, y: x.cast(ember.int32) * 3 + y.cast(ember.float32), a, b)


@pytest.mark.parametrize("src", [np.float32, np.float64, np.int64, np.int8, np.uint8, np.bool_])
@pytest.mark.parametrize("dst", ["float32", "float64", "int32", "int8", "uint8", "bool_"])
def test_casts_inside_a_chain(rng, src, dst):
    # values a float converts to without overflow (out of range it is undefined, as in numpy)
    v = rng.uniform(0 if dst == "uint8" else -30, 30, 20)
    if np.dtype(src).kind == "f":
        v[:4] = [0.0, -0.0, 0.5, np.nan if dst in ("bool_", "float32", "float64") else 1.0]
    a = v.astype(src)
    twice = (lambda x: x | x) if src is np.bool_ else (lambda x: x + x)
    same(lambda x: twice(x).cast(getattr(ember, dst)).cast(ember.float64) * 2, a)


def test_broadcasting_and_scalars(rng):
    a, b, c = randn(rng, 3, 1, 4), randn(rng, 5, 4), randn(rng, 4)
    same(lambda x, y, z: (x * y + z).exp() - 2.0 * x, a, b, c)
    same(lambda x, y, z: ((x - 1) * (y + 1)).tanh() + (z * 3), a, b, c)   # x - 1 is a smaller shape
    same(lambda x: (x * 2 + 1) * ember.tensor(3.0) + ember.tensor([0.5]), a)
    same(lambda x: 2 ** x - 1 / (x * x + 1), a)
    # a value broadcast to the whole shape (all strides 0, like a backward's seed): one scalar
    same(lambda x: (x * 2).exp() * ember.tensor(1.5).expand(*x.shape) - x[:1].expand(*x.shape), a)


def test_views(rng):
    m = randn(rng, 6, 8)
    same(lambda x: (x.T * 2 + 1).exp() * x.T, m)
    same(lambda x: (x[::2, 1::3] - x[1::2, ::3]).abs().sqrt(), m)
    same(lambda x: x.flip(1) * x + x.flip((0, 1)).sigmoid(), m)
    same(lambda x: x[:, :1].expand(6, 8) * x[:1].expand(6, 8) + x.permute(1, 0).T, m)
    same(lambda x: (x.reshape(2, 3, 8)[:, ::-1] * 3).tanh().reshape(6, 8)[1:-1] + 1, m)


# (x's shape, y's shape, how x is viewed): the strided loop's blocks of several short rows
# (contiguous inputs sliced, the others gathered row by row), its blocks along long rows
# and a chunk's tail, and rows stepped by the second-innermost strides across wraps of that
# dim, also from the middle of a run (the second task of "reversed_inner_3d"); a row broadcast
# over short rows is gathered by a task's first block only ("bias", "row_and_column")
_STRIDED_CASES = {
    "bias": ((2048, 64), (64,), None),
    "bias_ragged_blocks": ((1000, 60), (60,), None),   # a task's last block of 1 row
    "column": ((128, 2), (128, 1), None),
    "row_and_column": ((4, 1), (16,), None),
    "middle_broadcast": ((3, 40, 7), (40, 1), None),
    "sliced_rows": ((600, 60), (30,), lambda v: v[:, ::2]),
    # a block's rows gathered in one call: a per-row value (a fill) beside a held row, and
    # unit-stride pieces of longer rows
    "outer_product": ((2048, 1), (64,), None),
    "row_pieces": ((600, 64), (32,), lambda v: v[:, 5:37]),
    "reversed_inner_3d": ((40, 30, 20), (30, 1), lambda v: v[:, :, ::-1]),
    "long_rows": ((3, 16484), (16484,), None),
    "transposed_long_rows": ((16484, 3), (3, 1), lambda v: v.T),
    "short_bias": ((2048, 2), (2,), None),   # rows of 2 joined 32 at a time, bias repeated
    "short_bias_odd_rows": ((1001, 3), (3,), None),   # 7 at a time
}


@pytest.mark.parametrize("case", list(_STRIDED_CASES))
def test_strided_chains_in_blocks_of_rows(rng, case):
    """One chain over every layout, against numpy exactly (+, -, * and max round once)."""
    xs, ys, view = _STRIDED_CASES[case]
    x, y = randn(rng, *xs), randn(rng, *ys)
    if view is not None:
        x = view(x)
    chain = lambda a, b: ((a + b) * 2 - a * b).maximum(b)
    (got, _), = same(chain, x, y)
    np.testing.assert_array_equal(got, np.maximum((x + y) * 2 - x * y, y))
    _, stats = counting(lambda: run(chain, x, y, fused=True))
    assert stats["fused_ops"] >= 4, stats   # one kernel ran the chain


@pytest.mark.parametrize("min_size", [1, fusion.MIN_SIZE])
def test_zero_dim_empty_and_one_element(rng, monkeypatch, min_size):
    monkeypatch.setattr(fusion, "MIN_SIZE", min_size)
    same(lambda x: (x * 2 + 1).exp(), np.array(1.5, np.float32))
    same(lambda x: (x * 2 + 1).exp(), np.zeros((0, 3), np.float32))
    same(lambda x, y: (x * 2 + y).exp(), np.ones((1,), np.float32), randn(rng, 7))
    same(lambda x: ((x + 1) * 2).sum() + x * 3, randn(rng, 9))   # sizes mixed in one chain


def test_a_deferred_operand_of_another_shape(rng):
    a, b = randn(rng, 5, 1), randn(rng, 5, 6)
    same(lambda x, y: (x * 2).exp() + y * (x - 1), a, b)


# --- limits ------------------------------------------------------------------------------
def test_chains_longer_than_the_limit(rng, monkeypatch):
    monkeypatch.setattr(fusion, "MAX_NODES", 12)   # the logic at a small limit: quick to compile
    a = randn(rng, 64)
    n_ops = fusion.MAX_NODES * 4 + 3

    def long(x):
        for i in range(n_ops // 2):
            x = x * 0.999 + (0.001 if i % 2 else -0.002)
        return x
    same(long, a)
    x = ember.from_numpy(a)
    _, st = counting(lambda: long(x).numpy())
    assert st["fused_ops"] + st["eager"] == st["deferred"] == n_ops // 2 * 2
    assert n_ops / fusion.MAX_NODES <= st["kernels"] <= 2 * n_ops / fusion.MAX_NODES + 1


def test_shared_nodes_count_once_towards_the_limit(rng, monkeypatch):
    # each step reads the previous value three times: counting uses would double the size
    # estimate every step; counted once, 5 steps of 4 ops are 20 ops, one kernel
    monkeypatch.setattr(fusion, "MAX_NODES", 24)

    def diamonds(x):
        for _ in range(5):
            x = (x * x).tanh() + x * 0.5
        return x
    same(diamonds, randn(rng, 64))
    x = ember.from_numpy(randn(rng, 64))
    _, st = counting(lambda: diamonds(x).numpy())
    assert st == {"deferred": 20, "kernels": 1, "fused_ops": 20, "outputs": 1, "eager": 0,
                  "cold": 0}, st


@pytest.fixture
def few_arrays(monkeypatch):
    """CPU kernels limited to 8 arrays and 8 inputs: the segmenting logic, quick to compile."""
    monkeypatch.setattr(fusion, "MAX_ARRAYS", 8)
    monkeypatch.setattr(fusion, "MAX_LEAVES", 8)
    monkeypatch.setattr(fusion, "_PROGRAMS", {})   # programs are planned under the limits


def test_more_inputs_than_one_kernel_takes(rng, few_arrays):
    arrays = [randn(rng, 32) for _ in range(3 * fusion.MAX_ARRAYS)]

    def total(*xs):
        y = xs[0]
        for x in xs[1:]:
            y = y + x * 0.5
        return y
    same(total, *arrays)


def test_more_held_intermediates_than_one_kernel_writes(rng, few_arrays):
    def held(x):
        ys = [x]
        for i in range(2 * fusion.MAX_ARRAYS):
            ys.append((ys[-1] * 0.9).exp() - 1)
        return ys
    a = ember.from_numpy(randn(rng, 40))
    ys, st = counting(lambda: [y.numpy() for y in held(a)])
    assert st["kernels"] >= 3 and st["outputs"] == len(ys) - 1   # each held one written once
    same(held, a.numpy())


def test_a_chain_too_big_for_one_kernel_runs_in_segments(rng, few_arrays):
    # 16 values held and 12 input arrays in one chain, forced from its end: planned once and
    # run as consecutive segments that each fit 8 arrays; every held value written once
    def layers(*xs):
        ys, y = [], xs[0]
        for i in range(16):
            y = (y * 0.9).tanh() + xs[i % len(xs)] * 0.1
            ys.append(y)
        return ys[::-1]   # the last first: forcing it computes the whole chain
    arrays = [randn(rng, 40) for _ in range(12)]
    same(layers, *arrays)
    xs = [ember.from_numpy(a) for a in arrays]
    ys = layers(*xs)
    _, st = counting(lambda: ys[0].numpy())
    # every op computed once; 12 inputs + 16 written values in segments of <= 8 arrays: at
    # least 4 kernels; written: the 16 held values and, at each cut, the (at most 2) values
    # of the layer being computed that the next segment reads
    assert st["fused_ops"] == 16 * 4 and 4 <= st["kernels"] <= 6, st
    assert 16 <= st["outputs"] <= 16 + 2 * (st["kernels"] - 1), st
    assert all(not isinstance(y._buf, fusion.Deferred) or y._buf.value is not None for y in ys)


def test_a_chain_seen_again_reuses_its_program(rng, few_arrays, monkeypatch):
    # a training step builds the same chain each time: its segments are planned once, and
    # each run reads its own inputs through the cached program
    planned = []
    program = fusion._program
    monkeypatch.setattr(fusion, "_program", lambda key: planned.append(key) or program(key))

    def layers(*xs):
        y = xs[0]
        for i in range(12):
            y = (y * 0.9).tanh() + xs[i % len(xs)] * 0.1
        return y
    for _ in range(3):
        arrays = [randn(rng, 40) for _ in range(10)]
        same(layers, *arrays)   # fused (from the program) and unfused: identical
        _, st = counting(lambda: layers(*[ember.from_numpy(a) for a in arrays]).numpy())
        assert st["kernels"] >= 2, st   # 10 inputs: more than one kernel of 8 arrays
    assert len(planned) == 1


def test_small_ops_run_at_once(rng, monkeypatch):
    monkeypatch.setattr(fusion, "MIN_SIZE", 8)
    monkeypatch.setattr(fusion, "SHORT_CHAIN", EAGER_SHORT_CHAIN)
    a = ember.tensor([1.0, 2.0, 3.0, 4.0])
    y, st = counting(lambda: a * 2 + 1)
    assert st["deferred"] == 0 and not isinstance(y._buf, fusion.Deferred)


def test_tiny_cpu_outputs_run_at_once_outside_a_traced_step(rng, monkeypatch):
    """By default an op with at most 64 elements runs at once on the CPU (deferring it cost
    more than its eager run), unless it is the ninth of a run of such ops each reading the
    one before (a long chain: from there it defers and fuses); from 65 elements ops defer; a
    traced step defers tiny ops, and its replay gives the eager values."""
    monkeypatch.setattr(fusion, "MIN_SIZE", EAGER_MIN_SIZE)
    monkeypatch.setattr(fusion, "SHORT_CHAIN", EAGER_SHORT_CHAIN)
    monkeypatch.setattr(fusion, "_streak", 0)
    assert (EAGER_MIN_SIZE, EAGER_SHORT_CHAIN) == (65, 8)
    chain = lambda x: ((x * 2.0 + 1.0).tanh() - x) * 0.5                 # 5 ops
    tiny = ember.from_numpy(randn(rng, 8, 8, dtype=np.float64))
    y, st = counting(lambda: chain(tiny))
    assert st["deferred"] == 0 and not isinstance(y._buf, fusion.Deferred), st
    assert st["eager"] == 0 and st["kernels"] == 0, st       # ran as each op was called
    many, st = counting(lambda: [chain(tiny) for _ in range(5)])   # 25 ops, in runs of 5
    assert st["deferred"] == 0, st
    z, _ = counting(lambda: chain(ember.from_numpy(randn(rng, 65))))
    assert isinstance(z._buf, fusion.Deferred)
    # 20 ops in a row, each reading the one before: 8 at once, then a chain of 12, one kernel
    long = lambda x: functools.reduce(lambda h, _: (h * 0.9).sin(), range(10), x)
    w, st = counting(lambda: long(tiny))
    assert st["deferred"] == 12 and isinstance(w._buf, fusion.Deferred), st
    got, st = counting(lambda: w.numpy())
    assert st["kernels"] == 1 and st["fused_ops"] == 12, st
    np.testing.assert_array_equal(got, run(long, tiny.numpy(), fused=False)[0][0])
    _, st = counting(lambda: chain(tiny))   # the force ended the run: at once again
    assert st["deferred"] == 0, st
    step = ember.compile(chain)   # the trace defers (a short chain then runs node by node)
    got, st = counting(lambda: step(tiny).numpy())
    assert st["deferred"] == 5, st
    np.testing.assert_array_equal(got, y.numpy())
    np.testing.assert_array_equal(step(tiny).numpy(), y.numpy())    # the replay


# --- errors point at the op the user wrote -----------------------------------------------------
def test_errors_are_raised_by_the_op_not_when_computing(rng):
    a = ember.from_numpy(randn(rng, 3, 4))
    y = (a * 2).exp()
    with pytest.raises(ValueError, match="add: shapes"):
        y + ember.from_numpy(randn(rng, 5))
    with pytest.raises(TypeError, match="and: expected"):
        y & 1
    with pytest.raises(TypeError, match="exp"):
        ember.tensor([1, 2, 3]).exp()
    assert isinstance(y._buf, fusion.Deferred)       # nothing ran
    np.testing.assert_allclose(y.numpy(), np.exp(a.numpy() * 2), rtol=1e-6)


# --- autodiff ----------------------------------------------------------------------------
def _grads(strategy, fused, values):
    previous = fusion.set_enabled(fused)
    try:
        dev = ember.Device.cpu().gradient_checkpointing(strategy)
        x = ember.tensor(values, dtype=ember.float64, device=dev).require_grad()
        w = ember.tensor(values[::-1].copy(), dtype=ember.float64, device=dev).require_grad()
        h = x
        for _ in range(12):
            h = (h * w + 0.1).tanh() * 1.5 + x.sigmoid() * h
        y = h.exp() / (h * h + 1)
        loss = (y * x).sum() + y.max()
        grads = loss.backward()
        return x.grad(grads).numpy(), w.grad(grads).numpy(), loss.item()
    finally:
        fusion.set_enabled(previous)


@pytest.mark.parametrize("strategy", [NONE, BALANCED], ids=["NONE", "BALANCED"])
def test_gradients_are_identical_fused_and_unfused(rng, strategy):
    values = rng.standard_normal(200) * 0.5
    fused = _grads(strategy, True, values)
    plain = _grads(strategy, False, values)
    for f, p in zip(fused, plain):
        np.testing.assert_array_equal(f, p)
    for f, p in zip(fused, _grads(NONE if strategy is BALANCED else BALANCED, True, values)):
        np.testing.assert_array_equal(f, p)


def test_balanced_recompute_runs_fused(rng):
    dev = ember.Device.cpu().gradient_checkpointing(BALANCED)
    x = ember.tensor(rng.standard_normal(1000), device=dev).require_grad()
    y = x
    for _ in range(40):
        y = (y * 0.9).tanh()
    loss = y.sum()
    _, st = counting(lambda: loss.backward())
    # 40 recomputed ops and their gradient ops ran in a few kernels, not one kernel each
    assert st["fused_ops"] >= 80 and st["kernels"] * 8 <= st["fused_ops"]


def test_autodiff_records_without_computing(rng):
    x = ember.tensor(rng.standard_normal(100)).autodiff().require_grad()
    y, st = counting(lambda: (x * 2).exp() + x)
    assert st["kernels"] == 0 and y.is_tracked() and y.shape == (100,)


# --- on/off and the disk cache ----------------------------------------------------------------
def test_environment_variable_turns_fusion_off():
    code = "import ember; print(ember.fusion.is_enabled())"
    for value, want in (("0", "False"), ("1", "True")):
        env = dict(os.environ, EMBER_FUSION=value)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert out.stdout.strip() == want, out.stderr


CODE = """
    import numpy as np
    import ember

    ember.fusion.HOT_RUNS = 1   # every chain compiles at its first force
    ember.fusion.SHORT_CHAIN = 0   # (short chains of small tensors too)
    ember.fusion.MIN_SIZE = ember.fusion.TRACED_MIN_SIZE   # (tiny tensors defer too)

    a = ember.tensor(np.linspace(-1, 1, 64, dtype=np.float32))
    b = ember.tensor(np.linspace(0, 2, 64, dtype=np.float32))
    u = a * b
    y = ((u + 0.5).tanh() * 0.5 + a).exp()                 # two outputs: u and y
    def chain(m, v):
        return (m.T * 3 + 1).sigmoid() - v

    z = chain(a.reshape(8, 8), b.reshape(8, 8))   # the strided loop
    big = ember.tensor(np.linspace(-1, 1, 1 << 17, dtype=np.float32).reshape(512, 256))
    w = chain(big, ember.tensor(np.ones((256, 512), np.float32)))   # the same chain, large
    y.numpy(), z.numpy(), w.numpy()                                   # enough to run parallel
    assert ember.fusion.stats()["kernels"] == 3, ember.fusion.stats()
"""


def test_a_second_process_compiles_no_fused_kernel(tmp_path):
    first = compiled_in_new_process(CODE, tmp_path / "cache", EMBER_FUSION="1")
    assert any("ember_fused_" in name for name in first), first
    # each generated function compiled once: a literal argument (a driver's ``rows = 1``)
    # once made Numba compile a chain's task a second time
    twice = sorted({n for n in first if "ember_fused_" in n and first.count(n) > 1})
    assert not twice, twice
    assert compiled_in_new_process(CODE, tmp_path / "cache", EMBER_FUSION="1") == []


def test_threads_loading_one_new_chain_write_and_import_it_once(tmp_path, monkeypatch):
    """Threads forcing the same chain for the first time: no torn or vanished module file."""
    import threading

    from ember.kernels import fused

    monkeypatch.setattr(fused, "generated_dir", lambda: str(tmp_path))
    key = ((("a", None), ("s", "float64")), (("mul", "float64", (0, 1)), ("neg", "float64", (-1,))),
           (1,))
    barrier = threading.Barrier(8)
    results, errors = [], []

    def work():
        try:
            barrier.wait()
            results.append(fused.load(key))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 8 and all(m is results[0] for m in results)
    assert [p.name for p in tmp_path.iterdir()] == [fused.name(key) + ".py"]
