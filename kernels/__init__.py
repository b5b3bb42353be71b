"""Numba kernels of Ember: scalar op definitions and the loops built from them.

Nothing here knows about tensors. ``kernels.scalar`` holds every elementwise
formula once; ``kernels.cpu`` turns them into ``@njit`` loops.  Numba itself is
imported only when the first kernel is built, so ``import ember`` stays fast.
"""
