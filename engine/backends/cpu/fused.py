"""Launching fused chains on numpy arrays: elementwise programs and fused reductions.

``ember.fusion`` plans a chain of pending elementwise ops and hands it here as IR ops
``FUSED`` (the chain's outputs over its shape) and ``FUSED_REDUCE`` (a sum, prod, max or min
of the chain's root, computed inside the reduction, ``kernels/cpu/fused_reduce.py``).  The
chain arrives as fusion's key (``shared.chain_key`` turns it into the kernel key); outputs
are allocated here.  ``run`` picks the loop: ``flat`` when every array input is contiguous
with the output's shape (one-value inputs are scalars), else ``strided`` over merged dims
(broadcasting as stride 0, views, negative strides).
"""
import math

import numpy as np

from ember.kernels.cpu import fused, fused_reduce

from ...memory import empty as alloc
from ..shared import chain_key, identity, merge_dims
from .elementwise import PARALLEL_MIN, int_array, operand, operand_as, row_operands
from .reduce import fold_params


def prepare(chain):
    """The compiled loops of ``chain`` (fusion's key), loaded or compiled once per key."""
    return fused.kernel(chain_key(chain))


def fused_op(op, *leaves, chain, kernel, kinds, shape, dtypes):
    """IR op ``FUSED``: the outputs of ``chain`` (fusion's key; ``kernel`` its prepared loops)
    as fresh arrays of ``shape`` and ``dtypes``."""
    outs = [alloc(shape, d.np) for d in dtypes]
    run(kernel, leaves, kinds, outs, shape)
    return outs


def fused_reduce_op(op, *leaves, chain, combiner, kinds, shape, axes, dtypes, root_dtype,
                    root_written, out_dtype, where):
    """IR op ``FUSED_REDUCE``: ``combiner`` over the trailing dims of the chain's root, as
    ``reduce_plan`` found (``where``), the root never written unless ``root_written``.
    Returns ``(result, outputs of the held nodes, the root or None)``."""
    outs = [alloc(shape, d.np) for d in dtypes]
    root_out = alloc(shape, root_dtype.np) if root_written else None
    result = run_reduce(chain_key(chain), combiner, leaves, kinds, outs, root_out, shape,
                        root_dtype.np, out_dtype.np, *where)
    out_shape = tuple(n for d, n in enumerate(shape) if d not in axes)
    return result.reshape(out_shape), outs, root_out


def bind(*, chain, kernel, kinds, shape, dtypes):
    """``fused_op`` with its loops and sizes found once (a compiled step's replay): the flat
    loop when every array leaf is contiguous with the output's shape, else ``run``."""
    n = math.prod(shape)
    flat = kernel.get("flat", n >= PARALLEL_MIN)
    np_dtypes = [d.np for d in dtypes]
    one_dim = len(shape) == 1

    def launch(*leaves):
        outs = [alloc(shape, d) for d in np_dtypes]
        args = flat_args(leaves, kinds, shape)
        if args is None:
            run(kernel, leaves, kinds, outs, shape)
        else:
            flat(n, *args, *(outs if one_dim else [o.ravel() for o in outs]))
        return outs

    return launch


def flat_args(leaves, kinds, shape):
    """The flat loop's arguments for ``leaves`` (one-value leaves as scalars, the others as 1-D
    views), or None when an array leaf is not contiguous with the output's shape."""
    args = []
    for x, kind in zip(leaves, kinds):
        if kind == "s":
            args.append(x.item(0))
        elif x.shape == shape and x.flags.c_contiguous:
            args.append(x if x.ndim == 1 else x.ravel())
        else:
            return None
    return args


def run(k, leaves, kinds, outs, shape):
    """Write the chain's outputs over ``shape`` into ``outs`` (fresh C-contiguous arrays).

    ``leaves`` are the inputs in key order: numpy arrays broadcastable to ``shape``;
    those of kind ``"s"`` (one value, maybe broadcast) are passed as scalars.
    """
    n = outs[0].size
    parallel = n >= PARALLEL_MIN
    flat_outs = outs if len(shape) == 1 else [o.ravel() for o in outs]
    args = flat_args(leaves, kinds, shape)
    if args is not None:
        k.get("flat", parallel)(n, *args, *flat_outs)
        return
    merged, per_leaf = strided_leaves(leaves, kinds, shape, operand(outs[0])[2])
    args = []
    for v, kind in zip(per_leaf, kinds):
        if kind == "s":
            args.append(v)
        else:
            args += v
    k.get("strided", parallel)(merged, *args, *flat_outs)


