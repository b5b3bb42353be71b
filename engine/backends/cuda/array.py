"""CUDA storage: ``CudaArray``, a strided view of a pooled device buffer.

A ``CudaArray`` is a typed 1-D device buffer (a numba device array, a ``FakeCUDAArray``
under the simulator) plus an element offset, a shape and element strides.  Views (reshape
of contiguous data, permute, expand, slicing with any step, flip) change only that
metadata, as numpy views do; kernels receive ``(buffer, offset, strides)`` and index through
the strides.  A ``Block`` is one allocation of the device's caching pool; it goes back to
the pool when no view needs it.
"""
import math

import numpy as np
from numba import config

from ..shared import c_strides

SIMULATOR = bool(config.ENABLE_CUDASIM)


class Block:
    """One pooled device allocation; goes back to its pool when no view needs it."""

    __slots__ = ("mem", "nbytes", "pool")

    def __init__(self, mem, nbytes, pool):
        self.mem = mem
        self.nbytes = nbytes
        self.pool = pool

    def __del__(self):
        try:
            self.pool.release(self.mem, self.nbytes)
        except Exception:  # interpreter shutdown
            pass


class CudaArray:
    """A strided view of a device buffer: what a CUDA tensor holds in ``_data``."""

    __slots__ = ("block", "buf", "offset", "shape", "strides", "dtype", "device", "stream")

    def __init__(self, block, buf, offset, shape, strides, dtype, device, stream=None):
        self.block = block      # keeps the allocation alive (None for foreign memory)
        self.buf = buf          # typed 1-D device array
        self.offset = offset    # in elements
        self.shape = shape
        self.strides = strides  # in elements
        self.dtype = dtype
        self.device = device    # GPU index
        self.stream = stream    # the stream its device's kernels run on (the interface's)

    def view(self, offset, shape, strides):
        return CudaArray(self.block, self.buf, offset, tuple(shape), tuple(strides), self.dtype,
                         self.device, self.stream)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def c_contiguous(self):
        if self.size == 0:
            return True
        return all(s == c for n, s, c in zip(self.shape, self.strides, c_strides(self.shape)) if n != 1)

    def broadcast(self, shape):
        """This array as a view broadcast to ``shape`` (stride 0 along new and stretched dims)."""
        off = len(shape) - self.ndim
        strides = [0] * off + [s if n == m else 0
                               for n, m, s in zip(self.shape, shape[off:], self.strides)]
        return self.view(self.offset, shape, strides)

    def __getitem__(self, index):
        """Basic indexing (ints, slices with any step, None, ...) as a view."""
        if not isinstance(index, tuple):
            index = (index,)
        n_dims = sum(1 for i in index if i is not None and i is not Ellipsis)
        if Ellipsis not in index:
            index = index + (Ellipsis,)
        offset, shape, strides, d = self.offset, [], [], 0
        for i in index:
            if i is Ellipsis:
                for _ in range(self.ndim - n_dims):
                    shape.append(self.shape[d])
                    strides.append(self.strides[d])
                    d += 1
            elif i is None:
                shape.append(1)
                strides.append(0)
            elif isinstance(i, slice):
                start, stop, step = i.indices(self.shape[d])
                n = len(range(start, stop, step))
                if n:
                    offset += start * self.strides[d]
                shape.append(n)
                strides.append(self.strides[d] * step)
                d += 1
            else:
                i = int(i)
                offset += (i % self.shape[d]) * self.strides[d]
                d += 1
        return self.view(offset, shape, strides)

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return f"CudaArray(cuda:{self.device}, shape={self.shape}, dtype={self.dtype})"

    @property
    def __cuda_array_interface__(self):
        item = self.dtype.itemsize
        if SIMULATOR:
            ptr = self.buf._ary.ctypes.data if self.size else 0
        else:
            ptr = self.buf.device_ctypes_pointer.value if self.size else 0
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (ptr + self.offset * item if ptr else 0, False),
            "strides": None if self.c_contiguous else tuple(s * item for s in self.strides),
            "version": 3,
            "stream": None if SIMULATOR or self.stream is None else _stream_handle(self.stream),
        }


def _stream_handle(stream):
    h = stream.handle
    h = getattr(h, "value", h)   # ctypes handle (older numba) or a CUstream object
    return int(h) or None        # CAI v3: 0 is not allowed; None means "no synchronization"


def is_cuda_array(obj):
    """Whether ``share`` takes ``obj``: a numba device array, or (on a GPU) any object with
    ``__cuda_array_interface__``."""
    return (getattr(obj, "__cuda_ndarray__", False) or hasattr(obj, "copy_to_host")
            or (not SIMULATOR and hasattr(obj, "__cuda_array_interface__")))


def current_index():
    """The GPU a foreign CUDA array belongs to: the current device (0 under the simulator)."""
    from numba import cuda
    if not SIMULATOR and len(cuda.gpus) > 1:
        return cuda.get_current_device().id
    return 0


def share(obj, index, stream):
    """``(CudaArray or None, the device array)``: a ``CudaArray`` sharing memory with ``obj``
    (a numba device array or anything with ``__cuda_array_interface__``, see ``is_cuda_array``)
    when it is C-contiguous, else None (the caller copies it)."""
    from numba import cuda
    arr = obj if hasattr(obj, "copy_to_host") else cuda.as_cuda_array(obj)
    contiguous = arr.is_c_contiguous() if hasattr(arr, "is_c_contiguous") else \
        arr.flags["C_CONTIGUOUS"]
    if not contiguous:
        return None, arr
    shape = tuple(arr.shape)
    flat = arr.reshape(-1) if arr.size else arr
    return CudaArray(None, flat, 0, shape, c_strides(shape), np.dtype(arr.dtype), index, stream), arr
