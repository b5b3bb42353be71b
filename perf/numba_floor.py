"""The floor under a warm first call of anything Numba runs: ``import numba`` and one kernel
loaded from Numba's on-disk cache (its first load also builds Numba's CPU target), in a new
process.  The small suite times it beside Ember's warm first calls (the ``numba`` column)."""
import numba


@numba.njit(cache=True)
def add_one(x):
    return x + 1.0
