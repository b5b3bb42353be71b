"""Mixing Ember tensors with your own Numba code.

    python examples/numba_interop.py

On the CPU an Ember tensor's storage is a numpy array: ``t.numpy()`` hands it to an ``@njit``
function without a copy (strided views included), and ``ember.from_numpy(a)`` wraps a result
without a copy.  On a GPU, ``__cuda_array_interface__`` and ``ember.from_cuda_array`` do the
same for ``@cuda.jit`` kernels.  Four uses:

1. A loop Ember has no op for: a 2-D histogram of points, written as an ``@njit`` loop over
   Ember's data, then smoothed with ``ember.nn.functional.conv2d``.
2. A Numba function as a custom op inside autodiff: an ``@njit`` Lennard-Jones energy returns
   its own gradient, and ``(x * grad).sum()`` carries that gradient into Ember's graph, next to
   terms Ember differentiates itself.  Adam then relaxes a particle cluster.
3. Zero-copy checks: the arrays really share memory both ways.
4. A user ``@cuda.jit`` kernel reading and writing Ember CUDA tensors (on a GPU, or on Numba's
   CUDA simulator with ``NUMBA_ENABLE_CUDASIM=1``; skipped without either).
"""
import math
import time

import numpy as np
from numba import cuda, njit

import ember
import ember.nn.functional as F
from ember.optim import Adam


# --- user Numba code: plain loops over numpy arrays ------------------------------------------
@njit(cache=True)
def histogram2d(xs, ys, bins, lo, hi):
    """Counts of the points (xs[i], ys[i]) on a bins x bins grid over [lo, hi)^2."""
    out = np.zeros((bins, bins))
    scale = bins / (hi - lo)
    for i in range(xs.shape[0]):   # xs, ys may be strided views: Numba handles any layout
        r = int(math.floor((ys[i] - lo) * scale))
        c = int(math.floor((xs[i] - lo) * scale))
        if 0 <= r < bins and 0 <= c < bins:
            out[r, c] += 1.0
    return out


@njit(cache=True)
def lennard_jones(pos):
    """Energy of a Lennard-Jones cluster (epsilon = sigma = 1) and its gradient wrt ``pos``."""
    n = pos.shape[0]
    grad = np.zeros_like(pos)
    energy = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            d = pos[i] - pos[j]
            r2 = (d * d).sum()
            inv6 = 1.0 / (r2 * r2 * r2)
            energy += 4.0 * (inv6 * inv6 - inv6)
            f = (-48.0 * inv6 * inv6 + 24.0 * inv6) / r2    # dE/dr / r
            grad[i] += f * d
            grad[j] -= f * d
    return energy, grad


# --- 1. a histogram in Numba, smoothing in Ember ------------------------------------------------
def density_demo():
    ember.random.seed(0)
    points = ember.cat([ember.random.normal((30_000, 2), std=0.6, dtype=ember.float64),
                        ember.random.normal((20_000, 2), mean=1.5, std=0.3, dtype=ember.float64)])
    xs, ys = points[:, 0], points[:, 1]                  # strided column views, no copies
    counts = histogram2d(xs.numpy(), ys.numpy(), 48, -3.0, 3.0)
    density = ember.from_numpy(counts)                   # zero-copy back into Ember
    g = np.exp(-0.5 * (np.arange(-3, 4) / 1.5) ** 2)
    kernel = ember.from_numpy(np.outer(g, g) / np.outer(g, g).sum()).reshape(1, 1, 7, 7)
    smooth = F.conv2d(density.reshape(1, 1, 48, 48), kernel, padding="same").reshape(48, 48)
    peak = smooth.argmax().item()
    cell = 6.0 / 48
    print(f"1. histogram of {len(points)} points (Numba) smoothed by conv2d (Ember): "
          f"{density.sum().item():.0f} counted, densest cell near "
          f"({-3 + (peak % 48 + 0.5) * cell:+.2f}, {-3 + (peak // 48 + 0.5) * cell:+.2f})")


@cuda.jit
def damped_sine(x, decay, out):
    """out = exp(-decay x) sin(x), one thread per element."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = math.exp(-decay * x[i]) * math.sin(x[i])


# --- 2. a Numba energy as a custom op in an autodiff graph -------------------------------------
def relax_cluster(n=19, steps=300):
    rng = np.random.default_rng(1)
    grid = np.stack(np.meshgrid(*[np.arange(3)] * 3, indexing="ij"), -1).reshape(-1, 3)
    start = (grid[:n] - 1.0) * 1.2 + rng.normal(0, 0.05, (n, 3))    # a perturbed cubic lattice
    device = ember.Device.cpu().autodiff()
    x = ember.tensor(start, dtype=ember.float64, device=device).require_grad()
    opt = Adam([x], lr=0.01)
    print(f"2. relaxing a {n}-particle Lennard-Jones cluster: energy and its gradient from @njit, "
          "a confining potential from Ember autodiff")
    for step in range(steps + 1):
        energy, grad = lennard_jones(x.numpy())          # zero-copy in
        lj_term = (x * ember.from_numpy(grad)).sum()     # d/dx = grad: the custom op's backward
        r2 = (x * x).sum(1)
        confine = ((r2 - 4.0).relu() ** 2).sum()          # Ember differentiates this part
        if step % 60 == 0:
            print(f"   step {step:3d}  LJ energy {energy:9.4f}  confinement {confine.item():.2e}")
        if step < steps:
            (x,) = opt.step((lj_term + confine).backward())
    print(f"   (a local minimum: the global one for {n} particles is -72.66)")


# --- 3. zero-copy, both ways ----------------------------------------------------------------------
def zero_copy_demo():
    a = np.arange(12.0).reshape(3, 4)
    t = ember.from_numpy(a)
    assert np.shares_memory(t.numpy(), a)
    col = t[:, 1]                                           # a view: stride 4 elements
    assert np.shares_memory(col.numpy(), a) and col.numpy().strides == (32,)
    out = ember.from_numpy(np.asarray(histogram2d(col.numpy(), col.numpy(), 4, 0.0, 12.0)))
    print(f"3. zero-copy: from_numpy shares memory, views reach @njit as strided arrays "
          f"(diagonal counts {out.numpy().diagonal().tolist()})")


# --- 4. a @cuda.jit kernel on Ember's CUDA tensors ------------------------------------------------
def cuda_demo(n=4096):
    if not cuda.is_available():
        print("4. no CUDA device: skipped (NUMBA_ENABLE_CUDASIM=1 runs it on Numba's simulator)")
        return
    device = ember.Device.cuda()
    x = ember.linspace(0.0, 20.0, n, device=device)
    out = cuda.device_array(n, np.float32)
    # zero-copy in through __cuda_array_interface__ (Numba's simulator lacks as_cuda_array: a copy)
    x_in = cuda.as_cuda_array(x) if hasattr(cuda, "as_cuda_array") else cuda.to_device(x.numpy())
    damped_sine[(n + 255) // 256, 256](x_in, 0.2, out)
    y = ember.from_cuda_array(out)                     # the kernel's array out: no copy
    same = ((x * -0.2).exp() * x.sin() - y).abs().max().item()
    print(f"4. @cuda.jit on Ember CUDA tensors ({device}): {n} values, "
          f"max |kernel - Ember ops| = {same:.1e}, sum {y.sum().item():.4f}")


if __name__ == "__main__":
    t0 = time.perf_counter()
    density_demo()
    relax_cluster()
    zero_copy_demo()
    cuda_demo()
    print(f"done in {time.perf_counter() - t0:.1f} s")
