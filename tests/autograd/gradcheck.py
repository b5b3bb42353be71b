"""Finite-difference gradient checking for Ember's autodiff (DESIGN §4, §7).

A ``Case`` is one row of the declarative gradient table: a name, a function of Ember tensors
building the output (a tensor, or a list/tuple of tensors), one ``Arg`` per input (a numpy
generator with a safe domain, how the input takes part in the graph, its dtype) and the
tolerances.  ``check_case(case, device)`` builds the inputs on ``device`` (the CPU, or CUDA in the
simulator tier: the constants a row makes while it runs go there too, ``on``), computes

    loss = sum_i (out_i * W_i).sum()        (W_i fixed random weights: every element matters)

runs ``backward`` and compares every marked leaf's ``t.grad(grads)`` with central finite
differences of the same loss, evaluated with the same Ember ops on tensors WITHOUT autodiff.

Input domains keep every input at least a margin (>> eps) away from the op's kinks and
discontinuities (abs/relu at 0, floor at integers, ties of max/sort, ...), so the finite
differences are valid there.  Inputs are drawn from a generator seeded with the row's name:
each row is reproducible on its own (``-k name``) and independent of the order rows run in.
"""
import contextlib
import functools
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

import ember

LEAF = "leaf"          # marked float leaf on the autodiff device: its gradient is checked
AUTODIFF = "autodiff"  # autodiff-enabled but not marked: a constant, it must get no gradient
PLAIN = "plain"        # a tensor without autodiff: a constant, it must get no gradient

DTYPES = {"float64": ember.float64, "float32": ember.float32}


@dataclass(frozen=True)
class Arg:
    """One input: ``gen(rng, prev)`` -> numpy array (``prev``: the arrays drawn before it)."""
    gen: Callable
    mode: str = LEAF
    dtype: str = "float64"


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable
    args: tuple
    rtol: float = 1e-5
    atol: float = 1e-7
    eps: float = 1e-6


def case(name, fn, *args, **kw):
    """A row; plain generators (not ``Arg``) are marked float64 leaves."""
    args = tuple(a if isinstance(a, Arg) else Arg(a) for a in args)
    return Case(name, fn, args, **kw)


def plain(gen, dtype="float64"):
    return Arg(gen, PLAIN, dtype)


def untracked(gen, dtype="float64"):
    return Arg(gen, AUTODIFF, dtype)


def f32(gen):
    return Arg(gen, LEAF, "float32")


# --- input domains ------------------------------------------------------------------------
def _gen(fn):
    """Wrap ``fn(rng, shape)`` as a generator ``(rng, prev) -> array`` for a given shape."""
    @functools.wraps(fn)
    def make(*shape, **kw):
        return lambda rng, prev: np.asarray(fn(rng, shape, **kw), dtype=np.float64)
    return make


@_gen
def normal(rng, shape, scale=1.0):
    return rng.standard_normal(shape) * scale


@_gen
def uniform(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape)


@_gen
def positive(rng, shape, lo=0.3, hi=3.0):
    return rng.uniform(lo, hi, shape)


@_gen
def nonzero(rng, shape, lo=0.2, hi=2.0):
    """|x| in [lo, hi], random sign: away from the kink of abs/relu/sign and from 1/0."""
    return rng.choice([-1.0, 1.0], shape) * rng.uniform(lo, hi, shape)


@_gen
def off_integer(rng, shape, lo=-3, hi=3):
    """k + f with f in [0.15, 0.85]: away from floor/ceil/trunc's jumps."""
    return rng.integers(lo, hi, shape) + rng.uniform(0.15, 0.85, shape)


@_gen
def off_half(rng, shape, lo=-3, hi=3):
    """k + f with |f| <= 0.35: away from round's jumps at half-integers."""
    return rng.integers(lo, hi, shape) + rng.uniform(-0.35, 0.35, shape)


@_gen
def distinct(rng, shape, gap=0.1):
    """A random permutation of values spaced at least ``gap`` apart: no ties anywhere."""
    n = int(np.prod(shape))
    values = (np.arange(n) - n / 2) * gap * 3 + rng.uniform(0, gap, n)
    return rng.permutation(values).reshape(shape) * 0.3


