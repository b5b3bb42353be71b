"""Data-parallel training over MPI (DESIGN §4 item 12).

Every process (*rank*) runs the same script on its own shard of the data.
Parameters marked with ``w.set_distributed()`` have their gradient all-reduced
(the mean over ranks by default) during ``backward()``: as soon as the walk has
accumulated a distributed leaf's last local contribution, a non-blocking
``Iallreduce`` of that gradient starts, and the walk goes on while it runs.
``backward()`` waits for every pending reduction before it returns, so the
``Gradients`` it returns hold the reduced gradient of each distributed leaf, the
same on every rank; the gradients of other leaves stay local.

    mpiexec -n 2 python examples/distributed_train.py

>>> import ember.distributed as dist
>>> dist.init()                                   # once per process; mean by default
>>> w = dist.broadcast(ember.random.normal((4, 3)).autodiff())   # rank 0's values everywhere
>>> w = w.set_distributed()
>>> grads = loss(w, my_shard).backward()          # w.grad(grads): the mean over the ranks

Rules that keep the ranks in step:

- After ``init()``, ``backward()`` is a collective: every rank calls it the same
  number of times (use ``no_sync()`` on every rank for local-only backward passes).
  At the start of each backward, before anything is consumed, the ranks exchange a
  digest of the distributed parameters the loss reaches (count, shapes, dtypes, in
  walk order) and of the reduction; if they disagree, every rank raises
  ``DistributedError`` naming each rank's parameters, and nothing is consumed.  A rank
  that never arrives makes the others raise ``DistributedTimeoutError`` after
  ``timeout`` seconds (``init(timeout=...)``, ``EMBER_DISTRIBUTED_TIMEOUT``, default
  600), never hang forever.
- Every wait (that check, the reductions, ``all_reduce``, ``broadcast``, ``barrier``)
  polls non-blocking MPI requests against that deadline.  After a timeout, or after
  a backward that raised once its reductions were under way, the ranks may be out of
  step: later calls raise until ``shutdown()`` and ``init()`` run on every rank.
- Ember uses two duplicates of the communicator (reductions, checks), so a
  script's own traffic on ``MPI.COMM_WORLD`` never mixes with Ember's.

Devices: gradients are reduced through host buffers (the CPU backend's storage
is the host buffer, so nothing is copied there).  A CUDA gradient is copied to the
host and back unless ``EMBER_MPI_CUDA_AWARE=1`` says that the MPI build is
CUDA-aware (Open MPI or MPICH configured ``--with-cuda``, MVAPICH2-GDR); then MPI
gets the device buffers.  The ``mpich`` wheel of ``pip install "ember[distributed]"``
is built without CUDA (see ``MPI.Get_library_version()``): leave it unset there.

Progress: MPI moves a non-blocking reduction on only while the process calls
into MPI; the walk does so each time it reaches a leaf, and backward's final
wait does the rest.  On machines with spare cores, ``MPIR_CVAR_ASYNC_PROGRESS=1``
(MPICH) adds a progress thread; on a 2-core machine it makes things slower.
"""
import contextlib
import hashlib
import os
import time

import numpy as np

from . import dispatch
from . import dtypes as dt
from .benchmark import synchronize
from .device import DeviceError
from .ir import Op
from .tensor import wrap

__all__ = ["init", "shutdown", "is_initialized", "rank", "world_size", "barrier", "all_reduce",
           "broadcast", "no_sync", "DistributedError", "DistributedTimeoutError"]

DEFAULT_TIMEOUT = 600.0   # seconds; as NCCL's watchdog
_SPIN = 0.05              # seconds a wait polls without sleeping
_OPS = ("sum", "mean", "max")


class DistributedError(RuntimeError):
    """Distributed work cannot go on: not initialised, ranks that disagree, ranks out of step."""


class DistributedTimeoutError(DistributedError):
    """Other ranks did not join a collective within the timeout."""


class _Mark:
    """The distributed mark of a leaf node (``Node.distributed``): what the signature reads."""

    __slots__ = ("device", "dtype")

    def __init__(self, device, dtype):
        self.device = device
        self.dtype = dtype


class _State:
    def __init__(self, MPI, comm, op, timeout):
        self.MPI = MPI
        self.comm = comm
        self.data = comm.Dup()     # gradient reductions, all_reduce, broadcast, barrier
        self.check = comm.Dup()    # signature checks: never matched against a reduction
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.op = op
        self.timeout = timeout
        self.cuda_aware = os.environ.get("EMBER_MPI_CUDA_AWARE", "") not in ("", "0")
        self.active = None         # the _Sync of the backward in progress
        self.broken = None         # why the ranks may be out of step


