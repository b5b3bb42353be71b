"""The tape: a compiled step of small CPU tensors run as one call of one compiled loop.

A compiled step (``ember.compile``) of small tensors spends its time per launch, not per
element: a replay that calls a kernel per launch pays ~1-4 us of Python each, ~10^4 times
for an unrolled ODE solver.  ``engine/backends/cpu/tape.py`` lowers such a program instead to
a *tape* that ``run`` walks with no Python between its instructions:

- four *arenas*, one per dtype the tape takes (``SLOTS``: float64, float32, int64, bool),
  each one numpy array holding every value of that dtype (constants, the call's inputs,
  each instruction's result in a region of its own);
- ``I``, the *index pool*: int64 arena positions, for the instructions that read operands
  element by element through a map (``copy``, ``gather``, ``scatter``);
- ``T``, the instructions: one int64 row of ``WIDTH`` fields each, ``(kernel, slot of D,
  slot of X, slot of Y, slot of Z, error, parameters...)``.

Each instruction is a call of a *tape kernel*: a C function of one signature,
``void k(int64 *P, int64 *I, D *d, X *x, Y *y, Z *z)``, ``P`` its row and ``d, x, y, z`` the
bases of the arenas its row names (its output and up to three operands; their element types
are the kernel's own, so one template serves every dtype).  ``run`` calls kernels through
their addresses (``call_kernel``), ~7 ns an instruction, and stops at the first that sets its
row's error field (an index out of range).  Kernels are Numba ``cfunc``s compiled from the
templates below by ``kernel`` and cached on disk like every kernel; only those a program
uses are compiled.

Operands of the elementwise templates are *affine*: element ``(r, c)`` of a ``rows x cols``
output reads position ``off + r * rs + c * cs`` (``cs`` 1 contiguous, 0 broadcast along the
row, ``rs`` 0 a row broadcast down the rows: a bias), so views, transposes and broadcasts
need no copy, and the contiguous cases run loops LLVM vectorises.  Anything else is first
copied into a contiguous region by ``copy`` (through the pool), which the lowering decides.

The scalar functions are those of ``kernels/scalar.py`` the eager kernels of each dtype use
(``tanh_f32`` for float32), so an elementwise result is the eager one to the bit; sums,
matrix products and softmax add in their own order (BLAS, the blocked eager reductions and
the tape may round differently in the last bits).
"""
import functools
import hashlib
import re

import numba
import numpy as np
from llvmlite import ir
from numba import carray, types
from numba.core import sigutils
from numba.extending import intrinsic

from ..rebind import specialize
from .builder import JIT_OPTIONS, _jit, cfunc, scalar_op

SLOTS = ("float64", "float32", "int64", "bool")   # arena of each slot, by numpy dtype name
_TYPES = {"float64": types.float64, "float32": types.float32, "int64": types.int64,
          "bool": types.boolean}

WIDTH = 20          # int64 fields of an instruction
SHORT_ROW = 8       # elementwise rows of fewer elements take one loop over all (``ew2``)
KERNEL, SLOT_D, SLOT_X, SLOT_Y, SLOT_Z, ERROR = range(6)
P0 = 6              # the first parameter field
BIG = 1 << 40       # the length a kernel gives its arena views (never bounds-checked)


# --- elementwise ---------------------------------------------------------------------------
def ew1(P, Ip, Dp, Xp, Yp, Zp):
    """``d[r, c] = OP(x[a + r*ars + c*acs])`` over ``rows x cols``."""
    D = carray(Dp, BIG)
    X = carray(Xp, BIG)
    d, rows, cols, a, ars, acs = P[6], P[7], P[8], P[9], P[10], P[11]
    for r in range(rows):
        z = D[d + r * cols:d + r * cols + cols]
        pa = a + r * ars
        if acs == 1:
            x = X[pa:pa + cols]
            for c in range(cols):
                z[c] = OP(x[c])
        elif acs == 0:
            v = OP(X[pa])
            for c in range(cols):
                z[c] = v
        else:
            for c in range(cols):
                z[c] = OP(X[pa + c * acs])


