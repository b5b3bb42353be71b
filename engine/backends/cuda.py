"""CudaBackend: tensors live in GPU memory; compute runs in ``ember.kernels.cuda``.

Storage is a ``CudaArray``: a typed 1-D device buffer (a numba device array,
a ``FakeCUDAArray`` under the simulator) plus an element offset, a shape and
element strides.  Views (reshape of contiguous data, permute, expand, slicing
with any step, flip) change only that metadata, as numpy views do; kernels
receive ``(buffer, offset, strides)`` and index through the strides.

Memory comes from a caching allocator per device (``ember.memory.Pool``): a
freed buffer goes back to a pool keyed by its size class and serves the next
request of that class; ``empty_cache()`` releases the pool.  Every kernel and
copy of a device runs on that device's stream, in order, so a buffer can be
reused as soon as its last user is queued; ``synchronize()`` waits for the
stream.  Host copies (``TO_HOST``) synchronize themselves.
"""
import math

import numpy as np

from .. import memory
from ..dtypes import int64 as _I64
from . import cat_shape_and_fill, op_table
from ..ir import Op


def _c_strides(shape):
    strides = []
    s = 1
    for n in reversed(shape):
        strides.append(s)
        s *= n
    return tuple(reversed(strides))


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

    __slots__ = ("block", "buf", "offset", "shape", "strides", "dtype", "device")

    def __init__(self, block, buf, offset, shape, strides, dtype, device):
        self.block = block      # keeps the allocation alive (None for foreign memory)
        self.buf = buf          # typed 1-D device array
        self.offset = offset    # in elements
        self.shape = shape
        self.strides = strides  # in elements
        self.dtype = dtype
        self.device = device    # GPU index

    def view(self, offset, shape, strides):
        return CudaArray(self.block, self.buf, offset, tuple(shape), tuple(strides), self.dtype,
                         self.device)

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
        return all(s == c for n, s, c in zip(self.shape, self.strides, _c_strides(self.shape)) if n != 1)

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
        if _SIMULATOR:
            ptr = self.buf._ary.ctypes.data if self.size else 0
        else:
            ptr = self.buf.device_ctypes_pointer.value if self.size else 0
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (ptr + self.offset * item if ptr else 0, False),
            "strides": None if self.c_contiguous else tuple(s * item for s in self.strides),
            "version": 3,
            "stream": None if _SIMULATOR else _stream_handle(_BACKENDS[self.device].stream),
        }


_SIMULATOR = False
_BACKENDS = {}


def _stream_handle(stream):
    h = stream.handle
    h = getattr(h, "value", h)   # ctypes handle (older numba) or a CUstream object
    return int(h) or None        # CAI v3: 0 is not allowed; None means "no synchronization"


