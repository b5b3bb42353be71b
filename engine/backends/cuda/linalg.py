"""The CUDA backend's linear algebra: cuSOLVER and cuBLAS on the device buffers.

Vendor routines are column-major and work in place.  A row-major ``(n, n)`` buffer read
column-major is the transposed matrix, so most calls take a dense copy of the input as it is
and ask for the transposed problem (``potrf`` with the other triangle, ``getrs``/``trsm``
with ``trans``); a right-hand side, a QR or a tall SVD input is copied transposed (a dense
copy of the permuted view).  Results come back as views (permutes) of the vendor's buffers,
or are copied into the packed result of a multi-output op (``engine/backends/shared.py``).

``Vendor`` is the one place that calls the library, one matrix of the batch at a time:

- on a GPU, ``NvmathVendor``: ``nvmath.bindings.cusolverDn`` / ``cublas`` (the ``cuda``
  extra), zero-copy on the ``CudaArray`` buffers (``__cuda_array_interface__`` pointers), on
  the backend's stream;
- under the simulator (``NUMBA_ENABLE_CUDASIM=1``), ``HostVendor``: the same LAPACK routines
  (SciPy's wrappers) on a host copy of each buffer, copied back.  Everything around the call
  (layouts, leading dimensions, batching, output allocation, triangles, packing, info
  checks) is the code a GPU runs.
"""
import math

import numpy as np

from ember.kernels.cuda import builder as B
from ember.kernels.cuda import linalg as skeletons

from ...ir import Op
from .. import get_backend
from ..shared import LinAlgError, batch_of, c_strides, offsets, where
from . import elementwise as ew
from . import matmul, reduce
from .array import SIMULATOR

# cuBLAS / cuSOLVER enum values (cublas_api.h: CUBLAS_FILL_MODE_LOWER = 0, UPPER = 1;
# CUBLAS_OP_N = 0, T = 1; CUBLAS_SIDE_LEFT = 0; CUBLAS_DIAG_NON_UNIT = 0, UNIT = 1;
# cusolver_common.h: CUSOLVER_EIG_MODE_NOVECTOR = 0, VECTOR = 1)
LOWER, UPPER = 0, 1
OP_N, OP_T = 0, 1

# the BLAS/LAPACK type letter of each dtype, and the routines a complex matrix calls by other
# names (Hermitian for symmetric, unitary for orthogonal)
_PREFIX = {"f": "s", "d": "d", "F": "c", "D": "z"}
_COMPLEX_NAMES = {"syevd": "heevd", "syevd_buffer_size": "heevd_buffer_size", "orgqr": "ungqr",
                  "orgqr_buffer_size": "ungqr_buffer_size"}


def _named(name, dtype):
    return _COMPLEX_NAMES.get(name, name) if np.dtype(dtype).kind == "c" else name


def _real(dtype):
    """The dtype of ``dtype``'s parts: of eigen- and singular values, log|det|."""
    return np.finfo(dtype).dtype


