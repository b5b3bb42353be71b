"""Ember's benchmark suites: what ``python -m perf run`` measures.

A suite is a list of ``Case``s; a case runs one or a few related measurements and returns
their rows (see perf/schema.py).  Every timing goes through ``ember.benchmark``'s machinery:
warm-up first (compile time never counts), samples long enough for the clock, and the
libraries of one row timed in blocks of consecutive samples, each after the previous library's
worker threads have gone idle, in a few rounds so a drift of the machine hits them alike
(perf/timing.py).  Inputs are built once as numpy arrays; Ember and PyTorch get zero-copy views
of them.

Suites: elementwise, reductions, matmul, softmax (ops against numpy and PyTorch), autodiff
(cost per recorded node and of backward on small tensors; an MLP training step),
checkpointing (memory kept by the graph and backward time, NONE against BALANCED),
quantized (quantized matmul against float32, quantize/dequantize throughput), startup (`import
ember` in a new process), fft (ember.fft against numpy.fft, scipy.fft with workers=2 and
torch.fft), linalg (factorisations, small batches, a GP likelihood and einsum against
numpy/SciPy/PyTorch: perf/linalg_suite.py), small (small workloads eager and compiled against
numpy, PyTorch and jax.jit: perf/small_suite.py) and cuda (a few ops on the GPU).  A suite whose
feature or device does not exist reports its rows as ``unavailable``, with the reason.
"""
import gc
import subprocess
import sys
import time
import tracemalloc
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional

import numpy as np

import ember
from ember.benchmark import Timer, summarize
from perf.timing import benchmark_blocks

SUITES = ("elementwise", "reductions", "matmul", "softmax", "autodiff", "checkpointing",
          "quantized", "startup", "fft", "linalg", "small", "cuda")
TOLERANCE = 1e-3  # largest |ember - numpy| / max|numpy| before a row is flagged as a mismatch


@dataclass
class Settings:
    repeat: int = 21
    min_time: float = 0.02
    max_time: Optional[float] = None   # per timed group; None: always `repeat` samples
    warmup: int = 2
    device: str = "cpu"
    torch: object = None               # the torch module, or None


@dataclass
class Case:
    suite: str
    names: list                         # the names of the rows it returns, in order
    run: Callable                       # (Settings, ember.Device) -> list of rows
    device: Optional[str] = None        # None: Settings.device


# --- rows ------------------------------------------------------------------------------------
def stats(result, scale=1.0):
    """A BenchmarkResult (or a list of samples) as a schema stats dict, samples times ``scale``."""
    samples = [x * scale for x in (result if isinstance(result, list) else result.samples)]
    s = summarize(samples).__dict__.copy()
    s["number"] = None if isinstance(result, list) else result.number
    s["samples"] = samples
    return s


def make_row(suite, name, results=None, unit="s", status="ok", error=None, first_call_s=None,
             max_rel_error=None, informational=False):
    return {"suite": suite, "name": name, "unit": unit, "status": status, "error": error,
            "informational": informational, "first_call_s": first_call_s,
            "max_rel_error": max_rel_error, "results": results or {}}


def failed_rows(case, status, reason):
    return [make_row(case.suite, name, status=status, error=reason) for name in case.names]


def relative_error(result, reference):
    """max |result - reference| / max |reference|; inf for a shape mismatch or a NaN."""
    result, reference = np.asarray(result), np.asarray(reference)
    wide = np.complex128 if np.iscomplexobj(result) or np.iscomplexobj(reference) else np.float64
    result = result.astype(wide)
    reference = reference.astype(wide)
    if result.shape != reference.shape:
        return np.inf
    scale = max(np.abs(reference).max(initial=0.0), 1e-30)
    err = float(np.abs(result - reference).max(initial=0.0) / scale)
    return err if np.isfinite(err) else np.inf


