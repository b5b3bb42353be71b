"""Reductions that compute their pending elementwise input (engine/fusion.py, "fused
reductions"; kernels/cpu/fused_reduce.py): results equal the unfused ones bit for bit.

Each check runs the same code with fusion on and off and compares values, dtypes and shapes
exactly (the fused kernel adds in the order ``reduce.fold`` does); ``fusion.stats()`` shows
what ran and wrote (a fused reduction is a kernel; its root is not an output), and the calls
of ``engine/backends/cpu/fused.py``'s ``run_reduce`` are counted as ``reductions``.
"""
import numpy as np
import pytest
from checks import compiled_in_new_process

import ember
from ember import fusion
from ember.backends.cpu import fused as cpu_fused
from ember.kernels.cpu import fused_reduce

NONE, BALANCED = ember.CheckpointingStrategy.NONE, ember.CheckpointingStrategy.BALANCED


@pytest.fixture(autouse=True)
def fusion_on(monkeypatch, hot_chains):
    monkeypatch.setattr(fusion, "REDUCE_MIN_SIZE", 1)   # small shapes fuse too: quick tests
    previous = fusion.set_enabled(True)
    real = cpu_fused.run_reduce

    def counted(*args, **kwargs):
        _RUNS[0] += 1
        return real(*args, **kwargs)
    monkeypatch.setattr(cpu_fused, "run_reduce", counted)
    yield
    fusion.set_enabled(previous)


_RUNS = [0]


def stats(reset=False):
    """``fusion.stats`` and the fused reductions run (``reductions``)."""
    out = dict(fusion.stats(reset), reductions=_RUNS[0])
    if reset:
        _RUNS[0] = 0
    return out


def run(fn, arrays, fused):
    """(``fn`` on tensors of ``arrays`` as numpy arrays, fusion counters while it ran)."""
    previous = fusion.set_enabled(fused)
    try:
        tensors = [ember.from_numpy(a) for a in arrays]
        stats(reset=True)
        out = fn(*tensors)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        values = [(o.numpy().copy(), o.dtype) for o in outs]
        return values, stats(reset=True)
    finally:
        fusion.set_enabled(previous)


def same(fn, *arrays, fuses=1):
    """``fn`` fused and unfused: identical results; ``fuses`` reductions fused."""
    got, st = run(fn, arrays, True)
    want, _ = run(fn, arrays, False)
    for (g, gd), (w, wd) in zip(got, want):
        assert gd is wd and g.shape == w.shape, (gd, wd, g.shape, w.shape)
        np.testing.assert_array_equal(g, w)
    assert st["reductions"] == fuses, st
    return got, st


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# --- what runs ---------------------------------------------------------------------------------
def test_sum_of_a_product_is_one_kernel_writing_nothing(rng):
    a, b = randn(rng, 1000), randn(rng, 1000)
    (got,), st = same(lambda a, b: (a * b).sum(), a, b)
    assert st == {"deferred": 1, "kernels": 1, "fused_ops": 1, "outputs": 0, "eager": 0,
                  "cold": 0, "reductions": 1}
    np.testing.assert_allclose(got[0], (a.astype(np.float64) * b).sum(), rtol=1e-5)


def test_small_inputs_are_computed_first(rng, monkeypatch):
    # below REDUCE_MIN_SIZE the chain runs as a fused elementwise kernel and the shared sum
    # kernel reduces it: no fused reduction compiled per chain
    monkeypatch.setattr(fusion, "REDUCE_MIN_SIZE", 1000)
    a, b = randn(rng, 999), randn(rng, 999)
    _, st = same(lambda a, b: (a * b + 1).sum(), a, b, fuses=0)
    assert st["kernels"] == 1 and st["outputs"] == 1, st
    same(lambda a, b: (a * b + 1).sum(), randn(rng, 1000), randn(rng, 1000), fuses=1)