def with_zeros(gen, *positions):
    """``gen`` with exact zeros at ``positions`` (index tuples)."""
    def make(rng, prev):
        a = gen(rng, prev).copy()
        for p in positions:
            a[p] = 0.0
        return a
    return make


def fixed(values):
    return lambda rng, prev: np.array(values, dtype=np.float64)


def apart_from(i, lo=0.1, hi=1.0):
    """Same shape as input ``i``, differing from it by a random sign times U(lo, hi): no ties."""
    def make(rng, prev):
        x = prev[i]
        return x + rng.choice([-1.0, 1.0], x.shape) * rng.uniform(lo, hi, x.shape)
    return make


def dividend_of(i, *shape, lo=-3, hi=3):
    """``b * (k + f)``, f in [0.15, 0.85], b = input ``i`` (broadcast): a / b away from integers."""
    def make(rng, prev):
        b = prev[i]
        out_shape = np.broadcast_shapes(shape, b.shape) if shape else b.shape
        q = rng.integers(lo, hi, out_shape) + rng.uniform(0.15, 0.85, out_shape)
        return (b * q).reshape(shape) if shape else b * q
    return make


def around_bounds(lo_i, hi_i, shape):
    """x below ``lo``, between the bounds or above ``hi`` (>= 0.1 away from each bound).

    ``lo_i``/``hi_i`` index earlier inputs (broadcast to ``shape``) or are floats / None.
    """
    def make(rng, prev):
        def bound(b, default):
            if b is None:
                return np.full(shape, default)
            v = prev[b] if isinstance(b, int) else b
            return np.broadcast_to(np.asarray(v, dtype=np.float64), shape)
        lo, hi = bound(lo_i, -np.inf), bound(hi_i, np.inf)
        region = rng.integers(0, 3, shape)
        below = lo - rng.uniform(0.1, 0.6, shape)
        above = hi + rng.uniform(0.1, 0.6, shape)
        inner_lo = np.where(np.isfinite(lo), lo + 0.1, np.minimum(hi, 1.0) - 2.0)
        inner_hi = np.where(np.isfinite(hi), hi - 0.1, np.maximum(lo, -1.0) + 2.0)
        inside = inner_lo + (inner_hi - inner_lo) * rng.uniform(0, 1, shape)
        x = np.where(region == 0, below, np.where(region == 1, inside, above))
        return np.where(np.isfinite(x), x, inside)
    return make


# --- the check ---------------------------------------------------------------------------
def _seed(name):
    return zlib.crc32(name.encode())


def draw(c):
    """The row's input arrays and the numpy generator (continues with the loss weights)."""
    rng = np.random.default_rng(_seed(c.name))
    arrays = []
    for a in c.args:
        arrays.append(np.asarray(a.gen(rng, arrays), dtype=np.float64).astype(a.dtype))
    return arrays, rng


def as_tensor(v, dtype, device=None):
    """An Ember tensor holding numpy ``v`` (on ``device``, or the plain CPU device).

    ``ember.tensor`` of a 0-d array currently returns shape (1,) (a creation bug, tested in
    test_gradients.py::test_0d_leaf_gradient_is_0d); reshape so that the 0-d rows still check
    broadcasting a 0-d tensor.
    """
    t = ember.tensor(v, dtype=dtype, device=device)
    if t.shape != v.shape:
        t = t.reshape(v.shape)
    return t


@contextlib.contextmanager
def on(device):
    """Tensors a row makes while it runs (index and mask constants) go to ``device``'s base."""
    from ember.device import default_device
    previous = default_device()
    ember.set_default_device(device.base())
    try:
        yield
    finally:
        ember.set_default_device(previous)


def _outputs(out):
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    for o in outs:
        assert isinstance(o, ember.Tensor), f"the case returned {type(o).__name__}, not a tensor"
    return outs


def _weights(outs, rng):
    return [np.asarray(rng.uniform(0.5, 1.5, o.shape) * rng.choice([-1.0, 1.0], o.shape),
                       dtype=np.float64) for o in outs]


def _np_loss(outs, weights):
    return sum(float((np.asarray(o.numpy(), dtype=np.float64) * w).sum())
               for o, w in zip(outs, weights))


