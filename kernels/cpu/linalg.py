"""Batches of small matrices: Cholesky, LU solve and triangular solve, one matrix per task.

One LAPACK call per matrix costs about a microsecond of call overhead and copies, far more
than the ~n^3/3 flops of a 4x4 factorisation; these loops run a whole batch in one compiled
call (``prange`` over the batch in the parallel variant).  The engine picks them for small
orders only (engine/backends/cpu/linalg.py ``SMALL_N``); larger matrices go to LAPACK.
The algorithms are LAPACK's unblocked ones (potf2, getf2 with partial pivoting, trsv), with
the same failure rules: a Cholesky pivot that is not positive (or NaN) stops that matrix with
``info = order of the minor``; an exactly zero LU pivot gives ``info = its column + 1``.

Arrays are C-contiguous ``(batch, n, n)`` and ``(batch, n, k)``.
"""
import math

from numba import prange


def cholesky_batch(a, out, upper, info):
    """``out[b]`` = the lower (or, ``upper``, upper) Cholesky factor of ``a[b]``, read from its
    lower (upper) triangle; the other triangle of ``out`` is zero."""
    nb = a.shape[0]
    n = a.shape[1]
    for b in prange(nb):
        o = out[b]
        x = a[b]
        for i in range(n):
            for j in range(n):
                o[i, j] = 0.0
        for j in range(n):
            # work on the lower factor L (upper: L^T, so the reads and writes transpose)
            s = x[j, j]
            for k in range(j):
                ljk = o[k, j] if upper else o[j, k]
                s -= ljk * ljk
            if not s > 0.0:             # also NaN
                info[b] = j + 1
                break
            d = math.sqrt(s)
            o[j, j] = d
            for i in range(j + 1, n):
                t = x[j, i] if upper else x[i, j]
                for k in range(j):
                    if upper:
                        t -= o[k, i] * o[k, j]
                    else:
                        t -= o[i, k] * o[j, k]
                if upper:
                    o[j, i] = t / d
                else:
                    o[i, j] = t / d


def lu_solve_batch(lu, x, info):
    """Solve ``a[b] @ x = rhs`` in place: ``lu`` holds copies of the matrices (overwritten by
    their LU factors), ``x`` the right-hand sides (overwritten by the solutions)."""
    nb = lu.shape[0]
    n = lu.shape[1]
    k = x.shape[2]
    for b in prange(nb):
        a = lu[b]
        r = x[b]
        for j in range(n):
            p = j                               # partial pivoting: the largest |entry|
            big = abs(a[j, j])
            for i in range(j + 1, n):
                v = abs(a[i, j])
                if v > big:
                    big = v
                    p = i
            if big == 0.0:
                info[b] = j + 1
                break
            if p != j:
                for c in range(n):
                    t = a[j, c]
                    a[j, c] = a[p, c]
                    a[p, c] = t
                for c in range(k):
                    t = r[j, c]
                    r[j, c] = r[p, c]
                    r[p, c] = t
            inv = 1.0 / a[j, j]
            for i in range(j + 1, n):
                f = a[i, j] * inv
                a[i, j] = f
                for c in range(j + 1, n):
                    a[i, c] -= f * a[j, c]
                for c in range(k):
                    r[i, c] -= f * r[j, c]
        if info[b] != 0:
            continue
        for i in range(n - 1, -1, -1):          # back substitution with U
            for c in range(k):
                t = r[i, c]
                for q in range(i + 1, n):
                    t -= a[i, q] * r[q, c]
                r[i, c] = t / a[i, i]


def triangular_solve_batch(a, x, upper, unit):
    """Solve ``a[b] @ x = rhs`` in place in ``x`` for triangular ``a[b]`` (only its ``upper``
    or lower triangle is read; ``unit``: its diagonal is taken as ones).  No singularity check
    (a zero pivot gives inf/NaN, as BLAS trsm does)."""
    nb = a.shape[0]
    n = a.shape[1]
    k = x.shape[2]
    for b in prange(nb):
        t = a[b]
        r = x[b]
        for step in range(n):
            i = n - 1 - step if upper else step
            for c in range(k):
                s = r[i, c]
                if upper:
                    for q in range(i + 1, n):
                        s -= t[i, q] * r[q, c]
                else:
                    for q in range(i):
                        s -= t[i, q] * r[q, c]
                r[i, c] = s if unit else s / t[i, i]
