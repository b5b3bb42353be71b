"""Elementwise fusion: chains of elementwise ops run as one kernel (DESIGN §2).

When fusion is on (the default; ``EMBER_FUSION=0`` or ``set_enabled(False)`` turns it off),
``dispatch.apply`` does not run an elementwise op (casts included): after every check
(kinds, shapes, devices, strategies) and before autodiff records it, ``defer`` returns a
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

Limits: an op on fewer than ``MIN_SIZE`` elements runs at once (deferring costs more
than it saves there); a node whose operand has another shape (broadcasting) forces that
operand first, so every node of a kernel has the kernel's shape and can be written out;
an op that would make a chain longer than ``MAX_NODES`` ops or read more than
``MAX_ARRAYS`` arrays forces its operands first; and a chain that would still need more
than ``MAX_ARRAYS`` arrays (inputs and outputs) or ``MAX_LEAVES`` inputs computes its first
half on its own.
"""
import itertools
import math
import operator
import os
import sys

from .ir import ELEMENTWISE

# Outputs with fewer elements run eagerly (see docs/decisions.md "Fusion" for the measurement).
MIN_SIZE = 2
# ops per kernel: compile time grows with them (~0.13 s per op); 128 holds a BALANCED
# backward that recomputes a 40-op chain and differentiates it in one kernel
MAX_NODES = 128
MAX_ARRAYS = 16     # array inputs + outputs of one kernel (kernel arguments, CUDA params)
# inputs of one kernel: the CUDA chain is one call, and CPython passes more than 30
# arguments as *args, which Numba cannot inline
MAX_LEAVES = 24

ENABLED = os.environ.get("EMBER_FUSION", "1").strip().lower() not in ("0", "false", "off", "no")
FUSABLE = ELEMENTWISE

