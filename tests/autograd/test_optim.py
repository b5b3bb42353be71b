"""``ember.optim``: SGD, Adam and AdamW against numpy transcriptions of PyTorch's update rules
(and ``torch.optim`` itself when installed), the ``opt.step(grads)`` contract, and errors.

A step's gradient is chosen exactly with ``loss = (w * G).sum()`` (its gradient is ``G``), so the
references see the same gradients as the optimizer.  Decisions pinned down here:
- ``step`` returns new marked leaves; the old parameters keep their values;
- a parameter without a gradient in ``grads`` is returned as it is (the same tensor), and its
  state (Adam's step count, SGD's momentum buffer) does not advance, as PyTorch skips it.
"""
import numpy as np
import pytest

import ember
import ember.optim
from checks import compiled_in_new_process
from ember.backends.cpu.elementwise import PARALLEL_MIN

try:
    import torch
except ImportError:
    torch = None

F64 = ember.float64


def param(values, device, dtype=F64):
    a = np.asarray(values)
    t = ember.tensor(a, dtype=dtype, device=device)
    return (t if t.shape == a.shape else t.reshape(a.shape)).require_grad()


def grads_for(params, gs):
    """A Gradients container in which ``params[i]`` has gradient ``gs[i]`` (None: no gradient)."""
    loss = None
    for p, g in zip(params, gs):
        if g is None:
            continue
        term = (p * ember.tensor(g, dtype=p.dtype)).sum()
        loss = term if loss is None else loss + term
    return loss.backward()


# --- numpy transcriptions of torch.optim's single-tensor updates ----------------------------
def sgd_ref(p, g, state, lr, momentum=0.0, weight_decay=0.0, dampening=0.0, nesterov=False,
            maximize=False):
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    if momentum:
        buf = state.get("buf")
        buf = g.copy() if buf is None else buf * momentum + (1 - dampening) * g
        state["buf"] = buf
        g = g + momentum * buf if nesterov else buf
    return p - lr * g


def adam_ref(p, g, state, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
             maximize=False, decoupled=False):
    b1, b2 = betas
    g = -g if maximize else g
    if not state:
        state.update(step=0, m=np.zeros_like(p), v=np.zeros_like(p), vmax=np.zeros_like(p))
    state["step"] += 1
    t = state["step"]
    if weight_decay:
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
    state["m"] = state["m"] + (1 - b1) * (g - state["m"])
    state["v"] = state["v"] * b2 + (1 - b2) * g * g
    v = state["v"]
    if amsgrad:
        state["vmax"] = v = np.maximum(state["vmax"], v)
    denom = np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps
    return p - lr / (1 - b1 ** t) * (state["m"] / denom)


def adamw_ref(p, g, state, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, **kw):
    return adam_ref(p, g, state, lr, betas, eps, weight_decay, decoupled=True, **kw)


CONFIGS = [
    ("sgd", ember.optim.SGD, sgd_ref, dict(lr=0.1)),
    ("sgd_momentum", ember.optim.SGD, sgd_ref, dict(lr=0.05, momentum=0.9)),
    ("sgd_momentum_wd_dampening", ember.optim.SGD, sgd_ref,
     dict(lr=0.05, momentum=0.8, weight_decay=0.1, dampening=0.3)),
    ("sgd_nesterov_maximize", ember.optim.SGD, sgd_ref,
     dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01, maximize=True)),
    ("sgd_wd", ember.optim.SGD, sgd_ref, dict(lr=0.1, weight_decay=0.5)),
    ("adam", ember.optim.Adam, adam_ref, dict()),
    ("adam_lr_wd", ember.optim.Adam, adam_ref, dict(lr=0.05, weight_decay=0.1, eps=1e-6)),
    ("adam_amsgrad_betas", ember.optim.Adam, adam_ref,
     dict(lr=0.02, betas=(0.3, 0.8), amsgrad=True)),   # beta1 < 0.5: lerp's other branch
    ("adam_maximize", ember.optim.Adam, adam_ref, dict(lr=0.01, maximize=True)),
    ("adamw", ember.optim.AdamW, adamw_ref, dict()),
    ("adamw_strong_decay_amsgrad", ember.optim.AdamW, adamw_ref,
     dict(lr=0.03, weight_decay=0.5, amsgrad=True)),
]
STEPS = 6


def _gradient_sequence(rng, shapes):
    # sign changes and a shrinking scale: amsgrad's maximum and the momentum both matter
    return [[rng.standard_normal(s) * (2.0 if k % 2 else 0.5) for s in shapes] for k in range(STEPS)]