class HostVendor:
    """The simulator's stand-in for cuSOLVER/cuBLAS: SciPy's LAPACK on host copies.

    Buffers are ``CudaArray``s of shape ``(batch, cols, ld)``: matrix ``b`` is the column-major
    ``ld x cols`` array at ``buf[b]`` (the layout the vendor routines see)."""

    def __init__(self, backend):
        self.b = backend

    def _host(self, x):
        return self.b.to_host(x)

    def _put(self, host, x):
        x.buf[x.offset:x.offset + host.size].copy_to_device(np.ascontiguousarray(host).reshape(-1),
                                                             stream=self.b.stream)

    @staticmethod
    def _lapack(name, x):
        from scipy.linalg import lapack
        return lapack.get_lapack_funcs(_named(name, x.dtype), (x,))

    def potrf(self, a, n, lower):
        h = self._host(a)
        info = np.zeros(h.shape[0], np.int64)
        f = self._lapack("potrf", h)
        for i in range(h.shape[0]):
            c, info[i] = f(h[i].T, lower=int(lower == LOWER), clean=0, overwrite_a=0)
            h[i] = c.T
        self._put(h, a)
        return info

    def getrf(self, a, piv, n):
        h = self._host(a)
        p = np.zeros((h.shape[0], n), np.int32)
        info = np.zeros(h.shape[0], np.int64)
        f = self._lapack("getrf", h)
        for i in range(h.shape[0]):
            lu, pv, info[i] = f(h[i].T, overwrite_a=0)
            h[i] = lu.T
            p[i] = pv + 1                    # LAPACK's 1-based pivots (SciPy returns 0-based)
        self._put(h, a)
        self._put(p, piv)
        return info

    def getrs(self, a, piv, b, n, nrhs, trans):
        h, hb, p = self._host(a), self._host(b), self._host(piv)
        f = self._lapack("getrs", h)
        for i in range(h.shape[0]):
            x, _ = f(h[i].T, p[i] - 1, hb[i].T, trans=trans)
            hb[i] = x.T
        self._put(hb, b)

    def trsm(self, a, b, n, nrhs, lower, trans, unit):
        from scipy.linalg import blas
        h, hb = self._host(a), self._host(b)
        f = blas.get_blas_funcs("trsm", (h,))
        for i in range(h.shape[0]):
            hb[i] = f(1.0, h[i].T, hb[i].T, side=0, lower=int(lower == LOWER), trans_a=trans,
                      diag=unit).T
        self._put(hb, b)

    def syevd(self, a, w, n, lower, vectors):
        h = self._host(a)
        hw = np.zeros((h.shape[0], n), _real(h.dtype))
        info = np.zeros(h.shape[0], np.int64)
        f = self._lapack("syevd", h)
        for i in range(h.shape[0]):
            hw[i], v, info[i] = f(h[i].T, compute_v=int(vectors), lower=int(lower == LOWER))
            if vectors:
                h[i] = v.T
        self._put(h, a)
        self._put(hw, w)
        return info

    def gesvd(self, a, s, u, vt, m, n, full, vectors):
        h = self._host(a)
        hs = np.zeros((h.shape[0], min(m, n)), _real(h.dtype))
        hu = self._host(u) if vectors else None
        hv = self._host(vt) if vectors else None
        info = np.zeros(h.shape[0], np.int64)
        f = self._lapack("gesvd", h)
        for i in range(h.shape[0]):
            res = f(h[i].T, compute_uv=int(vectors), full_matrices=int(full))
            if vectors:
                uu, hs[i], vv, info[i] = res
                hu[i], hv[i] = uu.T, vv.T
            else:
                _, hs[i], _, info[i] = res
        self._put(hs, s)
        if vectors:
            self._put(hu, u)
            self._put(hv, vt)
        return info

    def geqrf(self, a, tau, m, n):
        h = self._host(a)
        k = min(m, n)
        ht = np.zeros((h.shape[0], k), h.dtype)
        f = self._lapack("geqrf", h)
        for i in range(h.shape[0]):
            qr, t, _, _ = f(h[i].T[:m, :n])
            h[i].T[:m, :n] = qr
            ht[i] = t[:k]
        self._put(h, a)
        self._put(ht, tau)

    def orgqr(self, a, tau, m, ncols, k):
        h, ht = self._host(a), self._host(tau)
        f = self._lapack("orgqr", h)
        for i in range(h.shape[0]):
            q, _, _ = f(h[i].T[:m, :ncols], ht[i][:k])
            h[i].T[:m, :ncols] = q
        self._put(h, a)