_state = None
_orphans = []       # requests (and their buffers) abandoned by a failed backward: MPI may still write
_no_sync = 0


# --- setup ---------------------------------------------------------------------------------
def init(comm=None, *, op=None, average=None, timeout=None):
    """Start distributed work on ``comm`` (default ``MPI.COMM_WORLD``); a collective call.

    ``op`` ("mean", the default, or "sum") is how backward combines the gradients of
    distributed leaves; ``average=True``/``False`` is the same as "mean"/"sum".
    ``timeout`` bounds every wait (seconds; ``EMBER_DISTRIBUTED_TIMEOUT``, else 600).
    Idempotent: a second call keeps the communicator and updates ``op`` and ``timeout``
    when given (on every rank: ranks that disagree on ``op`` fail at the next backward).
    """
    global _state
    op = _backward_op(op, average)
    if timeout is not None and not timeout > 0:
        raise ValueError(f"init: timeout must be a positive number of seconds, got {timeout!r}")
    if _state is not None:
        if comm is not None and comm != _state.comm:
            raise DistributedError("init: already initialised with another communicator; "
                                   "call ember.distributed.shutdown() first")
        _state.op = op or _state.op
        _state.timeout = timeout or _state.timeout
        return
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise DistributedError("ember.distributed needs mpi4py and an MPI library: "
                               "pip install 'ember[distributed]'") from e
    if timeout is None:
        timeout = float(os.environ.get("EMBER_DISTRIBUTED_TIMEOUT", DEFAULT_TIMEOUT))
    _state = _State(MPI, MPI.COMM_WORLD if comm is None else comm, op or "mean", timeout)
    from ember.autograd import graph
    graph.set_backward_hook(_backward_hook)


def shutdown():
    """Undo ``init()`` (on every rank): free Ember's communicators; MPI stays initialised."""
    global _state
    s = _state
    if s is None:
        return
    from ember.autograd import graph
    graph.set_backward_hook(None)
    _state = None
    if s.active is not None:
        _orphans.append(s.active)
    for c in (s.data, s.check):
        c.Free()


def is_initialized():
    return _state is not None


def rank():
    """This process's rank in ``[0, world_size())``."""
    return _require("rank", check=False).rank


def world_size():
    """The number of processes."""
    return _require("world_size", check=False).size


def barrier():
    """Wait until every rank reaches here (bounded by the timeout)."""
    s = _require("barrier")
    _wait(s, [s.data.Ibarrier()], "barrier", ())


@contextlib.contextmanager
def no_sync():
    """Backward passes inside keep every gradient local: no check, no reduction.

    For gradient accumulation (reduce only the last micro-batch's backward) and for
    local-only backward passes; every rank must use it around the same calls.
    """
    global _no_sync
    _no_sync += 1
    try:
        yield
    finally:
        _no_sync -= 1


def _backward_op(op, average):
    if average is not None:
        want = "mean" if average else "sum"
        if op is not None and op != want:
            raise ValueError(f"init: average={average} contradicts op={op!r}")
        return want
    if op is not None and op not in ("mean", "sum"):
        raise ValueError(f"init: op must be 'mean' or 'sum', got {op!r}")
    return op


def _require(name, check=True):
    s = _state
    if s is None:
        raise DistributedError(f"{name}: call ember.distributed.init() first "
                               "(and run the script under mpiexec)")
    if check:
        if s.active is not None:    # a backward raised after its reductions started
            _orphans.append(s.active)
            s.active = None
            s.broken = ("an earlier backward() raised while its gradient reductions were under way "
                        "on this rank")
        if s.broken:
            raise DistributedError(f"{name}: {s.broken}; the ranks may be out of step. Call "
                                   "ember.distributed.shutdown() and init() on every rank to start again.")
    return s


