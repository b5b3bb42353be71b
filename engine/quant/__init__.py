"""Quantized tensors (DESIGN §5): schemes, their storage, and what ops do with them.

A quantized tensor is an ordinary ``Tensor`` whose dtype is a ``QFloat`` (kind Float,
carrying its ``QuantScheme``) and whose storage is a ``QuantData``: integer values and
float32 scales.  Symmetric quantization with the value range ``[a, b]``::

    scale = 2 * max(|min|, |max|) / (b - a)        (per tensor, or per block)
    q     = clamp(round_half_away_from_zero(x / scale), a, b)
    x_hat = scale * q                               (float32)

A zero range gets the scale FLT_MIN (1.1754944e-38, the smallest normal float32), so every
``q`` is 0 and nothing is divided by zero.

Storage.  NATIVE keeps one int8 per value, in the tensor's shape.  PACKED_U32 packs
``32 // bits`` values per uint32 word along the innermost dim, the first value in the lowest
bits (two's complement fields), each row padded to whole words with zero bits: the values
array has shape ``shape[:-1] + (ceil(shape[-1] / (32 // bits)),)`` (a 0-d tensor: one word).
Scales have shape ``()`` per tensor, else one per block: ``block_size=[n]`` gives
``shape[:-1] + (ceil(C / n),)``, ``[m, n]`` gives ``shape[:-2] + (ceil(R / m), ceil(C / n))``
(partial blocks at the ends have their own scale).

Ops (dispatch gives every op with a quantized input one detour, ``_apply_quantized``):

- movement (reshape, permute, expand, slicing, flip, contiguous, index_select, gather, cat)
  moves the integer values and keeps the scale, or moves the scales along when whole blocks
  move with the values (``x.T`` of blocks ``[16]`` is blocks ``[16, 1]``: the scheme follows
  the blocks).  Otherwise (blocks split or mixed, ``cat`` of tensors with different
  per-tensor scales) the values are dequantized, moved and re-quantized with the same scheme,
  which changes them; a result too small for the scheme's blocks stays float.
- matmul with a quantized operand on either side runs the quantized matmul kernels, which
  dequantize tiles of it as they go (never the whole matrix).
- every other op dequantizes, computes in float and returns float; with
  ``set_quant_propagation("propagate")`` Float results are re-quantized with the (first)
  quantized input's scheme.  Casts (also the ones numpy promotion inserts when a quantized
  tensor meets a float tensor) always give float.

Modules by job: ``scheme`` (value types, blocks, the scales' geometry), ``storage``
(``QuantData``, quantize, dequantize, pack, unpack), ``moves`` (layout ops on quantized
storage), ``matmul`` (the quantized matmul).  Every computation is an IR op that the device's
backend executes (``QUANTIZE``, ``DEQUANTIZE``, ``QMATMUL``, ...).

Autodiff: quantized tensors never take part in a graph (``quantize`` detaches, results of
movement have no node); a float op output of a tracked input records as usual, keeping the
quantized operand itself (not a dequantized copy) when backward needs it.
"""
from .matmul import matmul
from .moves import MOVES, move
from .scheme import (QuantScheme, QuantStore, QuantValue, extents, geometry, grid3, grid_shape,
                     qfloat)
from .storage import (QuantData, as_float, clone, dequantize, nbytes, quantize, requantize,
                      scales_of, to_device, values_of)

# what the rest of the engine uses (dispatch's quantized detour, Tensor's methods)
__all__ = ["QuantScheme", "QuantStore", "QuantValue", "QuantData", "qfloat", "extents", "geometry",
           "grid3", "grid_shape", "quantize", "dequantize", "as_float", "requantize", "move",
           "MOVES", "matmul", "clone", "to_device", "nbytes", "scales_of", "values_of",
           "set_quant_propagation", "get_quant_propagation", "propagating"]

_PROPAGATE = False


def set_quant_propagation(mode):
    """What math ops on quantized tensors return: ``"dequantize"`` (float, the default) or
    ``"propagate"`` (re-quantized with the input's scheme)."""
    global _PROPAGATE
    if mode not in ("dequantize", "propagate"):
        raise ValueError(f"set_quant_propagation: mode must be 'dequantize' or 'propagate', got {mode!r}")
    _PROPAGATE = mode == "propagate"


def get_quant_propagation():
    """``"dequantize"`` or ``"propagate"`` (see ``set_quant_propagation``)."""
    return "propagate" if _PROPAGATE else "dequantize"


def propagating():
    """True under ``set_quant_propagation("propagate")``."""
    return _PROPAGATE
