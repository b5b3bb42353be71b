"""The autodiff graph: nodes, their one-shot steps, and the backward walk.

A *node* is the autodiff identity of a tracked tensor: a marked leaf, or the
output of an op with a tracked input.  A non-leaf node carries its *step*, the
backward work of its op (``rule``, ``params``, the inputs' ``shapes`` and
``dtypes``, and only the values that backward reads: ``x`` and ``out``).  One
object holds both: an op output costs one allocation, not two.  Backward
consumes each reachable step once (drops ``rule`` and the saved values); a
second backward through a consumed step is refused before anything is consumed
(DESIGN §4, items 5–7).

The walk is iterative: nodes are numbered when created, so every node's number
is larger than its parents', and visiting reachable nodes by decreasing number
is a topological order.  Un-broadcasting and accumulation of fan-out happen
here, once, never in the rules.
"""
import itertools
import math
import operator

from ember import dispatch
from ember.backends import recorder
from ember.device import CheckpointingStrategy
from ember.dtypes import Complex, DType, Float
from ember.ir import Op
from ember.storage import TensorBase
from . import checkpoint
from .rules import COMPLEX_RULES, OUT, REPLAYABLE, RULES

BALANCED = CheckpointingStrategy.BALANCED

_counter = itertools.count()
_order = operator.attrgetter("order")
_new = object.__new__


class AutodiffError(RuntimeError):
    """A backward that cannot run: untracked root or consumed graph."""


class NotTrackedError(AutodiffError):
    pass


class GraphConsumedError(AutodiffError):
    pass


class Node:
    """Identity of one tracked tensor, and the step of a non-leaf (``rule`` is None for
    leaves and once consumed).  ``parents[i]`` is input i's node where it takes a gradient
    (a float tensor with a node), else None: rules test it to skip gradients nobody needs."""

    __slots__ = ("parents", "leaf", "consumed", "order", "op", "shape", "recipe", "distributed",
                 "rule", "params", "shapes", "dtypes", "x", "out", "balanced", "__weakref__")

    def __init__(self, op, shape, parents, rule, params, shapes, dtypes, x, out, recipe, balanced,
                 distributed):
        # every slot positional, no defaults: ``record`` makes one per tracked op
        self.parents = parents
        self.leaf = rule is None
        self.consumed = False
        self.order = next(_counter)
        self.op = op
        self.shape = shape
        self.recipe = recipe    # BALANCED checkpointing: how to recompute this output
        self.distributed = distributed  # leaves only: ember.distributed's mark, or None
        self.rule = rule
        self.params = params
        self.shapes = shapes    # input shapes (for un-broadcasting)
        self.dtypes = dtypes
        self.x = x              # saved inputs (None where not needed)
        self.out = out          # saved output(s) or None
        self.balanced = balanced  # recorded under BALANCED: x and out may hold recipes

    def describe(self):
        what = "marked leaf" if self.leaf else f"output of {dispatch.op_name(self.op)}"
        return f"tensor of shape {self.shape} ({what})"


def leaf(shape, distributed=None):
    return Node(None, shape, (), None, None, (), (), (), None, None, False, distributed)


def inner(t):
    """``t`` as a tensor without autodiff sharing its storage: what steps save.

    A deferred (fused) value stays deferred: both tensors share the node and its result.
    Always a new tensor object, also for a tensor without autodiff: ``t[k] = v`` rebinds
    ``t`` to a new value (copy-on-write), and a step must keep the value it was recorded with.
    """
    d = t._device
    if d._autodiff:
        d = d.base()
    s = type(t)()   # make(), inlined (once per saved value)
    s._buf = t._buf
    s._device = d
    s._dtype = t._dtype
    s._node = None
    return s