# --- marks -------------------------------------------------------------------------------------
def mark(t, flag=True):
    """``t.set_distributed(flag)``: the leaf with (or without) the distributed mark."""
    from ember.autograd import graph
    node = t._node
    if not flag:
        if node is None or node.distributed is None:
            return t
        return wrap(t._data, t._device, t._dtype, graph.leaf(t.shape))
    if not t._device._autodiff:
        raise ValueError("set_distributed: the tensor is not autodiff-enabled; "
                         "call .autodiff() first (w = w.autodiff().set_distributed())")
    if t._dtype.kind is not dt.Float or t.is_quantized:
        raise TypeError(f"set_distributed: only Float tensors take gradients, got {t._dtype.name}")
    if node is not None and not node.leaf:
        raise ValueError("set_distributed: only leaves can be marked; this tensor is the output of "
                         f"{dispatch.op_name(node.op)} on a tracked tensor (use detach() first)")
    if _state is None:
        raise DistributedError("set_distributed: call ember.distributed.init() first "
                               "(and run the script under mpiexec)")
    if node is not None and node.distributed is not None:
        return t
    return wrap(t._data, t._device, t._dtype,
                         graph.leaf(t.shape, _Mark(t._device.base(), t._dtype)))


# --- waiting and agreeing ---------------------------------------------------------------------
def _wait(s, reqs, what, buffers):
    """Complete ``reqs``, polling against the deadline; on timeout the ranks are out of step.

    mpi4py does not keep a request's buffers alive: the caller holds ``buffers`` until this
    returns, and a request abandoned on timeout keeps them forever (MPI may still write).
    """
    Testall = s.MPI.Request.Testall
    if Testall(reqs):
        return
    # MPI moves a non-blocking collective on only while some call polls it, on every rank:
    # spin (yielding the core) for a while, then back off to sleeps of up to a millisecond
    now = time.monotonic()
    deadline = now + s.timeout
    spin_until = now + _SPIN
    delay = 0.0
    while not Testall(reqs):
        now = time.monotonic()
        if now < spin_until:
            os.sched_yield()
            continue
        if now > deadline:
            _orphans.append((reqs, buffers))
            s.broken = f"{what} timed out on rank {s.rank}"
            raise DistributedTimeoutError(
                f"{what}: rank {s.rank} waited {s.timeout:g} s for the other ranks, which did not join "
                f"(a rank that stopped, skipped this call, or is stuck elsewhere). "
                "Raise the limit with init(timeout=...) or EMBER_DISTRIBUTED_TIMEOUT.")
        time.sleep(delay)
        delay = min(delay * 2 or 1e-5, 1e-3)


def _agree(s, what, entries, hint):
    """Every rank passes equal ``entries`` (strings), or every rank raises, naming each rank's."""
    text = "\n".join(entries).encode()
    digest = np.frombuffer(hashlib.blake2b(text, digest_size=16).digest(), dtype=np.int64)
    mine = np.array([len(entries), digest[0], digest[1]], dtype=np.int64)
    every = np.empty((s.size, 3), dtype=np.int64)
    _wait(s, [s.check.Iallgather(mine, every)], what, (mine, every))
    if (every == mine).all():
        return
    # they differ: gather every rank's entries, so that each rank can say how
    sizes = np.empty(s.size, dtype=np.int64)
    size = np.array([len(text)], dtype=np.int64)
    _wait(s, [s.check.Iallgather(size, sizes)], what, (size, sizes))
    width = int(sizes.max())   # each rank's text padded to the longest: no count arrays to keep
    send = np.zeros(width, dtype=np.uint8)
    send[:len(text)] = np.frombuffer(text, dtype=np.uint8)
    buf = np.empty((s.size, width), dtype=np.uint8)
    _wait(s, [s.check.Iallgather(send, buf)], what, (send, buf))
    per_rank = [bytes(row[:n]).decode().split("\n") for row, n in zip(buf, sizes.tolist())]
    raise DistributedError(f"{what}: {_describe(per_rank, hint)}")


def _describe(per_rank, hint):
    """Why the ranks' entries differ: a rank's local error, else a window of each rank's list."""
    for r, entries in enumerate(per_rank):
        for e in entries:
            if e.startswith("error: "):
                return f"rank {r} failed: {e[len('error: '):]}. Nothing was consumed."
    longest = max(len(e) for e in per_rank)
    first = next(i for i in range(longest) if len({tuple(e[i:i + 1]) for e in per_rank}) > 1)
    lo = max(0, first - 3)
    lines = []
    for r, entries in enumerate(per_rank):
        window = entries[lo:first + 3]
        shown = ("..., " if lo else "") + ", ".join(window) + (", ..." if len(entries) > first + 3 else "")
        k = len(entries)
        lines.append(f"  rank {r} ({k} entr{'y' if k == 1 else 'ies'}): {shown}")
    return (f"the ranks disagree (first difference at entry {first}):\n" + "\n".join(lines) +
            f"\n{hint}")