class NvmathVendor:
    """cuSOLVER / cuBLAS through nvmath-python's bindings, on the device buffers themselves."""

    def __init__(self, backend):
        try:
            from nvmath.bindings import cublas, cusolverDn
        except ImportError as e:
            raise ImportError("ember.linalg on a GPU needs nvmath-python: pip install "
                              "'ember[cuda]'") from e
        self.b = backend
        self.sol, self.blas = cusolverDn, cublas
        stream = backend.stream.handle
        stream = int(getattr(stream, "value", stream) or 0)
        self.h = cusolverDn.create()
        cusolverDn.set_stream(self.h, stream)
        self.hb = cublas.create()
        cublas.set_stream(self.hb, stream)

    @staticmethod
    def _ptr(x, i=0):
        per = math.prod(x.shape[1:])
        return x.__cuda_array_interface__["data"][0] + i * per * x.dtype.itemsize

    def _fn(self, lib, name, x):
        return getattr(lib, _PREFIX[np.dtype(x.dtype).char] + _named(name, x.dtype))

    def _infos(self, info):
        return self.b.to_host(info).astype(np.int64)

    def _work(self, size, dtype):
        return self.b.empty((max(1, int(size)),), dtype)

    def potrf(self, a, n, lower):
        nb = a.shape[0]
        info = self.b.empty((nb,), np.int32)
        lwork = self._fn(self.sol, "potrf_buffer_size", a)(self.h, lower, n, self._ptr(a), n)
        work = self._work(lwork, a.dtype)
        f = self._fn(self.sol, "potrf", a)
        for i in range(nb):
            f(self.h, lower, n, self._ptr(a, i), n, self._ptr(work), lwork, self._ptr(info[i:i + 1]))
        return self._infos(info)

    def getrf(self, a, piv, n):
        nb = a.shape[0]
        info = self.b.empty((nb,), np.int32)
        lwork = self._fn(self.sol, "getrf_buffer_size", a)(self.h, n, n, self._ptr(a), n)
        work = self._work(lwork, a.dtype)
        f = self._fn(self.sol, "getrf", a)
        for i in range(nb):
            f(self.h, n, n, self._ptr(a, i), n, self._ptr(work), self._ptr(piv, i),
              self._ptr(info[i:i + 1]))
        return self._infos(info)

    def getrs(self, a, piv, b, n, nrhs, trans):
        info = self.b.empty((1,), np.int32)
        f = self._fn(self.sol, "getrs", a)
        for i in range(a.shape[0]):
            f(self.h, trans, n, nrhs, self._ptr(a, i), n, self._ptr(piv, i), self._ptr(b, i), n,
              self._ptr(info))

    def trsm(self, a, b, n, nrhs, lower, trans, unit):
        one = np.ones(1, a.dtype)          # alpha, a host pointer (CUBLAS_POINTER_MODE_HOST)
        f = self._fn(self.blas, "trsm", a)
        for i in range(a.shape[0]):
            f(self.hb, 0, lower, trans, unit, n, nrhs, one.ctypes.data, self._ptr(a, i), n,
              self._ptr(b, i), n)

    def syevd(self, a, w, n, lower, vectors):
        nb = a.shape[0]
        info = self.b.empty((nb,), np.int32)
        jobz = int(vectors)
        lwork = self._fn(self.sol, "syevd_buffer_size", a)(self.h, jobz, lower, n, self._ptr(a), n,
                                                           self._ptr(w))
        work = self._work(lwork, a.dtype)
        f = self._fn(self.sol, "syevd", a)
        for i in range(nb):
            f(self.h, jobz, lower, n, self._ptr(a, i), n, self._ptr(w, i), self._ptr(work), lwork,
              self._ptr(info[i:i + 1]))
        return self._infos(info)

    def gesvd(self, a, s, u, vt, m, n, full, vectors):
        nb = a.shape[0]
        info = self.b.empty((nb,), np.int32)
        job = ord("A" if full else "S") if vectors else ord("N")
        k = min(m, n)
        lwork = self._fn(self.sol, "gesvd_buffer_size", a)(self.h, m, n)
        work = self._work(lwork, a.dtype)
        rwork = self._work(k, _real(a.dtype))
        f = self._fn(self.sol, "gesvd", a)
        ldvt = n if full else k
        for i in range(nb):
            f(self.h, job, job, m, n, self._ptr(a, i), m, self._ptr(s, i),
              self._ptr(u, i) if vectors else 0, m, self._ptr(vt, i) if vectors else 0, ldvt,
              self._ptr(work), lwork, self._ptr(rwork), self._ptr(info[i:i + 1]))
        return self._infos(info)

    def geqrf(self, a, tau, m, n):
        info = self.b.empty((1,), np.int32)
        lwork = self._fn(self.sol, "geqrf_buffer_size", a)(self.h, m, n, self._ptr(a), a.shape[2])
        work = self._work(lwork, a.dtype)
        f = self._fn(self.sol, "geqrf", a)
        for i in range(a.shape[0]):
            f(self.h, m, n, self._ptr(a, i), a.shape[2], self._ptr(tau, i), self._ptr(work), lwork,
              self._ptr(info))

    def orgqr(self, a, tau, m, ncols, k):
        info = self.b.empty((1,), np.int32)
        lwork = self._fn(self.sol, "orgqr_buffer_size", a)(self.h, m, ncols, k, self._ptr(a),
                                                           a.shape[2], self._ptr(tau))
        work = self._work(lwork, a.dtype)
        f = self._fn(self.sol, "orgqr", a)
        for i in range(a.shape[0]):
            f(self.h, m, ncols, k, self._ptr(a, i), a.shape[2], self._ptr(tau, i), self._ptr(work),
              lwork, self._ptr(info))