def strided_leaves(leaves, kinds, shape, out_strides):
    """The leaves of a chain over ``shape`` as the strided loops read them: the merged dims
    (an int64 array) and, per leaf, its (1-D buffer, element offset, int64 strides) for an
    array input (kind ``"a"``: views, negative strides, broadcasting as stride 0) or its value
    for a one-value input (``"s"``).  ``out_strides``, the output's element strides, take
    part in merging dims (the outputs are C-contiguous).  A bias or a keepdims column over
    contiguous arrays takes ``row_operands``' (rows, cols) view, without merging dims."""
    arrays = [x for x, kind in zip(leaves, kinds) if kind == "a"]
    rows = row_operands(arrays, shape, math.prod(shape))
    if rows is not None and rows[0] is not None:
        merged, args, _ = rows
        ops = iter([args[i:i + 3] for i in range(0, len(args), 3)])
        return merged, [x.item(0) if kind == "s" else tuple(next(ops))
                        for x, kind in zip(leaves, kinds)]
    ops = [operand_as(x, shape) for x in arrays]
    merged, strides = merge_dims(shape, [o[2] for o in ops] + [out_strides])
    it = iter(zip(ops, strides))
    per_leaf = []
    for x, kind in zip(leaves, kinds):
        if kind == "s":
            per_leaf.append(x.item(0))
        else:
            (buf, off, _), st = next(it)
            per_leaf.append((buf, off, int_array(st)))
    return int_array(merged), per_leaf


def reduce_plan(op, shape, dtype, axes, out_dtype):
    """(outer, n) when reducing a C-contiguous array of ``shape`` and ``dtype`` over ``axes``
    with ``op`` runs ``reduce.fold`` once with ``inner == 1`` (what this module fuses), else
    None: other axes, empty or trivial reductions and dtype conversions keep the plain path."""
    if op not in fused_reduce.OPS or not axes:
        return None
    dtype = np.dtype(dtype)
    out_dtype = np.dtype(out_dtype)
    if out_dtype.kind == "b":
        return None
    if not (dtype == out_dtype or (op in ("add", "mul") and np.can_cast(dtype, out_dtype, "safe"))):
        return None
    lo, hi = min(axes), max(axes) + 1
    if hi != len(shape) or hi - lo != len(set(axes)):
        return None
    n = math.prod(shape[lo:])
    outer = math.prod(shape[:lo])
    if n < 2 or outer == 0:
        return None
    return outer, n


def run_reduce(key, op, leaves, kinds, outs, root_out, shape, root_dtype, out_dtype, outer, n):
    """Reduce the chain ``key`` over ``shape`` with ``op`` as ``plan`` found: returns the
    ``(outer,)`` result of ``out_dtype``; writes the held nodes into ``outs`` (fresh
    C-contiguous arrays of ``shape``) and the root into ``root_out`` unless it is None."""
    init = identity(op, np.dtype(out_dtype))
    # reduce's own choice of tasks, chunks and lanes for the root it would have read
    parallel, ob, nsplit, winit, flush, rows, pack = fold_params(
        op, np.dtype(root_dtype), init, outer, n, 1)
    # reduce._run_fold starts a parallel full reduction's chunks on a cache line of the array
    # it reads: the unfused root, a fresh array big enough to be cache-line aligned
    # (engine/memory.py ALIGN), so its chunks start at element 0, as here
    skip = 0
    written = outs if root_out is None else [*outs, root_out]
    flat_outs = tuple(o.ravel() for o in written)
    c_strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]   # the root's, C order
    merged, per_leaf = strided_leaves(leaves, kinds, shape, c_strides)
    arrays = [v for v, kind in zip(per_leaf, kinds) if kind == "a"]
    ins, offs, strs = zip(*arrays) if arrays else ((), (), ())
    ks = tuple(v for v, kind in zip(per_leaf, kinds) if kind == "s")
    out = np.empty(outer, init.dtype)
    part = np.empty(outer * nsplit if nsplit > 1 else 0, winit.dtype)
    k = fused_reduce.kernel(key, op, root_out is not None).get(parallel)
    k(skip, part, out, init, winit, outer, n - skip, ob, nsplit, rows, pack, flush,
      merged, ins, offs, strs, ks, flat_outs)
    return out
