"""Gradient checkpointing (DESIGN §4 item 11): strategies, recipes, recomputation."""
import gc
import tracemalloc

import numpy as np
import pytest

import ember
from ember.autograd.checkpoint import Recipe

NONE, BALANCED = ember.CheckpointingStrategy.NONE, ember.CheckpointingStrategy.BALANCED


def dev(strategy):
    return ember.Device.cpu().gradient_checkpointing(strategy)


def grads_of(build, strategy, *arrays):
    leaves = [ember.tensor(a, dtype=ember.float64, device=dev(strategy)).require_grad() for a in arrays]
    grads = build(*leaves).backward()
    return [np.asarray(t.grad(grads)) if t.grad(grads) is not None else None for t in leaves]


def assert_identical(build, *arrays):
    none = grads_of(build, NONE, *arrays)
    balanced = grads_of(build, BALANCED, *arrays)
    for a, b in zip(none, balanced):
        np.testing.assert_array_equal(a, b)
    return balanced


rng = np.random.default_rng(7)
A, B, C = rng.normal(size=(4, 5)), rng.normal(size=(5, 3)), rng.normal(size=(4, 5))


# --- strategies on devices and tensors ---------------------------------------------------------
def test_devices_and_tensors_carry_the_strategy():
    cpu = ember.Device.cpu()
    assert cpu.checkpointing is None and not cpu.is_autodiff()
    assert cpu.autodiff().checkpointing is NONE
    d = cpu.gradient_checkpointing(BALANCED)
    assert d.is_autodiff() and d.checkpointing is BALANCED and d == cpu
    assert cpu.gradient_checkpointing().checkpointing is BALANCED        # the default argument
    t = ember.zeros(3, device=d)
    assert t.gradient_checkpointing_strategy() is BALANCED
    assert ember.zeros(3).gradient_checkpointing_strategy() is None
    assert (t * 2).gradient_checkpointing_strategy() is BALANCED


def test_with_gradient_checkpointing_strategy():
    t = ember.zeros(3).autodiff().require_grad()
    b = t.with_gradient_checkpointing_strategy(BALANCED)
    assert b.gradient_checkpointing_strategy() is BALANCED and t.gradient_checkpointing_strategy() is NONE
    assert b.is_require_grad()
    with pytest.raises(ValueError, match="not autodiff"):
        ember.zeros(3).with_gradient_checkpointing_strategy(BALANCED)


def test_mixing_strategies_raises_naming_both():
    a = ember.ones(3, device=dev(NONE))
    b = ember.ones(3, device=dev(BALANCED))
    for op in (lambda: a + b, lambda: a @ b, lambda: ember.cat([a, b]), lambda: ember.where(a > 0, a, b)):
        with pytest.raises(ember.StrategyError, match="NONE.*BALANCED|BALANCED.*NONE"):
            op()


def test_tensor_without_autodiff_takes_no_part_in_the_check():
    plain = ember.ones(3)
    for s in (NONE, BALANCED):
        out = ember.ones(3, device=dev(s)) * plain
        assert out.gradient_checkpointing_strategy() is s


# --- what BALANCED keeps ------------------------------------------------------------------------
def test_balanced_keeps_recipes_for_memory_bound_ops_only():
    x = ember.tensor(A, dtype=ember.float64, device=dev(BALANCED)).require_grad()
    e = x.exp()                                       # memory-bound: saves its output -> a recipe
    assert isinstance(e._node.out, Recipe) and e._node.recipe is not None
    w = ember.tensor(B, dtype=ember.float64, device=dev(BALANCED)).require_grad()
    m = e @ w                                         # compute-bound: w's gradient reads e -> the recipe
    assert isinstance(m._node.x[0], Recipe) and not isinstance(m._node.x[1], Recipe)
    s = m.sum(dim=1)                                  # compute-bound output: no recipe
    assert s._node.recipe is None
    t = m.tanh()                                      # memory-bound reading a kept (compute-bound) value
    assert isinstance(t._node.out, Recipe) and not isinstance(t._node.recipe.inputs[0], Recipe)
    y = ember.tensor(A, dtype=ember.float64, device=dev(NONE)).require_grad().exp()
    assert not isinstance(y._node.out, Recipe) and y._node.recipe is None


def test_mixed_graph_tracked_and_untracked_inputs():
    const = ember.tensor(C, dtype=ember.float64)

    def build(x, w):
        h = (x * const + 1).tanh()                    # memory-bound with an untracked input
        z = (h @ w).relu()                            # compute-bound then memory-bound
        g = z.gather(1, ember.tensor([[0], [2], [1], [0]]))
        return (g.sigmoid() * 3).sum() + h.max(dim=1).sum() + z.cumsum(0).mean()
    assert_identical(build, A, B)


