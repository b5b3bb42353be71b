"""Quantization schemes (DESIGN §5): value types, block sizes, storage kinds, and the
geometry of a tensor's scales."""
import enum
import functools
import math
import numbers
from dataclasses import dataclass
from typing import Optional

from .. import dtypes as dt


class QuantValue(enum.Enum):
    """The integer value types: bits and range ``[lo, hi]`` (S: symmetric, F: full range)."""

    Q8S = (8, -127, 127)
    Q8F = (8, -128, 127)
    Q4S = (4, -7, 7)
    Q4F = (4, -8, 7)
    Q2S = (2, -1, 1)
    Q2F = (2, -2, 1)

    def __init__(self, bits, lo, hi):
        self.bits = bits
        self.lo = lo
        self.hi = hi

    @property
    def half_range(self):
        """``(b - a) / 2``: ``scale = max|x| / half_range`` (exact in float32)."""
        return (self.hi - self.lo) / 2

    def __repr__(self):
        return f"QuantValue.{self.name}"


class QuantStore(enum.Enum):
    """How the integer values are stored: NATIVE (one int8 each) or PACKED_U32 (in uint32 words)."""

    NATIVE = "native"
    PACKED_U32 = "packed_u32"

    def __repr__(self):
        return f"QuantStore.{self.name}"


@dataclass(frozen=True)
class QuantScheme:
    """How to quantize: value type, block size and storage.

    ``block_size=None`` is one scale per tensor, ``[n]`` one scale per ``n`` values along the
    last dim, ``[m, n]`` one per ``m x n`` tile of the last two dims.  Values under 8 bits need
    ``store=QuantStore.PACKED_U32``.

    >>> s = ember.QuantScheme(ember.QuantValue.Q4S, [32], ember.QuantStore.PACKED_U32)
    >>> q = ember.random.normal((64, 64)).quantize(s)
    >>> q.quantization_scales().shape
    (64, 2)
    """

    value: QuantValue
    block_size: Optional[tuple] = None
    store: QuantStore = QuantStore.NATIVE

    def __post_init__(self):
        if not isinstance(self.value, QuantValue):
            raise ValueError(f"QuantScheme: value must be a QuantValue (Q8S, Q8F, Q4S, Q4F, Q2S, Q2F), "
                             f"got {self.value!r}")
        if not isinstance(self.store, QuantStore):
            raise ValueError(f"QuantScheme: store must be QuantStore.NATIVE or QuantStore.PACKED_U32, "
                             f"got {self.store!r}")
        block = self.block_size
        if block is not None:
            if isinstance(block, numbers.Integral) or not isinstance(block, (list, tuple)) \
                    or len(block) not in (1, 2) or not all(
                        isinstance(n, numbers.Integral) and not isinstance(n, bool) and n > 0 for n in block):
                raise ValueError(f"QuantScheme: block_size must be None, [n] or [m, n] with positive "
                                 f"ints, got {block!r}")
            object.__setattr__(self, "block_size", tuple(int(n) for n in block))
        if self.value.bits < 8 and self.store is not QuantStore.PACKED_U32:
            raise ValueError(f"QuantScheme: {self.value.name} has {self.value.bits}-bit values, which "
                             f"need store=QuantStore.PACKED_U32 (NATIVE keeps one int8 per value: "
                             f"8-bit values only)")

    @property
    def bits(self):
        """Bits per packed value, 0 for NATIVE (the kernels' ``bits`` argument)."""
        return self.value.bits if self.store is QuantStore.PACKED_U32 else 0

    def describe(self):
        blocks = "per-tensor" if self.block_size is None else f"block={list(self.block_size)}"
        return f"{self.value.name}, {blocks}, {self.store.name}"

    def __repr__(self):
        return (f"QuantScheme({self.value!r}, block_size="
                f"{None if self.block_size is None else list(self.block_size)}, store={self.store!r})")


@functools.cache
def qfloat(scheme):
    """The ``QFloat`` dtype of ``scheme`` (one instance per scheme)."""
    return dt.QFloat(scheme)


def extents(scheme, ndim):
    """Block extent along each of ``ndim`` dims (1 outside the blocked trailing dims)."""
    block = scheme.block_size or ()
    return (1,) * (ndim - len(block)) + block


def grid_shape(shape, scheme):
    """The shape of the scales of a tensor of ``shape``: () per tensor, else blocks per dim."""
    if scheme.block_size is None:
        return ()
    return tuple(-(-n // e) for n, e in zip(shape, extents(scheme, len(shape))))


def geometry(shape, scheme):
    """``(L, R, C, bm, bn)``: the 3-D view of ``shape`` the kernels work on, and its block.

    Blocks ``[m, n]`` see ``(prod(shape[:-2]), shape[-2], shape[-1])``; per tensor and ``[n]``
    see ``(1, prod(shape[:-1]), shape[-1])`` (per tensor: one block covering everything).
    """
    C = shape[-1] if shape else 1
    block = scheme.block_size
    if block is not None and len(block) == 2:
        return math.prod(shape[:-2]), shape[-2], C, block[0], block[1]
    R = math.prod(shape[:-1])
    if block is None:
        return 1, R, C, max(R, 1), max(C, 1)
    return 1, R, C, 1, block[0]


def grid3(shape, scheme):
    """The scales as the kernels see them: ``(L, GR, GC)`` over ``geometry``'s 3-D view."""
    if scheme.block_size is None:
        return (1, 1, 1)
    L, R, C, bm, bn = geometry(shape, scheme)
    return L, -(-R // bm), -(-C // bn)


def check_fits(name, shape, scheme):
    if scheme.block_size is not None and len(scheme.block_size) > len(shape):
        raise ValueError(f"{name}: block_size {list(scheme.block_size)} needs a tensor with at least "
                         f"{len(scheme.block_size)} dims, got shape {tuple(shape)}")


def fits(shape, scheme):
    return scheme.block_size is None or len(scheme.block_size) <= len(shape)