def record(op, inputs, params, out):
    """Attach a node (and its step) to ``out``, the result of ``op`` on ``inputs``.

    Under BALANCED checkpointing, values that are outputs of memory-bound ops
    are kept as recipes (``checkpoint.Recipe``) instead of tensors.
    (Runs once per op on tracked tensors: written for speed, no helper calls on the
    common path.)
    """
    rule = RULES.get(op)
    if rule is None:
        raise TypeError(f"{dispatch.op_name(op)}: has no gradient rule")
    # per input: its node where it takes a gradient (a float or complex tensor with a node),
    # else None.
    # Tuples, and one and two inputs (every elementwise op) written out: measured 0.06 ms
    # of the 0.94 ms autodiff tanh chain against a loop appending to lists
    n_in = len(inputs)
    if n_in == 2:
        a, b = inputs
        pa = a._node
        if pa is not None and a._dtype.kind is not Float and a._dtype.kind is not Complex:
            pa = None
        pb = b._node
        if pb is not None and b._dtype.kind is not Float and b._dtype.kind is not Complex:
            pb = None
        parents = (pa, pb)
        shapes = (a._buf.shape, b._buf.shape)
        dtypes = (a._dtype, b._dtype)
        mask = (pa is not None) | (pb is not None) << 1
    elif n_in == 1:
        a = inputs[0]
        pa = a._node
        if pa is not None and a._dtype.kind is not Float and a._dtype.kind is not Complex:
            pa = None
        parents = (pa,)
        shapes = (a._buf.shape,)
        dtypes = (a._dtype,)
        mask = int(pa is not None)
    else:
        parents = tuple(t._node if t._dtype.kind is Float or t._dtype.kind is Complex else None
                        for t in inputs)
        shapes = tuple(t._buf.shape for t in inputs)
        dtypes = tuple(t._dtype for t in inputs)
        mask = sum(1 << i for i, p in enumerate(parents) if p is not None)
    if dtypes[0].kind is Complex:   # complex inputs: their rule where it differs
        rule = COMPLEX_RULES.get(op, rule)
        keep = _keeps(rule.deps, mask)
    else:
        keep = _KEEP.get((op, mask))   # (an Op hashes in C, the Rule named tuple does not)
        if keep is None:
            keep = _KEEP[op, mask] = _keeps(rule.deps, mask)
    first = out[0] if type(out) is tuple else out
    balanced = first._device.checkpointing is BALANCED
    recipe = None
    x = (None,) * n_in
    saved_out = None
    if keep:
        x = list(x)
        save = inner
        if balanced:
            save = _balanced_ref
            if op in checkpoint.MEMORY_BOUND:
                recipe = checkpoint.Recipe(op, params, tuple(_balanced_ref(t) for t in inputs))
        for k in keep:
            if k == OUT:
                if type(out) is tuple:
                    saved_out = tuple(inner(o) for o in out)
                else:
                    saved_out = recipe or inner(out)
            else:
                x[k] = save(inputs[k])
        x = tuple(x)
    elif balanced and op in checkpoint.MEMORY_BOUND:
        recipe = checkpoint.Recipe(op, params, tuple(_balanced_ref(t) for t in inputs))
    node = _new(Node)   # Node.__init__ inlined: ~85 ns less per tracked op than the call
    node.parents = parents
    node.leaf = False
    node.consumed = False
    node.order = next(_counter)
    node.op = op
    node.shape = first._buf.shape
    node.recipe = recipe
    node.distributed = None
    node.rule = rule
    node.params = params
    node.shapes = shapes
    node.dtypes = dtypes
    node.x = x
    node.out = saved_out
    node.balanced = balanced
    first._node = node


# (op, bit mask of the inputs that take a gradient) -> what the step saves: input indices
# and OUT, each once
_KEEP = {}


def _keeps(deps, mask):
    keep = []
    for i, reads in enumerate(deps):
        if mask >> i & 1:
            keep += [k for k in reads if k not in keep]
    return tuple(keep)


def _balanced_ref(t):
    return checkpoint.value_ref(t, inner)


def sum_to(g, shape):
    """Sum a broadcast gradient back to ``shape``."""
    if g._buf.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and g.shape[lead + i] != 1)
    return g.sum(axes).reshape(shape)


def _collect(root):
    """Every node reachable from ``root``; refuses a consumed one before touching anything."""
    seen = {root}
    nodes = [root]
    stack = [root]
    while stack:
        n = stack.pop()
        if n.consumed:
            which = "the root" if n is root else "an intermediate"
            raise GraphConsumedError(
                f"backward: {which} {n.describe()} was already consumed by an earlier backward(); "
                "each graph runs backward once (no retain_graph): add the losses first and call "
                "backward() once, or run the forward again. Nothing was consumed.")
        for p in n.parents:
            if p is not None and p not in seen:
                seen.add(p)
                nodes.append(p)
                stack.append(p)
    return nodes


# ``hook(nodes, root_tensor)`` runs after the consumed-graph check and before anything is
# consumed (it may raise), and returns None or a sync object: ``sync.ready(leaf, grad)`` is
# called for each leaf with a ``distributed`` mark as soon as its gradient is complete
# (``grad`` None when none reached it), ``sync.finish(grads)`` after the walk.
# ember.distributed.init() installs one.
_backward_hook = None


def set_backward_hook(hook):
    """Install ``hook`` (see above; None removes it); returns the previous one."""
    global _backward_hook
    previous, _backward_hook = _backward_hook, hook
    return previous


