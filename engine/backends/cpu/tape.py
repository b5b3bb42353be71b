"""Lowering a compiled step of small CPU tensors to one tape (``kernels/cpu/tape.py``).

``ember.compile`` asks the backend for a replay of its kept launches (``CpuBackend.tape``).
Where every array of the program has a dtype of the tape's arenas (float64, float32, int64,
bool) and at most ``MAX_ELEMENTS`` elements, and every launch is an op the tape knows, the
program becomes a tape that one compiled loop runs; otherwise ``lower`` returns None and the
replay binds each launch.

The lowering follows the launches in order with, per register, its *map*: the arena (slot)
holding its elements and an int64 array of the register's shape whose entries are their
positions there.

- A constant is copied into its arena once; an input (a call's argument, an optimizer's
  parameter or state) gets a region its value is copied into at every call.
- Views (reshape, permute, expand, slices, flips), contiguous copies, concatenation and
  slice assignment are done to the maps, by the very numpy operations the CPU backend does
  to the values: they cost nothing at run time.
- Elementwise ops, fused chains (one loop each, or node by node when short), matrix products,
  reductions, softmax and the index ops become instructions writing a fresh region each.
  An operand whose map is not
  affine in the way the instruction reads it is first copied into a contiguous region (once
  per register: later readers reuse the copy).
- A region is reused once no live register's map reaches it (after the last read of every
  register viewing it): a loop's temporaries stay in cache, as eager ones do in the pool.
- A data-dependent check (an index range) cuts the tape: the replay runs the instructions
  before it, makes the check on the values in the arenas, and goes on.

The results (and the optimizers' new state) are copied by the tape's last instructions into
fresh blocks made per call, which the returned arrays view.
"""
import math
import threading

import numpy as np

from ...ir import ELEMENTWISE, REDUCTIONS, Op
from ..shared import c_strides, chain_key, identity
from . import linalg
from .elementwise import JOINED_ROW, PARALLEL_MIN, SHORT_ROW

MAX_ELEMENTS = PARALLEL_MIN   # past it the eager kernels run on every core; a tape on one
IO_MAX = 1 << 13              # elements of an input or result past which the copies in and
                              # out cost more than the tape saves (docs/decisions.md)
BLAS_MIN = 1 << 12            # multiply-adds from which a product calls BLAS (else a loop)
CHAIN_MIN = 512               # elements from which a fused chain is one loop (else node by node)
CHAIN_MAX_NODES = 16          # (longer chains' loops take seconds to compile: node by node)
SHORT_SOFTMAX = 8             # softmax over rows of at most this many values: step by step

_VIEWS = frozenset((Op.RESHAPE, Op.PERMUTE, Op.EXPAND, Op.SLICE, Op.FLIP, Op.CONTIGUOUS))
_ARG = {Op.ARGMAX: "gt", Op.ARGMIN: "lt"}
_SLOT = {}   # numpy dtype -> arena slot (kernels/cpu/tape.py SLOTS)
OUT = 4      # the output blocks' slots: big results of arena slot s in OUT + s, small ones in
SMALL = 8    # SMALL + s (kernels/cpu/tape.py run)


class Unsupported(Exception):
    """The program has a launch or an array the tape cannot run."""


def lower(steps, constants, inputs, out_regs, table):
    """``replay(*ins) -> outs`` running ``steps`` (``ember.compile``'s kept launches and
    checks, in order) as one tape, or None.  ``constants[k]`` is register ``k``'s fixed value
    (None for the others); ``inputs`` maps each input register, in the order a call passes
    their arrays, to its array in the trace; a call returns the arrays of ``out_regs``, in
    order; ``table`` is the CPU backend's op table, whose view launchers are applied to the
    maps."""
    try:
        if any(a.size > IO_MAX for a in inputs.values()):
            raise Unsupported("a large input")
        return _Lowering(constants, inputs, table).program(steps, list(inputs), out_regs)
    except Unsupported:
        return None


def slot(dtype):
    if not _SLOT:
        from ember.kernels.cpu.tape import SLOTS
        _SLOT.update({np.dtype(name): k for k, name in enumerate(SLOTS)})
    k = _SLOT.get(dtype)
    if k is None:
        raise Unsupported(f"an array of {dtype}")
    return k


def _affine(m):
    """``(base, row stride, column stride)`` when 2-D map ``m`` is ``base + r*rs + c*cs``,
    else None."""
    rows, cols = m.shape
    if m.size == 0:
        return None
    base = int(m[0, 0])
    rs = int(m[1, 0]) - base if rows > 1 else 0
    cs = int(m[0, 1]) - base if cols > 1 else 0
    expect = (base + rs * np.arange(rows, dtype=np.int64)[:, None]
              + cs * np.arange(cols, dtype=np.int64))
    return (base, rs, cs) if np.array_equal(m, expect) else None