def test_recompute_chain_several_ops_deep():
    def build(x):
        y = x
        for k in range(12):
            y = (y * 0.9 + 0.1).sin().exp() if k % 2 else (y - 0.3).tanh() * 1.5
        return (y @ ember.tensor(B, dtype=ember.float64)).sum()
    assert_identical(build, A)


def test_shared_subexpression_read_by_several_steps():
    def build(x, w):
        h = (x * 2).exp()                              # read by four steps below
        return ((h * h).sum() + (h @ w).sum() + h.sqrt().sum() + (h / (h + 1)).max())
    assert_identical(build, np.abs(A), B)


def test_views_and_movement_are_recomputed():
    def build(x):
        v = x.T.reshape(-1)[::2].flip(0)
        c = ember.cat([v, v.exp()], 0)
        return (c * c).sum() + x[1:, ::-1].sigmoid().prod()
    assert_identical(build, A * 0.1)


def test_deep_recompute_chain_is_iterative():
    def build(x):
        y = x
        # EXP keeps a recipe 1200 levels deep: past Python's 1000 frames, which a recursive
        # recompute would need at least one of per level
        for _ in range(1200):
            y = (y * 0.999).exp() * 0.5
        return y.sum()
    # fusion off: the recipes are the point, and a cold run would compile ~50 s of long chains
    previous = ember.fusion.set_enabled(False)
    try:
        assert_identical(build, np.full(3, 0.1))
    finally:
        ember.fusion.set_enabled(previous)


def test_rejected_backward_under_balanced_leaves_everything_as_it_was():
    d = dev(BALANCED)
    x = ember.tensor(A, dtype=ember.float64, device=d).require_grad()
    h = (x * 2).exp()
    h.sum().backward()                                 # consumes h's steps
    fresh = (x * 3).tanh()
    with pytest.raises(ember.GraphConsumedError):
        ((fresh * fresh).sum() + h.sum()).backward()
    grads = (fresh * fresh).sum().backward()
    t = np.asarray(fresh.inner())
    np.testing.assert_allclose(np.asarray(x.grad(grads)), 2 * t * (1 - t * t) * 3, rtol=1e-12)


def test_balanced_retains_less_memory_after_forward(unfused):
    n = 1 << 16
    data = np.linspace(-1, 1, n)

    def retained(strategy):
        # what the graph keeps: new allocations (tracemalloc) and blocks taken from the
        # caching pool (its arrays of 512 KiB reuse blocks tracemalloc saw before it started)
        x = ember.tensor(data, dtype=ember.float64, device=dev(strategy)).require_grad()
        gc.collect()
        pooled = ember.memory_stats(x.device)["bytes_in_use"]
        tracemalloc.start()
        y = x
        for _ in range(10):
            y = (y * 0.5).tanh().exp()
        loss = y.sum()
        del y
        gc.collect()
        kept, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        kept += ember.memory_stats(x.device)["bytes_in_use"] - pooled
        grads = loss.backward()
        return kept, np.asarray(x.grad(grads))

    retained(NONE), retained(BALANCED)   # compile first: the memory Numba keeps for new kernels
    kept_none, g_none = retained(NONE)   # is not the graph's
    kept_balanced, g_balanced = retained(BALANCED)
    np.testing.assert_array_equal(g_none, g_balanced)
    assert kept_none > 10 * n * 8                      # NONE keeps tanh and exp outputs
    assert kept_balanced * 3 <= kept_none, (kept_balanced, kept_none)


def test_balanced_recompute_fuses_into_the_backward_kernel(hot_chains):
    # the recomputed values are never written out: recompute and gradient are one fused
    # kernel whose only output is the gradient (fusion counts each value of the chain once)
    from ember import fusion
    if not fusion.is_enabled():
        pytest.skip("EMBER_FUSION=0: nothing is fused")
    x = ember.tensor(np.linspace(-1, 1, 64), device=dev(BALANCED)).require_grad()
    y = x
    for k in range(10):
        y = (y * 0.9).tanh() if k % 2 else (y + 0.1).sigmoid()
    loss = y.sum()
    fusion.stats(reset=True)
    g = np.asarray(x.grad(loss.backward()))
    st = fusion.stats(reset=True)
    assert st["kernels"] == 1 and st["outputs"] == 1, st
    assert st["fused_ops"] >= 20            # the recompute (20 ops) and the gradient together
    want = np.ones(64)
    ys = [np.linspace(-1, 1, 64)]
    for k in range(10):
        ys.append(np.tanh(ys[-1] * 0.9) if k % 2 else 1 / (1 + np.exp(-(ys[-1] + 0.1))))
    for k in reversed(range(10)):
        y_next = ys[k + 1]
        want = want * ((1 - y_next ** 2) * 0.9 if k % 2 else y_next * (1 - y_next))
    np.testing.assert_allclose(g, want, rtol=1e-12)
