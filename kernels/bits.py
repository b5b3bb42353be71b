"""Bit-level helper for scalar ops: reinterpret int64 bits as a float64.

``math.ldexp`` and ``2.0 ** k`` call the C library one element at a time and
stop LLVM from vectorising a loop; writing an exponent's bits directly is an
integer add, a shift and a bitcast, all of which vectorise.
"""
from llvmlite import ir
from numba import types
from numba.extending import intrinsic


@intrinsic
def f64_from_bits(typingctx, bits):
    """The float64 whose IEEE-754 bits are the int64 ``bits``."""
    if bits != types.int64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@intrinsic
def f32_from_bits(typingctx, bits):
    """The float32 whose IEEE-754 bits are the int32 ``bits``."""
    if bits != types.int32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen
