"""Backends execute IR ops (``ember.ir.Op``) on one kind of device: the only layer that
allocates outputs, picks kernels and launches them.

Each backend is a package laid out the same way (``cpu/``, ``cuda/``): ``__init__`` holds
the backend class and its op table, and one module per area (``elementwise``, ``reduce``,
``scan``, ``sort``, ``index``, ``softmax``, ``quant``, ``fused``) plans and launches that
area's kernels from ``ember.kernels``.  ``shared.py`` holds what both use.  Calls arrive
validated by the dispatch layer.

A backend is imported the first time a tensor of its device runs an op, so ``import ember``
neither imports Numba's CUDA target nor compiles anything.  The CPU has one backend; CUDA
has one per GPU index (its own stream and memory pool).
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


def loaded_backends():
    """The backends made so far (``ember.empty_cache`` and ``synchronize`` visit them)."""
    return list(_BACKENDS.values())


def check_table(name, table):
    """``table`` (IR op -> launcher) covers every IR op: both backends implement all of them."""
    from ..ir import Op
    missing = set(Op) - set(table)
    assert not missing, f"{name} lacks {sorted(op.name for op in missing)}"
    return table
