"""The CPU backend's linear algebra: LAPACK through SciPy and numpy, Numba for small batches.

Which library serves which op (docs/decisions.md, "Linear algebra: libraries"):

- one matrix: LAPACK through SciPy's wrappers, called directly (``potrf``, ``getrf`` +
  ``getrs``, ``getrf`` + ``getri``, BLAS ``trsm``), handing them the transposed view of the
  row-major matrix (a Fortran-ordered array, no copy) and asking for the transposed problem;
- a batch of matrices larger than ``SMALL_N``: numpy's batched gufuncs (``numpy.linalg``: the
  same LAPACK, one C loop over the batch, where a Python loop of SciPy calls pays ~10 us a
  matrix); the triangular solve, which numpy lacks, loops over ``trsm``; on a failure the
  SciPy loop runs again to name the matrix and the minor in the error;
- det, slogdet and eigh: numpy's gufuncs, batched or not; svd and qr of a batch too (one
  matrix: SciPy's ``gesdd``, ``geqrf`` + ``orgqr``, ``_svd_one`` and ``_qr_one`` say why);
- a batch of ``SMALL_MIN_BATCH`` or more matrices of order <= ``SMALL_N``: the Numba kernels of
  ``kernels/cpu/linalg.py`` (one compiled call for the whole batch);
- matmul: ``np.matmul`` (numpy's OpenBLAS), except a large 2-D product once a SciPy routine
  has served Ember in this process, which runs in SciPy's ``gemm`` (``matmul`` says why).

SciPy is imported on the first call that needs it, never by ``import ember``.
"""
import math

import numpy as np

from ...memory import empty
from ..shared import LinAlgError, batch_of, where

# Batched solves and Cholesky of matrices up to this order run in the Numba kernels, when the
# batch has at least SMALL_MIN_BATCH matrices (measured: docs/decisions.md)
SMALL_N = 16
SMALL_MIN_BATCH = 8
# a batch of at least this much work (batch * n^3) runs the kernels' parallel variant.  Waking
# Numba's sleeping workers (OMP_WAIT_POLICY=PASSIVE) measured 3-16 ms per launch on the loaded
# 2-core VM, against 0.5-0.9 ms for 10 000 4x4 matrices serially: those stay serial
PARALLEL_MIN_WORK = 1 << 21


# True once a SciPy LAPACK or BLAS routine has run for Ember in this process: from then on its
# large products run in SciPy's pool too (``matmul``)
_scipy_in_use = False


def _lapack(name, a):
    global _scipy_in_use
    from scipy.linalg import lapack
    _scipy_in_use = True
    return lapack.get_lapack_funcs(name, (a,))


def _blas(name, a):
    global _scipy_in_use
    from scipy.linalg import blas
    _scipy_in_use = True
    return blas.get_blas_funcs(name, (a,))


def scipy_gemm_serves():
    """A product big enough for OpenBLAS to multithread is about to run in SciPy's pool outside
    ``matmul`` (a compiled step's tape calls BLAS through Numba's ``np.dot``, which is SciPy's):
    from now on ``matmul`` sends such products there too."""
    global _scipy_in_use
    _scipy_in_use = True


# OpenBLAS multithreads a gemm from this many multiply-adds (65536 times its
# GEMM_MULTITHREAD_THRESHOLD, 4), and every product that wakes a pool must go to the same one:
# with the limit at 2^21 (to spare small products SciPy's ~3 us of f2py wrapper), the 784-512-10
# MLP step's products between 2^18 and 2^21 woke numpy's pool while the larger ones used
# SciPy's, and the step went from 3.6 to 8-11 ms
GEMM_MIN_WORK = 1 << 18


