"""Indexing kernels: gather, scatter, index_select, nonzero, index checks.

Every function takes numpy arrays (any strides, 0-d or empty) and returns new
C-contiguous arrays.  Indices are validated in Python before a kernel runs,
so a bad index is an ``IndexError`` naming the op, never a crash or a Numba
error.  Index arrays of any integer dtype are cast to int64.

Pure data movement (gather, index_select, scatter with ``"assign"``) runs on
an unsigned view of the same item size, so one compiled kernel per item size
serves every dtype; complex128 (16 bytes) moves its real and imaginary parts as
two float64 arrays.

The walks follow ``launch.elementwise``: operands arrive as a 1-D buffer plus
an offset and element strides (``launch.operand``); dims other than the
indexed axis are merged where every operand allows (``_merge``).
"""
import operator

import numpy as np
from numba import prange

from . import launch
from .builder import kernel
from .launch import PARALLEL_MIN, operand
from .sort import normalize_axis

CHUNK = 1 << 14


# --------------------------------------------------------------------------
# templates


def minmax(a):
    """(min, max) of a non-empty 1-D int64 array."""
    n = a.shape[0]
    ntasks = (n + CHUNK - 1) // CHUNK
    lows = np.empty(ntasks, np.int64)
    highs = np.empty(ntasks, np.int64)
    for t in prange(ntasks):
        seg = a[t * CHUNK:min(n, (t + 1) * CHUNK)]  # a loop from 0 vectorises
        lo = seg[0]
        hi = seg[0]
        for i in range(seg.shape[0]):
            v = seg[i]
            lo = min(lo, v)
            hi = max(hi, v)
        lows[t] = lo
        highs[t] = hi
    return lows.min(), highs.max()


def gather_walk(x, xo, xst, ind, io, ist, out, shape, axis):
    """out[p] = x[coords of p, with ``ind`` at ``axis``] over the C order of ``shape``.

    ``out`` is C-contiguous of ``shape``; ``x`` and ``ind`` are strided (``ind``
    is broadcast, stride 0, for index_select).  Tasks are chunks of rows of the
    last dim.
    """
    nd = shape.shape[0]
    inner = shape[nd - 1]
    per_row = (inner + CHUNK - 1) // CHUNK
    ntasks = per_row
    for d in range(nd - 1):
        ntasks *= shape[d]
    sax = xst[axis]
    sl = xst[nd - 1] if axis != nd - 1 else 0
    il = ist[nd - 1]
    for t in prange(ntasks):
        r = t // per_row
        start = (t - r * per_row) * CHUNK
        m = min(inner - start, CHUNK)
        po = r * inner + start
        px = xo + start * sl
        pi = io + start * il
        for d in range(nd - 2, -1, -1):
            i = r % shape[d]
            r //= shape[d]
            if d != axis:
                px += i * xst[d]
            pi += i * ist[d]
        # Slices, not offsets, in the inner loops: LLVM vectorises those.
        z = out[po:po + m]
        if il == 0:  # one index for the whole row: a (strided) copy
            base = px + ind[pi] * sax
            if sl == 1:
                xs = x[base:base + m]
                for j in range(m):
                    z[j] = xs[j]
            else:
                for j in range(m):
                    z[j] = x[base + j * sl]
        elif il == 1:
            ids = ind[pi:pi + m]
            for j in range(m):
                z[j] = x[px + j * sl + ids[j] * sax]
        else:
            for j in range(m):
                z[j] = x[px + j * sl + ind[pi + j * il] * sax]


