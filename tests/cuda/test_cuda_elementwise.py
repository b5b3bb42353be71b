"""Elementwise ops on CUDA beyond the declarative table (which runs on CUDA in this tier:
``tests/test_elementwise.py``, the tests marked ``devices``): views that combine a permute,
negative steps and broadcasting in one expression."""
import numpy as np
import pytest

import ember

from cuda_helpers import assert_same


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_strided_and_broadcast_operands(cuda, rng, dtype):
    a = rng.integers(-5, 5, (4, 3, 5)).astype(dtype)
    b = rng.integers(-5, 5, (5,)).astype(dtype)
    ca, cb = ember.from_numpy(a), ember.from_numpy(b)
    ga, gb = ca.to(cuda), cb.to(cuda)
    for f in (lambda x, y: x.permute(2, 0, 1)[::2, ::-1] * 2 + y[:3].reshape(3, 1, 1),
              lambda x, y: x.transpose(0, 2).flip((0, 1)) - y.reshape(5, 1, 1),
              lambda x, y: (x + y).sum(dim=1)):
        assert_same(f(ga, gb), f(ca, cb))