# A compiled step whose largest product has between GEMM_MIN_WORK and this many multiply-adds
# runs its tape with SciPy's OpenBLAS on one thread.  Such a product (the MLP step's 128x64 @
# 64x64) multithreads and wakes the pool's worker, which then spins ~0.1 s on the other core
# while the rest of the tape runs: every later instruction ran ~15 % slower, and the compiled
# MLP step took 103 us against 93 on one thread.  gemm itself on one thread was as fast up to
# 2^20 (f32 256x64x64: 21.8 us against 25.4; f64: 39.8 against 38.3), slower from 2^21
# (docs/decisions.md, "ember.compile")
ONE_THREAD_MAX = 1 << 20


_threads = None   # (set, get) of SciPy's OpenBLAS's thread count; False where none was found


def scipy_blas_threads():
    """``(set_num_threads, get_num_threads)`` of SciPy's OpenBLAS, or None where they were not
    found (then tapes run with the threads there are)."""
    global _threads
    if _threads is None:
        _threads = _find_scipy_openblas() or False
    return _threads or None


def _find_scipy_openblas():
    """The thread setter and getter of the OpenBLAS bundled in SciPy's wheel (``scipy.libs``
    on Linux, ``scipy/.dylibs`` on macOS), which ``scipy.linalg.cython_blas`` and so Numba's
    ``np.dot`` call; None for a SciPy linked to another BLAS."""
    import ctypes
    import glob
    import os
    try:
        import scipy
    except ImportError:
        return None
    root = os.path.dirname(scipy.__file__)
    paths = (glob.glob(os.path.join(root, os.pardir, "scipy.libs", "*openblas*"))
             + glob.glob(os.path.join(root, ".dylibs", "*openblas*")))
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)   # (already loaded by SciPy: the same library)
        except OSError:
            continue
        for prefix in ("scipy_openblas", "openblas"):
            set_threads = getattr(lib, prefix + "_set_num_threads", None)
            get_threads = getattr(lib, prefix + "_get_num_threads", None)
            if set_threads is not None and get_threads is not None:
                set_threads.argtypes, set_threads.restype = [ctypes.c_int], None
                get_threads.argtypes, get_threads.restype = [], ctypes.c_int
                return set_threads, get_threads
    return None


def matmul(a, b):
    """``a @ b``.  numpy and SciPy each bundle an OpenBLAS with its own thread pool, and a pool's
    workers spin for ~0.1 s after each call (OpenBLAS's thread timeout, 2^28 cycles) before they
    sleep.  A numpy product between two SciPy factorisations or solves ran at a third to a half
    of its speed, the cores taken by the other pool's spinning worker, and the solve after it
    the same.  So once a SciPy routine has served Ember in this process (a factorisation, a
    solve or a triangular product of ``ember.linalg``), a 2-D product of at least
    ``GEMM_MIN_WORK`` multiply-adds runs in SciPy's ``gemm``: a linear-algebra workload then
    does its large BLAS calls in one pool.  Until then numpy's pool serves every product: its
    OpenBLAS (0.3.31 with numpy 2.4) ran a 1024^2 float32 product 6-8 % faster than SciPy's
    (0.3.30), and a test of ``sys.modules`` would not do, because Numba loads ``scipy.linalg``
    (for its own ``np.linalg`` support) by the first kernel Ember runs."""
    if a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype:
        return np.asarray(np.matmul(a, b))
    # a large result goes into a block of the caching pool: numpy's and SciPy's own allocation
    # of it is a fresh mapping each call, and its first touch page-faults (2048 x 64 float32:
    # the product took ~2.5x numpy's timing of itself in a loop of other ops)
    m, n = a.shape[0], b.shape[1]
    if skinny_weight(m, a.shape[1], n) and not b.flags.c_contiguous:
        b = np.ascontiguousarray(b)
    out = empty((m, n), a.dtype) if m * n >= POOLED_PRODUCT else None
    if _scipy_in_use and a.dtype.char in "fdFD" and m * a.shape[1] * n >= GEMM_MIN_WORK:
        # C = A B as C^T = B^T A^T: the Fortran-ordered result read back transposed is C in
        # C order, and neither operand is copied; beta = 0: gemm never reads the dirty block
        x, x_holds_bt = _fortran(b)
        y, y_holds_at = _fortran(a)
        gemm = _blas("gemm", a)
        trans = dict(trans_a=int(not x_holds_bt), trans_b=int(not y_holds_at))
        if out is None:
            return gemm(1.0, x, y, **trans).T
        return gemm(1.0, x, y, beta=0.0, c=out.T, overwrite_c=1, **trans).T
    if out is None:
        # (2-D operands of one dtype: ``np.dot`` is the same product, and the same bits, at
        # ~0.5 us a call against ``np.matmul``'s ~0.8 on tiny matrices: RK4's 3x2 @ 2x2)
        return np.asarray(np.dot(a, b))
    return np.matmul(a, b, out=out)


