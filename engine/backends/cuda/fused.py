"""Fused chains on CUDA arrays: the generated chain as one grid-stride kernel
(``kernels/cuda/fused.py``), its operands broadcast to the chain's shape, dims merged.
Reductions do not compute their input chain here (``fused_reduce_plan`` says no)."""
from ember.kernels.cuda import builder as B
from ember.kernels.cuda import fused

from ..shared import c_strides, chain_key, merge_dims
from . import reduce
from .elementwise import dense


def prepare(chain):
    """The ``cuda.jit`` kernel of ``chain`` (fusion's key), built once per key."""
    return fused.kernel(chain_key(chain))


def fused_op(b, op, *leaves, chain, kernel, kinds, shape, dtypes):
    """IR op ``FUSED``: the chain's outputs (fresh arrays of ``shape`` and ``dtypes``)."""
    outs = [b.empty(shape, d.np) for d in dtypes]
    n = outs[0].size
    views = [x.broadcast(shape) for x in leaves]
    arrays = [v for v, k in zip(views, kinds) if k == "a"]
    merged, strides = merge_dims(shape, [list(v.strides) for v in arrays] + [list(outs[0].strides)])
    args = []
    st = iter(strides)
    for v, k in zip(views, kinds):
        if k == "a":
            args += (v.buf, v.offset, tuple(next(st)))
        else:
            args += (v.buf, v.offset)
    b.launch(kernel, B.grid(n), B.THREADS, n, tuple(merged), *args, *(o.buf for o in outs))
    return outs


def fused_reduce_op(b, op, *leaves, chain, combiner, kinds, shape, axes, dtypes, root_dtype,
                    root_written, out_dtype, where):
    """IR op ``FUSED_REDUCE`` as the CPU defines it, computed in two steps here: the chain
    (its root included) as ``FUSED``, then the reduction of the root over its trailing
    ``(outer, n)`` view.  (Fusion never plans it on CUDA: ``fused_reduce_plan`` is None.)"""
    kinds_, entries, outputs = chain
    root = len(entries) - 1
    full_chain = (kinds_, entries, tuple(outputs) if root in outputs else (*outputs, root))
    outs = fused_op(b, op, *leaves, kernel=prepare(full_chain), kinds=kinds, shape=shape,
                    dtypes=(*dtypes, root_dtype))
    outer, n = where
    flat = outs[-1].view(0, (outer, n), (n, 1))
    result = reduce.fold(b, combiner, dense(b, flat, out_dtype.np), outer, n, out_dtype.np)
    out_shape = tuple(m for d, m in enumerate(shape) if d not in axes)
    return (result.view(0, out_shape, c_strides(out_shape)), outs[:-1],
            outs[-1] if root_written else None)
