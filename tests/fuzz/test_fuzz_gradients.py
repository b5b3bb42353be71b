"""Fuzz: gradients of random compositions against PyTorch float64 and finite differences.

A program is a random chain of differentiable ops (elementwise functions, binary ops with
fresh leaves, reductions along a dim, softmax, scans, sort, gather and index_select with
repeated indices, layout ops, matmul).  Ember runs it on a float64 autodiff device under
both checkpointing strategies; the loss is ``sum(out * W)`` with fixed random weights.  With
PyTorch installed the same program runs in torch float64 and every leaf's gradient must
match torch's (NaN where torch has NaN); without it, and always for a smooth subset of the
ops, central finite differences of the same Ember program are the reference.  NONE and
BALANCED must give the same gradients.  (Ember runs with fusion off here; fused against
unfused gradients are test_fuzz_fusion's.)
"""
import numpy as np
import pytest
from hypothesis import assume, strategies as st

import ember
from ember import fusion

from .settings import fuzz

try:
    import torch
except ImportError:   # PyTorch is optional: finite differences take its place
    torch = None

STRATEGIES = (ember.CheckpointingStrategy.NONE, ember.CheckpointingStrategy.BALANCED)


def _gelu_t(x):
    return torch.nn.functional.gelu(x)


# name: (ember function, torch function, smooth); ``x`` the running tensor, ``p`` the step's
# drawn parameters (dims, indices, ...), ``w`` a fresh leaf where the step takes one
UNARY = {
    "tanh": (lambda x: x.tanh(), lambda x: x.tanh(), True),
    "sigmoid": (lambda x: x.sigmoid(), lambda x: x.sigmoid(), True),
    "sin": (lambda x: x.sin(), lambda x: x.sin(), True),
    "cos": (lambda x: x.cos(), lambda x: x.cos(), True),
    "erf": (lambda x: x.erf(), lambda x: torch.erf(x), True),
    "gelu": (lambda x: x.gelu(), _gelu_t, True),
    "silu": (lambda x: x.silu(), lambda x: torch.nn.functional.silu(x), True),
    "exp": (lambda x: x.clamp(-4, 4).exp(), lambda x: x.clamp(-4, 4).exp(), False),
    "sqrt1": (lambda x: (x * x + 1).sqrt(), lambda x: (x * x + 1).sqrt(), True),
    "log1p": (lambda x: (x * x).log1p(), lambda x: (x * x).log1p(), True),
    "square": (lambda x: x * x, lambda x: x * x, True),
    "abs": (lambda x: x.abs(), lambda x: x.abs(), False),
    "relu": (lambda x: x.relu(), lambda x: x.relu(), False),
    "clamp": (lambda x: x.clamp(-0.5, 0.5), lambda x: x.clamp(-0.5, 0.5), False),
    "round": (lambda x: x.round() + x, lambda x: x.round() + x, False),
    "pow": (lambda x: (x * x + 0.5) ** 1.5, lambda x: (x * x + 0.5) ** 1.5, True),
    "mask_fill": (lambda x: x.mask_fill(x < 0, 0.25), lambda x: x.masked_fill(x < 0, 0.25), False),
}
BINARY = {   # with a fresh leaf w of a shape that broadcasts against x
    "add": (lambda x, w: x + w, lambda x, w: x + w, True),
    "mul": (lambda x, w: x * w, lambda x, w: x * w, True),
    "sub": (lambda x, w: w - x, lambda x, w: w - x, True),
    "div": (lambda x, w: x / (w * w + 1), lambda x, w: x / (w * w + 1), True),
    "maximum": (lambda x, w: x.maximum(w), lambda x, w: torch.maximum(x, w), False),
    "minimum": (lambda x, w: x.minimum(w), lambda x, w: torch.minimum(x, w), False),
    "where": (lambda x, w: ember.where(x > w, x, w * 2), lambda x, w: torch.where(x > w, x, w * 2), False),
}


def _t_dims(d):
    return d


