"""Every autodiff test runs under both checkpointing strategies (DESIGN §4 item 11, §7)."""
import numpy as np
import pytest

import ember

STRATEGIES = [ember.CheckpointingStrategy.NONE, ember.CheckpointingStrategy.BALANCED]


@pytest.fixture(params=STRATEGIES, ids=[s.name for s in STRATEGIES])
def device(request):
    """An autodiff device with one of the checkpointing strategies: the table device
    (``checks.DEVICE``: the CPU, or CUDA in the simulator tier)."""
    from checks import DEVICE
    return DEVICE.gradient_checkpointing(request.param)


@pytest.fixture
def leaf(device):
    """``leaf(values)`` -> a marked float64 leaf on the test's autodiff device."""
    def make(values, dtype=ember.float64):
        return ember.tensor(np.asarray(values), dtype=dtype, device=device).require_grad()
    return make