# --- backward ----------------------------------------------------------------------------------
_BACKWARD_HINT = (
    "Entry 0 is the reduction; then, in the order backward reaches them, the distributed "
    "parameters (shape, dtype) and all_reduce outputs that the loss depends on. Every rank must "
    "mark the same parameters with set_distributed() (same count, shapes, dtypes and creation "
    "order), use them all in its loss, and init() with the same op. Nothing was consumed.")


def _backward_hook(nodes, root_tensor):
    """Called by the graph walk before it consumes anything: check, then return a _Sync."""
    if _no_sync:
        return None
    s = _require("backward")
    device = root_tensor._device.base()
    entries = [f"op={s.op}"]
    marked = 0
    error = None
    for n in nodes:
        m = n.distributed
        if m is not None:
            marked += 1
            entries.append(f"{n.shape} {m.dtype.name}")
            if error is None and m.device != device:
                error = (f"a distributed parameter of shape {n.shape} is on {m.device}, the loss "
                         f"on {device}; put the parameters and the loss on one device and backend")
        elif n.op is _ALL_REDUCE:
            entries.append(f"all_reduce {n.shape}")
    if error is not None:
        entries.append("error: " + error)   # the other ranks fail too, naming this one
    try:
        _agree(s, "backward", entries, _BACKWARD_HINT)
    except DistributedError:
        if error is None:
            raise
    if error is not None:
        raise DeviceError(f"backward: {error}. Nothing was consumed.")
    if not marked or s.size == 1:     # one rank: the gradients are already the sum and the mean
        return None
    s.active = _Sync(s)
    return s.active


class _Sync:
    """The gradient reductions of one backward: started by ``ready``, completed by ``finish``."""

    def __init__(self, s):
        self.s = s
        self.reqs = []
        self.pending = []      # (node, send, recv) per request: the buffers outlive the requests
        self.done = 0          # reqs[:done] have completed

    def ready(self, node, g):
        s = self.s
        m = node.distributed
        if g is None:          # no gradient reached it here; other ranks may have one
            send = np.zeros(node.shape, dtype=m.dtype.np)
        else:
            send = _send_buffer(s, g if g._dtype is m.dtype else g.cast(m.dtype))
        recv = _recv_buffer(s, send, m)
        self.reqs.append(s.data.Iallreduce(send, recv, s.MPI.SUM))
        self.pending.append((node, send, recv))
        # Testing the oldest open request drives MPI's progress engine, so earlier reductions
        # move on while the walk computes
        reqs = self.reqs
        while self.done < len(reqs) and reqs[self.done].Test():
            self.done += 1

    def finish(self, grads):
        s = self.s
        _wait(s, self.reqs, "backward", self.pending)
        for node, _, recv in self.pending:
            grads._grads[node] = _result(s, recv, node.distributed, mean=s.op == "mean")
        s.active = None


def _send_buffer(s, g):
    """What MPI reads: the CPU storage itself; for a GPU, a host copy, or with a CUDA-aware MPI
    the device storage (its ``__cuda_array_interface__``) once the kernels that wrote it are
    done.  (Not the Tensor: mpi4py would take its ``__dlpack__``, a host copy.)"""
    if g._device.type == "cpu":
        return g._data
    if s.cuda_aware:
        synchronize(g._device)
        return g._data
    return g.numpy()


def _recv_buffer(s, send, m):
    if isinstance(send, np.ndarray):
        return np.empty(send.shape, dtype=m.dtype.np)
    data = m.device.backend.execute(Op.FULL, shape=tuple(send.shape), value=0, dtype=m.dtype)
    synchronize(m.device)      # the fill must land before MPI writes
    return data


def _result(s, recv, m, mean):
    """The reduced buffer as a tensor without autodiff on the mark's device."""
    if not isinstance(recv, np.ndarray):
        t = wrap(recv, m.device, m.dtype)
        return t / s.size if mean else t
    if mean:
        np.divide(recv, s.size, out=recv)
    if m.device.type != "cpu":
        recv = m.device.backend.execute(Op.FROM_HOST, recv)
    return wrap(recv, m.device, m.dtype)


# --- differentiable all_reduce and broadcast -------------------------------------------------
class _AllReduceOp:
    """Stands in for an IR op in the nodes ``all_reduce`` records (messages read ``name``)."""
    name = "ALL_REDUCE"


_ALL_REDUCE = _AllReduceOp()


