"""The array API standard's ``linalg`` extension (2024.12) over ``ember.linalg``.

``xp.linalg.<name>`` takes the standard's signatures (positional-only arrays, ``axis=``,
``keepdims=``, ``rtol=`` alone) and calls ``ember.linalg``'s torch-like functions, so the
factorisations are the same IR ops (LAPACK on the CPU, cuSOLVER on CUDA), batched and
differentiable.  Where the two specifications differ, the standard's meaning is kept:

- ``solve(x1, x2)``: ``x2`` is a vector only when it is 1-D; otherwise a stack of matrices
  whose batch dims broadcast with ``x1``'s (torch also reads ``x2`` of shape ``x1.shape[:-1]``
  as a batch of vectors);
- ``matrix_rank`` and ``pinv`` take ``rtol`` only (a float or an array broadcasting against
  the stack), relative to the largest singular value; ``None`` is ``max(M, N) * eps``;
- ``trace`` and ``diagonal`` work on the last two axes, with ``offset``; ``trace``'s dtype rule
  is ``sum``'s;
- ``vecdot`` conjugates ``x1``; ``cross`` needs size 3 along ``axis`` in both operands.

The factorisations take real and complex floating arrays (complex ones Hermitian where real ones
are symmetric, with real eigenvalues, singular values and norms).
"""
import builtins
import numbers
from typing import NamedTuple

import numpy as np

from .. import dispatch
from .. import dtypes as dt
from .. import linalg as _la
from ..contract import outer as _outer
from ..tensor import Tensor
from ._dtypes import _check_array
from ._manipulation import matmul, matrix_transpose, tensordot, vecdot
from ._statistics import sum as _sum

__all__ = ["cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul",
           "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr",
           "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot", "vector_norm"]


class EighResult(NamedTuple):
    eigenvalues: Tensor
    eigenvectors: Tensor


class QRResult(NamedTuple):
    Q: Tensor
    R: Tensor


class SlogdetResult(NamedTuple):
    sign: Tensor
    logabsdet: Tensor


class SVDResult(NamedTuple):
    U: Tensor
    S: Tensor
    Vh: Tensor


