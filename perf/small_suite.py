"""The ``small`` suite: small workloads in long Python loops, where framework overhead is the cost
(issue 19).

Three workloads, each as a new user of every library would write it:

- **MLP step**: a 2-64-64-2 tanh network, a batch of 128, cross entropy, forward + backward +
  Adam (the quickstart's step).  Each call takes the next of the 16 batches of the 2048 points,
  whose labels have 20% noise: the loss stays away from zero however long a run trains, so a
  step's cost does not drift.  (Trained on one batch of clean labels, the loss fell below 1e-9
  within ~10^4 steps; the softmax's probabilities then underflow into float32 subnormals, and
  every library's step slowed by up to 3x as a run went on, the fastest, which run most
  steps, the most.);
- **MLP inference**: the same network's logits and argmax on 2048 points;
- **RK4**: 100 classical Runge-Kutta steps of a damped oscillator (3 trajectories, float64), the
  MSE against observations, and its gradient with respect to 2 scalars (``examples/fit_ode.py``).

Each workload gives two rows: Ember compiled (``ember.compile``) against numpy, PyTorch eager,
``torch.compile`` and ``jax.jit``, and Ember eager against numpy and PyTorch eager.  numpy
writes its backward by hand (MLP) or takes finite differences (RK4: 3 solves).  PyTorch
compiles only the MLP step (``torch.compile`` of the loss, when its inductor backend works
here).  Then the first calls, each in a new process: Ember's compiled step with an empty kernel
cache and with a warm one, against ``jax.jit``'s first call (trace + XLA compile); beside the
warm ones the floor under any Numba program's first call (``numba``: ``import numba`` and one
kernel loaded from Numba's disk cache, ``perf/numba_floor.py``).  ``--quick``
(CI's smoke test) leaves out ``torch.compile`` and the new processes.

``python -m perf.small_suite first-call <lib> <workload>`` is that new process: it prints the
seconds of the first call.
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HIDDEN, BATCH, POINTS, LR = 64, 128, 2048, 0.01
NOISE = 0.2   # the share of flipped labels
RK4_STEPS, DT = 100, 0.05
ZETA0, OMEGA0 = 0.4, 1.6
INITIAL_STATES = [(1.0, 0.0), (0.0, 2.0), (-0.5, 1.0)]

MLP_STEP = "MLP 2-64-64-2 tanh b128: fwd+bwd+Adam step"
MLP_INFER = "MLP 2-64-64-2 inference, 2048 points + argmax"
RK4 = "RK4 x 100 damped oscillator f64: MSE + gradient"
WORKLOADS = {"mlp_step": MLP_STEP, "mlp_infer": MLP_INFER, "rk4": RK4}
COLD, WARM = "first call, new process, cold kernel cache", "first call, new process, warm kernel cache"


def row_names():
    names = []
    for w in WORKLOADS.values():
        names += [f"{w}: compiled", f"{w}: eager"]
    for w in (MLP_STEP, RK4):
        names += [f"{w}: {COLD}", f"{w}: {WARM}"]
    return names


# --- data ------------------------------------------------------------------------------------
def mlp_data():
    rng = np.random.default_rng(0)
    params = []
    for n_out, n_in in ((HIDDEN, 2), (HIDDEN, HIDDEN), (2, HIDDEN)):
        bound = 1 / np.sqrt(n_in)
        params += [rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32),
                   rng.uniform(-bound, bound, n_out).astype(np.float32)]
    x = rng.standard_normal((POINTS, 2)).astype(np.float32)
    y = (x[:, 0] * x[:, 1] > 0).astype(np.int64)
    y = np.where(rng.random(POINTS) < NOISE, 1 - y, y)
    return params, x, y


def batches(x, y):
    """The MLP step's batches, in the order the calls take them (cycling)."""
    return [(x[i:i + BATCH], y[i:i + BATCH]) for i in range(0, POINTS, BATCH)]


def cycle(items):
    """A function returning ``items`` one after another, from the first, round and round."""
    state = [-1]

    def next_item():
        state[0] = (state[0] + 1) % len(items)
        return items[state[0]]
    return next_item


