"""Parameter estimation for a damped oscillator, by autodiff through an unrolled ODE solver.

    python examples/fit_ode.py [--quick] [--eager]

The oscillator ``x'' + 2 zeta omega x' + omega^2 x = 0`` is observed, with noise, at a few
hundred times from three different initial states.  We recover the damping ratio ``zeta`` and
the natural frequency ``omega``:

1. the model integrates the ODE with the classical Runge-Kutta scheme (RK4), every step written
   in Ember ops on the state ``s = (x, v)`` of all trajectories at once;
2. the loss is the mean squared error between the simulated and observed positions;
3. ``loss.backward()`` differentiates through the whole unrolled solve, and ``ember.optim.Adam``
   updates ``(log zeta, log omega)`` (the logs keep both parameters positive);
4. the whole iteration (solve, loss, backward, Adam: some 10^4 ops) is one ``ember.compile``d
   step, traced once per time window and replayed without its Python (``--eager`` runs it op
   by op, to compare).

The frequency makes the loss non-convex (a wrong guess of omega fits a different number of
oscillations), so the fit starts on the first part of the record and extends the time window as
it converges, a standard curriculum for ODE fitting.
"""
import argparse
import math
import time

import numpy as np

import ember
import ember.nn.functional as F
from ember.optim import Adam

TRUE_ZETA, TRUE_OMEGA = 0.12, 2.3
T_END, DT = 8.0, 0.05                   # RK4 with omega * dt ~ 0.1: far below its stability limit
NOISE = 0.03
INITIAL_STATES = [(1.0, 0.0), (0.0, 2.0), (-0.5, 1.0)]   # (x0, v0) per trajectory
START_ZETA, START_OMEGA = 0.4, 1.6
WINDOWS = [(2.0, 60), (4.0, 30), (T_END, 30)]          # (fitted time span, Adam steps)


def exact_solution(t, x0, v0, zeta, omega):
    """The underdamped solution: the noise-free ground truth."""
    wd = omega * math.sqrt(1 - zeta * zeta)
    a, b = x0, (v0 + zeta * omega * x0) / wd
    return np.exp(-zeta * omega * t) * (a * np.cos(wd * t) + b * np.sin(wd * t))


def simulate(log_zeta, log_omega, s0, steps):
    """Positions of all trajectories at t = 0, DT, ..., steps * DT: shape (steps + 1, batch).

    The ODE as a first-order system: s' = s @ A.T with A = [[0, 1], [-omega^2, -2 zeta omega]].
    """
    zeta, omega = log_zeta.exp(), log_omega.exp()
    zero, one = ember.zeros(1, dtype=ember.float64), ember.ones(1, dtype=ember.float64)
    a_t = ember.stack([ember.cat([zero, -(omega * omega)]),             # A transposed, built from
                       ember.cat([one, -2 * zeta * omega])])            # differentiable scalars

    def f(s):
        return s @ a_t

    s, xs = s0, [s0[:, 0]]
    for _ in range(steps):
        k1 = f(s)
        k2 = f(s + k1 * (DT / 2))
        k3 = f(s + k2 * (DT / 2))
        k4 = f(s + k3 * DT)
        s = s + (k1 + 2 * k2 + 2 * k3 + k4) * (DT / 6)
        xs.append(s[:, 0])
    return ember.stack(xs)


def fit_step(opt, s0, compiled=True):
    """One Adam iteration on the first ``steps`` solver steps against ``target``; returns the
    loss.  ``steps`` is a Python int: static, so each time window traces once."""
    def step(target, steps):
        log_zeta, log_omega = opt.params
        loss = F.mse_loss(simulate(log_zeta, log_omega, s0, steps), target)
        opt.step(loss.backward())
        return loss

    return ember.compile(step) if compiled else step


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few iterations per window")
    parser.add_argument("--eager", action="store_true", help="iterate op by op, not compiled")
    args = parser.parse_args()
    windows = [(span, 5) for span, _ in WINDOWS] if args.quick else WINDOWS
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    steps_total = round(T_END / DT)
    t = np.arange(steps_total + 1) * DT
    clean = np.stack([exact_solution(t, x0, v0, TRUE_ZETA, TRUE_OMEGA) for x0, v0 in INITIAL_STATES], 1)
    observed = ember.tensor(clean + NOISE * rng.standard_normal(clean.shape), dtype=ember.float64)
    s0 = ember.tensor(INITIAL_STATES, dtype=ember.float64)

    device = ember.Device.cpu().autodiff()
    params = [ember.tensor([math.log(v)], dtype=ember.float64, device=device).require_grad()
              for v in (START_ZETA, START_OMEGA)]
    opt = Adam(params, lr=0.05)
    step = fit_step(opt, s0, compiled=not args.eager)
    print(f"true parameters:  zeta = {TRUE_ZETA:.4f}, omega = {TRUE_OMEGA:.4f}")
    print(f"initial guess:    zeta = {START_ZETA:.4f}, omega = {START_OMEGA:.4f}")
    print(f"{len(INITIAL_STATES)} trajectories, {steps_total + 1} noisy samples each (sigma = {NOISE})")
    it = 0
    replays = []   # seconds per iteration after each window's first (its trace)
    for span, iterations in windows:
        steps = round(span / DT)
        target = observed[:steps + 1]
        for k in range(iterations):
            start = time.perf_counter()
            loss = step(target, steps)
            loss_value = loss.item()
            if k:
                replays.append(time.perf_counter() - start)
            params = opt.params
            it += 1
            if it % 15 == 0 or it == 1:
                z, w = (math.exp(p.item()) for p in params)
                print(f"  iter {it:4d}  t <= {span:3.1f}s  loss {loss_value:.3e}  "
                      f"zeta {z:.4f}  omega {w:.4f}")
    zeta, omega = (math.exp(p.item()) for p in params)
    print(f"recovered:        zeta = {zeta:.4f}, omega = {omega:.4f}")
    print(f"relative error:   zeta {abs(zeta - TRUE_ZETA) / TRUE_ZETA:.2%}, "
          f"omega {abs(omega - TRUE_OMEGA) / TRUE_OMEGA:.2%}")
    final = F.mse_loss(simulate(*[p.without_autodiff() for p in params], s0, steps_total), observed)
    print(f"final RMS residual {math.sqrt(final.item()):.4f} (noise level {NOISE}); "
          f"{time.perf_counter() - t0:.1f} s")
    if replays:
        kind = "eager" if args.eager else f"compiled ({step.traces} traces, one per window)"
        print(f"{kind}: median {1e3 * sorted(replays)[len(replays) // 2]:.1f} ms per iteration "
              "after each window's first")


if __name__ == "__main__":
    main()