def skinny_weight(m, k, n):
    """Whether ``(m x k) @ (k x n)`` runs faster with a transposed ``k x n`` operand first
    copied into C order: many rows against a small matrix (a ``linear`` layer's ``x @ w.T`` over
    a large batch).  OpenBLAS's kernels for a transposed ``B`` with a small ``k`` or ``n`` ran
    2-4x slower than on the copy (2048 x 64 @ 64 x 2 float32: 35 us, on the copy 11 us,
    the copy included; docs/decisions.md, "Skinny products")."""
    return m >= SKINNY_ROWS and k * n <= SKINNY_WEIGHT


SKINNY_ROWS = 512
SKINNY_WEIGHT = 1024

# results from this many elements come from the caching pool (``matmul``)
POOLED_PRODUCT = 1 << 15


def _fortran(m):
    """A Fortran-ordered array for the matrix ``m`` and whether it holds ``m``'s transpose:
    a C-contiguous matrix's ``.T`` is one, so LAPACK and BLAS take it without a copy."""
    if m.flags.f_contiguous:
        return m, False
    if m.flags.c_contiguous:
        return m.T, True
    return np.asfortranarray(m), False


def _small(a):
    # (the kernels are real: a complex batch goes to numpy's gufuncs)
    n = a.shape[-1]
    return n <= SMALL_N and a.dtype.kind == "f" and math.prod(batch_of(a)) >= SMALL_MIN_BATCH


def _kernel(template, a):
    from ember.kernels.cpu import linalg
    from ember.kernels.cpu.builder import kernel
    k = kernel(getattr(linalg, template))
    return k.parallel if a.shape[0] * a.shape[-1] ** 3 >= PARALLEL_MIN_WORK else k.serial


def _as3(a):
    """``a`` as a C-contiguous (batch, rows, cols) array (a copy only when needed)."""
    return np.ascontiguousarray(a).reshape((-1,) + a.shape[-2:])


def _pack(parts, batch):
    # (the size of each part's matrix written out: an empty batch cannot infer a -1)
    parts = [np.asarray(p) for p in parts]
    return np.concatenate([p.reshape(batch + (math.prod(p.shape[len(batch):]),)) for p in parts],
                          axis=-1)


def _raise_info(name, batch, info, what):
    bad = np.flatnonzero(info)
    if bad.size:
        index = np.unravel_index(bad[0], batch) if batch else ()
        raise LinAlgError(f"linalg.{name}: {what(int(info.reshape(-1)[bad[0]]))}"
                          f"{where(batch, index)}")


def _not_pd(order):
    return (f"the input is not positive-definite (the leading minor of order {order} is not "
            f"positive-definite)")


def _singular(col):
    return f"the input matrix is singular (U[{col - 1}, {col - 1}] of its LU factorisation is zero)"