def rk4_data():
    t = np.arange(RK4_STEPS + 1) * DT
    zeta, omega = 0.12, 2.3
    wd = omega * math.sqrt(1 - zeta * zeta)
    cols = []
    for x0, v0 in INITIAL_STATES:
        b = (v0 + zeta * omega * x0) / wd
        cols.append(np.exp(-zeta * omega * t) * (x0 * np.cos(wd * t) + b * np.sin(wd * t)))
    observed = np.stack(cols, 1) + 0.03 * np.random.default_rng(0).standard_normal((len(t), 3))
    return np.array(INITIAL_STATES), observed, np.log([ZETA0, OMEGA0])


def rk4_positions(s0, a_t, stack, steps=RK4_STEPS, dt=DT):
    """The positions of every trajectory at each of the ``steps + 1`` times, for any library
    whose arrays have ``@``, ``+``, ``*`` and ``[:, 0]`` (all four do): ``s' = s @ a_t``."""
    s, xs = s0, [s0[:, 0]]
    for _ in range(steps):
        k1 = s @ a_t
        k2 = (s + k1 * (dt / 2)) @ a_t
        k3 = (s + k2 * (dt / 2)) @ a_t
        k4 = (s + k3 * dt) @ a_t
        s = s + (k1 + 2 * k2 + 2 * k3 + k4) * (dt / 6)
        xs.append(s[:, 0])
    return stack(xs)


# --- numpy -----------------------------------------------------------------------------------
def numpy_mlp_grads(params, x, y):
    w1, b1, w2, b2, w3, b3 = params
    h1 = np.tanh(x @ w1.T + b1)
    h2 = np.tanh(h1 @ w2.T + b2)
    z = h2 @ w3.T + b3
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    rows = np.arange(len(x))
    loss = -np.log(p[rows, y]).mean()
    dz = p
    dz[rows, y] -= 1
    dz /= len(x)
    dh2 = (dz @ w3) * (1 - h2 * h2)
    dh1 = (dh2 @ w2) * (1 - h1 * h1)
    return loss, [dh1.T @ x, dh1.sum(0), dh2.T @ h1, dh2.sum(0), dz.T @ h2, dz.sum(0)]


class NumpyAdam:
    def __init__(self, params, lr=LR, betas=(0.9, 0.999), eps=1e-8):
        self.params = [p.copy() for p in params]
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.lr, self.betas, self.eps, self.t = lr, betas, eps, 0

    def step(self, grads):
        b1, b2 = self.betas
        self.t += 1
        c1, c2 = 1 - b1 ** self.t, 1 - b2 ** self.t
        for p, g, m, v in zip(self.params, grads, self.m, self.v):
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            p -= (self.lr / c1) * m / (np.sqrt(v / c2) + self.eps)


def numpy_predict(params, x):
    w1, b1, w2, b2, w3, b3 = params
    h = np.tanh(x @ w1.T + b1)
    h = np.tanh(h @ w2.T + b2)
    return (h @ w3.T + b3).argmax(1)


def numpy_rk4(theta, s0, observed):
    zeta, omega = np.exp(theta)
    a_t = np.array([[0.0, -omega * omega], [1.0, -2 * zeta * omega]])
    return np.mean((rk4_positions(s0, a_t, np.stack) - observed) ** 2)


def numpy_rk4_grad(theta, s0, observed, h=1e-6):
    """Forward differences: 3 solves."""
    base = numpy_rk4(theta, s0, observed)
    return base, np.array([(numpy_rk4(theta + h * e, s0, observed) - base) / h for e in np.eye(2)])


def numpy_rk4_reference(theta, s0, observed, h=1e-5):
    """Central differences, for checking the others."""
    return np.array([(numpy_rk4(theta + h * e, s0, observed) - numpy_rk4(theta - h * e, s0, observed))
                     / (2 * h) for e in np.eye(2)])


# --- Ember -----------------------------------------------------------------------------------
def ember_mlp_forward(params, x):
    import ember.nn.functional as F
    w1, b1, w2, b2, w3, b3 = params
    h = F.linear(x, w1, b1).tanh()
    h = F.linear(h, w2, b2).tanh()
    return F.linear(h, w3, b3)


