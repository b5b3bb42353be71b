"""Quantized tensors on CUDA (simulator or GPU) agree with the CPU, bit for bit where no sum is involved."""
import numpy as np
import pytest
from cuda_helpers import assert_same, to_cuda

import ember
from ember import QuantScheme, QuantStore, QuantValue

Q = QuantValue
PACKED = QuantStore.PACKED_U32
SCHEMES = [QuantScheme(Q.Q8S), QuantScheme(Q.Q8F, [4]), QuantScheme(Q.Q4S, [4], PACKED),
           QuantScheme(Q.Q2F, [2, 3], PACKED), QuantScheme(Q.Q4F, store=PACKED)]


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * np.float32(3)


def pair(a, scheme, **kw):
    """(CPU, CUDA) quantized tensors of ``a``."""
    return ember.tensor(a).quantize(scheme, **kw), to_cuda(a).quantize(scheme, **kw)


def same_quantized(g, c):
    """CUDA ``g`` and CPU ``c`` hold the same scheme, scales, integer storage and values."""
    assert g.device.type == "cuda" and g.is_quantized and g.dtype == c.dtype and g.shape == c.shape
    assert_same(g.quantization_scales(), c.quantization_scales(), rtol=0)
    assert_same(g.quantized_values(), c.quantized_values())
    assert_same(g.dequantize(), c.dequantize(), rtol=0)
    np.testing.assert_array_equal(np.asarray(g.to("cpu")._data.values), np.asarray(c._data.values))


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.describe())
def test_quantize_and_dequantize_agree(cuda, scheme):
    a = randn(5, 9)
    c, g = pair(a, scheme)
    same_quantized(g, c)
    s = np.asarray(c.quantization_scales().numpy() * np.float32(1.5))
    given = to_cuda(s) if s.ndim else s   # (a 0-d tensor moved to CUDA comes back 1-d)
    same_quantized(to_cuda(a).quantize(scheme, scales=given), ember.tensor(a).quantize(scheme, scales=s))


def test_pinned_example_and_float64(cuda):
    g = to_cuda(np.array([-1.8, -1.0, 0.0, 0.5], np.float32)).quantize(QuantScheme(Q.Q8S))
    np.testing.assert_array_equal(g.quantized_values().numpy(), [-127, -71, 0, 35])
    assert g.quantization_scales().item() == np.float32(1.8) / np.float32(127)
    a = randn(3, 8).astype(np.float64)
    c, g = pair(a, QuantScheme(Q.Q4S, [4], PACKED))
    same_quantized(g, c)
    z = to_cuda(np.zeros((2, 4), np.float32)).quantize(QuantScheme(Q.Q8S))
    assert z.quantization_scales().item() == np.finfo(np.float32).tiny


def test_errors(cuda):
    with pytest.raises(ValueError, match="quantize.*NaN or infinite"):
        to_cuda(np.array([1.0, np.nan], np.float32)).quantize(QuantScheme(Q.Q8S))
    with pytest.raises(ValueError, match="quantize.*NaN or infinite"):
        to_cuda(np.array([[1.0, np.inf]], np.float32)).quantize(QuantScheme(Q.Q8S, [2]))
    with pytest.raises(ValueError, match="quantize.*NaN or infinite"):
        to_cuda(np.array([1.0, -np.inf], np.float32)).quantize(QuantScheme(Q.Q8S), scales=1.0)


MOVES = [lambda t, i: t.T, lambda t, i: t[1:3], lambda t, i: t[:, 4:8], lambda t, i: t.flip(0),
         lambda t, i: t.reshape(1, 4, 8), lambda t, i: t.index_select(0, i),
         lambda t, i: ember.cat([t, t], 0), lambda t, i: t[:, 1:6],
         lambda t, i: t.unsqueeze(0).expand(2, 4, 8)]


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.describe())
def test_movement_agrees(cuda, scheme):
    a = randn(4, 8, seed=1)
    c, g = pair(a, scheme)
    idx = np.array([3, 0, 3])
    for move in MOVES:
        same_quantized(move(g, to_cuda(idx)), move(c, ember.tensor(idx)))


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.describe())
def test_quantized_matmul_agrees(cuda, scheme):
    w = randn(6, 9, seed=2)
    c, g = pair(w, scheme)
    x, y = randn(3, 6, seed=3), randn(9, 2, seed=4)
    d = c.dequantize().numpy().astype(np.float64)
    for got, want, ref in ((to_cuda(x) @ g, ember.tensor(x) @ c, x @ d),
                           (g @ to_cuda(y), c @ ember.tensor(y), d @ y),
                           (to_cuda(y.T) @ g.T, ember.tensor(y.T) @ c.T, y.T @ d.T),
                           (to_cuda(randn(2, 3, 6, seed=5)) @ g, ember.tensor(randn(2, 3, 6, seed=5)) @ c,
                            randn(2, 3, 6, seed=5) @ d)):
        assert_same(got, want, rtol=1e-5)
        np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_math_ops_and_transfers(cuda):
    a = randn(3, 8)
    c, g = pair(a, QuantScheme(Q.Q4S, [4], PACKED))
    assert_same(g.exp(), c.exp(), rtol=1e-5)
    assert_same(g + 1, c + 1)
    assert not (g * 2).is_quantized
    back = g.to("cpu")
    assert back.is_quantized and back.device.type == "cpu"
    np.testing.assert_array_equal(back.dequantize().numpy(), c.dequantize().numpy())
    up = c.to(g.device)
    same_quantized(up, c)
    assert g.nbytes == c.nbytes == 3 * 1 * 4
