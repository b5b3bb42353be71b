"""``ember.fft``: discrete Fourier transforms with ``torch.fft``'s names and signatures.

``fft, ifft, fft2, ifft2, fftn, ifftn`` (complex to complex), ``rfft, irfft, rfft2, irfft2,
rfftn, irfftn`` (real to one-sided complex and back), ``hfft, ihfft`` (a Hermitian signal's
transform), ``fftfreq, rfftfreq, fftshift, ifftshift``.  ``n``/``s`` pad with zeros or
trim the input first (as numpy and PyTorch); ``norm`` is ``"backward"`` (the default: the
inverse scales by ``1/n``), ``"ortho"`` (both by ``1/sqrt(n)``) or ``"forward"``.

Every transform is one IR op (``Op.FFT``, ``Op.RFFT``, ``Op.IRFFT``) that the backends run
with a library (SciPy's pocketfft on the CPU, cuFFT on CUDA: docs/decisions.md "FFT");
padding, trimming, ``hfft``/``ihfft`` and the shifts are compositions of tensor ops.  All of
it is differentiable; the gradient of a transform is its adjoint, the inverse transform with
the dual norm (``autograd/rules.py``).

Inputs are Float or Complex tensors: a real input of a complex transform is cast to complex
(float32 -> complex64, float64 -> complex128) and the result has the input's precision.
Int and Bool tensors are refused (``TypeError``), as Ember's other float functions do.

>>> x = ember.tensor([1.0, 2.0, 0.0, -1.0])
>>> ember.fft.fft(x)
tensor([2.+0.j, 1.-3.j, 0.+0.j, 1.+3.j], dtype=complex64)
>>> ember.fft.irfft(ember.fft.rfft(x), n=4)
tensor([ 1.,  2.,  0., -1.], dtype=float32)
"""
import numbers

import numpy as np

from . import dispatch
from . import dtypes as dt
from .ir import Op
from .storage import TensorBase

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2",
           "rfftn", "irfftn", "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = ("backward", "ortho", "forward")
_DUAL = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


# --- complex to complex ---------------------------------------------------------------------
def fft(input, n=None, dim=-1, norm=None):
    """The 1-D discrete Fourier transform along ``dim``, ``n`` points (pad or trim)."""
    return _c2c("fft", input, _one(n), (dim,), norm, inverse=False)


def ifft(input, n=None, dim=-1, norm=None):
    """The 1-D inverse transform along ``dim`` (``"backward"``: scaled by ``1/n``)."""
    return _c2c("ifft", input, _one(n), (dim,), norm, inverse=True)


def fft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-D transform over ``dim`` (the last two dims by default)."""
    return _c2c("fft2", input, s, dim, norm, inverse=False)


def ifft2(input, s=None, dim=(-2, -1), norm=None):
    return _c2c("ifft2", input, s, dim, norm, inverse=True)


def fftn(input, s=None, dim=None, norm=None):
    """The N-D transform over ``dim`` (all dims, or the last ``len(s)`` with only ``s``)."""
    return _c2c("fftn", input, s, dim, norm, inverse=False)


def ifftn(input, s=None, dim=None, norm=None):
    return _c2c("ifftn", input, s, dim, norm, inverse=True)


# --- real to one-sided complex, and back -----------------------------------------------------
def rfft(input, n=None, dim=-1, norm=None):
    """The transform of a real signal along ``dim``: its ``n // 2 + 1`` non-negative frequencies."""
    return _r2c("rfft", input, _one(n), (dim,), norm)


def irfft(input, n=None, dim=-1, norm=None):
    """The real signal of ``n`` points (``2 * (m - 1)`` by default) whose ``rfft`` is ``input``
    (the imaginary parts of the zero and Nyquist frequencies are ignored)."""
    return _c2r("irfft", input, _one(n), (dim,), norm)


def rfft2(input, s=None, dim=(-2, -1), norm=None):
    return _r2c("rfft2", input, s, dim, norm)


def irfft2(input, s=None, dim=(-2, -1), norm=None):
    return _c2r("irfft2", input, s, dim, norm)


def rfftn(input, s=None, dim=None, norm=None):
    """The N-D transform of a real signal; the last of ``dim`` is one-sided."""
    return _r2c("rfftn", input, s, dim, norm)


