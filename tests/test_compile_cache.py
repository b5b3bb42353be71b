"""Kernels compile once, ever: a second process loads every kernel from the disk cache."""
import os
import subprocess
import sys

import numba
import pytest

from checks import compiled_in_new_process

CODE = """
    import numpy as np
    import ember
    from ember.backends.cpu.elementwise import PARALLEL_MIN

    x = ember.tensor(np.arange(12.0).reshape(3, 4))
    i = ember.tensor([[0, 1], [2, 0], [1, 1]])
    results = [
        (x * 2 + 1).exp().sum(dim=1),
        x.T - x.mean(dim=1),
        x.max(dim=0), x.argmax(dim=1), x.cumsum(0),
        x.sort(dim=1, descending=True), x.gather(1, i), x > 3,
        ember.zeros(PARALLEL_MIN * 2) + 1.0,        # the parallel variant too
        x.sum(),
    ]
"""


def test_second_process_compiles_nothing(tmp_path):
    first = compiled_in_new_process(CODE, tmp_path / "cache")
    assert first, "the first process should have compiled the kernels it used"
    assert compiled_in_new_process(CODE, tmp_path / "cache") == []


def test_cache_directory_is_keyed_by_kernel_sources(tmp_path):
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path))
    code = "from ember.kernels.cache import cache_dir, source_hash; print(cache_dir()); print(source_hash())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    path, digest = out.stdout.split()
    assert path.startswith(str(tmp_path)) and path.endswith(digest)


def _uses_the_thread_count(x):
    return x + numba.get_num_threads()   # a dynamic global: Numba cannot cache this


def test_a_kernel_numba_cannot_cache_warns_and_runs():
    # Numba's warning names the kernel's file, which Ember's cache locator must know
    from ember.kernels.cpu.builder import _jit
    with pytest.warns(numba.NumbaWarning, match="Cannot cache"):
        assert _jit(_uses_the_thread_count, False)(1) == 1 + numba.get_num_threads()
