"""``ember.linalg``: torch.linalg's functions, names and signatures over Ember tensors.

Leading dims batch (and broadcast where torch broadcasts).  The factorisations and solves are
IR ops run by the backends (LAPACK on the CPU, cuSOLVER/cuBLAS on CUDA: docs/decisions.md);
everything else is composed from them and Ember's other ops, so every function runs on every
device and is differentiable (gradient rules: autograd/rules.py).  Results come as named
tuples where torch returns them.

>>> a = ember.tensor([[4.0, 2.0], [2.0, 3.0]], dtype=ember.float64)
>>> ember.linalg.cholesky(a)
tensor([[2.        , 0.        ],
       [1.        , 1.41421356]], dtype=float64)
>>> ember.linalg.solve(a, ember.tensor([2.0, 1.0], dtype=ember.float64))
tensor([0.5, 0. ], dtype=float64)
"""
import math
import numbers
from typing import NamedTuple

import numpy as np

from . import dispatch
from . import dtypes as dt
from .backends.shared import LinAlgError, offsets, packed_shapes
from .ir import Op
from .tensor import Tensor

__all__ = ["LinAlgError", "cholesky", "solve", "solve_triangular", "inv", "det", "slogdet",
           "eigh", "eigvalsh", "svd", "svdvals", "qr", "lstsq", "pinv", "matrix_norm",
           "vector_norm", "norm", "matrix_power", "matrix_rank", "cross", "vecdot", "diagonal"]

# The dtypes the factorisations and norms take.  A complex matrix's conjugate transpose plays
# the real one's transpose (Hermitian for symmetric, unitary for orthogonal), as in torch
SUPPORTED = (dt.float32, dt.float64, dt.complex64, dt.complex128)


class SlogdetResult(NamedTuple):
    sign: Tensor
    logabsdet: Tensor


class EighResult(NamedTuple):
    eigenvalues: Tensor
    eigenvectors: Tensor


class SVDResult(NamedTuple):
    U: Tensor
    S: Tensor
    Vh: Tensor


class QRResult(NamedTuple):
    Q: Tensor
    R: Tensor


class LstsqResult(NamedTuple):
    solution: Tensor
    residuals: Tensor
    rank: Tensor
    singular_values: Tensor


# --- checks ------------------------------------------------------------------------------------
def _check_float(name, t):
    if not isinstance(t, Tensor):
        raise TypeError(f"linalg.{name}: expected a tensor, got {type(t).__name__}")
    if t._dtype not in SUPPORTED or t._dtype.quantized:
        raise TypeError(f"linalg.{name}: expected a float32, float64, complex64 or complex128 "
                        f"tensor, got {t._dtype.kind.name} ({t._dtype.name})")


def _check_matrix(name, a, square=False):
    _check_float(name, a)
    if a.ndim < 2:
        raise ValueError(f"linalg.{name}: expected a matrix or a batch of matrices (at least 2 "
                         f"dims), got shape {a.shape}")
    if square and a.shape[-1] != a.shape[-2]:
        raise ValueError(f"linalg.{name}: expected square matrices, got shape {a.shape}")


def _promote(name, a, b):
    """Both operands in their common float dtype (numpy's promotion; torch requires equal dtypes)."""
    _check_float(name, b)
    dispatch.same_device(f"linalg.{name}", [a, b])
    d = dt.promote(a._dtype, b._dtype)
    return a.cast(d), b.cast(d)


def _mT(x):
    return x.transpose(-2, -1)


def _real_dtype(d):
    """The dtype of a complex dtype's parts (a real one itself): of eigen- and singular values,
    log|det|, norms."""
    return dt.float64 if d is dt.complex128 else dt.float32 if d is dt.complex64 else d


def _broadcast_batch(name, a, b):
    """``a`` (..., n, n) and ``b`` (..., n, k) expanded to one batch shape."""
    batch = dispatch.broadcast_shapes(f"linalg.{name}", a.shape[:-2], b.shape[:-2])
    return a.expand(*(batch + a.shape[-2:])), b.expand(*(batch + b.shape[-2:]))