def irfftn(input, s=None, dim=None, norm=None):
    """The inverse of ``rfftn``: ``s[-1]`` (``2 * (m - 1)`` by default) real points along the
    last of ``dim``."""
    return _c2r("irfftn", input, s, dim, norm)


# --- Hermitian signals ---------------------------------------------------------------------------
def hfft(input, n=None, dim=-1, norm=None):
    """The (real) transform of a signal with Hermitian symmetry, given by its first half:
    ``irfft`` of the conjugate with the dual norm (numpy's definition)."""
    norm = _norm("hfft", norm)
    return _c2r("hfft", _complex_input("hfft", input).conj(), _one(n), (dim,), _DUAL[norm])


def ihfft(input, n=None, dim=-1, norm=None):
    """The inverse of ``hfft``: the conjugate of ``rfft`` with the dual norm (one-sided)."""
    norm = _norm("ihfft", norm)
    return _r2c("ihfft", input, _one(n), (dim,), _DUAL[norm]).conj()


# --- helpers: frequencies and shifts -----------------------------------------------------------
def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of an ``n``-point transform, ``[0, 1, ..., -1] / (d * n)``."""
    _check_count("fftfreq", n)
    return _host(np.fft.fftfreq(n, d), dtype, device)


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    """The non-negative sample frequencies of ``rfft``: ``[0, 1, ..., n // 2] / (d * n)``."""
    _check_count("rfftfreq", n)
    return _host(np.fft.rfftfreq(n, d), dtype, device)


def fftshift(input, dim=None):
    """``input`` with the zero frequency moved to the centre of ``dim`` (all dims by default)."""
    return _shift("fftshift", input, dim, inverse=False)


def ifftshift(input, dim=None):
    """The inverse of ``fftshift``."""
    return _shift("ifftshift", input, dim, inverse=True)


# --- the work ----------------------------------------------------------------------------------
def _c2c(name, x, s, dim, norm, inverse):
    norm = _norm(name, norm)
    x = _complex_input(name, x)
    dims, sizes = _dims(name, x, s, dim)
    x = _resize(name, x, dims, sizes)
    return dispatch.apply(Op.FFT, x, dims=tuple(dims), inverse=inverse, norm=norm, dtype=x.dtype)


def _r2c(name, x, s, dim, norm):
    norm = _norm(name, norm)
    if not isinstance(x, TensorBase):
        raise TypeError(f"{name}: expected a tensor, got {type(x).__name__}")
    if x.dtype.kind is not dt.Float:
        hint = ""
        if x.dtype.kind is dt.Complex and name.startswith("r"):
            hint = f"; use {name[1:]} for complex input"
        raise TypeError(f"{name}: expected a real Float tensor, got {x.dtype.kind.name} "
                        f"({x.dtype.name}){hint}")
    dims, sizes = _dims(name, x, s, dim)
    x = _resize(name, x, dims, sizes)
    return dispatch.apply(Op.RFFT, x, dims=tuple(dims), norm=norm, dtype=dt.complex_of(x.dtype))


def _c2r(name, x, s, dim, norm):
    norm = _norm(name, norm)
    x = _complex_input(name, x)
    dims, sizes = _dims(name, x, s, dim)
    last = sizes[-1] if sizes is not None else None
    if last is None:
        last = 2 * (x.shape[dims[-1]] - 1)
    if last < 1:
        raise ValueError(f"{name}: invalid number of data points ({last}) along dim {dims[-1]}; "
                         "give n (or s) of at least 1")
    # the input's extents: s for the other dims, last // 2 + 1 one-sided values along the last
    extents = [x.shape[d] for d in dims[:-1]] if sizes is None else list(sizes[:-1])
    extents.append(last // 2 + 1)
    x = _resize(name, x, dims, extents)
    return dispatch.apply(Op.IRFFT, x, dims=tuple(dims), n=last, norm=norm,
                          dtype=dt.real_of(x.dtype))


def _norm(name, norm):
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ValueError(f"{name}: norm must be 'backward', 'ortho' or 'forward', got {norm!r}")
    return norm


def _complex_input(name, x):
    if not isinstance(x, TensorBase):
        raise TypeError(f"{name}: expected a tensor, got {type(x).__name__}")
    kind = x.dtype.kind
    if kind is dt.Complex:
        return x
    if kind is dt.Float:
        return x.cast(dt.complex_of(x.dtype))
    raise TypeError(f"{name}: expected a Float or Complex tensor, got {kind.name} ({x.dtype.name})")


def _one(n):
    return None if n is None else (n,)


def _dims(name, x, s, dim):
    """(the transformed dims in the caller's order, the requested sizes or None).  The sizes,
    or without them the input's extents along the dims, must be at least 1."""
    if s is not None:
        s = [s] if isinstance(s, numbers.Integral) else list(s)
        for n in s:
            if not isinstance(n, numbers.Integral) or isinstance(n, bool):
                raise TypeError(f"{name}: sizes must be ints, got {s!r}")
    if x.ndim == 0:
        raise ValueError(f"{name}: expected a tensor with at least one dim, got a 0-d tensor")
    if dim is None:
        dims = list(range(x.ndim)) if s is None else list(range(x.ndim - len(s), x.ndim))
    else:
        dims = [dim] if isinstance(dim, numbers.Integral) else list(dim)
    if not dims:
        raise ValueError(f"{name}: expected at least one dim to transform")
    dims = [dispatch.normalize_dim(name, d, x.ndim) for d in dims]
    if len(set(dims)) != len(dims):
        raise ValueError(f"{name}: dims must be distinct, got {dim!r}")
    if s is not None:
        if len(s) != len(dims):
            raise ValueError(f"{name}: s has {len(s)} sizes for {len(dims)} dims")
        s = [x.shape[d] if n == -1 else int(n) for d, n in zip(dims, s)]
    for d, n in zip(dims, s if s is not None else [x.shape[d] for d in dims]):
        if n < 1:
            raise ValueError(f"{name}: invalid number of data points ({n}) along dim {d}")
    return dims, s


def _resize(name, x, dims, sizes):
    """``x`` trimmed or zero-padded at the end of each of ``dims`` to ``sizes`` (tensor ops)."""
    if sizes is None:
        return x
    shape = list(x.shape)
    trim = [slice(None)] * x.ndim
    trimmed = False
    for d, n in zip(dims, sizes):
        if n < shape[d]:
            trim[d] = slice(0, n)
            trimmed = True
    if trimmed:
        x = x[tuple(trim)]
    if all(n <= x.shape[d] for d, n in zip(dims, sizes)):
        return x
    padded = list(x.shape)
    for d, n in zip(dims, sizes):
        padded[d] = max(n, padded[d])
    from .creation import zeros
    base = zeros(tuple(padded), dtype=x.dtype, device=x.device)
    return base.slice_assign(tuple(slice(0, n) for n in x.shape), x)


def _check_count(name, n):
    if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 0:
        raise ValueError(f"{name}: n must be a non-negative int, got {n!r}")


def _host(values, dtype, device):
    from .creation import tensor
    return tensor(values, dtype=dtype or dt.DEFAULT_FLOAT, device=device)


def _shift(name, x, dim, inverse):
    if not isinstance(x, TensorBase):
        raise TypeError(f"{name}: expected a tensor, got {type(x).__name__}")
    dims = dispatch.normalize_dims(name, dim, x.ndim)
    from .creation import cat
    for d in dims:
        n = x.shape[d]
        k = (n - n // 2) if inverse else n // 2   # roll by n // 2 (fftshift) or back
        if n < 2 or k % n == 0:
            continue
        x = cat([x.narrow(d, n - k, k), x.narrow(d, 0, n - k)], d)
    return x


# --- gradients (autograd/rules.py reads these) ------------------------------------------------
def dual(norm):
    """The norm of a transform's adjoint: the inverse transform with the other scaling."""
    return _DUAL[norm]


def one_sided_weights(n, dim, ndim, dtype, device):
    """Along ``dim`` of ``ndim`` dims, the ``n // 2 + 1`` weights of an ``n``-point real signal's
    one-sided spectrum: 1 at frequency 0 (and n/2 for even n), 2 at the others, whose
    conjugates the full spectrum also holds."""
    m = n // 2 + 1
    w = np.full(m, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    shape = [1] * ndim
    shape[dim] = m
    from .creation import tensor
    return tensor(w.reshape(shape), dtype=dtype, device=device)
