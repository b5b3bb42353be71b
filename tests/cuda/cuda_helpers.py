"""Helpers of the CUDA test tier (simulator or GPU): compare CUDA results with the CPU's."""
import numpy as np
import ember
from ember.device import DeviceError


def _cuda_device():
    try:
        return ember.Device.cuda()
    except DeviceError as e:
        return str(e)


DEV = _cuda_device()


def to_cuda(a, device=None):
    return ember.from_numpy(np.asarray(a)).to(device or DEV)


def assert_same(got, want, rtol=None):
    """CUDA result ``got`` equals CPU result ``want`` (tensors) in shape, dtype and values."""
    assert got.device.type == "cuda"
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    g, w = got.numpy(), want.numpy()
    if w.dtype.kind in "fc":
        tol = rtol if rtol is not None else (2e-6 if w.dtype in (np.float32, np.complex64) else 1e-12)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, w)
