"""Elementwise skeletons: a grid-stride loop over the output's elements.

Every operand arrives as ``(buffer, offset, strides)``: the 1-D device buffer
it lives in, the element offset of its first element and its strides in
elements (0 where broadcast), as on the CPU.  ``shape`` is the output shape
after adjacent dims were merged (a tuple), so a contiguous tensor of any rank
is one row and the index arithmetic is a single multiply-add per operand.
"""
from numba import cuda


def map1(a, ao, ast, out, oo, ost, shape, n):
    nd = len(shape)
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, n, step):
        r = i
        pa = ao
        po = oo
        for d in range(nd - 1, -1, -1):
            c = r % shape[d]
            r //= shape[d]
            pa += c * ast[d]
            po += c * ost[d]
        out[po] = OP(a[pa])


def map2(a, ao, ast, b, bo, bst, out, oo, ost, shape, n):
    nd = len(shape)
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, n, step):
        r = i
        pa = ao
        pb = bo
        po = oo
        for d in range(nd - 1, -1, -1):
            c = r % shape[d]
            r //= shape[d]
            pa += c * ast[d]
            pb += c * bst[d]
            po += c * ost[d]
        out[po] = OP(a[pa], b[pb])


def map3(a, ao, ast, b, bo, bst, c3, co, cst, out, oo, ost, shape, n):
    nd = len(shape)
    start = cuda.grid(1)
    step = cuda.gridsize(1)
    for i in range(start, n, step):
        r = i
        pa = ao
        pb = bo
        pc = co
        po = oo
        for d in range(nd - 1, -1, -1):
            c = r % shape[d]
            r //= shape[d]
            pa += c * ast[d]
            pb += c * bst[d]
            pc += c * cst[d]
            po += c * ost[d]
        out[po] = OP(a[pa], b[pb], c3[pc])


def fill(out, n, value):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        out[i] = value


def arange(out, n, start, step):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        out[i] = start + i * step
