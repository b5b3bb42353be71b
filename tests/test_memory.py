"""The caching allocator (ember.memory): reuse, safety of live views, stats, limits, threads."""
import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import ember
from ember import memory

# tests of the CPU pool itself need it on; the Pool unit tests and the subprocess tests do not
needs_pool = pytest.mark.skipif(not memory.ENABLED, reason="EMBER_POOL=0 in this environment "
                                "(test_pool_off_env_var_gives_the_same_results covers that mode)")

BIG = 1 << 19           # float32 elements: 2 MiB, above memory.CPU_MIN_BYTES
SERIAL = 300_000        # float32 elements: pooled (1.2 MB) but below the parallel threshold


def addr(t):
    return t.numpy().ctypes.data


def run(t):
    """``t`` computed (with fusion on, elementwise results are computed when first read)."""
    t.numpy()
    return t


def big(n=BIG, seed=0):
    return ember.from_numpy(np.random.default_rng(seed).standard_normal(n).astype(np.float32))


def test_size_class():
    assert memory.size_class(1) == 512
    assert memory.size_class(512) == 512
    for n in (513, 1000, 4095, 4096, 4097, 1 << 20, (1 << 20) + 1, 12345678, 64 << 20):
        c = memory.size_class(n)
        assert n <= c <= n * 1.125
        assert memory.size_class(c) == c     # classes are fixed points
    assert memory.size_class(64 << 20) == 64 << 20


@needs_pool
def test_freed_buffer_is_reused():
    a, b = big(), big(seed=1)
    c = a + b
    first = addr(c)
    before = ember.memory_stats("cpu")
    del c
    mid = ember.memory_stats("cpu")
    assert mid["bytes_in_use"] == before["bytes_in_use"] - BIG * 4
    assert mid["bytes_cached"] == before["bytes_cached"] + BIG * 4
    d = run(a * b)
    after = ember.memory_stats()
    assert addr(d) == first
    assert after["hits"] == before["hits"] + 1
    assert after["allocations"] == before["allocations"] + 1
    assert after["misses"] == before["misses"]
    assert after["bytes_in_use"] == before["bytes_in_use"]
    np.testing.assert_array_equal(d.numpy(), a.numpy() * b.numpy())


@needs_pool
def test_small_tensors_bypass_the_pool():
    before = ember.memory_stats("cpu")["allocations"]
    x = ember.ones(1000) + 1
    assert not isinstance(x.numpy().base, memory._Holder)
    assert ember.memory_stats("cpu")["allocations"] == before


@needs_pool
def test_live_numpy_views_are_never_reused():
    a = big()
    t = a + 1
    whole = t.numpy()
    view = t.reshape(1024, 512)[3:].numpy()[:, ::2]
    want = whole.copy()
    taken = addr(t)
    del t
    gc.collect()
    for i in range(4):                    # several ops of the same size class
        u = a * float(i + 2)
        assert addr(u) != taken
    np.testing.assert_array_equal(whole, want)
    np.testing.assert_array_equal(view, want.reshape(1024, 512)[3:, ::2])
    del u
    del whole, view                       # now the block is free again, the last one released
    gc.collect()
    u = a * 5.0
    assert addr(u) == taken


@needs_pool
def test_view_kept_by_a_derived_numpy_array():
    a = big()
    t = a + 1
    v = np.lib.stride_tricks.as_strided(t.numpy(), (10,), (8,))   # keeps a reference chain
    want = v.copy()
    taken = addr(t)
    del t
    u = a * 3
    assert addr(u) != taken
    np.testing.assert_array_equal(v, want)


@needs_pool
def test_peak_tracking():
    before = ember.memory_stats("cpu")
    a = big(1 << 20)
    tensors = [run(a * float(i)) for i in range(3)]
    now = ember.memory_stats("cpu")
    assert now["bytes_in_use"] >= before["bytes_in_use"] + 3 * (4 << 20)
    assert now["peak_bytes_in_use"] >= now["bytes_in_use"]
    del tensors
    later = ember.memory_stats("cpu")
    assert later["bytes_in_use"] == now["bytes_in_use"] - 3 * (4 << 20)
    assert later["peak_bytes_in_use"] == now["peak_bytes_in_use"]   # the peak stays


