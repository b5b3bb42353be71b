"""Timing Ember code: ``ember.benchmark(fn)`` and ``ember.synchronize(device)``.

>>> r = ember.benchmark(lambda: a + b)            # a, b: tensors built once, outside fn
>>> r.median, r.iqr, r.n                           # seconds per call, spread, sample count
>>> print(r)                                       # 1.23 ms (IQR 0.04 ms, 21 samples x 8 calls)

How one benchmark runs:

1. warm-up: ``fn`` is called ``warmup`` times (at least once).  The first call compiles the
   Numba kernels it uses (or loads them from the disk cache); its time is reported as
   ``first_call_s`` and never enters the samples.  A first call runs small fused chains op
   by op, as in any script (chains compile once they are hot: ``ember.fusion.HOT_RUNS``);
   if it did, the next warm-up call compiles them at once (``HOT_RUNS`` is 1 for it) and one
   more call follows: samples time the steady state a loop reaches after ``HOT_RUNS`` calls,
   without making those calls.  Likewise backwards and optimizer steps replay from the second
   call on (``graph.HOT_BACKWARDS`` and ``optim.HOT_STEPS`` are 1 after the first call).
2. calibration: the number of calls per sample grows until a sample lasts at least
   ``min_time`` seconds, and never less than 10,000 ticks of the clock
   (``time.get_clock_info("perf_counter").resolution``), so the timer's resolution is
   irrelevant even for a one-element op.
3. sampling: ``repeat`` samples (fewer when ``max_time`` runs out, never fewer than 3), each
   timed with the garbage collector off and with ``synchronize(device)`` before the clock
   starts and before it stops, so work queued on an asynchronous device is counted in full.
   A sample is the time of its loop divided by its number of calls.

``setup``, when given, is called (untimed) once per call of ``fn`` and its result passed to
``fn``: for work that consumes its input, such as ``loss.backward()``.  The calls of one sample
are then capped so that their setups take at most ~0.25 s (samples may be shorter than
``min_time`` when ``fn`` is much cheaper than ``setup``).

This module imports only the standard library (``import ember`` stays fast).
"""
import datetime
import functools
import gc
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

CLOCK_TICKS_PER_SAMPLE = 10_000
MIN_SAMPLES = 3
SETUP_BUDGET_S = 0.25   # most seconds of untimed setup calls per sample


def synchronize(device=None):
    """Wait until every op queued on ``device`` (default: the default device) has finished.

    A no-op on the CPU, whose ops run eagerly.  ``device`` is a ``Device``, ``"cpu"``,
    ``"cuda"``, ``"cuda:1"`` or None; an unavailable device raises ``ember.DeviceError``.
    """
    from .device import parse

    d = parse(device)
    if d.type == "cpu":
        return
    sync = getattr(d.backend, "synchronize", None)  # asynchronous backends provide it
    if sync is not None:
        sync(d)


def clock_resolution():
    return time.get_clock_info("perf_counter").resolution


# --- statistics ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Summary:
    """Order statistics of a list of samples (quartiles interpolated linearly, as numpy does)."""
    median: float
    min: float
    max: float
    q1: float
    q3: float
    iqr: float
    mean: float
    stdev: float
    n: int


def summarize(samples):
    xs = sorted(float(x) for x in samples)
    if not xs:
        raise ValueError("summarize: no samples")
    if len(xs) == 1:
        q1 = q3 = xs[0]
    else:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return Summary(median=statistics.median(xs), min=xs[0], max=xs[-1], q1=q1, q3=q3,
                   iqr=q3 - q1, mean=statistics.fmean(xs),
                   stdev=statistics.stdev(xs) if len(xs) > 1 else 0.0, n=len(xs))


