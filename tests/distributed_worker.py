"""The ranks' side of tests/test_distributed.py: run under ``mpiexec -n N``, never by pytest itself.

    mpiexec -n 2 python tests/distributed_worker.py OUT_DIR [CASE ...]

Every rank runs the cases of ``CASES`` (or the named ones) in order, each a function of
``(n, r)`` that raises on failure, and writes one JSON line per case to
``OUT_DIR/rank<r>.jsonl``: ``{"case", "ok", "error", "skipped", "seconds"}`` (files, not
stdout, so that the ranks' lines cannot interleave).  ``cuda_gradients`` runs in its own
launch, under Numba's CUDA simulator.
A failing case does not stop the run: the mismatch cases show that the ranks stay usable
after every rank raised.  The references are single-process gradients of the whole
(concatenated) batch, computed on every rank under ``no_sync()``.
"""
import json
import os
import sys
import time
import traceback

import numpy as np

import ember
from ember.tensor import wrap as tensor_wrap
import ember.distributed as dist

F64 = ember.float64
STRATEGIES = (ember.CheckpointingStrategy.NONE, ember.CheckpointingStrategy.BALANCED)
ROWS = 4                  # rows of the batch on each rank
TIMEOUT = 30.0            # every distributed wait of these cases (the timeout case sets its own)


class Skipped(Exception):
    """The case cannot run here (the reason is reported)."""


def comm():
    from mpi4py import MPI
    return MPI.COMM_WORLD


def device(strategy=ember.CheckpointingStrategy.NONE):
    return ember.Device.cpu().gradient_checkpointing(strategy)


def data(n, seed=0):
    """The whole batch (identical on every rank): inputs and targets of ``n * ROWS`` rows."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n * ROWS, 5)), rng.normal(size=(n * ROWS, 2))


def shard(a, r):
    return a[r * ROWS:(r + 1) * ROWS]


def params(dev, seed=1, mark=lambda t: t.set_distributed()):
    """A two-layer model's parameters, the same on every rank."""
    rng = np.random.default_rng(seed)
    shapes = [(5, 4), (4,), (4, 2), (2,)]
    return [mark(ember.tensor(rng.normal(size=s), dtype=F64, device=dev)) for s in shapes]


def mlp_loss(ps, x, y, reduce="mean"):
    w1, b1, w2, b2 = ps
    h = (ember.tensor(x, device=w1.device) @ w1 + b1).tanh()
    err = h @ w2 + b2 - ember.tensor(y, device=w1.device)
    sq = err * err
    return sq.mean() if reduce == "mean" else sq.sum()


def reference(loss_fn, dev, *args, seed=1):
    """Gradients of ``loss_fn`` with plain (local) leaves, as numpy arrays, in one process."""
    with dist.no_sync():
        ps = params(dev, seed, mark=lambda t: t.require_grad())
        grads = loss_fn(ps, *args).backward()
        return [p.grad(grads).numpy() for p in ps]


def assert_close(got, want, what, rtol=1e-12, atol=1e-14):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def assert_same_on_every_rank(arrays, what):
    every = comm().allgather([np.asarray(a) for a in arrays])
    for r, other in enumerate(every):
        for i, (a, b) in enumerate(zip(arrays, other)):
            if a.tobytes() != b.tobytes():
                raise AssertionError(f"{what}: gradient {i} differs between this rank and rank {r}")


def expect(exc, fn, *words):
    """``fn()`` raises ``exc`` whose message holds every one of ``words``; returns the message."""
    try:
        fn()
    except exc as e:
        msg = str(e)
        for w in words:
            assert w in msg, f"{exc.__name__} message lacks {w!r}: {msg}"
        return msg
    raise AssertionError(f"expected {exc.__name__}")


