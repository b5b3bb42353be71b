"""Optimizers: SGD, Adam and AdamW with PyTorch's update rules.

An optimizer holds a list of parameters (marked float leaves) and one state per
parameter position.  ``params = opt.step(grads)`` reads each parameter's
gradient from ``grads`` (the ``Gradients`` of one ``backward()``) and returns
the updated parameters as new marked leaves, in the same order; ``opt.params``
always holds the latest.  Tensors are values, so the old parameters keep their
values: a graph that still reads them stays valid.  A parameter without a
gradient in ``grads`` is returned as it is, and its state does not advance.

Updates are tensor ops on the parameter's device (state tensors live there too: a CUDA
model's parameters and optimizer state never leave the GPU).  They are elementwise, so the
fusing layer runs a parameter's whole update as one kernel that reads parameter, gradient
and state once and writes the new ones; the order of operations is torch.optim's
single-tensor implementation's, in the parameter's dtype.  The state is tensors from the
start (zeros, and a step count as a 0-d float64 tensor): a step is the same ops whatever the
step number, so ``ember.compile`` replays it and the state advances as in eager (PyTorch's
``capturable`` optimizers do the same for CUDA graphs).

>>> w = ember.tensor([1.0, -2.0]).autodiff().require_grad()
>>> opt = ember.optim.SGD([w], lr=0.1)
>>> (w,) = opt.step((w * w).sum().backward())
>>> w
tensor([ 0.8, -1.6], dtype=float32)
"""

from . import backends
from . import dtypes as dt
from .compile import register_optimizer, trace
from .creation import zeros, zeros_like
from .tensor import Tensor, wrap

# eager steps of one kind (the same parameters with gradients, gradient dtypes and
# hyperparameters) after which ``step`` traces its updates once and replays them
HOT_STEPS = 3
MAX_PROGRAMS = 8   # kinds of step whose replays an optimizer keeps

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]