def _is_vector_rhs(a, b):
    # torch.linalg.solve's rule: b is a (batch of) vector(s) when 1-D, or when its shape is
    # a's without the last dim
    return b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])


# the outputs that are real for a complex input: eigh's w, svd's S, slogdet's logabsdet
_REAL_PARTS = {Op.EIGH: (0,), Op.SVD: (1,), Op.SLOGDET: (1,)}


def _unpack(op, packed, shape, params):
    """The user-facing outputs of packed op result ``packed`` (views: slices + reshapes; of a
    complex one, the real part of the outputs that are real)."""
    batch = tuple(shape[:-2])
    shapes = packed_shapes(op, shape, params)
    spans, _ = offsets(shapes)
    parts = [packed[..., lo:hi].reshape(batch + s) for (lo, hi), s in zip(spans, shapes)]
    if packed._dtype.kind is dt.Complex:
        for i in _REAL_PARTS.get(op, ()):
            parts[i] = parts[i].real
    return parts


def _default_rtol(a, atol, rtol):
    """torch's rule: rtol = eps * max(m, n) when neither is given, 0 when only atol is."""
    if rtol is None:
        rtol = 0.0 if (atol is not None and atol > 0) else np.finfo(a._dtype.np).eps * max(a.shape[-2:])
    return float(0.0 if atol is None else atol), float(rtol)


