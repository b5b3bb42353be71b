"""Elementwise fusion: chains of elementwise ops run as one kernel (DESIGN §2).

When fusion is on (the default; ``EMBER_FUSION=0`` or ``set_enabled(False)`` turns it off),
``dispatch.apply`` does not run an elementwise op (casts included): after every check
(kinds, shapes, devices, strategies) and before autodiff records it, ``elementwise`` returns a
``Deferred`` node — the op, its arguments (arrays or other deferred nodes), shape and
dtype — and the Tensor holds it in place of an array.  Errors therefore still point at
the op the user wrote; ``t.shape`` and ``t.dtype`` never compute anything.

Reading a tensor's storage (``Tensor._data``: ``numpy()``, ``item()``, printing, any
non-elementwise op) *forces* it: the pending nodes below it become one kernel, built from
the chain's structure (``kernels/fused.py``) and cached in memory and on disk.  A node
that something besides the chain still holds — a tensor, a value an autodiff step saved,
a checkpoint memo, a deferred op outside this chain — is written out by the same kernel
(several outputs), so nothing is computed twice; the rest only lives in the kernel's
scratch blocks (CPU) or registers (CUDA).  The result is stored on the node, which every
tensor sharing it sees.

Limits: an op on fewer than ``MIN_SIZE`` elements runs at once on the CPU outside a
traced step, unless more than ``SHORT_CHAIN`` of them ran in a row (a long chain), and
elsewhere on fewer than ``TRACED_MIN_SIZE`` (deferring costs more than it saves there);
a node whose operand has another shape (broadcasting) forces that
operand first, so every node of a kernel has the kernel's shape and can be written out;
an op that would make a chain longer than ``MAX_NODES`` ops forces its operands first; and
a chain that needs more than ``MAX_ARRAYS`` arrays (inputs and outputs) or ``MAX_LEAVES``
inputs runs as consecutive segments that each fit.  A chain of fewer than ``HOT_SIZE``
elements runs op by op on the eager kernels until the same structure has been forced
``HOT_RUNS`` times (outside a traced step): only chains that repeat pay a compile.  A
chain's launches (its *program*) are planned once per structure and cached: a training
step's chains skip planning and kernel lookup after the first step.
"""
import itertools
import math
import operator
import os
import sys

from . import backends
from .ir import ELEMENTWISE, Op

# CPU outputs with fewer elements (up to 64) run at once outside a traced step, up to
# SHORT_CHAIN of them in a row: an op on tiny tensors is mostly Python, and deferring it (a
# node, then forcing it) cost ~1-1.4 us more than its whole eager run (~2.6 us), for nothing
# in a chain of at most SHORT_CHAIN ops (it runs node by node).  Eager scripts on tiny
# tensors mostly run a few elementwise ops between two other ops (a product, an index):
# those run at once.  The op after SHORT_CHAIN in a row defers, and so does the rest of a
# long chain, until another op or a force (``_streak``): a long chain still fuses.  A traced
# step (``ember.compile``, an optimizer's replay) and CUDA (where a launch costs more than
# the Python) defer from TRACED_MIN_SIZE elements.  (docs/decisions.md "Fusion")
MIN_SIZE = 65
TRACED_MIN_SIZE = 2
# the run of tiny CPU ops at once, each reading the result of the one before (its length
# and the last result); another op or a force ends it
_streak = 0
_last = None
# ops per kernel: compile time grows with them (a 128-op CPU kernel: ~4 s cold); 128 holds a
# BALANCED backward that recomputes a 40-op chain and differentiates it in one kernel
MAX_NODES = 128
# array inputs + outputs, and inputs, of one kernel.  CUDA: the kernel's parameters (4 kB)
# and the chain, one device function call (CPython passes more than 30 arguments as *args,
# which Numba cannot inline).  The CPU could take more, but kernels of 40-50 arrays compile
# in 30-60 s each, and with programs cached (below) 64/64 gained the autodiff tanh chain
# (50 kept outputs) only 0.98 -> 0.95 ms (docs/decisions.md).  Programs are planned under
# these limits: clear ``_PROGRAMS`` after changing them.
MAX_ARRAYS = 16
MAX_LEAVES = 24

