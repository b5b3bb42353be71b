"""Loop templates for elementwise ops of one, two and three operands.

Every operand arrives as ``(buffer, offset, strides)``: a 1-D view of its
memory, the element offset of its first element and its strides in elements
(0 where broadcast).  ``shape`` is the output shape after adjacent dims were
merged, so a contiguous tensor of any rank arrives as one long row.

The work is cut into tasks of at most ``CHUNK`` elements of one row; ``prange``
spreads tasks over threads in the parallel variant.  A task finds its row's
offsets without dividing when rows are short (one task per row) and the merged
shape is 2-D, the commonest case (a bias add): two integer divisions per row
took a 32768 x 4 broadcast add from ~0.2 to ~0.47 ms.  (Tasks of many rows that
step between them by strides ran it in ~0.14 ms, but compiled in ~1.7x the
time: not worth it on every kernel.)  Every task runs the loop
that ``MODE`` names, a constant of each kernel (``builder.kernel(..., mode=)``)
chosen by the launcher from the operands' innermost strides, which all tasks
share: unit strides take a contiguous loop LLVM vectorises, stride 0 (a
broadcast operand, any of map3's: clamp's bounds) hoists the value, everything
else takes the general strided loop (clamp by two scalars there: 237 us over
512 x 256 float32, hoisted 38; numpy 16).  A kernel compiles its one loop only:
about half the compile time of one holding them all (measured, map2 sub, mul
and hypot: ~0.3 s against ~0.55 s per dtype).
"""
from numba import prange

CHUNK = 1 << 14

# the modes (values of MODE): innermost strides of (inputs..., output)
CONTIGUOUS = 0   # all 1
B_SCALAR = 1     # map2: (1, 0, 1): the second operand broadcast along the row
A_SCALAR = 2     # (0, 1) for map1, (0, 1, 1) for map2: the first operand broadcast
STRIDED = 3      # anything else
HOISTED = 8      # map3: HOISTED + a bit per operand broadcast along the row (1, 2, 4), the
                 # others of unit stride (clamp's two bounds: 8 + 6)


def map1(a, ao, ast, out, oo, ost, shape):
    nd = shape.shape[0]
    inner = shape[nd - 1]
    per_row = (inner + CHUNK - 1) // CHUNK
    ntasks = per_row
    for d in range(nd - 1):
        ntasks *= shape[d]
    sa = ast[nd - 1]
    so = ost[nd - 1]
    for t in prange(ntasks):
        if per_row > 1:   # (a division per task only for long rows)
            r = t // per_row
            start = (t - r * per_row) * CHUNK
        else:   # (t + 0: a value of its own, not prange's index, which r may not alias)
            r = t + 0
            start = 0
        m = min(inner - start, CHUNK)
        pa = ao + start * sa
        po = oo + start * so
        if nd == 2:   # the commonest merged shape: the row is the task's, no division
            pa += r * ast[0]
            po += r * ost[0]
        else:
            for d in range(nd - 2, -1, -1):
                i = r % shape[d]
                r //= shape[d]
                pa += i * ast[d]
                po += i * ost[d]
        if MODE == CONTIGUOUS:
            x = a[pa:pa + m]
            z = out[po:po + m]
            for j in range(m):
                z[j] = OP(x[j])
        elif MODE == A_SCALAR:
            v = OP(a[pa])
            z = out[po:po + m]
            for j in range(m):
                z[j] = v
        else:
            for j in range(m):
                out[po + j * so] = OP(a[pa + j * sa])