def ember_mlp_step(compiled, device=None):
    """(step, loss of the first call's parameters) for Ember; ``step()`` runs one step."""
    import ember
    import ember.nn.functional as F
    device = (device or ember.Device.cpu()).autodiff()
    params, x, y = mlp_data()
    opt = ember.optim.Adam([ember.tensor(p, device=device).require_grad() for p in params], lr=LR)
    data = cycle([(ember.tensor(xb, device=device), ember.tensor(yb, device=device.base()))
                  for xb, yb in batches(x, y)])

    def step(x, y):
        loss = F.cross_entropy(ember_mlp_forward(opt.params, x), y)
        opt.step(loss.backward())
        return loss

    fn = ember.compile(step) if compiled else step
    return lambda: ember.fusion.force(fn(*data()))


def ember_mlp_infer(compiled, device=None):
    import ember
    device = device or ember.Device.cpu()
    params, x, _ = mlp_data()
    ps = [ember.tensor(p, device=device) for p in params]
    xt = ember.tensor(x, device=device)

    def infer(x):
        return ember_mlp_forward(ps, x).argmax(dim=1)

    fn = ember.compile(infer) if compiled else infer
    return lambda: ember.fusion.force(fn(xt))


def ember_rk4(lz, lw, s0, observed):
    import ember
    import ember.nn.functional as F
    zeta, omega = lz.exp(), lw.exp()
    zero = ember.zeros(1, dtype=ember.float64, device=s0.device)
    one = ember.ones(1, dtype=ember.float64, device=s0.device)
    a_t = ember.stack([ember.cat([zero, -(omega * omega)]), ember.cat([one, -2 * zeta * omega])])
    return F.mse_loss(rk4_positions(s0, a_t, ember.stack), observed)


def ember_rk4_grad(compiled, device=None):
    import ember
    device = (device or ember.Device.cpu()).autodiff()
    s0_np, observed_np, theta = rk4_data()
    s0 = ember.tensor(s0_np, dtype=ember.float64, device=device.base())
    observed = ember.tensor(observed_np, dtype=ember.float64, device=device.base())
    lz, lw = (ember.tensor([v], dtype=ember.float64, device=device).require_grad() for v in theta)

    def loss_and_grad(lz, lw):
        loss = ember_rk4(lz, lw, s0, observed)
        grads = loss.backward()
        return loss, ember.cat([lz.grad(grads), lw.grad(grads)])

    fn = ember.compile(loss_and_grad) if compiled else loss_and_grad
    return lambda: ember.fusion.force(*fn(lz, lw))


EMBER = {"mlp_step": ember_mlp_step, "mlp_infer": ember_mlp_infer, "rk4": ember_rk4_grad}


# --- PyTorch ---------------------------------------------------------------------------------
def torch_mlp(torch, compiled=False):
    params, x, y = mlp_data()
    ps = [torch.from_numpy(p).requires_grad_(True) for p in params]
    opt = torch.optim.Adam(ps, lr=LR)
    data = cycle([(torch.from_numpy(xb), torch.from_numpy(yb)) for xb, yb in batches(x, y)])

    def loss_fn(x, y):
        w1, b1, w2, b2, w3, b3 = ps
        h = torch.tanh(x @ w1.T + b1)
        h = torch.tanh(h @ w2.T + b2)
        return torch.nn.functional.cross_entropy(h @ w3.T + b3, y)

    f = torch.compile(loss_fn) if compiled else loss_fn

    def step():
        opt.zero_grad()
        loss = f(*data())
        loss.backward()
        opt.step()
        return loss

    return step


def torch_infer(torch):
    params, x, _ = mlp_data()
    w1, b1, w2, b2, w3, b3 = (torch.from_numpy(p) for p in params)
    xt = torch.from_numpy(x)

    def infer():
        with torch.no_grad():
            h = torch.tanh(xt @ w1.T + b1)
            h = torch.tanh(h @ w2.T + b2)
            return (h @ w3.T + b3).argmax(1)

    return infer


def torch_rk4(torch):
    s0_np, observed_np, theta = rk4_data()
    s0, observed = torch.from_numpy(s0_np), torch.from_numpy(observed_np)
    th = torch.tensor(theta, requires_grad=True)

    def loss_and_grad():
        zeta, omega = th.exp()
        a_t = torch.stack([torch.stack([torch.zeros((), dtype=torch.float64), -omega * omega]),
                           torch.stack([torch.ones((), dtype=torch.float64), -2 * zeta * omega])])
        loss = torch.mean((rk4_positions(s0, a_t, torch.stack) - observed) ** 2)
        return loss, torch.autograd.grad(loss, th)[0]

    return loss_and_grad