# A chain of fewer than HOT_SIZE elements runs op by op on the eager kernels (compiled once for
# all chains) until its structure has been forced HOT_RUNS times; then it compiles.  A fused
# kernel costs ~1-2 s to compile cold and saves ~1.5 us per op per run on small tensors, so
# it pays only for chains that repeat (a loop's step), not for the one-off chains of a
# script's setup or a test (docs/decisions.md "Fusion", "Hot chains").  Larger chains compile
# at once, as does every chain of a step ``ember.compile`` traces.
HOT_RUNS = 64
HOT_SIZE = 1 << 16
# A chain of at most SHORT_CHAIN ops whose result has at most SHORT_SIZE elements runs node by
# node (``_run_short``): forcing a fused chain costs ~15 us of planning and launching (~40 with
# a broadcast operand), a node on 6 elements ~1.5 us and on 8192 ~10-15 us, whose memory traffic
# stays in cache.  Measured (docs/decisions.md "Fusion"): a bias add and tanh on 128 x 64,
# fused 48 us, node by node 30; five ops 69 against 65; from 32768 elements fusion wins.
SHORT_CHAIN = 8
SHORT_SIZE = 1 << 13

ENABLED = os.environ.get("EMBER_FUSION", "1").strip().lower() not in ("0", "false", "off", "no")
FUSABLE = ELEMENTWISE

_SEQ = itertools.count()
_by_seq = operator.attrgetter("seq")
_STATS = {"kernels": 0, "fused_ops": 0, "outputs": 0, "eager": 0, "cold": 0}
# ops deferred = creation numbers taken since the last reset, less those stats() took itself
# (no counter to bump per op)
_seq_base = next(_SEQ)


def set_enabled(flag):
    """Turn fusion on or off for the ops that follow; returns the previous setting.

    Values already deferred are still computed (fused) when read.
    """
    global ENABLED
    previous = ENABLED
    ENABLED = bool(flag)
    return previous


def is_enabled():
    """True when elementwise ops are deferred and fused."""
    return ENABLED


def stats(reset=False):
    """Counters since the start (or the last reset): ops ``deferred``; fused ``kernels`` run,
    the ``fused_ops`` they computed and the ``outputs`` they wrote; deferred ops that had
    nothing to fuse with and ran ``eager``; the ops of chains not yet hot (``HOT_RUNS``),
    which ran one by one on the eager kernels, ``cold``.  A reduction that computes its input chain
    counts as a kernel; its root is an output only when something else holds it."""
    global _seq_base
    now = next(_SEQ)   # (numbers only need to grow: this one is skipped)
    out = {"deferred": now - _seq_base, **_STATS}
    _seq_base += 1
    if reset:
        for k in _STATS:
            _STATS[k] = 0
        _seq_base = now + 1
    return out


def force(*tensors):
    """Compute the deferred values of ``tensors`` now; returns them (``ember.fusion.force(t)``)."""
    for t in tensors:
        t._data  # noqa: B018  (reading the storage forces it)
    return tensors[0] if len(tensors) == 1 else tensors


class Deferred:
    """An elementwise op not computed yet: what a Tensor holds instead of an array.

    ``args`` are arrays or Deferred nodes of the same shape; ``value`` is the array once
    computed (then ``args`` is dropped).  ``weight`` bounds the number of ops of the chain
    below (shared nodes counted once per use: an overestimate), ``exact`` when it is the
    number (each node down the chain reads at most one pending node); ``seq`` numbers nodes in
    creation order and ``low`` is the lowest number of the chain, so ``seq - low + 1``
    bounds its size too (exact when nothing else was deferred meanwhile, as in a backward).
    """

    __slots__ = ("op", "args", "shape", "dtype", "device", "value", "weight", "exact", "seq",
                 "low")

    def force(self):
        """The computed array (runs the fused kernel the first time)."""
        v = self.value
        if v is None:
            v = _force(self)
        return v

    def __repr__(self):
        state = "computed" if self.value is not None else "pending"
        return f"Deferred({self.op.name}, shape={self.shape}, dtype={self.dtype.name}, {state})"


# --- what dispatch calls -------------------------------------------------------------------
_FUSED_REDUCTIONS = frozenset((Op.SUM, Op.PROD, Op.MAX, Op.MIN))
prod = math.prod


