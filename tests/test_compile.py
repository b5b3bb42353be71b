"""``ember.compile`` (DESIGN §10): a traced step replays what eager computes.

Every test builds its tensors on the table device (``checks.DEVICE``: the CPU, or CUDA in the
simulator tier); the tests marked ``devices`` run in both tiers.  A step replays in one of two
ways (the ``replay`` fixture runs a test under each): the bound replay runs the very launches
of the trace, so results, gradients and optimizer state are compared bit for bit; the CPU's
tape (``engine/backends/cpu/tape.py``) computes elementwise ops with the eager scalar
functions but adds sums, matrix products and softmax in its own order, so those agree with
eager to rounding (``close``).
"""
import sys
import time

import numpy as np
import pytest
from checks import DEVICE, ROOT, compiled_in_new_process

import ember
import ember.nn.functional as F
import ember.optim
from ember.backends.cpu import CpuBackend

NONE, BALANCED = ember.CheckpointingStrategy.NONE, ember.CheckpointingStrategy.BALANCED
pytestmark = pytest.mark.devices


def t(a, dtype=ember.float32, device=None):
    return ember.tensor(np.asarray(a), dtype=dtype, device=device or DEVICE)


def same(a, b, exact=True):
    """``a`` equals ``b`` (structures of tensors and values): bit for bit, or (``exact``
    false) to the rounding of a tape's sums and products (``close``)."""
    if isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y, exact)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            same(a[k], b[k], exact)
    elif isinstance(a, ember.Tensor):
        assert a.shape == b.shape and a.dtype == b.dtype and a.device == b.device
        if exact:
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        else:
            np.testing.assert_allclose(a.numpy(), b.numpy(), **TOLERANCE.get(a.dtype.name, {}))
    else:
        assert a == b


# a tape's sums, products and softmax against eager's (a few training steps included)
TOLERANCE = {"float32": dict(rtol=2e-5, atol=2e-6), "float64": dict(rtol=1e-12, atol=1e-14)}


@pytest.fixture(params=["bound", "tape"])
def replay(request, monkeypatch):
    """The comparison of a replay with eager, after choosing which replay the test's CPU steps
    get: ``bound`` (the CPU's tape switched off: exact) or ``tape`` (``close``).  CUDA has no
    tape: its steps always replay bound."""
    if request.param == "bound":
        monkeypatch.setattr(CpuBackend, "tape", lambda self, *args: None)
        return same
    if DEVICE.type != "cpu":
        pytest.skip("CUDA has no tape")
    return lambda a, b: same(a, b, exact=False)


RNG = np.random.default_rng(11)
X = RNG.standard_normal((6, 5))
W = RNG.standard_normal((5, 4))
IDX = RNG.integers(0, 5, (6, 3))

