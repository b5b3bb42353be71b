"""Fused softmax and log_softmax loops (launched by engine/backends/cpu/softmax.py).

Both ops run on a C-contiguous view: either ``(rows, n)`` with the softmax dim
last (``rows``), or ``(outer, n, inner)`` when a wide contiguous block follows
the dim in memory (``cols``: ``inner`` columns side by side, in SIMD, so no
transposed copy is needed).  ``OP`` is the exp of the data's dtype (``exp_f32``
for float32: float32 arithmetic, twice the SIMD width; ``exp`` for float64) and
``LOG`` its log, so the arithmetic stays in the input's precision.

Per row, three passes over data that stays in L1/L2 between them: the maximum
``m``; ``e = exp(x - m)`` written to the output while summing it (``s``); then
``e * (1/s)`` (softmax) or ``(x - m) - log(s)`` (log_softmax).  A single
accumulator is a serial chain LLVM does not vectorise without fastmath, so the
maximum folds blocks of the row in halves (``row_max``: every level is a plain
vector loop) and the sum keeps ``lanes`` independent accumulators, flushed into
a total every ``GROUP`` steps (as ``reduce.fold``; the two levels also bound
float32 rounding).

The exp pass over a row prefetches the next row (``prefetch``): a row of a
page or so is a new stream to the hardware prefetcher, and its max pass would
otherwise wait on memory.  A few long rows are split into ``nsplit`` chunks so
every thread has work: ``rows`` leaves each chunk's (max, sum) in ``part`` and
``finish`` combines a row's chunks (``S = sum(s_c * exp(m_c - M))``) and writes
its results from ``x`` again.

``rows``, ``finish`` and ``cols`` are the work of one task, compiled once with
FMA contraction and called by a serial and a parallel ``drive`` loop (see
``driver`` and ``_task``).
"""
import functools

import numba
import numpy as np
from llvmlite import ir
from llvmlite.binding import llvm_version_info
from numba import prange
from numba.core import cgutils, types
from numba.extending import intrinsic

from .builder import JIT_OPTIONS, _jit, scalar_op
from ..rebind import specialize

MAX = scalar_op("maximum")   # NaN-propagating: m is NaN exactly when the row holds a NaN

# Accumulators of a row's sum.  A kernel argument, not a constant: with a constant trip
# count LLVM unrolls the lane loop and then leaves it scalar.
LANES = 64
BLOCK = 1024           # elements folded by one max tree (its scratch holds half of them)
SHORT = 32             # shorter rows fold their max in one chain (the tree's loops cost more)
LINE = 64              # bytes per prefetch (a cache line)
PREFETCH_MAX = 1 << 16  # longest rows prefetched whole while the previous one is computed
GROUP = 16             # terms per partial sum before it joins the total (lane steps or rows)


# the intrinsic's name mangles its pointer type: opaque pointers from LLVM 15 on
_PREFETCH = "llvm.prefetch.p0" if llvm_version_info[0] >= 15 else "llvm.prefetch.p0i8"


@intrinsic
def prefetch(typingctx, arr, i):
    """Hint the CPU to load ``arr[i]``'s cache line into L2 (``llvm.prefetch``; no fault)."""
    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
        i32 = ir.IntType(32)
        ptr = builder.bitcast(ptr, ir.IntType(8).as_pointer())
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32]),
            _PREFETCH)
        builder.call(fn, [ptr, i32(0), i32(2), i32(1)])   # read, locality 2 (L2), data
        return context.get_dummy_value()
    return types.void(arr, i), codegen


