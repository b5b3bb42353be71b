"""Fixtures shared by the Tensor API tests (helpers live in checks.py)."""
import os

import numpy as np
import pytest

# scikit-learn's array API dispatch (tests/test_sklearn.py) needs SciPy's array API support,
# which SciPy reads when it is first imported: set it before any test module imports SciPy
os.environ.setdefault("SCIPY_ARRAY_API", "1")


@pytest.fixture
def cuda_available():
    """True when Numba sees a CUDA GPU or runs its CUDA simulator (then Device.cuda() works)."""
    try:
        from numba import config, cuda
        return bool(config.ENABLE_CUDASIM) or cuda.is_available()
    except Exception:  # noqa: BLE001 - a broken CUDA installation counts as none
        return False


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