def _first(m):
    return int(m.pos.reshape(-1)[0]) if m.pos.size else 0


class _Map:
    """Where a register's (or a temporary's) elements are: arena ``slot``, positions ``pos``
    (an int64 array of its shape), and the regions (keys of ``_Lowering.regions``) they lie in."""

    __slots__ = ("slot", "pos", "regions", "reg")

    def __init__(self, slot, pos, regions):
        self.slot = slot
        self.pos = pos
        self.regions = regions
        self.reg = None   # the register this map was made for, if any

    def view(self, pos):
        return _Map(self.slot, pos, self.regions)


class _Lowering:
    def __init__(self, constants, inputs, table):
        from ember.kernels.cpu import tape
        self.k = tape
        self.table = table
        self.constants = constants
        self.inputs = inputs
        self.size = [0] * len(tape.SLOTS)   # elements of each arena
        self.free = {}         # (slot, n) -> offsets of free regions of n elements
        self.regions = {}      # (slot, offset) -> [n, live references, pinned]
        self.fill = []         # (slot, offset, constant values)
        self.reads = {}        # input register -> its pinned map, filled per call
        self.pool = []         # index arrays, concatenated into the pool
        self.pool_size = 0
        self.rows = []         # instructions
        self.names = []        # the op each instruction is part of (for errors)
        self.addresses = []    # kernel addresses; an instruction's field 0 indexes them
        self.index_of = {}
        self.segments = []     # ("tape", lo, hi) and ("check", check, [(slot, position)])
        self.checks = {}       # instruction of a range check -> (check, [(slot, position)])
        self.maps = {}         # register -> _Map
        self.dense = {}        # register -> its contiguous copy (``dense``), while both live
        self.op = None         # the launch being lowered
        self.blas_work = 0     # multiply-adds of the largest float product that calls BLAS
        self._temps = []       # regions no register holds, free after the launch

    # --- arenas, regions and the pool ---------------------------------------------------------
    def region(self, slot_, shape, pinned=False):
        """A map of a fresh region of ``shape`` in arena ``slot_`` (C order)."""
        n = math.prod(shape)
        if n == 0:   # (no elements, no region)
            return _Map(slot_, np.zeros(shape, np.int64), ())
        free = None if pinned else self.free.get((slot_, n))
        if free:   # (a pinned region, filled before the tape runs, is never a reused one)
            off = free.pop()
        else:
            off = self.size[slot_]
            self.size[slot_] += n
        key = (slot_, off)
        self.regions[key] = [n, 0, pinned]
        pos = np.arange(off, off + n, dtype=np.int64).reshape(shape)
        return _Map(slot_, pos, (key,))

    def hold(self, m):
        for key in m.regions:
            self.regions[key][1] += 1

    def drop(self, m):
        for key in m.regions:
            r = self.regions[key]
            r[1] -= 1
            if r[1] == 0 and not r[2]:
                del self.regions[key]
                self.free.setdefault((key[0], r[0]), []).append(key[1])

    def index(self, positions):
        """The pool offset of ``positions`` (flattened in C order)."""
        flat = np.ascontiguousarray(positions, np.int64).reshape(-1)
        off = self.pool_size
        self.pool.append(flat)
        self.pool_size += flat.size
        return off

    def emit(self, address, slots, params):
        i = self.index_of.get(address)
        if i is None:
            i = self.index_of[address] = len(self.addresses)
            self.addresses.append(address)
        slots = list(slots) + [0] * (4 - len(slots))
        row = [i, *slots, 0, *params]
        row += [0] * (self.k.WIDTH - len(row))
        self.rows.append(row)
        self.names.append(self.op)

    def kernel(self, template, op, dtypes, **bindings):
        dtypes = tuple(dtypes) + (None,) * (4 - len(dtypes))
        return self.k.kernel(template, op, dtypes, **bindings)

    def map_of(self, k, array):
        m = self.maps.get(k)
        if m is not None:
            return m
        check(array)
        m = self.region(slot(array.dtype), array.shape, pinned=True)
        if k in self.inputs:
            self.reads[k] = m
        elif self.constants[k] is not None:
            self.fill.append((m.slot, _first(m), np.asarray(self.constants[k]).reshape(-1)))
        else:
            raise Unsupported("a register with neither a producer nor a value")
        self.maps[k] = m
        m.reg = k
        self.hold(m)
        return m

    def dtype(self, m):
        return self.k.SLOTS[m.slot]

    # --- instructions -----------------------------------------------------------------------
    def copy_to(self, m, pos, slot_, off):
        """Elements ``pos`` (positions in ``m``'s arena, in C order) into ``slot_`` from
        ``off``: a vector copy when they are evenly spaced, else through the pool."""
        n = pos.size
        if n == 0:
            return
        dt = self.dtype(m)
        form = _affine(pos.reshape(1, n))
        if form is not None:
            self.emit(self.kernel("ew1", "identity", (dt, dt)), (slot_, m.slot),
                      (off, 1, n, form[0], 0, form[2]))
        else:
            self.emit(self.kernel("copy", None, (dt, dt)), (slot_, m.slot),
                      (off, n, self.index(pos)))

    def contiguous(self, m, order=None):
        """``m`` copied into a fresh contiguous region (positions ``order``, default ``m``'s
        own, in C order), free after this launch unless a register takes it."""
        pos = m.pos if order is None else order
        out = self.region(m.slot, pos.shape)
        self.copy_to(m, pos, out.slot, _first(out))
        self._temps.append(out)
        return out

    def dense_copy(self, m, wide):
        """Positions ``wide`` of ``m`` in a contiguous region; when they are all of a
        register's map in order, the copy is kept for its later readers."""
        k = m.reg
        if (k is not None and self.maps.get(k) is m and wide.size == m.pos.size
                and np.array_equal(wide.reshape(-1), m.pos.reshape(-1))):
            c = self.dense.get(k)
            if c is None:
                c = self.dense[k] = self.contiguous(m)
                self.hold(c)
            return c
        return self.contiguous(m, wide)

    def elementwise(self, fn, operands, shape, dtype):
        """A fresh region of ``shape`` and ``dtype`` holding scalar op ``fn`` of the operand
        maps (broadcast to ``shape``)."""
        out = self.region(slot(np.dtype(dtype)), shape)
        n = out.pos.size
        if n == 0:
            return out
        arity = len(operands)
        if arity not in (1, 2, 3):
            raise Unsupported(f"an elementwise op of {arity} operands")
        rows, cols, forms, wide = _layout([m.pos for m in operands], shape)
        if cols < SHORT_ROW and rows > 1:   # (the eager launcher's rule: row_operands)
            rows, cols, forms, wide = self.joined_rows(operands, rows, cols, forms, wide)
        fields = []
        for m, w, f in zip(operands, wide, forms):
            if f is None:   # not affine: a contiguous copy of the broadcast operand
                f = (_first(self.dense_copy(m, w)), cols, 1)
            fields += f
        dtypes = [str(np.dtype(dtype))] + [self.dtype(m) for m in operands]
        self.emit(self.kernel(f"ew{arity}", fn, dtypes), (out.slot, *(m.slot for m in operands)),
                  (_first(out), rows, cols, *fields))
        return out

    def joined_rows(self, operands, rows, cols, forms, wide):
        """Short rows (a bias over 2 logits) joined ``j`` at a time into rows of up to
        ``JOINED_ROW`` elements, where every operand is contiguous or repeats per row: the
        loop pays its per-row cost ``j`` times less.  A repeating operand (the bias) is then
        read from a copy of its first joined row.  Else the layout as it was."""
        j = max((j for j in range(1, JOINED_ROW // cols + 1) if rows % j == 0), default=1)
        if j == 1:
            return rows, cols, forms, wide
        rows2, cols2 = rows // j, cols * j
        wide2 = [w.reshape(rows2, cols2) for w in wide]
        forms2 = [_affine(w) for w in wide2]
        for i, (m, w, f) in enumerate(zip(operands, wide2, forms2)):
            if f is None:
                if not (w == w[:1]).all():
                    return rows, cols, forms, wide
                forms2[i] = (_first(self.contiguous(m, w[0])), 0, 1)
        return rows2, cols2, forms2, wide2

    def fused(self, leaves, chain, shape):
        """Chain ``chain`` (fusion's key) of ``leaves``: maps of its outputs.  A long enough
        chain is one instruction computing the chain's generated scalar function per element
        (``kernels/cpu/tape.py`` ``chain``: one pass over memory); a short one (or a long
        one of many nodes, whose loop would take long to compile) goes node by node, each as
        its eager kernel computes it.  Both give eager's results."""
        kinds, entries, outputs = chain
        n = math.prod(shape)
        if n >= CHAIN_MIN and len(entries) <= CHAIN_MAX_NODES:
            return self.chain(leaves, chain, shape)
        from ember.kernels.rebind import variant
        leaf_maps = [m.view(m.pos.reshape(-1)[:1].reshape(())) if kind[0] == "s" else m
                     for m, kind in zip(leaves, kinds)]
        nodes = []
        for op, dtype, refs in entries:
            operands = [leaf_maps[r] if r >= 0 else nodes[-1 - r] for r in refs]
            nodes.append(self.elementwise(variant(op.scalar, np.dtype(dtype)), operands, shape,
                                          dtype))
        wanted = set(outputs)
        self._temps += [m for i, m in enumerate(nodes) if i not in wanted]
        return [nodes[i] for i in outputs]

    def chain(self, leaves, chain, shape):
        kinds, entries, outputs = chain
        key = chain_key(chain)
        tape = self.k
        outs = [self.region(slot(np.dtype(entries[k][1])), shape) for k in outputs]
        arrays = [i for i, kind in enumerate(kinds) if kind[0] == "a"]
        rows, cols, forms, wide = _layout([leaves[i].pos for i in arrays], shape)
        modes = []
        fields = []
        it = iter(zip(forms, wide))
        for m, kind in zip(leaves, kinds):
            if kind[0] == "s":
                modes.append(tape.ONE)
                fields.append(_first(m))
                continue
            f, w = next(it)
            if f is None or f[2] not in (0, 1):
                f = (_first(self.dense_copy(m, w)), cols, 1)
            modes.append(tape.ROW if f[2] == 1 else tape.PER_ROW)
            fields += [f[0], f[1]]
        fields += [_first(o) for o in outs]
        address = tape.chain(key, tuple(self.dtype(m) for m in leaves), tuple(modes))
        self.emit(address, (0, 1, 2, 3), (rows, cols, self.index(np.array(fields, np.int64))))
        return outs

    def matmul(self, a, b, out_shape, dtype):
        if a.pos.ndim == 0 or b.pos.ndim == 0:
            raise Unsupported("matmul of a 0-d operand")
        if np.dtype(dtype).kind not in "fi":
            raise Unsupported(f"matmul of {dtype}")
        pa = a.pos[None, :] if a.pos.ndim == 1 else a.pos
        pb = b.pos[:, None] if b.pos.ndim == 1 else b.pos
        batch = np.broadcast_shapes(pa.shape[:-2], pb.shape[:-2])
        m, k = pa.shape[-2:]
        n = pb.shape[-1]
        nb = math.prod(batch)
        out = self.region(slot(np.dtype(dtype)), (nb, m, n))
        if out.pos.size == 0:
            return out.view(out.pos.reshape(out_shape))
        blas = np.dtype(dtype).kind == "f" and m * k * n >= BLAS_MIN
        fields = []
        for right, (mp, pos, r, c) in enumerate(((a, pa, m, k), (b, pb, k, n))):
            blocks = np.broadcast_to(pos, batch + (r, c)).reshape(nb, r, c)
            form = _matrix_form(blocks)
            # (a small transposed right operand of many rows: BLAS is faster on its copy)
            if form is None or (blas and right and form[2] and linalg.skinny_weight(m, k, n)):
                form = (_first(self.dense_copy(mp, blocks)), r * c, 0)
            fields += form
        dtypes = (str(np.dtype(dtype)), self.dtype(a), self.dtype(b))
        if blas:
            self.blas_work = max(self.blas_work, m * k * n)
            if m * k * n >= linalg.GEMM_MIN_WORK:   # (a product that wakes a BLAS pool)
                linalg.scipy_gemm_serves()
            address = self.kernel("matmul", None, dtypes)
        else:
            address = self.kernel("matmul_small", None, dtypes, ZERO=np.dtype(dtype).type(0))
        self.emit(address, (out.slot, a.slot, b.slot), (_first(out), nb, m, k, n, *fields))
        return out.view(out.pos.reshape(out_shape))

    def groups(self, m, lead):
        """``(base, os, qs)`` reading 2-D positions ``lead`` (groups x members) of map ``m``
        affinely, through a contiguous copy when they are not."""
        form = _affine(lead)
        if form is None:
            form = (_first(self.dense_copy(m, lead)), lead.shape[1], 1)
        return form

    def reduce(self, combiner, x, axes, out_shape, out_dtype):
        nd = x.pos.ndim
        axes = sorted({a % nd for a in axes}) if nd else []
        kept = [d for d in range(nd) if d not in axes]
        g = math.prod(x.pos.shape[d] for d in axes)
        nout = math.prod(x.pos.shape[d] for d in kept)
        out = self.region(slot(np.dtype(out_dtype)), (nout,))
        if nout == 0:
            return out.view(out.pos.reshape(out_shape))
        if combiner in ("logical_or", "logical_and") and self.dtype(x) != "bool":
            raise Unsupported("any/all of a non-bool array")
        lead = x.pos.transpose(kept + axes).reshape(nout, g)
        base, os, qs = self.groups(x, lead) if g else (0, 0, 0)
        init = identity(combiner, np.dtype(out_dtype))
        address = self.kernel("reduce", combiner, (str(np.dtype(out_dtype)), self.dtype(x)),
                              INIT=init.item() if hasattr(init, "item") else init)
        self.emit(address, (out.slot, x.slot), (_first(out), nout, g, base, os, qs))
        return out.view(out.pos.reshape(out_shape))

    def arg_reduce(self, op, x, axis, out_shape):
        pos = x.pos.reshape(1, -1) if axis is None else np.moveaxis(x.pos, axis, -1)
        g = pos.shape[-1] if pos.ndim else 1
        lead = pos.reshape(-1, g)
        nout = lead.shape[0]
        out = self.region(slot(np.dtype(np.int64)), (nout,))
        if nout and g:
            base, os, qs = self.groups(x, lead)
            self.emit(self.kernel("arg_reduce", _ARG[op], ("int64", self.dtype(x))),
                      (out.slot, x.slot), (_first(out), nout, g, base, os, qs))
        return out.view(out.pos.reshape(out_shape))

    def softmax(self, x, axis, log):
        dt = self.dtype(x)
        if dt not in ("float32", "float64"):
            raise Unsupported("softmax of a non-float array")
        moved = np.moveaxis(x.pos, axis, -1)
        g = moved.shape[-1]
        lead = moved.reshape(-1, g)
        if 1 < g <= SHORT_SOFTMAX and lead.size:
            return self.short_softmax(x.view(lead), moved.shape, axis, log)
        out = self.region(x.slot, moved.shape)
        if lead.size:
            form = _affine(lead)
            if form is None or (form[2] != 1 and g > 1):
                form = (_first(self.dense_copy(x, lead)), g, 1)
            suffix = "_f32" if dt == "float32" else ""
            address = self.kernel("softmax", None, (dt, dt), MAX="maximum", EXP="exp" + suffix,
                                  LOGF="log" + suffix, LOG=log)
            self.emit(address, (out.slot, x.slot), (_first(out), lead.shape[0], g, form[0], form[1]))
        return out.view(np.moveaxis(out.pos, -1, axis))

    def short_softmax(self, x, shape, axis, log):
        """Softmax over rows of a few values (``x``'s map is rows x g) as the eager formula's
        steps, each over all rows: the exps and logs then run as vector loops, where a row at
        a time ran them one by one (128 rows of 2: 11 us)."""
        from ember.kernels.rebind import variant
        dt = np.dtype(self.dtype(x))
        rows, g = x.pos.shape
        m = self.reduce("maximum", x, [1], (rows, 1), dt)
        t = self.elementwise("sub", [x, m], (rows, g), dt)
        e = self.elementwise(variant("exp", dt), [t], (rows, g), dt)
        s = self.reduce("add", e, [1], (rows, 1), dt)
        if log:
            ls = self.elementwise(variant("log", dt), [s], (rows, 1), dt)
            out = self.elementwise("sub", [t, ls], (rows, g), dt)
            self._temps += [m, t, e, s, ls]
        else:
            inv = self.elementwise("recip", [s], (rows, 1), dt)
            out = self.elementwise("mul", [e, inv], (rows, g), dt)
            self._temps += [m, t, e, s, inv]
        return out.view(np.moveaxis(out.pos.reshape(shape), -1, axis))

    def gather(self, x, index_pos, idx, axis, out_shape):
        """``out[e] = x[coordinates of e, with x[axis] = the index at index_pos[e]]``."""
        if x.pos.ndim == 0:
            raise Unsupported("indexing a 0-d array")
        if self.dtype(idx) != "int64":
            raise Unsupported("an index that is not int64")
        out = self.region(x.slot, out_shape)
        n = out.pos.size
        if n:
            base, st = _bases(out_shape, axis, c_strides(x.pos.shape))
            dt = self.dtype(x)
            self.emit(self.kernel("gather", None, (dt, dt, "int64")), (out.slot, x.slot, idx.slot),
                      (_first(out), n, self.index(x.pos), self.index(base), self.index(index_pos),
                       st, x.pos.shape[axis]))
        return out

    def scatter(self, x, idx, values, axis, reduce):
        if x.pos.ndim == 0:
            raise Unsupported("scattering into a 0-d array")
        if self.dtype(idx) != "int64":
            raise Unsupported("an index that is not int64")
        if values.slot != x.slot:
            raise Unsupported("values of another dtype")
        out = self.region(x.slot, x.pos.shape)
        self.copy_to(x, x.pos, out.slot, _first(out))
        n = idx.pos.size
        if n:
            base, st = _bases(idx.pos.shape, axis, c_strides(x.pos.shape))
            vpos = np.broadcast_to(values.pos, idx.pos.shape)
            dt = self.dtype(x)
            self.emit(self.kernel("scatter", None, (dt, dt, "int64")),
                      (out.slot, values.slot, idx.slot),
                      (_first(out), n, self.index(base), self.index(idx.pos), self.index(vpos), st,
                       x.pos.shape[axis], int(reduce == "add")))
        return out

    # --- a launch -----------------------------------------------------------------------------
    def launch(self, op, maps, params, out):
        """The maps of the launch's outputs (a list), in ``_arrays`` order."""
        outs = _flat(out)
        for a in outs:
            check(a)
        if op in ELEMENTWISE:
            from ember.kernels.rebind import variant
            return [self.elementwise(variant(op.scalar, out.dtype), maps, out.shape, out.dtype)]
        if op is Op.FUSED:
            return self.fused(maps, params["chain"], params["shape"])
        if op is Op.FUSED_REDUCE:
            nodes = self.fused(maps, params["chain"], params["shape"])
            root = nodes[-1]
            reduced = self.reduce(params["combiner"], root, params["axes"], outs[0].shape,
                                  outs[0].dtype)
            if not params["root_written"]:
                self._temps.append(root)
                return [reduced, *nodes[:-1]]
            return [reduced, *nodes]
        if op is Op.MATMUL:
            return [self.matmul(*maps, out.shape, out.dtype)]
        if op in REDUCTIONS:
            return [self.reduce(op.scalar, maps[0], params["axes"], out.shape, out.dtype)]
        if op in _ARG:
            return [self.arg_reduce(op, maps[0], params["axis"], out.shape)]
        if op in (Op.SOFTMAX, Op.LOG_SOFTMAX):
            return [self.softmax(maps[0], params["axis"] % max(out.ndim, 1),
                                 op is Op.LOG_SOFTMAX)]
        if op is Op.GATHER:
            x, idx = maps
            return [self.gather(x, idx.pos, idx, params["axis"], idx.pos.shape)]
        if op is Op.INDEX_SELECT:
            x, idx = maps
            axis = params["axis"]
            if x.pos.ndim == 0:
                raise Unsupported("index_select of a 0-d array")
            flat = idx.pos.reshape(-1)
            shape = x.pos.shape[:axis] + (flat.size,) + x.pos.shape[axis + 1:]
            index_pos = np.moveaxis(np.broadcast_to(flat, shape[:axis] + shape[axis + 1:]
                                                    + (flat.size,)), -1, axis)
            return [self.gather(x, index_pos, idx, axis, shape)]
        if op is Op.SCATTER:
            return [self.scatter(*maps, params["axis"], params["reduce"])]
        if op in _VIEWS:   # the backend's own launcher, on the map
            (m,) = maps
            return [m.view(np.asarray(self.table[op](op, m.pos, **params)))]
        if op in (Op.FROM_HOST, Op.TO_HOST):
            return [maps[0]]
        if op is Op.CAT:
            if len({m.slot for m in maps}) != 1:
                raise Unsupported("cat of several dtypes")
            regions = tuple({r for m in maps for r in m.regions})
            return [_Map(maps[0].slot, np.concatenate([m.pos for m in maps], axis=params["axis"]),
                         regions)]
        if op is Op.SLICE_ASSIGN:
            x, values = maps
            if values.slot != x.slot:
                raise Unsupported("slice assignment of another dtype")
            pos = np.array(x.pos, order="C")
            pos[params["index"]] = values.pos
            return [_Map(x.slot, pos, tuple(set(x.regions) | set(values.regions)))]
        raise Unsupported(op)

    # --- the program --------------------------------------------------------------------------
    def program(self, steps, in_regs, out_regs):
        last = {}
        for j, s in enumerate(steps):
            for k in (s[3] if s[0] == "launch" else s[2]):
                last[k] = j
        for k in out_regs:
            last[k] = len(steps)
        start = 0
        for j, s in enumerate(steps):
            if s[0] == "check":
                _, _, regs, fn = s
                where = []
                for k in regs:
                    m = self.maps.get(k)
                    if m is None or m.pos.size != 1:
                        raise Unsupported("a check of an unknown value")
                    where.append((m.slot, _first(m)))
                bounds = getattr(fn, "bounds", None)
                int64 = slot(np.dtype(np.int64))
                if bounds is not None and [w[0] for w in where] == [int64, int64]:
                    # an index range: an instruction, the check called only to raise
                    self.emit(self.kernel("range_check", None, (None, "int64")), (0, int64),
                              (where[0][1], where[1][1], *bounds))
                    self.checks[len(self.rows) - 1] = (fn, where)
                else:   # anything else: the tape stops, the replay calls the check
                    self.segments.append(("tape", start, len(self.rows)))
                    self.segments.append(("check", fn, where))
                    start = len(self.rows)
                ins = regs
            else:
                _, _, op, ins, params, outs, _, arrays, out = s
                self.op = op
                maps = [self.map_of(k, a) for k, a in zip(ins, arrays)]
                for k, m in zip(outs, self.launch(op, maps, params, out)):
                    if k in self.maps:   # (a launch returning its input: the same value)
                        self._temps.append(m)
                        continue
                    self.maps[k] = m
                    if m.reg is None:
                        m.reg = k
                    self.hold(m)
                    if last.get(k, -1) <= j:   # never read: dead at once
                        self.release(k)
            for m in self._temps:   # (held and dropped: freed unless a register holds it)
                self.hold(m)
                self.drop(m)
            self._temps = []
            for k in set(ins):
                if last.get(k) == j and k in self.maps:
                    self.release(k)
        return self.replay(in_regs, out_regs, start)

    def release(self, k):
        self.drop(self.maps.pop(k))
        c = self.dense.pop(k, None)
        if c is not None:
            self.drop(c)

    def replay(self, in_regs, out_regs, start):
        """The call: copy the inputs in, run the segments, and copy the results out into a
        fresh block per dtype (the tape's last instructions)."""
        tape = self.k
        for k in out_regs:   # (a result no launch made: an input or a constant, copied out)
            if k not in self.maps:
                self.map_of(k, self.inputs[k] if k in self.inputs else self.constants[k])
            if self.maps[k].pos.size > IO_MAX:
                raise Unsupported("a large result")
        self.op = Op.CONTIGUOUS
        # the results go to two blocks made per call: a result of at least an eighth of the
        # elements of its dtype to the big one, which the returned arrays view, the others to
        # the small one (so a loss kept per step holds a few bytes, not a step's parameters)
        total = [0] * len(tape.SLOTS)
        for k in out_regs:
            m = self.maps[k]
            total[m.slot] += m.pos.size
        count = [[0] * len(tape.SLOTS), [0] * len(tape.SLOTS)]
        outs = []
        for k in out_regs:
            m = self.maps[k]
            small = 8 * m.pos.size < total[m.slot]
            self.copy_to(m, m.pos, (SMALL if small else OUT) + m.slot, count[small][m.slot])
            outs.append((small, m.slot, count[small][m.slot], m.pos.shape))
            count[small][m.slot] += m.pos.size
        self.segments.append(("tape", start, len(self.rows)))
        for k in in_regs:
            if k not in self.reads:   # (an input nothing reads)
                self.reads[k] = None
        arenas = [np.zeros(max(n, 1), np.dtype(name)) for n, name in zip(self.size, tape.SLOTS)]
        for s, off, values in self.fill:
            arenas[s][off:off + values.size] = values
        views = []
        for k in in_regs:
            m = self.reads[k]
            views.append(None if m is None else
                         arenas[m.slot][_first(m):_first(m) + m.pos.size].reshape(m.pos.shape))
        # a product that wakes SciPy's BLAS pool, small enough to run as fast on one thread:
        # the whole tape runs with one (linalg.ONE_THREAD_MAX says why)
        one_thread = (linalg.scipy_blas_threads()
                      if linalg.GEMM_MIN_WORK <= self.blas_work <= linalg.ONE_THREAD_MAX else None)
        return _Replay(tape.interpreter(), one_thread, arenas,
                       np.concatenate(self.pool) if self.pool else np.zeros(1, np.int64),
                       np.array(self.rows, np.int64).reshape(-1, tape.WIDTH),
                       np.array(self.addresses or [0], np.int64),
                       [s for s in self.segments if s[0] != "tape" or s[1] < s[2]],
                       views, count, outs, self.names, self.checks)


class _Replay:
    """The tape of one program, called with the input arrays: returns the result arrays.
    One call at a time: the arenas are the program's.

    The results are written into two fresh blocks of bytes per call (``big`` and ``small``,
    each with a part per dtype at the byte offsets in ``ctx``), which the returned arrays
    view: no result is copied in Python.
    """

    def __init__(self, run, one_thread, arenas, pool, rows, addresses, segments, views, count,
                 outs, names, checks):
        self.run = run
        self.one_thread = one_thread   # None, or SciPy's BLAS's (set, get) of its thread count
        self.checks = checks
        self.arenas = arenas
        self.pool = pool
        self.rows = rows
        self.addresses = addresses
        self.segments = segments
        self.views = views
        self.names = names
        self.lock = threading.Lock()
        self.instructions = len(rows)
        # each dtype's part of a block at an offset that is a multiple of 8 bytes
        parts = [[], []]
        self.nbytes = []
        for which in (0, 1):
            nbytes = 0
            for a, n in zip(arenas, count[which]):
                parts[which].append(nbytes)
                nbytes += -(-n * a.itemsize // 8) * 8
            self.nbytes.append(max(nbytes, 8))
        self.ctx = np.array([a.ctypes.data for a in arenas] + parts[0] + parts[1], np.int64)
        self.outs = [(small, shape, arenas[s].dtype,
                      parts[small][s] + off * arenas[s].dtype.itemsize)
                     for small, s, off, shape in outs]

    def __call__(self, *ins):
        with self.lock:
            if self.one_thread is None:
                blocks = self._run(ins)
            else:
                # one BLAS thread while the tape runs.  Tapes of other threads may do the same
                # at once: only a thread that read a count other than 1 sets 1 and restores
                # it, so the last to restore leaves a count read before any set 1
                set_threads, get_threads = self.one_thread
                n = get_threads()
                if n == 1:
                    blocks = self._run(ins)
                else:
                    set_threads(1)
                    try:
                        blocks = self._run(ins)
                    finally:
                        set_threads(n)
        ndarray = np.ndarray
        return [ndarray(shape, dtype, blocks[small], off)
                for small, shape, dtype, off in self.outs]

    def _run(self, ins):
        """Runs the tape on ``ins``: the two result blocks."""
        for dst, a in zip(self.views, ins):
            if dst is not None:
                dst[...] = a
        blocks = (np.empty(self.nbytes[0], np.uint8), np.empty(self.nbytes[1], np.uint8))
        arenas = self.arenas
        for seg in self.segments:
            if seg[0] == "tape":
                t = self.run(self.rows, self.pool, self.addresses, self.ctx, blocks[0],
                             blocks[1], seg[1], seg[2])
                if t >= 0:
                    self.rows[t, 5] = 0
                    if t in self.checks:   # a range check: its own error
                        check, where = self.checks[t]
                        check(*[arenas[s][p].item() for s, p in where])
                    raise IndexError(f"ember.compile: {self.names[t].name.lower()}: an "
                                     f"index is out of range")
            else:
                seg[1](*[arenas[s][p].item() for s, p in seg[2]])
        return blocks


def _layout(positions, shape):
    """How an instruction over ``shape`` reads operands of ``positions`` (maps broadcast to
    it): ``(rows, cols, forms, wide)``, the output as ``rows x cols`` (one row when every
    operand allows it), each operand's affine form (or None: it needs a copy) and its
    positions as ``rows x cols``."""
    n = math.prod(shape)
    wide = [np.broadcast_to(p, shape).reshape(1, n) for p in positions]
    forms = [_affine(w) for w in wide]
    rows, cols = 1, n
    if any(f is None for f in forms) and len(shape) > 1:
        rows, cols = n // shape[-1], shape[-1]
        wide = [w.reshape(rows, cols) for w in wide]
        forms = [_affine(w) for w in wide]
    return rows, cols, forms, wide


def _matrix_form(blocks):
    """``(offset, batch stride, transposed)`` when every ``r x c`` block of ``blocks`` is a
    C-ordered run of positions (or the transpose of one) at offsets evenly spaced, else None."""
    nb, r, c = blocks.shape
    base = int(blocks[0, 0, 0])
    step = int(blocks[1, 0, 0]) - base if nb > 1 else 0
    offsets = base + step * np.arange(nb, dtype=np.int64)[:, None, None]
    local = np.arange(r * c, dtype=np.int64)
    for transposed, pattern in ((0, local.reshape(r, c)), (1, local.reshape(c, r).T)):
        if np.array_equal(blocks, offsets + pattern):
            return base, step, transposed
    return None


def _bases(shape, axis, strides):
    """Per element of ``shape`` (C order), its offset ``sum(coordinate * stride)`` over the dims
    other than ``axis``; and ``strides[axis]``."""
    base = np.zeros(shape, np.int64)
    for d, n in enumerate(shape):
        if d != axis:
            view = [1] * len(shape)
            view[d] = n
            base += (np.arange(n, dtype=np.int64) * strides[d]).reshape(view)
    return base, strides[axis]


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [a for x in out for a in _flat(x)]
    return [out] if hasattr(out, "shape") else []


def check(array):
    if not isinstance(array, np.ndarray):
        raise Unsupported("an array that is not numpy's")
    slot(array.dtype)
    if array.size > MAX_ELEMENTS:
        raise Unsupported("a large array")
