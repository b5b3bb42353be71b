"""Fused elementwise chains on the CPU: build the generated loops.

``kernel(key)`` binds the generated module's ``flat`` and ``strided`` loops to the per-op
loops they call (``loop_kernel``: one per scalar op, result dtype and argument kinds, with
the very compiled scalar function of ``builder.scalar_op`` inlined at Numba level so it
vectorises, shared by all chains) and to ``GATHER`` (``gather``: a strided row into a
block), each compiled lazily as serial and parallel and cached on
disk by ``KernelCache``, as ``builder.Kernel`` does for the fixed templates.  The launcher
(``engine/backends/cpu/fused.py``) picks the loop: ``flat`` when every array input is
contiguous with the output's shape, else ``strided`` over merged dims.
"""
import functools

import numba
import numpy as np
from numba import uint64

from .. import fused
from ..rebind import specialize
from .builder import JIT_OPTIONS, _jit, scalar_op


@functools.cache
def loop_kernel(fn, dtype, kinds):
    """The per-op loop of scalar op ``fn`` with result ``dtype`` over arguments ``kinds``
    (``kernels/fused.py`` ``loop_source``): serial, cached on disk, shared by every chain; the
    scalar op inlined into it as in the fixed templates."""
    template = getattr(fused.loop_module(kinds), "loop_" + kinds)
    loop = specialize(template, fused.loop_name(fn, dtype, kinds), OP=scalar_op(fn),
                      OUT=getattr(np, fused.TYPES[dtype]))
    return _jit(loop, parallel=False)


def gather(dst, at, src, p, u, v, n, nr):
    """``dst[at + r * n + j] = src[p + r * v + j * u]`` for ``r < nr``, ``j < n``: ``nr`` rows of
    a strided input into a block, one call per block (a call per row cost ~30 ns, 2048 of
    them most of a 2048 x 64 chain's time).  The unit-stride copy loops over slices (Numba's
    slice assignment is slower); the fill of a per-row value (``u == 0``) indexes unsigned,
    which vectorises without slices."""
    for r in range(nr):
        q = at + r * n
        s = p + r * v
        if u == 1:
            d = dst[q:q + n]
            x = src[s:s + n]
            for j in range(n):
                d[j] = x[j]
        elif u == 0:
            x = src[s]
            for j in range(n):
                dst[uint64(q + j)] = x
        else:
            for j in range(n):
                dst[q + j] = src[s + j * u]


@functools.cache
def gather_kernel():
    """``gather`` compiled (serial, cached on disk): what the strided loops call as ``GATHER``."""
    return _jit(specialize(gather, "ember_fused_gather"), parallel=False)


def loop_kernels(key):
    """{name: per-op loop} for every op of chain ``key``: what its generated loops call."""
    return {name: loop_kernel(fn, dtype, kinds) for name, fn, dtype, kinds in fused.loops(key)}


class FusedKernel:
    """The CPU loops of one chain; each compiled on first use."""

    __slots__ = ("name", "_fns", "_compiled")

    def __init__(self, key):
        mod = fused.load(key)
        self.name = fused.name(key)
        # the loops call one per-op loop per op and block (see kernels/fused.py)
        calls = loop_kernels(key)
        calls["GATHER"] = gather_kernel()
        self._fns = {}
        for loop in ("flat", "strided"):
            # the work of one task, compiled once and called by the serial and the parallel
            # driver (a call keeps the prange body small: Numba's parallel passes are slow
            # on big bodies); not cached on its own: it is part of the drivers' cached code
            task = numba.njit(**JIT_OPTIONS)(
                specialize(getattr(mod, loop + "_task"), f"{self.name}__{loop}_task", **calls))
            for parallel in (False, True):
                qual = f"{self.name}__{loop}" + ("__par" if parallel else "")
                self._fns[loop, parallel] = specialize(getattr(mod, loop), qual, TASK=task)
        self._compiled = {}

    def get(self, loop, parallel):
        k = self._compiled.get((loop, parallel))
        if k is None:
            k = self._compiled[loop, parallel] = _jit(self._fns[loop, parallel], parallel)
        return k


_KERNELS = {}


def kernel(key):
    k = _KERNELS.get(key)
    if k is None:
        k = _KERNELS[key] = FusedKernel(key)
    return k