def elementwise(op, inputs, shape, dtype, device):
    """Elementwise ``op`` on tensors ``inputs`` (validated, promoted, broadcast to ``shape``):
    a ``Deferred`` node of ``shape`` and ``dtype``, or the array computed at once when fusion
    is off, the output has fewer than ``TRACED_MIN_SIZE`` elements, or fewer than
    ``MIN_SIZE`` on the CPU outside a traced step and at most ``SHORT_CHAIN`` such ops ran
    at once in a row.  (One function, deferring included: a call less per op.)"""
    global _streak, _last
    n = prod(shape)
    # a tiny CPU op outside a traced step, not too far into a run of them: at once
    tiny = (n < MIN_SIZE and n >= TRACED_MIN_SIZE and _streak < SHORT_CHAIN and ENABLED
            and backends._recorder is None and device.type == "cpu")
    if tiny or not ENABLED or n < TRACED_MIN_SIZE:
        # their storage, as Tensor._data reads it; one and two inputs (every op but where)
        # written out: per-op overhead
        n = len(inputs)
        if n == 2:
            x = inputs[0]._buf
            y = inputs[1]._buf
            if type(x) is Deferred:
                x = inputs[0]._data
            if type(y) is Deferred:
                y = inputs[1]._data
            arrays = (x, y)
        elif n == 1:
            x = y = inputs[0]._buf
            arrays = (x if type(x) is not Deferred else inputs[0]._data,)
        else:
            arrays = [t._data for t in inputs]
            x = y = None
        out = device.backend.elementwise(op, arrays, shape, dtype)
        if tiny:   # the length of the run of tiny ops at once, each reading the one before
            _streak = _streak + 1 if x is _last or y is _last else 1
            _last = out
        return out
    args = []
    weight = 1
    seq = next(_SEQ)
    low = seq
    exact = True
    pending = 0
    for t in inputs:
        d = t._buf
        if type(d) is Deferred:
            if d.value is not None:
                d = d.value
            elif d.shape != shape:   # broadcast: compute the smaller operand on its own
                d = t._data
            else:
                weight += d.weight
                exact = d.exact
                pending += 1
                if d.low < low:
                    low = d.low
        args.append(d)
    if weight > MAX_NODES and (pending > 1 or not exact):
        # the sum counts shared nodes once per use; the span of creation numbers bounds
        # the size too (exact in a chain nothing else interleaved with); else count exactly
        weight = min(weight, seq - low + 1)
        if weight > MAX_NODES:
            weight = _size(args)
    if weight > MAX_NODES:
        # too long: compute the operands first, this op starts a new chain
        args = d = None
        args = [t._data for t in inputs]
        weight = 1
        low = seq
        pending = 0
    node = Deferred()
    node.op = op
    node.args = tuple(args)
    node.shape = shape
    node.dtype = dtype
    node.device = device
    node.value = None
    node.weight = weight
    node.exact = exact and pending < 2
    node.seq = seq
    node.low = low
    return node


def run(op, inputs, params, device):
    """Any other op: a sum, prod, max or min of a pending chain computes the chain as it
    reduces where the backend can (``reduce_deferred``); everything else runs on the device's
    backend, its pending inputs computed first."""
    global _streak
    _streak = 0
    if len(inputs) == 1:   # most ops, reductions among them (per-op overhead: no list)
        # (no local variable may hold the node: reduce_deferred counts its references)
        t = inputs[0]
        if type(t._buf) is Deferred:
            if op in _FUSED_REDUCTIONS:
                return reduce_deferred(op, t, params)
            return device.backend.run(op, (t._data,), params)
        return device.backend.run(op, (t._buf,), params)
    if len(inputs) == 2:   # matmul, cat of two, indexing ops: no list either
        a, b = inputs
        return device.backend.run(op, (a._data, b._data), params)
    return device.backend.run(op, tuple([t._data for t in inputs]), params)


def _size(args):
    """The exact number of ops of a new node over ``args``: shared nodes once."""
    seen = set()
    stack = list(args)
    weight = 1
    while stack:
        a = stack.pop()
        if type(a) is Deferred and a.value is None and id(a) not in seen:
            seen.add(id(a))
            weight += 1
            stack.extend(a.args)
    return weight