REDUCE = {   # along one dim p["dim"], keepdim p["keep"]
    "sum": (lambda x, p: x.sum(p["dim"], p["keep"]), lambda x, p: x.sum(p["dim"], p["keep"]), True),
    "mean": (lambda x, p: x.mean(p["dim"], p["keep"]), lambda x, p: x.mean(p["dim"], p["keep"]), True),
    "prod": (lambda x, p: x.prod(p["dim"], p["keep"]), lambda x, p: x.prod(p["dim"], p["keep"]), True),
    "max": (lambda x, p: x.max(p["dim"], p["keep"]), lambda x, p: torch.amax(x, p["dim"], p["keep"]), False),
    "min": (lambda x, p: x.min(p["dim"], p["keep"]), lambda x, p: torch.amin(x, p["dim"], p["keep"]), False),
    "std": (lambda x, p: x.std(p["dim"], p["keep"]), lambda x, p: x.std(p["dim"], keepdim=p["keep"]), False),
    "var": (lambda x, p: x.var(p["dim"], p["keep"]), lambda x, p: x.var(p["dim"], keepdim=p["keep"]), True),
    "softmax": (lambda x, p: x.softmax(p["dim"]), lambda x, p: x.softmax(p["dim"]), True),
    "log_softmax": (lambda x, p: x.log_softmax(p["dim"]), lambda x, p: x.log_softmax(p["dim"]), True),
    "cumsum": (lambda x, p: x.cumsum(p["dim"]), lambda x, p: x.cumsum(p["dim"]), True),
    "cumprod": (lambda x, p: x.cumprod(p["dim"]), lambda x, p: x.cumprod(p["dim"]), True),
    "sort": (lambda x, p: x.sort(p["dim"], p["keep"]),
             lambda x, p: torch.sort(x, dim=p["dim"], descending=p["keep"], stable=True).values, False),
    "flip": (lambda x, p: x.flip(p["dim"]), lambda x, p: x.flip(p["dim"]), True),
    "transpose": (lambda x, p: x.transpose(p["dim"], 0), lambda x, p: x.transpose(p["dim"], 0), True),
    "step": (lambda x, p: x.narrow(p["dim"], 0, x.shape[p["dim"]]).transpose(p["dim"], 0)[::2],
             lambda x, p: x.transpose(p["dim"], 0)[::2], True),
    "cat": (lambda x, p: ember.cat([x, x.tanh()], p["dim"]),
            lambda x, p: torch.cat([x, x.tanh()], p["dim"]), True),
    "stack": (lambda x, p: ember.stack([x, x * 2], p["dim"]),
              lambda x, p: torch.stack([x, x * 2], p["dim"]), True),
    "repeat": (lambda x, p: x.repeat(*([1] * x.ndim)).repeat(*[2 if d == p["dim"] else 1 for d in range(x.ndim)]),
               lambda x, p: x.repeat(*[2 if d == p["dim"] else 1 for d in range(x.ndim)]), True),
    "reshape": (lambda x, p: x.reshape(-1), lambda x, p: x.reshape(-1), True),
    "expand": (lambda x, p: x.unsqueeze(0).expand(2, *x.shape), lambda x, p: x.unsqueeze(0).expand(2, *x.shape), True),
    "gather": (lambda x, p: x.gather(p["dim"], ember.tensor(p["index"])),
               lambda x, p: torch.gather(x, p["dim"], torch.tensor(p["index"])), True),
    "index_select": (lambda x, p: x.index_select(p["dim"], ember.tensor(p["index1"])),
                     lambda x, p: torch.index_select(x, p["dim"], torch.tensor(p["index1"])), True),
}


@st.composite
def programs(draw, smooth_only):
    """(leaf arrays, steps, weights): the steps applied to leaf 0; binary steps add leaves."""
    rng_seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(rng_seed)
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
    leaves = [rng.standard_normal(shape)]
    x = ember.tensor(leaves[0], dtype=ember.float64)   # tracks shapes while drawing
    steps = []
    for _ in range(draw(st.integers(1, 5))):
        if x.numel() > 64 or x.ndim > 4:
            break
        family = draw(st.sampled_from(["unary", "binary", "dim"] if x.ndim else ["unary", "binary"]))
        table = {"unary": UNARY, "binary": BINARY, "dim": REDUCE}[family]
        names = sorted(n for n, v in table.items() if v[2] or not smooth_only)
        name = draw(st.sampled_from(names))
        p = {}
        if family == "binary":
            k = draw(st.integers(0, x.ndim))
            wshape = tuple(1 if draw(st.booleans()) else n for n in x.shape[x.ndim - k:])
            leaves.append(rng.standard_normal(wshape))
            p["leaf"] = len(leaves) - 1
        elif family == "dim":
            d = draw(st.integers(0, x.ndim - 1))
            if name in ("std",) and x.shape[d] < 2:
                continue
            p["dim"] = d - x.ndim if draw(st.booleans()) else d
            p["keep"] = draw(st.booleans())
            n = x.shape[d]
            if name == "gather":   # repeated indices: the same entry gathered twice or more
                p["index"] = rng.integers(0, n, x.shape)
                if draw(st.booleans()):
                    p["index"][...] = rng.integers(0, n)
            if name == "index_select":
                p["index1"] = rng.integers(0, n, draw(st.integers(1, 4)))
        steps.append((family, name, p))
        x = _apply_ember(x, [None] * len(leaves), steps[-1], lambda i: ember.tensor(leaves[i]))
    weights = rng.standard_normal(x.shape)
    return leaves, steps, weights


