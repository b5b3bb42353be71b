"""CudaBackend: tensors live in GPU memory; compute runs in ``ember.kernels.cuda``.

Storage is a ``CudaArray`` (``array.py``): a typed 1-D device buffer plus an element
offset, a shape and element strides, so views change only metadata, as numpy views do.
Every computation goes to a launcher of this package (``elementwise``, ``reduce``,
``scan``, ``sort``, ``index``, ``softmax``, ``matmul``, ``linalg``, ``fft``, ``quant``,
``fused``), laid out as the CPU backend's; ``linalg`` and ``fft`` call cuSOLVER, cuBLAS and
cuFFT through nvmath-python (a host stand-in under the simulator).

Memory comes from a caching allocator per device (``ember.memory.Pool``): a freed buffer
goes back to a pool keyed by its size class and serves the next request of that class;
``empty_cache()`` releases the pool.  Every kernel and copy of a device runs on that
device's stream, in order, so a buffer can be reused as soon as its last user is queued;
``synchronize()`` waits for the stream.  Host copies (``TO_HOST``) synchronize themselves.
"""
import contextlib
import functools
import math

import numpy as np

from ... import memory
from ...ir import ELEMENTWISE, REDUCTIONS, Op
from .. import Backend, check_table, get_backend
from ..shared import c_strides, cat_shape_and_fill
from . import elementwise as ew
from . import fft, fused, index, linalg, matmul, quant, reduce, scan, softmax, sort
from .array import SIMULATOR, Block, CudaArray, share


def _flip(b, op, x, *, dims):
    offset, strides = x.offset, list(x.strides)
    for d in dims:
        if x.shape[d] > 1:
            offset += (x.shape[d] - 1) * strides[d]
            strides[d] = -strides[d]
    return x.view(offset, x.shape, strides)


def _reshape(b, op, x, *, shape):
    shape = tuple(shape)
    if not x.c_contiguous:
        x = ew.copy(b, x)
    return x.view(x.offset, shape, c_strides(shape))


def _slice_assign(b, op, x, values, *, index):
    out = ew.copy(b, x)
    ew.map(b, "identity", [values], out[index])
    return out


def _cat(b, op, *xs, axis, dtype):
    return cat_shape_and_fill(xs, axis, lambda shape: b.empty(shape, dtype.np),
                              lambda x, view: ew.map(b, "identity", [x], view))


def _random(b, op, **params):
    # drawn on the host by the same generator as the CPU: a seed gives the same values on
    # every device
    return b.from_host(get_backend("cpu").execute(op, **params))


_LAUNCHERS = {
    **{op: ew.elementwise for op in ELEMENTWISE},
    **{op: reduce.reduction for op in REDUCTIONS},
    Op.ARGMAX: reduce.arg_reduce, Op.ARGMIN: reduce.arg_reduce,
    Op.CUMSUM: scan.cumulative, Op.CUMPROD: scan.cumulative,
    Op.SOFTMAX: softmax.softmax, Op.LOG_SOFTMAX: softmax.softmax,
    Op.MATMUL: matmul.matmul,
    Op.SORT: sort.sort, Op.TOPK: sort.topk, Op.SEARCHSORTED: sort.searchsorted,
    Op.GATHER: index.gather, Op.SCATTER: index.scatter, Op.INDEX_SELECT: index.index_select,
    Op.NONZERO: index.nonzero,
    Op.RESHAPE: _reshape,
    Op.PERMUTE: lambda b, op, x, *, dims: x.view(x.offset, [x.shape[d] for d in dims],
                                                 [x.strides[d] for d in dims]),
    Op.EXPAND: lambda b, op, x, *, shape: x.broadcast(tuple(shape)),
    Op.SLICE: lambda b, op, x, *, index: x[index],
    Op.FLIP: _flip,
    Op.CONTIGUOUS: lambda b, op, x: ew.dense(b, x),
    Op.SLICE_ASSIGN: _slice_assign,
    Op.CAT: _cat,
    Op.CHOLESKY: linalg.cholesky, Op.TRIANGULAR_SOLVE: linalg.triangular_solve,
    Op.TRIANGULAR_MATMUL: linalg.triangular_matmul, Op.CHOLESKY_BACKWARD: linalg.cholesky_backward,
    Op.SOLVE: linalg.solve, Op.INV: linalg.inv, Op.DET: linalg.det, Op.SLOGDET: linalg.slogdet,
    Op.EIGH: linalg.eigh, Op.SVD: linalg.svd, Op.QR: linalg.qr, Op.PINV: linalg.pinv,
    Op.FFT: lambda b, op, x, *, dims, inverse, norm, dtype: fft.fft(b, x, dims, inverse, norm),
    Op.RFFT: lambda b, op, x, *, dims, norm, dtype: fft.rfft(b, x, dims, norm),
    Op.IRFFT: lambda b, op, x, *, dims, n, norm, dtype: fft.irfft(b, x, dims, n, norm),
    Op.FUSED: fused.fused_op,
    Op.FUSED_REDUCE: fused.fused_reduce_op,
    Op.QUANT_CALIBRATE: quant.calibrate, Op.QUANTIZE: quant.quantize,
    Op.DEQUANTIZE: quant.dequantize, Op.PACK: quant.pack, Op.UNPACK: quant.unpack,
    Op.QMATMUL: quant.qmatmul,
    Op.FULL: lambda b, op, *, shape, value, dtype: ew.full(b, shape, value, dtype.np),
    Op.ARANGE: lambda b, op, *, start, stop, step, dtype: ew.arange(b, start, stop, step, dtype.np),
    Op.FROM_HOST: lambda b, op, array: b.from_host(array),
    Op.TO_HOST: lambda b, op, x: b.to_host(x),
    Op.RANDOM: _random,
}


