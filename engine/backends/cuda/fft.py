"""CUDA discrete Fourier transforms (IR ops FFT, RFFT, IRFFT): cuFFT, zero-copy on device buffers.

Every transform is planned here, the same way on a GPU and under the simulator: the
transformed dims are moved last and made dense (a view where they already are), a batch of
``rank <= 3`` transforms (cuFFT's limit; more dims take several stages, since a
multi-dimensional DFT is separable) runs from that buffer into a new one, the result is
scaled for ``norm`` by an elementwise kernel and the dims are moved back (a view).  Only the
vendor call differs (``_execute``):

- a GPU: cuFFT through nvmath-python's low-level bindings (``nvmath.bindings.cufft``, the
  optional extra ``ember[cuda]``), with the device pointers of the buffers and the backend's
  stream; plans are cached by their layout, as PyTorch's cuFFT plan cache does;
- the simulator (or a GPU without nvmath-python, with a warning): a host stand-in copies the
  input to the host, runs numpy's unnormalised transform of the same layout and copies the
  result back, so the planning above is what the simulator tests.

cuFFT's C2R transform overwrites its input: its stage always reads a copy.
"""
import math
import warnings

import numpy as np

from . import elementwise as ew
from .array import SIMULATOR, _stream_handle

MAX_RANK = 3   # cuFFT's plans transform at most three dims


def fft(b, x, dims, inverse, norm):
    """The complex transform of ``x`` over ``dims`` (sorted, distinct) on backend ``b``."""
    n = math.prod(x.shape[d] for d in dims)
    out = x
    for group in _groups(dims):
        out = _stage(b, out, group, "c2c", inverse=inverse)
    return _scale(b, out, _factor(n, inverse, norm))


def rfft(b, x, dims, norm):
    """The transform of real ``x``; the last of ``dims`` comes out as ``n // 2 + 1`` values."""
    n = math.prod(x.shape[d] for d in dims)
    groups = _groups(dims)
    out = _stage(b, x, groups[-1], "r2c")
    for group in groups[:-1]:
        out = _stage(b, out, group, "c2c", inverse=False)
    return _scale(b, out, _factor(n, False, norm))


def irfft(b, x, dims, last, norm):
    """The real inverse of one-sided ``x`` (``last // 2 + 1`` values along ``dims[-1]``),
    ``last`` values long along ``dims[-1]``."""
    n = math.prod(x.shape[d] for d in dims[:-1]) * last
    groups = _groups(dims)
    out = x
    for group in groups[:-1]:
        out = _stage(b, out, group, "c2c", inverse=True)
    out = _stage(b, out, groups[-1], "c2r", last=last)
    return _scale(b, out, _factor(n, True, norm))


def _permuted(x, dims):
    return x.view(x.offset, [x.shape[d] for d in dims], [x.strides[d] for d in dims])


def _groups(dims):
    """``dims`` cut into runs of at most MAX_RANK, the last run holding the last dim."""
    dims = list(dims)
    first = len(dims) % MAX_RANK or MAX_RANK
    out = [dims[:first]] + [dims[i:i + MAX_RANK] for i in range(first, len(dims), MAX_RANK)]
    return [g for g in out if g]


def _factor(n, inverse, norm):
    """The scale of an ``n``-point transform under ``norm`` (cuFFT computes unscaled sums)."""
    if norm == "ortho":
        return 1.0 / math.sqrt(n) if n else 1.0
    if (norm == "backward") == inverse:   # backward's inverse and forward's forward
        return 1.0 / n if n else 1.0
    return 1.0


def _scale(b, out, factor):
    if factor != 1.0 and out.size:
        real = np.dtype(out.dtype.char.lower()) if out.dtype.kind == "c" else out.dtype
        c = ew.full(b, (), factor, real)
        ew.map(b, "mul", [out, c], out)
    return out


