"""Timing the libraries of one row without their thread pools timing each other.

``ember.benchmark_many`` interleaves single samples (ember, numpy, torch, ember, ...), so that a
drift of the machine hits every library alike.  Next to PyTorch that interleaving measures the
neighbours too: each library leaves worker threads behind that keep spinning for a while after
its call returns (numpy's OpenBLAS busy-waits up to ~0.1 s before sleeping, PyTorch's OpenMP
runtime spins too), and on a 2-core machine they steal a core from the next library's sample.
Measured on the 2-core VM (``perf run --suite matmul``, medians of 8 runs): interleaved, with
torch imported, Ember's ``a @ b`` (which is ``np.matmul``) took 1.35x (256) and 1.27x (1024)
numpy's own call, and torch's 1024 matmul 27.6 ms; in blocks 1.02x and 1.01x, and torch 10.0
ms.  (Interleaved without torch: 1.02x and 1.01x.)

``benchmark_blocks`` times each library in a block of consecutive samples instead, with its
warm-up at the start of the block, after the process's other threads have gone idle
(``wait_idle``: their CPU time, read from ``/proc``, stops growing).  It takes the samples in
up to ``rounds`` blocks per library, in turn, so that a drift of the machine (another process
starting) still reaches every library, and returns the same ``BenchmarkResult``s as
``benchmark_many`` (medians of all the samples).  The libraries keep their own thread
settings: nothing here changes what is timed.
"""
import math
import os
import threading
import time

from ember.benchmark import (CLOCK_TICKS_PER_SAMPLE, MIN_SAMPLES, BenchmarkResult, Timer,
                             clock_resolution, environment)

ROUNDS = 7             # blocks per library, of at least MIN_SAMPLES samples each
IDLE_POLL_S = 0.005    # how often wait_idle looks at the other threads
IDLE_SHARE = 0.05      # idle: the other threads ran less than this share of a poll interval
IDLE_MAX_S = 1.0       # give up waiting (a thread that never sleeps) after this long
IDLE_POLLS = 3         # quiet polls in a row that count as idle: a spinning thread that the
                       # scheduler preempted (a loaded machine) can miss one 5 ms poll


def _other_threads_cpu_s():
    """CPU seconds used so far by this process's threads other than the calling one, or None
    where ``/proc`` cannot tell (not Linux)."""
    me = threading.get_native_id()
    total = 0
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tids:
        if int(tid) == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])   # ns on the CPU
        except (OSError, ValueError, IndexError):   # a thread that just ended
            continue
    return total * 1e-9


def new_process_env(extra=None):
    """``os.environ`` (plus ``extra``) for a timed new Python process, with bytecode caching on.

    An installed package imports from its ``.pyc`` files.  This project's VMs set
    ``PYTHONDONTWRITEBYTECODE``, under which every new process compiled Ember's sources again
    (26 modules, ~85 ms of a ~0.3 s import under cProfile), a cost no user pays.  Without it
    the first process writes ``__pycache__`` (git ignores it), so callers run one untimed."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(extra or {})
    return env


def wait_idle(poll=IDLE_POLL_S, share=IDLE_SHARE, limit=IDLE_MAX_S, polls=IDLE_POLLS):
    """Sleep until the other threads of the process have stopped running (BLAS and OpenMP
    workers spinning after a call), at most ``limit`` seconds.  Returns the seconds waited."""
    start = time.perf_counter()
    before = _other_threads_cpu_s()
    if before is None:   # no /proc: sleep past the usual spin times instead
        time.sleep(min(limit, 0.2))
        return time.perf_counter() - start
    quiet = 0
    while True:
        time.sleep(poll)
        now = _other_threads_cpu_s()
        quiet = quiet + 1 if now - before < share * poll else 0
        if quiet >= polls or time.perf_counter() - start > limit:
            return time.perf_counter() - start
        before = now


def benchmark_blocks(fns, *, warmup=2, repeat=21, min_time=0.01, max_time=None, device=None,
                     number=None, rounds=ROUNDS):
    """Like ``ember.benchmark_many``, but each library's samples are taken in blocks (see the
    module docstring).  ``fns``: name -> callable or ``Timer``; returns name -> BenchmarkResult.
    ``max_time`` bounds the sampling of the whole group (each library gets an equal share,
    and never fewer than 3 samples)."""
    from ember.device import parse

    dev = parse(device)
    timers = {name: f if isinstance(f, Timer) else Timer(f, device=dev) for name, f in fns.items()}
    target = max(min_time, CLOCK_TICKS_PER_SAMPLE * clock_resolution())
    rounds = max(1, min(rounds, repeat // MIN_SAMPLES))
    budget = None if max_time is None else max_time / max(len(timers), 1)
    first, calls, samples, spent = {}, {}, {name: [] for name in timers}, dict.fromkeys(timers, 0.0)
    for r in range(rounds):
        want = math.ceil(repeat * (r + 1) / rounds)   # samples per library by the end of round r
        for name, timer in timers.items():
            wait_idle()
            if r == 0:
                first[name], last = timer.warm(warmup)   # the first compiles (or loads) kernels
                calls[name] = number or timer.calibrate(target, last)
            else:   # warm again (a quarter of a sample): caches, the library's threads
                timer.run(max(1, calls[name] // 4))
            start = time.perf_counter()
            got = samples[name]
            while len(got) < want:
                if (budget is not None and len(got) >= MIN_SAMPLES
                        and spent[name] + time.perf_counter() - start > budget):
                    break
                got.append(timer.run(calls[name]) / calls[name])
            spent[name] += time.perf_counter() - start
    env = environment()
    dev_name = dev.type if dev.type == "cpu" else f"{dev.type}:{dev.index}"
    return {name: BenchmarkResult(name, samples[name], calls[name], max(warmup, 1), first[name],
                                  dev_name, env) for name in timers}