@needs_pool
@pytest.mark.parametrize("scipy_serves", [False, True], ids=["numpy-matmul", "scipy-gemm"])
def test_large_products_and_mid_sized_outputs_reuse_pooled_blocks(scipy_serves, monkeypatch):
    """A 2048 x 64 float32 product (512 KiB: numpy's own result was a fresh mapping, page
    faults every call) and a bias add of its size take their blocks from the pool, whichever
    BLAS serves the product (SciPy's once a SciPy routine has run in the process)."""
    from ember.backends.cpu import linalg
    monkeypatch.setattr(linalg, "_scipy_in_use", scipy_serves)
    rng = np.random.default_rng(1)
    x = ember.tensor(rng.standard_normal((2048, 64)).astype(np.float32))
    w = ember.tensor(rng.standard_normal((64, 64)).astype(np.float32))
    b = ember.tensor(rng.standard_normal(64).astype(np.float32))
    assert 2048 * 64 * 4 >= memory.CPU_MIN_BYTES
    for _ in range(2):   # (the first round fills the cache)
        run(x @ w.T + b)
    before = ember.memory_stats("cpu")
    for _ in range(3):
        y = run(x @ w.T)
        np.testing.assert_allclose(y.numpy(), x.numpy() @ w.numpy().T, rtol=1e-5, atol=1e-4)
        run(y + b)
    after = ember.memory_stats("cpu")
    assert after["hits"] - before["hits"] >= 6 and after["misses"] == before["misses"]


def test_pool_reset_peak():
    pool = memory.Pool("test", lambda size: bytearray(size))
    blocks = [pool.acquire(1000) for _ in range(3)]
    for blk in blocks:
        pool.release(*blk)
    assert pool.stats()["peak_bytes_in_use"] == 3 * 1024
    pool.reset_peak()
    assert pool.stats()["peak_bytes_in_use"] == 0


@needs_pool
def test_empty_cache_releases():
    a = big()
    ts = [run(a + float(i)) for i in range(3)]
    del ts
    assert ember.memory_stats("cpu")["bytes_cached"] >= 3 * BIG * 4
    assert ember.memory_stats("cpu")["cached_blocks"] >= 3
    in_use = ember.memory_stats("cpu")["bytes_in_use"]
    ember.empty_cache()
    s = ember.memory_stats("cpu")
    assert s["bytes_cached"] == 0 and s["cached_blocks"] == 0
    assert s["bytes_in_use"] == in_use       # live tensors keep their memory
    ts = [run(a + 1.0)]
    ember.empty_cache(ember.Device.cpu())
    assert ember.memory_stats("cpu")["bytes_cached"] == 0
    np.testing.assert_array_equal(ts[0].numpy(), a.numpy() + 1)
    after = ember.memory_stats("cpu")["misses"]
    del ts
    ember.empty_cache("cpu")
    b = run(a + 2.0)                       # nothing cached: a fresh block
    assert ember.memory_stats("cpu")["misses"] == after + 1
    assert b.shape == a.shape


@needs_pool
def test_memory_stats_arguments():
    s = ember.memory_stats(ember.Device.cpu())
    assert s["device"] == "cpu" and s["enabled"] is True
    for key in ("bytes_in_use", "bytes_cached", "peak_bytes_in_use", "allocations", "hits",
                "misses", "evictions", "cached_blocks", "limit", "min_bytes"):
        assert key in s
    assert ember.memory_stats(ember.Device.cpu().autodiff())["device"] == "cpu"
    with pytest.raises(ValueError, match="unknown device"):
        ember.memory_stats("tpu")


def test_limit_evicts_least_recently_released_sizes():
    made = []

    def allocate(size):
        made.append(size)
        return bytearray(size)

    pool = memory.Pool("test", allocate, limit=4096)
    a, sa = pool.acquire(2048)
    b, sb = pool.acquire(1024)
    c, sc = pool.acquire(2048)
    big_block, sbig = pool.acquire(8192)
    pool.release(a, sa)
    pool.release(b, sb)
    assert pool.stats()["bytes_cached"] == 3072
    # 5120 > 4096: the size released least recently (1024: c made 2048 the most recent) goes
    pool.release(c, sc)
    s = pool.stats()
    assert s["bytes_cached"] == 4096 and s["evictions"] == 1 and s["cached_blocks"] == 2
    pool.release(big_block, sbig)         # larger than the limit: never cached
    s = pool.stats()
    assert s["bytes_cached"] == 4096 and s["bytes_in_use"] == 0
    got, _ = pool.acquire(2000)           # the last one released first
    assert got is c and pool.stats()["hits"] == 1
    got, _ = pool.acquire(1024)           # evicted: a fresh block
    assert got is not b and made == [2048, 1024, 2048, 8192, 1024]
    pool.empty_cache()
    assert pool.stats()["bytes_cached"] == 0 and pool.stats()["cached_blocks"] == 0