def _stage(b, x, group, kind, inverse=False, last=None):
    """One cuFFT plan's worth: transform ``x`` over ``group`` (at most MAX_RANK dims)."""
    others = [d for d in range(x.ndim) if d not in group]
    perm = others + list(group)
    y = _permuted(x, perm)
    if kind == "c2r":
        y = ew.copy(b, y)                      # cuFFT's C2R writes over its input
    else:
        y = ew.dense(b, y)
    batch = math.prod(y.shape[:len(others)])
    sizes = list(y.shape[len(others):])    # the input's transformed extents
    if kind == "r2c":
        real_n = sizes
        out_sizes = sizes[:-1] + [sizes[-1] // 2 + 1]
        out_dtype = np.dtype(np.complex64 if y.dtype == np.float32 else np.complex128)
    elif kind == "c2r":
        real_n = sizes[:-1] + [last]
        out_sizes = real_n
        out_dtype = np.dtype(np.float32 if y.dtype == np.complex64 else np.float64)
    else:
        real_n = out_sizes = sizes
        out_dtype = y.dtype
    out = b.empty(tuple(y.shape[:len(others)]) + tuple(out_sizes), out_dtype)
    if out.size and y.size:
        _execute(b, kind, inverse, real_n, sizes, out_sizes, batch, y, out)
    back = [perm.index(d) for d in range(x.ndim)]
    return _permuted(out, back)


# --- the vendor call ----------------------------------------------------------------------
_PLANS = {}
_WARNED = []


def _cufft():
    """``nvmath.bindings.cufft``, or None under the simulator or without nvmath-python."""
    if SIMULATOR:
        return None
    try:
        from nvmath.bindings import cufft
    except ImportError:
        if not _WARNED:
            _WARNED.append(True)
            warnings.warn("ember.fft on CUDA runs through the host without nvmath-python; "
                          "install ember[cuda] for cuFFT", RuntimeWarning, stacklevel=4)
        return None
    return cufft


def _execute(b, kind, inverse, n, in_sizes, out_sizes, batch, x, out):
    """``batch`` unscaled transforms of shape ``n`` from dense ``x`` into dense ``out``."""
    cufft = _cufft()
    if cufft is None:
        _host_stand_in(b, kind, inverse, n, batch, x, out)
        return
    single = x.dtype in (np.float32, np.complex64)
    T = cufft.Type
    ctype = {"c2c": T.C2C if single else T.Z2Z, "r2c": T.R2C if single else T.D2Z,
             "c2r": T.C2R if single else T.Z2D}[kind]
    stream = _stream(b)
    key = (b.index, int(ctype), tuple(n), batch, stream)
    plan = _PLANS.get(key)
    if plan is None:
        plan = cufft.create()
        cufft.make_plan_many(plan, len(n), list(n), list(in_sizes), 1, math.prod(in_sizes),
                             list(out_sizes), 1, math.prod(out_sizes), ctype, batch)
        cufft.set_stream(plan, stream)
        _PLANS[key] = plan
    src = x.__cuda_array_interface__["data"][0]
    dst = out.__cuda_array_interface__["data"][0]
    if kind == "c2c":
        run = cufft.exec_c2c if single else cufft.exec_z2z
        run(plan, src, dst, 1 if inverse else -1)   # CUFFT_INVERSE / CUFFT_FORWARD
    elif kind == "r2c":
        (cufft.exec_r2c if single else cufft.exec_d2z)(plan, src, dst)
    else:
        (cufft.exec_c2r if single else cufft.exec_z2d)(plan, src, dst)


def _stream(b):
    return _stream_handle(b.stream) or 0   # (0: the default stream)


def _host_stand_in(b, kind, inverse, n, batch, x, out):
    """The simulator's cuFFT: the same unscaled batched transform with numpy, on the host."""
    rank = len(n)
    axes = tuple(range(1, rank + 1))
    host = b.to_host(x).reshape((batch,) + x.shape[x.ndim - rank:])
    if kind == "c2c":
        # numpy's "forward" norm leaves the inverse unscaled, as cuFFT does
        r = (np.fft.ifftn(host, axes=axes, norm="forward") if inverse
             else np.fft.fftn(host, axes=axes, norm="backward"))
    elif kind == "r2c":
        r = np.fft.rfftn(host, axes=axes, norm="backward")
    else:
        r = np.fft.irfftn(host, s=n, axes=axes, norm="forward")
    r = np.ascontiguousarray(r, dtype=out.dtype).reshape(-1)
    out.buf[:r.size].copy_to_device(r, stream=b.stream)
