"""Reductions that compute their elementwise producer (a fused chain) as they go.

``ember.fusion`` hands a sum (prod, max, min) whose input is a pending chain to ``run``:
the chain is evaluated, a few thousand elements at a time, into a small per-task block
that the accumulation code then reads, so the chain's root is never written to memory
(nodes held outside the chain still are, by the same kernel, as in a fused elementwise
kernel).

Results are bit-identical to computing the chain and then calling ``reduce.reduce``: the
accumulation below is ``reduce.fold`` for ``inner == 1`` (a full reduction, or one over
trailing dims), with the same tasks, chunks, lanes, blocks of ``ROWS`` rows (the same
``reduce.fold_blocks``), flushes and final halving; only where a block's values come from
differs (``FILL`` evaluates the chain into ``buf`` where ``fold`` slices ``x``).  The parameters come from
``reduce.fold_params``, as for ``fold``; tests compare both paths bit for bit.

Generated code: ``source(key)`` is a module with ``fill`` (the chain over flat positions
``[pos, pos + count)`` of the root, in C order, from inputs given as (buffer, offset,
strides) over merged dims, in blocks of ``BLOCK``: the same op loops as a fused
elementwise kernel, ``kernels/fused.py``) and ``scratch`` (the task's buffers).
``kernel(key, op)`` binds them, with ``OP``, into copies of the fixed ``fold_chain``
templates below, named by the key's hash: cached on disk like every kernel.
"""
import hashlib

import numba
import numpy as np
from numba import prange

from .. import fused
from ..rebind import specialize
from . import fused as cpu_fused
from . import reduce as _reduce
from .builder import JIT_OPTIONS, _jit, scalar_op

# elements evaluated per FILL call in the one-accumulator path (short lanes)
SEG = 4096
# elements per op loop inside FILL, as in the fused elementwise kernels (2048 measured the
# same on (a * b).sum(), 16M float32, one thread)
BLOCK = fused.BLOCK
# bound by the templates (they read them as globals, as fold does)
ROWS = _reduce.ROWS
LANES_MIN = _reduce.LANES_MIN

OPS = ("add", "mul", "maximum", "minimum")