def test_the_chain_stays_pending_and_computes_later_when_read(rng):
    a, b = randn(rng, 500), randn(rng, 500)

    def fn(a, b):
        p = a * b + 1
        s = p.sum()
        return s, p
    (_, (p, _)), st = same(fn, a, b)
    assert st["kernels"] == 2 and st["outputs"] == 1   # the sum's kernel wrote nothing
    np.testing.assert_array_equal(p, a * b + np.float32(1))


def test_nodes_held_outside_are_written_by_the_reduction(rng):
    a, b = randn(rng, 700), randn(rng, 700)

    def fn(a, b):
        u = a * b
        s = (u.exp() + a).sum()
        st = stats()
        if fusion.is_enabled():
            assert st["kernels"] == 1 and st["outputs"] == 1   # u, written while reducing
        return s, u
    same(fn, a, b)


def test_a_root_held_by_another_pending_op_is_written(rng):
    a, b = randn(rng, 300), randn(rng, 300)

    def fn(a, b):
        p = a * b
        q = p + 2
        s = p.sum()
        if fusion.is_enabled():
            assert stats()["outputs"] == 1 and stats()["kernels"] == 1
        return s, q, p
    same(fn, a, b)


# --- values across dtypes, shapes, dims --------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [2, 15, 16, 17, 100, 4096, 33 * 2048 * 4 + 123, 300_001])
def test_float_full_sums(rng, dtype, n):
    a, b = randn(rng, n, dtype=dtype), randn(rng, n, dtype=dtype)
    same(lambda a, b: (a * b - 0.5).sum(), a, b)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8])
def test_int_sums(rng, dtype):
    a = rng.integers(-50 if dtype != np.uint8 else 0, 50, (7, 1429)).astype(dtype)
    b = rng.integers(0, 7, (7, 1429)).astype(dtype)
    (got,), _ = same(lambda a, b: (a * b + 3).sum(), a, b)
    assert got[1] is (ember.uint64 if dtype == np.uint8 else ember.int64)   # numpy's accumulators
    same(lambda a, b: (a * b + 3).sum(dim=1), a, b)


def test_bool_counts(rng):
    a, b = randn(rng, 50, 100), randn(rng, 50, 100)
    same(lambda a, b: (a > b).sum(), a, b)
    same(lambda a, b: ((a > b) & (a > 0)).sum(dim=-1), a, b)


# every op and every dtype (a fused reduction compiles for ~4 s, cold: not all nine pairs)
@pytest.mark.parametrize("op, dtype", [("prod", np.float32), ("prod", np.int32),
                                       ("max", np.float64), ("max", np.int32),
                                       ("min", np.float32)])
def test_prod_max_min(rng, op, dtype):
    a = (randn(rng, 64, 300) * 4).astype(dtype)
    b = (randn(rng, 300) * 4).astype(dtype)
    scale = 0.001 if op == "prod" else 1

    def fn(a, b):
        x = (a + b) * scale if dtype != np.int32 else (a - b) % 3 - 1
        return getattr(x, op)(), getattr(x, op)(dim=-1)
    got, _ = run(fn, (a, b), True)
    want, _ = run(fn, (a, b), False)
    for (g, _), (w, _) in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_max_propagates_nan(rng):
    a = randn(rng, 5000)
    a[1234] = np.nan
    same(lambda a: (a * 2).max(), a)