_VENDORS = {}


def _vendor(b):
    """The vendor of backend ``b``: cuSOLVER/cuBLAS on a GPU, the host stand-in under the
    simulator (one per backend: its handles are bound to the backend's stream)."""
    v = _VENDORS.get(b)
    if v is None:
        v = _VENDORS[b] = HostVendor(b) if SIMULATOR else NvmathVendor(b)
    return v


# --- layouts ----------------------------------------------------------------------------
def _as3(b, x, transpose=False):
    """A fresh dense ``(batch, r, c)`` copy of ``x`` (of its last two dims swapped: the
    column-major layout of ``x`` itself)."""
    if transpose:
        x = _permuted(x, tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2))
    y = ew.copy(b, x)
    return y.view(0, (max(1, math.prod(y.shape[:-2])),) + y.shape[-2:],
                  c_strides((max(1, math.prod(y.shape[:-2])),) + y.shape[-2:]))


def _shaped(x3, batch, transpose=False):
    """``(batch', r, c)`` buffer ``x3`` as ``batch + (r, c)`` (transposed: a view)."""
    shape = batch + x3.shape[-2:]
    y = x3.view(x3.offset, shape, c_strides(shape))
    if transpose:
        y = _permuted(y, tuple(range(len(batch))) + (len(batch) + 1, len(batch)))
    return y


def _mask(b, rows, cols, keep):
    """A device bool (rows, cols) mask, ``keep(i, j)`` true where kept."""
    i, j = np.indices((rows, cols))
    return b.from_host(keep(i, j))


def _masked(b, x, mask):
    """A new array: ``x`` where ``mask`` (broadcast over the batch), else 0."""
    zero = ew.full(b, (), 0, np.dtype(x.dtype))
    out = b.empty(x.shape, x.dtype)
    return ew.map(b, "where", [mask, x, zero], out)


def _pack(b, parts, batch):
    shapes = [tuple(p.shape[len(batch):]) for p in parts]
    spans, total = offsets(shapes)
    packed = b.empty(batch + (total,), np.result_type(*[p.dtype for p in parts]))
    for p, s, (lo, _) in zip(parts, shapes, spans):
        region = packed.view(packed.offset + lo, batch + s, packed.strides[:-1] + c_strides(s))
        ew.map(b, "identity", [p], region)
    return packed


def _check(name, batch, info, what):
    bad = np.flatnonzero(info > 0)
    if bad.size:
        index = np.unravel_index(bad[0], batch) if batch else ()
        raise LinAlgError(f"linalg.{name}: {what(int(info[bad[0]]))}{where(batch, index)}")


# --- the ops -------------------------------------------------------------------------------
def cholesky(b, op, a, *, upper):
    batch, n = batch_of(a), a.shape[-1]
    if a.size == 0:
        return ew.full(b, a.shape, 0, np.dtype(a.dtype))
    x = _as3(b, a)      # column-major: a^T; lower (upper) triangle of a = its upper (lower)
    info = _vendor(b).potrf(x, n, LOWER if upper else UPPER)
    _check("cholesky", batch, info, lambda k: f"the input is not positive-definite (the "
           f"leading minor of order {k} is not positive-definite)")
    keep = _mask(b, n, n, (lambda i, j: i <= j) if upper else (lambda i, j: i >= j))
    return _masked(b, _shaped(x, batch), keep)


