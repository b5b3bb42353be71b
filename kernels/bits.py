"""Bit-level helpers for scalar ops: reinterpret integers as floats and back, and the
fused multiply-add.

``math.ldexp``, ``math.frexp`` and ``2.0 ** k`` call the C library one element
at a time and stop LLVM from vectorising a loop; reading or writing an
exponent's bits directly is integer arithmetic and a bitcast, all of which
vectorise.  These are the CPU's forms; the CUDA builder binds the same names to
its own (``kernels/cuda/builder.py``).
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


@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c`` rounded once (the hardware's fused multiply-add; ``cuda.fma`` on CUDA),
    in the widest of the three float types (as ``a * b + c`` would compute): a polynomial's
    Horner step in one instruction instead of two, which vectorised transcendental loops are
    bound by (float32 tanh: 74 -> 55 us per 131 072 values, and a little more accurate)."""
    if not all(isinstance(t, types.Float) for t in (a, b, c)):
        return None
    wide = max((a, b, c), key=lambda t: t.bitwidth)

    def codegen(context, builder, signature, args):
        ty = context.get_value_type(wide)
        args = [context.cast(builder, v, t, wide) for v, t in zip(args, signature.args)]
        f = builder.module.declare_intrinsic("llvm.fma", [ty], ir.FunctionType(ty, [ty] * 3))
        return builder.call(f, args)
    return wide(a, b, c), codegen
