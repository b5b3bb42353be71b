"""Lowering a compiled step of tiny float64 tensors to one tape (``kernels/cpu/tape.py``).

``ember.compile`` asks the backend for a replay of its kept launches (``CpuBackend.tape``).
Where every array of the program is float64 with at most ``MAX_ELEMENTS`` elements and every
launch is an op the tape knows, the program becomes a tape the interpreter kernel runs in
one call; otherwise ``lower`` returns None and the replay binds each launch.

The lowering follows the launches in order with, per register, its *map*: an int64 array of
the register's shape whose entries are the arena positions of its elements.

- A constant is copied into the arena once; an input (a call's argument, an optimizer's
  parameter or state) gets a region its value is copied into at every call.
- Views (reshape, permute, expand, slices, flips), contiguous copies, concatenation and slice
  assignment are done to the maps, by the very numpy operations the CPU backend does to the
  values: they cost nothing at run time.
- Elementwise ops, fused chains (node by node), matmul and the reductions become
  instructions writing a fresh region each (the arena is written once per position, so a
  map stays valid for the whole program).

The results (and the optimizers' new state) are gathered from the arena into new arrays.
"""
import math
import threading

import numpy as np

from ...ir import ELEMENTWISE, Op

MAX_ELEMENTS = 4096   # the largest array a tape takes: past it, kernels and BLAS win

_REDUCTIONS = frozenset((Op.SUM, Op.PROD, Op.MAX, Op.MIN))
_VIEWS = frozenset((Op.RESHAPE, Op.PERMUTE, Op.EXPAND, Op.SLICE, Op.FLIP, Op.CONTIGUOUS))
_F64 = np.dtype(np.float64)


class Unsupported(Exception):
    """The program has a launch or an array the tape cannot run."""


def lower(steps, constants, inputs, keep, table):
    """``replay(R)`` running ``steps`` (``ember.compile``'s kept launches, in order) as one tape,
    or None.  ``constants[k]`` is register ``k``'s fixed value (None for the others), ``inputs``
    the registers a call fills, ``keep`` those read after the replay; ``table`` is the CPU
    backend's op table, whose view launchers are applied to the maps."""
    try:
        return _Lowering(constants, inputs, table).program(steps, keep)
    except Unsupported:
        return None