# --- forcing ----------------------------------------------------------------------------
_TYPE_NAMES = {}


def _type_name(np_dtype):
    # numpy's dtype.name is a slow Python property; the dtype itself hashes in C
    name = _TYPE_NAMES.get(np_dtype)
    if name is None:
        name = _TYPE_NAMES[np_dtype] = np_dtype.name
    return name


def _plan(root):
    """The chain below ``root``: (nodes in topological order, root last; leaves; leaf
    kinds; key entries of the nodes: (op, dtype name, refs); uses of each node inside the
    chain, by position).

    Nodes are numbered when created, after their arguments, so sorting by number is a
    topological order.  An input array used several times is one leaf
    (``dispatch.constant`` shares equal constants: a loop's repeated constants are one
    argument).  Runs at every force: the entries name the op (which hashes in C) and the
    uses are a list, not a dict (the autodiff tanh chain's planning 47 -> 39 us per 120
    nodes); the backend turns ops into scalar functions once per program.
    """
    # (nodes hash by identity: they are dict keys themselves; arrays are not hashable)
    order = [root]
    seen = {root}
    stack = [root]
    while stack:
        for a in stack.pop().args:
            if type(a) is Deferred and a.value is None and a not in seen:
                seen.add(a)
                order.append(a)
                stack.append(a)
    del seen
    order.sort(key=_by_seq)
    pos = {n: k for k, n in enumerate(order)}
    leaves = []
    kinds = []
    where = {}
    entries = []
    uses = [0] * len(order)
    for n in order:
        refs = []
        for a in n.args:
            if type(a) is Deferred:
                v = a.value
                if v is None:
                    k = pos[a]
                    refs.append(-1 - k)
                    uses[k] += 1
                    continue
                a = v
            i = where.get(id(a))
            if i is None:
                i = where[id(a)] = len(leaves)
                leaves.append(a)
                # one value (a constant, or a broadcast one: all strides 0, as the seed of
                # a backward): read once, not element by element
                one = a.size == 1 or not any(a.strides)
                kinds.append(("s", _type_name(a.dtype)) if one else ("a", None))
            refs.append(i)
        entries.append((n.op, n.dtype.name, tuple(refs)))
    return order, leaves, kinds, entries, uses


def _refcounts(order):
    # kept apart and calibrated below with the same code, so the count of references this
    # very function holds (the list slot, the loop variable, the argument) cancels out
    return [sys.getrefcount(n) for n in order]


_BASE = _refcounts([object()])[0]


def _outputs(order, uses):
    """Positions of the nodes to write: the root (last) and those referenced from outside
    the chain (by a tensor, a saved autodiff value, another deferred op)."""
    counts = _refcounts(order)
    last = len(order) - 1
    return [k for k, c in enumerate(counts) if k == last or c > _BASE + uses[k]]


def _pending(args):
    for a in args:
        if type(a) is Deferred and a.value is None:
            return True
    return False


def _force(root):
    # (no local variable of this function may hold a node of the chain: see _outputs)
    global _streak
    _streak = 0
    if not _pending(root.args):   # nothing to fuse: the eager kernel, compiled once for all
        return _run_alone(root)
    if root.weight <= SHORT_CHAIN and prod(root.shape) <= SHORT_SIZE:
        return _run_short(root)
    order, leaves, kinds, entries, uses = _plan(root)
    key = (tuple(kinds), tuple(entries), tuple(_outputs(order, uses)))
    program = _PROGRAMS.get(key)
    if program is None:
        runs = _COLD.get(key, 0) + 1
        if runs < HOT_RUNS and prod(root.shape) < HOT_SIZE and backends.recorder() is None:
            _COLD[key] = runs
            return _run_each(order)
        _COLD.pop(key, None)
        program = _PROGRAMS[key] = _program(key)
    for launch in program:
        launch.run(order, leaves)
    return root.value


