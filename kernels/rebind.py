"""Re-binding functions to new globals: how one definition becomes a kernel per op and target.

Both builders (``kernels/cpu/builder.py``, ``kernels/cuda/builder.py``) copy a
module-level template with some of its globals bound (``OP`` to a compiled
scalar op) under a code-object name of its own, which is also what lets
Numba's disk cache tell the kernels apart.
"""
import dis
import types

import numpy as np

from . import scalar


def specialize(template, name, **bindings):
    """A copy of ``template`` named ``name`` whose free globals are ``bindings``."""
    code = template.__code__.replace(co_name=name, co_qualname=name)
    env = dict(template.__globals__)
    env.update(bindings)
    return types.FunctionType(code, env, name, template.__defaults__)


def globals_read(fn):
    """The global names ``fn`` reads."""
    return {i.argval for i in dis.get_instructions(fn) if i.opname == "LOAD_GLOBAL"}


def scalar_calls(fn):
    """The scalar ops (functions of ``kernels.scalar``) that ``fn`` calls."""
    return [n for n in globals_read(fn) if isinstance(getattr(scalar, n, None), types.FunctionType)]


def variant(op, dtype):
    """``op``, its float32 twin (``exp_f32``: computes in float32, vectorises wider), its
    complex form (``exp_c``) or its integer twin (``floordiv_int``: integer semantics that
    differ from the float ones) for results of ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype == np.float32 and hasattr(scalar, op + "_f32"):
        return op + "_f32"
    if dtype.kind == "c" and hasattr(scalar, op + "_c"):
        return op + "_c"
    if dtype.kind in "iu" and hasattr(scalar, op + "_int"):
        return op + "_int"
    return op