# op families: each a function of (x, w) returning tensors (a structure of them)
FAMILIES = {
    "elementwise": lambda x, w: ((x * 2 + 1).exp().tanh() - x.sigmoid() / (x.abs() + 1),),
    "compare_where": lambda x, w: (ember.where(x > 0, x, x * 0.1), (x < 0).any(dim=1)),
    "reductions": lambda x, w: (x.sum(), x.mean(dim=0), x.max(dim=1), x.argmax(dim=1),
                                x.var(dim=0), x.cumsum(dim=1)),
    "matmul_softmax": lambda x, w: ((x @ w).softmax(-1), (x @ w).log_softmax(0)),
    "layout": lambda x, w: (x.T[::2], x.reshape(3, 10).permute(1, 0), x.flip(0)[1:4],
                            ember.cat([x, x * 2], 1), ember.stack([x, x], 0)),
    "indexing": lambda x, w: (x.gather(1, t(IDX, ember.int64)), x.index_select(1, t([4, 0, 2], ember.int64)),
                              x.scatter(1, t(IDX, ember.int64), 0.5), x.sort(1), x.topk(2)),
    "nested_outputs": lambda x, w: {"a": [x + 1, (x * 2, x.sum())], "b": x.shape[0]},
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_results_equal_eager(family, replay):
    fn = FAMILIES[family]
    step = ember.compile(fn)
    x, w = t(X), t(W)
    want = fn(x, w)
    for _ in range(3):   # the trace, then replays
        replay(step(x, w), want)
    assert step.traces == 1
    x2 = t(X * -0.5)   # new values, the same signature: a replay computes them
    replay(step(x2, w), fn(x2, w))
    assert step.traces == 1


def _loss(x, w, target):
    h = (x @ w).tanh()
    return F.cross_entropy(h, target) + (w * w).sum() * 0.01


@pytest.mark.parametrize("strategy", [NONE, BALANCED], ids=["NONE", "BALANCED"])
def test_gradients_equal_eager(strategy, replay):
    dev = DEVICE.gradient_checkpointing(strategy)
    target = t([0, 3, 1, 2, 2, 0], ember.int64)

    def grads(x, w):
        w = w.autodiff().require_grad()
        loss = _loss(x, w, target)
        g = loss.backward()
        return loss, w.grad(g)

    step = ember.compile(grads)
    x, w = t(X, ember.float64), t(W, ember.float64, dev)
    want = grads(x, w)
    for _ in range(3):
        replay(step(x, w), want)


# gradient rules that pick a formula by the data in eager mode (a zero pivot or product, an
# unused output): a trace takes the formula that holds for every value (autograd/rules.py
# ``_tracing``), so their replays agree with eager to rounding, not bit for bit
_A = RNG.standard_normal((3, 3)) + 3 * np.eye(3)
_Z = _A + 1j * RNG.standard_normal((3, 3))
BRANCHING = {
    "det": (lambda a: ember.linalg.det(a), _A),
    "det_singular": (lambda a: ember.linalg.det(a), np.array([[1.0, 2, 3], [2, 4, 6], [1, 0, 1]])),
    "slogdet": (lambda a: ember.linalg.slogdet(a).logabsdet, _A),
    "eigh": (lambda a: ember.linalg.eigh(a + a.mT).eigenvalues * 2 + ember.linalg.eigh(a + a.mT).eigenvectors ** 2, _A),
    "svd_values_of_rank_deficient": (lambda a: ember.linalg.svdvals(a), np.array([[1.0, 2], [2, 4], [0, 0]])),
    "svd_tall": (lambda a: (lambda u, s, vh: (u * u).sum(0) * s)(*ember.linalg.svd(a, full_matrices=False)),
                 np.vstack([_A, _A[:1] * 0.5])),
    "cumprod_with_zero": (lambda a: a.cumprod(1), _A * (np.arange(3) != 1)),
    "complex_eigh": (lambda z: (lambda w, v: (v * v.conj()).real * w)(*ember.linalg.eigh(z + z.mT.conj())), _Z),
    "complex_svd": (lambda z: (lambda u, s, vh: (u @ vh) * s.sum())(*ember.linalg.svd(z)), _Z),
}


@pytest.mark.parametrize("strategy", [NONE, BALANCED], ids=["NONE", "BALANCED"])
@pytest.mark.parametrize("name", list(BRANCHING))
def test_data_dependent_gradient_rules_trace(name, strategy, unfused):
    # (unfused: fused, these rules' backward chains compiled ~45 s of kernels in a cold CI run)
    fn, a = BRANCHING[name]
    dtype = ember.complex128 if np.iscomplexobj(a) else ember.float64
    dev = DEVICE.gradient_checkpointing(strategy)
    weights = RNG.standard_normal(np.shape(fn(ember.tensor(a, dtype=dtype))))

    def grads(a):
        a = a.autodiff().require_grad()
        out = fn(a)
        loss = ((out.real if out.dtype.is_complex else out) * t(weights, ember.float64)).sum()
        return a.grad(loss.backward())

    step = ember.compile(grads)
    x = t(a, dtype, dev)
    want = grads(x).numpy()
    for _ in range(2):
        got = step(x).numpy()
        assert np.isfinite(got).all(), name
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11, err_msg=name)
    assert step.traces == 1


# calls of a training step: the trace and three replays (the CUDA simulator too, since its
# launches take a few ms: tests/conftest.py)
CALLS = 4


def _mlp_params(dev, seed=5):
    rng = np.random.default_rng(seed)
    shapes = [(5, 8), (8,), (8, 4), (4,)]
    return [t(rng.standard_normal(s) * 0.5, ember.float32, dev).require_grad() for s in shapes]


def _train_step(opt, x, target):
    w1, b1, w2, b2 = opt.params
    loss = F.cross_entropy((x @ w1 + b1).tanh() @ w2 + b2, target)
    opt.step(loss.backward())
    return loss


@pytest.mark.parametrize("make", [lambda ps: ember.optim.Adam(ps, lr=0.05),
                                  lambda ps: ember.optim.AdamW(ps, lr=0.05, amsgrad=True),
                                  lambda ps: ember.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1)],
                         ids=["adam", "adamw_amsgrad", "sgd_momentum_dampening"])
@pytest.mark.parametrize("strategy", [NONE, BALANCED], ids=["NONE", "BALANCED"])
def test_training_step_state_advances_as_in_eager(make, strategy, replay):
    dev = DEVICE.gradient_checkpointing(strategy)
    x, target = t(X), t([0, 3, 1, 2, 2, 0], ember.int64)
    eager_opt, compiled_opt = make(_mlp_params(dev)), make(_mlp_params(dev))
    step = ember.compile(lambda x, target: _train_step(compiled_opt, x, target))
    for _ in range(CALLS):
        replay(step(x, target), _train_step(eager_opt, x, target).inner())
    assert step.traces == 1
    for p, q in zip(compiled_opt.params, eager_opt.params):
        assert p.is_require_grad()
        replay(p.inner(), q.inner())
    for i in range(4):
        replay(compiled_opt.state(i), eager_opt.state(i))


