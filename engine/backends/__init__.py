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
