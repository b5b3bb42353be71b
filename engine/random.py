"""Seeded random tensors: ``ember.random.seed(0)`` makes every draw reproducible."""
import numpy as np

from . import layout
from . import dtypes as dt
from .device import parse as parse_device
from .ir import Op
from .tensor import wrap

_generator = np.random.default_rng()


def seed(value):
    """Reset Ember's random generator (PCG64) to ``value``."""
    global _generator
    _generator = np.random.default_rng(value)


def _draw(kind, shape, dtype, device, **params):
    shape = layout.creation_shape(kind, (shape,) if isinstance(shape, int) else shape)
    d = dt.as_dtype(dtype)
    device = parse_device(device)
    data = device.backend.execute(Op.RANDOM, generator=_generator, kind=kind, shape=shape,
                                  dtype=d, **params)
    return wrap(data, device, d)


def uniform(shape, low=0.0, high=1.0, dtype=dt.float32, device=None):
    """Uniform samples in ``[low, high)``."""
    if not high >= low:
        raise ValueError(f"uniform: high ({high}) must be >= low ({low})")
    return _draw("uniform", shape, dtype, device, low=low, high=high)


def normal(shape, mean=0.0, std=1.0, dtype=dt.float32, device=None):
    if std < 0:
        raise ValueError(f"normal: std must be non-negative, got {std}")
    return _draw("normal", shape, dtype, device, mean=mean, std=std)


def randint(low, high, shape, dtype=dt.int64, device=None):
    """Integers in ``[low, high)``."""
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be > low ({low})")
    return _draw("randint", shape, dtype, device, low=low, high=high)


def bernoulli(p, shape, dtype=dt.bool_, device=None):
    """True with probability ``p``."""
    if not 0 <= p <= 1:
        raise ValueError(f"bernoulli: p must lie in [0, 1], got {p}")
    return _draw("bernoulli", shape, dtype, device, p=p)


def rand(*shape, dtype=dt.float32, device=None):
    return uniform(layout.normalize_shape("rand", shape), dtype=dtype, device=device)


def randn(*shape, dtype=dt.float32, device=None):
    return normal(layout.normalize_shape("randn", shape), dtype=dtype, device=device)
