"""The ``linalg`` suite: ember.linalg and einsum against numpy, SciPy and PyTorch (issue 21).

Rows: the factorisations and solves of one 512 x 512 float64 matrix (numpy.linalg,
scipy.linalg with ``check_finite=False``, torch.linalg), batches of 10 000 4 x 4 float32
systems (the small-matrix kernels), the value and gradient of a Gaussian-process negative log
marginal likelihood at n = 1000 (autodiff in Ember and PyTorch; SciPy with the gradient written
out: ``0.5 tr((alpha alpha^T - K^-1) dK/dtheta)``), and two einsums (numpy with
``optimize=True``).  Results whose factors are defined up to signs are checked through
sign-free quantities.
"""
from typing import Callable, NamedTuple, Optional

import numpy as np

import ember
from ember.benchmark import Timer


class LinalgOp(NamedTuple):
    name: str
    setup: Callable                      # () -> tuple of numpy arrays
    ember: Callable                      # (*ember tensors) -> result
    numpy: Optional[Callable]            # (*arrays) -> result
    scipy: Optional[Callable]
    torch: Optional[Callable]            # (torch module, *torch tensors) -> result
    check: Callable = lambda r: r        # result (numpy arrays) -> what must agree


def _rng(seed=0):
    return np.random.default_rng(seed)


def general(n=512):
    def setup():
        a = _rng().standard_normal((n, n)) + n ** 0.5 * np.eye(n)
        return a, _rng(1).standard_normal((n, n))
    return setup


def spd(n=512):
    def setup():
        x = _rng().standard_normal((n, n))
        return (x @ x.T + n * np.eye(n),)
    return setup


def small_batch(kind):
    def setup():
        x = _rng().standard_normal((10_000, 4, 4)).astype(np.float32)
        if kind == "spd":
            return ((x @ np.swapaxes(x, -1, -2) + 4 * np.eye(4, dtype=np.float32)).astype(np.float32),)
        return (x + 3 * np.eye(4, dtype=np.float32), _rng(1).standard_normal((10_000, 4, 1)).astype(np.float32))
    return setup


def _sl():
    import scipy.linalg
    return scipy.linalg


LA = ember.linalg

OPS = [
    LinalgOp("cholesky 512 f64", spd(), lambda a: LA.cholesky(a), np.linalg.cholesky,
             lambda a: _sl().cholesky(a, lower=True, check_finite=False),
             lambda t, a: t.linalg.cholesky(a)),
    LinalgOp("solve 512 f64 (512 right-hand sides)", general(), lambda a, b: LA.solve(a, b),
             np.linalg.solve, lambda a, b: _sl().solve(a, b, check_finite=False),
             lambda t, a, b: t.linalg.solve(a, b)),
    LinalgOp("inv 512 f64", lambda: general()()[:1], lambda a: LA.inv(a), np.linalg.inv,
             lambda a: _sl().inv(a, check_finite=False), lambda t, a: t.linalg.inv(a)),
    LinalgOp("svd 512 f64", lambda: general()()[:1], lambda a: LA.svd(a), np.linalg.svd,
             lambda a: _sl().svd(a, check_finite=False), lambda t, a: t.linalg.svd(a),
             check=lambda r: r[1]),
    LinalgOp("eigh 512 f64", spd(), lambda a: LA.eigh(a), np.linalg.eigh,
             lambda a: _sl().eigh(a, check_finite=False), lambda t, a: t.linalg.eigh(a),
             check=lambda r: r[0]),
    LinalgOp("qr 512 f64", lambda: general()()[:1], lambda a: LA.qr(a), np.linalg.qr,
             lambda a: _sl().qr(a, mode="economic", check_finite=False), lambda t, a: t.linalg.qr(a),
             check=lambda r: np.abs(r[1])),
    LinalgOp("batched solve 10000 x 4x4 f32", small_batch("general"), lambda a, b: LA.solve(a, b),
             np.linalg.solve, None, lambda t, a, b: t.linalg.solve(a, b)),
    LinalgOp("batched cholesky 10000 x 4x4 f32", small_batch("spd"), lambda a: LA.cholesky(a),
             np.linalg.cholesky, None, lambda t, a: t.linalg.cholesky(a)),
    LinalgOp("einsum bij,bjk->bik 64 x 128^3 f64",
             lambda: (_rng().standard_normal((64, 128, 128)), _rng(1).standard_normal((64, 128, 128))),
             lambda a, b: ember.einsum("bij,bjk->bik", a, b),
             lambda a, b: np.einsum("bij,bjk->bik", a, b, optimize=True), None,
             lambda t, a, b: t.einsum("bij,bjk->bik", a, b)),
    LinalgOp("einsum ij,jk,kl->il 1000x100,100x1000,1000x10 f64",
             lambda: (_rng().standard_normal((1000, 100)), _rng(1).standard_normal((100, 1000)),
                      _rng(2).standard_normal((1000, 10))),
             lambda a, b, c: ember.einsum("ij,jk,kl->il", a, b, c),
             lambda a, b, c: np.einsum("ij,jk,kl->il", a, b, c, optimize=True), None,
             lambda t, a, b, c: t.einsum("ij,jk,kl->il", a, b, c)),
]

GP = "GP neg. log marginal likelihood n=1000 f64: value + gradient"
NAMES = [op.name for op in OPS] + [GP]