_SEQ = itertools.count()
_by_seq = operator.attrgetter("seq")
_STATS = {"deferred": 0, "kernels": 0, "fused_ops": 0, "outputs": 0, "eager": 0}


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
    nothing to fuse with and ran ``eager``."""
    out = dict(_STATS)
    if reset:
        for k in _STATS:
            _STATS[k] = 0
    return out


def force(*tensors):
    """Compute the deferred values of ``tensors`` now; returns them (``ember.fusion.force(t)``)."""
    for t in tensors:
        t._data  # noqa: B018  (reading the storage forces it)
    return tensors[0] if len(tensors) == 1 else tensors


class Deferred:
    """An elementwise op not computed yet: what a Tensor holds instead of an array.

    ``args`` are arrays or Deferred nodes of the same shape; ``value`` is the array once
    computed (then ``args`` is dropped).  ``weight`` and ``arrays`` bound the size of the
    chain below (shared nodes counted once per use: an overestimate); ``seq`` numbers nodes
    in creation order and ``low`` is the lowest number of the chain, so ``seq - low + 1``
    bounds its size too (exact when nothing else was deferred meanwhile, as in a backward).
    """

    __slots__ = ("op", "args", "shape", "dtype", "device", "value", "weight", "arrays", "seq",
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


def defer(op, inputs, params, device):
    """``op`` on tensors ``inputs`` as a Deferred node, or computed now when it is small.

    ``params`` are the elementwise op's (``shape``, ``dtype``); everything was checked.
    """
    shape = params["shape"]
    if math.prod(shape) < MIN_SIZE:
        return device.backend.execute(op, *[t._data for t in inputs], **params)
    args = []
    weight = 1
    arrays = 0
    seq = next(_SEQ)
    low = seq
    for t in inputs:
        d = t._buf
        if type(d) is Deferred:
            if d.value is not None:
                d = d.value
            elif d.shape != shape:   # broadcast: compute the smaller operand on its own
                d = t._data
            else:
                weight += d.weight
                arrays += d.arrays
                if d.low < low:
                    low = d.low
                args.append(d)
                continue
        if d.size != 1:
            arrays += 1
        args.append(d)
    weight = min(weight, seq - low + 1)
    if weight > MAX_NODES or arrays >= MAX_ARRAYS:
        # the sums count shared nodes once per use: count exactly before giving up
        weight, arrays = _size(args)
    if weight > MAX_NODES or arrays >= MAX_ARRAYS:
        # too long: compute the operands first, this op starts a new chain
        args = d = None
        args = [t._data for t in inputs]
        weight = 1
        low = seq
        arrays = sum(1 for d in args if d.size != 1)
    node = Deferred()
    node.op = op
    node.args = tuple(args)
    node.shape = shape
    node.dtype = params["dtype"]
    node.device = device
    node.value = None
    node.weight = weight
    node.arrays = arrays
    node.seq = seq
    node.low = low
    _STATS["deferred"] += 1
    return node


def _size(args):
    """Exact (ops, distinct input arrays) of a new node over ``args``: shared nodes once."""
    seen = set()
    leaves = set()
    stack = list(args)
    weight = 1
    while stack:
        a = stack.pop()
        if type(a) is Deferred:
            if a.value is None:
                if id(a) not in seen:
                    seen.add(id(a))
                    weight += 1
                    stack.extend(a.args)
                continue
            a = a.value
        if a.size != 1:
            leaves.add(id(a))
    return weight, len(leaves)


# --- forcing ----------------------------------------------------------------------------
_VARIANTS = {}


def _scalar_fn(op, dtype):
    """The scalar function the eager kernel of ``op`` with result ``dtype`` would use."""
    key = (op, dtype.name)   # a string hashes faster than the DType
    fn = _VARIANTS.get(key)
    if fn is None:
        from ember.kernels.rebind import variant
        fn = _VARIANTS[key] = variant(op.scalar, dtype.np)
    return fn


_TYPE_NAMES = {}


def _type_name(np_dtype):
    # numpy's dtype.name is a slow Python property; the dtype itself hashes in C
    name = _TYPE_NAMES.get(np_dtype)
    if name is None:
        name = _TYPE_NAMES[np_dtype] = np_dtype.name
    return name


def _plan(root):
    """The chain below ``root``: (nodes in topological order, root last; leaves; leaf
    kinds; key entries of the nodes; {position: uses inside the chain}).

    Nodes are numbered when created, after their arguments, so sorting by number is a
    topological order.  An input array used several times is one leaf
    (``dispatch.constant`` shares equal constants: a loop's repeated constants are one
    argument).
    """
    order = [root]
    seen = {id(root)}
    stack = [root]
    while stack:
        for a in stack.pop().args:
            if type(a) is Deferred and a.value is None and id(a) not in seen:
                seen.add(id(a))
                order.append(a)
                stack.append(a)
    order.sort(key=_by_seq)
    pos = {id(n): k for k, n in enumerate(order)}
    leaves = []
    kinds = []
    where = {}
    entries = []
    uses = {}
    for n in order:
        refs = []
        for a in n.args:
            if type(a) is Deferred:
                v = a.value
                if v is None:
                    k = pos[id(a)]
                    refs.append(-1 - k)
                    uses[k] = uses.get(k, 0) + 1
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
        entries.append((_scalar_fn(n.op, n.dtype), n.dtype.name, tuple(refs)))
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
    return [k for k, c in enumerate(counts) if k == last or c > _BASE + uses.get(k, 0)]


def _cut(entries, kinds, outputs):
    """The last position of a chain too big for one kernel whose start up to there fits:
    its array inputs and written values (those held outside, and itself) counted in order."""
    held = set(outputs)
    seen = set()
    arrays = 0
    best = 0
    for k, (_, _, refs) in enumerate(entries):
        for i in refs:
            if i >= 0 and i not in seen:
                seen.add(i)
                arrays += kinds[i][0] == "a"
        if arrays + (k in held) + 1 > MAX_ARRAYS or len(seen) > MAX_LEAVES:
            break
        arrays += k in held
        best = k
    return best


def _pending(args):
    for a in args:
        if type(a) is Deferred and a.value is None:
            return True
    return False


def _force(root):
    # (no local variable of this function may hold a node of the chain: see _outputs)
    if not _pending(root.args):   # nothing to fuse: the eager kernel, compiled once for all
        return _run_alone(root)
    host = root.device.type != "cuda"
    while True:
        order, leaves, kinds, entries, uses = _plan(root)
        outputs = _outputs(order, uses)
        n_arrays = len(outputs)
        for k in kinds:
            if k[0] == "a":
                n_arrays += 1
        if n_arrays <= MAX_ARRAYS and len(leaves) <= MAX_LEAVES:
            break
        # too big for one kernel: compute the longest start of the chain that fits on its
        # own, then that node is an input of the rest (never the root: it does not fit)
        first = order[_cut(entries, kinds, outputs)]
        del order, leaves, uses
        first.force()
        del first
    key = (tuple(kinds), tuple(entries), tuple(outputs))
    out_nodes = [order[k] for k in outputs]
    del order
    if host:
        values = _run_cpu(key, leaves, kinds, out_nodes, root)
    else:
        values = _run_cuda(key, leaves, kinds, out_nodes, root)
    for node, v in zip(out_nodes, values):
        node.value = v
        node.args = None   # the inputs are no longer needed by this node
    _STATS["kernels"] += 1
    _STATS["fused_ops"] += len(entries)
    _STATS["outputs"] += len(out_nodes)
    return root.value


def _run_alone(node):
    args = [a.value if type(a) is Deferred else a for a in node.args]
    node.value = node.device.backend.execute(node.op, *args, shape=node.shape, dtype=node.dtype)
    node.args = None
    _STATS["eager"] += 1
    return node.value


def _cpu_empty():
    try:
        from .memory import empty
    except ImportError:  # pragma: no cover - before the caching allocator exists
        import numpy as np
        return np.empty
    return empty


def _run_cpu(key, leaves, kinds, out_nodes, root):
    from ember.kernels.cpu import fused
    empty = _cpu_empty()
    shape = root.shape
    outs = [empty(shape, n.dtype.np) for n in out_nodes]
    fused.run(fused.kernel(key), leaves, [k[0] for k in kinds], outs, shape)
    return outs


def _run_cuda(key, leaves, kinds, out_nodes, root):
    from ember.kernels.cuda import fused
    backend = root.device.backend
    shape = root.shape
    outs = [backend.empty(shape, n.dtype.np) for n in out_nodes]
    n = outs[0].size
    views = [backend._broadcast(x, shape) for x in leaves]
    arrays = [v for v, k in zip(views, kinds) if k[0] == "a"]
    merged, strides = backend._merge_dims(shape, [list(v.strides) for v in arrays] +
                                          [list(outs[0].strides)])
    args = []
    st = iter(strides)
    for v, k in zip(views, kinds):
        if k[0] == "a":
            args += (v.buf, v.offset, tuple(next(st)))
        else:
            args += (v.buf, v.offset)
    b = backend._b
    with backend._context():
        backend._launch(fused.kernel(key), b.grid(n), b.THREADS, n, tuple(merged), *args,
                        *(o.buf for o in outs))
    return outs
