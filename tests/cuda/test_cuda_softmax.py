"""The fused softmax and log_softmax on CUDA (``kernels/cuda/softmax.py``) against the CPU backend.

Small shapes: under the simulator every CUDA thread is a Python thread.
"""
import numpy as np
import pytest
from cuda_helpers import assert_same

import ember
from ember.ir import Op

OPS = ("softmax", "log_softmax")


def pair(a):
    c = ember.from_numpy(np.asarray(a))
    return c, c.to(ember.Device.cuda())


@pytest.fixture
def rng():
    return np.random.default_rng(11)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape, dim", [((5,), 0), ((3, 4), 0), ((3, 4), 1), ((3, 4), -1),
                                        ((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), 2),
                                        ((1, 4), 0), ((), 0), ((2, 70), 1)], ids=str)
def test_matches_cpu(cuda, rng, shape, dim, op, dtype):
    c, g = pair(rng.uniform(-5, 5, shape).astype(dtype))
    assert_same(getattr(g, op)(dim), getattr(c, op)(dim), rtol=2e-6 if dtype == "float32" else None)


@pytest.mark.parametrize("op", OPS)
def test_non_contiguous_views(cuda, rng, op):
    c, g = pair(rng.standard_normal((5, 6)))
    for view in (lambda t: t.T, lambda t: t.T[::2], lambda t: t[1:], lambda t: t[:, ::-2],
                 lambda t: t[1:3, None].expand(2, 3, 6)):
        for dim in (0, -1):
            assert_same(getattr(view(g), op)(dim), getattr(view(c), op)(dim))


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")   # the simulator's inf - inf
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", OPS)
def test_large_values_infinities_and_nan(cuda, op, dtype):
    a = np.array([[1000.0, 1001.0, -1000.0], [-np.inf, 1.0, 2.0], [-np.inf] * 3,
                  [np.nan, 1.0, 2.0], [np.inf, 0.0, 1.0]], dtype)
    c, g = pair(a)
    got = getattr(g, op)(1)
    assert_same(got, getattr(c, op)(1))
    assert np.isfinite(got.numpy()[0]).all() and np.isnan(got.numpy()[2:]).all()


@pytest.mark.parametrize("op", OPS)
def test_empty(cuda, op):
    for shape, dim in (((0, 3), 1), ((3, 0), 1), ((0,), 0)):
        c, g = pair(np.zeros(shape, np.float32))
        assert_same(getattr(g, op)(dim), getattr(c, op)(dim))


def test_int_input_raises(cuda):
    g = ember.zeros((2, 3), dtype=ember.int32, device=cuda)
    for op in OPS:
        with pytest.raises(TypeError, match=op):
            getattr(g, op)(1)


@pytest.mark.parametrize("strategy", [ember.CheckpointingStrategy.NONE,
                                      ember.CheckpointingStrategy.BALANCED], ids=lambda s: s.name)
def test_gradients_match_cpu(cuda, rng, strategy):
    a = rng.standard_normal((3, 5))
    w = rng.standard_normal((3, 5))
    grads = []
    for base in (ember.Device.cpu(), cuda):
        dev = base.gradient_checkpointing(strategy)
        x = ember.tensor(a, dtype=ember.float64, device=dev).require_grad()
        y = (x * 2).softmax(1)
        assert y._node.op is Op.SOFTMAX
        loss = ((y + x.log_softmax(0)) * ember.tensor(w, device=dev)).sum()
        grads.append(x.grad(loss.backward()))
    assert_same(grads[1], grads[0])