def torch_compile_works(torch):
    """Whether torch.compile's default (inductor) backend compiles here (it needs a C compiler)."""
    try:
        f = torch.compile(lambda a: (a * 2).sum())
        f(torch.ones(3))
        return True
    except Exception:
        return False


# --- JAX -------------------------------------------------------------------------------------
def optional_jax():
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)   # the RK4 workload is float64 (MLP: float32 arrays)
    jax.config.update("jax_platforms", "cpu")
    return jax


def jax_mlp_step(jax):
    jnp = jax.numpy
    params, x, y = mlp_data()
    data = cycle([(jnp.asarray(xb), jnp.asarray(yb)) for xb, yb in batches(x, y)])

    def loss_fn(ps, x, y):
        w1, b1, w2, b2, w3, b3 = ps
        h = jnp.tanh(x @ w1.T + b1)
        h = jnp.tanh(h @ w2.T + b2)
        logp = jax.nn.log_softmax(h @ w3.T + b3)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], 1))

    @jax.jit
    def step(ps, m, v, t, x, y):
        loss, gs = jax.value_and_grad(loss_fn)(ps, x, y)
        t = t + 1
        c1, c2 = 1 - 0.9 ** t, 1 - 0.999 ** t
        m = [0.9 * mi + 0.1 * g for mi, g in zip(m, gs)]
        v = [0.999 * vi + 0.001 * g * g for vi, g in zip(v, gs)]
        ps = [p - (LR / c1) * mi / (jnp.sqrt(vi / c2) + 1e-8) for p, mi, vi in zip(ps, m, v)]
        return ps, m, v, t, loss

    state = [[jnp.asarray(p) for p in params], [jnp.zeros_like(p) for p in params],
             [jnp.zeros_like(p) for p in params], jnp.asarray(0.0, dtype=jnp.float32)]

    def run():
        *state[:], loss = step(*state, *data())   # params, m, v, t
        return loss.block_until_ready()

    return run


def jax_mlp_infer(jax):
    jnp = jax.numpy
    params, x, _ = mlp_data()
    ps, xt = [jnp.asarray(p) for p in params], jnp.asarray(x)

    @jax.jit
    def infer(ps, x):
        w1, b1, w2, b2, w3, b3 = ps
        h = jnp.tanh(x @ w1.T + b1)
        h = jnp.tanh(h @ w2.T + b2)
        return (h @ w3.T + b3).argmax(1)

    return lambda: infer(ps, xt).block_until_ready()


def jax_rk4(jax):
    jnp = jax.numpy
    s0_np, observed_np, theta = rk4_data()
    s0, observed, th = jnp.asarray(s0_np), jnp.asarray(observed_np), jnp.asarray(theta)

    def loss(th):
        zeta, omega = jnp.exp(th)
        a_t = jnp.stack([jnp.stack([0.0 * omega, -omega * omega]),
                         jnp.stack([1.0 + 0.0 * omega, -2 * zeta * omega])])
        return jnp.mean((rk4_positions(s0, a_t, jnp.stack) - observed) ** 2)

    f = jax.jit(jax.value_and_grad(loss))

    def run():
        value, grad = f(th)
        return grad.block_until_ready()

    return run


JAX = {"mlp_step": jax_mlp_step, "mlp_infer": jax_mlp_infer, "rk4": jax_rk4}


# --- first calls in a new process ------------------------------------------------------------
def first_call(lib, workload):
    """Seconds of the first call of ``workload`` (building it included) in this process."""
    start = time.perf_counter()
    if lib == "ember":
        EMBER[workload](compiled=True)()
    elif lib == "numba":            # the floor: import numba + one cached kernel (any workload)
        from perf import numba_floor
        numba_floor.add_one(1.0)
    else:
        JAX[workload](optional_jax())()
    return time.perf_counter() - start