def ew2(P, Ip, Dp, Xp, Yp, Zp):
    """``d[r, c] = OP(x[...], y[...])``, each operand affine (``ew1``)."""
    D = carray(Dp, BIG)
    X = carray(Xp, BIG)
    Y = carray(Yp, BIG)
    d, rows, cols, a, ars, acs, b, brs, bcs = (P[6], P[7], P[8], P[9], P[10], P[11], P[12],
                                               P[13], P[14])
    if cols < SHORT_ROW:   # short rows (a bias of 2 logits): no slices and tests per row
        for r in range(rows):
            pd = d + r * cols
            pa = a + r * ars
            pb = b + r * brs
            for c in range(cols):
                D[pd + c] = OP(X[pa + c * acs], Y[pb + c * bcs])
        return
    for r in range(rows):
        z = D[d + r * cols:d + r * cols + cols]
        pa = a + r * ars
        pb = b + r * brs
        if acs == 1 and bcs == 1:
            x = X[pa:pa + cols]
            y = Y[pb:pb + cols]
            for c in range(cols):
                z[c] = OP(x[c], y[c])
        elif acs == 1 and bcs == 0:
            x = X[pa:pa + cols]
            yv = Y[pb]
            for c in range(cols):
                z[c] = OP(x[c], yv)
        elif acs == 0 and bcs == 1:
            xv = X[pa]
            y = Y[pb:pb + cols]
            for c in range(cols):
                z[c] = OP(xv, y[c])
        else:
            for c in range(cols):
                z[c] = OP(X[pa + c * acs], Y[pb + c * bcs])


def ew3(P, Ip, Dp, Xp, Yp, Zp):
    """``d[r, c] = OP(x[...], y[...], z[...])``, each operand affine (``ew1``)."""
    D = carray(Dp, BIG)
    X = carray(Xp, BIG)
    Y = carray(Yp, BIG)
    Z = carray(Zp, BIG)
    d, rows, cols = P[6], P[7], P[8]
    a, ars, acs, b, brs, bcs, e, ers, ecs = (P[9], P[10], P[11], P[12], P[13], P[14], P[15],
                                             P[16], P[17])
    for r in range(rows):
        z = D[d + r * cols:d + r * cols + cols]
        pa = a + r * ars
        pb = b + r * brs
        pe = e + r * ers
        if acs == 1 and bcs == 1 and ecs == 1:
            x = X[pa:pa + cols]
            y = Y[pb:pb + cols]
            w = Z[pe:pe + cols]
            for c in range(cols):
                z[c] = OP(x[c], y[c], w[c])
        else:
            for c in range(cols):
                z[c] = OP(X[pa + c * acs], Y[pb + c * bcs], Z[pe + c * ecs])


def copy(P, Ip, Dp, Xp, Yp, Zp):
    """``d[i] = x[I[m + i]]`` for ``i < n``: any map into a contiguous region."""
    I = carray(Ip, BIG)
    D = carray(Dp, BIG)
    X = carray(Xp, BIG)
    d, n, m = P[6], P[7], P[8]
    z = D[d:d + n]
    idx = I[m:m + n]
    for i in range(n):
        z[i] = X[idx[i]]


# --- matrix products -------------------------------------------------------------------------
def matmul(P, Ip, Dp, Xp, Yp, Zp):
    """``nb`` products ``(m x k) @ (k x n)`` into contiguous ``m x n`` blocks at ``d``, each
    BLAS's gemm through ``np.dot`` (float dtypes).

    Operand ``x`` (``y`` alike) starts at ``a + i * abs`` for product ``i`` and is C-ordered
    (``at == 0``) or the transpose of a C-ordered ``k x m`` block (``at == 1``): a call site
    per layout, so no operand is copied.
    """
    D = carray(Dp, BIG)
    X = carray(Xp, BIG)
    Y = carray(Yp, BIG)
    d, nb, m, k, n = P[6], P[7], P[8], P[9], P[10]
    a, a_bs, at, b, b_bs, bt = P[11], P[12], P[13], P[14], P[15], P[16]
    for i in range(nb):
        pa = a + i * a_bs
        pb = b + i * b_bs
        pd = d + i * m * n
        out = D[pd:pd + m * n].reshape((m, n))
        if at == 0 and bt == 0:
            np.dot(X[pa:pa + m * k].reshape((m, k)), Y[pb:pb + k * n].reshape((k, n)), out)
        elif at == 0:
            np.dot(X[pa:pa + m * k].reshape((m, k)), Y[pb:pb + k * n].reshape((n, k)).T, out)
        elif bt == 0:
            np.dot(X[pa:pa + m * k].reshape((k, m)).T, Y[pb:pb + k * n].reshape((k, n)), out)
        else:
            np.dot(X[pa:pa + m * k].reshape((k, m)).T, Y[pb:pb + k * n].reshape((n, k)).T, out)