def test_allocation_failure_empties_the_cache_and_retries():
    fail = [False]

    def allocate(size):
        if fail[0]:
            fail[0] = False
            raise MemoryError("out of memory")
        return bytearray(size)

    pool = memory.Pool("test", allocate)
    pool.release(*pool.acquire(1024))
    assert pool.stats()["bytes_cached"] == 1024
    fail[0] = True
    blk, size = pool.acquire(4096)       # fails once, drops the cache, succeeds
    assert len(blk) == size == 4096 and pool.stats()["bytes_cached"] == 0
    fail[0] = True
    with pytest.raises(MemoryError):     # nothing cached to give back: the error stands
        pool.acquire(4096)


def test_pool_threads():
    pool = memory.Pool("test", lambda size: bytearray(size), limit=1 << 16)
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            held = []
            for _ in range(2000):
                if held and rng.random() < 0.5:
                    pool.release(*held.pop(int(rng.integers(len(held)))))
                else:
                    held.append(pool.acquire(int(rng.integers(1, 20000))))
            for blk in held:
                pool.release(*blk)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    s = pool.stats()
    assert s["bytes_in_use"] == 0
    assert s["bytes_cached"] <= 1 << 16
    assert s["bytes_cached"] == sum(memory.size_class(len(b)) for bl in pool._free.values() for b in bl)
    assert s["allocations"] == s["hits"] + s["misses"]


@needs_pool
def test_ops_from_threads_never_share_a_live_block():
    base = ember.memory_stats("cpu")["bytes_in_use"]
    x = big(SERIAL)
    errors = []

    def work(k):
        try:
            for i in range(30):
                t = x * 0.0 + float(k)          # a fresh pooled block, filled with k
                u = x * 0.0 - float(k)
                if not (np.all(t.numpy() == k) and np.all(u.numpy() == -k)):
                    errors.append(f"thread {k}: another thread wrote into its block")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    del x
    gc.collect()
    assert ember.memory_stats("cpu")["bytes_in_use"] == base


@pytest.fixture
def dirty_pool(monkeypatch):
    """Every pooled block handed out is first filled with 0xFF bytes (NaN, -1, ...)."""
    acquire = memory.CPU_POOL.acquire

    def dirty(nbytes):
        block, size = acquire(nbytes)
        block[0][:] = 0xFF
        return block, size

    monkeypatch.setattr(memory.CPU_POOL, "acquire", dirty)
    return memory.CPU_POOL


@needs_pool
def test_pooled_outputs_are_written_completely(dirty_pool):
    rng = np.random.default_rng(3)
    xn = rng.standard_normal((1024, 512)).astype(np.float32)     # 2 MiB
    x = ember.from_numpy(xn)
    idx_n = rng.integers(0, 1024, (1024, 512))
    idx = ember.from_numpy(idx_n)
    sel_n = rng.integers(0, 1024, 600)
    before = dirty_pool.stats()["allocations"]
    cases = [
        (x + 1, xn + 1),
        (x.exp(), np.exp(xn)),
        (x.cast(ember.float64), xn.astype(np.float64)),
        (x > 0, xn > 0),
        (x.T.contiguous(), xn.T),
        (x.slice_assign((slice(0, 100),), 0.0), np.concatenate([np.zeros((100, 512), np.float32), xn[100:]])),
        (ember.cat([x, x], 0), np.concatenate([xn, xn])),
        (ember.zeros((1024, 512)), np.zeros((1024, 512), np.float32)),
        (ember.empty((1024, 512)), np.zeros((1024, 512), np.float32)),    # empty returns zeros
        (ember.full((1024, 512), 7.0), np.full((1024, 512), 7.0, np.float32)),
        (x.T.sum(dim=1), xn.sum(axis=0)),
        (x.reshape(1024, 32, 16).sum(dim=(0, 2)), xn.reshape(1024, 32, 16).sum(axis=(0, 2))),
        (x.T[::-1].max(dim=0), xn.T[::-1].max(axis=0)),
        (x.reshape(-1, 1, 512).argmax(dim=0), xn.reshape(-1, 1, 512).argmax(axis=0)),
        (x.cumsum(0), np.cumsum(xn, 0)),
        (x.T.cumsum(1), np.cumsum(xn.T, 1)),
        (x.sort(dim=0), np.sort(xn, 0)),
        (x.argsort(dim=1), np.argsort(xn, 1, kind="stable")),
        (x.topk(200, dim=0), -np.sort(-xn, 0)[:200]),
        (x.gather(0, idx), np.take_along_axis(xn, idx_n, 0)),
        (x.index_select(0, ember.from_numpy(sel_n)), xn[sel_n]),
        (x.scatter(0, idx, 1.0, reduce="add"), _scatter_add(xn, idx_n)),
    ]
    for got, want in cases:
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-4)
    assert dirty_pool.stats()["allocations"] >= before + 15   # most of them were pooled