# --- templates ------------------------------------------------------------------------------
def fold_chain_task(t, skip, part, out, init, winit, outer, n, ob, nsplit, csize, k, rows, flush,
                    shape, ins, offs, strs, ks, outs):
    # One task of reduce.fold with inner == 1 (tw = m = 1, one tile): rows b*ob.. of chunk
    # c.  Position r of row o is element skip + o * n + r of the root, evaluated by FILL.
    buf, ws = SCRATCH(max(ROWS * k, SEG), ins)   # (see seg below)
    b = t // nsplit
    c = t - b * nsplit
    lo = min(n, c * csize)
    hi = min(n, lo + csize)
    nblocks = (hi - lo) // k
    w = k
    if w < LANES_MIN:  # a few short rows: one accumulator per output
        for o in range(b * ob, min(outer, b * ob + ob)):
            a = winit
            first = skip + o * n + lo
            r = 0
            while r < hi - lo:
                L = min(SEG, hi - lo - r)
                FILL(buf, first + r, L, shape, ins, offs, strs, ks, ws, outs)
                for i in range(L):
                    a = OP(a, buf[i])
                r += L
            if nsplit == 1:
                out[o] = a
            else:
                part[o * nsplit + c] = a
        return
    acc = np.full(w, init)
    wide = np.full(w, winit)
    # blocks evaluated per FILL: about SEG elements (lanes can be few), whole groups of ROWS
    seg = max(ROWS, SEG // k // ROWS * ROWS)
    for o in range(b * ob, min(outer, b * ob + ob)):
        for j in range(w):
            wide[j] = winit
        start = skip + o * n + lo
        q = 0
        filled = 0   # blocks [base, filled) are in buf
        base = 0
        while q < nblocks:
            qe = min(nblocks, q + flush)
            for j in range(w):
                acc[j] = init
            while q < qe:
                if q == filled:
                    nb = min(nblocks - q, seg)
                    FILL(buf, start, nb * k, shape, ins, offs, strs, ks, ws, outs)
                    start += nb * k
                    base = q
                    filled = q + nb
                # reduce.fold_blocks, as fold calls it once per flush group: flush groups
                # and FILLs start on a group of ROWS blocks (FLUSH and seg are multiples of
                # ROWS), so a group never straddles two FILLs, and blocks one at a time
                # come only at the end of a flush group
                e = min(qe, filled)
                BLOCKS(acc, buf, (q - base) * k, k, w, e - q, rows)
                q = e
            for j in range(w):
                wide[j] = OP(wide[j], acc[j])
        ntail = hi - lo - nblocks * k   # fewer than k
        if ntail > 0:
            FILL(buf, start, ntail, shape, ins, offs, strs, ks, ws, outs)
            for j in range(ntail):
                wide[j] = OP(wide[j], buf[j])
        g = k
        while g > 1:
            h = g // 2
            src = g - h
            for j in range(h):
                wide[j] = OP(wide[j], wide[src + j])
            g -= h
        if nsplit == 1:
            out[o] = wide[0]
        else:
            part[o * nsplit + c] = wide[0]


def fold_chain(skip, part, out, init, winit, outer, n, ob, nsplit, rows, pack, flush,
               shape, ins, offs, strs, ks, outs):
    # reduce.fold's driver for inner == 1; the first ``skip`` elements (a parallel full
    # reduction's head, see reduce._run_fold) are combined at the end, as fold's ``head``
    csize = (n + nsplit - 1) // nsplit
    if nsplit > 1:
        csize = (csize + 63) // 64 * 64
    k = 1
    while 2 * k <= pack and 16 * k <= max(csize, 128) and 4 * k <= csize:
        k *= 2
    nob = (outer + ob - 1) // ob
    for t in prange(nob * nsplit):
        TASK(np.int64(t), skip, part, out, init, winit, outer, n, ob, nsplit, csize, k, rows,
             flush, shape, ins, offs, strs, ks, outs)
    # the head's elements (and the held nodes' values there).  (No literal 0 in these calls:
    # an argument typed Literal[int](0) made Numba compile FILL and SCRATCH a second time,
    # ~0.7 s of every fused reduction's cold compile)
    hb, ws = SCRATCH(skip, ins)
    if skip > 0:
        FILL(hb, np.int64(0), skip, shape, ins, offs, strs, ks, ws, outs)
    if nsplit > 1:
        for o in range(outer):
            a = part[o * nsplit]
            for c in range(1, nsplit):
                a = OP(a, part[o * nsplit + c])
            for i in range(skip):
                a = OP(a, hb[i])
            out[o] = a


# --- generated code ------------------------------------------------------------------------
def name(key, op):
    return "ember_fusedred_" + hashlib.sha256(repr((key, op)).encode()).hexdigest()[:24]


def _fill(key, root_written):
    """``fill``: the chain over flat root positions [pos, pos + count) into ``dst[:count]``.

    ``key`` is a fused chain key whose outputs end with the root; the others are held
    nodes written to ``o<k>`` (flat, the root's shape), the root goes to ``dst`` (and to
    its own ``o<k>`` when ``root_written``)."""
    leaves, nodes, outputs = key
    arrays = [i for i, (kind, _) in enumerate(leaves) if kind == "a"]
    scalars = [i for i, (kind, _) in enumerate(leaves) if kind == "s"]
    n_out = len(outputs) - (0 if root_written else 1)
    _, rows = fused._slots(key)
    wnames = [f"w_{dt}" for dt in sorted(rows)] or ["w_unused"]
    lines = ["def fill(dst, pos, count, shape, ins, offs, strs, ks, ws, outs):"]
    lines += fused._unpack([f"a{i}" for i in arrays], "ins")
    lines += fused._unpack([f"f{i}" for i in arrays], "offs")
    lines += fused._unpack([f"s{i}" for i in arrays], "strs")
    lines += fused._unpack([f"k{i}" for i in scalars], "ks")
    lines += fused._unpack(wnames + [f"g{i}" for i in arrays], "ws")
    lines += fused._unpack([f"o{k}" for k in range(n_out)], "outs")
    lines += fused._scalar_prologue(leaves, lambda i: f"k{i}")
    for dt, n in sorted(rows.items()):
        lines += [f"    t_{dt}_{r} = w_{dt}[{r}]" for r in range(n)]
    lines += ["    nd = shape.shape[0]",
              "    inner = shape[nd - 1]",
              "    done = 0",
              "    while done < count:",
              "        p = pos + done",
              "        row = p // inner",
              "        col = p - row * inner",
              "        L = min(count - done, inner - col, BLOCK)"]
    lines += fused.row_offsets(arrays, "col", 8)
    lines += fused.gather_blocks(arrays, None, 8)
    last = len(outputs) - 1
    lines += [f"        y{k} = o{k}[p:p + L]" for k in range(last)]
    lines += [f"        y{last} = dst[done:done + L]"]
    lines += fused._blocked(key, 8)
    if root_written:
        lines += ["        for j in range(L):",
                  f"            o{last}[p + j] = y{last}[j]"]
    lines += ["        done += L"]
    return lines


def _scratch_fn(key):
    # a task's buffers: the root's values (``size``), the chain's scratch rows and a block
    # per array input to gather strided values into (allocated once per task, not per fill)
    leaves, nodes, outputs = key
    _, rows = fused._slots(key)
    root_type = fused.TYPES[nodes[outputs[-1]][1]]
    ws = [f"empty(({n}, BLOCK), {fused.TYPES[dt]})" for dt, n in sorted(rows.items())]
    ws = ws or ["empty((1, 1), float64)"]
    arrays = [i for i, (kind, _) in enumerate(leaves) if kind == "a"]
    ws += [f"empty(BLOCK, a{i}.dtype)" for i in arrays]
    return (["def scratch(size, ins):"]
            + fused._unpack([f"a{i}" for i in arrays], "ins")
            + [f"    return empty(size, {root_type}), ({', '.join(ws)},)"])


def source(key, op, root_written):
    doc = ['"""Fused reduction input, generated by ember.kernels.cpu.fused_reduce (do not edit).',
           "", f"Reduced with {op}; the chain (root last{', written' if root_written else ''}):",
           *fused._describe(key), '"""']
    types = ", ".join(sorted(set(fused.TYPES.values())))
    header = [*doc,
              f"from numpy import empty, {types}  # noqa: F401",
              "",
              f"BLOCK = {BLOCK}",
              "# the builder binds the per-op loops"]
    parts = [header, _scratch_fn(key), _fill(key, root_written)]
    return "\n\n\n".join("\n".join(p) for p in parts) + "\n"


def _load(key, op, root_written):
    modname = name((key, root_written), op)
    return fused.generated_module(modname, modname, lambda: source(key, op, root_written)), modname


class FusedReduceKernel:
    """The serial and parallel drivers of one (chain, op), each compiled on first use."""

    __slots__ = ("_fns", "_compiled")

    def __init__(self, key, op, root_written):
        mod, modname = _load(key, op, root_written)
        calls = cpu_fused.loop_kernels(key)
        fill = numba.njit(**JIT_OPTIONS)(specialize(mod.fill, f"{modname}__fill", **calls))
        scratch = numba.njit(**JIT_OPTIONS)(specialize(mod.scratch, f"{modname}__scratch"))
        bind = dict(FILL=fill, SCRATCH=scratch, OP=scalar_op(op), BLOCKS=_reduce.blocks_op(op))
        task = numba.njit(**JIT_OPTIONS)(specialize(fold_chain_task, f"{modname}__task", **bind))
        self._fns = {p: specialize(fold_chain, f"{modname}" + ("__par" if p else ""), TASK=task,
                                   **bind) for p in (False, True)}
        self._compiled = {}

    def get(self, parallel):
        k = self._compiled.get(parallel)
        if k is None:
            k = self._compiled[parallel] = _jit(self._fns[parallel], parallel)
        return k


_KERNELS = {}


def kernel(key, op, root_written):
    k = _KERNELS.get((key, op, root_written))
    if k is None:
        k = _KERNELS[key, op, root_written] = FusedReduceKernel(key, op, root_written)
    return k