def test_hyperparameter_change_traces_again():
    opt = ember.optim.SGD(_mlp_params(DEVICE.autodiff()), lr=0.1)
    x, target = t(X), t([0, 3, 1, 2, 2, 0], ember.int64)
    step = ember.compile(lambda x, target: _train_step(opt, x, target))
    step(x, target)
    step(x, target)
    assert step.traces == 1
    opt.lr = 0.01
    step(x, target)
    assert step.traces == 2


def test_a_new_shape_dtype_or_device_traces_again():
    step = ember.compile(lambda a: (a * 2).sum(0))
    step(t(np.ones((2, 3))))
    step(t(np.zeros((2, 3))))
    assert step.traces == 1
    same(step(t(np.ones((4, 3)))), t(np.full(3, 8.0)))
    assert step.traces == 2
    same(step(t(np.ones((4, 3)), ember.float64)), t(np.full(3, 8.0), ember.float64))
    assert step.traces == 3
    step(t(np.ones((4, 3)), ember.float64, DEVICE.autodiff()))
    assert step.traces == 4


def test_python_numbers_are_static():
    step = ember.compile(lambda a, k: a * k)
    x = t([1.0, 2.0])
    same(step(x, 3.0), x * 3.0)
    same(step(x, 3.0), x * 3.0)
    assert step.traces == 1
    same(step(x, 4.0), x * 4.0)   # another value: another trace
    assert step.traces == 2
    same(step(x, t(5.0)), x * 5.0)   # a 0-d tensor is an input: its value may change
    same(step(x, t(6.0)), x * 6.0)
    assert step.traces == 3


def test_closed_over_tensors_are_constants():
    w = t([1.0, 2.0, 3.0])
    step = ember.compile(lambda a: a * w + ember.ones(3, device=DEVICE))
    x = t([1.0, 1.0, 1.0])
    same(step(x), x * w + 1)
    same(step(x), x * w + 1)


@pytest.mark.parametrize("read", ["item", "float", "bool", "numpy", "tolist", "repr", "int"])
def test_a_value_read_raises_compile_error(read):
    reads = {"item": lambda y: y.sum().item(), "float": lambda y: float(y.sum()),
             "bool": lambda y: bool(y.sum() > 0), "numpy": lambda y: y.numpy(),
             "tolist": lambda y: y.tolist(), "repr": lambda y: repr(y),
             "int": lambda y: int(y.sum())}

    def fn(a):
        y = a * 2
        reads[read](y)
        return y

    step = ember.compile(fn)
    with pytest.raises(ember.CompileError, match=r"inside a step traced by ember.compile \(at .*test_compile.py:\d+\)"):
        step(t([1.0, 2.0]))
    assert isinstance(ember.CompileError("x"), RuntimeError)


def test_index_checks_run_at_every_replay():
    step = ember.compile(lambda x, i: x.gather(1, i))
    x = t(X)
    same(step(x, t(IDX, ember.int64)), x.gather(1, t(IDX, ember.int64)))
    bad = IDX.copy()
    bad[2, 1] = 5
    with pytest.raises(IndexError, match="gather: index 5 is out of range for dim 1 of size 5"):
        step(x, t(bad, ember.int64))
    assert step.traces == 1


def test_random_ops_draw_new_values_at_every_call():
    step = ember.compile(lambda a: a + ember.random.normal(a.shape, device=DEVICE))
    x = t(np.zeros(8))
    first, second = step(x).numpy(), step(x).numpy()
    assert not np.array_equal(first, second)


def test_bad_arguments_raise():
    step = ember.compile(lambda a: a)
    with pytest.raises(ember.CompileError, match="neither a tensor"):
        step(object())


def test_a_long_unrolled_loop_traces_in_bounded_time():
    """10^4 launches (fusion off: one per op) trace in bounded time: ~0.2 s on the 2-core VM
    (the eager call itself ~0.03 s), replay in ~0.04 s; the bound leaves room for a loaded CI.
    The CUDA simulator runs each kernel in Python (a few ms a launch): 10^3 launches there."""
    steps = 2500 if DEVICE.type == "cpu" else 250
    launches = 4 * steps

    def integrate(y, k):
        for _ in range(steps):   # 4 ops a step
            y = y + (y * k).tanh() * 0.001
        return y

    step = ember.compile(integrate)
    y, k = t([0.1, 0.2, 0.3], ember.float64), t(-0.5, ember.float64)
    previous = ember.fusion.set_enabled(False)
    try:
        start = time.perf_counter()
        got = step(y, k)
        traced = time.perf_counter() - start
        (program,) = step._programs.values()
        assert program.launches >= launches
        same(step(y, k), got)
        same(got, integrate(y, k))
    finally:
        ember.fusion.set_enabled(previous)
    assert traced < 60, f"tracing {launches} launches took {traced:.1f} s"