def matmul_small(P, Ip, Dp, Xp, Yp, Zp):
    """``matmul``'s products as three plain loops from ``ZERO`` (of the result's type): tiny
    products, where a BLAS call costs more than the sums, and integers.  (A kernel of its
    own: a function that can call BLAS pays ~50 ns more per call even when it does not.)"""
    D = carray(Dp, BIG)
    X = carray(Xp, BIG)
    Y = carray(Yp, BIG)
    d, nb, m, k, n = P[6], P[7], P[8], P[9], P[10]
    a, a_bs, at, b, b_bs, bt = P[11], P[12], P[13], P[14], P[15], P[16]
    ars, acs = (k, 1) if at == 0 else (1, m)
    brs, bcs = (n, 1) if bt == 0 else (1, k)
    for i in range(nb):
        pa = a + i * a_bs
        pb = b + i * b_bs
        pd = d + i * m * n
        for r in range(m):
            for c in range(n):
                s = ZERO
                for q in range(k):
                    s += X[pa + r * ars + q * acs] * Y[pb + q * brs + c * bcs]
                D[pd + r * n + c] = s


# --- reductions along one (merged) axis ------------------------------------------------------
def reduce(P, Ip, Dp, Xp, Yp, Zp):
    """``d[o] = OP-fold of x[a + o*os + q*qs]`` over ``q < g``, from ``INIT``, for ``o < nout``."""
    D = carray(Dp, BIG)
    X = carray(Xp, BIG)
    d, nout, g, a, os, qs = P[6], P[7], P[8], P[9], P[10], P[11]
    z = D[d:d + nout]
    for o in range(nout):
        z[o] = INIT
    if os == 1 and qs != 1 and nout > 1:   # neighbouring groups side by side: a vector loop
        for q in range(g):
            x = X[a + q * qs:a + q * qs + nout]
            for o in range(nout):
                z[o] = OP(z[o], x[o])
    elif qs == 1:
        for o in range(nout):
            x = X[a + o * os:a + o * os + g]
            s0 = z[o]
            s1 = z[o]
            s2 = z[o]
            s3 = z[o]
            h = g - g % 4
            for q in range(0, h, 4):   # four chains: the fold's latency, not its length
                s0 = OP(s0, x[q])
                s1 = OP(s1, x[q + 1])
                s2 = OP(s2, x[q + 2])
                s3 = OP(s3, x[q + 3])
            for q in range(h, g):
                s0 = OP(s0, x[q])
            z[o] = OP(OP(s0, s1), OP(s2, s3))
    else:
        for o in range(nout):
            s = z[o]
            for q in range(g):
                s = OP(s, X[a + o * os + q * qs])
            z[o] = s


def arg_reduce(P, Ip, Dp, Xp, Yp, Zp):
    """``d[o]``: the index ``q`` of the first extreme of ``x[a + o*os + q*qs]`` (``OP`` the
    strict comparison: ``gt`` for argmax); the first NaN beats everything, as in numpy."""
    D = carray(Dp, BIG)
    X = carray(Xp, BIG)
    d, nout, g, a, os, qs = P[6], P[7], P[8], P[9], P[10], P[11]
    for o in range(nout):
        p = a + o * os
        best = X[p]
        k = 0
        for q in range(1, g):
            if best != best:
                break
            v = X[p + q * qs]
            if OP(v, best) or v != v:
                best = v
                k = q
        D[d + o] = k