def map2(a, ao, ast, b, bo, bst, out, oo, ost, shape):
    nd = shape.shape[0]
    inner = shape[nd - 1]
    per_row = (inner + CHUNK - 1) // CHUNK
    ntasks = per_row
    for d in range(nd - 1):
        ntasks *= shape[d]
    sa = ast[nd - 1]
    sb = bst[nd - 1]
    so = ost[nd - 1]
    for t in prange(ntasks):
        if per_row > 1:   # (a division per task only for long rows)
            r = t // per_row
            start = (t - r * per_row) * CHUNK
        else:   # (t + 0: a value of its own, not prange's index, which r may not alias)
            r = t + 0
            start = 0
        m = min(inner - start, CHUNK)
        pa = ao + start * sa
        pb = bo + start * sb
        po = oo + start * so
        if nd == 2:   # the commonest merged shape: the row is the task's, no division
            pa += r * ast[0]
            pb += r * bst[0]
            po += r * ost[0]
        else:
            for d in range(nd - 2, -1, -1):
                i = r % shape[d]
                r //= shape[d]
                pa += i * ast[d]
                pb += i * bst[d]
                po += i * ost[d]
        if MODE == CONTIGUOUS:
            x = a[pa:pa + m]
            y = b[pb:pb + m]
            z = out[po:po + m]
            for j in range(m):
                z[j] = OP(x[j], y[j])
        elif MODE == B_SCALAR:
            x = a[pa:pa + m]
            yv = b[pb]
            z = out[po:po + m]
            for j in range(m):
                z[j] = OP(x[j], yv)
        elif MODE == A_SCALAR:
            xv = a[pa]
            y = b[pb:pb + m]
            z = out[po:po + m]
            for j in range(m):
                z[j] = OP(xv, y[j])
        else:
            for j in range(m):
                out[po + j * so] = OP(a[pa + j * sa], b[pb + j * sb])


def map3(a, ao, ast, b, bo, bst, c, co, cst, out, oo, ost, shape):
    nd = shape.shape[0]
    inner = shape[nd - 1]
    per_row = (inner + CHUNK - 1) // CHUNK
    ntasks = per_row
    for d in range(nd - 1):
        ntasks *= shape[d]
    sa = ast[nd - 1]
    sb = bst[nd - 1]
    sc = cst[nd - 1]
    so = ost[nd - 1]
    for t in prange(ntasks):
        if per_row > 1:   # (a division per task only for long rows)
            r = t // per_row
            start = (t - r * per_row) * CHUNK
        else:   # (t + 0: a value of its own, not prange's index, which r may not alias)
            r = t + 0
            start = 0
        m = min(inner - start, CHUNK)
        pa = ao + start * sa
        pb = bo + start * sb
        pc = co + start * sc
        po = oo + start * so
        if nd == 2:   # the commonest merged shape: the row is the task's, no division
            pa += r * ast[0]
            pb += r * bst[0]
            pc += r * cst[0]
            po += r * ost[0]
        else:
            for d in range(nd - 2, -1, -1):
                i = r % shape[d]
                r //= shape[d]
                pa += i * ast[d]
                pb += i * bst[d]
                pc += i * cst[d]
                po += i * ost[d]
        if MODE == CONTIGUOUS:
            x = a[pa:pa + m]
            y = b[pb:pb + m]
            w = c[pc:pc + m]
            z = out[po:po + m]
            for j in range(m):
                z[j] = OP(x[j], y[j], w[j])
        elif MODE >= HOISTED:   # (MODE is a constant: each test folds away)
            xv = a[pa]
            yv = b[pb]
            wv = c[pc]
            x = a[pa:pa + m]
            y = b[pb:pb + m]
            w = c[pc:pc + m]
            z = out[po:po + m]
            for j in range(m):
                z[j] = OP(xv if (MODE - HOISTED) & 1 else x[j],
                          yv if (MODE - HOISTED) & 2 else y[j],
                          wv if (MODE - HOISTED) & 4 else w[j])
        else:
            for j in range(m):
                out[po + j * so] = OP(a[pa + j * sa], b[pb + j * sb], c[pc + j * sc])


# Flat loops for small outputs whose inputs all have the output's size and are C-contiguous
# (the common case of small tensors): three array arguments instead of ten arguments cut
# Numba's per-call dispatch from ~1.0 to ~0.4 us; serial only (small outputs never go
# parallel).
def flat1(a, out):
    for i in range(out.shape[0]):
        out[i] = OP(a[i])


def flat2(a, b, out):
    for i in range(out.shape[0]):
        out[i] = OP(a[i], b[i])


def flat2_first_one(a, b, out):
    """``flat2`` with a one-element ``a`` (a scalar operand: ``2 - x``), read once."""
    x = a[0]
    for i in range(out.shape[0]):
        out[i] = OP(x, b[i])


def flat2_second_one(a, b, out):
    """``flat2`` with a one-element ``b`` (``x * 2``), read once."""
    y = b[0]
    for i in range(out.shape[0]):
        out[i] = OP(a[i], y)


def flat3(a, b, c, out):
    for i in range(out.shape[0]):
        out[i] = OP(a[i], b[i], c[i])