def check(row, *pairs):
    """Records the largest relative error of Ember's ``(result, reference)`` pairs in ``row``;
    beyond TOLERANCE the row stays timed but carries a MISMATCH note."""
    err = max(relative_error(r, ref) for r, ref in pairs)
    row["max_rel_error"] = err if np.isfinite(err) else None
    if err > TOLERANCE:
        row["error"] = f"MISMATCH: max relative error {err:.3g} against the numpy reference"


def error_text(e):
    return f"{type(e).__name__}: {e}".splitlines()[0][:200]


def timed(fns, s, **kw):
    """benchmark_blocks with the run's settings (``kw`` overrides them)."""
    opts = dict(warmup=s.warmup, repeat=s.repeat, min_time=s.min_time, max_time=s.max_time)
    opts.update(kw)
    return benchmark_blocks(fns, **opts)


def torch_device(s, device):
    """The torch device matching Ember's, or None when PyTorch cannot run there."""
    torch = s.torch
    if torch is None:
        return None
    if device.type == "cpu":
        return "cpu"
    return "cuda" if torch.cuda.is_available() else None


def torch_fn(s, tdev, fn):
    """``fn`` followed by a torch synchronisation on a GPU."""
    if tdev == "cuda":
        return lambda *a: (fn(*a), s.torch.cuda.synchronize())
    return fn


def to_device(a, device):
    t = ember.from_numpy(a)
    return t if device.type == "cpu" else t.to(device)


# --- ops against numpy and PyTorch -------------------------------------------------------------
class Op(NamedTuple):
    name: str
    setup: Callable                      # () -> tuple of numpy arrays, built once
    ember: Callable                      # (*ember tensors) -> result
    numpy: Callable                      # (*numpy arrays) -> result
    torch: Optional[Callable] = None     # (*torch tensors) -> result
    numpy_out: Optional[Callable] = None  # (*numpy arrays, out) -> writes into out
    others: Optional[dict] = None        # more peers: library name -> (*numpy arrays) -> result


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def one(*shape):
    return lambda: (randn(*shape),)


def two(*shape):
    return lambda: (randn(*shape, seed=0), randn(*shape, seed=1))


def three(*shape):
    return lambda: (randn(*shape, seed=0), randn(*shape, seed=1), randn(*shape, seed=2))


def computed(result):
    """``result`` with its deferred values computed: with fusion on, an elementwise op only
    records what to compute, so a timing must include the kernel that computes it."""
    if isinstance(result, ember.Tensor):
        return ember.fusion.force(result)
    if isinstance(result, (list, tuple)):
        return [computed(r) for r in result]
    if isinstance(result, ember.Gradients):        # what backward() returns: its gradients
        for g in result._grads.values():
            computed(g)
    return result


def add(a, b):
    return a + b


def matmul(a, b):
    return a @ b


def numpy_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


M = 1 << 20
N = 4096
ADD = Op("add", None, add, add, add, lambda a, b, out: np.add(a, b, out=out))
EXP = Op("exp", None, lambda a: a.exp(), np.exp, lambda a: a.exp(), lambda a, out: np.exp(a, out=out))


def crandn(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape, dtype=np.float32)
            + 1j * rng.standard_normal(shape, dtype=np.float32)).astype(np.complex64)


def scipy_fft(name):
    """SciPy's ``name`` with two workers (issue 21's peer), imported when first called."""
    def run(a):
        import scipy.fft
        return getattr(scipy.fft, name)(a, workers=2)
    return run


def torch_fft(name):
    def run(t):
        import torch
        return getattr(torch.fft, name)(t)
    return run


def fft_op(name, label, setup):
    import ember.fft
    return Op(label, setup, getattr(ember.fft, name), getattr(np.fft, name), torch_fft(name),
              others={"scipy": scipy_fft(name)})


def numpy_fused_out(a, b, c, out):
    np.multiply(a, b, out=out)
    np.add(out, c, out=out)
    np.tanh(out, out=out)
    np.multiply(out, np.float32(0.5), out=out)
    return np.add(out, a, out=out)