def softmax(P, Ip, Dp, Xp, Yp, Zp):
    """Softmax (``LOG`` false) or log-softmax of ``rows`` rows of ``g`` contiguous values at
    ``a + r * rs``, into contiguous rows at ``d``: ``m = max``, ``e = exp(x - m)``, then
    ``e * (1 / sum e)`` or ``(x - m) - log(sum e)``, as the eager kernels compute it."""
    D = carray(Dp, BIG)
    X = carray(Xp, BIG)
    d, rows, g, a, rs = P[6], P[7], P[8], P[9], P[10]
    if g <= 8:   # short rows (a classifier's few logits): no slices, a row is a few values
        for r in range(rows):
            p = a + r * rs
            o = d + r * g
            m = X[p]
            for q in range(1, g):
                m = MAX(m, X[p + q])
            D[o] = 1
            one = D[o]   # (one and zero of the row's type)
            s = one - one
            for q in range(g):
                e = EXP(X[p + q] - m)
                D[o + q] = e
                s += e
            if LOG:
                ls = LOGF(s)
                for q in range(g):
                    D[o + q] = (X[p + q] - m) - ls
            else:
                inv = one / s
                for q in range(g):
                    D[o + q] = D[o + q] * inv
        return
    for r in range(rows):
        x = X[a + r * rs:a + r * rs + g]
        z = D[d + r * g:d + r * g + g]
        z[0] = 1
        one = z[0]   # (one and zero of the row's type)
        m = x[0]
        for q in range(1, g):
            m = MAX(m, x[q])
        s = one - one
        for q in range(g):
            e = EXP(x[q] - m)
            z[q] = e
            s += e
        if LOG:
            ls = LOGF(s)
            for q in range(g):
                z[q] = (x[q] - m) - ls
        else:
            inv = one / s
            for q in range(g):
                z[q] = z[q] * inv


# --- indexing --------------------------------------------------------------------------------
def gather(P, Ip, Dp, Xp, Yp, Zp):
    """``d[e] = x[I[xm + I[bm + e] + v * st]]`` with ``v = y[I[im + e]]`` the index (int64) of
    element ``e``: gather and index_select, ``I[bm + e]`` the element's own coordinates in
    ``x``'s map with the indexed one 0.  An index outside ``[0, size)`` sets the error."""
    I = carray(Ip, BIG)
    D = carray(Dp, BIG)
    X = carray(Xp, BIG)
    Y = carray(Yp, BIG)
    d, n, xm, bm, im, st, size = P[6], P[7], P[8], P[9], P[10], P[11], P[12]
    for e in range(n):
        v = Y[I[im + e]]
        if v < 0 or v >= size:
            P[5] = 1
            return
        D[d + e] = X[I[xm + I[bm + e] + v * st]]


def scatter(P, Ip, Dp, Xp, Yp, Zp):
    """``d[I[bm + e] + v * st] = x[I[vm + e]]`` (``add``: ``+=``) in C order of the index
    ``v = y[I[im + e]]``: the region at ``d`` already holds a copy of the scattered-into
    tensor; the last write of a repeated index wins, as in the eager kernel."""
    I = carray(Ip, BIG)
    D = carray(Dp, BIG)
    X = carray(Xp, BIG)
    Y = carray(Yp, BIG)
    d, n, bm, im, vm, st, size, add = P[6], P[7], P[8], P[9], P[10], P[11], P[12], P[13]
    for e in range(n):
        v = Y[I[im + e]]
        if v < 0 or v >= size:
            P[5] = 1
            return
        p = d + I[bm + e] + v * st
        if add:
            D[p] += X[I[vm + e]]
        else:
            D[p] = X[I[vm + e]]


def range_check(P, Ip, Dp, Xp, Yp, Zp):
    """Stop the tape (set the error field) unless ``low <= x[lo]`` and ``x[hi] < high``: an
    index's least and greatest values checked against its range."""
    X = carray(Xp, BIG)
    lo, hi, low, high = P[6], P[7], P[8], P[9]
    if X[lo] < low or X[hi] >= high:
        P[5] = 1


TEMPLATES = {f.__name__: f for f in (ew1, ew2, ew3, copy, matmul, matmul_small, reduce,
                                     arg_reduce, softmax, gather, scatter, range_check)}


