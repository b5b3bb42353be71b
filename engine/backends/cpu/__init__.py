"""CpuBackend: tensors are numpy arrays; compute runs in Ember's Numba kernels.

Storage is a numpy array, so views (reshape, permute, expand, slicing, flip) cost nothing
and ``from_numpy`` is zero-copy.  Every computation goes to a launcher of this package
(``elementwise``, ``reduce``, ``scan``, ``sort``, ``index``, ``softmax``, ``linalg``, ``fft``,
``quant``, ``fused``), which runs the kernels of ``ember.kernels.cpu`` (or LAPACK and
pocketfft through SciPy: ``linalg``, ``fft``); matmul calls BLAS through
``np.matmul`` (numpy's bundled OpenBLAS: Numba's own ``np.dot`` would need SciPy, and a
hand-written loop reaches a third of BLAS), or a large one through SciPy's once SciPy is
loaded (``linalg.matmul``).  Outputs come from the caching pool (``ember.memory``).
"""
import functools
import math
import operator

import numpy as np

from ...ir import ELEMENTWISE, REDUCTIONS, Op
from ...memory import CPU_POOL, empty
from .. import Backend, check_table
from ..shared import cat_shape_and_fill
from . import elementwise as ew
from . import fft, fused, index, linalg, quant, reduce, scan, softmax, sort, tape


def _elementwise(op, *inputs, shape, dtype):
    return ew.elementwise_new(op, inputs, shape, dtype)


# Copies below this many elements go through numpy (one C call: ~1 us against ~3-5 us for
# the strided copy kernel's launch on a tiny view); above it Ember's kernels copy on threads.
NUMPY_COPY_MAX = ew.PARALLEL_MIN


def _copy_into(x, view):
    return ew.elementwise("identity", [x], view)


def _contiguous(op, x):
    if x.flags.c_contiguous:
        return x
    if x.size < NUMPY_COPY_MAX:
        return np.ascontiguousarray(x)
    return _copy_into(x, empty(x.shape, x.dtype))


def _flip(op, x, *, dims):
    flips = tuple(slice(None, None, -1) if d in dims else slice(None) for d in range(x.ndim))
    return x[flips + (Ellipsis,)]   # the Ellipsis keeps a 0-d result an array


def _slice_assign(op, x, values, *, index):
    if x.size < NUMPY_COPY_MAX:
        out = np.array(x, order="C")   # a new tensor
        out[index] = values
        return out
    out = _copy_into(x, empty(x.shape, x.dtype))  # a new tensor
    _copy_into(values, out[index])
    return out


def _cat(op, *xs, axis, dtype):
    size = 0
    for x in xs:
        size += x.size
    if size < NUMPY_COPY_MAX:
        return np.concatenate(xs, axis=axis)
    return cat_shape_and_fill(xs, axis, lambda shape: empty(shape, dtype.np), _copy_into)


def _full(op, *, shape, value, dtype):
    if shape == ():
        return np.array(value, dtype.np)
    if math.prod(shape) < NUMPY_COPY_MAX:
        return np.full(shape, value, dtype.np)
    return _copy_into(np.array(value, dtype.np), empty(shape, dtype.np))


def _random(op, *, generator, kind, shape, dtype, **params):
    g = generator
    if kind == "uniform":
        a = g.uniform(params["low"], params["high"], shape)
    elif kind == "normal":
        a = g.normal(params["mean"], params["std"], shape)
    elif kind == "randint":
        a = g.integers(params["low"], params["high"], shape)
    else:   # bernoulli
        a = g.random(shape) < params["p"]
    return np.asarray(a, dtype.np)


def _expand(op, x, *, shape):
    """``x`` broadcast to ``shape``: a read-only view, as ``np.broadcast_to`` makes.  One value
    (a backward's seed, a sum's gradient) is a stride-0 view built directly: ~1 us against
    ``broadcast_to``'s ~3.5 us of Python."""
    if x.size == 1:
        v = np.ndarray(shape, x.dtype, x, 0, (0,) * len(shape))
        v.flags.writeable = False
        return v
    return np.broadcast_to(x, shape)


