"""CUDA runtime: caching allocator, streams, interop with user @cuda.jit kernels, autodiff."""
import numpy as np
import pytest
from cuda_helpers import assert_same

import ember
from ember.tensor import wrap as tensor_wrap
from ember.backends.cuda.array import CudaArray


def test_allocator_reuses_freed_blocks(cuda):
    backend = cuda.backend
    backend.empty_cache()
    t = ember.ones((64, 8), device=cuda)
    del t
    before = backend.memory_stats()
    assert before["bytes_cached"] > 0
    u = ember.zeros((64, 8), device=cuda)
    after = backend.memory_stats()
    assert after["hits"] == before["hits"] + 1
    assert after["bytes_cached"] < before["bytes_cached"]
    backend.empty_cache()
    assert backend.memory_stats()["bytes_cached"] == 0
    np.testing.assert_array_equal(u.numpy(), 0)


def test_synchronize(cuda):
    t = ember.ones(5, device=cuda) * 3
    ember.synchronize(cuda)
    ember.synchronize("cuda:0")
    assert t.sum().item() == 15


nbcuda = None  # numba.cuda, imported by the test (collection must not import it)


def _double(x):
    i = nbcuda.grid(1)
    if i < x.shape[0]:
        x[i] *= 2


def test_user_kernel_interop(cuda):
    global nbcuda
    from numba import cuda as nbcuda
    double = nbcuda.jit(_double)
    t = ember.arange(6, dtype=ember.float32, device=cuda) + 0
    iface = t._data.__cuda_array_interface__
    assert iface["shape"] == (6,) and iface["typestr"] == "<f4" and iface["version"] == 3
    arr = cuda.backend.device_array(t._data)       # zero-copy numba device array
    double[1, 8](arr)
    np.testing.assert_array_equal(t.numpy(), np.arange(6) * 2)
    # and back: a numba device array as a tensor, sharing memory
    dev = nbcuda.to_device(np.arange(4, dtype=np.int64))
    storage = cuda.backend.from_cuda_array(dev)
    assert isinstance(storage, CudaArray) and storage.device == 0
    wrapped = tensor_wrap(storage, cuda, ember.int64)
    double[1, 4](dev)
    np.testing.assert_array_equal(wrapped.numpy(), [0, 2, 4, 6])
    np.testing.assert_array_equal((wrapped + 1).numpy(), [1, 3, 5, 7])


def test_strided_view_interop(cuda):
    t = ember.tensor(np.arange(12.0).reshape(3, 4), device=cuda)
    v = t.T[::-1]
    arr = cuda.backend.device_array(v._data)
    np.testing.assert_array_equal(arr.copy_to_host(), v.numpy())


@pytest.mark.parametrize("strategy", [ember.CheckpointingStrategy.NONE,
                                      ember.CheckpointingStrategy.BALANCED])
def test_gradients_match_cpu(cuda, strategy):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4))
    w = rng.standard_normal((4, 2))
    grads = {}
    for dev in (ember.Device.cpu(), cuda):
        d = dev.gradient_checkpointing(strategy)
        x = ember.tensor(a, device=d).require_grad()
        y = ember.tensor(w, device=d).require_grad()
        h = (x @ y).tanh() * x[:, :2].sigmoid()
        loss = (h.softmax(-1) * h.exp()).sum() + x.max(dim=1).sum() + (x.cumsum(1) ** 2).mean()
        g = loss.backward()
        grads[dev.type] = (x.grad(g), y.grad(g))
    for gc, gg in zip(grads["cpu"], grads["cuda"]):
        assert_same(gg, gc)


def test_zero_dim_tensor_keeps_its_shape_on_the_way_to_cuda():
    t = ember.tensor(2.5).to("cuda")
    assert t.shape == () and t.item() == 2.5
    assert t.to("cpu").shape == ()
