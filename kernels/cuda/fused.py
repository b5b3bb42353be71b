"""Fused elementwise chains on CUDA: the generated ``cuda_map`` as one ``@cuda.jit`` kernel.

The chain is the same generated function the CPU inlines, compiled here as a device
function whose scalar ops are ``builder.device_fn`` (the functions of
``kernels/scalar.py`` with this target's intrinsics): one definition, two targets.
"""
import functools

from numba import cuda

from .. import fused
from ..rebind import specialize
from .builder import device_fn


@functools.cache
def kernel(key):
    """The ``cuda.jit`` kernel of chain ``key``, built once per process."""
    mod = fused.load(key)
    name = fused.name(key)
    calls = {fn: device_fn(fn) for fn in fused.scalar_ops(key)}
    chain = cuda.jit(device=True)(specialize(mod.chain, name + "__chain", **calls))
    return cuda.jit(specialize(mod.cuda_map, name + "__cuda", CHAIN=chain, cuda=cuda))
