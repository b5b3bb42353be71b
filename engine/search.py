"""Searching and set functions: ``searchsorted`` (an IR op of its own), ``count_nonzero`` and
``unique`` (compositions of sort, comparisons, cumsum, nonzero and scatter).

>>> ember.searchsorted(ember.tensor([1.0, 2.0, 4.0]), ember.tensor([2.0, 3.0]))
tensor([1, 2], dtype=int64)
"""
import numbers

from . import dispatch
from . import dtypes as dt
from .creation import cat, full, tensor, zeros
from .ir import Op
from .storage import make
from .tensor import Tensor


def searchsorted(sorted_sequence, values, *, right=False, side=None, sorter=None):
    """Where ``values`` would go in the sorted 1-D ``sorted_sequence`` to keep it sorted: the
    first position whose entry is ``>= value`` (``right=True`` / ``side="right"``: ``> value``).

    NaN counts as the largest value (Ember's and numpy's sort order).  ``sorter`` (the
    ``argsort`` of an unsorted sequence) reads the sequence through it.  int64 result of
    ``values``' shape.
    """
    seq = sorted_sequence
    if not isinstance(seq, Tensor):
        raise TypeError(f"searchsorted: sorted_sequence must be a tensor, got {type(seq).__name__}")
    if seq.ndim != 1:
        raise ValueError(f"searchsorted: sorted_sequence must be 1-D, got shape {seq.shape}")
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError("searchsorted: right=True contradicts side='left'")
        right = side == "right"
    if sorter is not None:
        seq = seq.index_select(0, sorter)
    if isinstance(values, Tensor):
        dispatch.same_device("searchsorted", [seq, values])
        dtype = dt.promote(seq.dtype, values.dtype)
    elif isinstance(values, (numbers.Number, bool)):
        dtype = dt.promote(seq.dtype, dt.scalar_dtype(values, seq.dtype))
        values = full((), values, dtype=dtype, device=seq.device.base())
    else:
        values = tensor(values, device=seq.device.base())
        dtype = dt.promote(seq.dtype, values.dtype)
    if dtype.kind is dt.Bool:
        dtype = dt.uint8   # False < True, as numpy orders bools
    dispatch.check_kind("searchsorted", Op.SEARCHSORTED, make(type(seq), None, seq._device, dtype))
    return dispatch.apply(Op.SEARCHSORTED, seq.cast(dtype), values.cast(dtype), right=bool(right),
                          dtype=dt.int64)


def count_nonzero(input, dim=None, keepdim=False):
    """The number of non-zero entries over ``dim`` (all dims by default), int64."""
    if not isinstance(input, Tensor):
        raise TypeError(f"count_nonzero: expected a tensor, got {type(input).__name__}")
    nz = input if input.dtype is dt.bool_ else input != 0
    return nz.sum(dim, keepdim)


def unique(input, return_index=False, return_inverse=False, return_counts=False):
    """The sorted distinct values of ``input`` (flattened), optionally with the index of each
    value's first occurrence, the inverse (``input``'s shape: the position of each entry's value
    in the result) and the counts, as ``numpy.unique`` returns them.

    NaNs are all distinct (``NaN != NaN``); ``-0.0`` and ``+0.0`` are one value.  Composed of a
    stable sort, neighbour comparisons, ``cumsum`` and ``scatter``: differentiable in the values.

    >>> ember.unique(ember.tensor([3, 1, 3, 2]), return_counts=True)
    (tensor([1, 2, 3], dtype=int64), tensor([1, 1, 2], dtype=int64))
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"unique: expected a tensor, got {type(input).__name__}")
    dev = input.device.base()
    flat = input.reshape(-1)
    n = flat.numel()
    key = flat.cast(dt.uint8) if flat.dtype is dt.bool_ else flat
    ordered, perm = key.sort_with_indices(0)
    if n:
        starts = cat([full((1,), True, device=dev), ordered[1:] != ordered[:-1]])
        pos = starts.argwhere().reshape(-1)
    else:
        starts = zeros((0,), dtype=dt.bool_, device=dev)
        pos = zeros((0,), dtype=dt.int64, device=dev)
    sorted_input = flat.index_select(0, perm) if flat.dtype is dt.bool_ else ordered
    out = [sorted_input.index_select(0, pos)]
    if return_index:
        out.append(perm.index_select(0, pos))
    if return_inverse:
        group = starts.cumsum(0) - 1     # the group of each sorted entry
        inverse = zeros((n,), dtype=dt.int64, device=dev).scatter(0, perm, group)
        out.append(inverse.reshape(input.shape))
    if return_counts:
        ends = cat([pos[1:], full((1,), n, dtype=dt.int64, device=dev)]) if n else pos
        out.append(ends - pos)
    return out[0] if len(out) == 1 else tuple(out)