@pytest.mark.parametrize("shape, dim", [
    ((37, 129), -1), ((37, 129), None), ((5, 6, 70), (1, 2)), ((5, 6, 70), (2, 1)),
    ((3, 1, 4000), -1), ((1000, 3), 1), ((2, 3, 5), None)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_dims_fused(rng, shape, dim, keepdim):
    a, b = randn(rng, *shape, dtype=np.float64), randn(rng, *shape, dtype=np.float64)
    same(lambda a, b: ((a * b + 1).tanh() * a).sum(dim, keepdim=keepdim), a, b)


@pytest.mark.parametrize("shape, dim", [((37, 129), 0), ((5, 6, 70), 1), ((5, 6, 70), (0, 2)),
                                        ((0, 5), None), ((5, 0), -1), ((6, 1), -1)])
def test_other_dims_fall_back(rng, shape, dim):
    a, b = randn(rng, *shape), randn(rng, *shape)
    same(lambda a, b: (a * b).sum(dim), a, b, fuses=0)


def test_mean_var_and_std_fuse(rng):
    a, b = randn(rng, 40, 300), randn(rng, 300)
    same(lambda a, b: (a * b).mean(dim=-1), a, b)
    same(lambda a, b: (a - b).var(), a, b, fuses=2)    # the mean, then the squares
    same(lambda a, b: (a + b).std(dim=1), a, b, fuses=2)


# --- operands: broadcasting, views, scalars ----------------------------------------------------
def test_broadcasting_operands(rng):
    x, w, c = randn(rng, 64, 500), randn(rng, 500), randn(rng, 64, 1)
    same(lambda x, w, c: (x * w + c).sum(dim=-1), x, w, c)
    same(lambda x, w, c: (x * w + c).sum(), x, w, c)
    same(lambda w, c: (c * w).sum(dim=1), w, c)   # both operands broadcast


def test_views(rng):
    a, b = randn(rng, 300, 200), randn(rng, 200, 300)
    same(lambda a, b: (a * b.T).sum(dim=-1), a, b)                  # transposed
    same(lambda a, b: (a[::-1, 1::3] - b.T[:, :67]).sum(), a, b)    # reversed, strided
    same(lambda a, b: (a[5:] * 2.5).sum(dim=1), a, b)               # an offset view


def test_scalars_and_constants(rng):
    a = randn(rng, 2000)
    same(lambda a: (a * 0.5 + 2).sum(), a)
    same(lambda a: (ember.tensor(3.0) * a).sum(), a)


# --- big enough for the parallel kernel --------------------------------------------------------
@pytest.mark.parametrize("shape, dim", [((1 << 21) + 37, None), ((3, 700_001), -1),
                                        ((4096, 600), -1), ((2, 1 << 20), None)])
def test_parallel_sizes(rng, shape, dim):
    # ember ops make the inputs: fresh arrays from the pool, aligned as the root would be
    ember.random.seed(1)
    a, b = ember.random.normal(shape), ember.random.normal(shape)
    an, bn = a.numpy(), b.numpy()
    same(lambda a, b: (a * b + 1).sum(dim), an, bn)
    same(lambda a, b: (a > b).sum(dim), an, bn)


@pytest.mark.parametrize("start", [0, 1, 3])
def test_parallel_full_sum_of_unaligned_views(rng, start):
    # a parallel full reduction starts its chunks on a cache line of the array it reads;
    # the fused one reads no root and must split as the unfused one over its fresh root
    # (float64: the split shows in the last bits; float32 results round it away)
    n = (1 << 21) + 7
    a, b = randn(rng, n, dtype=np.float64), randn(rng, n, dtype=np.float64)
    same(lambda a, b: (a[start:] * b[start:]).sum(), a, b)


# --- autodiff -----------------------------------------------------------------------------------
def _grads(strategy, fused, a, b):
    previous = fusion.set_enabled(fused)
    try:
        dev = ember.Device.cpu().gradient_checkpointing(strategy)
        x = ember.tensor(a, device=dev).require_grad()
        w = ember.tensor(b, device=dev).require_grad()
        loss = (x * w).sum() + ((x * w + 1).exp() * x).sum(dim=-1).sum() + (x - w).tanh().max()
        grads = loss.backward()
        return loss.item(), x.grad(grads).numpy(), w.grad(grads).numpy()
    finally:
        fusion.set_enabled(previous)


@pytest.mark.parametrize("strategy", [NONE, BALANCED], ids=["NONE", "BALANCED"])
def test_gradients_identical_fused_and_unfused(rng, strategy):
    a, b = rng.standard_normal((8, 50)) * 0.5, rng.standard_normal(50) * 0.5
    fused = _grads(strategy, True, a, b)
    for f, p in zip(fused, _grads(strategy, False, a, b)):
        np.testing.assert_array_equal(f, p)
    other = BALANCED if strategy is NONE else NONE
    for f, p in zip(fused, _grads(other, True, a, b)):
        np.testing.assert_array_equal(f, p)


@pytest.mark.parametrize("strategy", [NONE, BALANCED], ids=["NONE", "BALANCED"])
def test_gradient_of_a_fused_sum_against_finite_differences(rng, strategy):
    a, b = rng.standard_normal((4, 6)) * 0.5, rng.standard_normal(6) * 0.5
    dev = ember.Device.cpu().gradient_checkpointing(strategy)

    def f(x, w):
        return ((x * w).sin() * x + w).sum(dim=-1).sum()
    x = ember.tensor(a, device=dev).require_grad()
    w = ember.tensor(b, device=dev).require_grad()
    grads = f(x, w).backward()
    gx, gw = x.grad(grads).numpy(), w.grad(grads).numpy()

    def num(a, b):
        return f(ember.tensor(a), ember.tensor(b)).item()
    eps = 1e-6
    for arr, g in ((a, gx), (b, gw)):
        want = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            hi, lo = arr.copy(), arr.copy()
            hi[i] += eps
            lo[i] -= eps
            want[i] = (num(hi, b) - num(lo, b)) / (2 * eps) if arr is a else \
                (num(a, hi) - num(a, lo)) / (2 * eps)
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-8)


def test_a_root_saved_by_autodiff_is_written_once(rng):
    x = ember.tensor(randn(rng, 1000, dtype=np.float64)).autodiff().require_grad()
    stats(reset=True)
    loss = (x * 2).exp().sum()       # exp's step keeps its output: written by the reduction
    st = stats(reset=True)
    assert st["reductions"] == 1 and st["outputs"] == 1
    grads = loss.backward()
    np.testing.assert_allclose(x.grad(grads).numpy(), 2 * np.exp(2 * x.numpy()), rtol=1e-12)
    assert stats()["kernels"] <= 1    # the gradient: no recompute of the exp


# --- the disk cache ------------------------------------------------------------------------------
CODE = """
    import numpy as np
    import ember

    ember.fusion.REDUCE_MIN_SIZE = 1   # these small inputs fuse too
    a = ember.tensor(np.linspace(-1, 1, 640, dtype=np.float32))
    b = ember.tensor(np.linspace(0, 2, 640, dtype=np.float32))
    s = ((a * b).exp() + a).sum()
    r = (a.reshape(20, 32).T * b.reshape(32, 20)).sum(dim=-1)   # a view: strided inputs
    s.numpy(), r.numpy()
    st = ember.fusion.stats()
    assert st["kernels"] == 2 and st["outputs"] == 0 and st["eager"] == 0, st
"""


def test_a_second_process_compiles_no_fused_reduction(tmp_path):
    first = compiled_in_new_process(CODE, tmp_path / "cache", EMBER_FUSION="1")
    assert any("ember_fusedred_" in name for name in first), first
    # each generated function compiled once: a literal 0 passed to FILL and SCRATCH once
    # compiled both a second time (~0.7 s of each fused reduction's cold compile)
    twice = sorted({n for n in first if "ember_fusedred_" in n and first.count(n) > 1})
    assert not twice, twice
    assert compiled_in_new_process(CODE, tmp_path / "cache", EMBER_FUSION="1") == []


def test_generated_source_is_a_readable_module(rng):
    from ember.kernels.cpu import fused_reduce
    key = ((("a", None), ("s", "float64")), (("mul", "float64", (0, 1)), ("exp", "float64", (-1,))),
           (1,))
    text = fused_reduce.source(key, "add", False)
    compile(text, "generated", "exec")
    assert "def fill(" in text and "def scratch(" in text and "exp(" in text