class Optimizer:
    """The shared part: parameters, per-position state, the ``step`` contract."""

    def __init__(self, params):
        name = type(self).__name__
        if isinstance(params, Tensor):
            raise TypeError(f"{name}: params must be a list of tensors, got a single tensor; "
                            f"use {name}([w], ...)")
        params = list(params)
        if not params:
            raise ValueError(f"{name}: got an empty parameter list")
        seen = set()
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"{name}: parameter {i} must be a tensor, got {type(p).__name__}")
            if p.kind is not dt.Float or p.is_quantized:
                raise TypeError(f"{name}: parameter {i} must be a Float tensor, got {p.dtype.name}")
            if not p.is_require_grad():
                raise ValueError(f"{name}: parameter {i} (shape {p.shape}) is not a marked leaf; "
                                 "call .autodiff().require_grad() on it first")
            if id(p._node) in seen:
                raise ValueError(f"{name}: parameter {i} appears more than once")
            seen.add(id(p._node))
        self._params = params
        self._state = [self._init_state(p.inner()) for p in params]
        self._programs = {}   # kind of step -> the replay of its updates (``_replayed``)
        self._cold = {}       # kind of step -> steps of it so far, until it is replayed
        # one step count for the parameters of a device: they step together (until one has
        # no gradient), so what is computed from the count is computed once per step
        counts = {}
        for state, p in zip(self._state, params):
            state["step"] = counts.setdefault(p.device.base(), state["step"])
        register_optimizer(self)   # its parameters and state are a compiled step's inputs too

    def _init_state(self, p):
        """The state of parameter ``p`` before its first step: tensors on its device."""
        return {"step": zeros((), dtype=dt.float64, device=p.device)}

    def _hyperparameters(self):
        """What a compiled step bakes in: it traces again when these change."""
        raise NotImplementedError

    @property
    def params(self):
        """The latest parameters (a new list; the tensors are the ones ``step`` returned)."""
        return list(self._params)

    _STATE_KEYS = ()   # what ``state`` shows besides "step" (PyTorch's names)

    def state(self, i):
        """Parameter ``i``'s state, e.g. ``{"step": 3, "exp_avg": ..., ...}``: tensors without
        autodiff on the parameter's device (copies); ``{}`` before its first step."""
        state = self._state[i]
        steps = int(state["step"].item())
        if not steps:
            return {}
        out = {"step": steps} if self._SHOWS_STEP else {}
        out.update((key, state[key].clone()) for key in self._STATE_KEYS if key in state)
        return out

    _SHOWS_STEP = True

    def step(self, grads):
        """Update every parameter that has a gradient in ``grads``; returns the new parameters."""
        from ember.autograd.graph import Gradients, leaf
        if not isinstance(grads, Gradients):
            raise TypeError(f"{type(self).__name__}.step: expected the Gradients of a backward(), "
                            f"got {type(grads).__name__}")
        picked = []   # (position, parameter, gradient) of the parameters that step
        for i, p in enumerate(self._params):
            g = p.grad(grads)
            if g is None:
                continue
            if g.shape != p.shape:
                raise ValueError(f"{type(self).__name__}.step: gradient of shape {g.shape} does not "
                                 f"match parameter {i} of shape {p.shape}")
            picked.append((i, p, g))
        outs = self._replayed(picked) if backends.recorder() is None else None
        if outs is None:   # op by op (also inside a traced step: its launches are the trace's)
            outs, states = self._updates(
                [(p.inner(), g, self._state[i]) for i, p, g in picked])
            for (i, _, _), state in zip(picked, states):
                self._state[i] = state
        new = list(self._params)
        for (i, p, _), out in zip(picked, outs):
            # a new marked leaf; like detach(), it keeps a distributed mark
            new[i] = wrap(out._buf, p.device, p.dtype, leaf(p.shape, p._node.distributed))
        self._params = new
        return list(new)

    def _updates(self, items):
        """The new parameters and states of ``(parameter, gradient, state)`` items (the states
        are new dicts): every parameter's update, op by op."""
        shared = {}   # what parameters stepping together share (their step count's functions)
        outs, states = [], []
        for p, g, state in items:
            state = dict(state)
            outs.append(self._update(state, p, g.cast(p.dtype), shared))
            states.append(state)
        return outs, states

    def _replayed(self, picked):
        """The new parameters of ``picked`` from a replay of this kind of step's updates (their
        launches traced once by ``ember.compile``'s tracer after ``HOT_STEPS`` steps of the
        kind), the states written back; or None: run them op by op.  A replay launches the
        kernels the ops would (the same results) without their Python: an Adam step over the
        six tensors of a small MLP took ~370 us op by op."""
        states = [self._state[i] for i, _, _ in picked]
        if not picked or not all(isinstance(v, Tensor) for st in states for v in st.values()):
            return None
        shared = {}   # which states share a tensor (a device's step count): read once
        kind = (tuple(i for i, _, _ in picked), tuple(g._dtype for _, _, g in picked),
                tuple(tuple(st) for st in states),
                tuple(shared.setdefault(id(v), len(shared)) for st in states for v in st.values()),
                self._hyperparameters())
        params = [p.inner() for _, p, _ in picked]
        grads = [g for _, _, g in picked]
        # the arguments' tensors in the order of ``trace``'s flattening of (params, grads, states)
        leaves = params + grads + [v for st in states for v in st.values()]
        program = self._programs.get(kind)
        if program is None:
            runs = self._cold.get(kind, 0) + 1
            if runs < HOT_STEPS:
                if len(self._cold) >= MAX_PROGRAMS:   # (a schedule of new learning rates)
                    self._cold.clear()
                self._cold[kind] = runs
                return None
            self._cold.pop(kind, None)
            if len(self._programs) >= MAX_PROGRAMS:
                self._programs.clear()
            (outs, new_states), program = trace(self._updates_of, (params, grads, states), {},
                                                leaves, optimizers=False)
            self._programs[kind] = program
        else:
            outs, new_states = program.run(leaves)
        seen = {}   # (one tensor again where the states shared one)
        for (i, _, _), st in zip(picked, new_states):
            self._state[i] = {k: seen.setdefault(id(v._buf), v) for k, v in st.items()}
        return outs

    def _updates_of(self, params, grads, states):
        return self._updates(list(zip(params, grads, states)))

    @staticmethod
    def _advance(state, shared):
        """The step count after this step (one tensor for every parameter of the same count)."""
        step = state["step"]
        key = ("step", id(step))
        t = shared.get(key)
        if t is None:
            t = shared[key] = step + 1
        state["step"] = t
        return step, t

    def __repr__(self):
        return f"{type(self).__name__}({len(self._params)} parameters, lr={self.lr})"