@pytest.mark.parametrize("name, cls, ref, kw", CONFIGS, ids=[c[0] for c in CONFIGS])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_matches_reference_formulas(name, cls, ref, kw, dtype, device):
    rng = np.random.default_rng(len(name))
    shapes = [(3, 4), (5,), ()]
    start = [rng.standard_normal(s) for s in shapes]
    params = [param(a, device, getattr(ember, dtype)) for a in start]
    opt = cls(params, **kw)
    expected = [a.copy() for a in start]
    states = [{} for _ in shapes]
    tol = dict(rtol=1e-12, atol=1e-14) if dtype == "float64" else dict(rtol=2e-5, atol=1e-6)
    for gs in _gradient_sequence(rng, shapes):
        params = opt.step(grads_for(params, gs))
        expected = [ref(p, g, s, **kw) for p, g, s in zip(expected, gs, states)]
        for got, want in zip(params, expected):
            assert got.dtype == getattr(ember, dtype) and got.shape == want.shape
            np.testing.assert_allclose(got.numpy(), want, **tol)


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
@pytest.mark.parametrize("name, cls, ref, kw", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_matches_torch_optim(name, cls, ref, kw, device):
    torch_cls = getattr(torch.optim, cls.__name__)
    rng = np.random.default_rng(100 + len(name))
    start = [rng.standard_normal((4, 3)), rng.standard_normal(6)]
    params = [param(a, device) for a in start]
    theirs = [torch.tensor(a, requires_grad=True) for a in start]
    opt, topt = cls(params, **kw), torch_cls(theirs, **kw)
    for _ in range(STEPS):   # a real loss: the gradients depend on the parameters
        loss = (params[0].sin() * 2).sum() + (params[1] * params[1] * params[1]).sum() * 0.1
        params = opt.step(loss.backward())
        topt.zero_grad()
        ((theirs[0].sin() * 2).sum() + (theirs[1] ** 3).sum() * 0.1).backward()
        topt.step()
        for p, t in zip(params, theirs):
            np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("cls", [ember.optim.SGD, ember.optim.Adam])
def test_large_parameter_uses_the_parallel_kernel_and_agrees(cls, device):
    rng = np.random.default_rng(1)
    n = PARALLEL_MIN + 1234
    start, g = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    kw = dict(lr=0.1, momentum=0.9, weight_decay=0.01) if cls is ember.optim.SGD else dict(lr=0.1)
    ref = sgd_ref if cls is ember.optim.SGD else adam_ref
    (w,) = params = [param(start, device, ember.float32)]
    opt = cls(params, **kw)
    want, state = start.astype(np.float64), {}
    for _ in range(3):
        (w,) = opt.step(grads_for([w], [g]))
        want = ref(want, g.astype(np.float64), state, **kw)
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name, cls, ref, kw", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_replayed_steps_equal_op_by_op(name, cls, ref, kw, device, monkeypatch):
    """After ``HOT_STEPS`` steps of one kind an optimizer replays its traced updates: the
    parameters and every state tensor equal those of an optimizer that runs each step op by
    op, bit for bit, through a parameter without a gradient (a new kind of step), a change
    of learning rate (another) and back."""
    rng = np.random.default_rng(7 + len(name))
    shapes = [(3, 4), (5,), ()]
    start = [rng.standard_normal(s) for s in shapes]
    replayed = cls([param(a, device) for a in start], **kw)
    op_by_op = cls([param(a, device) for a in start], **kw)
    op_by_op._replayed = lambda picked: None
    for k in range(16):
        gs = [rng.standard_normal(s) for s in shapes]
        if k in (5, 6, 7):
            gs[1] = None          # parameter 1 waits: another kind of step, then back, its
        if k == 12:               # step count no longer the others' (a kind of its own)
            for opt in (replayed, op_by_op):
                opt.lr = kw.get("lr", 1e-3) * 0.5   # a new hyperparameter: traced again
        for opt in (replayed, op_by_op):
            opt.step(grads_for(opt.params, gs))
        for p, q in zip(replayed.params, op_by_op.params):
            assert p.is_require_grad() and p.shape == q.shape and p.dtype == q.dtype
            np.testing.assert_array_equal(p.numpy(), q.numpy())
        for i in range(len(shapes)):
            a, b = replayed.state(i), op_by_op.state(i)
            assert a.keys() == b.keys()
            for key in a:
                np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]))
    assert len(replayed._programs) == 4   # all, without parameter 1, all again, a new lr
    # the parameters that step together still share one step count
    assert replayed._state[0]["step"] is replayed._state[2]["step"]
    assert replayed._state[0]["step"] is not replayed._state[1]["step"]