def _scatter_add(xn, idx_n):
    out = xn.copy()
    for j in range(xn.shape[1]):
        np.add.at(out[:, j], idx_n[:, j], 1.0)
    return out


@needs_pool
def test_optimizer_outputs_are_written_completely(dirty_pool):
    rng = np.random.default_rng(4)
    wn = rng.standard_normal(BIG).astype(np.float32)
    for make in (lambda p: ember.optim.SGD(p, lr=0.1), lambda p: ember.optim.Adam(p, lr=0.1)):
        w = ember.from_numpy(wn).autodiff().require_grad()
        opt = make([w])
        grads = (w * w).sum().backward()
        (new,) = opt.step(grads)
        got = new.numpy()
        assert np.all(np.isfinite(got))
        if isinstance(opt, ember.optim.SGD):
            np.testing.assert_allclose(got, wn - 0.1 * 2 * wn, rtol=1e-5, atol=1e-6)
        else:   # Adam's first step moves every entry by lr against its gradient's sign
            np.testing.assert_allclose(got, wn - 0.1 * np.sign(wn), rtol=1e-4, atol=1e-3)


SCRIPT = r"""
import sys, numpy as np, ember
rng = np.random.default_rng(5)
x = ember.from_numpy(rng.standard_normal((1024, 512)).astype(np.float32))
i = ember.from_numpy(rng.integers(0, 512, (1024, 512)))
outs = [(x * 2 + 1).exp(), x.T.contiguous(), x.sum(dim=0), x.cumsum(1), x.sort(dim=0),
        x.gather(1, i), ember.cat([x, x]), x.slice_assign((slice(3, 9),), 1.0), ember.empty((512, 512))]
np.savez(sys.argv[1], *[o.numpy() for o in outs])
print(ember.memory_stats())
"""


def test_pool_off_env_var_gives_the_same_results(tmp_path):
    results = {}
    for flag in ("0", "1"):
        path = str(tmp_path / f"pool{flag}.npz")
        env = dict(os.environ, EMBER_POOL=flag)
        out = subprocess.run([sys.executable, "-c", SCRIPT, path], env=env, capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, out.stderr
        stats = eval(out.stdout.strip().splitlines()[-1])  # a dict literal
        results[flag] = (np.load(path), stats)
    off, on = results["0"], results["1"]
    assert off[1]["enabled"] is False and off[1]["allocations"] == 0 and off[1]["limit"] == 0
    assert on[1]["enabled"] is True and on[1]["allocations"] > 0
    for key in off[0].files:
        np.testing.assert_array_equal(off[0][key], on[0][key])


def test_pool_max_env_var():
    code = "import ember; print(ember.memory_stats()['limit'])"
    for text, want in (("512M", 512 << 20), ("2g", 2 << 30), ("4096", 4096), ("1.5KiB", 1536)):
        env = dict(os.environ, EMBER_POOL="1", EMBER_POOL_MAX=text)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        assert int(out.stdout.strip()) == want
    env = dict(os.environ, EMBER_POOL_MAX="lots")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode != 0 and "EMBER_POOL_MAX='lots' is not a size" in out.stderr