CACHE_SCRIPT = """
import numpy as np, ember, ember.optim, ember.nn.functional as F
dev = ember.Device.cpu().autodiff()
rng = np.random.default_rng(0)
ps = [ember.tensor(rng.standard_normal(s), dtype=ember.float32, device=dev).require_grad()
      for s in ((3, 4), (4,))]
opt = ember.optim.Adam(ps, lr=0.1)
x = ember.tensor(rng.standard_normal((5, 3)), dtype=ember.float32)
y = ember.tensor([0, 1, 2, 3, 0])

@ember.compile
def step(x, y):
    w, b = opt.params
    loss = F.cross_entropy(x @ w + b, y)
    opt.step(loss.backward())
    return loss

for _ in range(3):
    step(x, y).numpy()
assert step.traces == 1
"""


# a float64 step of tiny tensors: replayed by the CPU tape, whose interpreter is cached too
TAPE_CACHE_SCRIPT = """
import numpy as np, ember
dev = ember.Device.cpu().autodiff()

@ember.compile
def grad(theta):
    y = theta
    for _ in range(20):
        y = y + (y * theta).tanh() * 0.1
    return y.sum(), theta.grad(y.sum().backward())

theta = ember.tensor([0.3, -0.2], dtype=ember.float64, device=dev).require_grad()
for _ in range(3):
    grad(theta)[1].numpy()
assert grad.traces == 1
assert next(iter(grad._programs.values())).instructions is not None
"""


@pytest.mark.skipif(DEVICE.type != "cpu", reason="the disk cache of CPU kernels")
@pytest.mark.parametrize("script", [CACHE_SCRIPT, TAPE_CACHE_SCRIPT], ids=["bound", "tape"])
def test_a_second_process_traces_once_and_compiles_nothing(tmp_path, script):
    first = compiled_in_new_process(script, tmp_path)
    assert first   # the first process compiled the step's kernels
    assert compiled_in_new_process(script, tmp_path) == []


def test_two_optimizers_over_the_same_parameters_read_the_stepped_one(replay):
    """A second optimizer holding the same parameter tensors (made earlier, still alive) must
    not be where a replay reads them from: the stepped optimizer's values advance."""
    params = _mlp_params(DEVICE.autodiff())
    bystander = ember.optim.SGD(params, lr=0.1)   # noqa: F841  (alive, never stepped)
    opt = ember.optim.SGD(params, lr=0.1)
    x, target = t(X), t([0, 3, 1, 2, 2, 0], ember.int64)
    eager_opt = ember.optim.SGD(_mlp_params(DEVICE.autodiff()), lr=0.1)
    step = ember.compile(lambda x, target: _train_step(opt, x, target))
    for _ in range(CALLS):
        replay(step(x, target), _train_step(eager_opt, x, target).inner())
    for p, q in zip(opt.params, eager_opt.params):
        replay(p.inner(), q.inner())


# --- the CPU tape (engine/backends/cpu/tape.py): steps of small tensors --------------------
# A tape replay adds sums, matrix products and softmax in its own order (eager: BLAS, blocked
# reductions), so those may differ from eager's in the last bits; elementwise ops are exact.
def close(a, b):
    same(a, b, exact=False)


def on_tape(step):
    """Whether the step's (one) program runs as a tape: on the CPU it must."""
    (program,) = step._programs.values()
    assert (program.instructions is not None) == (DEVICE.type == "cpu")
    return program


V = RNG.standard_normal(5)
B = RNG.standard_normal((2, 5, 3))
C = RNG.standard_normal((3, 1, 4))
J = RNG.integers(0, 6, 4)