# --- cases -------------------------------------------------------------------------------------
def before_init(n, r):
    t = ember.tensor([1.0]).autodiff()
    expect(dist.DistributedError, t.set_distributed, "init()")
    expect(dist.DistributedError, dist.rank, "init()")
    expect(dist.DistributedError, lambda: dist.all_reduce(t), "init()")
    assert not dist.is_initialized()
    dist.init(timeout=TIMEOUT)
    dist.init()                                   # idempotent
    assert dist.is_initialized()
    assert (dist.rank(), dist.world_size()) == (r, n) == (comm().Get_rank(), comm().Get_size())
    dist.barrier()


def marks(n, r):
    t = ember.tensor(np.ones(3), dtype=F64).autodiff().require_grad()
    w = t.set_distributed()
    assert w.is_distributed() and w.is_require_grad() and not t.is_distributed()
    assert w.set_distributed() is w and w.set_require_grad(True) is w
    d = w.detach()
    assert d.is_distributed() and d._node is not w._node
    assert w.clone().is_distributed()
    assert w.with_gradient_checkpointing_strategy(STRATEGIES[1]).is_distributed()
    off = w.set_require_grad(False)
    assert not off.is_distributed() and not off.is_require_grad()
    plain = w.set_distributed(False)
    assert plain.is_require_grad() and not plain.is_distributed() and w.is_distributed()
    assert not w.without_autodiff().is_distributed()
    assert not (w * 2).is_distributed()
    assert not ember.tensor([1.0]).is_distributed()
    expect(ValueError, ember.tensor([1.0]).set_distributed, "autodiff")
    expect(TypeError, ember.tensor([1]).autodiff().set_distributed, "Float")
    expect(ValueError, (w * 2).set_distributed, "leaves")
    opt = ember.optim.SGD([w], lr=0.1)
    (w2,) = opt.step((w * w).sum().backward())
    assert w2.is_distributed() and opt.params[0].is_distributed()


def mean_gradients(n, r):
    x, y = data(n)
    for s in STRATEGIES:
        ps = params(device(s))
        grads = mlp_loss(ps, shard(x, r), shard(y, r)).backward()
        got = [p.grad(grads).numpy() for p in ps]
        for i, (g, want) in enumerate(zip(got, reference(mlp_loss, device(s), x, y))):
            assert_close(g, want, f"{s.name}: parameter {i}")
        assert_same_on_every_rank(got, s.name)


def sum_gradients(n, r):
    x, y = data(n)
    try:
        for how in ({"op": "sum"}, {"average": False}):
            dist.init(**how)
            for s in STRATEGIES:
                ps = params(device(s))
                grads = mlp_loss(ps, shard(x, r), shard(y, r), "sum").backward()
                got = [p.grad(grads).numpy() for p in ps]
                want = reference(lambda q, a, b: mlp_loss(q, a, b, "sum"), device(s), x, y)
                for i, (g, w) in enumerate(zip(got, want)):
                    assert_close(g, w, f"{how} {s.name}: parameter {i}")
                assert_same_on_every_rank(got, s.name)
    finally:
        dist.init(op="mean")


def mixed_leaves(n, r):
    """Distributed w1, w2 and local b1, b2: the local gradients stay the shard's own."""
    x, y = data(n)
    for s in STRATEGIES:
        dev = device(s)
        ps = params(dev)
        ps[1], ps[3] = ps[1].set_distributed(False), ps[3].set_distributed(False)
        grads = mlp_loss(ps, shard(x, r), shard(y, r)).backward()
        want = reference(mlp_loss, dev, x, y)
        local = reference(mlp_loss, dev, shard(x, r), shard(y, r))
        for i in (0, 2):
            assert_close(ps[i].grad(grads).numpy(), want[i], f"{s.name}: distributed parameter {i}")
        for i in (1, 3):
            assert_close(ps[i].grad(grads).numpy(), local[i], f"{s.name}: local parameter {i}")
        if n > 1:
            every = comm().allgather(ps[1].grad(grads).numpy())
            assert any(e.tobytes() != every[0].tobytes() for e in every[1:]), "local grads were reduced"