def cholesky(op, a, *, upper):
    batch = batch_of(a)
    if a.size == 0:
        return np.zeros(a.shape, a.dtype)
    if _small(a):
        x = _as3(a)
        out = np.empty(x.shape, a.dtype)
        info = np.zeros(x.shape[0], np.int64)
        _kernel("cholesky_batch", x)(x, out, bool(upper), info)
        _raise_info("cholesky", batch, info, _not_pd)
        return out.reshape(a.shape)
    if batch:
        try:    # numpy's gufunc: one C loop over the batch (its lower triangle: a^T's for upper)
            if upper:
                return np.swapaxes(np.linalg.cholesky(np.swapaxes(a, -1, -2)), -1, -2)
            return np.linalg.cholesky(a)
        except np.linalg.LinAlgError:
            pass    # the loop below finds the matrix and the minor for the message
    potrf = _lapack("potrf", a)
    out = None if not batch else np.empty(a.shape, a.dtype)
    for idx in np.ndindex(batch):
        # potrf on the Fortran view a.T: its upper triangle is a's lower one, and the factor
        # U (a.T = U^T U) read back transposed is L (upper=True: the other way round)
        c, info = potrf(a[idx].T, lower=int(upper), clean=1, overwrite_a=0)
        if info > 0:
            raise LinAlgError(f"linalg.cholesky: {_not_pd(info)}{where(batch, idx)}")
        if not batch:
            return c.T
        out[idx] = c.T
    return out


def solve(op, a, b):
    batch = batch_of(a)
    if a.size == 0 or b.size == 0:
        return np.zeros(b.shape, np.result_type(a, b))
    if _small(a):
        lu = np.array(a, order="C").reshape((-1,) + a.shape[-2:])
        x = np.array(b, order="C").reshape((-1,) + b.shape[-2:])
        info = np.zeros(lu.shape[0], np.int64)
        _kernel("lu_solve_batch", lu)(lu, x, info)
        _raise_info("solve", batch, info, _singular)
        return x.reshape(b.shape)
    if batch:
        try:
            return np.linalg.solve(a, b)
        except np.linalg.LinAlgError:
            pass
    getrf, getrs = _lapack("getrf", a), _lapack("getrs", a)
    out = None if not batch else np.empty(b.shape, b.dtype)
    for idx in np.ndindex(batch):
        # factor a.T (the Fortran view, no copy), then solve (a.T)^T x = b
        lu, piv, info = getrf(a[idx].T, overwrite_a=0)
        if info > 0:
            raise LinAlgError(f"linalg.solve: {_singular(info)}{where(batch, idx)}")
        x, info = getrs(lu, piv, b[idx], trans=1, overwrite_b=0)
        if not batch:
            return x
        out[idx] = x
    return out


def inv(op, a):
    batch, n = batch_of(a), a.shape[-1]
    if a.size == 0:
        return np.zeros(a.shape, a.dtype)
    if _small(a):
        lu = np.array(a, order="C").reshape((-1, n, n))
        x = np.broadcast_to(np.eye(n, dtype=a.dtype), lu.shape).copy()
        info = np.zeros(lu.shape[0], np.int64)
        _kernel("lu_solve_batch", lu)(lu, x, info)
        _raise_info("inv", batch, info, _singular)
        return x.reshape(a.shape)
    if batch:
        try:
            return np.linalg.inv(a)
        except np.linalg.LinAlgError:
            pass
    getrf, getri = _lapack("getrf", a), _lapack("getri", a)
    # getri's default workspace (n) leaves it unblocked: twice the time of the blocked one
    lwork, _ = _lapack("getri_lwork", a)(n)
    lwork = max(n, int(1.01 * lwork.real))
    out = None if not batch else np.empty(a.shape, a.dtype)
    for idx in np.ndindex(batch):
        # inv(a.T) = inv(a).T: factor the Fortran view a.T, invert in place, read back
        lu, piv, info = getrf(a[idx].T, overwrite_a=0)
        if info > 0:
            raise LinAlgError(f"linalg.inv: {_singular(info)}{where(batch, idx)}")
        x, info = getri(lu, piv, lwork=lwork, overwrite_lu=1)
        if not batch:
            return x.T
        out[idx] = x.T
    return out


