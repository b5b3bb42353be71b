"""Bit-level helpers for scalar ops: reinterpret integers as floats and back.

``math.ldexp``, ``math.frexp`` and ``2.0 ** k`` call the C library one element
at a time and stop LLVM from vectorising a loop; reading or writing an
exponent's bits directly is integer arithmetic and a bitcast, all of which
vectorise.
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


@intrinsic
def f64_to_bits(typingctx, x):
    """The IEEE-754 bits of the float64 ``x``, as an int64."""
    if x != types.float64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


@intrinsic
def f32_to_bits(typingctx, x):
    """The IEEE-754 bits of the float32 ``x``, as an int32."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.int32(types.float32), codegen