def _check(name, what, value, ok):
    if not ok:
        raise ValueError(f"{name}: invalid {what}: {value!r}")


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum and weight decay (``torch.optim.SGD``).

    With weight decay ``wd``, momentum ``mu`` and dampening ``tau``, for gradient ``g``::

        g = g + wd * p
        b = g (first step), else mu * b + (1 - tau) * g      (only when mu != 0)
        g = g + mu * b (nesterov), else b
        p = p - lr * g
    """

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0, *, dampening=0.0,
                 nesterov=False, maximize=False):
        _check("SGD", "learning rate", lr, lr >= 0)
        _check("SGD", "momentum", momentum, momentum >= 0)
        _check("SGD", "weight_decay", weight_decay, weight_decay >= 0)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening")
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay
        self.dampening, self.nesterov, self.maximize = dampening, nesterov, maximize
        super().__init__(params)   # (after the settings: they choose the state)

    _SHOWS_STEP = False   # torch's SGD keeps no step count
    _STATE_KEYS = ("momentum_buffer",)

    def _init_state(self, p):
        state = super()._init_state(p)
        if self.momentum != 0:
            state["momentum_buffer"] = zeros_like(p)
        return state

    def _hyperparameters(self):
        return (self.lr, self.momentum, self.weight_decay, self.dampening, self.nesterov,
                self.maximize)

    def _update(self, state, p, g, shared):
        step, _ = self._advance(state, shared)
        d = -g if self.maximize else g
        if self.weight_decay != 0:
            d = d + p * self.weight_decay
        if self.momentum != 0:
            buf = state["momentum_buffer"] * self.momentum
            if self.dampening == 0:
                buf = buf + d   # the first step: 0 * momentum + d, torch's clone of d
            else:
                buf = d.mask_where(step != 0, buf + d * (1 - self.dampening))   # first: d, as torch
            state["momentum_buffer"] = buf
            d = d + buf * self.momentum if self.nesterov else buf
        return p - d * self.lr


class Adam(Optimizer):
    """Adam (``torch.optim.Adam``): weight decay is added to the gradient (L2 penalty).

    For step ``t`` and gradient ``g`` (plus ``wd * p`` when ``weight_decay`` is set)::

        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    ``amsgrad=True`` uses the running maximum of ``v`` in the denominator.
    """

    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, *,
                 amsgrad=False, maximize=False):
        name = type(self).__name__
        _check(name, "learning rate", lr, lr >= 0)
        _check(name, "epsilon", eps, eps >= 0)
        _check(name, "betas", betas, len(tuple(betas)) == 2 and all(0 <= b < 1 for b in betas))
        _check(name, "weight_decay", weight_decay, weight_decay >= 0)
        self.lr, self.betas, self.eps, self.weight_decay = lr, tuple(betas), eps, weight_decay
        self.amsgrad, self.maximize = amsgrad, maximize
        super().__init__(params)   # (after the settings: they choose the state)

    _STATE_KEYS = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")

    def _init_state(self, p):
        state = super()._init_state(p)
        state["exp_avg"] = zeros_like(p)
        state["exp_avg_sq"] = zeros_like(p)
        if self.amsgrad:
            state["max_exp_avg_sq"] = zeros_like(p)
        return state

    def _hyperparameters(self):
        return (self.lr, self.betas, self.eps, self.weight_decay, self.amsgrad, self.maximize,
                self._decoupled)

    def _update(self, state, p, g, shared):
        step, t = self._advance(state, shared)
        beta1, beta2 = self.betas
        key = ("adam", id(step), p.dtype)
        scalars = shared.get(key)
        if scalars is None:   # torch's step_size and bias_correction2_sqrt: float64, rounded once
            step_size = (self.lr / (1 - beta1 ** t)).cast(p.dtype)
            bc2_sqrt = (1 - beta2 ** t).sqrt().cast(p.dtype)
            scalars = shared[key] = (step_size, bc2_sqrt)
        step_size, bc2_sqrt = scalars
        d = -g if self.maximize else g
        if self.weight_decay != 0:
            if self._decoupled:
                p = p * (1 - self.lr * self.weight_decay)
            else:
                d = d + p * self.weight_decay
        m = state["exp_avg"]
        w1 = 1 - beta1
        # torch's lerp(m, d, w1), both of its branches
        m = m + (d - m) * w1 if w1 < 0.5 else d - (d - m) * (1 - w1)
        v = state["exp_avg_sq"] * beta2 + d * d * (1 - beta2)
        state["exp_avg"], state["exp_avg_sq"] = m, v
        if self.amsgrad:
            v = state["max_exp_avg_sq"] = state["max_exp_avg_sq"].maximum(v)
        denom = v.sqrt() / bc2_sqrt + self.eps
        return p - m / denom * step_size


class AdamW(Adam):
    """Adam with decoupled weight decay (``torch.optim.AdamW``): ``p = p * (1 - lr * wd)`` first."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, *,
                 amsgrad=False, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad=amsgrad, maximize=maximize)
