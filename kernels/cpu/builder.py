"""The one builder: turns a loop template plus a scalar op into a cached ``@njit`` kernel.

A template is an ordinary module-level function that calls a global it does
not define (``OP`` for the scalar op).  ``build`` makes a copy of the template
whose globals bind ``OP`` to the njit-compiled scalar function and whose code
object carries a name of its own (``map2__add``).  Numba's disk cache keys a
kernel by that name, so every op gets its own cache entry and a new process
loads it instead of compiling: closures and "loop that takes the op as an
argument" designs never hit the cache, this form does.

Each kernel exists in two variants: ``serial`` (small inputs; no thread launch)
and ``parallel`` (``prange`` spread over Numba's threads).  The same template
serves both: ``prange`` is a plain ``range`` when compiled serially.
"""
import functools

import numba
from numba import types
from numba.extending import intrinsic

# (``import ember`` has set OMP_WAIT_POLICY=PASSIVE, so Numba's OpenMP workers sleep between
# parallel kernels: engine/threads.py says why it is set there)

from .. import scalar
from ..cache import KernelCache
from ..rebind import scalar_calls, specialize

JIT_OPTIONS = dict(error_model="numpy", nogil=True)


def _jit(fn, parallel):
    disp = numba.njit(parallel=parallel, **JIT_OPTIONS)(fn)
    try:
        disp._cache = KernelCache(fn)
    except Exception:  # unwritable cache directory: compile in memory only
        pass
    return disp


def cfunc(fn, sig):
    """``fn`` compiled as a C function of signature ``sig`` (``(args, return type)``: a Numba
    ``cfunc``, called through its ``address``), cached on disk like the kernels."""
    from numba.core.ccallback import CFunc
    cf = CFunc(fn, sig, locals={}, options=dict(JIT_OPTIONS))
    try:
        cf._cache = KernelCache(fn)
    except Exception:  # unwritable cache directory: compile in memory only
        pass
    cf.compile()
    return cf


@intrinsic
def prefer_wide_vectors(typingctx):
    """Lets LLVM vectorise the function that calls it with the widest registers there are.

    On AVX-512 machines LLVM's x86 tuning prefers 256-bit vectors (``prefer-256-bit``, for
    the clock drop of older Xeons), so loops over float32 ran 8 lanes wide; the function
    attribute ``"prefer-vector-width"="512"`` lifts that for one function (elsewhere it
    changes nothing).  A float32 tanh over 131 072 values: 98 -> 74 us, the same bits.
    The float32 twins of the scalar ops (``*_f32``: exp, tanh, erf, ... in float32
    arithmetic) call it (``scalar_op``): a loop one is inlined into gets it.  (Every scalar
    op calling it cost ~8 % more compile time for no gain on the memory-bound ones.)"""
    def codegen(context, builder, signature, args):
        # (llvmlite's attribute set checks names against a list without string attributes)
        set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        return context.get_dummy_value()
    return types.none(), codegen


# a compiled scalar op is its function called from one of these (by its arity), so that the
# loop it is inlined into prefers wide vectors
def _wide1(a):
    prefer_wide_vectors()
    return FN(a)


def _wide2(a, b):
    prefer_wide_vectors()
    return FN(a, b)


def _wide3(a, b, c):
    prefer_wide_vectors()
    return FN(a, b, c)


def _wide4(a, b, c, d):
    prefer_wide_vectors()
    return FN(a, b, c, d)


_WIDE = {1: _wide1, 2: _wide2, 3: _wide3, 4: _wide4}


@functools.cache
def scalar_op(name):
    """The njit-compiled scalar function ``kernels.scalar.<name>``.

    Scalar ops may call each other (``silu`` calls ``sigmoid``): those names are
    bound to their compiled versions.  The loop a float32 twin is inlined into prefers wide
    vectors (``prefer_wide_vectors``).
    """
    fn = getattr(scalar, name)
    calls = {n: scalar_op(n) for n in scalar_calls(fn)}
    # inlined into the loop at Numba level: LLVM alone leaves bigger ones as calls, which
    # stops SIMD and turns their selects into mispredicted branches (tanh: 15 ns -> 1 ns)
    inner = numba.njit(inline="always", **JIT_OPTIONS)(specialize(fn, name, **calls))
    if not name.endswith("_f32"):
        return inner
    wide = specialize(_WIDE[fn.__code__.co_argcount], name + "__wide", FN=inner)
    return numba.njit(inline="always", **JIT_OPTIONS)(wide)


class Kernel:
    """A template bound to one scalar op, compiled lazily as serial and parallel."""

    __slots__ = ("name", "_fn", "_serial", "_parallel")

    def __init__(self, template, op, mode=None, **helpers):
        self.name = f"{template.__name__}__{op}" + ("" if mode is None else f"__m{mode}")
        bindings = {"OP": scalar_op(op)} if op else {}
        if mode is not None:
            bindings["MODE"] = mode   # a constant: Numba prunes the branches of other modes
        bindings.update(helpers)   # other compiled functions the template calls by name
        self._fn = (specialize(template, self.name, **bindings),
                    specialize(template, self.name + "__par", **bindings))
        self._serial = self._parallel = None

    @property
    def serial(self):
        if self._serial is None:
            self._serial = _jit(self._fn[0], parallel=False)
        return self._serial

    @property
    def parallel(self):
        if self._parallel is None:
            self._parallel = _jit(self._fn[1], parallel=True)
        return self._parallel


@functools.cache
def kernel(template, op=None, mode=None, **helpers):
    """The kernel for (template, scalar op name, mode), built once per process; ``mode`` (an
    int) binds the template's ``MODE`` and is part of the kernel's name (its cache entry);
    ``helpers`` bind other global names the template calls (compiled functions)."""
    return Kernel(template, op, mode, **helpers)