def cholesky(x, /, *, upper=False):
    _check_array("linalg.cholesky", x)
    return _la.cholesky(x, upper=upper)


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-element vectors along ``axis`` (the other axes broadcast)."""
    _check_array("linalg.cross", x1)
    _check_array("linalg.cross", x2)
    if not isinstance(axis, numbers.Integral) or axis >= 0:
        # the standard's axis counts from the end (the operands may differ in rank)
        raise ValueError(f"linalg.cross: axis must be a negative int, got {axis!r}")
    for x in (x1, x2):
        if -axis > x.ndim or x.shape[axis] != 3:
            raise ValueError(f"linalg.cross: axis {axis} must have size 3 in both operands, got "
                             f"shapes {x1.shape} and {x2.shape}")
    d = dt.promote(x1.dtype, x2.dtype)
    return _la.cross(x1.cast(d), x2.cast(d), dim=axis)


def det(x, /):
    _check_array("linalg.det", x)
    return _la.det(x)


def diagonal(x, /, *, offset=0):
    """The ``offset``-th diagonal of the matrices in the last two axes (a new last axis)."""
    _check_array("linalg.diagonal", x)
    return _la.diagonal(x, offset=offset)


def eigh(x, /):
    _check_array("linalg.eigh", x)
    return EighResult(*_la.eigh(x))


def eigvalsh(x, /):
    _check_array("linalg.eigvalsh", x)
    return _la.eigvalsh(x)


def inv(x, /):
    _check_array("linalg.inv", x)
    return _la.inv(x)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    _check_array("linalg.matrix_norm", x)
    return _la.matrix_norm(x, ord=ord, keepdim=keepdims)


def matrix_power(x, n, /):
    _check_array("linalg.matrix_power", x)
    return _la.matrix_power(x, n)


def _svd_cutoff(name, x, rtol, s):
    """The tolerance below which singular values ``s`` (..., k) count as zero."""
    if rtol is None:
        rtol = float(np.finfo(x.dtype.np).eps) * builtins.max(x.shape[-2:], default=0)
    if isinstance(rtol, Tensor):
        if rtol.dtype.kind is not dt.Float:
            raise TypeError(f"linalg.{name}: rtol must be a real floating array, got {rtol.dtype.name}")
        rtol = rtol.cast(s.dtype).unsqueeze(-1)
    elif not isinstance(rtol, numbers.Real) or isinstance(rtol, builtins.bool):
        raise TypeError(f"linalg.{name}: rtol must be a float or an array, got {rtol!r}")
    return s.max(-1, keepdim=True) * rtol


def matrix_rank(x, /, *, rtol=None):
    """The number of singular values above ``rtol`` times the largest (int64)."""
    _check_array("linalg.matrix_rank", x)
    s = _la.svdvals(x.without_autodiff())
    if s.shape[-1] == 0:
        return s.sum(-1).cast(dt.int64)
    return (s > _svd_cutoff("matrix_rank", x, rtol, s)).sum(-1)


def pinv(x, /, *, rtol=None):
    """The pseudo-inverse: singular values at most ``rtol`` times the largest count as zero."""
    _check_array("linalg.pinv", x)
    if rtol is None or (isinstance(rtol, numbers.Real) and not isinstance(rtol, builtins.bool)):
        return _la.pinv(x, rtol=None if rtol is None else float(rtol))
    # an array of tolerances, one per matrix: Vh^H diag(1/s where s > cutoff) U^H
    U, s, Vh = _la.svd(x, full_matrices=False)
    keep = s > _svd_cutoff("pinv", x, rtol, s)
    inv_s = (1 / s.mask_fill(~keep, 1)).mask_fill(~keep, 0)
    return (Vh.mT.conj() * inv_s.unsqueeze(-2)) @ U.mT.conj()


def outer(x1, x2, /):
    _check_array("linalg.outer", x1)
    _check_array("linalg.outer", x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"linalg.outer: expected 1-D arrays, got shapes {x1.shape} and {x2.shape}")
    d = dt.promote(x1.dtype, x2.dtype)
    return _outer(x1.cast(d), x2.cast(d))


def qr(x, /, *, mode="reduced"):
    _check_array("linalg.qr", x)
    if mode not in ("reduced", "complete"):
        raise ValueError(f"linalg.qr: mode must be 'reduced' or 'complete', got {mode!r}")
    return QRResult(*_la.qr(x, mode=mode))


def slogdet(x, /):
    _check_array("linalg.slogdet", x)
    return SlogdetResult(*_la.slogdet(x))


def solve(x1, x2, /):
    """The solution ``X`` of ``x1 @ X = x2``: a vector when ``x2`` is 1-D, else a stack of
    matrices broadcast against ``x1``'s stack."""
    _check_array("linalg.solve", x1)
    _check_array("linalg.solve", x2)
    if x2.ndim >= 2 and x1.ndim >= 2:
        # expand both batches, so ember.linalg never reads x2 as a batch of vectors
        batch = dispatch.broadcast_shapes("linalg.solve", x1.shape[:-2], x2.shape[:-2])
        x1 = x1.expand(*(batch + x1.shape[-2:]))
        x2 = x2.expand(*(batch + x2.shape[-2:]))
    return _la.solve(x1, x2)


def svd(x, /, *, full_matrices=True):
    _check_array("linalg.svd", x)
    return SVDResult(*_la.svd(x, full_matrices=full_matrices))


def svdvals(x, /):
    _check_array("linalg.svdvals", x)
    return _la.svdvals(x)


def trace(x, /, *, offset=0, dtype=None):
    """The sum of the ``offset``-th diagonal of the matrices in the last two axes (dtype as
    ``sum``'s: integers widen to the default integer dtype, floats stay)."""
    _check_array("linalg.trace", x)
    return _sum(_la.diagonal(x, offset=offset), axis=-1, dtype=dtype)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    _check_array("linalg.vector_norm", x)
    return _la.vector_norm(x, ord=ord, dim=axis, keepdim=keepdims)
