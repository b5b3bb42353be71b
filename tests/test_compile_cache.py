"""Kernels compile once, ever: a second process loads every kernel from the disk cache."""
import json
import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import json
    from numba.core import event

    compiled = []

    class Count(event.Listener):
        def on_start(self, ev):
            compiled.append(ev.data["dispatcher"].py_func.__qualname__)

        def on_end(self, ev):
            pass

    event.register("numba:compile", Count())

    import numpy as np
    import ember
    from ember.kernels.cpu.launch import PARALLEL_MIN

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
    print(json.dumps(compiled))
""")


def _run(env):
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_compiles_nothing(tmp_path):
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "cache"))
    first = _run(env)
    assert first, "the first process should have compiled the kernels it used"
    assert _run(env) == []


def test_cache_directory_is_keyed_by_kernel_sources(tmp_path):
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path))
    code = "from ember.kernels.cache import cache_dir, source_hash; print(cache_dir()); print(source_hash())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    path, digest = out.stdout.split()
    assert path.startswith(str(tmp_path)) and path.endswith(digest)
