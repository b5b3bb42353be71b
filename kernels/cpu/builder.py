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


@functools.cache
def scalar_op(name):
    """The njit-compiled scalar function ``kernels.scalar.<name>``.

    Scalar ops may call each other (``silu`` calls ``sigmoid``): those names are
    bound to their compiled versions.
    """
    fn = getattr(scalar, name)
    calls = {n: scalar_op(n) for n in scalar_calls(fn)}
    # inlined into the loop at Numba level: LLVM alone leaves bigger ones as calls, which
    # stops SIMD and turns their selects into mispredicted branches (tanh: 15 ns -> 1 ns)
    return numba.njit(inline="always", **JIT_OPTIONS)(specialize(fn, name, **calls))


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
