"""Ember for simulations: heat diffusion and k-means clustering, checked against numpy.

    python examples/heat_kmeans.py [--device cpu|cuda] [--quick]

1. Heat diffusion on a 512x512 plate with cold edges: an explicit 5-point stencil written with
   slicing (views) and ``slice_assign``, starting from random hot spots.
2. k-means on 100k 2-D points drawn around random centres: distances by broadcasting,
   ``argmin``, ``one_hot`` and a matmul for the new centres.
Each runs the same computation in numpy and prints the largest difference, then a short table
times Ember against numpy.  The first op of a run compiles its Numba kernels (cold start) or
loads them from the disk cache (``~/.cache/ember``; a warm start): the script prints how long
it took to get its first result and how many kernels it had to compile.
"""
import time

START = time.perf_counter()

import argparse  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

import ember  # noqa: E402

GRID, STEPS, ALPHA = 512, 400, 0.2       # alpha <= 0.25 keeps the explicit scheme stable
POINTS, K, ITERS = 100_000, 6, 15


# --- the computations, once with Ember and once with numpy -----------------------------------
def heat_step(u):
    """One explicit step of du/dt = alpha * laplacian(u); the edges stay as they are."""
    c = u[1:-1, 1:-1]
    lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * c
    return u.slice_assign((slice(1, -1), slice(1, -1)), c + ALPHA * lap)


def heat_step_np(u):
    c = u[1:-1, 1:-1]
    lap = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4 * c
    out = u.copy()
    out[1:-1, 1:-1] = c + ALPHA * lap
    return out


def distances(x, c):
    """Squared distances of every point to every centre, shape (points, k)."""
    diff = x.unsqueeze(1) - c.unsqueeze(0)
    return (diff * diff).sum(-1)


def kmeans_init(x):
    """k-means++: each next centre is a point drawn with probability proportional to d^2."""
    c = x.index_select(0, ember.random.randint(0, len(x), (1,), device=x.device))
    for _ in range(K - 1):
        cum = distances(x, c).min(1).cumsum(0)
        r = ember.random.uniform((1,), device=x.device) * cum[-1]
        pick = (cum < r).sum().clamp(max=len(x) - 1).reshape(1)       # first index with cum >= r
        c = ember.cat([c, x.index_select(0, pick)])
    return c


def kmeans_step(x, c):
    """One Lloyd iteration: new centres, labels, cluster sizes and inertia."""
    d = distances(x, c)
    labels = d.argmin(1)
    onehot = labels.one_hot(K).cast(ember.float32)             # (points, k)
    counts = onehot.sum(0)
    return (onehot.T @ x) / counts.clamp(min=1).unsqueeze(1), labels, counts, d.min(1).sum()


def distances_np(x, c):
    diff = x[:, None, :] - c[None, :, :]
    return (diff * diff).sum(-1)


def kmeans_step_np(x, c):
    d = distances_np(x, c)
    labels = d.argmin(1)
    onehot = (labels[:, None] == np.arange(K)).astype(np.float32)
    counts = onehot.sum(0)
    return (onehot.T @ x) / np.maximum(counts, 1)[:, None], labels, counts, d.min(1).sum()


# --- small helpers -----------------------------------------------------------------------------
def count_compilations():
    """A list that grows by one name per kernel Numba compiles (loads from the cache don't count)."""
    from numba.core import event

    compiled = []

    class Listener(event.Listener):
        def on_start(self, ev):
            compiled.append(ev.data["dispatcher"].py_func.__name__)

        def on_end(self, ev):
            pass

    event.register("numba:compile", Listener())
    return compiled


def progress(label, steps, fn, state):
    """Apply ``state = fn(state)`` ``steps`` times behind a 20-character progress bar."""
    print(f"   {label} [", end="", flush=True)
    start, shown = time.perf_counter(), 0
    for i in range(steps):
        state = fn(state)
        while shown < 20 * (i + 1) // steps:
            print("#", end="", flush=True)
            shown += 1
    print(f"] {time.perf_counter() - start:.2f} s")
    return state


def median_times(fns, repeats=7):
    """Median seconds per call of each fn; samples (>= 10 ms of calls) alternate between the fns."""
    numbers = []
    for fn in fns:
        fn()  # warm-up
        number = 1
        while True:
            start = time.perf_counter()
            for _ in range(number):
                fn()
            t = time.perf_counter() - start
            if t >= 0.01:
                break
            number *= 2 if t > 0.002 else 10
        numbers.append(number)
    samples = [[] for _ in fns]
    for _ in range(repeats):
        for fn, number, out in zip(fns, numbers, samples):
            start = time.perf_counter()
            for _ in range(number):
                fn()
            out.append((time.perf_counter() - start) / number)
    return [statistics.median(s) for s in samples]


def fmt(t):
    return f"{t * 1e3:.2f} ms" if t >= 1e-3 else f"{t * 1e6:.0f} µs"


def max_diff(a, b):
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())