@numba.njit(**JIT_OPTIONS)
def row_max(src, tmp, m):
    """max(m, max(src)), folding blocks of ``2 * len(tmp)`` elements in halves."""
    n = src.shape[0]
    step = 2 * tmp.shape[0]
    for b0 in range(0, n, step):
        bw = min(step, n - b0)
        blk = src[b0:b0 + bw]
        h = bw // 2
        for j in range(h):
            tmp[j] = MAX(blk[j], blk[j + h])
        if bw > 2 * h:
            m = MAX(m, blk[bw - 1])
        while h > 1:
            h2 = h // 2
            for j in range(h2):
                tmp[j] = MAX(tmp[j], tmp[j + h2])
            if h > 2 * h2:
                m = MAX(m, tmp[h - 1])
            h = h2
        if h == 1:
            m = MAX(m, tmp[0])
    return m


def rows(t, x, out, part, nrows, n, rb, nsplit, lanes, init, one, log):
    # task t of (nrows, n) flat C-order x and out: ``rb`` rows, or with nsplit > 1 one chunk
    # of one row (rb == 1), whose (max, sum) go to part[2 * t: 2 * t + 2] for ``finish``
    zero = one - one
    csize = (n + nsplit - 1) // nsplit
    b = t // nsplit
    c = t - b * nsplit
    lo = min(n, c * csize)
    hi = min(n, lo + csize)
    w = hi - lo
    nb = w // lanes
    # rows of a page or so each start a new stream the hardware prefetcher has not seen:
    # the exp pass over a row asks for the next one, so its max pass reads from L2
    ahead = nsplit == 1 and w <= PREFETCH_MAX
    last = x.shape[0] - 1
    acc = np.empty(lanes, x.dtype)
    tot = np.empty(lanes, x.dtype)
    tmp = np.empty(min(BLOCK, w) // 2 + 1, x.dtype)
    for r in range(b * rb, min(nrows, b * rb + rb)):
        src = x[r * n + lo:r * n + hi]
        dst = out[r * n + lo:r * n + hi]
        if w < SHORT:
            m = init
            for k in range(w):
                m = MAX(m, src[k])
        else:
            m = row_max(src, tmp, init)
        # the sum of exp(x - m), kept in the output (one copy of the inlined exp, not two:
        # compile time; log_softmax and split rows overwrite it below)
        s = zero
        if nb > 0:
            for j in range(lanes):
                tot[j] = zero
            for q0 in range(0, nb, GROUP):   # two-level sum: error ~ (GROUP + nb / GROUP) ulp
                for j in range(lanes):
                    acc[j] = zero
                for q in range(q0, min(nb, q0 + GROUP)):
                    if ahead:
                        for i in range(0, lanes, LINE // x.itemsize):
                            prefetch(x, min(last, r * n + n + q * lanes + i))
                    blk = src[q * lanes:q * lanes + lanes]
                    o = dst[q * lanes:q * lanes + lanes]
                    for j in range(lanes):
                        e = OP(blk[j] - m)
                        o[j] = e
                        acc[j] += e
                for j in range(lanes):
                    tot[j] += acc[j]
            h = lanes // 2
            while h > 0:
                for j in range(h):
                    tot[j] += tot[j + h]
                h //= 2
            s = tot[0]
        # the tail (short rows: all of it): exp in a loop of its own, which vectorises
        for k in range(nb * lanes, w):
            dst[k] = OP(src[k] - m)
        for k in range(nb * lanes, w):
            s += dst[k]
        if nsplit > 1:
            # a chunk of only -inf adds nothing (its exp(x - m) would be NaN)
            part[2 * t] = m
            part[2 * t + 1] = s if m != init else zero
        elif log:
            lse = LOG(s)
            for k in range(w):
                dst[k] = (src[k] - m) - lse
        else:
            inv = one / s
            for k in range(w):
                dst[k] *= inv


def finish(t, x, out, part, n, nsplit, init, one, log):
    # task t: chunk t % nsplit of row t // nsplit, split by ``rows``: combine the row's
    # (max, sum) pairs and write the chunk's results from x again
    zero = one - one
    csize = (n + nsplit - 1) // nsplit
    r = t // nsplit
    c = t - r * nsplit
    lo = min(n, c * csize)
    hi = min(n, lo + csize)
    m = init
    for i in range(nsplit):
        m = MAX(m, part[2 * (r * nsplit + i)])
    s = zero
    for i in range(nsplit):
        mi = part[2 * (r * nsplit + i)]
        if mi != init:
            s += part[2 * (r * nsplit + i) + 1] * OP(mi - m)
    src = x[r * n + lo:r * n + hi]
    dst = out[r * n + lo:r * n + hi]
    if log:
        lse = LOG(s)
        for k in range(hi - lo):
            dst[k] = (src[k] - m) - lse
    else:
        inv = one / s
        for k in range(hi - lo):
            dst[k] = OP(src[k] - m) * inv


def cols(t, x, out, outer, n, inner, tw, ob, init, one, log):
    # task t of (outer, n, inner) flat C-order x and out: a tile of ``tw`` columns of ``ob``
    # consecutive outer blocks; the columns are independent softmaxes, side by side in SIMD
    zero = one - one
    ntiles = (inner + tw - 1) // tw
    b = t // ntiles
    j0 = (t - b * ntiles) * tw
    w = min(inner - j0, tw)
    mx = np.empty(w, x.dtype)
    sm = np.empty(w, x.dtype)
    part = np.empty(w, x.dtype)
    for o in range(b * ob, min(outer, b * ob + ob)):
        base = o * n * inner + j0
        for j in range(w):
            mx[j] = init
        for r in range(n):
            src = x[base + r * inner:base + r * inner + w]
            for j in range(w):
                mx[j] = MAX(mx[j], src[j])
        for j in range(w):
            sm[j] = zero
        for r0 in range(0, n, GROUP):   # two-level sum, as in ``rows``
            for j in range(w):
                part[j] = zero
            for r in range(r0, min(n, r0 + GROUP)):
                src = x[base + r * inner:base + r * inner + w]
                dst = out[base + r * inner:base + r * inner + w]
                for j in range(w):
                    e = OP(src[j] - mx[j])
                    dst[j] = e
                    part[j] += e
            for j in range(w):
                sm[j] += part[j]
        if log:
            for j in range(w):
                sm[j] = LOG(sm[j])
            for r in range(n):
                src = x[base + r * inner:base + r * inner + w]
                dst = out[base + r * inner:base + r * inner + w]
                for j in range(w):
                    dst[j] = (src[j] - mx[j]) - sm[j]
        else:
            for j in range(w):
                sm[j] = one / sm[j]
            for r in range(n):
                dst = out[base + r * inner:base + r * inner + w]
                for j in range(w):
                    dst[j] *= sm[j]


def drive(ntasks, *args):
    for t in prange(ntasks):
        TASK(t, *args)


@functools.cache
def driver(task, op, parallel):
    """``drive`` bound to ``task`` with ``OP`` = scalar op ``op``, compiled and disk-cached.

    The task is one serial function that both drivers call, part of their cached code, as
    in ``kernels/cpu/fused.py``: a call keeps the prange body small (Numba's parallel passes
    are slow on big bodies; cold, on a busy 2-core VM: the parallel ``rows`` kernel took
    4.7 s to compile with its body inline, 3.3 s with the task, and the serial one then 0.35 s
    more instead of 1.9 s).
    """
    name = f"softmax_{task.__name__}__{op}"
    fn = _task(task, op)
    return _jit(specialize(drive, name + ("__par" if parallel else ""), TASK=fn), parallel)


@functools.cache
def _task(task, op):
    # fastmath "contract" only: LLVM may fuse a * b + c into one FMA (exp's polynomial and
    # range reduction: the exp pass 15% faster, results within an ulp, more often exact);
    # no reassociation, and NaN, inf and signed zeros keep their IEEE behaviour
    log = "log_f32" if op.endswith("_f32") else "log"   # the log of the same precision
    return numba.njit(fastmath={"contract"}, **JIT_OPTIONS)(
        specialize(task, f"softmax_{task.__name__}_task__{op}", OP=scalar_op(op),
                   LOG=scalar_op(log)))