class CudaBackend:
    name = "cuda"

    def __init__(self, index=0):
        global _SIMULATOR
        from numba import cuda

        from ember.kernels.cpu.launch import merge_dims
        from ember.kernels.cpu.reduce import _identity
        from ember.kernels.cuda import builder, elementwise, linalg, reduce, softmax, sort
        from ember.kernels.cuda import index as index_kernels  # not `index`: the GPU number

        self.cuda = cuda
        self.index = index
        self._b = builder
        _SIMULATOR = builder.SIMULATOR
        self._merge_dims = merge_dims
        self._identity = _identity
        self._k = {"map": {1: elementwise.map1, 2: elementwise.map2, 3: elementwise.map3},
                   "ew": elementwise, "reduce": reduce, "linalg": linalg, "sort": sort,
                   "softmax": softmax,
                   "index": index_kernels}
        self._multi = len(cuda.gpus) > 1
        with self._context():
            self.stream = cuda.stream()
        # EMBER_POOL_MAX caps the cache; without it, a failed allocation empties the cache
        # and retries (the pool's acquire)
        self.allocator = memory.Pool(f"cuda:{index}",
                                     lambda size: cuda.device_array(size, np.uint8),
                                     memory.LIMIT, memory.ENABLED)
        _BACKENDS[index] = self
        self._table = op_table(self)

    def _context(self):
        if self._multi:
            return self.cuda.gpus[self.index]
        import contextlib
        return contextlib.nullcontext()

    def execute(self, op, *inputs, **params):
        """Run IR op ``op`` on ``CudaArray`` inputs with static ``params``."""
        if self._multi:
            with self.cuda.gpus[self.index]:
                return self._table[op](op, *inputs, **params)
        return self._table[op](op, *inputs, **params)

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

    def empty(self, shape, dtype):
        """A new C-contiguous array from the caching allocator."""
        dtype = np.dtype(dtype)
        shape = tuple(int(n) for n in shape)
        mem, size = self.allocator.acquire(max(1, math.prod(shape)) * dtype.itemsize)
        block = Block(mem, size, self.allocator)
        buf = mem.view(dtype)
        return CudaArray(block, buf, 0, shape, _c_strides(shape), dtype, self.index)

    def _launch(self, kern, blocks, threads, *args):
        kern[blocks, threads, self.stream](*args)

    # --- helpers ----------------------------------------------------------------
    def _broadcast(self, x, shape):
        off = len(shape) - x.ndim
        strides = [0] * off + [s if n == m else 0
                               for n, m, s in zip(x.shape, shape[off:], x.strides)]
        return x.view(x.offset, shape, strides)

    def map(self, opname, inputs, out):
        """out[...] = opname(*inputs) elementwise, inputs broadcast to ``out.shape``."""
        n = out.size
        if n == 0:
            return out
        ops = [self._broadcast(x, out.shape) for x in inputs] + [out]
        merged, strides = self._merge_dims(out.shape, [list(o.strides) for o in ops])
        args = []
        for o, st in zip(ops, strides):
            args += (o.buf, o.offset, tuple(st))
        kern = self._b.kernel(self._k["map"][len(inputs)], self._b.variant(opname, out.dtype))
        self._launch(kern, self._b.grid(n), self._b.THREADS, *args, tuple(merged), n)
        return out

    def copy(self, x, dtype=None):
        """A fresh C-contiguous copy of ``x`` (cast to ``dtype``)."""
        return self.map("identity", [x], self.empty(x.shape, dtype or x.dtype))

    def _dense(self, x, dtype=None):
        """``x`` C-contiguous from element 0 of its ``buf`` (kernels given a bare buffer index
        it from 0), in ``dtype``: a view re-based at its offset, or a copy."""
        if x.c_contiguous and (dtype is None or x.dtype == dtype):
            if x.offset == 0:
                return x
            return CudaArray(x.block, x.buf[x.offset:x.offset + x.size], 0, x.shape, x.strides,
                             x.dtype, x.device)
        return self.copy(x, dtype)

    # --- elementwise --------------------------------------------------------
    def _elementwise(self, op, *inputs, shape, dtype):
        return self.map(op.scalar, inputs, self.empty(shape, dtype.np))

    # --- reductions and scans -----------------------------------------------
    def _fold(self, opname, x2, rows, n, dtype):
        """Fold each row of contiguous (rows, n) ``x2`` -> new (rows,) array of ``dtype``."""
        b = self._b
        init = self._identity(opname, dtype)
        kern = b.kernel(self._k["reduce"].fold, opname, dtype)
        nsplit = max(1, min(-(-n // (b.THREADS * 16)), -(-1024 // rows)))
        csize = -(-n // nsplit)
        part = self.empty((rows * nsplit,), dtype)
        self._launch(kern, b.grid(rows * nsplit, 1), b.THREADS, x2.buf, part.buf, rows, n, nsplit,
                     csize, init)
        if nsplit == 1:
            return part
        out = self.empty((rows,), dtype)
        self._launch(kern, b.grid(rows, 1), b.THREADS, part.buf, out.buf, rows, nsplit, 1, nsplit,
                     init)
        return out

    def _reduction(self, op, x, *, axes, dtype):
        opname, out_dt = op.scalar, dtype.np
        if out_dt.kind == "b" and opname in ("add", "mul"):
            opname = "logical_or" if opname == "add" else "logical_and"
        kept = [d for d in range(x.ndim) if d not in axes]
        out_shape = tuple(x.shape[d] for d in kept)
        n = math.prod(x.shape[a] for a in axes)
        rows = math.prod(out_shape)
        if n == 0:
            if opname in ("maximum", "minimum"):
                raise ValueError(f"{op.name.lower()}: cannot reduce an empty dim "
                                 f"(shape {x.shape}, axes {axes})")
            return self._full(None, shape=out_shape, value=self._identity(opname, out_dt), dtype=dtype)
        if not axes or n == 1:
            return self.copy(self._reshape(None, x, shape=out_shape), out_dt)
        if rows == 0:
            return self.empty(out_shape, out_dt)
        y = self._dense(self._permute(None, x, dims=tuple(kept) + tuple(axes)), out_dt)
        out = self._fold(opname, y, rows, n, out_dt)
        return out.view(0, out_shape, _c_strides(out_shape))

    def _arg_reduce(self, op, x, *, axis, dtype=None):
        if axis is None:
            y, out_shape = self._dense(x), ()
            rows, n = 1, x.size
        else:
            out_shape = x.shape[:axis] + x.shape[axis + 1:]
            dims = tuple(d for d in range(x.ndim) if d != axis) + (axis,)
            y = self._dense(self._permute(None, x, dims=dims))
            rows, n = math.prod(out_shape), x.shape[axis]
        if n == 0:
            raise ValueError(f"{op.name.lower()}: cannot reduce an empty dim (shape {x.shape})")
        out = self.empty(out_shape, np.int64)
        if rows:
            kern = self._b.kernel(self._k["reduce"].arg_fold, "gt" if op is Op.ARGMAX else "lt",
                                  x.dtype)
            self._launch(kern, self._b.grid(rows, 1), self._b.THREADS, y.buf, out.buf, rows, n)
        return out

    def _cumulative(self, op, x, *, axis, dtype):
        opname = "add" if op is Op.CUMSUM else "mul"
        if dtype.np.kind == "b":
            opname = "logical_or" if opname == "add" else "logical_and"
        src = self._dense(x, dtype.np)
        out = self.empty(x.shape, dtype.np)
        outer = math.prod(x.shape[:axis])
        n = x.shape[axis]
        inner = math.prod(x.shape[axis + 1:])
        if out.size:
            kern = self._b.kernel(self._k["reduce"].scan_lines, opname)
            self._launch(kern, self._b.grid(outer * inner), self._b.THREADS, src.buf, out.buf,
                         outer, n, inner)
        return out

    def _softmax(self, op, x, *, axis, dtype):
        shape = x.shape
        if not shape:
            x = x.view(x.offset, (1,), (1,))
        dims = tuple(d for d in range(x.ndim) if d != axis) + (axis,)
        y = self._dense(self._permute(None, x, dims=dims))   # the softmax dim last
        out = self.empty(y.shape, y.dtype)
        n = y.shape[-1]
        rows = y.size // n if n else 0
        if rows:
            kern = self._b.kernel(self._k["softmax"].softmax_rows, self._b.variant("exp", y.dtype),
                                  y.dtype)
            self._launch(kern, self._b.grid(rows, 1), self._b.THREADS, y.buf, y.offset, out.buf,
                         rows, n, y.dtype.type(-np.inf), y.dtype.type(1), op is Op.LOG_SOFTMAX)
        if not shape:
            return out.view(0, (), ())
        return self._permute(None, out, dims=tuple(int(d) for d in np.argsort(dims)))

    # --- linear algebra ---------------------------------------------------------
    def _matmul(self, op, a, b, dtype=None):
        va, vb = a.ndim == 1, b.ndim == 1
        if va:
            a = a.view(a.offset, (1,) + a.shape, (0,) + a.strides)
        if vb:
            b = b.view(b.offset, b.shape + (1,), b.strides + (0,))
        m, k = a.shape[-2:]
        n = b.shape[-1]
        ba, bb = a.shape[:-2], b.shape[:-2]
        nd = max(len(ba), len(bb))
        bshape = tuple(max(x, y) for x, y in zip((1,) * (nd - len(ba)) + ba,
                                                 (1,) * (nd - len(bb)) + bb))
        abst = self._broadcast(a.view(a.offset, ba, a.strides[:-2]), bshape).strides
        bbst = self._broadcast(b.view(b.offset, bb, b.strides[:-2]), bshape).strides
        out = self.empty(bshape + (m, n), a.dtype)
        nbatch = math.prod(bshape)
        if out.size:
            if not bshape:
                bshape, abst, bbst = (1,), (0,), (0,)
            B = self._b
            kern = B.kernel(self._k["linalg"].matmul_tiled, None, a.dtype)
            ntr, ntc = -(-m // B.TILE), -(-n // B.TILE)
            grid = (min(ntc, B.MAX_BLOCKS), min(ntr, B.MAX_BLOCKS), min(nbatch, B.MAX_BLOCKS))
            self._launch(kern, grid, (B.TILE, B.TILE), a.buf, a.offset, a.strides[-2:], tuple(abst),
                         b.buf, b.offset, b.strides[-2:], tuple(bbst), out.buf, tuple(bshape),
                         m, k, n, nbatch)
        shape = out.shape
        if va:
            shape = shape[:-2] + shape[-1:]
        if vb:
            shape = shape[:-1]
        return out.view(0, shape, _c_strides(shape))

    # --- sorting ------------------------------------------------------------------
    def _sort_op(self, op, x, *, axis, descending):
        if x.ndim == 0:
            return self.copy(x), self._full(None, shape=(), value=0, dtype=_I64)
        dims = tuple(d for d in range(x.ndim) if d != axis) + (axis,)
        y = self._dense(self._permute(None, x, dims=dims))
        values = self.empty(y.shape, x.dtype)
        idx = self.empty(y.shape, np.int64)
        n = x.shape[axis]
        rows = math.prod(y.shape[:-1])
        if values.size:
            tmp = self.empty(y.shape, np.int64)
            kern = self._b.kernel(self._k["sort"].sort_rows)
            self._launch(kern, self._b.grid(rows), self._b.THREADS, y.buf, values.buf, idx.buf,
                         tmp.buf, rows, n, bool(descending))
        back = tuple(np.argsort(dims))
        return (self._dense(self._permute(None, values, dims=back)),
                self._dense(self._permute(None, idx, dims=back)))

    def _topk(self, op, x, *, k, axis, largest):
        values, idx = self._sort_op(op, x, axis=axis, descending=largest)
        if x.ndim == 0:
            return values, idx
        index = (slice(None),) * axis + (slice(0, k),)
        return self._dense(values[index]), self._dense(idx[index])

    # --- indexing -------------------------------------------------------------------
    def _check_index(self, name, ind, size, dim):
        if ind.size == 0:
            return
        lo = self._to_host(None, self._reduction(Op.MIN, ind, axes=tuple(range(ind.ndim)), dtype=_I64))
        hi = self._to_host(None, self._reduction(Op.MAX, ind, axes=tuple(range(ind.ndim)), dtype=_I64))
        lo, hi = int(lo), int(hi)
        if lo >= 0 and hi < size:
            return
        raise IndexError(f"{name}: index {lo if lo < 0 else hi} is out of range for dim {dim} "
                         f"of size {size}")

    def _gather_into(self, x, ind, ist, shape, axis, out):
        total = out.size
        if total:
            kern = self._b.kernel(self._k["index"].gather_walk)
            self._launch(kern, self._b.grid(total), self._b.THREADS, x.buf, x.offset, x.strides,
                         ind.buf, ind.offset, tuple(ist), out.buf, tuple(shape), axis, total)
        return out

    def _gather(self, op, x, index, *, axis):
        if x.ndim == 0:
            self._check_index("gather", index, 1, 0)
            return self.copy(self._broadcast(x, index.shape))
        self._check_index("gather", index, x.shape[axis], axis)
        out = self.empty(index.shape, x.dtype)
        return self._gather_into(x, index, index.strides, index.shape, axis, out)

    def _index_select(self, op, x, indices, *, axis):
        if x.ndim == 0:
            self._check_index("index_select", indices, 1, 0)
            return self.copy(x)
        self._check_index("index_select", indices, x.shape[axis], axis)
        shape = x.shape[:axis] + (indices.shape[0],) + x.shape[axis + 1:]
        ist = [0] * x.ndim
        ist[axis] = indices.strides[0]
        return self._gather_into(x, indices, ist, shape, axis, self.empty(shape, x.dtype))

    def _scatter(self, op, x, index, values, *, axis, reduce):
        out = self.copy(x)
        if index.size == 0:
            return out
        size = x.shape[axis] if x.ndim else 1
        self._check_index("scatter", index, size, axis)
        values = self._broadcast(values, index.shape)
        o = out
        if x.ndim == 0:
            o, index, values = (v.view(v.offset, (1,), (0,)) for v in (out, index, values))
        lines = index.size // index.shape[axis]
        kern = self._b.kernel(self._k["index"].scatter_lines)
        self._launch(kern, self._b.grid(lines), self._b.THREADS, o.buf, o.strides, index.buf,
                     index.offset, index.strides, values.buf, values.offset, values.strides,
                     index.shape, axis, reduce == "add", lines)
        return out

    def _nonzero(self, op, x, dtype=None):
        if x.ndim == 0:
            host = self._to_host(None, x)
            return self._from_host(None, np.zeros((1 if host.item() else 0, 0), np.int64))
        n = x.size
        if n == 0:
            return self.empty((0, x.ndim), np.int64)
        flags = self.map("to_bool", [x], self.empty(x.shape, np.int64))
        cum = self._cumulative(Op.CUMSUM, flags.view(0, (n,), (1,)), axis=0, dtype=_I64)
        count = int(self._to_host(None, cum[n - 1]))
        out = self.empty((count, x.ndim), np.int64)
        if count:
            kern = self._b.kernel(self._k["index"].nonzero_write)
            self._launch(kern, self._b.grid(n), self._b.THREADS, cum.buf, out.buf, x.shape, n)
        return out

    def _searchsorted(self, op, seq, values, *, right, dtype=None):
        from ember.kernels.cuda import search
        seq = self._dense(seq)
        vals = self._dense(values)
        out = self.empty(values.shape, np.int64)
        m = out.size
        if m:
            kern = self._b.kernel(search.search)
            self._launch(kern, self._b.grid(m), self._b.THREADS, seq.buf, seq.size, vals.buf,
                         out.buf, m, bool(right))
        return out

    # --- layout ---------------------------------------------------------------
    def _reshape(self, op, x, *, shape):
        shape = tuple(shape)
        if not x.c_contiguous:
            x = self.copy(x)
        return x.view(x.offset, shape, _c_strides(shape))

    def _permute(self, op, x, *, dims):
        return x.view(x.offset, [x.shape[d] for d in dims], [x.strides[d] for d in dims])

    def _expand(self, op, x, *, shape):
        return self._broadcast(x, tuple(shape))

    def _slice(self, op, x, *, index):
        return x[index]

    def _flip(self, op, x, *, dims):
        offset, strides = x.offset, list(x.strides)
        for d in dims:
            if x.shape[d] > 1:
                offset += (x.shape[d] - 1) * strides[d]
                strides[d] = -strides[d]
        return x.view(offset, x.shape, strides)

    def _contiguous(self, op, x):
        return self._dense(x)

    def _slice_assign(self, op, x, values, *, index):
        out = self.copy(x)
        self.map("identity", [values], out[index])
        return out

    def _cat(self, op, *xs, axis, dtype):
        return cat_shape_and_fill(xs, axis, lambda shape: self.empty(shape, dtype.np),
                                  lambda x, view: self.map("identity", [x], view))

    # --- creation and transfer ------------------------------------------------
    def _full(self, op, *, shape, value, dtype):
        dt = dtype if isinstance(dtype, np.dtype) else dtype.np
        out = self.empty(shape, dt)
        n = out.size
        if n:
            kern = self._b.kernel(self._k["ew"].fill)
            self._launch(kern, self._b.grid(n), self._b.THREADS, out.buf, n, np.array(value, dt)[()])
        return out

    def _arange(self, op, *, start, stop, step, dtype):
        dt = dtype.np
        n = max(0, math.ceil((stop - start) / step))
        out = self.empty((n,), dt)
        if n:
            cast = float if dt.kind == "f" else int
            kern = self._b.kernel(self._k["ew"].arange)
            self._launch(kern, self._b.grid(n), self._b.THREADS, out.buf, n, cast(start), cast(step))
        return out

    def _from_host(self, op, array):
        a = np.asarray(array)
        a = np.ascontiguousarray(a) if a.ndim else a.copy()   # ascontiguousarray makes 0-d 1-d
        out = self.empty(a.shape, a.dtype)
        if a.size:
            out.buf[:a.size].copy_to_device(a.reshape(-1), stream=self.stream)
        return out

    def _to_host(self, op, x):
        x = self._dense(x)
        host = np.empty(x.shape, x.dtype)
        if host.size:
            x.buf[x.offset:x.offset + host.size].copy_to_host(host.reshape(-1), stream=self.stream)
            self.stream.synchronize()
        return host

    def _random(self, op, *, generator, kind, shape, dtype, **params):
        # drawn on the host by the same generator as the CPU: a seed gives the same values
        # on every device
        from . import get_backend
        host = get_backend("cpu")._random(op, generator=generator, kind=kind, shape=shape,
                                          dtype=dtype, **params)
        return self._from_host(op, host)

    # --- interop --------------------------------------------------------------------
    def device_array(self, x):
        """``x`` as a numba device array (zero-copy) for user ``@cuda.jit`` kernels."""
        if _SIMULATOR:
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


def from_cuda_array(obj):
    """(CudaArray, device index) sharing memory with a CUDA array ``obj`` (zero-copy).

    ``obj`` is a numba device array or anything with ``__cuda_array_interface__``.
    A contiguous array is shared; a strided one is copied.
    """
    from numba import cuda

    from ..device import Device
    if getattr(obj, "__cuda_ndarray__", False) or hasattr(obj, "copy_to_host"):
        arr = obj
    elif _SIMULATOR or not hasattr(obj, "__cuda_array_interface__"):
        raise TypeError(f"from_cuda_array: expected a CUDA array, got {type(obj).__name__}")
    else:
        arr = cuda.as_cuda_array(obj)
    index = 0
    if not _SIMULATOR and len(cuda.gpus) > 1:
        index = cuda.get_current_device().id
    backend = Device.cuda(index).backend
    dtype = np.dtype(arr.dtype)
    shape = tuple(arr.shape)
    contiguous = arr.is_c_contiguous() if hasattr(arr, "is_c_contiguous") else \
        arr.flags["C_CONTIGUOUS"]
    if contiguous:
        flat = arr.reshape(-1) if arr.size else arr
        return CudaArray(None, flat, 0, shape, _c_strides(shape), dtype, index), index
    host = arr.copy_to_host()
    return backend._from_host(None, host), index