def numeric_grads(c, arrays, weights):
    """Central differences of ``sum((fn(*inputs) * W))`` wrt every LEAF input, without autodiff."""
    def loss(values):
        ts = [as_tensor(v, DTYPES[a.dtype]) for v, a in zip(values, c.args)]
        return _np_loss(_outputs(c.fn(*ts)), weights)

    grads = []
    for i, a in enumerate(c.args):
        if a.mode != LEAF:
            grads.append(None)
            continue
        g = np.zeros(arrays[i].shape, dtype=np.float64)
        for idx in np.ndindex(arrays[i].shape):
            vals = [x.copy() for x in arrays]
            vals[i][idx] = arrays[i][idx] + c.eps
            up_x = float(vals[i][idx])
            up = loss(vals)
            vals[i][idx] = arrays[i][idx] - c.eps
            down_x = float(vals[i][idx])
            down = loss(vals)
            g[idx] = (up - down) / (up_x - down_x)   # exact step after rounding to the dtype
        grads.append(g)
    return grads


def build_inputs(c, arrays, device):
    ts = []
    for a, v in zip(c.args, arrays):
        dtype = DTYPES[a.dtype]
        if a.mode == PLAIN:
            t = as_tensor(v, dtype, device.base())
            assert not t.is_autodiff()
        else:
            t = as_tensor(v, dtype, device)
            assert t.is_autodiff() and not t.is_tracked()
            if a.mode == LEAF:
                t = t.require_grad()
        ts.append(t)
    return ts


def analytic_grads(c, arrays, weights, device):
    """Run the row on ``device`` and backward; returns (inputs, Gradients, forward outputs)."""
    ts = build_inputs(c, arrays, device)
    with on(device):
        outs = _outputs(c.fn(*ts))
    assert len(outs) == len(weights)
    loss = None
    for o, w in zip(outs, weights):
        term = (o * as_tensor(w, ember.float64, device.base())).sum()
        loss = term if loss is None else loss + term
    assert loss.is_tracked(), f"{c.name}: the loss is not tracked"
    assert loss.shape == ()
    grads = loss.backward()
    return ts, grads, outs


def check_case(c, device):
    arrays, rng = draw(c)
    # weights need the outputs' shapes: one forward without autodiff gives them
    probe = _outputs(c.fn(*[as_tensor(v, DTYPES[a.dtype]) for v, a in zip(arrays, c.args)]))
    weights = _weights(probe, rng)
    ts, grads, outs = analytic_grads(c, arrays, weights, device)
    # the autodiff forward computes the same values (on another device: to rounding)
    rtol = 1e-12 if device.type == "cpu" else (1e-5 if any(a.dtype == "float32" for a in c.args)
                                               else 1e-10)
    for o, p in zip(outs, probe):
        np.testing.assert_allclose(o.numpy(), p.numpy(), rtol=rtol, atol=0 if rtol == 1e-12 else rtol,
                                   err_msg=f"{c.name}: autodiff forward differs from the plain one")
    expected = numeric_grads(c, arrays, weights)
    for i, (a, t, want) in enumerate(zip(c.args, ts, expected)):
        got = t.grad(grads)
        if a.mode != LEAF:
            assert got is None, f"{c.name}: input {i} ({a.mode}) must not get a gradient"
            continue
        assert got is not None, f"{c.name}: marked leaf {i} got no gradient"
        assert not got.is_autodiff(), f"{c.name}: gradient {i} must be a tensor without autodiff"
        assert got.shape == t.shape, f"{c.name}: gradient {i} has shape {got.shape}, leaf {t.shape}"
        assert got.dtype == t.dtype, f"{c.name}: gradient {i} has dtype {got.dtype}, leaf {t.dtype}"
        np.testing.assert_allclose(
            np.asarray(got.numpy(), dtype=np.float64), want, rtol=c.rtol, atol=c.atol,
            err_msg=f"{c.name}: gradient of input {i} (analytic) vs central differences")


def gradients(c, device):
    """The row's analytic gradients on ``device`` as numpy arrays (None for non-leaf inputs)."""
    arrays, rng = draw(c)
    probe = _outputs(c.fn(*[as_tensor(v, DTYPES[a.dtype]) for v, a in zip(arrays, c.args)]))
    ts, grads, _ = analytic_grads(c, arrays, _weights(probe, rng), device)
    out = []
    for t in ts:
        g = t.grad(grads)
        out.append(None if g is None else g.numpy().copy())
    return out