def test_updates_replay_after_hot_steps_without_dispatch(device, monkeypatch):
    from ember import optim
    w = param(np.ones((4, 4)), device)
    opt = ember.optim.Adam([w], lr=0.1)
    for _ in range(optim.HOT_STEPS):
        (w,) = opt.step((w * w).sum().backward())
    assert len(opt._programs) == 1
    grads = (w * w).sum().backward()
    import ember.dispatch as dispatch
    calls = []
    monkeypatch.setattr(dispatch, "_apply", lambda *a: calls.append(a))   # no op may dispatch
    (w2,) = opt.step(grads)
    assert calls == [] and w2.is_require_grad() and w2.shape == (4, 4)


# --- the step contract ----------------------------------------------------------------------
def test_step_returns_new_marked_leaves_in_order(device):
    a, b, c = param([1.0, 2.0], device), param([[3.0]], device), param([4.0, 5.0, 6.0], device)
    opt = ember.optim.SGD([a, b, c], lr=0.5)
    new = opt.step(grads_for([a, b, c], [[1.0, 1.0], [[2.0]], [0.0, 2.0, 4.0]]))
    assert isinstance(new, list) and len(new) == 3
    for old, p in zip((a, b, c), new):
        assert p is not old
        assert p.is_require_grad() and p.is_autodiff() and p.shape == old.shape and p.dtype == old.dtype
        assert p.gradient_checkpointing_strategy() is device.checkpointing
    np.testing.assert_array_equal(new[0].numpy(), [0.5, 1.5])
    np.testing.assert_array_equal(new[1].numpy(), [[2.0]])
    np.testing.assert_array_equal(new[2].numpy(), [4.0, 4.0, 4.0])
    np.testing.assert_array_equal(a.numpy(), [1.0, 2.0])      # values: the old leaf is untouched
    assert [p is q for p, q in zip(opt.params, new)] == [True] * 3
    assert opt.params is not opt.params                        # a copy of the list
    # the new leaves drive the next forward; the old ones stay usable too
    newer = opt.step((new[0] * new[0]).sum().backward())
    np.testing.assert_array_equal(newer[0].numpy(), [0.0, 0.0])
    assert newer[1] is new[1] and newer[2] is new[2]
    assert a.grad((a * 3).sum().backward()).tolist() == [3.0, 3.0]


def test_parameter_without_gradient_is_unchanged_and_its_state_waits(device):
    a, b = param([1.0, -1.0], device), param([2.0], device)
    opt = ember.optim.Adam([a, b], lr=0.1)
    a1, b1 = opt.step(grads_for([a, b], [[1.0, 1.0], None]))
    assert b1 is b and a1 is not a
    assert opt.state(0)["step"] == 1 and opt.state(1) == {}
    a2, b2 = opt.step(grads_for([a1, b1], [[1.0, 1.0], [1.0]]))
    assert opt.state(0)["step"] == 2 and opt.state(1)["step"] == 1
    np.testing.assert_allclose(b2.numpy(), [1.9], rtol=1e-8)   # a first Adam step moves by ~lr
    exp_avg = opt.state(0)["exp_avg"]
    assert not exp_avg.is_autodiff() and exp_avg.shape == (2,)
    np.testing.assert_allclose(exp_avg.numpy(), [0.19, 0.19], rtol=1e-12)


def test_gradients_from_another_backward_update_nothing(device):
    a, other = param([1.0], device), param([2.0], device)
    opt = ember.optim.SGD([a], lr=1.0, momentum=0.9)
    (same,) = opt.step((other * 2).sum().backward())
    assert same is a and opt.state(0) == {}


def test_replaced_gradient_and_noncontiguous_parameter(device):
    base = ember.tensor(np.arange(6.0).reshape(2, 3), dtype=F64, device=device)
    w = base.T.require_grad()                                # a transposed (strided) leaf
    opt = ember.optim.SGD([w], lr=1.0)
    grads = (w * 1.0).sum().backward()
    w.grad_replace(grads, ember.tensor(np.full((3, 2), 2.0), dtype=F64))
    (w2,) = opt.step(grads)
    np.testing.assert_array_equal(w2.numpy(), np.arange(6.0).reshape(2, 3).T - 2.0)


