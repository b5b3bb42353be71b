"""Thread settings the process needs before any library loads an OpenMP runtime.

Numba's OpenMP workers spin while idle.  Next to numpy's or SciPy's BLAS threads, or on a busy
machine, spinning workers steal the cores the other side needs (an ember op alternating with a
numpy matmul went from 0.2 ms to 40 ms); sleeping workers cost a few microseconds per parallel
launch instead (docs/decisions.md, "Threads").  An OpenMP runtime reads ``OMP_WAIT_POLICY`` when
it is loaded, so ``import ember`` sets it, first thing: set when the first kernel was built, it
came too late for a libgomp that PyTorch had loaded in between, which Numba's pool then ran on,
spinning (the GP value + gradient took 96-125 ms against 76-79 ms).  A user's own setting wins.
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
