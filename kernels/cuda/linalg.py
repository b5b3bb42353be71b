"""Tiled shared-memory matmul, batched over broadcast leading dims.

Each block computes a ``TILE x TILE`` tile of one batch's output, staging
``TILE x TILE`` tiles of ``a`` and ``b`` in shared memory.  Operands are read
through their strides (a transposed or broadcast operand costs no copy):
``ast``/``bst`` are the (row, col) strides of the matrices and
``abst``/``bbst`` the strides of the batch dims ``bshape`` (0 where
broadcast).  ``DT`` is the dtype of the operands and of the output.
"""
import math

from numba import cuda

from .builder import TILE


def matmul_tiled(a, ao, ast, abst, b, bo, bst, bbst, out, bshape, m, k, n, nbatch):
    sa = cuda.shared.array((TILE, TILE), DT)
    sb = cuda.shared.array((TILE, TILE), DT)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    ntr = (m + TILE - 1) // TILE
    ntc = (n + TILE - 1) // TILE
    nd = len(bshape)
    for z in range(cuda.blockIdx.z, nbatch, cuda.gridDim.z):
        pa = ao
        pb = bo
        rem = z
        for d in range(nd - 1, -1, -1):
            c = rem % bshape[d]
            rem //= bshape[d]
            pa += c * abst[d]
            pb += c * bbst[d]
        for rt in range(cuda.blockIdx.y, ntr, cuda.gridDim.y):
            row = rt * TILE + ty
            for ct in range(cuda.blockIdx.x, ntc, cuda.gridDim.x):
                col = ct * TILE + tx
                acc = DT(0)
                for k0 in range(0, k, TILE):
                    if row < m and k0 + tx < k:
                        sa[ty, tx] = a[pa + row * ast[0] + (k0 + tx) * ast[1]]
                    else:
                        sa[ty, tx] = 0
                    if col < n and k0 + ty < k:
                        sb[ty, tx] = b[pb + (k0 + ty) * bst[0] + col * bst[1]]
                    else:
                        sb[ty, tx] = 0
                    cuda.syncthreads()
                    for q in range(TILE):
                        acc += sa[ty, q] * sb[q, tx]
                    cuda.syncthreads()
                if row < m and col < n:
                    out[(z * m + row) * n + col] = acc



def lu_det(lu, piv, n, nb, det, logabs, sign):
    """det, log|det| and sign of each matrix from its LU factors (getrf's output: the factors
    of matrix b at ``b * n * n``, its diagonal every ``n + 1`` entries; ``piv`` the 1-based row
    swaps, each one flipping the sign).  One thread per matrix; a zero pivot gives
    (0, -inf, 0), as numpy's slogdet."""
    for b in range(cuda.grid(1), nb, cuda.gridsize(1)):
        swaps = 1.0
        for i in range(n):
            if piv[b * n + i] != i + 1:
                swaps = -swaps
        p = swaps
        s = swaps
        la = 0.0
        for i in range(n):
            u = lu[b * n * n + i * (n + 1)]
            p *= u
            if u < 0:
                s = -s
                la += math.log(-u)
            elif u > 0:
                la += math.log(u)
            else:
                s = 0.0
                la = -math.inf
        det[b] = p
        logabs[b] = la
        sign[b] = s


def lu_det_complex(lu, piv, n, nb, det, logabs, sign):
    """``lu_det`` of complex factors: the sign is det / |det|, a complex number of modulus 1
    (0 for a zero pivot), log|det| the sum of the pivots' log-moduli."""
    for b in range(cuda.grid(1), nb, cuda.gridsize(1)):
        swaps = 1.0
        for i in range(n):
            if piv[b * n + i] != i + 1:
                swaps = -swaps
        p = complex(swaps)
        s = complex(swaps)
        la = 0.0
        for i in range(n):
            u = lu[b * n * n + i * (n + 1)]
            p *= u
            m = abs(u)
            if m > 0:
                s *= u / m
                la += math.log(m)
            else:
                s = 0j
                la = -math.inf
        det[b] = p
        logabs[b] = la
        sign[b] = s