# one fused kernel in Ember (issue 9's fusion goal); numpy and PyTorch run five ops
FUSED = Op("tanh(a*b + c) * 0.5 + a", None, lambda a, b, c: (a * b + c).tanh() * 0.5 + a,
           lambda a, b, c: np.tanh(a * b + c) * np.float32(0.5) + a,
           lambda a, b, c: (a * b + c).tanh() * 0.5 + a, numpy_fused_out)
OPS = {
    "elementwise": [
        ADD._replace(name="add 1M f32", setup=two(M)),
        ADD._replace(name="add 16M f32", setup=two(16 * M)),
        EXP._replace(name="exp 1M f32", setup=one(M)),
        EXP._replace(name="exp 16M f32", setup=one(16 * M)),
        ADD._replace(name="add 1 element", setup=two(1)),
        FUSED._replace(name="tanh(a*b + c) * 0.5 + a 16M f32", setup=three(16 * M)),
        # a square (Ember: the product, not powf) and a pairwise distance's outer broadcast
        # (a column against a row, one chain: docs/decisions.md, "Fusion")
        Op("a ** 2 1M f32", one(M), lambda a: a ** 2, lambda a: a ** 2, lambda a: a ** 2,
           lambda a, out: np.power(a, 2, out=out)),
        Op("(a - b) ** 2 + 1, a 2048x1, b 64 f32",
           lambda: (randn(2048, 1, seed=0), randn(64, seed=1)),
           lambda a, b: (a - b) ** 2 + 1, lambda a, b: (a - b) ** 2 + 1,
           lambda a, b: (a - b) ** 2 + 1),
    ],
    "reductions": [
        Op(f"sum all {N}x{N}", one(N, N), lambda a: a.sum(), lambda a: a.sum(), lambda a: a.sum()),
        Op(f"sum dim=0 {N}x{N}", one(N, N), lambda a: a.sum(dim=0), lambda a: a.sum(axis=0),
           lambda a: a.sum(dim=0), lambda a, out: np.sum(a, axis=0, out=out)),
        Op(f"sum dim=1 {N}x{N}", one(N, N), lambda a: a.sum(dim=1), lambda a: a.sum(axis=1),
           lambda a: a.sum(dim=1), lambda a, out: np.sum(a, axis=1, out=out)),
        # a reduction of an elementwise chain: Ember computes a * b inside the sum (fused
        # reductions, docs/decisions.md); numpy writes the product first, or calls BLAS (np.dot)
        Op("sum(a * b) 16M f32", two(16 * M), lambda a, b: (a * b).sum(),
           lambda a, b: (a * b).sum(), lambda a, b: (a * b).sum(),
           lambda a, b, out: np.dot(a, b, out=out)),
    ],
    "matmul": [
        Op("matmul 256 f32", two(256, 256), matmul, matmul, matmul,
           lambda a, b, out: np.matmul(a, b, out=out)),
        Op("matmul 1024 f32", two(1024, 1024), matmul, matmul, matmul,
           lambda a, b, out: np.matmul(a, b, out=out)),
    ],
    "softmax": [
        Op("softmax 4096x1024 dim=-1", one(4096, 1024), lambda x: x.softmax(-1), numpy_softmax,
           lambda x: x.softmax(-1)),
    ],
    "fft": [
        fft_op("fft", "fft 2^20 c64", lambda: (crandn(M),)),
        fft_op("rfft", "rfft 2^20 f32", one(M)),
        fft_op("fft2", "fft2 2048x2048 c64", lambda: (crandn(2048, 2048),)),
    ],
}
CUDA_OPS = ["add 16M f32", "exp 16M f32", f"sum dim=1 {N}x{N}", "matmul 1024 f32",
            "softmax 4096x1024 dim=-1"]


