"""What the two backends' linear-algebra halves share: the error, the op table, the packing.

A factorisation with several outputs (``SLOGDET``, ``EIGH``, ``SVD``, ``QR``) returns ONE
buffer: for a batch of shape ``batch``, the outputs flattened (C order) one after the other
along a last dim, ``batch + (sum of their sizes,)``.  ``ember.linalg`` hands the user views
of it (``unpack``), so the autodiff graph sees one op with one output, and the slices'
gradients add up into the packed gradient the op's rule splits again (no multi-output nodes
in the graph walk).
"""
import math

from ..ir import Op


class LinAlgError(ValueError):
    """A factorisation or solve that cannot be done: a matrix that is not positive-definite
    (cholesky), singular (solve, inv), or an iteration that did not converge (eigh, svd).
    A ``ValueError``, as numpy's ``LinAlgError`` is; the message names the op."""


LINALG_METHODS = {
    Op.CHOLESKY: "_cholesky", Op.TRIANGULAR_SOLVE: "_triangular_solve", Op.SOLVE: "_solve", Op.INV: "_inv",
    Op.DET: "_det", Op.SLOGDET: "_slogdet", Op.EIGH: "_eigh", Op.SVD: "_svd", Op.QR: "_qr",
    Op.PINV: "_pinv",
}


def batch_of(a):
    return tuple(a.shape[:-2])


def where(batch, index):
    """`` in matrix (i, j) of the batch`` for error messages (nothing for a single matrix)."""
    return f" (matrix {tuple(int(i) for i in index)} of the batch)" if batch else ""


def packed_shapes(op, shape, params):
    """The shapes (without the batch) of the outputs ``op`` packs, for an input of ``shape``."""
    m, n = shape[-2], shape[-1]
    k = min(m, n)
    if op is Op.SLOGDET:
        return [(), ()]
    if op is Op.EIGH:
        return [(n,), (n, n)]
    if op is Op.SVD:
        full = params["full_matrices"]
        return [(m, m if full else k), (k,), (n if full else k, n)]
    if op is Op.QR:
        complete = params["mode"] == "complete"
        return [(m, m if complete else k), (m if complete else k, n)]
    raise ValueError(f"{op!r} packs no outputs")


def offsets(shapes):
    out, off = [], 0
    for s in shapes:
        size = math.prod(s)
        out.append((off, off + size))
        off += size
    return out, off
