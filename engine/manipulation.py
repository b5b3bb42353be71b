"""Layout functions composed of existing ops, with PyTorch's names and arguments.

``roll``, ``movedim``/``moveaxis``, ``tile``, ``repeat_interleave``, ``diff``, ``meshgrid``,
``take_along_dim``, ``broadcast_tensors``, ``broadcast_shapes`` and ``unbind`` are slices,
``cat``, permutes, reshapes, expands and gathers: their gradients come from those ops' rules,
on every device.

>>> ember.roll(ember.arange(5), 2)
tensor([3, 4, 0, 1, 2], dtype=int64)
"""
import numbers

from . import dispatch
from . import dtypes as dt
from .creation import arange, cat
from .ir import Op
from .tensor import Tensor


def _check(name, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected a tensor, got {type(x).__name__}")


def _dims(name, dims, ndim):
    dims = (dims,) if isinstance(dims, numbers.Integral) else tuple(dims)
    return tuple(dispatch.normalize_dim(name, int(d), ndim) for d in dims)


def roll(input, shifts, dims=None):
    """``input`` shifted by ``shifts`` along ``dims``, entries wrapping around; without
    ``dims`` the flattened tensor is rolled and given back its shape."""
    _check("roll", input)
    if dims is None:
        if not isinstance(shifts, numbers.Integral):
            if len(shifts) != 1:
                raise ValueError("roll: without dims, shifts must be one int")
            shifts = shifts[0]
        return roll(input.reshape(-1), shifts, 0).reshape(input.shape)
    shifts = (shifts,) if isinstance(shifts, numbers.Integral) else tuple(shifts)
    dims = _dims("roll", dims, input.ndim)
    if len(shifts) != len(dims):
        raise ValueError(f"roll: {len(shifts)} shifts for {len(dims)} dims")
    out = input
    for s, d in zip(shifts, dims):
        n = out.shape[d] if out.ndim else 1
        s = int(s) % n if n else 0
        if s and out.ndim:
            out = cat([out.narrow(d, n - s, s), out.narrow(d, 0, n - s)], d)
    return out


def movedim(input, source, destination):
    """``input`` with dims ``source`` moved to positions ``destination`` (others keep their order)."""
    _check("movedim", input)
    src = _dims("movedim", source, input.ndim)
    dst = _dims("movedim", destination, input.ndim)
    if len(src) != len(dst):
        raise ValueError(f"movedim: {len(src)} source dims for {len(dst)} destinations")
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError("movedim: repeated dim")
    rest = iter(d for d in range(input.ndim) if d not in src)
    where = dict(zip(dst, src))
    perm = [where[i] if i in where else next(rest) for i in range(input.ndim)]
    return input.permute(perm)


moveaxis = movedim


def tile(input, dims):
    """``input`` repeated ``dims[i]`` times along each dim; fewer ``dims`` than the tensor has
    dims are padded with ones in front (PyTorch ``tile``, numpy ``tile``)."""
    _check("tile", input)
    dims = (dims,) if isinstance(dims, numbers.Integral) else tuple(dims)
    dims = (1,) * (input.ndim - len(dims)) + tuple(int(d) for d in dims)
    return input.repeat(*dims) if dims else input.reshape(())


def repeat_interleave(input, repeats, dim=None):
    """Each entry repeated ``repeats`` times along ``dim`` (the flattened tensor without one);
    ``repeats`` is an int or a 1-D Int tensor of one count per entry.

    >>> ember.repeat_interleave(ember.tensor([1, 2, 3]), ember.tensor([2, 0, 1]))
    tensor([1, 1, 3], dtype=int64)
    """
    _check("repeat_interleave", input)
    if dim is None:
        input, dim = input.reshape(-1), 0
    axis = dispatch.normalize_dim("repeat_interleave", dim, input.ndim)
    if input.ndim == 0:
        input = input.reshape(1)
    n = input.shape[axis]
    dev = input.device.base()
    if isinstance(repeats, numbers.Integral):
        if repeats < 0:
            raise ValueError(f"repeat_interleave: repeats must be non-negative, got {repeats}")
        index = arange(n, device=dev).unsqueeze(1).expand(n, int(repeats)).reshape(-1)
    else:
        if isinstance(repeats, Tensor) and repeats.ndim == 0:
            return repeat_interleave(input, int(repeats), axis)
        if not isinstance(repeats, Tensor):
            from .creation import tensor
            repeats = tensor(repeats, dtype=dt.int64, device=dev)
        if repeats.kind is not dt.Int or repeats.ndim != 1:
            raise TypeError("repeat_interleave: repeats must be an int or a 1-D Int tensor")
        if repeats.shape[0] == 1:
            return repeat_interleave(input, int(repeats[0]), axis)
        if repeats.shape[0] != n:
            raise ValueError(f"repeat_interleave: {repeats.shape[0]} repeats for dim {dim} of size {n}")
        if n and int(repeats.min()) < 0:
            raise ValueError("repeat_interleave: repeats must be non-negative")
        from .search import searchsorted
        ends = repeats.cumsum(0)
        total = int(ends[-1]) if n else 0
        # output position p takes entry i when ends[i-1] <= p < ends[i]
        index = searchsorted(ends, arange(total, device=dev), right=True)
    return input.index_select(axis, index)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim`` (``out[i] = x[i+1] - x[i]``, Bool tensors:
    ``!=``), after joining ``prepend`` and ``append`` (tensors or scalars) to ``input``."""
    _check("diff", input)
    if input.ndim == 0:
        raise ValueError("diff: expected at least one dim, got a 0-d tensor")
    if not isinstance(n, numbers.Integral) or n < 0:
        raise ValueError(f"diff: n must be a non-negative int, got {n!r}")
    axis = dispatch.normalize_dim("diff", dim, input.ndim)
    parts = [_edge(prepend, input, axis)] if prepend is not None else []
    parts.append(input)
    if append is not None:
        parts.append(_edge(append, input, axis))
    x = cat(parts, axis) if len(parts) > 1 else input
    for _ in range(int(n)):
        m = x.shape[axis]
        k = max(m - 1, 0)
        hi, lo = x.narrow(axis, min(1, m), k), x.narrow(axis, 0, k)
        x = (hi != lo) if x.dtype is dt.bool_ else hi - lo
    return x


def _edge(value, like, axis):
    if not isinstance(value, Tensor):
        from .creation import full
        shape = like.shape[:axis] + (1,) + like.shape[axis + 1:]
        return full(shape, value, dtype=like.dtype, device=like.device.base())
    if value.ndim == 0:
        return value.reshape((1,) * like.ndim).expand(like.shape[:axis] + (1,) + like.shape[axis + 1:])
    return value


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids of 1-D tensors: ``indexing="ij"`` (PyTorch's default) gives shape
    ``(n1, n2, ...)``, ``"xy"`` swaps the first two (numpy's default)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    for t in tensors:
        _check("meshgrid", t)
        if t.ndim != 1:
            raise ValueError(f"meshgrid: expected 1-D tensors, got shape {t.shape}")
    if not tensors:
        return []
    shape = [t.shape[0] for t in tensors]
    swap = indexing == "xy" and len(tensors) > 1
    if swap:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, t in enumerate(tensors):
        pos = (1 - i if i < 2 else i) if swap else i
        view = [1] * len(shape)
        view[pos] = t.shape[0]
        out.append(t.reshape(view).expand(shape))
    return out


def take_along_dim(input, indices, dim=None):
    """``input`` gathered at ``indices`` along ``dim``, the two broadcast against each other
    in the other dims (PyTorch ``take_along_dim``, numpy ``take_along_axis``); without ``dim``
    the flattened tensor is indexed."""
    _check("take_along_dim", input)
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    axis = dispatch.normalize_dim("take_along_dim", dim, input.ndim)
    if indices.ndim != input.ndim:
        raise ValueError(f"take_along_dim: indices of shape {indices.shape} and input of shape "
                         f"{input.shape} must have the same number of dims")
    a = list(input.shape)
    b = list(indices.shape)
    a[axis] = b[axis] = 1
    common = list(dispatch.broadcast_shapes("take_along_dim", tuple(a), tuple(b)))
    x_shape = common[:axis] + [input.shape[axis]] + common[axis + 1:]
    i_shape = common[:axis] + [indices.shape[axis]] + common[axis + 1:]
    x = input.expand(x_shape) if list(input.shape) != x_shape else input
    idx = indices.expand(i_shape) if list(indices.shape) != i_shape else indices
    if idx.numel():
        n = x.shape[axis]
        lo = int(idx.min())
        if lo < 0:   # negative indices count from the end (numpy)
            if lo < -n:
                raise IndexError(f"take_along_dim: index {lo} is out of range for dim {axis} "
                                 f"of size {n}")
            idx = dispatch.elementwise(Op.WHERE, idx < 0, idx + n, idx)
    return x.gather(axis, idx)


def broadcast_shapes(*shapes):
    """The shape ``shapes`` broadcast to (numpy's rules)."""
    return dispatch.broadcast_shapes("broadcast_shapes", *(tuple(s) for s in shapes))


def broadcast_tensors(*tensors):
    """The tensors expanded to their common shape (views)."""
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return [t.expand(shape) if t.shape != shape else t for t in tensors]


def unbind(input, dim=0):
    """The slices of ``input`` along ``dim``, as a tuple of views."""
    _check("unbind", input)
    axis = dispatch.normalize_dim("unbind", dim, input.ndim)
    if input.ndim == 0:
        raise ValueError("unbind: expected at least one dim, got a 0-d tensor")
    lead = (slice(None),) * axis
    return tuple(input[lead + (i,)] for i in range(input.shape[axis]))
