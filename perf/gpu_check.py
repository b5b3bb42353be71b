"""The one prepared GPU check: run the CUDA test tier, then a few bandwidth benchmarks.

Run on a machine with an NVIDIA GPU (no simulator):

    python perf/gpu_check.py            # tests + pool check + benchmarks
    python perf/gpu_check.py --bench    # benchmarks only

Prints one line per benchmark: op, size, median time and effective bandwidth
(bytes read + written / time), plus the device-to-host and host-to-device copy
rates, ember.compile's replays of the small suite's MLP step and RK4 solve, and the ember.linalg factorisations (cuSOLVER/cuBLAS through nvmath-python:
``pip install -e ".[cuda]"``), so a later run on the same GPU can be compared by eye.  The pool check
verifies the caching allocator on real device memory (reuse, live views kept,
empty_cache) and times an allocating add with and without reuse.
"""
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_tests():
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", os.path.join(ROOT, "tests", "cuda")]
    print("$", " ".join(cmd), flush=True)
    return subprocess.call(cmd, env=env, cwd=ROOT)


def _time(fn, device, repeat=20):
    import ember
    fn()
    ember.synchronize(device)  # compile + warm up
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ember.synchronize(device)
        samples.append(time.perf_counter() - t0)
    samples.sort()
    return samples[len(samples) // 2]


def pool_check(n=1 << 24):
    """The CUDA caching allocator on a real GPU; returns the number of failed checks."""
    import gc

    import numpy as np

    import ember
    dev = ember.Device.cuda()
    x = ember.ones(n, device=dev)
    y = x + 1
    failed = []

    def check(ok, what):
        print(f"pool: {'ok  ' if ok else 'FAIL'} {what}", flush=True)
        if not ok:
            failed.append(what)

    def ptr(t):
        return t.__cuda_array_interface__["data"][0]

    ember.empty_cache(dev)
    z = x + y
    ember.synchronize(dev)
    first, before = ptr(z), ember.memory_stats(dev)
    del z
    gc.collect()
    z = x * y
    again = ptr(z)
    after = ember.memory_stats(dev)
    check(again == first and after["hits"] == before["hits"] + 1, "a freed block is reused")
    view = dev.backend.device_array(z._data)          # a numba view outlives the tensor
    taken = ptr(z)
    del z
    gc.collect()
    w = x + 5
    ember.synchronize(dev)
    check(ptr(w) != taken and float(view[n - 1]) == 2.0, "a live numba view keeps its block")
    del view, w
    gc.collect()
    ember.empty_cache(dev)
    check(ember.memory_stats(dev)["bytes_cached"] == 0, "empty_cache frees the cached blocks")
    check(np.array_equal((x + y).numpy()[:4], np.full(4, 3, np.float32)), "results after empty_cache")
    # `._data` computes the sum now (with fusion on, an unread result is never computed)
    reuse = _time(lambda: (x + y)._data, dev)

    def fresh():  # what every add costs without the pool: a new cudaMalloc (and its free)
        ember.empty_cache(dev)
        return (x + y)._data

    alloc = _time(fresh, dev)
    print(f"pool: add {n} f32 {reuse * 1e3:.3f} ms reusing, {alloc * 1e3:.3f} ms with a fresh "
          f"allocation each time; {ember.memory_stats(dev)}", flush=True)
    return len(failed)


def bench():
    import numpy as np

    import ember
    dev = ember.Device.cuda()
    n = 1 << 24
    x = ember.tensor(np.random.default_rng(0).uniform(-1, 1, n).astype(np.float32), device=dev)
    y = x + 1
    m = ember.ones((2048, 2048), device=dev)
    item = 4
    cases = [
        ("add (x + y)", lambda: x + y, 3 * n * item),
        ("exp", lambda: x.exp(), 2 * n * item),
        ("sum (full)", lambda: x.sum(), n * item),
        ("sum (rows of 4096)", lambda: x.reshape(-1, 4096).sum(dim=1), n * item),
        ("cumsum (rows of 4096)", lambda: x.reshape(-1, 4096).cumsum(1), 2 * n * item),
        ("transpose copy", lambda: x.reshape(4096, -1).T.contiguous(), 2 * n * item),
    ]
    print(f"device: {dev}  n = {n} float32")
    for name, fn, nbytes in cases:
        t = _time(fn, dev)
        print(f"{name:28s} {t * 1e3:9.3f} ms  {nbytes / t / 1e9:8.1f} GB/s")
    t = _time(lambda: m @ m, dev, repeat=5)
    print(f"{'matmul 2048^2 (tiled)':28s} {t * 1e3:9.3f} ms  {2 * 2048 ** 3 / t / 1e12:8.2f} TFLOP/s")
    host = np.ones(n, np.float32)
    t = _time(lambda: ember.from_numpy(host).to(dev), dev, repeat=5)
    print(f"{'host -> device':28s} {t * 1e3:9.3f} ms  {n * item / t / 1e9:8.1f} GB/s")
    t = _time(lambda: x.numpy(), dev, repeat=5)
    print(f"{'device -> host':28s} {t * 1e3:9.3f} ms  {n * item / t / 1e9:8.1f} GB/s")
    fft_bench(dev)
    compile_bench(dev)
    print("allocator:", dev.backend.memory_stats())
    linalg_bench(dev)


def compile_bench(dev):
    """ember.compile on the GPU: the small suite's MLP step and RK4 + gradient (perf/small_suite),
    eager against compiled (a replay issues its launches back to back: no host synchronisation
    inside, so its time is the GPU's work plus one launch per recorded op).  The eager steps
    are timed once their backward and optimizer updates replay (after HOT_BACKWARDS steps:
    the bound launches of the traced walk and updates, on the GPU's stream)."""
    from ember.autograd import graph
    from perf import small_suite as sm
    for name, make, repeat in (("MLP step 2-64-64-2 b128", sm.ember_mlp_step, 50),
                               ("RK4 x 100 + gradient", sm.ember_rk4_grad, 5)):
        times = []
        for compiled in (False, True):
            start = time.perf_counter()
            fn = make(compiled, dev)
            fn()
            first = time.perf_counter() - start
            for _ in range(graph.HOT_BACKWARDS + 1):   # (eager: until the replays run)
                fn()
            times.append((_time(fn, dev, repeat=repeat), first))
        (te, fe), (tc, fc) = times
        print(f"compile: {name:24s} eager {te * 1e3:8.3f} ms, compiled {tc * 1e3:8.3f} ms "
              f"({te / tc:.1f}x); first calls {fe:.2f} s / {fc:.2f} s", flush=True)


def linalg_bench(dev, n=1024):
    """cuSOLVER / cuBLAS through ember.linalg (nvmath-python), float64 and complex128, one
    matrix; results checked against numpy on the host."""
    import numpy as np

    import ember
    la = ember.linalg
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n))
    spd = a @ a.T + n * np.eye(n)
    ta, ts = ember.tensor(a, dtype=ember.float64, device=dev), ember.tensor(spd, dtype=ember.float64, device=dev)
    b = ember.tensor(rng.standard_normal((n, 64)), dtype=ember.float64, device=dev)
    err = np.abs(la.cholesky(ts).numpy() - np.linalg.cholesky(spd)).max()
    print(f"linalg: cholesky {n} f64 max |ember - numpy| = {err:.2e}")
    cases = [("cholesky", lambda: la.cholesky(ts)), ("solve (64 rhs)", lambda: la.solve(ta, b)),
             ("solve_triangular", lambda: la.solve_triangular(ts, b, upper=False)),
             ("inv", lambda: la.inv(ta)), ("slogdet", lambda: la.slogdet(ta)),
             ("eigh", lambda: la.eigh(ts)), ("svd", lambda: la.svd(ta)), ("qr", lambda: la.qr(ta))]
    for name, fn in cases:
        t = _time(fn, dev, repeat=5)
        print(f"{'linalg.' + name + f' {n} f64':28s} {t * 1e3:9.3f} ms")
    # the Cholesky gradient (CHOLESKY_BACKWARD: the formula on CUDA), against the CPU's blocks
    weights = rng.standard_normal((n, n))

    def cholesky_grad(device):
        leaf = ember.tensor(spd, dtype=ember.float64, device=device).autodiff().require_grad()
        loss = (la.cholesky(leaf) * ember.tensor(weights, dtype=ember.float64, device=device)).sum()
        return leaf.grad(loss.backward())

    want = cholesky_grad(ember.Device.cpu()).numpy()
    err = np.abs(cholesky_grad(dev).numpy() - want).max() / np.abs(want).max()
    t = _time(lambda: cholesky_grad(dev), dev, repeat=3)
    print(f"{'cholesky value + grad ' + f'{n} f64':28s} {t * 1e3:9.3f} ms  (relative error "
          f"against the CPU {err:.2e})")
    # complex128 (the z routines; eigh conjugates the vendor's vectors): checked, then timed
    z = a + 1j * rng.standard_normal((n, n))
    herm = z @ z.conj().T + n * np.eye(n)
    tz = ember.tensor(z, dtype=ember.complex128, device=dev)
    th = ember.tensor(herm, dtype=ember.complex128, device=dev)
    err = np.abs(la.cholesky(th).numpy() - np.linalg.cholesky(herm)).max()
    w, v = la.eigh(th)
    rec = np.abs((v.numpy() * w.numpy()) @ v.numpy().conj().T - herm).max() / np.abs(herm).max()
    print(f"linalg: cholesky {n} c128 max |ember - numpy| = {err:.2e}; eigh relative "
          f"reconstruction error {rec:.2e}")
    for name, fn in [("cholesky", lambda: la.cholesky(th)), ("solve (64 rhs)", lambda: la.solve(tz, b)),
                     ("eigh", lambda: la.eigh(th)), ("svd", lambda: la.svd(tz)), ("qr", lambda: la.qr(tz))]:
        t = _time(fn, dev, repeat=3)
        print(f"{'linalg.' + name + f' {n} c128':28s} {t * 1e3:9.3f} ms")