def _as_numpy(r):
    if isinstance(r, (tuple, list)):
        return [_as_numpy(x) for x in r]
    if isinstance(r, ember.Tensor):
        return r.numpy()
    if hasattr(r, "detach"):
        return r.detach().numpy()
    return np.asarray(r)


def run_linalg_op(op, s, device):
    from perf.suites import check, computed, error_text, make_row, stats, timed, to_device
    arrays = op.setup()
    reference = _as_numpy(op.numpy(*arrays)) if op.numpy else None
    fns = {}
    if op.numpy:
        fns["numpy"] = lambda: op.numpy(*arrays)
    if op.scipy:
        fns["scipy"] = lambda: op.scipy(*arrays)
    if s.torch is not None and op.torch is not None and device.type == "cpu":
        targs = tuple(s.torch.from_numpy(a) for a in arrays)
        fns["torch"] = lambda: op.torch(s.torch, *targs)
    row = make_row("linalg", op.name)
    try:
        tensors = tuple(to_device(a, device) for a in arrays)
        row["first_call_s"] = Timer(lambda: computed(op.ember(*tensors)), device=device).run(1)
        if reference is not None:
            check(row, (np.asarray(op.check(_as_numpy(op.ember(*tensors)))), np.asarray(op.check(reference))))
        fns = {"ember": Timer(lambda: computed(op.ember(*tensors)), device=device), **fns}
    except Exception as e:   # report it, time the peers
        row.update(status="error", error=error_text(e))
    row["results"] = {lib: stats(r) for lib, r in timed(fns, s, device=device).items()}
    return [row]


# --- the Gaussian process ------------------------------------------------------------------------
def gp_data(n=1000):
    rng = _rng(3)
    x = np.sort(rng.uniform(-5, 5, n))
    y = np.sin(x) + 0.1 * rng.standard_normal(n)
    return x, y, np.log([1.0, 1.0, 0.1])   # log length-scale, log signal std, log noise std


def gp_nll(lib, theta, x, y, eye):
    """The exact negative log marginal likelihood (Ember or torch, same expression)."""
    ls, sf, sn = theta[0].exp(), theta[1].exp(), theta[2].exp()
    d = x.unsqueeze(-1) - x.unsqueeze(-2)
    k = (d * d / (ls * ls) * -0.5).exp() * (sf * sf) + eye * (sn * sn)
    c = lib.linalg.cholesky(k)
    alpha = lib.linalg.solve_triangular(c, y.unsqueeze(-1), upper=False)
    return (alpha * alpha).sum() * 0.5 + lib.linalg.diagonal(c).log().sum() + 0.5 * x.shape[0] * np.log(2 * np.pi)


def scipy_gp(theta, x, y):
    """Value and gradient with SciPy: Cholesky, cho_solve, and the trace formula."""
    sl = _sl()
    ls, sf, sn = np.exp(theta)
    d2 = (x[:, None] - x[None, :]) ** 2
    kse = sf * sf * np.exp(-0.5 * d2 / (ls * ls))
    k = kse + sn * sn * np.eye(len(x))
    c, low = sl.cho_factor(k, lower=True, check_finite=False)
    alpha = sl.cho_solve((c, low), y, check_finite=False)
    value = 0.5 * y @ alpha + np.log(np.diag(c)).sum() + 0.5 * len(x) * np.log(2 * np.pi)
    w = np.outer(alpha, alpha) - sl.cho_solve((c, low), np.eye(len(x)), check_finite=False)
    grads = [kse * d2 / (ls * ls), 2 * kse, 2 * sn * sn * np.eye(len(x))]   # dK/dlog(theta)
    return value, np.array([-0.5 * np.sum(w * g) for g in grads])


def run_gp(s, device):
    from perf.suites import check, computed, error_text, make_row, stats, timed, to_device
    x, y, theta0 = gp_data()
    fns = {"scipy": lambda: scipy_gp(theta0, x, y)}
    ref_value, ref_grad = scipy_gp(theta0, x, y)
    row = make_row("linalg", GP)
    try:
        ex, ey = to_device(x, device), to_device(y, device)
        eye = to_device(np.eye(len(x)), device)
        theta = to_device(theta0, device).autodiff().require_grad()

        class Lib:
            linalg = ember.linalg

        def ember_step():
            loss = gp_nll(Lib, theta, ex, ey, eye)
            return loss, computed(theta.grad(loss.backward()))

        start = Timer(lambda: ember_step(), device=device)
        row["first_call_s"] = start.run(1)
        value, grad = ember_step()
        check(row, (np.array([value.item(), *grad.numpy()]), np.array([ref_value, *ref_grad])))
        fns = {"ember": Timer(ember_step, device=device), **fns}
    except Exception as e:
        row.update(status="error", error=error_text(e))
    if s.torch is not None and device.type == "cpu":
        torch = s.torch
        tx, ty, teye = torch.from_numpy(x), torch.from_numpy(y), torch.eye(len(x), dtype=torch.float64)
        tt = torch.tensor(theta0, requires_grad=True)

        def torch_step():
            loss = gp_nll(torch, tt, tx, ty, teye)
            return loss, torch.autograd.grad(loss, tt)[0]

        fns["torch"] = torch_step
    row["results"] = {lib: stats(r) for lib, r in timed(fns, s, device=device).items()}
    return [row]