# --- factorisations and solves -------------------------------------------------------------------
def cholesky(A, *, upper=False):
    """The Cholesky factor L (A = L L^T) of symmetric positive-definite ``A``, read from its
    lower triangle (``upper=True``: U with A = U^T U, from the upper triangle).  Raises
    ``LinAlgError`` when a matrix is not positive-definite, as torch does."""
    _check_matrix("cholesky", A, square=True)
    return dispatch.apply(Op.CHOLESKY, A, upper=bool(upper))


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with ``A @ X = B`` (``left=False``: ``X @ A = B``) for triangular ``A``: only its upper
    (``upper=True``) or lower triangle is read, its diagonal taken as ones if ``unitriangular``."""
    _check_matrix("solve_triangular", A, square=True)
    A, B = _promote("solve_triangular", A, B)
    if B.ndim < 2:
        raise ValueError(f"linalg.solve_triangular: B must be a matrix or a batch of matrices, "
                         f"got shape {B.shape}")
    if not left:
        return _mT(solve_triangular(_mT(A), _mT(B), upper=not upper, unitriangular=unitriangular))
    if B.shape[-2] != A.shape[-1]:
        raise ValueError(f"linalg.solve_triangular: A of shape {A.shape} and B of shape {B.shape} "
                         f"do not match ({A.shape[-1]} != {B.shape[-2]})")
    A, B = _broadcast_batch("solve_triangular", A, B)
    return dispatch.apply(Op.TRIANGULAR_SOLVE, A, B, upper=bool(upper),
                          unitriangular=bool(unitriangular))


def solve(A, B, *, left=True):
    """X with ``A @ X = B`` (``left=False``: ``X @ A = B``) for square ``A`` (LU with partial
    pivoting).  ``B`` is a vector, or a batch of them, when it is 1-D or has ``A``'s shape
    without its last dim (torch's rule); batch dims broadcast.  Raises ``LinAlgError`` for a
    singular matrix."""
    _check_matrix("solve", A, square=True)
    A, B = _promote("solve", A, B)
    vector = _is_vector_rhs(A, B)
    if not vector and B.ndim < 2:
        raise ValueError(f"linalg.solve: B of shape {B.shape} is neither a vector nor a matrix")
    if not left:
        if vector:
            return solve(_mT(A), B)
        return _mT(solve(_mT(A), _mT(B)))
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.shape[-2] != A.shape[-1]:
        raise ValueError(f"linalg.solve: A of shape {A.shape} and B of shape {B.shape} do not "
                         f"match ({A.shape[-1]} != {Bm.shape[-2]})")
    A, Bm = _broadcast_batch("solve", A, Bm)
    X = dispatch.apply(Op.SOLVE, A, Bm)
    return X.squeeze(-1) if vector else X


def inv(A):
    """The inverse of square ``A`` (LU); raises ``LinAlgError`` when singular."""
    _check_matrix("inv", A, square=True)
    return dispatch.apply(Op.INV, A)


def det(A):
    """The determinant of square ``A`` (LU); differentiable also where ``A`` is singular."""
    _check_matrix("det", A, square=True)
    return dispatch.apply(Op.DET, A)


def slogdet(A):
    """``(sign, logabsdet)`` of square ``A``: det(A) = sign * exp(logabsdet); a singular matrix
    gives (0, -inf)."""
    _check_matrix("slogdet", A, square=True)
    packed = dispatch.apply(Op.SLOGDET, A)
    return SlogdetResult(*_unpack(Op.SLOGDET, packed, A.shape, {}))


def _uplo(name, UPLO):
    if UPLO not in ("L", "U"):
        raise ValueError(f"linalg.{name}: UPLO must be 'L' or 'U', got {UPLO!r}")
    return UPLO == "L"


def eigh(A, UPLO="L"):
    """``(eigenvalues, eigenvectors)`` of symmetric ``A`` from its lower (``UPLO="L"``) or upper
    triangle; eigenvalues ascending, ``A = V diag(w) V^T``."""
    _check_matrix("eigh", A, square=True)
    params = {"lower": _uplo("eigh", UPLO), "vectors": True}
    packed = dispatch.apply(Op.EIGH, A, **params)
    return EighResult(*_unpack(Op.EIGH, packed, A.shape, params))


def eigvalsh(A, UPLO="L"):
    """The eigenvalues of symmetric ``A``, ascending (the eigenvectors are computed only when
    a gradient will need them)."""
    _check_matrix("eigvalsh", A, square=True)
    lower = _uplo("eigvalsh", UPLO)
    if A.is_tracked():
        return eigh(A, UPLO).eigenvalues
    return dispatch.apply(Op.EIGH, A, lower=lower, vectors=False, out_dtype=_real_dtype(A._dtype))


def _check_driver(name, driver):
    if driver is not None:
        raise ValueError(f"linalg.{name}: driver={driver!r}: only driver=None is supported "
                         f"(torch takes a driver on CUDA only)")


def svd(A, full_matrices=True, *, driver=None):
    """``(U, S, Vh)`` with ``A = U diag(S) Vh``, singular values descending; ``full_matrices``
    gives square U and Vh, else ``k = min(m, n)`` columns/rows."""
    _check_matrix("svd", A)
    _check_driver("svd", driver)
    params = {"full_matrices": bool(full_matrices), "vectors": True}
    packed = dispatch.apply(Op.SVD, A, **params)
    return SVDResult(*_unpack(Op.SVD, packed, A.shape, params))


def svdvals(A, *, driver=None):
    """The singular values of ``A``, descending."""
    _check_matrix("svdvals", A)
    _check_driver("svdvals", driver)
    if A.is_tracked():
        return svd(A, full_matrices=False).S
    return dispatch.apply(Op.SVD, A, full_matrices=False, vectors=False,
                          out_dtype=_real_dtype(A._dtype))


def qr(A, mode="reduced"):
    """``(Q, R)`` with ``A = Q R``: ``mode="reduced"`` (Q m x k), ``"complete"`` (Q m x m) or
    ``"r"`` (R only; Q is an empty tensor, and there is no gradient, as in torch)."""
    _check_matrix("qr", A)
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    if mode == "r":
        from .creation import empty
        R = dispatch.apply(Op.QR, A, mode="r")
        return QRResult(empty((0,), dtype=A._dtype, device=A._device), R)
    packed = dispatch.apply(Op.QR, A, mode=mode)
    return QRResult(*_unpack(Op.QR, packed, A.shape, {"mode": mode}))


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse: singular values at most ``max(atol, rtol * smax)``
    count as zero (defaults as torch: ``rtol = eps * max(m, n)``, or 0 when only ``atol`` is
    given); ``hermitian`` uses the eigendecomposition of symmetric ``A``."""
    _check_matrix("pinv", A, square=bool(hermitian))
    atol, rtol = _default_rtol(A, atol, rtol)
    return dispatch.apply(Op.PINV, A, atol=atol, rtol=rtol, hermitian=bool(hermitian))


_LSTSQ_DRIVERS = (None, "gels", "gelsy", "gelsd", "gelss")


def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares solution of ``A @ X = B`` (minimum norm where ``A`` is rank-deficient),
    as ``(solution, residuals, rank, singular_values)`` like torch: ``residuals`` are the
    squared residuals per column when m > n, the driver is not "gelsy" (the default) and every
    matrix has full rank (else empty),
    ``rank`` is given except for ``driver="gels"``, ``singular_values`` for "gelsd"/"gelss".
    The solution is ``pinv(A, rtol=rcond) @ B`` (rcond defaults to eps * max(m, n)), which is
    also how torch differentiates lstsq."""
    _check_matrix("lstsq", A)
    A, B = _promote("lstsq", A, B)
    if driver not in _LSTSQ_DRIVERS:
        raise ValueError(f"linalg.lstsq: driver must be one of {_LSTSQ_DRIVERS}, got {driver!r}")
    vector = _is_vector_rhs(A, B)
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.ndim < 2 or Bm.shape[-2] != A.shape[-2]:
        raise ValueError(f"linalg.lstsq: A of shape {A.shape} and B of shape {B.shape} do not "
                         f"match ({A.shape[-2]} rows against {Bm.shape[-2] if Bm.ndim else 0})")
    m, n = A.shape[-2:]
    rtol = np.finfo(A._dtype.np).eps * max(m, n) if rcond is None else float(rcond)
    X = pinv(A, rtol=rtol) @ Bm
    from .creation import empty
    nothing = empty((0,), dtype=_real_dtype(A._dtype), device=A._device.base())
    drv = driver or "gelsy"            # torch's default on the CPU
    rank = nothing.cast(dt.int64)
    if drv != "gels":
        rank = matrix_rank(A.without_autodiff(), rtol=rtol)
    residuals = nothing
    # as torch: residuals when m > n, for every driver but gelsy, and only at full rank
    if m > n and drv != "gelsy" and (drv == "gels" or bool((rank == n).all())):
        r = (A @ X - Bm).abs()
        residuals = (r * r).sum(-2)
        residuals = residuals.squeeze(-1) if vector else residuals
    sv = svdvals(A.without_autodiff()) if driver in ("gelsd", "gelss") else nothing
    return LstsqResult(X.squeeze(-1) if vector else X, residuals, rank, sv)


# --- compositions --------------------------------------------------------------------------------
def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    """The number of singular values above ``max(atol, rtol * smax)`` (int64; defaults as pinv)."""
    _check_matrix("matrix_rank", A, square=bool(hermitian))
    atol, rtol = _default_rtol(A, atol, rtol)
    A = A.without_autodiff()
    s = eigvalsh(A).abs() if hermitian else svdvals(A)
    if s.shape[-1] == 0:
        return s.sum(-1).cast(dt.int64)
    tol = (s.max(-1, keepdim=True) * rtol).maximum(atol)
    return (s > tol).sum(-1)


def _safe_root(s, p):
    """``s ** (1/p)`` for s >= 0 whose gradient is 0 at s = 0 (torch's norms: a zero vector has
    gradient 0, not NaN): both ``where``s keep the zero entries out of the root's derivative.
    Untracked, the root alone (the same values: four small ops fewer, ~20 us a norm)."""
    if not s.is_tracked():
        return s.sqrt() if p == 2 else s.pow(1.0 / p)
    zero = s == 0
    root = s.mask_fill(zero, 1)
    root = root.sqrt() if p == 2 else root.pow(1.0 / p)
    return root.mask_fill(zero, 0)


def _dims(name, dim, ndim):
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, numbers.Integral) else tuple(dim)
    out = tuple(dispatch.normalize_dim(f"linalg.{name}", int(d), ndim) for d in dims)
    if len(set(out)) != len(out):
        raise ValueError(f"linalg.{name}: repeated dim in {dim!r}")
    return out


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """``(sum |x|^ord)^(1/ord)`` over ``dim`` (all dims by default); ``ord`` inf/-inf: max/min
    of |x|, 0: the count of non-zeros.  Its gradient at a zero vector is 0, as torch's."""
    _check_float("vector_norm", x)
    if dtype is not None:
        x = x.cast(dt.as_dtype(dtype))
    if not isinstance(ord, numbers.Real) or isinstance(ord, bool):
        raise TypeError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    dims = _dims("vector_norm", dim, x.ndim)
    scalar = x.ndim == 0
    if scalar:
        x, dims = x.reshape(1), (0,)
    a = x.abs() if ord != 2 or x._dtype.kind is dt.Complex else None   # (|x|: ord 2 squares x)
    if ord == math.inf or ord == -math.inf:
        if any(x.shape[d] == 0 for d in dims) and ord == -math.inf:
            raise ValueError(f"linalg.vector_norm: ord=-inf of an empty dim (shape {x.shape})")
        if any(x.shape[d] == 0 for d in dims):
            out = a.sum(dims, keepdim)
        else:
            out = a.max(dims, keepdim) if ord > 0 else a.min(dims, keepdim)
    elif ord == 0:
        out = (x != 0).cast(a._dtype).sum(dims, keepdim)
    elif ord == 1:
        out = a.sum(dims, keepdim)
    elif ord == 2:
        out = _safe_root(((a * a) if x._dtype.kind is dt.Complex else (x * x)).sum(dims, keepdim), 2)
    else:
        out = _safe_root(a.pow(float(ord)).sum(dims, keepdim), float(ord))
    return out.reshape(()) if scalar else out   # (keepdim of a 0-d input keeps no dim)


_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The matrix norm over the two dims ``dim``: ``"fro"``, ``"nuc"`` (sum of singular values),
    2/-2 (largest/smallest singular value), 1/-1 (max/min column sum of |A|), inf/-inf (rows)."""
    _check_float("matrix_norm", A)
    if dtype is not None:
        A = A.cast(dt.as_dtype(dtype))
    if ord not in _MATRIX_ORDS:
        raise ValueError(f"linalg.matrix_norm: ord must be one of {_MATRIX_ORDS}, got {ord!r}")
    if A.ndim < 2:
        raise ValueError(f"linalg.matrix_norm: expected at least 2 dims, got shape {A.shape}")
    d0, d1 = _dims("matrix_norm", dim, A.ndim)
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        rest = [d for d in range(A.ndim) if d not in (d0, d1)]
        moved = A.permute(*rest, d0, d1)
        s = svdvals(moved)
        out = s.sum(-1) if ord == "nuc" else (s.max(-1) if ord == 2 else s.min(-1))
    else:
        a = A.abs()
        # 1: max over columns of the column sums; inf: max over rows of the row sums
        inner, outer = (d0, d1) if abs(ord) == 1 else (d1, d0)
        sums = a.sum(inner, keepdim=True)
        out = sums.max(outer, keepdim=True) if ord > 0 else sums.min(outer, keepdim=True)
        out = out.squeeze((d0, d1))
    if keepdim:
        shape = list(A.shape)
        shape[d0] = shape[d1] = 1
        out = out.reshape(tuple(shape))
    return out


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: a vector norm when ``dim`` is an int (or ``A`` is 1-D), a matrix norm
    when ``dim`` is a pair (or ``A`` is 2-D and ``ord`` is given); ``ord=None``: the 2-norm of
    the flattened tensor / Frobenius."""
    _check_float("norm", A)
    if dim is not None:
        dims = (dim,) if isinstance(dim, numbers.Integral) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
        raise ValueError(f"linalg.norm: dim must be an int or a pair, got {dim!r}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise ValueError(f"linalg.norm: with ord={ord!r} and dim=None the input must be 1-D or 2-D, "
                     f"got shape {A.shape}")


def matrix_power(A, n):
    """``A`` multiplied by itself ``n`` times (``n`` = 0: the identity; ``n`` < 0: of inv(A))."""
    if not isinstance(A, Tensor):
        raise TypeError(f"linalg.matrix_power: expected a tensor, got {type(A).__name__}")
    if not isinstance(n, numbers.Integral) or isinstance(n, bool):
        raise TypeError(f"linalg.matrix_power: n must be an int, got {n!r}")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"linalg.matrix_power: expected square matrices, got shape {A.shape}")
    if A._dtype.kind is dt.Bool:
        raise TypeError("linalg.matrix_power: expected a Float or Int tensor, got Bool")
    if n == 0:
        from .creation import eye
        return eye(A.shape[-1], dtype=A._dtype, device=A._device).expand(*A.shape)
    if n < 0:
        A, n = inv(A), -n
    result, base = None, A
    while n:                      # binary powers: ~2 log2(n) products
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


def cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along ``dim`` (shapes broadcast)."""
    for t in (input, other):
        if not isinstance(t, Tensor):
            raise TypeError(f"linalg.cross: expected tensors, got {type(t).__name__}")
    shape = dispatch.broadcast_shapes("linalg.cross", input.shape, other.shape)
    a, b = input.expand(*shape), other.expand(*shape)
    d = dispatch.normalize_dim("linalg.cross", dim, len(shape))
    if shape[d] != 3:
        raise ValueError(f"linalg.cross: dim {dim} must have size 3, got shape {shape}")
    ai = [a.narrow(d, i, 1) for i in range(3)]
    bi = [b.narrow(d, i, 1) for i in range(3)]
    from .creation import cat
    return cat([ai[1] * bi[2] - ai[2] * bi[1], ai[2] * bi[0] - ai[0] * bi[2],
                ai[0] * bi[1] - ai[1] * bi[0]], d)


def vecdot(x, y, *, dim=-1):
    """The dot product of vectors along ``dim`` (shapes broadcast): ``(conj(x) * y).sum(dim)``
    (torch's and the array API's: ``x`` conjugated)."""
    for t in (x, y):
        if not isinstance(t, Tensor):
            raise TypeError(f"linalg.vecdot: expected tensors, got {type(t).__name__}")
    shape = dispatch.broadcast_shapes("linalg.vecdot", x.shape, y.shape)
    d = dispatch.normalize_dim("linalg.vecdot", dim, len(shape))
    return (x.conj() * y).sum(d)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonal ``offset`` (above the main one when positive) of the matrices in dims
    ``dim1``, ``dim2``, as a new last dim."""
    if not isinstance(A, Tensor):
        raise TypeError(f"linalg.diagonal: expected a tensor, got {type(A).__name__}")
    if A.ndim < 2:
        raise ValueError(f"linalg.diagonal: expected at least 2 dims, got shape {A.shape}")
    d1 = dispatch.normalize_dim("linalg.diagonal", dim1, A.ndim)
    d2 = dispatch.normalize_dim("linalg.diagonal", dim2, A.ndim)
    if d1 == d2:
        raise ValueError(f"linalg.diagonal: dim1 and dim2 are the same dim ({dim1}, {dim2})")
    rest = [d for d in range(A.ndim) if d not in (d1, d2)]
    x = A.permute(*rest, d1, d2)
    n, m = x.shape[-2:]
    count = max(0, min(n, m - offset)) if offset >= 0 else max(0, min(n + offset, m))
    lead = x.shape[:-2]
    if count == 0:
        return x.reshape(lead + (n * m,))[..., 0:0]
    start = offset if offset >= 0 else -offset * m
    flat = x.contiguous().reshape(lead + (n * m,))
    return flat[..., start:start + (count - 1) * (m + 1) + 1:m + 1]
