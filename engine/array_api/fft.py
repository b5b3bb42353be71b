"""The array API standard's ``fft`` extension (2024.12) over ``ember.fft``.

The standard's signatures (``n=``/``s=``, ``axis=``/``axes=``, ``norm="backward"``) call
``ember.fft``'s torch-like functions: the same IR ops (pocketfft on the CPU, cuFFT on CUDA),
differentiable.  The complex transforms (``fft``, ``ifft``, ``fftn``, ``ifftn``, ``hfft``) take
complex arrays, and real floating ones as complex numbers of their precision; ``rfft``,
``rfftn`` and ``ihfft`` take real floating arrays.  ``fftfreq``/``rfftfreq`` default to the
default real floating dtype.
"""
from .. import fft as _fft
from ._dtypes import _check_array, as_dtype

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
           "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def _one_axis(name, fn):
    def transform(x, /, *, n=None, axis=-1, norm="backward"):
        _check_array(f"fft.{name}", x)
        return fn(x, n=n, dim=axis, norm=norm)
    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = f"``ember.fft.{name}`` along ``axis`` with ``n`` points (pad or trim)."
    return transform


def _many_axes(name, fn):
    def transform(x, /, *, s=None, axes=None, norm="backward"):
        _check_array(f"fft.{name}", x)
        return fn(x, s=s, dim=axes, norm=norm)
    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = (f"``ember.fft.{name}`` over ``axes`` (all axes, or the last ``len(s)``) "
                         f"with ``s`` points along them.")
    return transform


fft = _one_axis("fft", _fft.fft)
ifft = _one_axis("ifft", _fft.ifft)
rfft = _one_axis("rfft", _fft.rfft)
irfft = _one_axis("irfft", _fft.irfft)
hfft = _one_axis("hfft", _fft.hfft)
ihfft = _one_axis("ihfft", _fft.ihfft)
fftn = _many_axes("fftn", _fft.fftn)
ifftn = _many_axes("ifftn", _fft.ifftn)
rfftn = _many_axes("rfftn", _fft.rfftn)
irfftn = _many_axes("irfftn", _fft.irfftn)


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The sample frequencies of an ``n``-point transform."""
    return _fft.fftfreq(n, d, dtype=None if dtype is None else as_dtype(dtype, "fft.fftfreq"),
                        device=device)


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The non-negative sample frequencies of an ``n``-point ``rfft``."""
    return _fft.rfftfreq(n, d, dtype=None if dtype is None else as_dtype(dtype, "fft.rfftfreq"),
                         device=device)


def fftshift(x, /, *, axes=None):
    _check_array("fft.fftshift", x)
    return _fft.fftshift(x, dim=axes)


def ifftshift(x, /, *, axes=None):
    _check_array("fft.ifftshift", x)
    return _fft.ifftshift(x, dim=axes)
