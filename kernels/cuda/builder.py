"""The CUDA builder: a loop skeleton plus a scalar op -> one cached ``@cuda.jit`` kernel.

It mirrors ``kernels/cpu/builder.py``.  A skeleton is a module-level function
that calls globals it does not define: ``OP`` (the scalar op, compiled as a
device function) and, for skeletons with shared memory, ``DT`` (the numba type
of the shared buffer).  ``kernel`` copies the skeleton with those globals bound
and a code object named after the op (``map2__add``), so each op is its own
kernel; Numba then compiles it once per argument signature and keeps it.

Scalar ops are the very functions the CPU compiles (no formula is written
twice).  Two names they use are rebound per target: the bit-cast intrinsics of
``kernels/bits.py`` are CPU-only ``@intrinsic``s, so on a GPU they become
libdevice's ``longlong_as_double`` / ``int_as_float`` / ``double_as_longlong`` /
``float_as_int`` and under the simulator (which runs kernels as Python) plain
numpy bit views.
"""
import functools
import math

import numpy as np
from numba import cuda

from .. import scalar
from ..rebind import globals_read, scalar_calls, specialize, variant  # noqa: F401 (variant: re-exported)

from numba import config

SIMULATOR = bool(config.ENABLE_CUDASIM)

# Threads per block.  The simulator runs every thread as a Python thread (a launch of 4 x 32
# threads took ~30 ms, 2 x 8 ~6 ms), so it gets tiny blocks and grids, still several of each
# (tree reductions, cross-block passes); a GPU gets full ones.
THREADS = 8 if SIMULATOR else 256
TILE = 4 if SIMULATOR else 16          # matmul tile edge (TILE * TILE threads)
MAX_BLOCKS = 2 if SIMULATOR else 65535  # grid-stride loops cover the rest


def _sim_f64_from_bits(bits):
    return np.array(bits, np.int64).view(np.float64)[()]


def _sim_f32_from_bits(bits):
    return np.array(bits, np.int32).view(np.float32)[()]


def _sim_f64_to_bits(x):
    return np.array(x, np.float64).view(np.int64)[()]


def _sim_f32_to_bits(x):
    return np.array(x, np.float32).view(np.int32)[()]


def _sim_fma(a, b, c):
    # in the widest operand type, as the CPU's fma; a float32 product is exact in float64, so
    # float32 operands round once (but for the rare double rounding of the sum), float64 ones
    # round the product too
    t = np.result_type(a, b, c).type
    return t(np.float64(a) * np.float64(b) + np.float64(c))


class _SimMath:
    """``math`` for scalar ops run by the simulator: results stay numpy scalars, so that
    ``1 / math.sqrt(0.0)`` is inf (as on a GPU) instead of Python's ZeroDivisionError."""

    def __getattr__(self, name):
        f = getattr(math, name)
        if not callable(f):
            return f

        def call(*args):
            try:
                r = f(*args)
            except ValueError:  # sin(inf), ...: NaN on a GPU
                return np.float64(math.nan)
            t = type(args[0]) if isinstance(args[0], np.floating) else np.float64
            return t(r) if isinstance(r, float) else r
        return call


class _SimCmath:
    """``cmath`` for scalar ops run by the simulator: numpy's complex functions, which keep
    complex64 values complex64 and give inf/NaN where Python's ``cmath`` raises (log(0),
    overflow), as a GPU does."""

    def __getattr__(self, name):
        f = getattr(np, name)

        def call(z):
            with np.errstate(all="ignore"):
                return f(z)
        return call


def _target_intrinsics():
    if SIMULATOR:
        return {"f64_from_bits": _sim_f64_from_bits, "f32_from_bits": _sim_f32_from_bits,
                "f64_to_bits": _sim_f64_to_bits, "f32_to_bits": _sim_f32_to_bits,
                "fma": _sim_fma, "math": _SimMath(), "cmath": _SimCmath()}
    from numba.cuda import libdevice
    return {"f64_from_bits": libdevice.longlong_as_double,
            "f32_from_bits": libdevice.int_as_float,
            "f64_to_bits": libdevice.double_as_longlong,
            "f32_to_bits": libdevice.float_as_int,
            "fma": cuda.fma}


@functools.cache
def device_fn(name):
    """``kernels.scalar.<name>`` compiled as a CUDA device function.

    Scalar ops it calls are bound to their device versions, the bit-cast
    intrinsics to this target's equivalents.
    """
    fn = getattr(scalar, name)
    read = globals_read(fn)
    bindings = {n: device_fn(n) for n in scalar_calls(fn)}
    bindings.update({k: v for k, v in _target_intrinsics().items() if k in read})
    fn = specialize(fn, "cuda__" + name, **bindings)
    if SIMULATOR and not name.endswith("_f32"):
        fn = _numba_float_typing(fn)
    return cuda.jit(device=True)(fn)


def _numba_float_typing(fn):
    """Under the simulator, run ``fn`` on float64 where it gets float32 arguments.

    Numba types a Python float constant as float64 (``x_f32 * 1.5`` is float64);
    NumPy 2 keeps float32.  Scalar ops written for float64 (``exp``) would lose
    precision in the simulator only; float64 arithmetic rounded back to float32 on
    store is what a compiled kernel computes.  (``*_f32`` twins stay float32.)
    """
    def run(*args):
        return fn(*[np.float64(a) if type(a) is np.float32 else a for a in args])
    run.__name__ = fn.__name__
    return run


@functools.cache
def kernel(template, op=None, dtype=None):
    """The kernel for (skeleton, scalar op name, shared-memory dtype), built once."""
    name = template.__name__ + (f"__{op}" if op else "") + (f"__{np.dtype(dtype).name}" if dtype else "")
    bindings = {}
    if op:
        bindings["OP"] = device_fn(op)
    if dtype is not None:
        bindings["DT"] = np.dtype(dtype).type  # a compile-time dtype for cuda.shared.array
    return cuda.jit(specialize(template, name, **bindings))


def grid(n, threads=THREADS):
    """Blocks for ``n`` work items (grid-stride loops take the rest)."""
    return max(1, min(MAX_BLOCKS, (n + threads - 1) // threads))