def backward(root_tensor):
    """Gradients of ``root_tensor`` (seeded with ones) for every marked leaf it depends on."""
    root = root_tensor._node
    if root is None:
        raise NotTrackedError(
            "backward: the tensor is not tracked: no input of the computation requires a gradient. "
            "Call .autodiff().require_grad() on the source leaf (e.g. w = w.autodiff().require_grad()) "
            "before computing the loss.")
    if root_tensor._dtype.kind is Complex:
        # PyTorch's rule: the seed of ones is the gradient of a real loss only
        raise AutodiffError(
            f"backward: the root is complex ({root_tensor._dtype.name}); gradients are defined "
            "for a real loss: call backward() on a real tensor such as z.abs().sum() or z.real")
    nodes = _collect(root)
    nodes.sort(key=_order, reverse=True)
    if _backward_hook is None and recorder() is None:
        grads = _replayed(root_tensor, nodes)
        if grads is not None:
            return grads
    return _walk(root_tensor, nodes)


def _walk(root_tensor, nodes):
    """``backward``'s walk over ``nodes`` (every node reachable from the root, by decreasing
    creation number): each step's rule, un-broadcasting, accumulation of fan-out."""
    root = root_tensor._node
    from ember.creation import ones
    seed = ones(root_tensor.shape, dtype=root_tensor.dtype, device=root_tensor.device.base())
    grads = {root: seed}   # (nodes hash by identity)
    out = Gradients()
    # recipes exist only in steps recorded under BALANCED: without one, recomputing and
    # releasing do nothing, and the walk skips them
    recompute = None
    for n in nodes:
        if n.balanced:
            recompute = checkpoint.Recompute([n for n in nodes if n.rule is not None])
            break
    sync = _backward_hook(nodes, root_tensor) if _backward_hook is not None else None
    for n in nodes:
        g = grads.pop(n, None)
        if n.leaf:
            if g is not None:
                g = out._grads[n] = g.contiguous()
            if sync is not None and n.distributed is not None:
                sync.ready(n, g)   # every consumer of a leaf has a higher order: g is final
            continue
        n.consumed = True
        if recompute is not None:
            saved = checkpoint.saved_values(n)
            if g is not None:
                recompute.resolve(n)
        if g is not None:
            grads_in = n.rule.backward(n, g)
            for p, gi, shape in zip(n.parents, grads_in, n.shapes):
                if p is None or gi is None:
                    continue
                if gi._buf.shape != shape:
                    gi = sum_to(gi, shape)
                prev = grads.get(p)
                grads[p] = gi if prev is None else prev + gi
            grads_in = gi = prev = None
        if recompute is not None:
            recompute.done(saved)
            saved = None
        # consume: the saved values and recipes die here, before a later node forces a
        # deferred gradient (fusion writes out whatever is still held)
        n.rule = n.params = n.x = n.out = n.recipe = None
    if sync is not None:
        sync.finish(out)
    return out


# --- replaying the backward of a graph seen before (issue 19) ------------------------------
# A training loop builds the same graph at every step, and its backward runs the same rules
# on new values: ~10 us of Python a node.  After HOT_BACKWARDS backwards of one *kind* of
# graph (its nodes' ops, parameters, shapes, dtypes, devices, parents and saved values, and
# which saved values are one array), the walk is traced once by ember.compile's tracer and
# later backwards of the kind replay it on their saved values.
HOT_BACKWARDS = 8
MAX_KINDS = 64
_PROGRAMS = {}   # rough kind -> [(signature, parent positions, program)], newest first
_COLD = {}       # rough kind -> backwards of it so far


class _Unreplayable(Exception):
    """A graph whose backward is walked every time."""


def _freeze(v):
    """A hashable form of a step's parameter ``v`` (values of Python and Ember types)."""
    if isinstance(v, (tuple, list)):
        return (type(v).__name__,) + tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return ("dict",) + tuple((k, _freeze(x)) for k, x in v.items())
    if isinstance(v, slice):
        return ("slice", v.start, v.stop, v.step)
    if v is None or v is Ellipsis or isinstance(v, (bool, int, float, str, DType, Op,
                                                    CheckpointingStrategy)):
        return v
    raise _Unreplayable(type(v).__name__)