_TABLE = check_table("CpuBackend", {
    **{op: _elementwise for op in ELEMENTWISE},
    **{op: lambda op, x, *, axes, dtype: reduce.reduce(op.scalar, x, axes, dtype.np)
       for op in REDUCTIONS},
    Op.ARGMAX: lambda op, x, *, axis, dtype=None: reduce.arg_reduce(op.scalar, x, axis),
    Op.ARGMIN: lambda op, x, *, axis, dtype=None: reduce.arg_reduce(op.scalar, x, axis),
    Op.CUMSUM: lambda op, x, *, axis, dtype: scan.scan("add", x, axis, dtype.np),
    Op.CUMPROD: lambda op, x, *, axis, dtype: scan.scan("mul", x, axis, dtype.np),
    Op.SOFTMAX: lambda op, x, *, axis, dtype: softmax.softmax(x, axis),
    Op.LOG_SOFTMAX: lambda op, x, *, axis, dtype: softmax.softmax(x, axis, log=True),
    Op.MATMUL: lambda op, a, b, dtype=None: linalg.matmul(a, b),
    Op.SORT: lambda op, x, *, axis, descending: sort.sort(x, axis, descending),
    Op.TOPK: lambda op, x, *, k, axis, largest: sort.topk(x, k, axis, largest),
    Op.SEARCHSORTED: lambda op, seq, values, *, right, dtype=None: sort.searchsorted(seq, values,
                                                                                    right),
    Op.GATHER: lambda op, x, idx, *, axis: index.gather(x, axis, idx),
    Op.SCATTER: lambda op, x, idx, values, *, axis, reduce: index.scatter(x, axis, idx, values,
                                                                           reduce),
    Op.INDEX_SELECT: lambda op, x, idx, *, axis: index.index_select(x, axis, idx),
    Op.NONZERO: lambda op, x, dtype=None: index.nonzero(x),
    Op.RESHAPE: lambda op, x, *, shape: x.reshape(shape),
    Op.PERMUTE: lambda op, x, *, dims: x.transpose(dims),
    Op.EXPAND: _expand,
    Op.SLICE: lambda op, x, *, index: x[index],
    Op.FLIP: _flip,
    Op.CONTIGUOUS: _contiguous,
    Op.SLICE_ASSIGN: _slice_assign,
    Op.CAT: _cat,
    Op.CHOLESKY: linalg.cholesky, Op.TRIANGULAR_SOLVE: linalg.triangular_solve,
    Op.TRIANGULAR_MATMUL: linalg.triangular_matmul, Op.CHOLESKY_BACKWARD: linalg.cholesky_backward,
    Op.SOLVE: linalg.solve, Op.INV: linalg.inv, Op.DET: linalg.det, Op.SLOGDET: linalg.slogdet,
    Op.EIGH: linalg.eigh, Op.SVD: linalg.svd, Op.QR: linalg.qr, Op.PINV: linalg.pinv,
    Op.FFT: lambda op, x, *, dims, inverse, norm, dtype: fft.fft(x, dims, inverse, norm),
    Op.RFFT: lambda op, x, *, dims, norm, dtype: fft.rfft(x, dims, norm),
    Op.IRFFT: lambda op, x, *, dims, n, norm, dtype: fft.irfft(x, dims, n, norm),
    Op.FUSED: fused.fused_op,
    Op.FUSED_REDUCE: fused.fused_reduce_op,
    Op.QUANT_CALIBRATE: lambda op, x, *, bm, bn, half: quant.calibrate(x, bm, bn, half),
    Op.QUANTIZE: lambda op, x, scales, *, bm, bn, lo, hi, check: quant.quantize(
        x, scales, bm, bn, lo, hi, check),
    Op.DEQUANTIZE: lambda op, q, scales, *, bm, bn, bits, C, dtype: quant.dequantize(
        q, scales, bm, bn, bits, C, dtype),
    Op.PACK: lambda op, q, *, bits: quant.pack(q, bits),
    Op.UNPACK: lambda op, words, *, C, bits: quant.unpack(words, C, bits),
    Op.QMATMUL: lambda op, q, scales, other, *, bm, bn, bits, shape, qleft, dtype: quant.matmul(
        q, scales, bm, bn, bits, shape, other, qleft, dtype),
    Op.FULL: _full,
    Op.ARANGE: lambda op, *, start, stop, step, dtype: np.arange(start, stop, step, dtype=dtype.np),
    Op.FROM_HOST: lambda op, array: array,
    Op.TO_HOST: lambda op, x: x,
    Op.RANDOM: _random,
})


class CpuBackend(Backend):
    name = "cpu"
    _table = _TABLE

    _elementwise = staticmethod(ew.elementwise_new)

    def bind(self, op, params, inputs, out):
        """``execute(op, *inputs, **params)`` as one call for a compiled step's replay: views
        as the numpy method itself, matmul as ``np.matmul``, elementwise and fused ops with
        their kernels looked up once."""
        if op is Op.RESHAPE:
            return operator.methodcaller("reshape", params["shape"])
        if op is Op.PERMUTE:
            return operator.methodcaller("transpose", params["dims"])
        if op is Op.SLICE:
            return operator.itemgetter(params["index"])
        if op is Op.MATMUL and isinstance(out, np.ndarray) and out.ndim:
            small = out.size * inputs[0].shape[-1] < linalg.GEMM_MIN_WORK
            return np.matmul if small else linalg.matmul
        if op is Op.FUSED:
            return fused.bind(**params)
        if op in ELEMENTWISE:
            shape, dtype = params["shape"], params["dtype"]
            new = ew.elementwise_new
            return lambda *xs: new(op, xs, shape, dtype)
        return functools.partial(self._table[op], op, **params)

    def tape(self, steps, constants, inputs, outputs):
        """A step of small tensors as one tape of the interpreter kernel (``tape.py``)."""
        return tape.lower(steps, constants, inputs, outputs, self._table)

    # --- what the planning layer asks -------------------------------------------------------
    def prepare_chain(self, chain):
        """The compiled form of fused chain ``chain`` (``ember.fusion``'s key), for ``FUSED``."""
        return fused.prepare(chain)

    def fused_reduce_plan(self, combiner, shape, dtype, axes, out_dtype):
        """How ``FUSED_REDUCE`` reduces a chain of ``shape`` and numpy ``dtype`` over ``axes``
        into ``out_dtype`` with ``combiner``, or None when it cannot (then fusion computes the
        chain and reduces it)."""
        return fused.reduce_plan(combiner, shape, dtype, axes, out_dtype)

    # --- device management --------------------------------------------------------------------
    def synchronize(self, device=None):
        """Nothing to wait for: CPU kernels have finished when they return."""

    def empty_cache(self):
        """Release the cached (freed) blocks of the CPU's caching allocator."""
        CPU_POOL.empty_cache()

    def memory_stats(self):
        """The CPU allocator's counters (see ``ember.memory_stats``)."""
        return CPU_POOL.stats()
