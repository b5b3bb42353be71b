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