def triangular_solve(op, a, b, *, upper, unitriangular):
    batch = batch_of(a)
    if a.size == 0 or b.size == 0:
        return np.zeros(b.shape, b.dtype)
    if _small(a):
        t = _as3(a)
        x = np.array(b, order="C").reshape((-1,) + b.shape[-2:])
        _kernel("triangular_solve_batch", t)(t, x, bool(upper), bool(unitriangular))
        return x.reshape(b.shape)
    trsm = _blas("trsm", a)
    out = None if not batch else np.empty(b.shape, b.dtype)
    for idx in np.ndindex(batch):
        x = _trsm(trsm, a[idx], b[idx], upper, unitriangular)
        if not batch:
            return x
        out[idx] = x
    return out


def _trsm(trsm, a, b, upper, unit):
    """X with ``a X = b`` for one triangular ``a``, by BLAS ``trsm`` (which does not test for a
    zero pivot: inf/NaN, as torch), giving it each matrix as a Fortran array that holds the
    matrix or its transpose, so only ``b`` is copied (into the result)."""
    fa, holds_at = _fortran(a)
    fb, holds_bt = _fortran(b)
    lower = int(upper) if holds_at else int(not upper)   # a's triangle, as fa stores it
    if not holds_bt:   # a x = b, op(fa) = a
        return trsm(1.0, fa, fb, side=0, lower=lower, trans_a=int(holds_at), diag=int(unit))
    # fb holds b^T: x^T a^T = b^T, op(fa) = a^T; the Fortran result holds x^T
    return trsm(1.0, fa, fb, side=1, lower=lower, trans_a=int(not holds_at), diag=int(unit)).T


def triangular_matmul(op, a, b, *, upper):
    """``triu(a) @ b`` (``upper``) or ``tril(a) @ b``: BLAS ``trmm`` reads only the triangle,
    half a ``gemm``'s multiply-adds (a Cholesky gradient's ``L^H gL``); matrices of fewer than
    ``SMALL_N`` rows multiply the masked triangle with ``np.matmul``."""
    batch = batch_of(a)
    if a.size == 0 or b.size == 0 or a.shape[-1] <= SMALL_N:
        tri = np.triu(a) if upper else np.tril(a)
        return np.asarray(np.matmul(tri, b))
    trmm = _blas("trmm", a)
    out = None if not batch else np.empty(b.shape, np.result_type(a, b))
    for idx in np.ndindex(batch):
        x = _trmm(trmm, a[idx], b[idx], upper)
        if not batch:
            return x
        out[idx] = x
    return out


def _trmm(trmm, a, b, upper):
    """``tri(a) @ b`` for one matrix by BLAS ``trmm``, on Fortran arrays holding each matrix
    or its transpose, as ``_trsm``."""
    fa, holds_at = _fortran(a)
    fb, holds_bt = _fortran(b)
    lower = int(upper) if holds_at else int(not upper)   # a's triangle, as fa stores it
    if not holds_bt:   # x = op(fa) b
        return trmm(1.0, fa, fb, side=0, lower=lower, trans_a=int(holds_at))
    # fb holds b^T: x^T = b^T tri(a)^T, op(fa) = tri(a)^T; the Fortran result holds x^T
    return trmm(1.0, fa, fb, side=1, lower=lower, trans_a=int(not holds_at)).T


# the order of the diagonal blocks of the blocked Cholesky gradient (``cholesky_backward``)
CHOLESKY_BACKWARD_BLOCK = 128