def _apply_ember(x, leaf_tensors, step, leaf):
    family, name, p = step
    if family == "unary":
        return UNARY[name][0](x)
    if family == "binary":
        return BINARY[name][0](x, leaf(p["leaf"]))
    return REDUCE[name][0](x, p)


def _run_ember(leaves, steps, weights, device):
    ts = [ember.tensor(a, dtype=ember.float64, device=device) for a in leaves]
    if device is not None:
        ts = [t.require_grad() for t in ts]
    x = ts[0]
    for step in steps:
        x = _apply_ember(x, ts, step, lambda i: ts[i])
    loss = (x * ember.tensor(weights, dtype=ember.float64, device=device)).sum()
    return ts, loss


def _run_torch(leaves, steps, weights):
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in leaves]
    x = ts[0]
    for family, name, p in steps:
        if family == "unary":
            x = UNARY[name][1](x)
        elif family == "binary":
            x = BINARY[name][1](x, ts[p["leaf"]])
        else:
            x = REDUCE[name][1](x, p)
    loss = (x * torch.tensor(weights)).sum()
    loss.backward()
    return loss.item(), [t.grad.numpy() if t.grad is not None else np.zeros_like(a)
                         for t, a in zip(ts, leaves)]


def _ember_grads(leaves, steps, weights, strategy):
    device = ember.Device.cpu().gradient_checkpointing(strategy)
    # eager kernels: every random program would otherwise compile fused kernels of its own
    # (seconds each, cold); fused and unfused gradients are compared in test_fuzz_fusion
    previous = fusion.set_enabled(False)
    try:
        ts, loss = _run_ember(leaves, steps, weights, device)
        grads = loss.backward()
    finally:
        fusion.set_enabled(previous)
    out = []
    for t, a in zip(ts, leaves):
        g = t.grad(grads)
        out.append(np.zeros_like(a) if g is None else g.numpy())
    return loss.item(), out


def _finite_differences(leaves, steps, weights, eps=1e-6):
    def loss_of(arrays):
        return _run_ember(arrays, steps, weights, None)[1].item()
    grads = []
    for i, a in enumerate(leaves):
        g = np.zeros_like(a)
        for pos in np.ndindex(*a.shape):
            plus = [x.copy() for x in leaves]
            minus = [x.copy() for x in leaves]
            plus[i][pos] += eps
            minus[i][pos] -= eps
            g[pos] = (loss_of(plus) - loss_of(minus)) / (2 * eps)
        grads.append(g)
    return grads


def _check(leaves, steps, weights, reference):
    results = [_ember_grads(leaves, steps, weights, s) for s in STRATEGIES]
    (loss_none, g_none), (loss_bal, g_bal) = results
    for a, b in zip(g_none, g_bal):   # identical under NONE and BALANCED
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True,
                                   err_msg=f"NONE vs BALANCED: {steps}")
    loss_ref, g_ref = reference()
    if loss_ref is not None:
        np.testing.assert_allclose(loss_none, loss_ref, rtol=1e-9, atol=1e-9, equal_nan=True)
    for i, (got, want) in enumerate(zip(g_none, g_ref)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True,
                                   err_msg=f"leaf {i}, steps {steps}")


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed (finite differences still run)")
@fuzz("gradients", 40, program=programs(smooth_only=False))
def test_gradients_match_torch(program):
    leaves, steps, weights = program
    _check(leaves, steps, weights, lambda: _run_torch(leaves, steps, weights))


@fuzz("gradients", 15, program=programs(smooth_only=True))
def test_gradients_match_finite_differences(program):
    leaves, steps, weights = program
    # a loss that is NaN or infinite at the leaves (the var of one element) has no finite
    # differences (every one is NaN, even an unused input's, whose gradient is 0): such
    # programs are test_gradients_match_torch's
    assume(np.isfinite(_run_ember(leaves, steps, weights, None)[1].item()))

    def reference():
        return None, _finite_differences(leaves, steps, weights)
    results_ok = True
    try:
        _check(leaves, steps, weights, reference)
    except AssertionError:
        results_ok = False
    if not results_ok:
        # finite differences lose digits where the loss is steep: retry with a larger eps
        # before calling it a failure
        _check(leaves, steps, weights, lambda: (None, _finite_differences(leaves, steps, weights, 1e-4)))
