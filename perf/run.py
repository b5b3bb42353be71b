"""Ember against numpy (and PyTorch when it is installed), op by op, in one run.

    python -m perf                     # or: python perf/run.py
    python -m perf --quick             # fewer samples per cell
    python -m perf --json out.json     # also write the rows and a description of the machine

Each benchmark builds its inputs once (numpy arrays; Ember and PyTorch get zero-copy views of
them), calls every library a few times to warm up (Numba's compile time is never counted), then
takes samples in turn, one library after the other, so a slow drift of the machine hits all of
them alike.  A sample is a loop of calls long enough (>= 20 ms) that the timer's resolution does
not matter even for one-element ops; the time of the same loop calling an empty function is
subtracted.  Each cell is the median time per call.  ``ratio`` is numpy time / Ember time:
above 1, Ember is faster.  ``numpy out=`` is numpy writing into a preallocated array (no
allocation), for reference; ``ember 1st call`` is the first call alone: Numba compiling the
kernels, or loading them from the disk cache.
"""
import argparse
import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Callable, NamedTuple, Optional

import numpy as np

try:
    import torch
except ImportError:
    torch = None

import ember

MIN_SAMPLE_S = 0.02
REPEATS, QUICK_REPEATS = 21, 5
WARMUP_CALLS = 2
TOLERANCE = 1e-3  # largest |ember - numpy| / max|numpy| before a row is flagged


class Bench(NamedTuple):
    name: str
    setup: Callable                      # () -> tuple of numpy arrays, built once
    ember: Callable                      # (*ember tensors) -> result
    numpy: Callable                      # (*numpy arrays) -> result
    torch: Optional[Callable] = None     # (*torch tensors) -> result
    numpy_out: Optional[Callable] = None  # (*numpy arrays, out) -> writes into out


# --- the benchmarks ------------------------------------------------------------------------
def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def one(*shape):
    return lambda: (randn(*shape),)


def two(*shape):
    return lambda: (randn(*shape, seed=0), randn(*shape, seed=1))


def add(a, b):
    return a + b


def matmul(a, b):
    return a @ b


def numpy_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


M = 1 << 20
N = 4096
ROWS = [
    Bench("add 1M f32", two(M), add, add, add, lambda a, b, out: np.add(a, b, out=out)),
    Bench("add 16M f32", two(16 * M), add, add, add, lambda a, b, out: np.add(a, b, out=out)),
    Bench("exp 1M f32", one(M), lambda a: a.exp(), np.exp, lambda a: a.exp(),
          lambda a, out: np.exp(a, out=out)),
    Bench("exp 16M f32", one(16 * M), lambda a: a.exp(), np.exp, lambda a: a.exp(),
          lambda a, out: np.exp(a, out=out)),
    Bench(f"sum all {N}x{N}", one(N, N), lambda a: a.sum(), lambda a: a.sum(), lambda a: a.sum()),
    Bench(f"sum dim=0 {N}x{N}", one(N, N), lambda a: a.sum(dim=0), lambda a: a.sum(axis=0),
          lambda a: a.sum(dim=0), lambda a, out: np.sum(a, axis=0, out=out)),
    Bench(f"sum dim=1 {N}x{N}", one(N, N), lambda a: a.sum(dim=1), lambda a: a.sum(axis=1),
          lambda a: a.sum(dim=1), lambda a, out: np.sum(a, axis=1, out=out)),
    Bench("matmul 256 f32", two(256, 256), matmul, matmul, matmul,
          lambda a, b, out: np.matmul(a, b, out=out)),
    Bench("matmul 1024 f32", two(1024, 1024), matmul, matmul, matmul,
          lambda a, b, out: np.matmul(a, b, out=out)),
    Bench("softmax 4096x1024 dim=-1", one(4096, 1024), lambda x: x.softmax(-1), numpy_softmax,
          lambda x: x.softmax(-1)),
    Bench("add 1 element", two(1), add, add, add, lambda a, b, out: np.add(a, b, out=out)),
]