# --- the demo ----------------------------------------------------------------------------------
def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--quick", action="store_true", help="a few steps and no timing table")
    args = parser.parse_args()
    device_name = args.device
    steps, iters = (STEPS, ITERS) if not args.quick else (20, 3)
    try:
        device = ember.Device.cpu() if device_name == "cpu" else ember.Device.cuda()
    except ember.DeviceError as e:
        print(f"--device {device_name}: {e}")
        return 1
    compiled = count_compilations()

    # data: seeded, so every run (and the numpy reference) sees the same numbers
    ember.random.seed(0)
    hot = ember.random.uniform((GRID, GRID), device=device) > 0.999   # the first op
    first_result = time.perf_counter() - START
    first_compiled = len(compiled)
    u0 = ember.zeros(GRID, GRID, device=device).mask_fill(hot, 100.0)  # ~260 hot pixels
    for edge in (0, -1, (slice(None), 0), (slice(None), -1)):          # cold edges
        u0 = u0.slice_assign(edge, 0.0)
    heat0 = u0.sum().item()
    import numba

    print(f"Ember {ember.__version__} heat + k-means on {device} (numpy {np.__version__}, "
          f"numba {numba.__version__}, {numba.get_num_threads()} threads)")
    print(f"first op result after {first_result:.2f} s "
          + (f"(cold start: compiled {first_compiled} kernels)" if first_compiled else
             "(warm start: every kernel loaded from the disk cache)"))

    # 1. heat diffusion
    print(f"\n1. Heat diffusion, {GRID}x{GRID} plate, cold edges, explicit 5-point stencil, "
          f"{steps} steps")
    u = progress("ember", steps, heat_step, u0)
    u_np = u0.numpy().copy()
    for _ in range(steps):
        u_np = heat_step_np(u_np)
    heat = u.sum().item()
    print(f"   peak temperature {u0.max().item():.1f} -> {u.max().item():.2f}; total heat "
          f"{heat0:.0f} -> {heat:.0f} ({100 * (heat0 - heat) / heat0:.2f} % lost at the edges)")
    print(f"   max |ember - numpy| = {max_diff(u, u_np):.1e}")

    # 2. k-means
    true_centres = ember.random.uniform((K, 2), -10.0, 10.0, device=device)
    truth = ember.random.randint(0, K, (POINTS,), device=device)
    x = true_centres.index_select(0, truth) + ember.random.normal((POINTS, 2), device=device)
    c0 = kmeans_init(x)
    print(f"\n2. k-means, {POINTS} points around {K} random centres, k-means++ start, "
          f"{iters} iterations")
    c, labels, counts, inertia = progress("ember", iters, lambda s: kmeans_step(x, s[0]), (c0,))
    x_np, c_np = x.numpy(), c0.numpy()
    for _ in range(iters):
        c_np, labels_np, counts_np, inertia_np = kmeans_step_np(x_np, c_np)
    recovered = math.sqrt(distances(c, true_centres).min(1).max().item())
    print(f"   inertia {inertia.item():.4g}, cluster sizes {[int(n) for n in counts.tolist()]}")
    print(f"   every centre found lies within {recovered:.3f} of a true centre")
    agree = (labels.numpy() == labels_np).mean()
    print(f"   vs numpy: centres max diff {max_diff(c, c_np):.1e}, labels agree {100 * agree:.2f} %, "
          f"inertia rel. diff {abs(inertia.item() - inertia_np) / inertia_np:.1e}")

    # 3. timings
    d, d_np = distances(x, c), distances_np(x_np, c_np)
    cases = [
        ("heat step (8 ops, 512x512)", lambda: heat_step(u), lambda: heat_step_np(u_np)),
        ("stencil add (510x510 views)", lambda: u[:-2, 1:-1] + u[2:, 1:-1],
         lambda: u_np[:-2, 1:-1] + u_np[2:, 1:-1]),
        ("k-means step", lambda: kmeans_step(x, c), lambda: kmeans_step_np(x_np, c_np)),
        ("distances (100k x 6 x 2)", lambda: distances(x, c), lambda: distances_np(x_np, c_np)),
        ("argmin dim=1 (100k x 6)", lambda: d.argmin(1), lambda: d_np.argmin(1)),
        ("sum all (100k x 6)", lambda: d.sum(), lambda: d_np.sum()),
    ]
    if args.quick:
        cases = []
    print(f"\n3. Timings (median per call)   {'ember':>9}  {'numpy':>9}  numpy/ember")
    for name, fe, fn in cases:
        te, tn = median_times([fe, fn])
        print(f"   {name:<27}  {fmt(te):>9}  {fmt(tn):>9}  {tn / te:9.2f}x")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if load > 0.5 * cores:
        print(f"   (the machine is busy: load {load:.1f} on {cores} cores; timings are noisy)")

    total = time.perf_counter() - START
    print(f"\nDone in {total:.1f} s; time to first result {first_result:.2f} s, "
          f"{len(compiled)} kernels compiled this run"
          + (" (run again: they load from the disk cache)" if compiled else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