def scatter_walk(out, ost, ind, ist, val, vo, vst, shape, axis, add):
    """out[coords of p, with ``ind`` at ``axis``] = (or +=) val[p] over ``shape``.

    ``shape`` is the (merged) index shape; ``out`` is C-contiguous with
    strides ``ost``.  Two index elements can only hit the same output element
    when they differ only along ``axis``, so tasks are the blocks of one
    coordinate before ``axis``: each task owns its outputs, and inside it the
    elements go in C order, as a serial loop would (last write wins,
    float sums in the same order).
    """
    nd = shape.shape[0]
    outer = 1
    for d in range(axis):
        outer *= shape[d]
    rows = 1
    for d in range(axis, nd - 1):
        rows *= shape[d]
    inner = shape[nd - 1]
    sax = ost[axis]
    sl = ost[nd - 1] if axis != nd - 1 else 0
    il = ist[nd - 1]
    vl = vst[nd - 1]
    for t in prange(outer):
        po0 = 0
        pi0 = 0
        pv0 = vo
        div = outer
        for d in range(axis):
            div //= shape[d]
            i = (t // div) % shape[d]
            po0 += i * ost[d]
            pi0 += i * ist[d]
            pv0 += i * vst[d]
        for q in range(rows):
            rem = q
            po = po0
            pi = pi0
            pv = pv0
            for d in range(nd - 2, axis - 1, -1):
                i = rem % shape[d]
                rem //= shape[d]
                if d != axis:
                    po += i * ost[d]
                pi += i * ist[d]
                pv += i * vst[d]
            if il == 1 and vl == 1:  # contiguous index and values: slices
                ids = ind[pi:pi + inner]
                vs = val[pv:pv + inner]
                if add:
                    for j in range(inner):
                        out[po + j * sl + ids[j] * sax] += vs[j]
                else:
                    for j in range(inner):
                        out[po + j * sl + ids[j] * sax] = vs[j]
            elif add:
                for j in range(inner):
                    out[po + j * sl + ind[pi + j * il] * sax] += val[pv + j * vl]
            else:
                for j in range(inner):
                    out[po + j * sl + ind[pi + j * il] * sax] = val[pv + j * vl]


def nonzero_walk(x, xo, xst, shape, mask):
    """Coordinates (count, ndim) of the elements with ``x & mask != 0``, C order.

    Two passes over chunks of rows of the last dim: count per chunk, then
    each chunk writes its coordinates from its prefix-sum offset.
    """
    nd = shape.shape[0]
    inner = shape[nd - 1]
    per_row = (inner + CHUNK - 1) // CHUNK
    ntasks = per_row
    for d in range(nd - 1):
        ntasks *= shape[d]
    sl = xst[nd - 1]
    zero = np.uint64(0)
    counts = np.empty(ntasks + 1, np.int64)
    for t in prange(ntasks):
        r = t // per_row
        start = (t - r * per_row) * CHUNK
        m = min(inner - start, CHUNK)
        px = xo + start * sl
        for d in range(nd - 2, -1, -1):
            i = r % shape[d]
            r //= shape[d]
            px += i * xst[d]
        c = 0
        if sl == 1:
            xs = x[px:px + m]
            for j in range(m):
                if (np.uint64(xs[j]) & mask) != zero:
                    c += 1
        else:
            for j in range(m):
                if (np.uint64(x[px + j * sl]) & mask) != zero:
                    c += 1
        counts[t + 1] = c
    counts[0] = 0
    for t in range(ntasks):
        counts[t + 1] += counts[t]
    out = np.empty((counts[ntasks], nd), np.int64)
    for t in prange(ntasks):
        first = counts[t]
        end = counts[t + 1]
        if first == end:
            continue
        r = t // per_row
        start = (t - r * per_row) * CHUNK
        px = xo + start * sl
        for d in range(nd - 2, -1, -1):  # the same outer coordinates for the task
            i = r % shape[d]
            r //= shape[d]
            px += i * xst[d]
            for k in range(first, end):
                out[k, d] = i
        # Branch-free: write every position at row k, step k only past a
        # nonzero; a zero's write is overwritten by the next nonzero, and the
        # loop stops at the task's last nonzero (so never writes past ``end``).
        k = first
        j = 0
        while k < end:
            out[k, nd - 1] = start + j
            k += (np.uint64(x[px + j * sl]) & mask) != zero
            j += 1
    return out
    return out


# --------------------------------------------------------------------------
# helpers


def _pick(k, work, tasks=2):
    """The parallel variant for big work that splits into several tasks."""
    return k.parallel if work >= PARALLEL_MIN and tasks > 1 else k.serial


def _bits(x, name):
    """``x`` viewed as unsigned integers of the same item size (no copy)."""
    if x.dtype.itemsize not in (1, 2, 4, 8) or x.dtype.kind not in "biufc":
        raise TypeError(f"{name}: unsupported dtype {x.dtype}")
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def _int_index(name, index):
    """``index`` as an int64 array; TypeError for non-integer dtypes."""
    if not isinstance(index, np.ndarray) and np.size(index) == 0:
        return np.zeros(np.shape(index), np.int64)  # [] is float64 to numpy
    index = np.asarray(index)
    if index.dtype.kind not in "iu":
        raise TypeError(f"{name}: index must have an integer dtype, got {index.dtype}")
    if index.dtype == np.uint64 and index.size and index.max() > np.iinfo(np.int64).max:
        raise IndexError(f"{name}: index {index.max()} is out of range")
    return index.astype(np.int64, copy=False)


def _merge(shape, axis, strides_list):
    """Drop size-1 dims other than ``axis`` and merge neighbours on the same
    side of ``axis`` that are contiguous in every operand.

    Returns (shape, axis, strides per operand) as int64 arrays.
    """
    out_shape = []
    out_strides = [[] for _ in strides_list]
    new_axis = 0
    prev_axis = False
    for d, n in enumerate(shape):
        if d == axis:
            new_axis = len(out_shape)
            out_shape.append(n)
            for o, st in zip(out_strides, strides_list):
                o.append(st[d])
            prev_axis = True
            continue
        if n == 1:
            continue
        if out_shape and not prev_axis and all(o[-1] == st[d] * n
                                              for o, st in zip(out_strides, strides_list)):
            out_shape[-1] *= n
            for o, st in zip(out_strides, strides_list):
                o[-1] = st[d]
        else:
            out_shape.append(n)
            for o, st in zip(out_strides, strides_list):
                o.append(st[d])
        prev_axis = False
    return (np.array(out_shape, np.int64), new_axis,
            [np.array(o, np.int64) for o in out_strides])


def _by_parts(fn, x, *args):
    """``fn`` (gather, index_select) of a complex128 ``x``: real and imaginary parts apart
    (no unsigned view is 16 bytes wide), joined into one complex array."""
    re, im = fn(x.real, *args), fn(x.imag, *args)
    return launch.elementwise("make_complex", [re, im], launch.alloc(re.shape, x.dtype))


def _wide(x):
    return x.dtype.itemsize == 16 and x.dtype.kind == "c"


def _c_strides(shape):
    strides = []
    s = 1
    for n in reversed(shape):
        strides.append(s)
        s *= n
    return strides[::-1]


def _check_shapes(name, x, axis, index):
    if index.ndim != x.ndim:
        raise ValueError(f"{name}: index must have as many dims as x: "
                         f"index shape {index.shape}, x shape {x.shape}")
    for d, (ni, nx) in enumerate(zip(index.shape, x.shape)):
        if d != axis and ni > nx:
            raise ValueError(f"{name}: index shape {index.shape} exceeds x shape {x.shape} "
                             f"in dim {d} (only dim {axis}, the indexed one, may be larger)")


# --------------------------------------------------------------------------
# public


def check_index(name, index, size, dim=None):
    """Raise IndexError naming ``name`` if any value of ``index`` is < 0 or >= ``size``."""
    index = _int_index(name, index)
    if index.size == 0:
        return
    flat = np.ascontiguousarray(index).reshape(-1)
    lo, hi = _pick(kernel(minmax), flat.size, (flat.size + CHUNK - 1) // CHUNK)(flat)
    if lo >= 0 and hi < size:
        return
    bad = lo if lo < 0 else hi
    where = f"dim {dim}" if dim is not None else "a dim"
    raise IndexError(f"{name}: index {bad} is out of range for {where} of size {size}")


def gather(x, axis, index):
    """``out[..., i, ...] = x[..., index[..., i, ...], ...]`` along ``axis`` (torch.gather).

    ``index`` has as many dims as ``x`` and ``index.shape[d] <= x.shape[d]``
    for every ``d != axis``; the output has ``index``'s shape and ``x``'s dtype.
    Indices must lie in ``[0, x.shape[axis])`` (no negative indices).
    """
    x = np.asarray(x)
    if _wide(x):
        return _by_parts(gather, x, axis, index)
    _bits(x, "gather")  # the dtype check
    axis = normalize_axis("gather", axis, x.ndim)
    index = _int_index("gather", index)
    _check_shapes("gather", x, axis, index)
    out = launch.alloc(index.shape, x.dtype)
    if index.size == 0:
        return out
    if x.ndim == 0:
        check_index("gather", index, 1, 0)
        out[()] = x
        return out
    check_index("gather", index, x.shape[axis], axis)
    index = np.ascontiguousarray(index)
    xb, xo, xst = operand(_bits(x, "gather"))
    shape, ax, (xst, ist) = _merge(index.shape, axis, [xst, _c_strides(index.shape)])
    k = kernel(gather_walk)
    _pick(k, index.size, index.size // shape[-1] + 1)(
        xb, xo, xst, index.reshape(-1), 0, ist, _bits(out, "gather").reshape(-1), shape, ax)
    return out


def index_select(x, axis, indices):
    """``x`` with only the entries ``indices`` (1-D) along ``axis`` (torch.index_select).

    The output has ``x``'s shape with ``len(indices)`` along ``axis``.  Indices
    must lie in ``[0, x.shape[axis])``.  A 0-d ``x`` takes exactly one index
    (0) and stays 0-d, as in PyTorch.
    """
    x = np.asarray(x)
    if _wide(x):
        return _by_parts(index_select, x, axis, indices)
    _bits(x, "index_select")  # the dtype check
    axis = normalize_axis("index_select", axis, x.ndim)
    indices = _int_index("index_select", indices)
    if indices.ndim > 1:
        raise ValueError(f"index_select: indices must be 1-D, got shape {indices.shape}")
    indices = np.ascontiguousarray(indices.reshape(-1))
    if x.ndim == 0:
        if indices.size != 1:
            raise ValueError(f"index_select: a 0-d x takes exactly one index, "
                             f"got {indices.size}")
        check_index("index_select", indices, 1, 0)
        return x.copy()
    check_index("index_select", indices, x.shape[axis], axis)
    shape = x.shape[:axis] + (indices.size,) + x.shape[axis + 1:]
    out = launch.alloc(shape, x.dtype)
    if out.size == 0:
        return out
    xb, xo, xst = operand(_bits(x, "index_select"))
    ist = [0] * x.ndim
    ist[axis] = 1
    mshape, ax, (xst, ist) = _merge(shape, axis, [xst, ist])
    k = kernel(gather_walk)
    _pick(k, out.size, out.size // mshape[-1] + 1)(
        xb, xo, xst, indices, 0, ist, _bits(out, "index_select").reshape(-1), mshape, ax)
    return out


def scatter(x, axis, index, values, reduce="assign"):
    """A copy of ``x`` with ``values`` written at ``index`` along ``axis`` (torch.scatter).

    ``out[..., index[..., i, ...], ...] = values[..., i, ...]`` (``reduce="assign"``)
    or ``+=`` (``reduce="add"``, torch.scatter_add: duplicates accumulate).
    ``index`` follows :func:`gather`'s rules; ``values`` has ``index``'s
    shape or is a scalar.  Values are cast to ``x``'s dtype when that keeps
    their kind (no float into int, no int into bool).  With ``"assign"``,
    duplicate indices keep the value that comes last in C order of ``index``
    (deterministic, unlike PyTorch where the winner is unspecified).
    """
    x = np.asarray(x)
    if reduce not in ("assign", "add"):
        raise ValueError(f"scatter: reduce must be 'assign' or 'add', got {reduce!r}")
    if _wide(x):
        v = _scatter_values(x, _int_index("scatter", index), values)
        re = scatter(x.real, axis, index, v.real, reduce)
        im = scatter(x.imag, axis, index, v.imag, reduce)
        return launch.elementwise("make_complex", [re, im], launch.alloc(x.shape, x.dtype))
    _bits(x, "scatter")  # the dtype check
    axis = normalize_axis("scatter", axis, x.ndim)
    index = _int_index("scatter", index)
    _check_shapes("scatter", x, axis, index)
    values = _scatter_values(x, index, values)
    out = launch.alloc(x.shape, x.dtype)
    np.copyto(out, x)
    if index.size == 0:
        return out
    if x.ndim == 0:
        check_index("scatter", index, 1, 0)
        if reduce == "add":
            out += values
        else:
            out[()] = values
        return out
    check_index("scatter", index, x.shape[axis], axis)
    index = np.ascontiguousarray(index)
    if values.ndim == 0:  # one value for every index: stride 0 (a writable copy)
        vb, vo, vst = values.reshape(1).copy(), 0, [0] * index.ndim
    else:
        vb, vo, vst = operand(values)
    shape, ax, (ost, ist, vst) = _merge(
        index.shape, axis, [_c_strides(x.shape), _c_strides(index.shape), vst])
    buf = out.reshape(-1)
    if reduce == "assign":
        buf = _bits(buf, "scatter")
        vb = _bits(vb, "scatter")
    outer = int(np.prod(shape[:ax]))
    k = kernel(scatter_walk)
    _pick(k, index.size, outer)(buf, ost, index.reshape(-1), ist, vb, vo, vst, shape, ax,
                                reduce == "add")
    return out


def _scatter_values(x, index, values):
    """``values`` as an array of ``x``'s dtype: 0-d, or of ``index``'s shape."""
    if isinstance(values, (np.ndarray, np.generic)):
        ok = np.can_cast(values.dtype, x.dtype, "same_kind")
        src = values.dtype
    else:  # a Python scalar or a list: numpy's promotion rules (NEP 50)
        try:
            ok = np.result_type(x.dtype, values) == x.dtype
            src = type(values).__name__
        except TypeError:
            values = np.asarray(values)
            ok = np.can_cast(values.dtype, x.dtype, "same_kind")
            src = values.dtype
    if not ok:
        raise TypeError(f"scatter: cannot write {src} values into an array of {x.dtype}")
    try:
        values = np.asarray(values, dtype=x.dtype)
    except OverflowError as e:
        raise ValueError(f"scatter: {e}") from None
    if values.ndim and values.shape != index.shape:
        raise ValueError(f"scatter: values shape {values.shape} must equal index shape "
                         f"{index.shape} (or values be a scalar)")
    return values


def nonzero(x):
    """Indices of the nonzero (True) elements of ``x``: int64 ``(count, x.ndim)``, C order.

    Like ``np.argwhere``: NaN counts as nonzero, ``-0.0`` as zero.  A 0-d
    ``x`` gives shape ``(1, 0)`` or ``(0, 0)``.
    """
    x = np.asarray(x)
    if x.ndim == 0:
        return np.zeros((1 if x.item() else 0, 0), np.int64)
    if x.size == 0:
        return np.zeros((0, x.ndim), np.int64)
    bits = _bits(x, "nonzero")
    size = 8 * x.dtype.itemsize
    # Floats ignore the sign bit (so -0.0 is zero); other dtypes test every bit.
    mask = (1 << (size - 1)) - 1 if x.dtype.kind == "f" else (1 << size) - 1
    xb, xo, xst = operand(bits)
    shape = np.array(x.shape, np.int64)
    k = kernel(nonzero_walk)
    ntasks = x.size // x.shape[-1] * ((x.shape[-1] + CHUNK - 1) // CHUNK)
    return _pick(k, x.size, ntasks)(xb, xo, np.array(xst, np.int64), shape, np.uint64(mask))