TAPE_FAMILIES = {
    "elementwise": lambda x, w: ((x * 2 + 1).exp().tanh() - x.sigmoid() / (x.abs() + 1),
                                 x.maximum(0.2 - x) ** 2, (x * x + 1).sqrt().log() + x.relu()),
    "broadcasts": lambda x, w: (x + x[0], x * x[:, :1], x.T[:4, :5] + w.T, x.reshape(2, 3, 5) * t(C[:, :, :1].reshape(3, 1) * 1.0, x.dtype),
                                ember.where(x > 0, x, t(V, x.dtype)), x.clamp(-0.5, 0.5) + x.T.T),
    "compare_cast": lambda x, w: ((x > 0.1).cast(x.dtype) * x, (x < 0) & (x > -1), ~(x == x.T.T),
                                  (x * 10).cast(ember.int64) + 3, (x > 0).sum(dim=0)),
    "reductions": lambda x, w: (x.sum(), x.mean(dim=0), x.max(dim=1), x.min(dim=0),
                                (x * 0.1 + 1).prod(dim=1), x.sum(dim=(0, 1)), x.T.sum(dim=1),
                                x.reshape(2, 3, 5).sum(dim=(0, 2)), (x > 0).any(dim=1),
                                (x > -3).all()),
    "arg_softmax": lambda x, w: (x.argmax(dim=1), x.argmin(dim=0), x.argmax(), x.softmax(-1),
                                 x.log_softmax(0), x.T.softmax(1), x.reshape(2, 3, 5).log_softmax(1),
                                 ember.cat([x, x * 2], 1).log_softmax(1), ember.cat([x, -x], 0).softmax(0)),
    "matmul": lambda x, w: (x @ w, x.T @ x, x @ t(V, x.dtype), t(V, x.dtype) @ w, t(B, x.dtype) @ w[:3],
                            (x @ w).T @ (x @ w), x[::2] @ w, t(B, x.dtype) @ t(B, x.dtype).mT,
                            (x.reshape(6, 5, 1) * w[:, :1].T) @ w),
    "layout": lambda x, w: (x.T[::2], x.reshape(3, 10).permute(1, 0), x.flip(0)[1:4],
                            ember.cat([x, x * 2], 1), ember.stack([x, x], 0),
                            x[:, :1].expand(6, 3) * 2, x[1::2, ::-1]),
    "indexing": lambda x, w: (x.gather(1, t(IDX, ember.int64)),
                              x.index_select(1, t(J, ember.int64) % 5),
                              x.index_select(0, t(J, ember.int64)),
                              x.scatter(1, t(IDX, ember.int64), x[:, :3] * 2),
                              x.scatter(0, t(IDX[:2], ember.int64), x[:2, :3], reduce="add"),
                              x.T.gather(0, t(IDX.T, ember.int64))),
}


# (on CUDA, which has no tape, the first four families in float64: the bound replay there is
# tested above, and the simulator runs each launch in Python)
@pytest.mark.parametrize("dtype", [ember.float64, ember.float32])
@pytest.mark.parametrize("family", list(TAPE_FAMILIES))
def test_tape_results_equal_eager(family, dtype):
    if DEVICE.type != "cpu" and (dtype is ember.float32 or family not in ("elementwise", "reductions", "matmul", "layout")):
        pytest.skip("the CPU's tape (CUDA: float64, four families)")
    fn = TAPE_FAMILIES[family]
    step = ember.compile(fn)
    x, w = t(X, dtype), t(W, dtype)
    want = fn(x, w)
    for _ in range(3):
        close(step(x, w), want)
    on_tape(step)
    x2 = t(X * -0.5, dtype)
    close(step(x2, w), fn(x2, w))
    assert step.traces == 1


@pytest.mark.parametrize("dtype", [ember.float64, ember.float32])
def test_tape_copies_a_small_transposed_operand_of_a_tall_product(dtype, monkeypatch):
    """``x @ w.T`` of many rows and a small ``w`` (``linear`` over a large batch) multiplies a
    C-ordered copy of ``w.T`` (``linalg.skinny_weight``: OpenBLAS's transposed-B kernels are
    2-4x slower there): one instruction more, the same products."""
    from ember.backends.cpu import linalg as cpu_linalg
    if DEVICE.type != "cpu":
        pytest.skip("the CPU's tape")
    rng = np.random.default_rng(4)
    x, w = t(rng.standard_normal((600, 8)), dtype), t(rng.standard_normal((3, 8)), dtype)
    assert cpu_linalg.skinny_weight(600, 8, 3)

    def fn(x, w):
        return (x @ w.T).tanh(), x[:8] @ w.T   # (8 rows: no copy)

    want = [np.tanh(x.numpy() @ w.numpy().T), x.numpy()[:8] @ w.numpy().T]
    counts = []
    for rows in (cpu_linalg.SKINNY_ROWS, 10 ** 9):   # the copy, then none
        monkeypatch.setattr(cpu_linalg, "SKINNY_ROWS", rows)
        step = ember.compile(fn)
        for _ in range(2):
            for got, ref in zip(step(x, w), want):
                np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5, atol=1e-5)
        counts.append(on_tape(step).instructions)
    assert counts[0] == counts[1] + 1