# --- the machine -----------------------------------------------------------------------------
def _version(dist):
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


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
    """HEAD of the checkout Ember is imported from (``+dirty`` with local changes), or None."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        run = functools.partial(subprocess.run, cwd=root, capture_output=True, text=True, timeout=10)
        commit = run(["git", "rev-parse", "HEAD"]).stdout.strip()
        dirty = run(["git", "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (commit + ("+dirty" if dirty else "")) if commit else None


def _blas():
    np = sys.modules.get("numpy")
    try:
        deps = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{deps.get('name')} {deps.get('version')}"
    except Exception:
        return None


@functools.lru_cache(maxsize=None)
def _static_environment():
    return {
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "ember": getattr(sys.modules.get("ember"), "__version__", None),
        "numpy": _version("numpy"),
        "numpy_blas": _blas(),
        "numba": _version("numba"),
        "torch": _version("torch"),
        "git_commit": git_commit(),
    }


def environment():
    """Where and with what a measurement was taken (call it after the timed code ran: the
    Numba threading layer is only known once a parallel kernel has run)."""
    numba = sys.modules.get("numba")
    layer = threads = None
    if numba is not None:
        try:
            layer = numba.threading_layer()
        except ValueError:  # no parallel kernel ran yet
            pass
        threads = numba.get_num_threads()
    env = dict(_static_environment())
    env.update({
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "numba_threading_layer": layer,
        "numba_threads": threads,
        "env": {k: v for k, v in sorted(os.environ.items())
                if k.startswith(("OPENBLAS_", "OMP_", "MKL_", "NUMBA_", "EMBER_"))},
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "clock_resolution_s": clock_resolution(),
    })
    return env


# --- timing ----------------------------------------------------------------------------------
class Timer:
    """Times calls of ``fn`` (``fn()``, or ``fn(setup())`` when ``setup`` is given)."""

    def __init__(self, fn, setup=None, device=None):
        self.fn = fn
        self.setup = setup
        self.device = device
        self.setup_s = 0.0    # seconds per setup call, last measured

    def run(self, number):
        """Seconds taken by ``number`` calls, synchronised, with the garbage collector off."""
        fn = self.fn
        inputs = None
        if self.setup is not None:
            start = time.perf_counter()
            inputs = [self.setup() for _ in range(number)]
            self.setup_s = (time.perf_counter() - start) / number
        synchronize(self.device)
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            start = time.perf_counter()
            if inputs is None:
                for _ in range(number):
                    fn()
            else:
                for x in inputs:
                    fn(x)
            synchronize(self.device)
            return time.perf_counter() - start
        finally:
            if was_enabled:
                gc.enable()

    def warm(self, warmup):
        """The warm-up calls (see the module docstring): returns the first call's seconds and
        the last call's (None when there was one call)."""
        from . import fusion

        def timed():
            cold = fusion.stats()["cold"]
            t = self.run(1)
            return t, fusion.stats()["cold"] != cold

        first, cold = timed()   # (as any script's first call)
        last = None
        # after it, what a loop does once it repeats happens at once: chains still cold
        # compile at their next force, a kind of graph or of optimizer step seen again is
        # traced (and replayed from then on)
        thresholds = [(fusion, "HOT_RUNS")] + [
            (sys.modules[m], name) for m, name in (("ember.autograd.graph", "HOT_BACKWARDS"),
                                                   ("ember.optim", "HOT_STEPS"))
            if m in sys.modules]
        saved = [getattr(m, name) for m, name in thresholds]
        for m, name in thresholds:
            setattr(m, name, 1)
        try:
            before = False   # the call before ran chains op by op (so this one may have compiled)
            calls = 1
            while calls < warmup or ((cold or before) and calls < max(warmup, 1) + 3):
                before = cold
                last, cold = timed()
                calls += 1
        finally:
            for (m, name), value in zip(thresholds, saved):
                setattr(m, name, value)
        return first, last

    def calibrate(self, min_time, last=None):
        """Calls per sample so that a sample lasts ``min_time`` (``last``: a warm call's time)."""
        number, t = 1, last
        if t is not None and t >= min_time:
            # one warm call slowed by another process must not decide alone either (a 1 us
            # call preempted past a 10 us target once gave samples of one call)
            t = min(t, self.run(1))
        while t is None or t < min_time:
            if t is not None:
                grown = max(number + 1, int(number * min(10.0, 1.2 * min_time / max(t, 1e-9))))
                if self.setup is not None:   # the untimed setups must stay affordable
                    grown = min(grown, max(1, int(SETUP_BUDGET_S / max(self.setup_s, 1e-9))))
                if grown <= number:
                    break
                number = grown
            t = self.run(number)
            if t >= min_time and number > 1:
                # a run slowed by another process (preempted, a busy core) must not end the
                # calibration early: the faster of two runs decides
                t = min(t, self.run(number))
        return number