def solve(b, op, a, rhs):
    batch, n, k = batch_of(a), a.shape[-1], rhs.shape[-1]
    if a.size == 0 or rhs.size == 0:
        return ew.full(b, rhs.shape, 0, np.dtype(rhs.dtype))
    lu = _as3(b, a)                           # column-major a^T
    piv = b.empty((lu.shape[0], n), np.int32)
    info = _vendor(b).getrf(lu, piv, n)
    _check("solve", batch, info, lambda c: f"the input matrix is singular (U[{c - 1}, "
           f"{c - 1}] of its LU factorisation is zero)")
    x = _as3(b, rhs, transpose=True)          # column-major rhs
    _vendor(b).getrs(lu, piv, x, n, k, OP_T)  # (a^T)^T x = rhs
    return _shaped(x, batch, transpose=True)


def inv(b, op, a):
    # cuSOLVER's legacy API has no getri: getrf, then getrs against the identity
    n = a.shape[-1]
    eye = b.from_host(np.eye(n, dtype=a.dtype))
    try:
        return solve(b, op, a, eye.broadcast(a.shape))
    except LinAlgError as e:
        raise LinAlgError(str(e).replace("linalg.solve", "linalg.inv")) from None


def triangular_solve(b, op, a, rhs, *, upper, unitriangular):
    batch, n, k = batch_of(a), a.shape[-1], rhs.shape[-1]
    if a.size == 0 or rhs.size == 0:
        return ew.full(b, rhs.shape, 0, np.dtype(rhs.dtype))
    t = _as3(b, a)
    x = _as3(b, rhs, transpose=True)
    _vendor(b).trsm(t, x, n, k, LOWER if upper else UPPER, OP_T, int(bool(unitriangular)))
    return _shaped(x, batch, transpose=True)


def triangular_matmul(b, op, a, rhs, *, upper):
    """``triu(a) @ rhs`` or ``tril(a) @ rhs``: the masked triangle through the backend's
    matmul (cuBLAS's trmm would halve the multiply-adds; the CUDA tier needs the result)."""
    n = a.shape[-1]
    keep = _mask(b, n, n, (lambda i, j: i <= j) if upper else (lambda i, j: i >= j))
    return matmul.matmul(b, None, _masked(b, a, keep), rhs)


def cholesky_backward(b, op, l, gl):
    """torch's ``cholesky_backward`` from lower factor ``l`` and its gradient ``gl``:
    ``L^-H Phi L^-1``, ``Phi`` the Hermitian part of ``tril(L^H gL)`` (its diagonal halved), by
    the formula (the CPU backend's blocked algorithm is for a later cuSOLVER stop)."""
    nbatch, n = l.ndim - 2, l.shape[-1]
    dtype = np.result_type(l.dtype, gl.dtype)
    if l.size == 0:
        return ew.full(b, l.shape, 0, dtype)
    lh = _adjoint(b, l, nbatch)
    m = triangular_matmul(b, op, lh, gl, upper=True)
    low = _masked(b, m, _mask(b, n, n, lambda i, j: i >= j))
    strict = _masked(b, m, _mask(b, n, n, lambda i, j: i > j))
    phi = ew.map(b, "add", [low, _adjoint(b, strict, nbatch)], b.empty(l.shape, dtype))
    phi = ew.map(b, "mul", [phi, ew.full(b, (), 0.5, dtype)], phi)
    y = triangular_solve(b, op, lh, phi, upper=True, unitriangular=False)       # L^-H Phi
    x = triangular_solve(b, op, lh, _adjoint(b, y, nbatch), upper=True, unitriangular=False)
    return _adjoint(b, x, nbatch)                                                # y L^-1


