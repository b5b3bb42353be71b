"""Launching elementwise kernels on numpy arrays: strides, merged dims, threads.

Inputs have the dtype the op computes in and shapes that broadcast to the output's
(broadcasting becomes stride 0, never a copy).  The output may itself be a strided view
(``slice_assign`` and ``cat`` write through one).  Outputs come from the caching pool
(``ember.memory.empty``); pooled memory is dirty, so only arrays written completely are
allocated there.
"""
import numpy as np
from numpy.lib.stride_tricks import as_strided

from ember.kernels.cpu import elementwise as templates
from ember.kernels.cpu.builder import kernel
from ember.kernels.rebind import variant

from ...memory import empty as alloc
from ..shared import broadcast_strides, merge_dims

# Below this many elements a kernel runs on the calling thread.  Numba's OpenMP
# workers sleep between launches (OMP_WAIT_POLICY=PASSIVE, see engine/threads.py), so
# waking them costs ~30 us: measured here, two threads beat one from about 512K
# elements for exp and 2M for add.
PARALLEL_MIN = 1 << 19

# Up to this many elements, an op with a one-element operand runs a flat kernel: for two
# inputs one that reads that operand once (FIRST_ONE, SECOND_ONE), for three (clamp, where)
# the plain one on a stride-0 view of it.  Above, the strided template, whose call costs ~0.6
# us more but whose loop vectorises where the flat one reading a stride-0 array does not
# (measured, x * 2.0 in float32 before the read-once kernels: flat 2.6 / template 3.3 us at
# 256 elements, 3.1 / 3.5 at 2048, 4.7 / 4.0 at 8192).
SCALAR_FLAT_MAX = 2048

# rows shorter than SHORT_ROW with no column operand are joined into rows of up to JOINED_ROW
# (``row_operands``; the compiled tape does the same, engine/backends/cpu/tape.py)
SHORT_ROW = 8
JOINED_ROW = 64
# _FLAT's keys for two inputs, one of them of one element (a scalar operand), read once
FIRST_ONE, SECOND_ONE = "2a", "2b"

_TEMPLATES = {1: templates.map1, 2: templates.map2, 3: templates.map3}
_FLAT = {1: templates.flat1, 2: templates.flat2, 3: templates.flat3,
         FIRST_ONE: templates.flat2_first_one, SECOND_ONE: templates.flat2_second_one}
_FLAT_KERNELS = {}  # (arity, op, out dtype) -> serial flat kernel
_UNIT = np.ones(1, np.int64)
_ZERO = np.zeros(1, np.int64)
_ZERO2 = np.zeros(2, np.int64)
_ROW = np.array((0, 1), np.int64)      # a row broadcast down the (rows, cols) view
_COLUMN = np.array((1, 0), np.int64)   # a column broadcast along it
_KERNELS = {}  # (arity, op, out dtype, mode) -> Kernel: a plain dict is the cheapest lookup
_SIZES = {}    # n -> np.array([n]) for small n, saving an allocation per call


def _size_array(n):
    a = _SIZES.get(n)
    if a is None:
        a = np.array((n,), np.int64)
        if n < 4096:
            _SIZES[n] = a
    return a


def _flat_kernel(key):
    f = _FLAT_KERNELS[key] = kernel(_FLAT[key[0]], variant(key[1], np.dtype(key[2]))).serial
    return f