def cholesky_backward(op, l, gl):
    """The gradient of ``a`` from lower Cholesky factor ``l`` and its gradient ``gl``, torch's
    ``cholesky_backward``: ``L^-H Phi L^-1`` with ``Phi`` the Hermitian part of
    ``tril(L^H gL)`` (its diagonal halved).  A real matrix of more than one block runs the
    blocked reverse-mode algorithm (``_cholesky_backward_blocked``); a complex one, or one
    block, the formula: one ``trmm`` and two ``trsm`` of the whole matrix."""
    n = l.shape[-1]
    if l.size == 0:
        return np.zeros(l.shape, np.result_type(l, gl))
    if l.dtype.kind == "c" or n <= CHOLESKY_BACKWARD_BLOCK:
        return _cholesky_formula(l, gl)
    batch = batch_of(l)
    if not batch:
        return _cholesky_backward_blocked(l, gl, CHOLESKY_BACKWARD_BLOCK)
    out = np.empty(l.shape, np.result_type(l, gl))
    for idx in np.ndindex(batch):
        out[idx] = _cholesky_backward_blocked(l[idx], gl[idx], CHOLESKY_BACKWARD_BLOCK)
    return out


def _cholesky_formula(l, gl):
    """``L^-H Phi L^-1`` as written: one ``trmm`` and two ``trsm`` of the whole matrices."""
    lh = _mH(l)
    m = np.tril(triangular_matmul(None, lh, gl, upper=True))
    phi = (m + _mH(np.tril(m, -1))) * 0.5
    y = triangular_solve(None, lh, phi, upper=True, unitriangular=False)
    return _mH(triangular_solve(None, lh, _mH(y), upper=True, unitriangular=False))


def _cholesky_backward_blocked(l, gl, nb):
    """``cholesky_backward`` of one real matrix by blocks of ``nb``, from the last block row
    to the first (Murray 2016, "Differentiation of the Cholesky decomposition", its blocked
    level-3 algorithm): about n^3/3 multiply-adds against the formula's 3n^3/2.  ``w`` starts
    as ``tril(gL)`` and ends as the gradient of the lower triangle of ``a`` (an off-diagonal
    entry counts both of ``a``'s symmetric entries), which the last line symmetrises."""
    n = l.shape[0]
    w = np.tril(gl).astype(np.result_type(l, gl), copy=False)
    for k in range(n, 0, -nb):
        j = max(0, k - nb)
        r, d, b, c = l[j:k, :j], l[j:k, j:k], l[k:, :j], l[k:, j:k]
        wr, wd, wb, wc = w[j:k, :j], w[j:k, j:k], w[k:, :j], w[k:, j:k]
        if k < n:
            wc[...] = triangular_solve(None, d.T, wc.T, upper=True, unitriangular=False).T
            wb -= matmul(wc, r)
            wd -= np.tril(matmul(wc.T, c))
        # the diagonal block: the formula's (symmetric) result x, folded into the lower
        # triangle (each off-diagonal entry twice)
        x = _cholesky_formula(d, wd)
        wd[...] = np.tril(x, -1) * 2 + np.diag(np.diag(x))
        if j:
            wr -= matmul(wd + wd.T, r)
            if k < n:
                wr -= matmul(wc.T, b)
    # w is lower triangular: its symmetric part, the diagonal counted once
    out = np.add(w, w.T)
    out *= 0.5
    np.fill_diagonal(out, np.diagonal(w))
    return out


def det(op, a):
    return np.asarray(np.linalg.det(a))


def slogdet(op, a):
    sign, logabsdet = np.linalg.slogdet(a)
    return _pack([sign, logabsdet], batch_of(a))


def eigh(op, a, *, lower, vectors):
    uplo = "L" if lower else "U"
    try:
        if not vectors:
            return np.linalg.eigvalsh(a, UPLO=uplo)
        w, v = np.linalg.eigh(a, UPLO=uplo)
    except np.linalg.LinAlgError as e:
        raise LinAlgError(f"linalg.eigh: the algorithm failed to converge ({e})") from None
    return _pack([w, v], batch_of(a))