def run_op(op, suite, name, s, device):
    """One op: Ember (its first call timed alone, its result checked), numpy, PyTorch."""
    arrays = op.setup()
    reference = op.numpy(*arrays)
    fns = {"numpy": lambda: op.numpy(*arrays)}
    if op.numpy_out is not None:
        out = np.empty_like(reference)
        fns["numpy_out"] = lambda: op.numpy_out(*arrays, out)
    tdev = torch_device(s, device)
    if tdev is not None and op.torch is not None:
        targs = tuple(s.torch.from_numpy(a).to(tdev) for a in arrays)
        fns["torch"] = torch_fn(s, tdev, lambda: op.torch(*targs))
    if device.type == "cpu":
        for lib, fn in (op.others or {}).items():
            try:
                fn(*arrays)
            except ImportError:   # an optional peer that is not installed
                continue
            fns[lib] = lambda fn=fn: fn(*arrays)
    row = make_row(suite, name)
    try:
        tensors = tuple(to_device(a, device) for a in arrays)
        # the first call alone: the compile (or the disk-cache load) of its kernels
        row["first_call_s"] = Timer(lambda: computed(op.ember(*tensors)), device=device).run(1)
        check(row, (op.ember(*tensors).numpy(), reference))
        fns = {"ember": Timer(lambda: computed(op.ember(*tensors)), device=device), **fns}
    except Exception as e:  # an op not implemented yet, or broken: report it, time the peers
        row.update(status="error", error=error_text(e))
    row["results"] = {lib: stats(r) for lib, r in timed(fns, s, device=device).items()}
    return [row]


def op_case(suite, op, device=None, prefix=""):
    name = prefix + op.name
    return Case(suite, [name], lambda s, dev: run_op(op, suite, name, s, dev), device)


# --- autodiff (issue 3) --------------------------------------------------------------------------
CHAIN_NODES = 100
CHAIN = f"autodiff chain {CHAIN_NODES} nodes 16 f32"