@functools.cache
def kernel(template, op, dtypes, **bindings):
    """The address of template ``template`` (a name of ``TEMPLATES``) bound to scalar op ``op``
    (its ``OP``; None: none) and ``bindings`` (other globals: scalar op names are bound to
    their compiled functions, other values as they are), for arenas of ``dtypes`` (D, X, Y, Z:
    numpy dtype names, None where unused), compiled once per process and cached on disk."""
    fn = TEMPLATES[template]
    env = {"BIG": BIG}
    if op is not None:
        env["OP"] = scalar_op(op)
    for k, v in bindings.items():
        env[k] = scalar_op(v) if isinstance(v, str) else v
    tag = "_".join(dt or "x" for dt in dtypes)
    # (a name of identifier characters: ``-inf`` spelled ``x2dinf``)
    extra = re.sub(r"\W", lambda c: f"x{ord(c.group()):x}",
                   "".join(f"__{k}_{v}" for k, v in sorted(bindings.items())))
    name = f"tape_{template}__{op}{extra}__{tag}"
    ptr = [types.CPointer(_TYPES[dt or "int64"]) for dt in dtypes]
    sig = types.void(types.CPointer(types.int64), types.CPointer(types.int64), *ptr)
    return cfunc(specialize(fn, name, **env), sigutils.normalize_signature(sig)).address


# --- the interpreter -------------------------------------------------------------------------
@intrinsic
def call_kernel(typingctx, address, T, t, I, d, x, y, z):
    """Call the tape kernel at ``address`` on row ``t`` of ``T``, pool ``I`` and the arena
    addresses ``d, x, y, z`` (ints)."""
    sig = types.void(types.int64, T, types.int64, I, types.int64, types.int64, types.int64,
                     types.int64)

    def codegen(context, builder, signature, args):
        addr, rows, t, pool, *bases = args
        tt = context.make_array(signature.args[1])(context, builder, rows)
        row = builder.gep(tt.data, [builder.mul(t, builder.extract_value(tt.shape, 1))])
        i8p = ir.IntType(8).as_pointer()
        ptrs = [builder.bitcast(row, i8p),
                builder.bitcast(context.make_array(signature.args[3])(context, builder, pool).data,
                                i8p)]
        ptrs += [builder.inttoptr(b, i8p) for b in bases]
        fnty = ir.FunctionType(ir.VoidType(), [i8p] * 6)
        builder.call(builder.inttoptr(addr, fnty.as_pointer()), ptrs)
        return context.get_dummy_value()

    return sig, codegen


def run(T, I, addresses, ctx, big, small, lo, hi):
    """Run instructions ``lo`` to ``hi`` of ``T``; the first whose error field its kernel
    set, or -1.  Slots 0-3 are the arenas at addresses ``ctx[0:4]``; slots 4-7 and 8-11 the
    parts of the call's output blocks ``big`` and ``small`` (bytes) for each dtype, from the
    byte offsets ``ctx[4:8]`` and ``ctx[8:12]``."""
    b = big.ctypes.data
    s = small.ctypes.data
    bases = (ctx[0], ctx[1], ctx[2], ctx[3], b + ctx[4], b + ctx[5], b + ctx[6], b + ctx[7],
             s + ctx[8], s + ctx[9], s + ctx[10], s + ctx[11])
    for t in range(lo, hi):
        call_kernel(addresses[T[t, 0]], T, t, I, bases[T[t, 1]], bases[T[t, 2]],
                    bases[T[t, 3]], bases[T[t, 4]])
        if T[t, 5] != 0:
            return t
    return -1


@functools.cache
def interpreter():
    """The compiled ``run`` (its arguments' types never change: compiled once, cached)."""
    return _jit(specialize(run, "ember_tape_run"), parallel=False)



# --- a fused chain as one loop -------------------------------------------------------------
ROW, PER_ROW, ONE = "r", "p", "s"   # how a chain kernel reads a leaf (``chain_source``)