@dataclass
class BenchmarkResult:
    """Seconds per call of one benchmarked function, and where they were measured."""
    name: str
    samples: list              # seconds per call, one per sample, in the order taken
    number: int                # calls per sample
    warmup: int
    first_call_s: float        # the first warm-up call: compilation or cache loading included
    device: str
    environment: dict = field(repr=False)
    median: float = 0.0
    min: float = 0.0
    max: float = 0.0
    q1: float = 0.0
    q3: float = 0.0
    iqr: float = 0.0
    mean: float = 0.0
    stdev: float = 0.0
    n: int = 0                 # sample count

    def __post_init__(self):
        for k, v in asdict(summarize(self.samples)).items():
            setattr(self, k, v)

    def to_dict(self):
        return asdict(self)

    def __str__(self):
        return (f"{self.name}: {format_seconds(self.median)} (IQR {format_seconds(self.iqr)}, "
                f"{self.n} samples x {self.number} calls, first call {format_seconds(self.first_call_s)})")


def format_seconds(t):
    if t is None or (isinstance(t, float) and math.isnan(t)):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(t) >= scale:
            return f"{t / scale:.3g} {unit}" if t / scale < 100 else f"{t / scale:.0f} {unit}"
    return f"{t * 1e9:.0f} ns"


def benchmark_many(fns, *, warmup=2, repeat=21, min_time=0.01, max_time=None, device=None,
                   number=None):
    """Benchmarks several functions, their samples interleaved (a drift of the machine hits
    them alike).  ``fns``: name -> callable or ``Timer``.  Returns name -> BenchmarkResult."""
    from .device import parse

    dev = parse(device)
    timers = {name: f if isinstance(f, Timer) else Timer(f, device=dev) for name, f in fns.items()}
    target = max(min_time, CLOCK_TICKS_PER_SAMPLE * clock_resolution())
    first, calls = {}, {}   # per name: the first call's seconds, calls per sample
    for name, timer in timers.items():
        first[name], last = timer.warm(warmup)   # the first call compiles (or loads) the kernels
        calls[name] = number or timer.calibrate(target, last)
    samples = {name: [] for name in timers}
    start = time.perf_counter()
    for i in range(repeat):
        if max_time is not None and i >= MIN_SAMPLES and time.perf_counter() - start > max_time:
            break
        for name, timer in timers.items():
            samples[name].append(timer.run(calls[name]) / calls[name])
    env = environment()
    dev_name = dev.type if dev.type == "cpu" else f"{dev.type}:{dev.index}"
    return {name: BenchmarkResult(name, samples[name], calls[name], max(warmup, 1), first[name],
                                  dev_name, env) for name in timers}


def benchmark(fn, *, warmup=2, repeat=21, min_time=0.01, max_time=None, device=None, setup=None,
              number=None, name=None):
    """Time ``fn`` (seconds per call) after warm-up; see the module docstring.

    warmup:   calls before timing (at least 1; the first compiles the kernels and is reported
              as ``first_call_s``).
    repeat:   samples to take.
    min_time: shortest sample, in seconds (raised to 10,000 clock ticks if that is longer).
    max_time: stop sampling after this many seconds (keeping at least 3 samples).
    device:   device synchronised around each sample (default: the default device).
    setup:    called untimed before each call; ``fn(setup())`` is timed.
    number:   calls per sample, instead of calibrating it from ``min_time``.

    Returns a ``BenchmarkResult`` with ``median``, ``min``, ``max``, ``q1``, ``q3``, ``iqr``,
    ``mean``, ``stdev``, ``n`` (samples), ``samples``, ``number`` (calls per sample),
    ``first_call_s`` and ``environment``.
    """
    name = name or getattr(fn, "__name__", "fn")
    timer = Timer(fn, setup=setup, device=device)
    return benchmark_many({name: timer}, warmup=warmup, repeat=repeat, min_time=min_time,
                          max_time=max_time, device=device, number=number)[name]