def svd(op, a, *, full_matrices, vectors):
    if a.ndim == 2 and a.size:
        return _svd_one(a, full_matrices, vectors)
    try:
        if not vectors:
            return np.linalg.svd(a, compute_uv=False)
        parts = np.linalg.svd(a, full_matrices=full_matrices)
    except np.linalg.LinAlgError as e:
        raise LinAlgError(f"linalg.svd: the algorithm failed to converge ({e})") from None
    return _pack(parts, batch_of(a))


def _svd_one(a, full_matrices, vectors):
    """One matrix by SciPy's ``gesdd``, the routine numpy's gufunc calls, on a Fortran copy as
    numpy makes (so the singular vectors come out the same, signs included): 512 x 512
    float64 69-70 ms against numpy's 75 (its gufunc's own overhead)."""
    gesdd, lwork_of = _lapack("gesdd", a), _lapack("gesdd_lwork", a)
    m, n = a.shape
    lwork, _ = lwork_of(m, n, compute_uv=int(vectors), full_matrices=int(full_matrices))
    # (a copy always: gesdd destroys its input, and a row or a column is Fortran already)
    u, s, vh, info = gesdd(np.array(a, order="F"), compute_uv=int(vectors), lwork=int(lwork.real),
                           full_matrices=int(full_matrices), overwrite_a=1)
    if info > 0:
        raise LinAlgError("linalg.svd: the algorithm failed to converge (SVD did not converge)")
    if not vectors:
        return s
    return _pack([u, s, vh], ())


def qr(op, a, *, mode):
    if a.ndim == 2 and a.size:
        return _qr_one(a, mode)
    if mode == "r":
        return np.asarray(np.linalg.qr(a, mode="r"))
    q, r = np.linalg.qr(a, mode=mode)
    return _pack([q, r], batch_of(a))


# the workspace per column of geqrf/orgqr: blocked code needs (columns x block), LAPACK's block
# for both is 32
QR_WORK_PER_COLUMN = 64


def _qr_one(a, mode):
    """One matrix by ``geqrf`` and ``orgqr``/``ungqr``, as numpy, given blocked workspaces
    (numpy's gufunc took 21-34 ms on 512 x 512 float64 against 16-27 ms here)."""
    m, n = a.shape
    k = min(m, n)
    qr, tau, _, _ = _lapack("geqrf", a)(a, lwork=QR_WORK_PER_COLUMN * n, overwrite_a=0)
    r = np.triu(qr if mode == "complete" else qr[:k])
    if mode == "r":
        return r
    if mode == "complete" and m > n:   # Q is m x m: the reflectors in its first n columns
        full = np.zeros((m, m), a.dtype, order="F")
        full[:, :n] = qr
        qr = full
    else:              # reduced: k columns; complete with m <= n: m == k
        qr = qr[:, :k]
    orgqr = _lapack("ungqr" if a.dtype.kind == "c" else "orgqr", a)
    q, _, _ = orgqr(qr, tau, lwork=QR_WORK_PER_COLUMN * qr.shape[1], overwrite_a=1)
    return _pack([q, r], ())


def pinv(op, a, *, atol, rtol, hermitian):
    m, n = a.shape[-2:]
    if a.size == 0:
        return np.zeros(a.shape[:-2] + (n, m), a.dtype)
    if hermitian:
        w, v = np.linalg.eigh(a)
        s, left, right = np.abs(w), v * np.sign(w)[..., None, :], v
    else:
        left, s, vh = np.linalg.svd(a, full_matrices=False)
        right = _mH(vh)
    cutoff = np.maximum(atol, rtol * s.max(axis=-1, keepdims=True))
    keep = s > cutoff
    inv = np.where(keep, 1 / np.where(keep, s, 1), 0).astype(s.dtype)
    return np.asarray((right * inv[..., None, :]) @ _mH(left))


def _mH(m):
    """The conjugate transpose of (a batch of) matrices (a real one's transpose)."""
    m = np.swapaxes(m, -1, -2)
    return m.conj() if m.dtype.kind == "c" else m
