"""The CUDA caching allocator through ember.memory_stats / ember.empty_cache (simulator or GPU)."""
import gc

import numpy as np

import ember
from ember.backends.cuda import Block


def _pointer(t):
    return t._data.__cuda_array_interface__["data"][0]


def test_memory_stats_and_empty_cache(cuda):
    ember.empty_cache(cuda)
    s = ember.memory_stats(cuda)
    assert s["device"] == "cuda:0" and s["bytes_cached"] == 0 and s["cached_blocks"] == 0
    assert ember.memory_stats("cuda")["device"] == "cuda:0"
    base = s["bytes_in_use"]
    t = ember.ones((256, 64), device=cuda) * 2          # 64 KiB
    t.numpy()                                           # computed (fusion defers elementwise ops)
    live = ember.memory_stats(cuda)
    assert live["bytes_in_use"] >= base + 256 * 64 * 4
    assert live["peak_bytes_in_use"] >= live["bytes_in_use"]
    assert isinstance(t._data.block, Block)
    first = _pointer(t)
    del t
    gc.collect()
    freed = ember.memory_stats(cuda)
    assert freed["bytes_in_use"] <= live["bytes_in_use"] - 256 * 64 * 4
    assert freed["bytes_cached"] >= 256 * 64 * 4
    u = ember.zeros((256, 64), device=cuda)             # the same size class: reused
    np.testing.assert_array_equal(u.numpy(), 0)
    after = ember.memory_stats(cuda)
    assert after["hits"] > freed["hits"]
    assert after["allocations"] == after["hits"] + after["misses"]
    assert _pointer(u) == first
    ember.empty_cache()                                 # every device: the CPU and CUDA
    assert ember.memory_stats(cuda)["bytes_cached"] == 0
    np.testing.assert_array_equal(u.numpy(), 0)         # a live tensor keeps its block


def test_live_device_view_keeps_its_block(cuda):
    t = ember.arange(4096, dtype=ember.float32, device=cuda) + 0
    t.numpy()
    arr = cuda.backend.device_array(t._data)            # a numba device array for user kernels
    first = _pointer(t)
    del t
    gc.collect()
    u = ember.full((4096,), 5.0, device=cuda)
    u.numpy()
    assert _pointer(u) != first
    np.testing.assert_array_equal(arr.copy_to_host(), np.arange(4096, dtype=np.float32))