class _Lowering:
    def __init__(self, constants, inputs, table):
        from ember.kernels.cpu import tape
        self.k = tape
        self.table = table
        self.reducers = [name for name, _ in tape.REDUCERS]
        self.constants = constants
        self.inputs = inputs
        self.size = 0          # arena elements so far
        self.fill = []         # (offset, constant values)
        self.reads = []        # (register, offset, size): the inputs, copied in per call
        self.pool = []         # index arrays, concatenated into the pool
        self.pool_size = 0
        self.rows = []         # instructions
        self.maps = {}         # register -> its map

    # --- arena and pool ---------------------------------------------------------------------
    def region(self, shape):
        """A fresh arena region of ``shape``: (its map, its offset)."""
        n = math.prod(shape)
        off = self.size
        self.size += n
        return np.arange(off, off + n, dtype=np.int64).reshape(shape), off

    def index(self, m):
        """The pool offset of map ``m``'s positions in C order."""
        flat = np.ascontiguousarray(m, np.int64).reshape(-1)
        off = self.pool_size
        self.pool.append(flat)
        self.pool_size += flat.size
        return off

    def emit(self, code, dst, ia=0, ib=0, n=0, p1=0, p2=0, p3=0):
        self.rows.append((code, dst, ia, ib, n, p1, p2, p3))

    def map_of(self, k, array):
        m = self.maps.get(k)
        if m is not None:
            return m
        check(array)
        m, off = self.region(array.shape)
        if k in self.inputs:
            self.reads.append((k, off, array.size))
        elif self.constants[k] is not None:
            self.fill.append((off, np.asarray(self.constants[k], _F64).reshape(-1)))
        else:
            raise Unsupported("a register with neither a producer nor a value")
        self.maps[k] = m
        return m

    # --- the ops ----------------------------------------------------------------------------
    def elementwise(self, scalar, operands, shape):
        """A fresh region of ``shape`` holding scalar op ``scalar`` of the operand maps."""
        if len(operands) == 1 and scalar in self.k.UNARY:
            code = self.k.UNARY.index(scalar)
        elif len(operands) == 2 and scalar in self.k.BINARY:
            code = self.k.BINARY_BASE + self.k.BINARY.index(scalar)
        else:
            raise Unsupported(scalar)
        out, dst = self.region(shape)
        ia, *rest = (self.index(np.broadcast_to(m, shape)) for m in operands)
        self.emit(code, dst, ia, rest[0] if rest else 0, out.size)
        return out

    def fused(self, leaves, chain, shape):
        kinds, entries, outputs = chain
        leaf_maps = []
        for m, (kind, _) in zip(leaves, kinds):
            leaf_maps.append(m.reshape(-1)[:1].reshape(()) if kind == "s" else m)
        nodes = []
        for op, dtype, refs in entries:
            if np.dtype(dtype) != _F64:
                raise Unsupported(f"a fused node of {dtype}")
            operands = [leaf_maps[r] if r >= 0 else nodes[-1 - r] for r in refs]
            nodes.append(self.elementwise(op.scalar, operands, shape))
        return [nodes[i] for i in outputs]

    def matmul(self, a, b, out_shape):
        if a.ndim == 0 or b.ndim == 0:
            raise Unsupported("matmul of a 0-d operand")
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        m, k = a2.shape[-2:]
        c = b2.shape[-1]
        nb = math.prod(batch)
        out, dst = self.region(batch + (m, c))
        ia = self.index(np.broadcast_to(a2, batch + (m, k)))
        ib = self.index(np.broadcast_to(b2, batch + (k, c)))
        self.emit(self.k.MATMUL, dst, ia, ib, nb, m, k, c)
        return out.reshape(out_shape)

    def reduce(self, op, x, axes, out_shape):
        axes = sorted({a % x.ndim for a in axes}) if x.ndim else []
        kept = [d for d in range(x.ndim) if d not in axes]
        g = math.prod(x.shape[d] for d in axes)
        groups = x.transpose(kept + axes).reshape(-1, g) if g else None
        if groups is None:
            raise Unsupported("an empty reduction")
        out, dst = self.region((groups.shape[0],))
        self.emit(self.k.REDUCE_BASE + self.reducers.index(op.scalar), dst, self.index(groups), 0,
                  groups.shape[0], g)
        return out.reshape(out_shape)

    def launch(self, op, maps, params, out):
        """The maps of the launch's outputs (a list)."""
        single = [out] if hasattr(out, "shape") else list(out)
        for a in single:
            check(a)
        if op in ELEMENTWISE:
            return [self.elementwise(op.scalar, maps, params["shape"])]
        if op is Op.FUSED:
            return self.fused(maps, params["chain"], params["shape"])
        if op is Op.MATMUL:
            return [self.matmul(*maps, out.shape)]
        if op in _REDUCTIONS:
            return [self.reduce(op, maps[0], params["axes"], out.shape)]
        if op in _VIEWS:   # the backend's own launcher, on the map
            return [np.asarray(self.table[op](op, maps[0], **params))]
        if op in (Op.FROM_HOST, Op.TO_HOST):
            return [maps[0]]
        if op is Op.CAT:
            return [np.concatenate(maps, axis=params["axis"])]
        if op is Op.SLICE_ASSIGN:
            m = np.array(maps[0], order="C")
            m[params["index"]] = maps[1]
            return [m]
        raise Unsupported(op)

    # --- the program --------------------------------------------------------------------------
    def program(self, steps, keep):
        produced = set()
        for s in steps:
            if s[0] != "launch":
                raise Unsupported("a data-dependent check")
            _, _, op, ins, params, outs, _, arrays, out = s
            maps = [self.map_of(k, a) for k, a in zip(ins, arrays)]
            for k, m in zip(outs, self.launch(op, maps, params, out)):
                self.maps[k] = m
                produced.add(k)
        results = [(k, self.maps[k]) for k in sorted(keep) if k in produced]
        return _replay(self.k.interpreter(), self.arena(), self.pool_array(),
                       np.array(self.rows, np.int64).reshape(-1, self.k.WIDTH), self.reads,
                       results)

    def arena(self):
        a = np.zeros(self.size, _F64)
        for off, values in self.fill:
            a[off:off + values.size] = values
        return a

    def pool_array(self):
        return np.concatenate(self.pool) if self.pool else np.zeros(0, np.int64)


def check(array):
    if not isinstance(array, np.ndarray) or array.dtype != _F64:
        raise Unsupported("an array that is not float64")
    if array.size > MAX_ELEMENTS:
        raise Unsupported("a large array")


def _replay(run, arena, pool, rows, reads, results):
    lock = threading.Lock()   # the arena is the program's: one replay at a time
    gathers = [(k, m.reshape(-1), m.shape) for k, m in results]

    def replay(R):
        with lock:
            for k, off, n in reads:
                arena[off:off + n] = R[k].reshape(-1)
            run(rows, pool, arena)
            for k, m, shape in gathers:
                R[k] = arena.take(m).reshape(shape)

    replay.instructions = len(rows)
    return replay
