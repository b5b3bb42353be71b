"""Elementwise fusion on CUDA: one cuda.jit kernel per chain, results equal to the CPU's."""
import numpy as np
import pytest
from cuda_helpers import assert_same, to_cuda

import ember
from ember import fusion

EAGER_MIN_SIZE = fusion.MIN_SIZE   # the default (hot_chains defers tiny tensors everywhere)


@pytest.fixture(autouse=True)
def fusion_on(hot_chains):
    previous = fusion.set_enabled(True)
    yield
    fusion.set_enabled(previous)


def both(fn, *arrays):
    """``fn`` on CUDA (fused) and on the CPU (unfused): the tensors, for assert_same."""
    fusion.stats(reset=True)
    got = fn(*[to_cuda(a) for a in arrays])
    got = got if isinstance(got, tuple) else (got,)
    for g in reversed(got):   # the last result first: it computes the others it reads
        g.numpy()
    stats = fusion.stats(reset=True)
    previous = fusion.set_enabled(False)
    try:
        want = fn(*[ember.from_numpy(a) for a in arrays])
    finally:
        fusion.set_enabled(previous)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        assert_same(g, w)
    return stats


def test_tiny_outputs_defer_on_cuda(cuda, rng, monkeypatch):
    """The CPU runs an op on at most 64 elements at once (``fusion.MIN_SIZE``); on CUDA, where
    a launch costs more than the Python, a chain of them defers and is one kernel."""
    monkeypatch.setattr(fusion, "MIN_SIZE", EAGER_MIN_SIZE)
    a = rng.standard_normal((4, 4)).astype(np.float32)
    st = both(lambda x: ((x * 2 + 1).tanh() - x) * 0.5, a)
    assert st["deferred"] == 5 and st["kernels"] == 1 and st["fused_ops"] == 5, st


def test_a_chain_is_one_kernel(cuda, rng):
    a, b = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    st = both(lambda x, y: ((x * y + 1).tanh() * 0.5 + x).exp(), a, b)
    assert st["kernels"] == 1 and st["fused_ops"] == 6 and st["outputs"] == 1


def test_held_intermediates_are_outputs(cuda, rng):
    a = rng.standard_normal(40).astype(np.float32)

    def f(x):
        u = x * 2 - 1
        return u, (u.sigmoid() > 0.4).cast(ember.float32) * u
    st = both(f, a)
    assert st["kernels"] == 1 and st["outputs"] == 2


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_integer_and_bool_chains(cuda, rng, dtype):
    a = rng.integers(0, 40, 30).astype(dtype)   # no uint8 overflow (numpy warns in the simulator)
    b = rng.integers(1, 20, 30).astype(dtype)
    both(lambda x, y: (((x * 3 + y) // 2 - x % y) > 10) | (x == y), a, b)
    both(lambda x, y: ((x & y) ^ 3).cast(ember.float64) / (y + 1), a, b)


def test_views_broadcasting_and_constants(cuda, rng):
    m = rng.standard_normal((4, 6)).astype(np.float64)
    c = rng.standard_normal((4, 1)).astype(np.float64)
    both(lambda x, y: (x.T * 2 + 1).sigmoid().T - y * 3, m, c)
    both(lambda x, y: (x[:, ::-2] + y).clamp(-0.5, 0.5) * x[:, 1::2], m, c)
    both(lambda x, y: (x * 2).exp() - y[:1, :1].expand(4, 6) * x, m, c)   # one value, broadcast


def test_chains_longer_than_the_limit(cuda, rng, monkeypatch):
    monkeypatch.setattr(fusion, "MAX_NODES", 12)   # the logic at a small limit: quick to compile
    a = rng.standard_normal(16).astype(np.float32)

    def long(x):
        for _ in range(fusion.MAX_NODES):
            x = x * 0.99 + 0.01
        return x
    st = both(long, a)
    assert st["kernels"] >= 2 and st["fused_ops"] + st["eager"] == 2 * fusion.MAX_NODES


def test_a_chain_too_big_for_one_kernel_runs_in_segments(cuda, rng):
    # more inputs and held values than one kernel takes (MAX_ARRAYS and MAX_LEAVES):
    # consecutive segments, every value as unfused
    arrays = [rng.standard_normal(16).astype(np.float32) for _ in range(fusion.MAX_LEAVES + 4)]

    def layers(*xs):
        ys, y = [], xs[0]
        for x in xs[1:]:
            y = (y * 0.9).tanh() + x * 0.1
            ys.append(y)
        return tuple(ys)   # (both() reads the last first: it computes the others)
    st = both(layers, *arrays)
    assert st["kernels"] >= 2 and st["outputs"] >= len(arrays) - 1, st


def test_autodiff_on_cuda_fuses_forward_and_backward(cuda, rng):
    a = rng.standard_normal(8)
    grads = []
    for fused in (True, False):
        previous = fusion.set_enabled(fused)
        try:
            x = to_cuda(a).autodiff().require_grad()
            y = ((x * 1.5).tanh() * x + 0.5).exp()
            grads.append(x.grad((y * y).sum().backward()))
        finally:
            fusion.set_enabled(previous)
    np.testing.assert_allclose(grads[0].numpy(), grads[1].numpy(), rtol=1e-12)
