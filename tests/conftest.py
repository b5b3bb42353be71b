"""Fixtures shared by the Tensor API tests (helpers live in checks.py)."""
import os

import numpy as np
import pytest

# scikit-learn's array API dispatch (tests/test_sklearn.py) needs SciPy's array API support,
# which SciPy reads when it is first imported: set it before any test module imports SciPy
os.environ.setdefault("SCIPY_ARRAY_API", "1")

# Numba's CUDA simulator runs a block's threads as Python threads, polled by the launching
# thread in a busy loop: with the interpreter's default 5 ms switch interval a block with a
# syncthreads() took ~0.2 s (a sum); at 0.1 ms the tests of the CUDA softmax and gradients took
# 6.5 s instead of 48 (1 ms: 9.9 s; 0.02 ms: slower again; with the 2 x 8 threads of
# kernels/cuda/builder.py)
#
# The simulator gives a block's threads one shared array per call site by a look-up and an
# insert that no lock guards (numba-cuda 0.30, FakeCUDAShared.array): a thread switched out
# between the two makes an array of its own, and the block's reduction reads garbage (an
# argmin of 5 values gave index 13, once in ~1750 tests at this interval).  The same look-up
# runs here under a lock.
if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    import sys
    import threading
    import traceback

    from numba.core import types
    from numba.cuda.simulator import kernelapi
    from numba.np import numpy_support

    sys.setswitchinterval(1e-4)
    _simulator_shared_array = kernelapi.FakeCUDAShared.array
    _shared_lock = threading.Lock()

    def _shared_array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:   # dynamic shared memory: no look-up
            return _simulator_shared_array(self, shape, dtype, alignment)
        site = tuple(traceback.extract_stack(sys._getframe(1), limit=1)[0][0:2])
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        with _shared_lock:
            array = self._allocations.get(site)
            if array is None:
                array = self._allocations[site] = np.empty(shape, dtype)
        return array

    kernelapi.FakeCUDAShared.array = _shared_array


# EMBER_COMPILE_LOG=<dir>: log every Numba compile of the session (tests/compile_log.py)
if os.environ.get("EMBER_COMPILE_LOG"):
    import compile_log
    compile_log.install(os.environ["EMBER_COMPILE_LOG"])

    def pytest_runtest_logstart(nodeid, location):
        compile_log.set_test(nodeid)


@pytest.fixture
def cuda_available():
    """True when Numba sees a CUDA GPU or runs its CUDA simulator (then Device.cuda() works)."""
    try:
        from numba import config, cuda
        return bool(config.ENABLE_CUDASIM) or cuda.is_available()
    except Exception:  # noqa: BLE001 - a broken CUDA installation counts as none
        return False


@pytest.fixture
def hot_chains(monkeypatch):
    """Every fused chain compiles at its first force, whatever its size (``fusion.HOT_RUNS``
    = 1) and length (``SHORT_CHAIN`` = 0: short chains of tiny tensors fuse too), and ops on
    tiny tensors defer as in a traced step (``MIN_SIZE`` = ``TRACED_MIN_SIZE``: eagerly they
    run at once): for tests of the fused kernels themselves."""
    from ember import fusion
    monkeypatch.setattr(fusion, "HOT_RUNS", 1)
    monkeypatch.setattr(fusion, "SHORT_CHAIN", 0)
    monkeypatch.setattr(fusion, "MIN_SIZE", fusion.TRACED_MIN_SIZE)


@pytest.fixture
def unfused():
    """Fusion off: the test's ops run one kernel each.  For gradient rows and finite
    differences, which force the same chains again and again (hot after ``fusion.HOT_RUNS``
    forces) and would each compile fused kernels of their own (most of a cold run's time);
    fusion's equivalence is checked by subsets that compare fused and unfused results."""
    from ember import fusion
    previous = fusion.set_enabled(False)
    yield
    fusion.set_enabled(previous)


@pytest.fixture
def rng():
    """A freshly seeded generator per test: inputs are reproducible."""
    return np.random.default_rng(1234)


# --- the fuzz tier's report: the seed, the scale and the examples tried per area, summed over
# pytest-xdist's workers (each sends its counts to the controller when it finishes)
def pytest_sessionfinish(session):
    output = getattr(session.config, "workeroutput", None)
    if output is not None:   # an xdist worker
        from fuzz.settings import COUNTS
        output["ember_fuzz_counts"] = dict(COUNTS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    from fuzz.settings import COUNTS
    COUNTS.update(getattr(node, "workeroutput", {}).get("ember_fuzz_counts", {}))


def pytest_terminal_summary(terminalreporter):
    from fuzz.settings import COUNTS, SCALE, SEED
    if not COUNTS:
        return
    areas = ", ".join(f"{area} {n}" for area, n in sorted(COUNTS.items()))
    terminalreporter.write_line(f"ember fuzz: EMBER_FUZZ_SEED={SEED} EMBER_FUZZ_SCALE={SCALE:g}; "
                                f"examples per area: {areas} (total {sum(COUNTS.values())})")