@pytest.mark.parametrize("dtype", [ember.float64, ember.float32])
def test_tape_runs_a_middle_sized_product_on_one_blas_thread(dtype, monkeypatch):
    """A tape whose largest product wakes SciPy's BLAS pool but runs as fast on one thread
    (``GEMM_MIN_WORK`` to ``ONE_THREAD_MAX`` multiply-adds: the MLP step's) sets SciPy's
    OpenBLAS to one thread while it runs and restores the count after, an index error
    included; a count already 1, a larger product and a tape of small products are left
    alone."""
    from ember.backends.cpu import linalg as cpu_linalg
    if DEVICE.type != "cpu":
        pytest.skip("the CPU's tape")
    count, calls = [3], []

    def set_threads(n):
        calls.append(n)
        count[0] = n

    monkeypatch.setattr(cpu_linalg, "_threads", (set_threads, lambda: count[0]))
    rng = np.random.default_rng(5)
    x, w = t(rng.standard_normal((128, 64)), dtype), t(rng.standard_normal((64, 64)), dtype)
    i = t(rng.integers(0, 64, (128, 2)), ember.int64)
    assert cpu_linalg.GEMM_MIN_WORK <= 128 * 64 * 64 <= cpu_linalg.ONE_THREAD_MAX
    step = ember.compile(lambda x, w, i: (x @ w.T).tanh().gather(1, i))
    want = np.take_along_axis(np.tanh(x.numpy() @ w.numpy().T), i.numpy(), 1)
    tol = dict(rtol=1e-5, atol=1e-5)
    for _ in range(3):
        np.testing.assert_allclose(step(x, w, i).numpy(), want, **tol)
    on_tape(step)
    calls.clear()
    np.testing.assert_allclose(step(x, w, i).numpy(), want, **tol)
    assert calls == [1, 3] and count[0] == 3
    calls.clear()
    bad = i.numpy().copy()
    bad[7, 1] = 64
    with pytest.raises(IndexError, match="gather"):
        step(x, w, t(bad, ember.int64))
    assert calls == [1, 3] and count[0] == 3
    count[0] = 1   # (the user's own limit)
    calls.clear()
    np.testing.assert_allclose(step(x, w, i).numpy(), want, **tol)
    assert calls == [] and count[0] == 1
    count[0] = 3
    # a larger product (2^21 multiply-adds: two threads are faster) and small ones: no calls
    a, b = t(rng.standard_normal((32, 256)), dtype), t(rng.standard_normal((256, 32)), dtype)
    assert 256 * 32 * 256 > cpu_linalg.ONE_THREAD_MAX
    for fn, args, ref in [(lambda a, b: (a.T @ b.T).sum(dim=0), (a, b),
                           (a.numpy().T @ b.numpy().T).sum(0)),
                          (lambda x, w: x[:8, :5] @ w[:5, :3], (x, w),
                           x.numpy()[:8, :5] @ w.numpy()[:5, :3])]:
        other = ember.compile(fn)
        calls.clear()
        for _ in range(3):
            np.testing.assert_allclose(other(*args).numpy(), ref, rtol=1e-4, atol=1e-3)
        on_tape(other)
        assert calls == []


@pytest.mark.skipif(DEVICE.type != "cpu", reason="the CPU's tape")
def test_tape_leaves_scipy_blas_thread_count_as_it_was():
    """With SciPy's own OpenBLAS (where this SciPy bundles one): the tape of a middle-sized
    product holds its setter, and the count is back after each call."""
    from ember.backends.cpu import linalg as cpu_linalg
    threads = cpu_linalg.scipy_blas_threads()
    if threads is None:
        pytest.skip("this SciPy bundles no OpenBLAS")
    set_threads, get_threads = threads
    before = get_threads()
    rng = np.random.default_rng(6)
    x, w = t(rng.standard_normal((128, 64))), t(rng.standard_normal((64, 64)))
    step = ember.compile(lambda x, w: (x @ w.T).tanh())
    for _ in range(3):
        np.testing.assert_allclose(step(x, w).numpy(), np.tanh(x.numpy() @ w.numpy().T),
                                   rtol=1e-5, atol=1e-5)
    assert on_tape(step).replay.one_thread is threads
    assert get_threads() == before


@pytest.mark.parametrize("dtype", [ember.float64, ember.float32])
def test_tape_long_fused_chains_are_exact(dtype):
    """Chains of at least ``CHAIN_MIN`` elements are one loop of the chain's generated scalar
    function (leaves read as rows, row and column broadcasts, one value): bit for bit eager."""
    from ember.backends.cpu.tape import CHAIN_MIN
    if DEVICE.type != "cpu":
        pytest.skip("the CPU's tape")
    rng = np.random.default_rng(2)
    x, b, c = (t(rng.standard_normal(s), dtype) for s in ((40, 30), (30,), (40, 1)))
    assert x.numel() >= CHAIN_MIN

    def fn(x, b, c):
        y = (x * 0.5 + b).tanh()             # a bias row, a scalar
        z = (y * c - x.T.T.exp() * 0.1) / (c * c + 1)   # a column, a transposed view
        w = ember.where(z > 0, z, x[:, ::-1] * 2)         # a reversed view: copied
        return y, z.sigmoid() + w, (w > 0.1) | (x < 0)

    step = ember.compile(fn)
    for k in range(3):
        xs = x * (1 + k)
        same(step(xs, b, c), fn(xs, b, c))
    on_tape(step)