def first_call_in_new_process(lib, workload, env=None):
    out = subprocess.run([sys.executable, "-m", "perf.small_suite", "first-call", lib, workload],
                         capture_output=True, text=True, env=env or dict(os.environ),
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         timeout=600)
    if out.returncode:
        raise RuntimeError(f"first call of {lib} {workload} failed: {out.stderr.strip()[-300:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- the rows --------------------------------------------------------------------------------
def run_small(s, device):
    from perf.suites import check, computed, error_text, make_row, stats, timed
    from perf.timing import new_process_env

    jax = optional_jax()
    torch = s.torch if device.type == "cpu" else None
    quick = s.max_time is not None
    tc = torch is not None and not quick and torch_compile_works(torch)
    params, x, y = mlp_data()
    s0, observed, theta = rk4_data()
    adam = NumpyAdam(params)
    data = cycle(batches(x, y))

    def numpy_mlp_step():
        loss, grads = numpy_mlp_grads(adam.params, *data())
        adam.step(grads)
        return loss

    peers = {
        "mlp_step": {"numpy": numpy_mlp_step},
        "mlp_infer": {"numpy": lambda: numpy_predict(params, x)},
        "rk4": {"numpy": lambda: numpy_rk4_grad(theta, s0, observed)},
    }
    if torch is not None:
        peers["mlp_step"]["torch"] = torch_mlp(torch)
        peers["mlp_infer"]["torch"] = torch_infer(torch)
        peers["rk4"]["torch"] = torch_rk4(torch)
        if tc:
            peers["mlp_step"]["torch_compile"] = torch_mlp(torch, compiled=True)
    if jax is not None and device.type == "cpu":
        for w, make in JAX.items():
            peers[w]["jax"] = make(jax)
    references = {
        "mlp_step": lambda: numpy_mlp_grads(params, x[:BATCH], y[:BATCH])[0],
        "mlp_infer": lambda: numpy_predict(params, x),
        "rk4": lambda: numpy_rk4_reference(theta, s0, observed),
    }
    rows = []
    for w, name in WORKLOADS.items():
        for compiled in (True, False):
            row = make_row("small", f"{name}: {'compiled' if compiled else 'eager'}")
            fns = {}
            try:
                start = time.perf_counter()
                fn = EMBER[w](compiled, device)
                got = fn()          # the loss (MLP step), the classes, (loss, gradient) (RK4)
                row["first_call_s"] = time.perf_counter() - start
                got = got[-1] if w == "rk4" else got
                check(row, (computed(got).numpy(), references[w]()))
                fns["ember"] = fn
            except Exception as e:
                row.update(status="error", error=error_text(e))
            others = peers[w] if compiled else {k: f for k, f in peers[w].items()
                                                if k in ("numpy", "torch")}
            fns.update(others)
            row["results"] = {lib: stats(r) for lib, r in timed(fns, s, device=device).items()}
            rows.append(row)
    for w in ("mlp_step", "rk4"):
        name = WORKLOADS[w]
        for label in (COLD, WARM):
            rows.append(make_row("small", f"{name}: {label}"))
        if quick or device.type != "cpu":
            for r in rows[-2:]:
                r.update(status="unavailable",
                         error="new-process first calls: not with --quick (they compile every "
                               "kernel again)" if quick else "new-process first calls: CPU only")
            continue
        try:
            with tempfile.TemporaryDirectory() as cache:
                env = new_process_env({"EMBER_CACHE_DIR": cache, "NUMBA_CACHE_DIR": cache})
                subprocess.run([sys.executable, "-c", "import ember, numba"], env=env, check=True)
                cold = first_call_in_new_process("ember", w, env)
                warm = [first_call_in_new_process("ember", w, env) for _ in range(3)]
                first_call_in_new_process("numba", w, env)     # fills Numba's cache
                floor = [first_call_in_new_process("numba", w, env) for _ in range(3)]
            rows[-2]["results"]["ember"] = stats([cold])
            rows[-1]["results"]["ember"] = stats(warm)
            rows[-1]["results"]["numba"] = stats(floor)
            if jax is not None:
                rows[-2]["results"]["jax"] = stats([first_call_in_new_process("jax", w)])
        except Exception as e:
            for r in rows[-2:]:
                r.update(status="error", error=error_text(e))
    return rows


def main(argv):
    if len(argv) == 3 and argv[0] == "first-call":
        print(json.dumps(first_call(argv[1], argv[2])))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