def _signature(nodes):
    """(the signature of the graph of ``nodes``, its saved values as tensors, its leaves).

    The signature is the kind of graph as columns over ``nodes``: each node's op, rule,
    parameters, shape, input shapes and dtypes and whether it is BALANCED's; which inputs and
    outputs it saved (and whether its output is a tuple); and which saved values are one
    array.  Two graphs are of one kind when their signatures are equal and their parents are
    at the same positions (``_same_parents``).  The saved values' shapes and dtypes follow
    from these, and every node of a graph of ``REPLAYABLE`` ops is on the root's device.
    Columns built by comprehensions and compared by ``==`` (identity first, in C): the RK4
    graph's 1918 nodes at every backward take 0.85 ms here and 0.7 ms to match, where a tuple
    per node, hashed and looked up, took 4.9 ms (``DType`` and the tuples hash in Python)."""
    flat = [x for n in nodes if not n.leaf for x in n.x]
    outs = [n.out for n in nodes]
    saved = [x for x in flat if x is not None]
    for o in outs:
        if o is not None:
            if type(o) is tuple:
                saved += o
            else:
                saved.append(o)
    first = {}   # (a BALANCED recipe has no array: itself)
    alias = [first.setdefault(id(getattr(x, "_buf", x)), k) for k, x in enumerate(saved)]
    sig = ([n.op for n in nodes], [n.rule for n in nodes], [n.params for n in nodes],
           [n.shape for n in nodes], [n.shapes for n in nodes], [n.dtypes for n in nodes],
           [n.balanced for n in nodes], [x is None for x in flat],
           [None if o is None else type(o) is tuple for o in outs], alias)
    return sig, saved, [n for n in nodes if n.leaf]


def _parents(nodes):
    """The positions in ``nodes`` of every node's parents, flattened (-1: none)."""
    index = {n: k for k, n in enumerate(nodes)}
    return [-1 if p is None else index[p] for n in nodes for p in n.parents]


def _same_parents(nodes, positions):
    expected = [None if k < 0 else nodes[k] for k in positions]
    return expected == [p for n in nodes for p in n.parents]


def _check_replayable(nodes, saved):
    """Raise ``_Unreplayable`` for a graph whose walk a replay may not stand for: an op
    outside ``REPLAYABLE`` or BALANCED's, a parameter of another type than Python's and
    Ember's values (``_freeze``: a later graph's is then compared by ``==`` safely), or a
    saved output that is a recipe."""
    for n in nodes:
        if n.leaf:
            continue
        if n.balanced or n.op not in REPLAYABLE:
            raise _Unreplayable(n.op)
        if n.params is not None:
            _freeze(n.params)
    if not all(isinstance(x, TensorBase) for x in saved):
        raise _Unreplayable("a saved recipe")


def _program(rough, sig, nodes):
    """The program of graph ``nodes`` among those of its rough kind, or None."""
    for known, positions, program in _PROGRAMS.get(rough, ()):
        try:
            same = known == sig
        except (TypeError, ValueError):   # (a parameter that does not compare as a value)
            same = False
        if same and _same_parents(nodes, positions):
            return program
    return None


def _replayed(root_tensor, nodes):
    """The Gradients of a replay of this kind of graph's traced walk, or None (walk it)."""
    root = nodes[0]
    d = root_tensor._device
    rough = (len(nodes), root.op, root.shape, root_tensor._dtype, d.type, d.index)
    runs = _COLD.get(rough, 0) + 1
    if runs < HOT_BACKWARDS:
        if len(_COLD) >= MAX_KINDS:
            _COLD.clear()
        _COLD[rough] = runs
        return None
    _COLD[rough] = math.inf   # (hot from now on)
    sig, saved, leaves = _signature(nodes)
    program = _program(rough, sig, nodes)
    if program is not None:
        grads = program.run(saved)
        for n in nodes:   # consumed as the walk consumes them
            if not n.leaf:
                n.consumed = True
                n.rule = n.params = n.x = n.out = n.recipe = None
    else:
        try:
            _check_replayable(nodes, saved)
        except _Unreplayable:
            _COLD[rough] = -math.inf   # (walked from now on)
            return None
        if sum(len(v) for v in _PROGRAMS.values()) >= MAX_KINDS:
            _PROGRAMS.clear()
        from ember.compile import trace

        def walk(_saved):
            g = _walk(root_tensor, nodes)._grads
            return [g.get(n) for n in leaves]
        positions = _parents(nodes)
        grads, program = trace(walk, (saved,), {}, list(saved), optimizers=False)
        # (a rule sees the graph through its node alone: saved values, which are the
        # program's inputs, and parameters of Python values (``_freeze``); the other arrays
        # it reads are made by it or are Ember's constants, which the program keeps)
        _PROGRAMS.setdefault(rough, []).insert(0, (sig, positions, program))
    out = Gradients()
    for n, g in zip(leaves, grads):
        if g is not None:
            out._grads[n] = g
    return out


class Gradients:
    """The gradients of one backward pass, looked up with ``t.grad(grads)``."""

    __slots__ = ("_grads",)

    def __init__(self):
        self._grads = {}

    def __len__(self):
        return len(self._grads)

    def __repr__(self):
        return f"Gradients({len(self._grads)} tensors)"

