"""Quantized tensors and autodiff (DESIGN §4 items 3 and 8, §5): no tape, frozen bases, gradients.

Every test runs under both checkpointing strategies (the ``device`` fixture of conftest.py).
"""
import numpy as np
import pytest

import ember
from ember import QuantScheme, QuantStore, QuantValue

SCHEMES = [QuantScheme(QuantValue.Q8S), QuantScheme(QuantValue.Q4S, [4], QuantStore.PACKED_U32),
           QuantScheme(QuantValue.Q8F, [2, 4])]


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.fixture(autouse=True)
def default_propagation():
    yield
    ember.set_quant_propagation("dequantize")


def test_quantizing_an_autodiff_tensor_detaches(leaf):
    w = leaf(randn(4, 8))
    q = w.quantize(SCHEMES[1])
    assert q.is_quantized and q.is_autodiff() and not q.is_tracked() and not q.is_require_grad()
    assert q.device.checkpointing is w.device.checkpointing
    assert w.is_require_grad()                                        # the source is unchanged
    with pytest.raises(ember.NotTrackedError):
        q.dequantize().sum().backward()
    for moved in (q.T, q[1:3], q.reshape(32), ember.cat([q, q], 0), q.dequantize()):
        assert moved.is_autodiff() and not moved.is_tracked()


def test_quantized_tensors_take_no_gradient(device, leaf):
    q = ember.tensor(randn(4, 8), device=device).quantize(SCHEMES[0])
    with pytest.raises(TypeError, match="require_grad"):
        q.require_grad()
    with pytest.raises(TypeError, match="require_grad"):
        q.set_require_grad(True)
    x = leaf(randn(3, 4))
    grads = (x @ q).sum().backward()
    assert q.grad(grads) is None and q.grad_remove(grads) is None
    assert x.grad(grads) is not None


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.describe())
def test_frozen_quantized_base_gives_the_float_base_gradients(device, leaf, scheme):
    """``x @ (W_q.dequantize() + a @ b)``: the same gradients for x, a, b as a float base."""
    W_q = ember.tensor(randn(8, 6, seed=1), device=device).quantize(scheme)
    W_f = ember.tensor(W_q.dequantize().numpy(), device=device)      # plain float, same values
    assert not W_f.is_quantized
    xs, as_, bs = randn(5, 8, seed=2), randn(8, 2, seed=3), randn(2, 6, seed=4)

    def grads_with(base):
        x, a, b = leaf(xs), leaf(as_), leaf(bs)
        loss = (x @ (base + a @ b)).tanh().sum()
        g = loss.backward()
        return [t.grad(g).numpy() for t in (x, a, b)]

    for got, want in zip(grads_with(W_q.dequantize()), grads_with(W_f)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.describe())
def test_gradients_through_the_quantized_matmul(device, leaf, scheme):
    """A tracked operand of the quantized matmul (either side) gets the float base's gradient."""
    W_q = ember.tensor(randn(8, 6, seed=1), device=device).quantize(scheme)
    W_f = ember.tensor(W_q.dequantize().numpy(), device=device)
    xs, ys = randn(5, 8, seed=2), randn(6, 3, seed=3)

    def grads_with(base):
        x, y = leaf(xs), leaf(ys)
        loss = ((x @ base).sin().sum() + (base @ y).cos().sum() + (x.sum(0) @ base).sum()
                + (base * x[:1].T).sum())
        g = loss.backward()
        return [t.grad(g).numpy() for t in (x, y)]

    for got, want in zip(grads_with(W_q), grads_with(W_f)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_propagated_results_are_detached(device, leaf):
    ember.set_quant_propagation("propagate")
    q = ember.tensor(randn(4, 8), device=device).quantize(SCHEMES[0])
    x = leaf(randn(3, 4))
    out = x @ q
    assert out.is_quantized and not out.is_tracked() and out.is_autodiff()
    # with a float tensor, promotion casts (dequantizes) the quantized operand first: a float,
    # tracked result, as in "dequantize" mode
    mixed = q * x[0].unsqueeze(-1)
    assert not mixed.is_quantized and mixed.is_tracked()