def test_step_is_one_fused_kernel_per_parameter_on_its_device(device, monkeypatch, hot_chains):
    # the update composes elementwise ops: with fusion on, the parameter, its moments and the
    # amsgrad maximum come out of one fused kernel; nothing goes through the host
    previous = ember.fusion.set_enabled(True)
    try:
        backend = ember.Device.cpu().backend
        seen = []
        real = backend.execute

        def spy(op, *args, **kw):
            seen.append(op)
            return real(op, *args, **kw)

        w = param(np.ones((4, 4)), device)
        opt = ember.optim.AdamW([w], lr=0.1, amsgrad=True)
        grads = (w * w).sum().backward()
        monkeypatch.setattr(backend, "execute", spy)
        (w2,) = opt.step(grads)
        ember.fusion.force(w2, *[v for v in opt._state[0].values() if isinstance(v, ember.Tensor)])
        assert seen.count(ember.Op.FUSED) == 1, seen
        assert set(seen) <= {ember.Op.FUSED, ember.Op.FULL}, seen   # FULL: new scalar constants
    finally:
        ember.fusion.set_enabled(previous)


def test_training_loop_converges(device):
    import ember.nn.functional as F
    rng = np.random.default_rng(3)
    x = ember.tensor(rng.standard_normal((64, 3)), dtype=F64)
    true_w = np.array([[1.5, -2.0, 0.5]])
    y = ember.tensor(x.numpy() @ true_w.T + 0.3, dtype=F64)
    w, b = param(np.zeros((1, 3)), device), param(np.zeros(1), device)
    opt = ember.optim.Adam([w, b], lr=0.1)
    for _ in range(150):
        w, b = opt.step(F.mse_loss(F.linear(x, w, b), y).backward())
    np.testing.assert_allclose(w.numpy(), true_w, atol=1e-2)
    np.testing.assert_allclose(b.numpy(), [0.3], atol=1e-2)


def test_lr_can_change_between_steps(device):
    w = param([1.0], device)
    opt = ember.optim.SGD([w], lr=1.0)
    (w,) = opt.step(grads_for([w], [[1.0]]))
    opt.lr = 0.25
    (w,) = opt.step(grads_for([w], [[1.0]]))
    assert w.tolist() == [-0.25]


# --- errors ------------------------------------------------------------------------------------
def test_errors(device):
    w = param([1.0], device)
    SGD, Adam, AdamW = ember.optim.SGD, ember.optim.Adam, ember.optim.AdamW
    with pytest.raises(ValueError, match="empty parameter list"):
        SGD([], lr=0.1)
    with pytest.raises(TypeError, match="single tensor"):
        SGD(w, lr=0.1)
    with pytest.raises(TypeError, match="parameter 1 must be a tensor"):
        SGD([w, np.ones(2)], lr=0.1)
    with pytest.raises(TypeError, match="Float"):
        SGD([ember.tensor([1, 2], device=device)], lr=0.1)
    with pytest.raises(ValueError, match="not a marked leaf"):
        SGD([w * 2], lr=0.1)
    with pytest.raises(ValueError, match="not a marked leaf"):
        Adam([ember.tensor([1.0])])                             # no autodiff
    with pytest.raises(ValueError, match="more than once"):
        Adam([w, w])
    with pytest.raises(ValueError, match="learning rate"):
        SGD([w], lr=-1)
    with pytest.raises(ValueError, match="momentum"):
        SGD([w], lr=0.1, momentum=-0.5)
    with pytest.raises(ValueError, match="Nesterov"):
        SGD([w], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="betas"):
        Adam([w], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="epsilon"):
        AdamW([w], eps=-1e-8)
    with pytest.raises(ValueError, match="weight_decay"):
        AdamW([w], weight_decay=-0.1)
    with pytest.raises(TypeError, match="Gradients"):
        SGD([w], lr=0.1).step({})


# --- the updates' fused kernels load from the disk cache ----------------------------------------
CACHE_SCRIPT = """
import ember, ember.optim
ember.fusion.HOT_RUNS = 1   # the updates compile at their first step
device = ember.Device.cpu().gradient_checkpointing(ember.CheckpointingStrategy[STRATEGY])
for dtype in (ember.float32, ember.float64):
    w = ember.ones(3, dtype=dtype, device=device).require_grad()
    for opt in (ember.optim.SGD([w], lr=0.1, momentum=0.9), ember.optim.AdamW([w], amsgrad=True)):
        for _ in range(ember.optim.HOT_STEPS + 1):   # eager steps (op by op: 3 elements), then
            opt.params[0].numpy()                    # the replay of their trace (fused)
            opt.step((opt.params[0] * opt.params[0]).sum().backward())
        opt.params[0].numpy()
"""


def test_optimizer_kernels_are_cached_on_disk(device, tmp_path):
    """A second process loads the updates' fused kernels (both dtypes) instead of compiling them:
    it compiles nothing at all."""
    def run():
        script = f"STRATEGY = {device.checkpointing.name!r}\n" + CACHE_SCRIPT
        return compiled_in_new_process(script, tmp_path)

    first = run()
    assert any(name.startswith("ember_fused_") for name in first), first
    assert run() == []