def fft_bench(dev):
    """ember.fft on the GPU (cuFFT through nvmath-python, or the host path without it)."""
    import numpy as np

    import ember
    import ember.fft
    try:
        import nvmath.bindings.cufft  # noqa: F401
        how = "cuFFT (nvmath-python)"
    except ImportError:
        how = "host stand-in: install ember[cuda] for cuFFT"
    rng = np.random.default_rng(0)
    c = ember.tensor((rng.standard_normal(1 << 20) + 1j * rng.standard_normal(1 << 20))
                     .astype(np.complex64), device=dev)
    r = ember.tensor(rng.standard_normal(1 << 20).astype(np.float32), device=dev)
    m = ember.tensor((rng.standard_normal((2048, 2048)) + 0j).astype(np.complex64), device=dev)
    want = np.fft.fft(c.numpy())
    err = np.abs(ember.fft.fft(c).numpy() - want).max() / np.abs(want).max()
    print(f"fft: {how}; fft 2^20 c64 relative error {err:.1e}")
    for name, fn, nbytes in [("fft 2^20 c64", lambda: ember.fft.fft(c), 2 * 8 << 20),
                             ("rfft 2^20 f32", lambda: ember.fft.rfft(r), 12 << 20),
                             ("fft2 2048^2 c64", lambda: ember.fft.fft2(m), 2 * 8 * 2048 * 2048)]:
        t = _time(fn, dev)
        print(f"{name:28s} {t * 1e3:9.3f} ms  {nbytes / t / 1e9:8.1f} GB/s")


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    rc = 0
    if "--bench" not in sys.argv:
        rc = run_tests()
        rc = rc or int(pool_check() > 0)
    bench()
    sys.exit(rc)