def chain_source(name, key, leaf_dtypes, modes):
    """The text of tape kernel ``name``: chain ``key`` (``kernels/fused.py``'s key) computed by
    its generated scalar function ``CHAIN`` once per element of a ``rows x cols`` output, each
    leaf read by its mode: ``ROW`` a contiguous row at ``off + r * rs`` (a row broadcast has
    ``rs`` 0), ``PER_ROW`` one value per row at ``off + r * rs`` (a column broadcast), ``ONE``
    one value.  The loop over a row reads and writes contiguous slices, so LLVM vectorises it.

    Slots 0-3 are the four arenas in ``SLOTS`` order; ``P[6], P[7]`` the rows and columns and
    ``P[8]`` the pool offset of the fields: per leaf its offset (and for ``ROW`` and
    ``PER_ROW`` its row stride), then per output its offset (outputs are contiguous)."""
    outputs = key[2]
    out_dtypes = [key[1][k][1] for k in outputs]
    arenas = ["F8p", "F4p", "I8p", "B1p"]
    lines = ['"""A tape kernel of a fused chain, generated by ember.kernels.cpu.tape."""',
             "from numba import carray", "", "",
             f"def {name}(P, Ip, F8p, F4p, I8p, B1p):", "    I = carray(Ip, BIG)"]
    for dt in sorted(set(leaf_dtypes) | set(out_dtypes)):
        lines.append(f"    A_{dt} = carray({arenas[SLOTS.index(dt)]}, BIG)")
    lines += ["    rows = P[6]", "    cols = P[7]", "    f = P[8]"]
    p = 0
    for i, (mode, dt) in enumerate(zip(modes, leaf_dtypes)):
        if mode == ONE:
            lines.append(f"    c{i} = A_{dt}[I[f + {p}]]")
            p += 1
        else:
            lines += [f"    a{i} = I[f + {p}]", f"    s{i} = I[f + {p + 1}]"]
            p += 2
    for k in range(len(outputs)):
        lines.append(f"    o{k} = I[f + {p}]")
        p += 1
    lines.append("    for r in range(rows):")
    args = []
    for i, (mode, dt) in enumerate(zip(modes, leaf_dtypes)):
        if mode == ROW:
            lines.append(f"        x{i} = A_{dt}[a{i} + r * s{i}:a{i} + r * s{i} + cols]")
            args.append(f"x{i}[j]")
        elif mode == PER_ROW:
            lines.append(f"        c{i} = A_{dt}[a{i} + r * s{i}]")
            args.append(f"c{i}")
        else:
            args.append(f"c{i}")
    for k, dt in enumerate(out_dtypes):
        lines.append(f"        y{k} = A_{dt}[o{k} + r * cols:o{k} + r * cols + cols]")
    lines.append("        for j in range(cols):")
    call = f"CHAIN({', '.join(args)})"
    if len(outputs) == 1:
        lines.append(f"            y0[j] = {call}")
    else:
        lines.append(f"            {', '.join(f'z{k}' for k in range(len(outputs)))} = {call}")
        lines += [f"            y{k}[j] = z{k}" for k in range(len(outputs))]
    return "\n".join(lines) + "\n"


@functools.cache
def chain(key, leaf_dtypes, modes):
    """The address of a tape kernel computing chain ``key`` (``kernels/fused.py``'s key: the
    generated scalar function the eager chain kernels and CUDA compute, so the same results)
    over leaves of ``leaf_dtypes`` read in ``modes`` (``chain_source``)."""
    from .. import fused as generated
    tag = hashlib.sha256(repr((key, leaf_dtypes, modes)).encode()).hexdigest()[:24]
    name = f"tape_chain_{tag}"
    text = chain_source(name, key, leaf_dtypes, modes)
    mod = generated.generated_module(name, name, lambda: text)
    scalar = generated.load(key)
    calls = {fn: scalar_op(fn) for fn in generated.scalar_ops(key)}
    fn_chain = numba.njit(inline="always", **JIT_OPTIONS)(
        specialize(scalar.chain, generated.name(key) + "__chain", **calls))
    fn = specialize(getattr(mod, name), name, BIG=BIG, CHAIN=fn_chain)
    ptr = [types.CPointer(_TYPES[dt]) for dt in SLOTS]
    sig = types.void(types.CPointer(types.int64), types.CPointer(types.int64), *ptr)
    return cfunc(fn, sigutils.normalize_signature(sig)).address
