"""Gaussian-process regression: fit the kernel's hyperparameters on the exact marginal likelihood.

    python examples/gaussian_process.py [--quick] [--eager]

Noisy samples of a smooth function are modelled as a GP with a squared-exponential kernel,
``k(x, x') = sf^2 exp(-(x - x')^2 / (2 ls^2))``, plus noise ``sn^2`` on the diagonal.  The three
hyperparameters (as logs, so they stay positive) minimise the exact negative log marginal
likelihood

    NLL = 1/2 y^T K^-1 y + 1/2 log det K + n/2 log(2 pi),

computed with a Cholesky factor ``K = L L^T``: ``alpha = L^-1 y`` (a triangular solve), so
``y^T K^-1 y = |alpha|^2`` and ``log det K = 2 sum log diag(L)``.  Ember differentiates it
(through ``cholesky`` and ``solve_triangular``) and ``ember.optim.Adam`` takes the steps; one
step (NLL, backward, Adam) is an ``ember.compile``d function, traced once and replayed (``--eager``
runs it op by op).  The same fit in SciPy (``scipy.optimize.minimize``, L-BFGS-B with finite-difference gradients)
is timed and compared; both then predict the function at new points.
"""
import argparse
import math
import time

import numpy as np

import ember
from ember.optim import Adam

NOISE = 0.15
START = np.log([0.5, 0.5, 0.5])   # log length-scale, log signal std, log noise std


def data(n, seed=0):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-4, 4, n))
    return x, np.sin(1.5 * x) + 0.3 * x + NOISE * rng.standard_normal(n)


def truth(x):
    return np.sin(1.5 * x) + 0.3 * x


def neg_log_marginal_likelihood(theta, x, y):
    """The exact NLL as one function of the parameters (Ember tensors: theta (3,), x, y (n,))."""
    ls, sf, sn = theta[0].exp(), theta[1].exp(), theta[2].exp()
    n = x.shape[0]
    d = x.unsqueeze(-1) - x.unsqueeze(-2)
    eye = ember.eye(n, dtype=x.dtype, device=x.device)
    k = (d * d / (ls * ls) * -0.5).exp() * (sf * sf) + eye * (sn * sn)
    chol = ember.linalg.cholesky(k)
    alpha = ember.linalg.solve_triangular(chol, y.unsqueeze(-1), upper=False)
    log_det = ember.linalg.diagonal(chol).log().sum() * 2
    return (alpha * alpha).sum() * 0.5 + log_det * 0.5 + 0.5 * n * math.log(2 * math.pi)


def fit_ember(x, y, steps, lr=0.05, compiled=True):
    """Adam on the NLL; returns the fitted log-parameters, the final NLL and the median seconds
    per step after the first (the first traces the compiled step)."""
    xt, yt = ember.tensor(x, dtype=ember.float64), ember.tensor(y, dtype=ember.float64)
    theta = ember.tensor(START, dtype=ember.float64).autodiff().require_grad()
    opt = Adam([theta], lr=lr)

    def step(x, y):
        loss = neg_log_marginal_likelihood(opt.params[0], x, y)
        opt.step(loss.backward())
        return loss

    run = ember.compile(step) if compiled else step
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        run(xt, yt)
        times.append(time.perf_counter() - start)
    theta = opt.params[0]
    final = neg_log_marginal_likelihood(theta.without_autodiff(), xt, yt).item()
    per_step = sorted(times[1:])[len(times[1:]) // 2] if steps > 1 else times[0]
    return theta.numpy().copy(), final, per_step


def nll_numpy(theta, x, y):
    """The same NLL in numpy/SciPy (what the SciPy fit minimises)."""
    from scipy.linalg import cho_factor, cho_solve
    ls, sf, sn = np.exp(theta)
    k = sf * sf * np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / (ls * ls)) + sn * sn * np.eye(len(x))
    try:
        c, low = cho_factor(k, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return 1e10
    alpha = cho_solve((c, low), y, check_finite=False)
    return 0.5 * y @ alpha + np.log(np.diag(c)).sum() + 0.5 * len(x) * math.log(2 * math.pi)


def fit_scipy(x, y):
    from scipy.optimize import minimize
    res = minimize(nll_numpy, START, args=(x, y), method="L-BFGS-B")   # finite-difference jac
    return res.x, res.fun, res.nfev


def predict(theta, x, y, x_new):
    """The GP posterior mean at ``x_new`` (numpy: the fitted values, once)."""
    ls, sf, sn = np.exp(theta)
    def kern(a, b):
        return sf * sf * np.exp(-0.5 * (a[:, None] - b[None, :]) ** 2 / (ls * ls))
    k = kern(x, x) + sn * sn * np.eye(len(x))
    return kern(x_new, x) @ np.linalg.solve(k, y)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer points and steps (a smoke test)")
    parser.add_argument("--eager", action="store_true", help="run each step op by op, not compiled")
    args = parser.parse_args()
    compiled = not args.eager
    n, steps = (60, 150) if args.quick else (200, 250)
    x, y = data(n)
    print(f"GP regression on {n} noisy points of sin(1.5 x) + 0.3 x (noise std {NOISE})")

    start = time.perf_counter()
    fit_ember(x[:8], y[:8], 2, compiled=compiled)   # compile the kernels once (not timed)
    warm = time.perf_counter() - start
    start = time.perf_counter()
    theta_e, nll_e, per_step = fit_ember(x, y, steps, compiled=compiled)
    t_ember = time.perf_counter() - start
    import scipy.optimize  # noqa: F401  (its import is not part of the fit's time)
    nll_numpy(START, x[:8], y[:8])
    start = time.perf_counter()
    theta_s, nll_s, nfev = fit_scipy(x, y)
    t_scipy = time.perf_counter() - start

    def show(theta):
        ls, sf, sn = np.exp(theta)
        return f"length-scale {ls:.3f}, signal std {sf:.3f}, noise std {sn:.3f}"

    x_new = np.linspace(-4, 4, 200)
    rmse = {name: float(np.sqrt(np.mean((predict(th, x, y, x_new) - truth(x_new)) ** 2)))
            for name, th in (("ember", theta_e), ("scipy", theta_s))}
    print(f"ember (Adam, {steps} steps, autodiff through cholesky + solve_triangular): "
          f"NLL {nll_e:.4f}, {show(theta_e)}, {t_ember:.2f} s (first compile {warm:.1f} s)")
    print(f"  {'compiled' if compiled else 'eager'} step: median {per_step * 1e3:.2f} ms")
    print(f"scipy (L-BFGS-B, finite-difference gradients, {nfev} NLL evaluations): "
          f"NLL {nll_s:.4f}, {show(theta_s)}, {t_scipy:.2f} s")
    print(f"NLL difference {nll_e - nll_s:+.2e} (ember - scipy); max |log theta difference| "
          f"{np.abs(theta_e - theta_s).max():.3f}")
    print(f"posterior mean RMSE against the true function: ember {rmse['ember']:.4f}, "
          f"scipy {rmse['scipy']:.4f}")
    ok = nll_e - nll_s < 1e-2 * max(1.0, abs(nll_s))
    print("fits agree" if ok else "fits DIFFER")


if __name__ == "__main__":
    main()