class CudaBackend(Backend):
    name = "cuda"

    def __init__(self, index=0):
        from numba import cuda

        self.cuda = cuda
        self.index = index
        self._multi = len(cuda.gpus) > 1
        with self._context():
            self.stream = cuda.stream()
        # EMBER_POOL_MAX caps the cache; without it, a failed allocation empties the cache
        # and retries (the pool's acquire)
        self.allocator = memory.Pool(f"cuda:{index}",
                                     lambda size: cuda.device_array(size, np.uint8),
                                     memory.LIMIT, memory.ENABLED)
        self._table = check_table("CudaBackend", {
            op: functools.partial(fn, self) for op, fn in _LAUNCHERS.items()})

    def _context(self):
        return self.cuda.gpus[self.index] if self._multi else contextlib.nullcontext()

    def execute(self, op, *inputs, **params):
        """Run IR op ``op`` on ``CudaArray`` inputs with static ``params`` (on this GPU)."""
        if self._multi:
            with self.cuda.gpus[self.index]:
                return super().execute(op, *inputs, **params)
        return super().execute(op, *inputs, **params)

    def run(self, op, inputs, params):
        if self._multi:
            with self.cuda.gpus[self.index]:
                return super().run(op, inputs, params)
        return super().run(op, inputs, params)

    def _elementwise(self, op, inputs, shape, dtype):
        return self._table[op](op, *inputs, shape=shape, dtype=dtype)

    def elementwise(self, op, inputs, shape, dtype):
        if self._multi:
            with self.cuda.gpus[self.index]:
                return super().elementwise(op, inputs, shape, dtype)
        return super().elementwise(op, inputs, shape, dtype)

    # --- what the planning layer asks -------------------------------------------------------
    def prepare_chain(self, chain):
        """The compiled form of fused chain ``chain`` (``ember.fusion``'s key), for ``FUSED``."""
        return fused.prepare(chain)

    def fused_reduce_plan(self, combiner, shape, dtype, axes, out_dtype):
        """None: reductions do not compute their input chain on CUDA (it is computed first)."""
        return None

    # --- device management ----------------------------------------------------
    def synchronize(self, device=None):
        """Wait until every kernel and copy queued on this device has finished."""
        self.stream.synchronize()

    def empty_cache(self):
        """Release the cached (freed) blocks of this device's allocator."""
        self.synchronize()
        self.allocator.empty_cache()

    def memory_stats(self):
        """This device's allocator counters (see ``ember.memory_stats``)."""
        return self.allocator.stats()

    # --- what the launchers of this package use ---------------------------------------------
    def empty(self, shape, dtype):
        """A new C-contiguous array from the caching allocator."""
        dtype = np.dtype(dtype)
        shape = tuple(int(n) for n in shape)
        mem, size = self.allocator.acquire(max(1, math.prod(shape)) * dtype.itemsize)
        return CudaArray(Block(mem, size, self.allocator), mem.view(dtype), 0, shape,
                         c_strides(shape), dtype, self.index, self.stream)

    def launch(self, kern, blocks, threads, *args):
        """Queue ``kern`` on this device's stream."""
        kern[blocks, threads, self.stream](*args)

    def from_host(self, array):
        """A device copy of host ``array``."""
        a = np.asarray(array)
        a = np.ascontiguousarray(a) if a.ndim else a.copy()   # ascontiguousarray makes 0-d 1-d
        out = self.empty(a.shape, a.dtype)
        if a.size:
            out.buf[:a.size].copy_to_device(a.reshape(-1), stream=self.stream)
        return out

    def to_host(self, x):
        """A host copy of ``x`` (waits for the stream)."""
        x = ew.dense(self, x)
        host = np.empty(x.shape, x.dtype)
        if host.size:
            x.buf[x.offset:x.offset + host.size].copy_to_host(host.reshape(-1), stream=self.stream)
            self.stream.synchronize()
        return host

    # --- interop --------------------------------------------------------------------
    def from_cuda_array(self, obj):
        """A ``CudaArray`` sharing memory with ``obj`` (a numba device array or anything with
        ``__cuda_array_interface__``); a strided ``obj`` is copied."""
        arr, source = share(obj, self.index, self.stream)
        return arr if arr is not None else self.from_host(source.copy_to_host())

    def device_array(self, x):
        """``x`` as a numba device array (zero-copy) for user ``@cuda.jit`` kernels."""
        if SIMULATOR:
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
            item = x.dtype.itemsize
            base = x.buf._ary
            if x.size == 0:
                return FakeCUDAArray(np.empty(x.shape, x.dtype))
            low = x.offset + sum((n - 1) * s for n, s in zip(x.shape, x.strides) if s < 0)
            view = np.lib.stride_tricks.as_strided(
                base[low:], x.shape, tuple(abs(s) * item for s in x.strides))
            view = view[tuple(slice(None, None, -1) if s < 0 else slice(None) for s in x.strides)]
            arr = FakeCUDAArray(view)
            arr._ember_owner = x   # keeps the pooled block alive (as_cuda_array's owner does below)
            return arr
        return self.cuda.as_cuda_array(x)