def reused_leaf(n, r):
    """A leaf used several times (two matmuls and a penalty) accumulates before it is reduced."""
    x, _ = data(n)

    def loss(ps, xs):
        w = ps[0]
        h = (ember.tensor(xs[:, :4], device=w.device) @ w).tanh() @ w
        return (h * h).mean() + (w * w).sum() * 0.1

    def make(dev, mark):
        rng = np.random.default_rng(3)
        return [mark(ember.tensor(rng.normal(size=(4, 4)), dtype=F64, device=dev))]

    for s in STRATEGIES:
        dev = device(s)
        (w,) = make(dev, lambda t: t.set_distributed())
        got = w.grad(loss([w], shard(x, r)).backward()).numpy()
        with dist.no_sync():
            (v,) = make(dev, lambda t: t.require_grad())
            want = v.grad(loss([v], x).backward()).numpy()
        assert_close(got, want, s.name)
        assert_same_on_every_rank([got], s.name)


def training(n, r):
    """Different random starts, broadcast from rank 0, three SGD steps: the same model everywhere,
    equal to training on the whole batch in one process."""
    x, y = data(n)
    dev = device()
    rng = np.random.default_rng(100 + r)
    start = [ember.tensor(rng.normal(size=s), dtype=F64, device=dev).set_distributed()
             for s in [(5, 4), (4,), (4, 2), (2,)]]
    ps = [dist.broadcast(p) for p in start]
    assert all(p.is_distributed() for p in ps)
    first = [p.numpy().copy() for p in ps]
    assert_same_on_every_rank(first, "broadcast")
    opt = ember.optim.SGD(ps, lr=0.1, momentum=0.9)
    for _ in range(3):
        ps = opt.step(mlp_loss(ps, shard(x, r), shard(y, r)).backward())
    with dist.no_sync():
        qs = [ember.tensor(a, dtype=F64, device=dev).require_grad() for a in first]
        ref = ember.optim.SGD(qs, lr=0.1, momentum=0.9)
        for _ in range(3):
            qs = ref.step(mlp_loss(qs, x, y).backward())
    for i, (p, q) in enumerate(zip(ps, qs)):
        assert_close(p.numpy(), q.numpy(), f"parameter {i} after 3 steps", rtol=1e-11)
    assert_same_on_every_rank([p.numpy() for p in ps], "trained parameters")