def test_tape_slice_assignment():
    def fn(x):
        y = x * 1.0
        y[1:3] = x[:2] * -2.0
        y[:, 0] = 7.0
        return y

    step = ember.compile(fn)
    x = t(X, ember.float64)
    for _ in range(3):
        close(step(x), fn(x))
    on_tape(step)


def test_tape_results_are_values_of_their_own():
    """A replay's results view blocks made for that call: a later call never changes them,
    and the result returned unchanged (an input) or a constant is a copy."""
    w = t(W, ember.float32)
    step = ember.compile(lambda x, y: (x * 2, (x @ w).sum(), y, w))
    x = t(X, ember.float32)
    first = step(x, x)
    values = [a.numpy().copy() for a in first]
    for k in range(3):
        step(t(X * k, ember.float32), x)
    for a, v in zip(first, values):
        np.testing.assert_array_equal(a.numpy(), v)
    on_tape(step)


def test_tape_joins_short_rows_of_a_bias_add():
    """A bias over rows of 2 runs as rows of up to 64 (the bias copied once per joined row),
    where every operand is contiguous or repeats per row; a per-row operand keeps the rows."""
    z, b, c = RNG.standard_normal((96, 2)), RNG.standard_normal(2), RNG.standard_normal((96, 1))
    odd = RNG.standard_normal((7, 3))
    cases = [(lambda z, b: z * 2 + b, (z, b), (3, 64)),      # 32 rows joined
             (lambda z, b: b - z, (odd, RNG.standard_normal(3)), (1, 21)),
             (lambda z, c: z + c, (z, c), (96, 2))]            # a column: not joined
    for fn, args, (rows, cols) in cases:
        step = ember.compile(fn)
        got = step(*[t(a) for a in args])
        close(got, fn(*[t(a) for a in args]))
        np.testing.assert_allclose(got.numpy(), fn(*[a.astype(np.float32) for a in args]),
                                   rtol=1e-6)
        program = on_tape(step)
        if DEVICE.type == "cpu":
            r = program.replay
            last = max(i for i, n in enumerate(r.names) if n.name in ("ADD", "SUB"))
            assert tuple(r.rows[last, 7:9]) == (rows, cols)
        for _ in range(2):   # replays read the joined bias copy afresh
            args = [a + 1 for a in args]
            close(step(*[t(a) for a in args]), fn(*[t(a) for a in args]))


def test_tape_index_checks_run_at_every_replay():
    step = ember.compile(lambda x, i: (x * 2).gather(1, i) + 1)
    x = t(X)
    close(step(x, t(IDX, ember.int64)), (x * 2).gather(1, t(IDX, ember.int64)) + 1)
    on_tape(step)
    if DEVICE.type == "cpu":   # the range check is an instruction of the tape (no Python
        (program,) = step._programs.values()   # between segments)
        assert [s[0] for s in program.replay.segments] == ["tape"]
    for value in (-1, 5):
        bad = IDX.copy()
        bad[2, 1] = value
        with pytest.raises(IndexError,
                           match=f"gather: index {value} is out of range for dim 1 of size 5"):
            step(x, t(bad, ember.int64))
        close(step(x, t(IDX, ember.int64)), (x * 2).gather(1, t(IDX, ember.int64)) + 1)
    assert step.traces == 1


def _ode_loss(theta, s0, observed, steps=30, dt=0.05):
    if str(ROOT) not in sys.path:   # perf/ is a folder of the checkout, not a package
        sys.path.insert(0, str(ROOT))
    from perf.small_suite import rk4_positions

    """An RK4 fit (examples/fit_ode.py's shape): the loss of a damped oscillator's positions."""
    zeta, omega = theta[:1].exp(), theta[1:].exp()
    zero = ember.zeros(1, dtype=ember.float64, device=s0.device)
    one = ember.ones(1, dtype=ember.float64, device=s0.device)
    a_t = ember.stack([ember.cat([zero, -(omega * omega)]), ember.cat([one, -2 * zeta * omega])])
    return F.mse_loss(rk4_positions(s0, a_t, ember.stack, steps, dt), observed)


