"""CUDA kernels: the scalar ops of ``ember.kernels.scalar`` compiled as device functions
inside a few loop skeletons (``builder`` binds them).  Importing this package imports
``numba.cuda``; ``ember`` imports it only when a CUDA device is first used."""
