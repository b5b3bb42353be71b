"""``backward`` replays the traced walk of a kind of graph it has seen ``HOT_BACKWARDS`` times
(autograd/graph.py): the gradients are the walk's (a tape adds sums and products in its own
order: equal to rounding), the graph is consumed as the walk consumes it, and a graph that
differs in anything the walk depends on is walked or traced on its own."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.autograd import graph

BALANCED = ember.CheckpointingStrategy.BALANCED


@pytest.fixture(autouse=True)
def fresh_programs():
    graph._PROGRAMS.clear()
    graph._COLD.clear()
    yield
    graph._PROGRAMS.clear()
    graph._COLD.clear()


def close(a, b, dtype):
    tol = dict(rtol=1e-12, atol=1e-14) if dtype == ember.float64 else dict(rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), **tol)


def programs():
    """The replay programs traced so far."""
    return [p for kinds in graph._PROGRAMS.values() for *_, p in kinds]


def walked(fn, *args):
    """The gradients ``fn`` gets from the plain walk (the replay turned off)."""
    saved = graph._replayed
    graph._replayed = lambda *a: None
    try:
        return fn(*args)
    finally:
        graph._replayed = saved


def mlp_grads(ws, x, y):
    h = F.linear(x, ws[0], ws[1]).tanh()
    loss = F.cross_entropy(F.linear(h, ws[2], ws[3]), y)
    grads = loss.backward()
    return [loss.inner()] + [w.grad(grads) for w in ws]


def ode_grads(theta, s0, a_fixed):
    s = s0
    xs = [s[:, 0]]
    a_t = a_fixed * theta.exp()
    for _ in range(6):
        k1 = s @ a_t
        s = s + (s + k1 * 0.05) @ a_t * 0.1
        xs.append(s[:, 0])
    loss = (ember.stack(xs) ** 2).mean()
    return [loss.inner(), theta.grad(loss.backward())]


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64], ids=["float32", "float64"])
def test_replayed_gradients_equal_the_walk(device, dtype):
    rng = np.random.default_rng(0)
    shapes = [(8, 2), (8,), (3, 8), (3,)]
    ws = [ember.tensor(rng.standard_normal(s), dtype=dtype, device=device).require_grad()
          for s in shapes]
    for k in range(graph.HOT_BACKWARDS + 3):
        x = ember.tensor(rng.standard_normal((16, 2)), dtype=dtype, device=device.base())
        y = ember.tensor(rng.integers(0, 3, 16), device=device.base())
        got = mlp_grads(ws, x, y)
        want = walked(mlp_grads, ws, x, y)
        for a, b in zip(got, want):
            close(a, b, dtype)
    replays = programs()
    if device.checkpointing is BALANCED:
        assert replays == []   # recomputed values: walked every time
    else:
        assert len(replays) == 1


def test_a_replayed_unrolled_solver_equals_the_walk(device):
    rng = np.random.default_rng(1)
    s0 = ember.tensor(rng.standard_normal((3, 2)), dtype=ember.float64, device=device.base())
    a_fixed = ember.tensor([[0.0, -1.0], [1.0, -0.2]], dtype=ember.float64, device=device.base())
    for k in range(graph.HOT_BACKWARDS + 2):
        theta = ember.tensor(rng.standard_normal((2, 2)) * 0.1, dtype=ember.float64,
                             device=device).require_grad()
        for a, b in zip(ode_grads(theta, s0, a_fixed), walked(ode_grads, theta, s0, a_fixed)):
            close(a, b, ember.float64)


@pytest.mark.devices   # (the CUDA tier too: bound launches replay there; the rest is too slow
def test_a_replay_consumes_the_graph_and_keeps_the_leaves(device):   # in its simulator)
    w = ember.tensor([1.0, -2.0, 3.0], dtype=ember.float64, device=device).require_grad()
    for _ in range(graph.HOT_BACKWARDS):
        ((w * w).exp().sum()).backward()
    loss = (w * w).exp().sum()
    grads = loss.backward()   # a replay (NONE) or the walk (BALANCED)
    want = 2 * np.array([1.0, -2.0, 3.0]) * np.exp(np.array([1.0, 4.0, 9.0]))
    close(w.grad(grads), want, ember.float64)
    with pytest.raises(graph.GraphConsumedError):
        loss.backward()
    assert w.grad((w * 3).sum().backward()).tolist() == [3.0, 3.0, 3.0]   # the leaf lives on


def test_graphs_that_differ_in_parameters_or_shared_arrays_are_their_own_kinds(device):
    """``sum(0)`` and ``sum(1)`` of a square matrix give graphs of the same shapes; and
    ``w * a * b`` saves one array twice when ``a`` is ``b``: each is a kind of its own."""
    rng = np.random.default_rng(2)
    w = ember.tensor(rng.standard_normal((3, 3)), dtype=ember.float64, device=device).require_grad()
    a = ember.tensor(rng.standard_normal((3, 3)), dtype=ember.float64, device=device.base())
    b = ember.tensor(rng.standard_normal((3, 3)), dtype=ember.float64, device=device.base())
    wn, an, bn = (t.numpy() for t in (w, a, b))
    n = graph.HOT_BACKWARDS
    # traced with a is b, then b apart (a program with one input for both would be wrong);
    # then the two dims in turn
    for dim, aliased in [(0, True)] * (n + 1) + [(0, False)] * 3 + [(k % 2, False) for k in range(2 * n)]:
        other, on = (a, an) if aliased else (b, bn)
        loss = ((w * a * other).sum(dim) ** 2).sum()
        g = w.grad(loss.backward())
        s = (wn * an * on).sum(dim, keepdims=True)
        close(g, 2 * s * an * on, ember.float64)


def test_unreplayable_ops_and_hooks_walk(device, monkeypatch):
    w = ember.tensor(np.eye(3) + 0.1, dtype=ember.float64, device=device).require_grad()
    for _ in range(graph.HOT_BACKWARDS + 2):
        g = w.grad(ember.linalg.det(w).backward())   # a rule that branches on the data
    close(g, np.linalg.det(w.numpy()) * np.linalg.inv(w.numpy()).T, ember.float64)
    assert programs() == []
    graph._COLD.clear()
    monkeypatch.setattr(graph, "_backward_hook", lambda nodes, root: None)
    for _ in range(graph.HOT_BACKWARDS + 2):
        (w * w).sum().backward()
    assert graph._PROGRAMS == {}   # a backward hook (ember.distributed) is never bypassed


@pytest.mark.devices
def test_benchmark_warm_up_reaches_the_replays(device):
    """ember.benchmark times a loop's steady state: its warm-up traces a kind of graph (and
    of optimizer step) the first time, without HOT_BACKWARDS calls, and restores the counts."""
    from ember import optim
    w = ember.tensor(np.ones((4, 4)), dtype=ember.float64, device=device).require_grad()
    opt = ember.optim.Adam([w], lr=0.1)

    def step():
        opt.step(((opt.params[0] * 2).tanh().sum()).backward())

    ember.benchmark(step, warmup=2, repeat=3, min_time=1e-4)
    assert graph.HOT_BACKWARDS == 8 and optim.HOT_STEPS == 3
    assert len(opt._programs) == 1
    if device.checkpointing is not BALANCED:
        assert [p for p in graph._PROGRAMS.values() if p is not None]
        walk = graph._walk   # and the kind stays hot: the next backward replays at once
        graph._walk = None
        try:
            step()
        finally:
            graph._walk = walk