class _Launch:
    """One kernel of a chain's program, computed from ``sources`` (the chain's leaf ``i >= 0``,
    or the value of node ``-1 - i``, computed by an earlier launch; None: the chain's leaves),
    writing the nodes at positions ``outputs`` (of the chain).  ``key`` is the chain the
    backend runs as IR op ``FUSED``; ``kernels`` keeps each backend's compiled form of it."""

    __slots__ = ("key", "sources", "outputs", "kinds", "n_ops", "kernels")

    def __init__(self, key, sources, outputs):
        self.key = key
        self.sources = sources
        self.outputs = outputs
        self.kinds = [k[0] for k in key[0]]
        self.n_ops = len(key[1])
        self.kernels = {}   # backend -> its prepared kernel of ``key``

    def run(self, order, leaves):
        values = self.sources
        if values is None:   # the whole chain: its leaves as they are
            values = leaves
        else:
            values = [leaves[i] if i >= 0 else order[-1 - i].value for i in values]
        out_nodes = [order[k] for k in self.outputs]
        root = out_nodes[-1]
        backend = root.device.backend
        kernel = self.kernels.get(backend)
        if kernel is None:
            kernel = self.kernels[backend] = backend.prepare_chain(self.key)
        outs = backend.execute(Op.FUSED, *values, chain=self.key, kernel=kernel, kinds=self.kinds,
                               shape=root.shape, dtypes=[n.dtype for n in out_nodes])
        for node, v in zip(out_nodes, outs):
            node.value = v
            node.args = None   # the inputs are no longer needed by this node
        _STATS["kernels"] += 1
        _STATS["fused_ops"] += self.n_ops
        _STATS["outputs"] += len(out_nodes)


def _fits(kinds, n_written):
    """Whether one kernel takes a chain reading leaves of ``kinds`` and writing ``n_written``
    values: ``MAX_ARRAYS`` array inputs and outputs, ``MAX_LEAVES`` inputs."""
    return (n_written + sum(1 for k in kinds if k[0] == "a") <= MAX_ARRAYS
            and len(kinds) <= MAX_LEAVES)


# chain key -> its launches (a list of _Launch): a chain seen before (a training step's)
# skips planning its segments and looking its kernels up
_PROGRAMS = {}
# chain key -> times forced while not hot (HOT_RUNS); a hot chain's key moves to _PROGRAMS
_COLD = {}


def _program(key):
    """The launches that compute chain ``key``: one kernel when it fits the limits, else
    consecutive segments of its (topological) order, each as long as fits.

    A segment's arrays are its array leaves, the values of earlier segments it reads, and
    the values it writes: nodes held outside the chain and nodes later segments read.
    """
    kinds, entries, outputs = key
    if _fits(kinds, len(outputs)):
        return [_Launch(key, None, list(outputs))]
    n = len(entries)
    held = [False] * n
    for k in outputs:
        held[k] = True
    last_use = [-1] * n
    for k, (_, _, refs) in enumerate(entries):
        for i in refs:
            if i < 0:
                last_use[-1 - i] = k
    # ``written[k]``: node k is written when a segment ends at k or later
    written = [held[k] or last_use[k] > k for k in range(n)]
    expiring = {}   # position -> nodes (not held) it is the last reader of
    for j in range(n):
        if written[j] and not held[j]:
            expiring.setdefault(last_use[j], []).append(j)
    program = []
    start = 0
    while start < n:
        local = {}   # global ref (leaf i >= 0, earlier node -1 - j) -> this segment's leaf
        arrays = live = 0
        end = start
        for k in range(start, n):
            new = new_leaves = 0
            refs = entries[k][2]
            for m, i in enumerate(refs):
                if i not in local and (i >= 0 or -1 - i < start) and i not in refs[:m]:
                    new_leaves += 1
                    new += i < 0 or kinds[i][0] == "a"
            now = live + written[k]
            for j in expiring.get(k, ()):
                if j >= start:
                    now -= 1
            if k > start and (arrays + new + max(now, 1) > MAX_ARRAYS
                              or len(local) + new_leaves > MAX_LEAVES):
                break
            for i in refs:
                if i not in local and (i < 0 and -1 - i < start or i >= 0):
                    local[i] = len(local)
            arrays += new
            live = now
            end = k
        sources = list(local)   # in insertion order: local indices
        seg_kinds = tuple(kinds[i] if i >= 0 else ("a", None) for i in sources)
        seg_entries = []
        for k in range(start, end + 1):
            fn, dtype, refs = entries[k]
            seg_entries.append((fn, dtype, tuple(
                local[i] if i >= 0 or -1 - i < start else i + start for i in refs)))
        seg_outputs = [k for k in range(start, end + 1) if held[k] or last_use[k] > end]
        seg_key = (seg_kinds, tuple(seg_entries), tuple(k - start for k in seg_outputs))
        program.append(_Launch(seg_key, sources, seg_outputs))
        start = end + 1
    return program