def _lu_det(b, a):
    batch, n = batch_of(a), a.shape[-1]
    nb = max(1, math.prod(batch))
    det, logabs, sign = b.empty((nb,), a.dtype), b.empty((nb,), _real(a.dtype)), b.empty((nb,), a.dtype)
    if n == 0:
        for arr, v in ((det, 1), (logabs, 0), (sign, 1)):
            ew.map(b, "identity", [ew.full(b, (), v, np.dtype(arr.dtype))], arr)
    else:
        lu = _as3(b, a)
        piv = b.empty((nb, n), np.int32)
        _vendor(b).getrf(lu, piv, n)         # info > 0 (singular) is a det of 0
        kern = B.kernel(skeletons.lu_det_complex if np.dtype(a.dtype).kind == "c" else skeletons.lu_det)
        b.launch(kern, B.grid(nb), B.THREADS, lu.buf[lu.offset:], piv.buf,
                     n, nb, det.buf, logabs.buf, sign.buf)
    return [x.view(0, batch, c_strides(batch)) for x in (det, logabs, sign)]


def det(b, op, a):
    return _lu_det(b, a)[0]


def slogdet(b, op, a):
    det, logabs, sign = _lu_det(b, a)
    return _pack(b, [sign, logabs], batch_of(a))


def _eigh_parts(b, a, lower, vectors):
    batch, n = batch_of(a), a.shape[-1]
    x = _as3(b, a)       # column-major a^T: a's lower triangle is its upper one
    w = b.empty((x.shape[0], n), _real(a.dtype))
    info = _vendor(b).syevd(x, w, n, UPPER if lower else LOWER, vectors)
    _check("eigh", batch, info, lambda k: f"the algorithm failed to converge ({k} "
           f"off-diagonal elements did not converge)")
    w = w.view(0, batch + (n,), c_strides(batch + (n,)))
    if not vectors:
        return w, None
    # column-major eigenvectors read row-major are V^T.  For a complex matrix the vendor saw
    # a^T = conj(a) (a Hermitian): its eigenvectors are conj(V)
    v = _shaped(x, batch, transpose=True)
    return w, (_conj(b, v) if np.dtype(a.dtype).kind == "c" else v)


def eigh(b, op, a, *, lower, vectors):
    w, v = _eigh_parts(b, a, lower, vectors)
    return _pack(b, [w, v], batch_of(a)) if vectors else w


def _svd_parts(b, a, full, vectors):
    batch, (m, n) = batch_of(a), a.shape[-2:]
    k = min(m, n)
    tall = m > n
    # the vendor's gesvd wants rows >= cols: a tall a in column-major (a transposed copy),
    # a wide (or square) one as it is (column-major a^T: its factors swap roles)
    x = _as3(b, a, transpose=tall)
    r, c = (m, n) if tall else (n, m)
    nb = x.shape[0]
    s = b.empty((nb, k), _real(a.dtype))
    u = b.empty((nb, r if full else k, r), a.dtype) if vectors else None
    vt = b.empty((nb, c, c if full else k), a.dtype) if vectors else None
    info = _vendor(b).gesvd(x, s, u, vt, r, c, full, vectors)
    _check("svd", batch, info, lambda i: f"the algorithm failed to converge ({i} "
           f"superdiagonals did not converge)")
    s = s.view(0, batch + (k,), c_strides(batch + (k,)))
    if not vectors:
        return None, s, None
    if tall:   # column-major U (m x ku) read row-major is U^T; vt's buffer is V
        return _shaped(u, batch, transpose=True), s, _shaped(vt, batch, transpose=True)
    # a^T = U' S V'^H: a = conj(V') S U'^T, so a's U is conj(V') (vt's buffer, V'^H column-major,
    # read row-major) and a's Vh is U'^T (u's): the same views for real and complex
    return _shaped(vt, batch), s, _shaped(u, batch)


def svd(b, op, a, *, full_matrices, vectors):
    if a.size == 0:
        host = get_backend("cpu").execute(op, b.to_host(a), full_matrices=full_matrices,
                                       vectors=vectors)
        return b.from_host(host)
    u, s, vh = _svd_parts(b, a, full_matrices, vectors)
    return _pack(b, [u, s, vh], batch_of(a)) if vectors else s