class _AllReduceRule:
    """Backward of ``all_reduce``: the incoming gradients of every rank, summed.

    With ``y = x_0 + ... + x_{n-1}`` on every rank and the total loss the sum of the
    ranks' losses, ``dL/dx_r`` is the sum over ranks of ``dL_k/dy``; "mean" divides it
    by n, "max" sends it to the ranks that held the maximum (split evenly on ties).
    """
    deps = ()

    @staticmethod
    def backward(node, g):
        s = _state
        if s is None:
            raise DistributedError("backward through all_reduce: ember.distributed was shut down")
        total = _reduce_host(s, g.numpy(), "sum", "backward of all_reduce")
        gt = wrap(_from_host(total, g._device), g._device, g._dtype)
        op = node.params["op"]
        if op == "mean":
            gt = gt / s.size
        elif op == "max":
            gt = gt * node.params["share"]
        return (gt,)


def _reduce_host(s, host, op, what):
    send = np.ascontiguousarray(host)
    recv = np.empty_like(send)
    mpi_op = s.MPI.MAX if op == "max" else s.MPI.SUM
    _wait(s, [s.data.Iallreduce(send, recv, mpi_op)], what, (send, recv))
    return recv


def _from_host(host, device):
    """Storage on ``device`` holding numpy array ``host`` (the array itself on the CPU)."""
    return device.backend.execute(Op.FROM_HOST, host)


def all_reduce(t, op="sum"):
    """The sum ("sum"), mean ("mean") or maximum ("max") of ``t`` over all ranks, on every rank.

    A collective: every rank passes a tensor of the same shape and dtype.  Differentiable:
    backward sums the incoming gradient over the ranks (so every rank must run that
    backward too).  The mean of an Int tensor is float64.

    >>> dist.all_reduce(ember.tensor([dist.rank()]), op="sum")     # 2 ranks
    tensor([1])
    """
    if op not in _OPS:
        raise ValueError(f"all_reduce: op must be one of {', '.join(map(repr, _OPS))}, got {op!r}")
    if t._dtype.kind is dt.Bool or t.is_quantized:
        raise TypeError(f"all_reduce: expected a Float or Int tensor, got "
                        f"{t._dtype.kind.name} ({t._dtype.name})")
    s = _require("all_reduce")
    _agree(s, "all_reduce", [f"op={op} {t.shape} {t._dtype.name}"],
           "Every rank must pass a tensor of the same shape and dtype, with the same op.")
    total = _reduce_host(s, t.numpy(), op, "all_reduce")
    dtype = t._dtype
    if op == "mean":
        if dtype.kind is dt.Int:
            total, dtype = total.astype(np.float64), dt.float64
        np.divide(total, s.size, out=total)
    out = wrap(_from_host(total, t._device), t._device, dtype)
    if t._node is not None and dtype.kind is dt.Float:
        params = {"op": op}
        if op == "max":        # who holds the maximum: the gradient's share on this rank
            won = (t.numpy() == total).astype(total.dtype)
            count = _reduce_host(s, won, "sum", "all_reduce")
            params["share"] = wrap(_from_host(won / count, t._device), t._device.base(), dtype)
        _record(out, t, params)
    return out


def _record(out, t, params):
    from ember.autograd import graph
    out._node = graph.Node(_ALL_REDUCE, out.shape, (t._node,), _AllReduceRule, params,
                           (t.shape,), (t._dtype,), (None,), None, None, False, None)


def broadcast(t, root=0):
    """``t``'s values on rank ``root``, on every rank: a collective, for initial parameters.

    Every rank passes a tensor of the same shape and dtype.  The result keeps ``t``'s
    autodiff association; like ``detach()`` it starts a new lineage, and a marked leaf
    stays a marked leaf (distributed if ``t`` is).  Not differentiable.

    >>> w = dist.broadcast(ember.random.normal((4, 3)).autodiff()).set_distributed()
    """
    s = _require("broadcast")
    if not isinstance(root, int) or not 0 <= root < s.size:
        raise ValueError(f"broadcast: root must be a rank in [0, {s.size}), got {root!r}")
    _agree(s, "broadcast", [f"root={root} {t.shape} {t._dtype.name}"],
           "Every rank must pass a tensor of the same shape and dtype, with the same root.")
    if s.rank == root:
        buf = np.ascontiguousarray(t.numpy())
    else:
        buf = np.empty(t.shape, dtype=t._dtype.np)
    _wait(s, [s.data.Ibcast(buf, root=root)], "broadcast", (buf,))
    data = t._data if s.rank == root else _from_host(buf, t._device)
    node = t._node
    if node is not None and node.leaf:
        from ember.autograd import graph
        node = graph.leaf(t.shape, node.distributed)
    else:
        node = None
    return wrap(data, t._device, t._dtype, node)