def all_reduce(n, r):
    dev = device()
    c = [np.arange(3.0) + k + 1 for k in range(n)]          # rank k's loss weights
    for op in ("sum", "mean", "max"):
        vals = [np.array([k, -k, 5.0]) for k in range(n)]
        xr = ember.tensor(vals[r], dtype=F64, device=dev).require_grad()
        y = dist.all_reduce(xr, op)
        total = {"sum": sum(vals), "mean": sum(vals) / n, "max": np.max(vals, axis=0)}[op]
        assert_close(y.numpy(), total, f"{op}: value")
        g = xr.grad((y * ember.tensor(c[r], dtype=F64)).sum().backward()).numpy()
        csum = sum(c)
        want = {"sum": csum, "mean": csum / n,
                "max": csum * np.array([r == n - 1, r == 0, 1.0 / n])}[op]
        assert_close(g, want, f"{op}: gradient")
    i = dist.all_reduce(ember.tensor([r, 1]), "sum")
    assert i.dtype == ember.int64 and i.tolist() == [n * (n - 1) // 2, n]
    m = dist.all_reduce(ember.tensor([r, 1]), "mean")
    assert m.dtype == ember.float64 and m.tolist() == [(n - 1) / 2, 1.0]
    assert not dist.all_reduce(ember.tensor([1.0])).is_autodiff()
    expect(TypeError, lambda: dist.all_reduce(ember.tensor([True])), "Bool")
    expect(ValueError, lambda: dist.all_reduce(ember.tensor([1.0]), "min"), "op")
    if n > 1:
        expect(dist.DistributedError, lambda: dist.all_reduce(ember.zeros(2 + (r == 0))),
               "disagree", "rank 0", "rank 1")


def broadcast(n, r):
    root = n - 1
    t = ember.tensor(np.full(3, float(r)), dtype=F64)
    b = dist.broadcast(t, root=root)
    assert b.tolist() == [float(root)] * 3 and not b.is_autodiff()
    leaf = t.autodiff().require_grad()
    bl = dist.broadcast(leaf, root=root)
    assert bl.is_require_grad() and not bl.is_distributed() and bl._node is not leaf._node
    assert not dist.broadcast((leaf * 2), root=root).is_tracked()
    expect(ValueError, lambda: dist.broadcast(t, root=n), "root")
    if n > 1:
        expect(dist.DistributedError, lambda: dist.broadcast(ember.zeros(2 + (r == 1))),
               "disagree", "rank 1")


def _mismatch(n, r, make, *words, then=True):
    """Every rank raises, naming the ranks; nothing is consumed; later backward passes work."""
    dev = device()
    ps = make(dev)
    loss = sum((p * p).sum() for p in ps)
    expect(dist.DistributedError, loss.backward, "disagree", "rank 0", "rank 1",
           "Nothing was consumed", *words)
    with dist.no_sync():
        loss.backward()                          # the failed backward consumed nothing
    if then:
        _still_usable()


def _still_usable():
    w = ember.tensor([1.0, 2.0], dtype=F64, device=device()).set_distributed()
    assert w.grad((w * w).sum().backward()).tolist() == [2.0, 4.0]


def mismatch_count(n, r):
    _mismatch(n, r, lambda dev: [ember.tensor([1.0], device=dev).set_distributed()
                                 for _ in range(1 + (r == 0))], "(1,) float32")


def mismatch_shape(n, r):
    _mismatch(n, r, lambda dev: [ember.zeros(2 + (r == 1), device=dev).set_distributed()],
              "(2,) float32", "(3,) float32")


def mismatch_dtype(n, r):
    _mismatch(n, r, lambda dev: [ember.zeros(2, dtype=F64 if r else ember.float32,
                                             device=dev).set_distributed()], "float64")


def mismatch_order(n, r):
    shapes = [(2,), (3,)] if r == 0 else [(3,), (2,)]
    _mismatch(n, r, lambda dev: [ember.zeros(s, device=dev).set_distributed() for s in shapes])


def unmarked_use(n, r):
    """Rank 0 marks its parameter, the others forgot: every rank raises."""
    _mismatch(n, r, lambda dev: [ember.zeros(2, device=dev).require_grad() if r
                                 else ember.zeros(2, device=dev).set_distributed()],
              "1 entry", "2 entries")


def op_mismatch(n, r):
    try:
        dist.init(op="sum" if r == 0 else "mean")
        _mismatch(n, r, lambda dev: [ember.zeros(2, device=dev).set_distributed()],
                  "op=sum", "op=mean", then=False)
    finally:
        dist.init(op="mean")
    _still_usable()


def device_mismatch(n, r):
    """A distributed leaf on another device than the loss (rank 0 only): a DeviceError there,
    a DistributedError naming rank 0 elsewhere, and nothing consumed anywhere."""
    dev = device()
    w = ember.tensor([1.0, 2.0], dtype=F64, device=dev).set_distributed()
    other = ember.tensor([3.0, 4.0], dtype=F64, device=dev).set_distributed()
    if r == 0:   # a leaf whose mark says cuda:0 (no CUDA backend exists: forge the mark)
        fake = ember.Device("cuda", 0).autodiff()
        forged = tensor_wrap(other._data, fake, other.dtype).set_distributed()
        other = tensor_wrap(other._data, dev, other.dtype, forged._node)
    h = w * w
    loss = h.sum() + other.sum()
    if r == 0:
        expect(ember.DeviceError, loss.backward, "cuda:0", "Nothing was consumed")
    else:
        expect(dist.DistributedError, loss.backward, "rank 0 failed", "cuda:0")
    assert w.grad(h.sum().backward()).tolist() == [2.0, 4.0]   # h's step is still there


def no_sync(n, r):
    x, y = data(n)
    ps = params(device())
    with dist.no_sync():
        grads = mlp_loss(ps, shard(x, r), shard(y, r)).backward()
    local = reference(mlp_loss, device(), shard(x, r), shard(y, r))
    for i, p in enumerate(ps):
        assert_close(p.grad(grads).numpy(), local[i], f"parameter {i}")


def float32(n, r):
    x, y = data(n)
    rng = np.random.default_rng(1)
    w = ember.tensor(rng.normal(size=(5, 2)), dtype=ember.float32, device=device()).set_distributed()
    g = w.grad(((ember.tensor(shard(x, r), dtype=ember.float32) @ w) ** 2).mean().backward())
    assert g.dtype == ember.float32
    with dist.no_sync():
        v = ember.tensor(w.numpy(), device=device()).require_grad()
        want = v.grad(((ember.tensor(x, dtype=ember.float32) @ v) ** 2).mean().backward())
    assert_close(g.numpy(), want.numpy(), "float32", rtol=1e-5, atol=1e-6)
    assert_same_on_every_rank([g.numpy()], "float32")


def cuda_gradients(n, r):
    """CUDA parameters: the gradients go through host buffers, or (a CUDA-aware MPI) straight
    from device memory; under the simulator device memory is host memory, so both paths run."""
    from numba import config
    try:
        cuda = ember.Device.cuda()
    except ember.DeviceError as e:
        raise Skipped(f"no CUDA device: {e}")
    x, y = data(n)
    want = reference(mlp_loss, device(), x, y)
    try:
        for aware in (False, True) if config.ENABLE_CUDASIM else (False,):
            dist._state.cuda_aware = aware
            ps = params(cuda.autodiff())
            grads = mlp_loss(ps, shard(x, r), shard(y, r)).backward()
            got = [p.grad(grads) for p in ps]
            assert all(g.device == cuda and not g.is_autodiff() for g in got)
            got = [g.numpy() for g in got]
            for i, (g, w) in enumerate(zip(got, want)):
                assert_close(g, w, f"cuda_aware={aware}: parameter {i}", rtol=1e-10)
            assert_same_on_every_rank(got, f"cuda_aware={aware}")
    finally:
        dist._state.cuda_aware = False


def timeout(n, r):
    """Rank 0 runs a backward the others skip: it times out (no hang); shutdown() and init() on
    every rank recover."""
    dist.init(timeout=1.0)
    dev = device()
    w = ember.tensor([1.0, 2.0], dtype=F64, device=dev).set_distributed()
    if r == 0:
        t0 = time.monotonic()
        expect(dist.DistributedTimeoutError, (w * w).sum().backward, "did not join")
        assert time.monotonic() - t0 < 10
        expect(dist.DistributedError, dist.barrier, "out of step", "shutdown()")
    dist.shutdown()
    dist.init(timeout=TIMEOUT)
    assert w.grad((w * w).sum().backward()).tolist() == [2.0, 4.0]


CASES = [before_init, marks, mean_gradients, sum_gradients, mixed_leaves, reused_leaf, training,
         all_reduce, broadcast, mismatch_count, mismatch_shape, mismatch_dtype, mismatch_order,
         unmarked_use, op_mismatch, device_mismatch, no_sync, float32, timeout]
NAMES = [c.__name__ for c in CASES]
CUDA_CASES = ["before_init", "cuda_gradients"]   # the simulator's launch


def main(out_dir, names):
    n, r = comm().Get_size(), comm().Get_rank()
    cases = [globals()[name] for name in names] if names else CASES
    with open(os.path.join(out_dir, f"rank{r}.jsonl"), "w") as out:
        for case in cases:
            t0 = time.perf_counter()
            ok, error, skipped = True, "", ""
            try:
                case(n, r)
            except Skipped as e:
                skipped = str(e)
            except Exception:
                ok, error = False, traceback.format_exc()
            out.write(json.dumps({"case": case.__name__, "ok": ok, "error": error, "skipped": skipped,
                                  "seconds": round(time.perf_counter() - t0, 3)}) + "\n")
            out.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
