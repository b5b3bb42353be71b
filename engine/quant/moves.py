"""Layout ops on quantized storage: which way values, words and scales move.

Movement (reshape, permute, expand, slicing, flip, contiguous, index_select, gather, cat)
moves the integer values and keeps the scale, or moves the scales along when whole blocks
move with the values (``x.T`` of blocks ``[16]`` is blocks ``[16, 1]``: the scheme follows
the blocks).  Otherwise (blocks split or mixed, ``cat`` of tensors with different per-tensor
scales) ``move`` says None and dispatch moves dequantized values and quantizes them again
with the same scheme.  Packed words move as words when the op leaves the innermost dim
whole.
"""
import numpy as np

from .. import dtypes as dt
from ..ir import Op
from .scheme import QuantScheme, extents, grid_shape
from .storage import QuantData, _ints, _pack, _reshape, _x

MOVES = frozenset((Op.RESHAPE, Op.PERMUTE, Op.EXPAND, Op.SLICE, Op.FLIP, Op.CONTIGUOUS,
                   Op.INDEX_SELECT, Op.GATHER, Op.CAT))


class _U32:
    """The words' dtype for backend ``cat`` (which reads ``dtype.np``; uint32 is no Ember dtype)."""
    np = np.dtype(np.uint32)


def move(op, inputs, params):
    """The storage of layout op ``op`` on quantized ``inputs[0]`` (validated): the integer
    values moved, the scales kept or moved along with whole blocks; None when blocks would
    split or mix (the caller then moves dequantized values and quantizes again)."""
    out_shape = _moved_shape(op, inputs, params)
    moved = _move_scales(op, inputs, params, out_shape)
    if moved is None:
        return None
    scales, new_scheme = moved
    values = _move_values(op, inputs, params, out_shape, new_scheme)
    return QuantData(values, scales, out_shape, new_scheme)


def _moved_shape(op, inputs, params):
    shape = inputs[0].shape
    if op is Op.RESHAPE or op is Op.EXPAND:
        return tuple(params["shape"])
    if op is Op.PERMUTE:
        return tuple(shape[d] for d in params["dims"])
    if op is Op.SLICE:
        return np.broadcast_to(np.empty((), np.int8), shape)[params["index"]].shape
    if op is Op.INDEX_SELECT:
        axis = params["axis"]
        return shape[:axis] + (inputs[1].shape[0],) + shape[axis + 1:] if shape else ()
    if op is Op.GATHER:
        return inputs[1].shape
    if op is Op.CAT:
        axis = params["axis"]
        return shape[:axis] + (sum(t.shape[axis] for t in inputs),) + shape[axis + 1:]
    return shape   # FLIP, CONTIGUOUS


