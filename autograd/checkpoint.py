"""Gradient checkpointing: BALANCED keeps recipes for memory-bound ops, not their outputs.

Under ``CheckpointingStrategy.BALANCED`` the output of a memory-bound op
(elementwise, views, movement: cheap to recompute) is never saved for
backward.  Its node keeps a ``Recipe`` instead: the op, its static parameters
and its inputs, each either a kept tensor (a leaf, a constant, the output of a
compute-bound op) or the recipe of another memory-bound output.  When a step
needs such a value during backward, ``Recompute`` evaluates it from the
nearest kept ancestors, once, and drops it when its last reader is done.
Under ``NONE`` steps save tensors, and nothing here runs.
"""
from ember import dispatch
from ember.ir import ELEMENTWISE, Op

# cheap to recompute: elementwise math and data movement.  Masked selection
# (where / mask_fill) counts as compute-bound, as DESIGN §4 item 11 lists mask ops.
MEMORY_BOUND = (ELEMENTWISE - {Op.WHERE}) | {
    Op.RESHAPE, Op.PERMUTE, Op.EXPAND, Op.SLICE, Op.FLIP, Op.CONTIGUOUS, Op.SLICE_ASSIGN, Op.CAT}


class Recipe:
    """How to recompute one memory-bound output: ``op(*inputs, **params)``."""

    __slots__ = ("op", "params", "inputs", "__weakref__")

    def __init__(self, op, params, inputs):
        self.op = op
        self.params = params
        self.inputs = inputs


def value_ref(t, inner):
    """What a BALANCED step or recipe keeps for tensor ``t``: its recipe, or ``t`` itself."""
    node = t._node
    recipe = node.recipe if node is not None else None
    return recipe if recipe is not None else inner(t)


class Recompute:
    """Recomputes the recipes one backward pass reads, each once, dropping each after its last reader."""

    def __init__(self, nodes):
        self._memo = {}
        self._readers = {}
        pending = []
        for node in nodes:
            for v in saved_values(node):
                self._count(v, pending)
        while pending:
            for v in pending.pop().inputs:
                self._count(v, pending)

    def _count(self, v, pending):
        if type(v) is Recipe:
            n = self._readers.get(id(v), 0)
            if n == 0:
                pending.append(v)
            self._readers[id(v)] = n + 1

    def _release(self, v):
        if type(v) is Recipe:
            n = self._readers[id(v)] - 1
            self._readers[id(v)] = n
            if n == 0:
                self._memo.pop(id(v), None)

    def value(self, v):
        """The tensor behind ``v`` (recomputed iteratively: chains may be deep)."""
        if type(v) is not Recipe:
            return v
        memo = self._memo
        stack = [v]
        while stack:
            top = stack[-1]
            if id(top) in memo:
                stack.pop()
                continue
            missing = [i for i in top.inputs if type(i) is Recipe and id(i) not in memo]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            args = [memo[id(i)] if type(i) is Recipe else i for i in top.inputs]
            memo[id(top)] = dispatch.apply(top.op, *args, **top.params)
            for i in top.inputs:
                self._release(i)
        return memo[id(v)]

    def resolve(self, node):
        """Replace the recipes a node's step saved by their values, just before it runs."""
        node.x = tuple(self.value(v) if v is not None else None for v in node.x)
        out = node.out
        if type(out) is tuple:
            node.out = tuple(self.value(v) for v in out)
        elif out is not None:
            node.out = self.value(out)

    def done(self, saved):
        for v in saved:
            self._release(v)


def saved_values(node):
    """The tensors and recipes a node's step keeps (its saved inputs and outputs)."""
    out = node.out
    outs = out if type(out) is tuple else (() if out is None else (out,))
    return [v for v in (*node.x, *outs) if v is not None]