def chain(y):
    """``CHAIN_NODES`` small elementwise ops (Ember, numpy or torch)."""
    for _ in range(CHAIN_NODES // 2):
        y = y * 1.0001 + 0.1
    return y


def run_chain(s, device):
    a = randn(16)
    x = to_device(a, device)
    xg = x.autodiff().require_grad()
    per_node = 1.0 / CHAIN_NODES
    plain = {"ember": lambda: computed(chain(x)), "numpy": lambda: chain(a)}
    record = {"ember": lambda: computed(chain(xg))}
    backward = {"ember": Timer(lambda y: computed(y.backward()), setup=lambda: chain(xg), device=device)}
    tdev = torch_device(s, device)
    if tdev is not None:
        torch = s.torch
        t = torch.from_numpy(a).to(tdev)
        tg = t.clone().requires_grad_(True)
        ones = torch.ones_like(t)
        plain["torch"] = torch_fn(s, tdev, lambda: chain(t))
        record["torch"] = torch_fn(s, tdev, lambda: chain(tg))
        backward["torch"] = Timer(torch_fn(s, tdev, lambda y: torch.autograd.grad(y, tg, ones)),
                                  setup=lambda: chain(tg))
    rows = []
    for name, fns in ((f"{CHAIN}: no autodiff, per op", plain),
                      (f"{CHAIN}: forward recording, per node", record),
                      (f"{CHAIN}: backward, per node", backward)):
        results = timed(fns, s, device=device)
        rows.append(make_row("autodiff", name, {k: stats(r, per_node) for k, r in results.items()},
                             first_call_s=results["ember"].first_call_s))
    check(rows[0], (chain(x).numpy(), chain(a.astype(np.float64))))
    grad = xg.grad(chain(xg).backward()).numpy()
    for r in rows[1:]:
        check(r, (grad, np.full(16, 1.0001 ** (CHAIN_NODES // 2))))
    return rows


TANH_LAYERS = 50
TANH_CHAIN = f"autodiff {TANH_LAYERS} x tanh(h*1.001 + 0.001) 1000 f32: forward+backward"


def tanh_chain(h):
    """``TANH_LAYERS`` layers of ``tanh(h * 1.001 + 0.001)`` and a sum (Ember or torch)."""
    for _ in range(TANH_LAYERS):
        h = (h * 1.001 + 0.001).tanh()
    return h.sum()


def numpy_tanh_chain_grad(a):
    """The gradient of ``tanh_chain`` in numpy: the forward, then the chain rule by hand."""
    hs, h = [], a
    for _ in range(TANH_LAYERS):
        h = np.tanh(h * np.float32(1.001) + np.float32(0.001))
        hs.append(h)
    g = np.ones_like(a)
    for h in reversed(hs):
        g = g * (1 - h * h) * np.float32(1.001)
    return g


def run_tanh_chain(s, device):
    a = randn(1000) * np.float32(0.5)
    xg = to_device(a, device).autodiff().require_grad()

    def ember_step():
        return computed(xg.grad(tanh_chain(xg).backward()))

    fns = {"ember": Timer(ember_step, device=device), "numpy": lambda: numpy_tanh_chain_grad(a)}
    tdev = torch_device(s, device)
    if tdev is not None:
        tg = s.torch.from_numpy(a).to(tdev).requires_grad_(True)
        fns["torch"] = torch_fn(s, tdev, lambda: s.torch.autograd.grad(tanh_chain(tg), tg))
    results = timed(fns, s, device=device)
    row = make_row("autodiff", TANH_CHAIN, {k: stats(r) for k, r in results.items()},
                   first_call_s=results["ember"].first_call_s)
    check(row, (ember_step().numpy(), numpy_tanh_chain_grad(a)))
    return [row]


MLP = "MLP 784-512-10 b256 f32: forward+backward step"


def mlp_inputs(batch=256, sizes=(784, 512, 10)):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, sizes[0]), dtype=np.float32)
    w1 = rng.standard_normal(sizes[:2], dtype=np.float32) * np.float32(sizes[0] ** -0.5)
    w2 = rng.standard_normal(sizes[1:], dtype=np.float32) * np.float32(sizes[1] ** -0.5)
    b1, b2 = np.zeros(sizes[1], np.float32), np.zeros(sizes[2], np.float32)
    target = rng.integers(0, sizes[2], (batch, 1))
    return x, (w1, b1, w2, b2), target


def numpy_mlp_step(x, params, target):
    """The reference: forward, NLL of log_softmax, and the gradients written out by hand."""
    w1, b1, w2, b2 = params
    rows, t = np.arange(len(x)), target[:, 0]
    h = x @ w1 + b1
    a = np.maximum(h, 0)
    z = a @ w2 + b2
    e = np.exp(z - z.max(axis=1, keepdims=True))
    dz = e / e.sum(axis=1, keepdims=True)       # softmax
    dz[rows, t] -= 1
    dz /= len(x)
    dh = (dz @ w2.T) * (h > 0)
    return x.T @ dh, dh.sum(axis=0), a.T @ dz, dz.sum(axis=0)


def run_mlp(s, device):
    x, params, target = mlp_inputs()
    ex, et = to_device(x, device), to_device(target, device)
    eparams = [to_device(p, device).autodiff().require_grad() for p in params]

    def ember_step():
        w1, b1, w2, b2 = eparams
        h = (ex @ w1 + b1).relu()
        loss = -(h @ w2 + b2).log_softmax(-1).gather(1, et).mean()
        grads = loss.backward()
        return computed([p.grad(grads) for p in eparams])

    fns = {"ember": ember_step, "numpy": lambda: numpy_mlp_step(x, params, target)}
    tdev = torch_device(s, device)
    if tdev is not None:
        torch = s.torch
        tx, tt = torch.from_numpy(x).to(tdev), torch.from_numpy(target).to(tdev)
        tparams = [torch.from_numpy(p).to(tdev).requires_grad_(True) for p in params]

        def torch_step():
            w1, b1, w2, b2 = tparams
            h = torch.relu(tx @ w1 + b1)
            loss = -torch.log_softmax(h @ w2 + b2, -1).gather(1, tt).mean()
            return torch.autograd.grad(loss, tparams)

        fns["torch"] = torch_fn(s, tdev, torch_step)
    row = make_row("autodiff", MLP)
    try:
        start = time.perf_counter()
        got = ember_step()
        row["first_call_s"] = time.perf_counter() - start
        check(row, *((g.numpy(), r) for g, r in zip(got, numpy_mlp_step(x, params, target))))
    except Exception as e:  # report it, time the peers
        row.update(status="error", error=error_text(e))
        del fns["ember"]
    row["results"] = {k: stats(r) for k, r in timed(fns, s, device=device).items()}
    return [row]


# --- checkpointing (issue 4) ---------------------------------------------------------------------
CK_SIZE = 4 * M
CK = "checkpointing 40 ops 4M f32"
CK_NAMES = [f"{CK}: backward, NONE", f"{CK}: backward, BALANCED", f"{CK}: backward BALANCED/NONE",
            f"{CK}: retained after forward, NONE", f"{CK}: retained after forward, BALANCED",
            f"{CK}: retained BALANCED/NONE"]
# Every one of these keeps its output (exp, tanh, sigmoid) or its input under NONE.
CK_OPS = (lambda y: y.exp(), lambda y: y.tanh(), lambda y: y * 0.9, lambda y: y + 0.1,
          lambda y: y.sigmoid())


def ck_chain(y):
    """40 elementwise ops ending in a sum; the intermediates die on return."""
    for i in range(40):
        y = CK_OPS[i % len(CK_OPS)](y)
    return y.sum()


class Forward:
    """``setup`` of the backward timings: a fresh forward of ``ck_chain(x)``.  Its second call
    (warm: the kernels are compiled) also measures the bytes the graph retains: allocations
    traced by tracemalloc (numpy reports its arrays to it) that are still alive when only the
    loss is, the intermediates' Python references being gone."""

    def __init__(self, x):
        self.x = x
        self.calls = 0
        self.retained = None

    def __call__(self):
        self.calls += 1
        if self.calls != 2:
            return ck_chain(self.x)
        # buffers reused from Ember's caching pool are invisible to tracemalloc: empty it
        # before, so every buffer of the forward is a fresh (traced) allocation, and after, so
        # the buffers the intermediates gave back are freed and only what the graph keeps counts
        gc.collect()
        ember.empty_cache()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            loss = ck_chain(self.x)
            gc.collect()
            ember.empty_cache()
            self.retained = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        return loss


def run_checkpointing(s, device):
    a = randn(CK_SIZE)
    strategies = ember.CheckpointingStrategy
    forwards = {st.name: Forward(to_device(a, device).autodiff()
                                 .with_gradient_checkpointing_strategy(st).require_grad())
                for st in (strategies.NONE, strategies.BALANCED)}
    timers = {name: Timer(lambda loss: computed(loss.backward()), setup=forward, device=device)
              for name, forward in forwards.items()}
    # each sample is one backward of a fresh forward (~0.1-1 s): one call per sample, <= 7 samples
    results = timed(timers, s, device=device, warmup=1, number=1, repeat=min(s.repeat, 7))
    none, balanced = results["NONE"], results["BALANCED"]
    memory = {name: forward.retained for name, forward in forwards.items()}
    time_ratio = [b / n for b, n in zip(balanced.samples, none.samples)]  # samples interleave
    rows = [
        make_row("checkpointing", CK_NAMES[0], {"ember": stats(none)}, first_call_s=none.first_call_s),
        make_row("checkpointing", CK_NAMES[1], {"ember": stats(balanced)},
                 first_call_s=balanced.first_call_s),
        make_row("checkpointing", CK_NAMES[2], {"ember": stats(time_ratio)}, unit="x",
                 informational=True),
        make_row("checkpointing", CK_NAMES[3], {"ember": stats([memory["NONE"]])}, unit="B"),
        make_row("checkpointing", CK_NAMES[4], {"ember": stats([memory["BALANCED"]])}, unit="B"),
        make_row("checkpointing", CK_NAMES[5],
                 {"ember": stats([memory["BALANCED"] / max(memory["NONE"], 1)])}, unit="x",
                 informational=True),
    ]
    return rows


# --- quantization (issue 6) -----------------------------------------------------------------------
# x (rows x K, f32) @ W (K x N) quantized with blocks of 32 along N, against float32 x @ W (numpy and
# PyTorch columns); 4096 x 4096 weights take a batch of 128 rows so that --quick stays short.
QM_SIZES = ((1024, 1024), (128, 4096))
QM_SCHEMES = (("Q8S blocks of 32", "Q8S", "NATIVE"), ("Q4S PACKED_U32 blocks of 32", "Q4S", "PACKED_U32"))
QCONV = 1 << 24   # elements quantized / dequantized per call


def qm_name(rows, k, label):
    return f"qmatmul {rows}x{k} f32 @ {k}x{k} {label} (vs f32 matmul)"


def qc_names(label):
    return [f"quantize 16M f32 -> {label}", f"dequantize 16M {label} -> f32",
            f"quantize 16M f32 -> {label}: f32 bytes per second",
            f"dequantize 16M {label} -> f32: f32 bytes per second"]


def scheme_of(value, store):
    return ember.QuantScheme(getattr(ember.QuantValue, value), block_size=[32],
                             store=getattr(ember.QuantStore, store))


def run_qmatmul(s, device, rows, k):
    """Quantized matmul for each scheme; numpy and PyTorch run the float32 matmul of the same shapes."""
    x, w = randn(rows, k, seed=0), randn(k, k, seed=1)
    ex = to_device(x, device)
    out = []
    for label, value, store in QM_SCHEMES:
        q = to_device(w, device).quantize(scheme_of(value, store))
        fns = {"ember": Timer(lambda: ex @ q, device=device), "numpy": lambda: x @ w}
        tdev = torch_device(s, device)
        if tdev is not None:
            tx, tw = s.torch.from_numpy(x).to(tdev), s.torch.from_numpy(w).to(tdev)
            fns["torch"] = torch_fn(s, tdev, lambda: tx @ tw)
        results = timed(fns, s, device=device)
        row = make_row("quantized", qm_name(rows, k, label), {lib: stats(r) for lib, r in results.items()},
                       first_call_s=results["ember"].first_call_s)
        check(row, ((ex @ q).numpy(), x @ q.dequantize().numpy()))
        out.append(row)
    return out


def numpy_quantize(x, half):
    """The reference: per-block (32) min-max scales and int8 values rounded half away from zero."""
    blocks = x.reshape(-1, 32)
    scale = np.abs(blocks).max(axis=1, keepdims=True) / np.float32(half)
    v = (blocks / scale).astype(np.float64)
    return np.clip(np.copysign(np.floor(np.abs(v) + 0.5), v), -half, half).astype(np.int8), scale


def run_qconvert(s, device):
    """Quantize and dequantize 16M float32 values (blocks of 32), against the same math in numpy;
    the bytes-per-second rows are the f32 side's 64 MB over the median time (informational)."""
    x = randn(QCONV // 1024, 1024)
    ex = to_device(x, device)
    nbytes = x.nbytes
    out = []
    for label, value, store in QM_SCHEMES:
        scheme = scheme_of(value, store)
        half = getattr(ember.QuantValue, value).hi
        q = ex.quantize(scheme)
        nq, ns = numpy_quantize(x, half)
        times = []
        for name, ember_fn, numpy_fn in (
                (f"quantize 16M f32 -> {label}", lambda: ex.quantize(scheme), lambda: numpy_quantize(x, half)),
                (f"dequantize 16M {label} -> f32", lambda: q.dequantize(), lambda: nq * ns)):
            results = timed({"ember": Timer(ember_fn, device=device), "numpy": numpy_fn}, s, device=device)
            row = make_row("quantized", name, {lib: stats(r) for lib, r in results.items()},
                           first_call_s=results["ember"].first_call_s)
            times.append(results)
            out.append(row)
        d = q.dequantize().numpy()
        check(out[-2], (d, (nq * ns).reshape(x.shape)))
        mine = q.quantized_values().numpy().reshape(-1, 32) * q.quantization_scales().numpy().reshape(-1, 1)
        check(out[-1], (d, mine.reshape(x.shape)))
        for name, results in zip(qc_names(label)[2:], times):
            rates = {lib: stats([nbytes / t for t in r.samples]) for lib, r in results.items()}
            out.append(make_row("quantized", name, rates, unit="B", informational=True))
    names = [n for label, _, _ in QM_SCHEMES for n in qc_names(label)]
    return sorted(out, key=lambda r: names.index(r["name"]))


# --- startup --------------------------------------------------------------------------------------
IMPORT = "python -c 'import ember' (a new process)"


def run_startup(s, device):
    """Wall time of a fresh interpreter importing Ember (numpy's import alongside, for scale)."""
    from perf.timing import new_process_env

    def once(module, env):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True, env=env)
        return time.perf_counter() - start

    n = 3 if s.max_time is not None else 7      # --quick: 3 samples
    samples = {}
    libs = (("ember", "ember"), ("numpy", "numpy"))
    env = new_process_env()                     # imports from .pyc files, as installed
    for lib, module in libs:                    # untimed: writes the bytecode
        once(module, env)
    for _ in range(n):                          # interleaved, like every other row
        for lib, module in libs:
            samples.setdefault(lib, []).append(once(module, env))
    return [make_row("startup", IMPORT, {lib: stats(x) for lib, x in samples.items()})]


class NotAvailable(Exception):
    """A suite whose feature or device does not exist in this build."""


# --- the suites ----------------------------------------------------------------------------------
def cases(suites, device="cpu"):
    """The cases of ``suites`` (names from SUITES), in order."""
    out = []
    for suite in suites:
        if suite in OPS:
            out += [op_case(suite, op) for op in OPS[suite]]
        elif suite == "autodiff":
            names = [f"{CHAIN}: no autodiff, per op", f"{CHAIN}: forward recording, per node",
                     f"{CHAIN}: backward, per node"]
            out += [Case(suite, names, run_chain), Case(suite, [TANH_CHAIN], run_tanh_chain),
                    Case(suite, [MLP], run_mlp)]
        elif suite == "checkpointing":
            out.append(Case(suite, CK_NAMES, run_checkpointing))
        elif suite == "startup":
            out.append(Case(suite, [IMPORT], run_startup))
        elif suite == "linalg":   # perf/linalg_suite.py
            from perf import linalg_suite as la
            out += [Case(suite, [op.name], lambda st, dev, op=op: la.run_linalg_op(op, st, dev))
                    for op in la.OPS]
            out.append(Case(suite, [la.GP], la.run_gp))
        elif suite == "small":   # perf/small_suite.py
            from perf import small_suite as sm
            out.append(Case(suite, sm.row_names(), sm.run_small))
        elif suite == "quantized":
            out += [Case(suite, [qm_name(rows, k, label) for label, _, _ in QM_SCHEMES],
                         lambda st, dev, rows=rows, k=k: run_qmatmul(st, dev, rows, k))
                    for rows, k in QM_SIZES]
            out.append(Case(suite, [n for label, _, _ in QM_SCHEMES for n in qc_names(label)],
                            run_qconvert))
        elif suite == "cuda" and device != "cuda":   # with --device cuda every suite runs there
            ops = {op.name: op for ops in OPS.values() for op in ops}
            out += [op_case(suite, ops[name], "cuda", prefix="cuda: ") for name in CUDA_OPS]
        elif suite not in SUITES:
            raise ValueError(f"unknown suite {suite!r}; choose from {', '.join(SUITES)} or all")
    return out
