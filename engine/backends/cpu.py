"""CpuBackend: tensors are numpy arrays; compute runs in Ember's Numba kernels.

Storage is a numpy array, so views (reshape, permute, expand, slicing, flip)
cost nothing and ``from_numpy`` is zero-copy.  Every computation goes to a
kernel in ``ember.kernels.cpu``; matmul calls BLAS through ``np.matmul``
(numpy's bundled OpenBLAS: Numba's own ``np.dot`` would need SciPy, and a
hand-written loop reaches a third of BLAS).
"""
import numpy as np

from . import cat_shape_and_fill, op_table
from ..ir import Op
from ..memory import empty


class CpuBackend:
    name = "cpu"

    def __init__(self):
        # the kernels import Numba: only now, when the first CPU op runs
        from ember.kernels.cpu import index, launch, reduce, scan, softmax, sort

        self._launch = launch
        self._reduce = reduce
        self._scan = scan
        self._sort = sort
        self._softmax_k = softmax
        self._index = index
        self._table = op_table(self)
        launch.alloc = empty  # the kernels' outputs come from the caching pool too

    def execute(self, op, *inputs, **params):
        """Run IR op ``op`` on storage ``inputs`` with static ``params``."""
        return self._table[op](op, *inputs, **params)

    # --- elementwise --------------------------------------------------------
    def _elementwise(self, op, *inputs, shape, dtype):
        return self._launch.elementwise_new(op.scalar, inputs, shape, dtype.np)

    def elementwise(self, op, inputs, shape, dtype):
        """``execute(op, *inputs, shape=shape, dtype=dtype)`` for an elementwise ``op``, called
        positionally: dispatch's entry for small ops run at once (per-op overhead)."""
        return self._launch.elementwise_new(op.scalar, inputs, shape, dtype.np)

    # --- reductions and scans -----------------------------------------------
    def _reduction(self, op, x, *, axes, dtype):
        return self._reduce.reduce(op.scalar, x, axes, dtype.np)

    def _arg_reduce(self, op, x, *, axis, dtype=None):
        return self._reduce.arg_reduce(op.scalar, x, axis)

    def _cumulative(self, op, x, *, axis, dtype):
        return self._scan.scan("add" if op is Op.CUMSUM else "mul", x, axis, dtype.np)

    def _softmax(self, op, x, *, axis, dtype):
        return self._softmax_k.softmax(x, axis, log=op is Op.LOG_SOFTMAX)

    # --- linear algebra, sorting, indexing ----------------------------------
    def _matmul(self, op, a, b, dtype=None):
        return np.asarray(np.matmul(a, b))

    def _sort_op(self, op, x, *, axis, descending):
        return self._sort.sort(x, axis, descending)

    def _topk(self, op, x, *, k, axis, largest):
        return self._sort.topk(x, k, axis, largest)

    def _gather(self, op, x, index, *, axis):
        return self._index.gather(x, axis, index)

    def _scatter(self, op, x, index, values, *, axis, reduce):
        return self._index.scatter(x, axis, index, values, reduce)

    def _index_select(self, op, x, indices, *, axis):
        return self._index.index_select(x, axis, indices)

    def _nonzero(self, op, x, dtype=None):
        return self._index.nonzero(x)

    def _searchsorted(self, op, seq, values, *, right, dtype=None):
        from ember.kernels.cpu import search
        return search.searchsorted(seq, values, right)

    # --- layout ---------------------------------------------------------------
    def _reshape(self, op, x, *, shape):
        return x.reshape(shape)

    def _permute(self, op, x, *, dims):
        return x.transpose(dims)

    def _expand(self, op, x, *, shape):
        return np.broadcast_to(x, shape)

    def _slice(self, op, x, *, index):
        return x[index]

    def _flip(self, op, x, *, dims):
        flips = tuple(slice(None, None, -1) if d in dims else slice(None) for d in range(x.ndim))
        return x[flips + (Ellipsis,)]   # the Ellipsis keeps a 0-d result an array

    def _contiguous(self, op, x):
        if x.flags.c_contiguous:
            return x
        return self._launch.elementwise("identity", [x], empty(x.shape, x.dtype))

    def _slice_assign(self, op, x, values, *, index):
        out = self._launch.elementwise("identity", [x], empty(x.shape, x.dtype))  # a new tensor
        self._launch.elementwise("identity", [values], out[index])
        return out

    def _cat(self, op, *xs, axis, dtype):
        return cat_shape_and_fill(xs, axis, lambda shape: empty(shape, dtype.np),
                                  lambda x, view: self._launch.elementwise("identity", [x], view))

    # --- creation and transfer ------------------------------------------------
    def _full(self, op, *, shape, value, dtype):
        if shape == ():
            return np.array(value, dtype.np)
        return self._launch.elementwise("identity", [np.array(value, dtype.np)], empty(shape, dtype.np))

    def _arange(self, op, *, start, stop, step, dtype):
        return np.arange(start, stop, step, dtype=dtype.np)

    def _from_host(self, op, array):
        return array

    def _to_host(self, op, x):
        return x

    def _random(self, op, *, generator, kind, shape, dtype, **params):
        g = generator
        if kind == "uniform":
            a = g.uniform(params["low"], params["high"], shape)
        elif kind == "normal":
            a = g.normal(params["mean"], params["std"], shape)
        elif kind == "randint":
            a = g.integers(params["low"], params["high"], shape)
        elif kind == "bernoulli":
            a = g.random(shape) < params["p"]
        else:
            raise ValueError(f"random: unknown distribution {kind!r}")
        return np.asarray(a, dtype.np)