def _derive_scheme(scheme, ext, shape):
    """The scheme whose blocks have extents ``ext`` over ``shape``, or None when there is none."""
    block = scheme.block_size
    nd = len(ext)
    big = [i for i, e in enumerate(ext) if e > 1]
    for k in (len(block),) + tuple(n for n in (1, 2) if n != len(block)):
        if nd >= k and all(i >= nd - k for i in big):
            return QuantScheme(scheme.value, ext[nd - k:], scheme.store)
    if all(-(-n // e) == 1 for n, e in zip(shape, ext)):   # one block left: a per-tensor scale
        return QuantScheme(scheme.value, None, scheme.store)
    return None


def _index_entries(index, ndim):
    """A basic index with its Ellipsis expanded: one entry per input dim, plus the Nones."""
    n_dims = sum(1 for i in index if i is not None and i is not Ellipsis)
    out = []
    for i in index:
        out += [slice(None)] * (ndim - n_dims) if i is Ellipsis else [i]
    return out


def _move_scales(op, inputs, params, out_shape):
    """(moved scales, scheme of the result), or None when whole blocks do not move together."""
    q = inputs[0]
    qd = q._data
    scheme = qd.scheme
    device = q._device
    scales = qd.scales
    if scheme.block_size is None:   # one scale: it stays, unless cat joins different ones
        if op is Op.CAT:
            first = _x(device, Op.TO_HOST, scales)
            if any(_x(device, Op.TO_HOST, t._data.scales) != first for t in inputs[1:]):
                return None
        return scales, scheme
    shape = qd.shape
    ext = extents(scheme, len(shape))
    if op is Op.RESHAPE:
        new_ext = _reshaped_extents(shape, out_shape, ext)
        if new_ext is None:
            return None
        moved = scales
    elif op is Op.PERMUTE:
        new_ext = tuple(ext[d] for d in params["dims"])
        moved = _x(device, Op.PERMUTE, scales, dims=params["dims"])
    elif op is Op.EXPAND:
        new_ext = (1,) * (len(out_shape) - len(shape)) + ext
        moved = scales
    elif op is Op.FLIP:
        if any(ext[d] > 1 and shape[d] % ext[d] for d in params["dims"]):
            return None
        new_ext = ext
        moved = _x(device, Op.FLIP, scales, dims=params["dims"])
    elif op is Op.CONTIGUOUS:
        new_ext = ext
        moved = _x(device, Op.CONTIGUOUS, scales)
    elif op is Op.INDEX_SELECT:
        if ext[params["axis"]] > 1:
            return None
        new_ext = ext
        moved = _x(device, Op.INDEX_SELECT, scales, inputs[1]._data, axis=params["axis"])
    elif op is Op.GATHER:
        if any(e > 1 for e in ext):
            return None
        new_ext = ext
        moved = _x(device, Op.GATHER, scales, inputs[1]._data, axis=params["axis"])
    elif op is Op.CAT:
        axis = params["axis"]
        e = ext[axis]
        if e > 1 and any(t.shape[axis] % e for t in inputs[:-1]):
            return None
        new_ext = ext
        moved = _x(device, Op.CAT, *(t._data.scales for t in inputs), axis=axis, dtype=dt.float32)
    else:   # SLICE
        plan = _sliced_scales_index(params["index"], shape, ext)
        if plan is None:
            return None
        index, new_ext = plan
        moved = _x(device, Op.SLICE, scales, index=index)
    new_scheme = _derive_scheme(scheme, tuple(new_ext), out_shape)
    if new_scheme is None:
        return None
    grid = grid_shape(out_shape, new_scheme)
    if op is Op.EXPAND:
        moved = _x(device, Op.EXPAND, _reshape(device, moved, (1,) * (len(grid) - moved.ndim)
                                                + tuple(moved.shape)), shape=grid)
    return _reshape(device, moved, grid), new_scheme


def _reshaped_extents(old, new, ext):
    """Block extents after reshaping ``old`` to ``new``, or None when blocks would split or mix."""
    old_big = [n for n in old if n != 1]
    if old_big == [n for n in new if n != 1]:   # only size-1 dims come or go
        it = iter((n, e) for n, e in zip(old, ext) if n != 1)
        out = []
        for n in new:
            out.append(next(it)[1] if n != 1 else 1)
        return tuple(out)
    big = [i for i, e in enumerate(ext) if e > 1]
    k = len(old) - min(big) if big else 0   # the trailing dims blocks span
    if k and len(new) >= k and tuple(old[-k:]) == tuple(new[-k:]):
        return (1,) * (len(new) - k) + tuple(ext[-k:])
    if k == 1 and new and old[-1] % ext[-1] == 0 and new[-1] % ext[-1] == 0:
        return (1,) * (len(new) - 1) + (ext[-1],)   # whole blocks in row-major order stay whole
    return None


def _sliced_scales_index(index, shape, ext):
    """(index into the scales, extents of the result) for basic ``index``, or None."""
    entries = _index_entries(index, len(shape))
    out, new_ext = [], []
    d = 0
    for i in entries:
        if i is None:
            out.append(None)
            new_ext.append(1)
            continue
        n, e = shape[d], ext[d]
        d += 1
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if e == 1:
                out.append(i)
            elif step != 1 or start % e or (stop < n and stop % e and stop > start):
                return None
            else:
                out.append(slice(start // e, max(start // e, -(-stop // e))))
            new_ext.append(e)
        else:
            out.append((int(i) % n) // e)
    return tuple(out) + (Ellipsis,), new_ext   # the Ellipsis keeps an all-int index an array


def _move_values(op, inputs, params, out_shape, new_scheme):
    device = inputs[0]._device
    qd = inputs[0]._data
    rest = [t._data for t in inputs[1:]]
    if not qd.scheme.bits:
        if op is Op.CAT:
            return _x(device, op, qd.values, *(r.values for r in rest), axis=params["axis"], dtype=dt.int8)
        return _x(device, op, qd.values, *rest, **params)
    wparams = _words_params(op, params, qd.shape, out_shape, qd.values.shape[-1])
    if wparams is not None:   # the op leaves the packed innermost dim alone: move the words
        if op is Op.CAT:
            return _x(device, op, qd.values, *(r.values for r in rest), **wparams)
        return _x(device, op, qd.values, *rest, **wparams)
    if op is Op.CAT:
        ints = _x(device, op, *(_ints(device, t._data) for t in inputs), axis=params["axis"], dtype=dt.int8)
    else:
        ints = _x(device, op, _ints(device, qd), *rest, **params)
    return _pack(device, ints, new_scheme.bits)


def _words_params(op, params, shape, out_shape, nw):
    """The params of ``op`` on the packed words (``nw`` per row) when it keeps the innermost dim
    whole, else None."""
    if not shape or not out_shape or shape[-1] != out_shape[-1]:
        return None
    last = len(shape) - 1
    if op is Op.RESHAPE or op is Op.EXPAND:
        return dict(shape=tuple(out_shape[:-1]) + (nw,))
    if op is Op.PERMUTE:
        return params if params["dims"][-1] == last else None
    if op is Op.FLIP:
        return None if last in params["dims"] else params
    if op is Op.CONTIGUOUS:
        return params
    if op is Op.INDEX_SELECT:
        return params if params["axis"] != last else None
    if op is Op.CAT:
        return dict(axis=params["axis"], dtype=_U32) if params["axis"] != last else None
    if op is Op.SLICE:
        entries = _index_entries(params["index"], len(shape))
        d = 0
        for j, i in enumerate(entries):
            if i is None:
                continue
            if d == last:
                if any(x is None for x in entries[j + 1:]) or not isinstance(i, slice) \
                        or i.indices(shape[d]) != (0, shape[d], 1):
                    return None
                return dict(index=tuple(entries[:j]) + (slice(None),))
            d += 1
    return None   # GATHER: one index per value, not per word