def _run_short(node):
    """A short chain of tiny tensors, node by node on the eager kernels (the same values, bit
    for bit): planning and launching a fused kernel cost ~15 us, more than a few launches."""
    for a in node.args:
        if type(a) is Deferred and a.value is None:
            _run_short(a)
    return _run_alone(node)


def _run_each(order):
    """Compute a chain not yet hot: each node of ``order`` (topological) on the eager kernel
    its op runs alone, as with fusion off (the same values, bit for bit)."""
    for node in order:
        _run_alone(node, "cold")
    return order[-1].value


def _run_alone(node, counter="eager"):
    # (the backend's positional elementwise entry: no keyword dict per call); ``counter``: the
    # stats() entry it counts in
    args = [a.value if type(a) is Deferred else a for a in node.args]
    node.value = node.device.backend.elementwise(node.op, args, node.shape, node.dtype)
    node.args = None
    _STATS[counter] += 1
    return node.value


# --- fused reductions ---------------------------------------------------------------------
# A sum (prod, max, min) of a pending chain on the CPU computes the chain inside the
# reduction kernel (kernels/cpu/fused_reduce.py): the chain's root is never written, unless
# something besides the reduced tensor holds it; nodes held outside are written as in
# _force.  Anything else forces the chain and runs the plain reduction.
_REDUCE_OPS = {"add", "mul", "maximum", "minimum"}
# Smaller inputs are computed first and reduced by the shared eager kernel: their values stay
# in cache anyway, and every distinct chain would compile a fused reduction of its own (~2 s
# cold; a test suite's loss `sum(out * w)` after each op under test made a cold run ~3x
# longer)
REDUCE_MIN_SIZE = 1 << 16


def reduce_deferred(op, t, params):
    """Reduction ``op`` (params ``axes``, ``dtype``) of tensor ``t``, whose storage is a
    Deferred node: fused with its pending chain where the backend's ``fused_reduce_plan``
    allows (IR op ``FUSED_REDUCE``), else computed first and reduced."""
    if (t._buf.value is None and op.scalar in _REDUCE_OPS
            and math.prod(t._buf.shape) >= REDUCE_MIN_SIZE):
        out = _reduce_fused(op, t, params["axes"], params["dtype"])
        if out is not None:
            return out
    return t._device.backend.execute(op, t._data, **params)


def _reduce_fused(op, t, axes, dtype):
    # (as in _force, no local variable may hold a node of the chain: see _outputs)
    backend = t._device.backend
    shape = t._buf.shape
    where = backend.fused_reduce_plan(op.scalar, shape, t._buf.dtype.np, axes, dtype.np)
    if where is None:
        return None
    order, leaves, kinds, entries, uses = _plan(t._buf)
    counts = _refcounts(order)
    last = len(order) - 1
    # the root is held by ``t`` (one reference): written only when held elsewhere too
    root_held = counts[last] > _BASE + 1
    outputs = [k for k, c in enumerate(counts) if k < last and c > _BASE + uses[k]]
    if not _fits(kinds, len(outputs) + root_held):
        return None
    chain = (tuple(kinds), tuple(entries), (*outputs, last))
    out_nodes = [order[k] for k in outputs]
    root_dtype = order[last].dtype
    del order
    result, outs, root_out = backend.execute(
        Op.FUSED_REDUCE, *leaves, chain=chain, combiner=op.scalar, kinds=[k[0] for k in kinds],
        shape=shape, axes=axes, dtypes=[n.dtype for n in out_nodes], root_dtype=root_dtype,
        root_written=root_held, out_dtype=dtype, where=where)
    for node, v in zip(out_nodes, outs):
        node.value = v
        node.args = None
    if root_out is not None:
        t._buf.value = root_out
        t._buf.args = None
        t._buf = root_out   # as reading t._data does
    _STATS["kernels"] += 1
    _STATS["fused_ops"] += len(entries)
    _STATS["outputs"] += len(out_nodes) + root_held
    return result
