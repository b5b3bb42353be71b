"""Backends execute IR ops (``ember.ir.Op``) on one kind of device.

A backend is imported the first time a tensor of its device runs an op, so
``import ember`` neither imports Numba's CUDA target nor compiles anything.
The CPU has one backend; CUDA has one per GPU index (its own stream and
memory pool).
"""
_BACKENDS = {}


def get_backend(device_type, index=0):
    key = device_type if device_type == "cpu" else (device_type, index)
    b = _BACKENDS.get(key)
    if b is None:
        if device_type == "cpu":
            from .cpu import CpuBackend
            b = CpuBackend()
        elif device_type == "cuda":
            from .cuda import CudaBackend
            b = CudaBackend(index)
        else:
            raise RuntimeError(f"ember: no backend for device type {device_type!r}")
        _BACKENDS[key] = b
    return b


def op_table(b):
    """IR op -> method of backend ``b``: every backend implements the same method names."""
    from ..ir import ELEMENTWISE, REDUCTIONS, Op

    table = {op: b._elementwise for op in ELEMENTWISE}
    table.update({op: b._reduction for op in REDUCTIONS})
    table.update({
        Op.ARGMAX: b._arg_reduce, Op.ARGMIN: b._arg_reduce,
        Op.CUMSUM: b._cumulative, Op.CUMPROD: b._cumulative,
        Op.SOFTMAX: b._softmax, Op.LOG_SOFTMAX: b._softmax,
        Op.MATMUL: b._matmul, Op.SORT: b._sort_op, Op.TOPK: b._topk,
        Op.GATHER: b._gather, Op.SCATTER: b._scatter,
        Op.INDEX_SELECT: b._index_select, Op.NONZERO: b._nonzero,
        Op.SEARCHSORTED: b._searchsorted,
        Op.RESHAPE: b._reshape, Op.PERMUTE: b._permute, Op.EXPAND: b._expand,
        Op.SLICE: b._slice, Op.FLIP: b._flip, Op.CONTIGUOUS: b._contiguous,
        Op.SLICE_ASSIGN: b._slice_assign, Op.CAT: b._cat,
        Op.FULL: b._full, Op.ARANGE: b._arange, Op.FROM_HOST: b._from_host,
        Op.TO_HOST: b._to_host, Op.RANDOM: b._random,
    })
    missing = set(Op) - set(table)
    assert not missing, f"{type(b).__name__} lacks {missing}"
    return table


def cat_shape_and_fill(xs, axis, empty, copy):
    """``cat`` for any backend: allocate with ``empty(shape)``, copy each piece with ``copy(x, view)``."""
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    out = empty(tuple(shape))
    start = 0
    for x in xs:
        n = x.shape[axis]
        copy(x, out[(slice(None),) * axis + (slice(start, start + n),)])
        start += n
    return out