# --- timing ----------------------------------------------------------------------------------
def sample(fn, args, number):
    """Seconds taken by ``number`` calls of ``fn(*args)``, with the garbage collector off."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(number):
            fn(*args)
        return time.perf_counter() - start
    finally:
        if was_enabled:
            gc.enable()


def calls_per_sample(fn, args):
    """How many calls make a sample of at least MIN_SAMPLE_S."""
    number = 1
    while True:
        t = sample(fn, args, number)
        if t >= MIN_SAMPLE_S:
            return number
        number = max(number + 1, int(number * min(10.0, 1.2 * MIN_SAMPLE_S / max(t, 1e-7))))


def time_calls(fns, repeats, overhead=0.0):
    """Median seconds per call of each ``(fn, args)``; the samples of the fns alternate."""
    numbers = [calls_per_sample(fn, args) for fn, args in fns]
    samples = [[] for _ in fns]
    for _ in range(repeats):
        for (fn, args), number, out in zip(fns, numbers, samples):
            out.append(sample(fn, args, number) / number)
    return [max(statistics.median(s) - overhead, 0.0) for s in samples]


def call_overhead(repeats):
    """Seconds per iteration of the sampling loop around an empty call."""
    args = tuple(np.zeros(1, np.float32) for _ in range(2))
    return time_calls([(lambda *a: None, args)], repeats)[0]


def relative_error(result, reference):
    result = np.asarray(result, np.float64)
    reference = np.asarray(reference, np.float64)
    if result.shape != reference.shape:
        return float("inf")
    scale = max(np.abs(reference).max(initial=0.0), 1e-30)
    return float(np.abs(result - reference).max(initial=0.0) / scale)


def run_bench(bench, repeats, overhead):
    """Times one benchmark; returns a dict of seconds per call (None where a library failed)."""
    arrays = bench.setup()
    row = {"name": bench.name, "ember_s": None, "numpy_s": None, "numpy_out_s": None,
           "torch_s": None, "ember_first_call_s": None, "ember_error": None, "error": None}
    reference = bench.numpy(*arrays)
    candidates = {"numpy": (bench.numpy, arrays)}
    if bench.numpy_out is not None:
        out = np.empty_like(reference)
        candidates["numpy_out"] = (lambda *a: bench.numpy_out(*a, out), arrays)
    if torch is not None and bench.torch is not None:
        candidates["torch"] = (bench.torch, tuple(torch.from_numpy(a) for a in arrays))
    try:
        tensors = tuple(ember.from_numpy(a) for a in arrays)
        start = time.perf_counter()
        result = bench.ember(*tensors)  # the first call compiles (or loads) the kernels
        row["ember_first_call_s"] = time.perf_counter() - start
        row["ember_error"] = relative_error(result, reference)
        candidates["ember"] = (bench.ember, tensors)
    except Exception as e:  # an op not implemented yet, or broken: report it, go on
        row["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:200]
    for fn, args in candidates.values():
        for _ in range(WARMUP_CALLS):
            fn(*args)
    times = time_calls(list(candidates.values()), repeats, overhead)
    for key, t in zip(candidates, times):
        row[f"{key}_s"] = t
    if row["ember_s"]:
        row["ratio"] = row["numpy_s"] / row["ember_s"]
        if row["torch_s"]:
            row["torch_ratio"] = row["torch_s"] / row["ember_s"]
    return row


# --- the machine ---------------------------------------------------------------------------------
def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (commit + ("+dirty" if dirty else "")) if commit else None


def blas_info():
    try:
        deps = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{deps.get('name')} {deps.get('version')}"
    except Exception:
        return None


def environment(repeats):
    """Where and with what the numbers were measured (call it after the benchmarks ran)."""
    import numba

    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel ran yet
        layer = None
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "ember": ember.__version__,
        "numpy": np.__version__,
        "numpy_blas": blas_info(),
        "numba": numba.__version__,
        "numba_threading_layer": layer,
        "numba_threads": numba.get_num_threads(),
        "torch": torch.__version__ if torch is not None else None,
        "git_commit": git_commit(),
        "env": {k: v for k, v in sorted(os.environ.items())
                if k.startswith(("OPENBLAS_", "OMP_", "MKL_", "NUMBA_", "EMBER_"))},
        "loadavg_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "repeats": repeats,
        "min_sample_s": MIN_SAMPLE_S,
    }


# --- printing ------------------------------------------------------------------------------------
def fmt_time(t):
    if t is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if t >= scale:
            return f"{t / scale:.3g} {unit}" if t / scale < 100 else f"{t / scale:.0f} {unit}"
    return f"{t * 1e9:.0f} ns"


def fmt_ratio(r):
    return "-" if r is None else f"{r:.2f}x"


def table(rows):
    show_torch = any(r["torch_s"] is not None for r in rows)
    head = ["benchmark", "ember", "numpy", "ratio", "numpy out=", "ember 1st call"]
    if show_torch:
        head += ["torch", "torch/ember"]
    lines = []
    for r in rows:
        cells = [r["name"], "error" if r["error"] else fmt_time(r["ember_s"]),
                 fmt_time(r["numpy_s"]), fmt_ratio(r.get("ratio")), fmt_time(r["numpy_out_s"]),
                 fmt_time(r["ember_first_call_s"])]
        if show_torch:
            cells += [fmt_time(r["torch_s"]), fmt_ratio(r.get("torch_ratio"))]
        if r["ember_error"] is not None and r["ember_error"] > TOLERANCE:
            cells[0] += f"  (MISMATCH {r['ember_error']:.1e})"
        lines.append(cells)
    widths = [max(len(c[i]) for c in [head] + lines) for i in range(len(head))]
    out = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(head, widths)))]
    out.append("-" * len(out[0]))
    for cells in lines:
        out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                             for i, (c, w) in enumerate(zip(cells, widths))))
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m perf", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_REPEATS} samples per cell "
                        f"instead of {REPEATS}")
    parser.add_argument("--json", metavar="FILE", help="write the rows and the environment to FILE")
    parser.add_argument("-k", metavar="TEXT", default="",
                        help="only the benchmarks whose name contains TEXT")
    args = parser.parse_args(argv)
    repeats = QUICK_REPEATS if args.quick else REPEATS
    benches = [b for b in ROWS if args.k in b.name]

    overhead = call_overhead(repeats)
    rows = []
    for i, bench in enumerate(benches, 1):
        print(f"[{i:2d}/{len(benches)}] {bench.name} ...", end=" ", flush=True)
        start = time.perf_counter()
        row = run_bench(bench, repeats, overhead)
        rows.append(row)
        note = (f"ember error: {row['error']}" if row["error"] else
                f"ember {fmt_time(row['ember_s'])}, numpy {fmt_time(row['numpy_s'])}")
        print(f"{note} ({time.perf_counter() - start:.1f} s)", flush=True)

    env = environment(repeats)
    print()
    print(f"{env['cpu']}, {env['cpus_usable']} cores; numpy {env['numpy']} ({env['numpy_blas']}), "
          f"numba {env['numba']} ({env['numba_threading_layer']}, {env['numba_threads']} threads)"
          + (f", torch {env['torch']}" if env["torch"] else ""))
    settings = ", ".join(f"{k}={v}" for k, v in env["env"].items() if k.startswith("OPENBLAS_"))
    print(f"commit {env['git_commit']}; median of {repeats} samples of >= "
          f"{MIN_SAMPLE_S * 1e3:.0f} ms; ratio = numpy / ember (> 1: ember faster)"
          + (f"; {settings}" if settings else ""))
    if env["loadavg_1min"] and env["cpus_usable"] and env["loadavg_1min"] > 0.5 * env["cpus_usable"]:
        print(f"warning: the machine was busy (1-min load {env['loadavg_1min']:.1f} on "
              f"{env['cpus_usable']} cores); parallel kernels suffer most from that")
    print()
    print(table(rows))
    errors = [r for r in rows if r["error"]]
    for r in errors:
        print(f"  {r['name']}: {r['error']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "rows": rows}, f, indent=2)
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