def qr(b, op, a, *, mode):
    batch, (m, n) = batch_of(a), a.shape[-2:]
    k = min(m, n)
    if a.size == 0:
        host = get_backend("cpu").execute(op, b.to_host(a), mode=mode)
        return b.from_host(host)
    cols = m if (mode == "complete" and m > n) else n   # room for a square Q
    x = _as3(b, a, transpose=True)                    # column-major a: (batch, n, m)
    if cols != n:
        wide = b.empty((x.shape[0], cols, m), a.dtype)
        ew.map(b, "identity", [x], wide[:, :n, :])
        x = wide
    tau = b.empty((x.shape[0], k), a.dtype)
    _vendor(b).geqrf(x, tau, m, n)
    rk = m if mode == "complete" else k
    rows = _shaped(x, batch, transpose=True)[(Ellipsis, slice(0, rk), slice(0, n))]
    r = _masked(b, rows, _mask(b, rk, n, lambda i, j: i <= j))
    if mode == "r":
        return r
    qc = m if mode == "complete" else k
    _vendor(b).orgqr(x, tau, m, qc, k)
    q = _shaped(x, batch, transpose=True)[(Ellipsis, slice(0, m), slice(0, qc))]
    return _pack(b, [q, r], batch)


def pinv(b, op, a, *, atol, rtol, hermitian):
    batch, (m, n) = batch_of(a), a.shape[-2:]
    if a.size == 0:
        return ew.full(b, batch + (n, m), 0, np.dtype(a.dtype))
    real = _real(a.dtype)                  # of the singular values and the cut
    if hermitian:
        w, v = _eigh_parts(b, a, True, True)
        s = ew.map(b, "absolute", [w], b.empty(w.shape, real))
        sign = ew.map(b, "sign", [w], b.empty(w.shape, real))
        left = ew.map(b, "mul", [v, _expand_row(sign, v.shape)], b.empty(v.shape, v.dtype))
        right = v
    else:
        left, s, vh = _svd_parts(b, a, False, True)
        right = _adjoint(b, vh, len(batch))
    nd = s.ndim
    smax = reduce.reduction(b, Op.MAX, s, axes=(nd - 1,), dtype=_Dt(real))
    cut = ew.map(b, "mul", [smax, ew.full(b, (), rtol, real)], b.empty(smax.shape, real))
    cut = ew.map(b, "maximum", [cut, ew.full(b, (), atol, real)], b.empty(smax.shape, real))
    cut = cut.view(cut.offset, batch + (1,), c_strides(batch) + (0,))
    keep = ew.map(b, "gt", [s, cut], b.empty(s.shape, np.bool_))
    one = ew.full(b, (), 1, real)
    zero = ew.full(b, (), 0, real)
    safe = ew.map(b, "where", [keep, s, one], b.empty(s.shape, real))
    inv = ew.map(b, "truediv", [one, safe], b.empty(s.shape, real))
    inv = ew.map(b, "where", [keep, inv, zero], b.empty(s.shape, real))
    scaled = ew.map(b, "mul", [right, _expand_row(inv, right.shape)],
                      b.empty(right.shape, a.dtype))
    return matmul.matmul(b, None, scaled, _adjoint(b, left, len(batch)))


def _adjoint(b, x, nbatch):
    """The conjugate transpose of the matrices of ``x``: a view of a real one, a new array of
    a complex one."""
    t = _permuted(x, tuple(range(nbatch)) + (nbatch + 1, nbatch))
    return _conj(b, t) if np.dtype(x.dtype).kind == "c" else t


def _conj(b, x):
    return ew.map(b, "conj", [x], b.empty(x.shape, x.dtype))


def _expand_row(v, shape):
    """(..., k) values as a (..., r, k) broadcast view: each row scaled alike."""
    return v.view(v.offset, shape, v.strides[:-1] + (0,) + v.strides[-1:])


def _permuted(x, dims):
    return x.view(x.offset, [x.shape[d] for d in dims], [x.strides[d] for d in dims])

class _Dt:
    """The slice of an Ember dtype ``reduce.reduction`` reads (``.np``)."""

    def __init__(self, np_dtype):
        self.np = np.dtype(np_dtype)