@pytest.mark.parametrize("strategy", [NONE, BALANCED], ids=["NONE", "BALANCED"])
def test_tape_gradients_equal_eager(strategy):
    dev = DEVICE.autodiff().gradient_checkpointing(strategy)
    s0 = t([[1.0, 0.0], [0.5, -0.3], [-0.8, 0.4]], ember.float64)
    observed = t(RNG.standard_normal((31, 3)) * 0.3, ember.float64)

    # the CUDA simulator runs each launch in Python (and has no tape): a short solve there
    steps = 30 if DEVICE.type == "cpu" else 2
    observed = observed[:steps + 1]

    def loss_and_grad(theta):
        loss = _ode_loss(theta, s0, observed, steps)
        return loss, theta.grad(loss.backward())

    step = ember.compile(loss_and_grad)
    for values in ([-2.0, 0.8], [-1.5, 0.9], [-2.5, 0.6]):
        theta = t(values, ember.float64, dev).require_grad()
        close(step(theta), loss_and_grad(theta))
    assert on_tape(step).launches > 10 * steps and step.traces == 1


@pytest.mark.parametrize("strategy", [NONE, BALANCED], ids=["NONE", "BALANCED"])
def test_tape_training_step_equals_eager(strategy):
    """The MLP step of the small suite's shape (float32, int64 labels, cross entropy, Adam):
    on the tape, loss, parameters and state as in eager, step after step."""
    if DEVICE.type != "cpu":
        pytest.skip("the CPU's tape (CUDA: test_training_step_state_advances_as_in_eager)")
    dev = DEVICE.autodiff().gradient_checkpointing(strategy)
    x, target = t(RNG.standard_normal((16, 5))), t(RNG.integers(0, 4, 16), ember.int64)
    eager_opt, opt = ember.optim.Adam(_mlp_params(dev), lr=0.01), ember.optim.Adam(_mlp_params(dev), lr=0.01)
    step = ember.compile(lambda x, target: _train_step(opt, x, target))
    for _ in range(CALLS):
        close(step(x, target), _train_step(eager_opt, x, target).inner())
    for p, q in zip(opt.params, eager_opt.params):
        close(p.inner(), q.inner())
    for i in range(4):
        close(opt.state(i), eager_opt.state(i))
    on_tape(step)


def test_tape_adam_state_advances_as_in_eager():
    def params():
        rng = np.random.default_rng(3)
        return [t(rng.standard_normal(s), ember.float64, DEVICE.autodiff()).require_grad()
                for s in ((3, 4), (4,))]

    x, y = t(RNG.standard_normal((5, 3)), ember.float64), t(RNG.standard_normal((5, 4)), ember.float64)

    def train(opt, x, y):
        w, b = opt.params
        loss = F.mse_loss((x @ w + b).tanh(), y)
        opt.step(loss.backward())
        return loss

    opt, eager_opt = ember.optim.Adam(params(), lr=0.05), ember.optim.Adam(params(), lr=0.05)
    step = ember.compile(lambda x, y: train(opt, x, y))
    for _ in range(4):
        close(step(x, y), train(eager_opt, x, y).inner())
    for p, q in zip(opt.params, eager_opt.params):
        close(p.inner(), q.inner())
    on_tape(step)


def test_tape_leaves_other_programs_to_the_bound_replay():
    """Large arrays, and ops or dtypes the tape does not know: replayed launch by launch
    (and equal to eager)."""
    if DEVICE.type != "cpu":   # (and 2^19 elements would take minutes in the simulator)
        pytest.skip("CUDA has no tape: every program replays launch by launch")
    from ember.backends.cpu.tape import IO_MAX, MAX_ELEMENTS
    wide = MAX_ELEMENTS // 8 + 1
    steps = {
        "large": (lambda x: (x.reshape(8, 1).expand(8, wide) * 2).sum(), t(np.ones(8), ember.float64)),
        # an input or a result past IO_MAX: its copies into and out of the arenas cost more
        # than the tape saves (docs/decisions.md, "Large inputs and results")
        "large input": (lambda x: (x * 2).sum(), t(np.ones(IO_MAX + 1), ember.float64)),
        "large result": (lambda x: x.reshape(-1, 1) * x.reshape(1, -1), t(np.arange(91.0))),
        "sort": (lambda x: x.sort(1) * 2, t(X)),
        "cumsum": (lambda x: x.cumsum(0), t(X)),
        "int32": (lambda x: x + 1, t(IDX, ember.int32)),
        "complex": (lambda x: x * 2, t(X + 1j, ember.complex64)),
    }
    for name, (fn, x) in steps.items():
        step = ember.compile(fn)
        same(step(x), fn(x))
        same(step(x), fn(x))
        (program,) = step._programs.values()
        assert program.instructions is None, name
    assert 91 * 91 > IO_MAX
    # at IO_MAX elements in and out, still a tape
    step = ember.compile(lambda x: x * 2)
    x = t(np.arange(IO_MAX, dtype=np.float64), ember.float64)
    same(step(x), x * 2)
    on_tape(step)