def operand(x):
    """(1-D buffer, offset, element strides) describing array ``x``."""
    item = x.itemsize
    strides = [s // item for s in x.strides]
    if x.flags.c_contiguous:
        return x.ravel(), 0, strides
    low = 0
    high = 0
    for n, s in zip(x.shape, strides):
        if s < 0:
            low += (n - 1) * s
        else:
            high += (n - 1) * s
    first = x[tuple(slice(n - 1, n) if s < 0 else slice(0, 1)
                    for n, s in zip(x.shape, strides))]
    buf = as_strided(first, shape=(high - low + 1,), strides=(item,))
    return buf, -low, strides


def operand_as(x, shape):
    """``operand`` of ``x`` broadcast to ``shape`` (stride 0 along broadcast dims), without
    making the broadcast view: describing a view numpy made by ``broadcast_to`` took ~9 us,
    a third of a small bias add's time."""
    if x.shape == shape:
        return operand(x)
    buf, off, strides = operand(x)
    return buf, off, broadcast_strides(x.shape, strides, shape)


_INT_ARRAYS = {}   # small int tuples (strides, merged shapes) -> their int64 arrays


def int_array(values):
    """``values`` (a list of ints) as an int64 array, shared for the few small ones that recur
    (kernels never write their stride and shape arguments; a read-only array would be
    another Numba type, another compile)."""
    key = tuple(values)
    a = _INT_ARRAYS.get(key)
    if a is None:
        a = np.array(key, np.int64)
        if len(_INT_ARRAYS) < 4096:
            _INT_ARRAYS[key] = a
    return a


def row_operands(inputs, shape, n):
    """The commonest broadcasts described without ``merge_dims``: ``(merged, args, inner)``
    or None.  Every input either holds one value (maybe broadcast: all strides 0) or is
    C-contiguous and holds the output's ``n`` elements, or is *a row* (its shape, leading 1s
    dropped, ends the output's: a bias) or *a column* (the output's leading dims then 1s: a
    keepdims reduction), all rows and columns of one length.  ``merged`` is None when there are neither (one flat index), else the
    int64 (rows, cols) array of the 2-D view; ``args`` are the inputs' (buffer, offset,
    strides) and ``inner`` their innermost strides.  The general path took ~8 us of Python
    for a small bias add, this one ~1."""
    args = []
    inner = []
    cols = 0
    wide = []    # positions in args of the full and one-element inputs' strides, set
    one = []     # once cols is known
    rows_at = []  # positions in args of the rows (biases)
    for x in inputs:
        contiguous = x.flags.c_contiguous
        if x.size == 1 or not (contiguous or any(x.strides)):
            # one value, maybe broadcast to the output (a backward's seed: describing that
            # stride-0 view through ``operand`` took ~5 us)
            one.append(len(args) + 2)
            args += (x.reshape(1) if x.size == 1 else x[(slice(0, 1),) * x.ndim].reshape(1),
                     0, _ZERO)
            inner.append(0)
            continue
        if not contiguous:
            return None
        xs = x.shape
        if xs == shape:
            wide.append(len(args) + 2)
            args += (x if x.ndim == 1 else x.ravel(), 0, _UNIT)
            inner.append(1)
            continue
        k = 0
        while xs[k] == 1:
            k += 1
        tail = xs[k:]
        if shape[len(shape) - len(tail):] == tail:       # a row
            c, strides, s = x.size, _ROW, 1
            rows_at.append(len(args))
        else:
            j = len(xs)
            while xs[j - 1] == 1:
                j -= 1
            if len(xs) != len(shape) or shape[:j] != xs[:j]:
                return None
            c, strides, s = n // x.size, _COLUMN, 0         # a column
        if cols and c != cols:
            return None
        cols = c
        args += (x.ravel(), 0, strides)
        inner.append(s)
    if not cols:
        return None, args, inner
    rows = n // cols
    if cols < SHORT_ROW and len(rows_at) == len(inner) - len(wide) - len(one) and rows > 1:
        # short rows and no column (a bias over 2 logits): ``j`` rows joined into one, each
        # bias repeated ``j`` times, so the loop pays its per-row cost ``j`` times less
        # (a forced 2048 x 2 + (2,) float32 add: 26.5 -> 14.2 us, numpy's 10)
        j = JOINED_ROW // cols
        while rows % j:
            j -= 1
        if j > 1:
            for i in rows_at:
                row = args[i]
                joined = args[i] = np.empty(cols * j, row.dtype)   # (np.tile: ~2 us more)
                joined.reshape(j, cols)[...] = row
            cols *= j
            rows //= j
    full = int_array((cols, 1))
    for i in wide:
        args[i] = full
    for i in one:
        args[i] = _ZERO2
    return int_array((rows, cols)), args, inner


def elementwise_new(op, inputs, shape, dtype):
    """IR op ``op`` on ``inputs`` into a new C-contiguous array of ``shape`` and Ember dtype
    ``dtype`` (from ``alloc``): the backend's elementwise launcher itself (per-op overhead: no
    wrapper call).

    The commonest calls on small tensors (inputs holding the output's elements in order)
    go straight to the flat kernel.
    """
    scalar = op.scalar
    char = dtype.np.char
    out = alloc(shape, dtype.np)
    n = out.size
    if 0 < n < PARALLEL_MIN:
        # the commonest calls, two inputs and one, written out without a loop or a list (one
        # element: every input has one, and one element is contiguous)
        arity = len(inputs)
        if arity == 2:
            a, b = inputs
            if n == 1 or (a.size == n and b.size == n and a.flags.c_contiguous
                          and b.flags.c_contiguous):
                key = (2, scalar, char)
                f = _FLAT_KERNELS.get(key) or _flat_kernel(key)
                # (``ravel()``: a view of a contiguous array, 0-d ones too; ~45 ns against
                # reshape(-1)'s ~140)
                f(a if a.ndim == 1 else a.ravel(), b if b.ndim == 1 else b.ravel(),
                  out if out.ndim == 1 else out.ravel())
                return out
            # a scalar operand (a 0-d constant): a kernel that reads it once (a stride-0 view
            # of it cost ~0.3 us to make and ~0.4 us more in Numba's dispatch)
            one = None
            if n <= SCALAR_FLAT_MAX:
                if b.size == 1 and a.size == n and a.flags.c_contiguous:
                    one = SECOND_ONE
                elif a.size == 1 and b.size == n and b.flags.c_contiguous:
                    one = FIRST_ONE
            if one is not None:
                key = (one, scalar, char)
                f = _FLAT_KERNELS.get(key) or _flat_kernel(key)
                f(a if a.ndim == 1 else a.ravel(), b if b.ndim == 1 else b.ravel(),
                  out if out.ndim == 1 else out.ravel())
                return out
        elif arity == 1:
            a = inputs[0]
            if n == 1 or (a.size == n and a.flags.c_contiguous):
                key = (1, scalar, char)
                f = _FLAT_KERNELS.get(key) or _flat_kernel(key)
                f(a if a.ndim == 1 else a.ravel(), out if out.ndim == 1 else out.ravel())
                return out
        flat = _flat_operands(inputs, n)
        if flat is not None:
            key = (arity, scalar, char)
            f = _FLAT_KERNELS.get(key) or _flat_kernel(key)
            f(*flat, out if out.ndim == 1 else out.ravel())
            return out
    return elementwise(scalar, inputs, out)


def _flat_operands(inputs, n):
    """``inputs`` as 1-D arrays of ``n`` elements in the output's order, or None.

    Up to ``SCALAR_FLAT_MAX`` elements, a one-element input (a scalar operand) becomes a
    stride-0 view, so ``x.clamp(0, 1)`` takes the flat kernel too (Numba compiles it once
    more for that layout; two inputs with a scalar take the read-once kernels before this).
    """
    flat = []
    for x in inputs:
        if x.size == n and x.flags.c_contiguous:
            flat.append(x if x.ndim == 1 else x.ravel())
        elif x.size == 1 and n <= SCALAR_FLAT_MAX:
            flat.append(np.ndarray((n,), x.dtype, x, 0, (0,)))
        else:
            return None
    return flat


def elementwise(op, inputs, out):
    """out[...] = op(*inputs) elementwise.

    Inputs have the dtype the op computes in and shapes that broadcast to
    ``out.shape``.  Contiguous inputs of the output's shape and one-element
    inputs (scalars: stride 0) take the flat fast path; anything else is
    described by strides.
    """
    n = out.size
    if n == 0:
        return out
    key = (len(inputs), op, out.dtype.char)
    if n < PARALLEL_MIN and out.flags.c_contiguous:
        for x in inputs:
            if x.size != n or not x.flags.c_contiguous:
                break
        else:   # every input holds the output's elements in the same order: one flat index
            f = _FLAT_KERNELS.get(key) or _flat_kernel(key)
            f(*[x if x.ndim == 1 else x.ravel() for x in inputs],
              out if out.ndim == 1 else out.ravel())
            return out
    shape = out.shape
    if out.flags.c_contiguous:
        rows = row_operands(inputs, shape, n)
        if rows is not None:
            merged, args, inner = rows
            fn = _map_kernel(key, inner, 1, n)
            if merged is None:
                fn(*args, out if out.ndim == 1 else out.ravel(), 0, _UNIT, _size_array(n))
            else:
                fn(*args, out.ravel(), 0, int_array((merged[1], 1)), merged)
            return out
    ops = [operand_as(x, shape) for x in inputs]
    ops.append(operand(out))
    merged, strides = merge_dims(shape, [o[2] for o in ops])
    args = []
    for (buf, off, _), st in zip(ops, strides):
        args += (buf, off, int_array(st))
    fn = _map_kernel(key, [st[-1] for st in strides[:-1]], strides[-1][-1], n)
    fn(*args, int_array(merged))
    return out


def _mode(inner, out_inner):
    """The loop (``MODE``, kernels/cpu/elementwise.py) for inputs' innermost strides
    ``inner`` (a list) and the output's ``out_inner``."""
    if out_inner == 1:
        if all(s == 1 for s in inner):
            return templates.CONTIGUOUS
        if len(inner) < 3:   # map1 and map2 hoist a broadcast operand
            if inner[0] == 0 and all(s == 1 for s in inner[1:]):
                return templates.A_SCALAR
            if inner == [1, 0]:
                return templates.B_SCALAR
        elif all(s in (0, 1) for s in inner):   # map3: each broadcast operand hoisted
            return templates.HOISTED + sum(1 << i for i, s in enumerate(inner) if s == 0)
    return templates.STRIDED


def _map_kernel(key, inner, out_inner, n):
    """The strided template's kernel for ``key`` (arity, op, out dtype char) in the mode of
    these strides, serial or parallel by the size ``n``."""
    mkey = (*key, _mode(inner, out_inner))
    k = _KERNELS.get(mkey)
    if k is None:
        k = _KERNELS[mkey] = kernel(_TEMPLATES[key[0]], variant(key[1], np.dtype(key[2])),
                                    mode=mkey[3])
    return k.parallel if n >= PARALLEL_MIN else k.serial
