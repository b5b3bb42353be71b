"""Skip the CUDA tier cleanly unless the simulator or a GPU is available.

There is deliberately no ``tests/cuda/__init__.py``: under pytest's default
import mode it would make this folder a top-level package named ``cuda`` and
shadow NVIDIA's ``cuda`` Python bindings, which ``numba.cuda`` imports.
"""
import pytest
from cuda_helpers import DEV

import ember


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason=f"no CUDA device or simulator ({DEV})")
    for item in items:
        if "/tests/cuda/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.cuda)   # (the CUDA tier selects "devices or cuda")
            if not isinstance(DEV, ember.Device):
                item.add_marker(skip)


@pytest.fixture
def cuda():
    return DEV
