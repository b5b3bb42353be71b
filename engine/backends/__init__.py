"""Backends execute IR ops (``ember.ir.Op``) on one kind of device.

A backend is imported the first time a tensor of its device runs an op, so
``import ember`` neither imports Numba's CUDA target nor compiles anything.
"""
_BACKENDS = {}


def get_backend(device_type):
    b = _BACKENDS.get(device_type)
    if b is None:
        if device_type == "cpu":
            from .cpu import CpuBackend
            b = _BACKENDS["cpu"] = CpuBackend()
        else:
            raise RuntimeError(f"ember: no backend for device type {device_type!r}")
    return b
