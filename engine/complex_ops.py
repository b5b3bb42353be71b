"""Functions of complex tensors: ``ember.complex``, ``ember.polar``, ``ember.real``, ...

The methods live on ``Tensor`` (``z.real``, ``z.imag``, ``z.conj()``, ``z.angle()``,
``z.abs()``); these are the PyTorch-style functions next to them.
"""
import builtins

from . import dispatch
from .ir import Op


def complex(real, imag):  # noqa: A001  (torch.complex's name)
    """The complex tensor ``real + i * imag`` from two Float tensors (or scalars; broadcast):
    float32 parts give complex64, float64 parts complex128.

    >>> ember.complex(ember.tensor([1.0, 2.0]), ember.tensor([0.5, -1.0]))
    tensor([1.+0.5j, 2.-1.j ], dtype=complex64)
    """
    return dispatch.elementwise(Op.COMPLEX, real, imag)


def polar(abs, angle):  # noqa: A002  (torch.polar's argument names)
    """The complex tensor ``abs * (cos(angle) + i sin(angle))``.

    >>> ember.polar(ember.tensor([2.0]), ember.tensor([0.0]))
    tensor([2.+0.j], dtype=complex64)
    """
    return complex(abs * angle.cos(), abs * angle.sin())


def real(x):
    """The real part of ``x`` (``x`` itself when it is not complex)."""
    return x.real


def imag(x):
    """The imaginary part of ``x`` (zeros when it is not complex)."""
    return x.imag


def conj(x):
    """The complex conjugate of ``x``."""
    return x.conj()


def angle(x):
    """The argument of ``x`` in radians (a real tensor)."""
    return x.angle()


def is_complex(x):
    """True for a tensor of a complex dtype."""
    return builtins.bool(x.dtype.is_complex)
