"""Shared helpers for Ember's Tensor API tests: build tensors from numpy, compare with numpy.

A module of its own (not conftest.py): several test folders have a conftest, and
``from conftest import`` would pick whichever was imported first.
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

import ember

ROOT = Path(__file__).resolve().parents[1]   # the checkout (perf/ is a folder of it)

# Tolerances used when a test does not give its own: one IEEE operation or so.
DEFAULT_RTOL = {np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-12,
                np.dtype(np.complex64): 1e-6, np.dtype(np.complex128): 1e-12}


def ember_dtype(name):
    """The Ember dtype named ``name`` ("bool" is ``ember.bool_``)."""
    return ember.bool_ if name in ("bool", "bool_") else getattr(ember, name)


def _table_device():
    """The device the declarative tables run on in this process: CUDA on Numba's simulator
    (``NUMBA_ENABLE_CUDASIM=1``: the CUDA tier of ``make test``), else the CPU."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return ember.Device.cuda()
    return ember.Device.cpu()


# One table, every device: tests marked ``devices`` build their tensors with ``as_tensor`` on
# this device, and the CUDA tier runs exactly those tests (``pytest -m devices``).
DEVICE = _table_device()


def as_tensor(a):
    """An Ember tensor holding numpy array ``a`` on the table device (on the CPU zero-copy,
    keeping shape, dtype and strides).

    ``from_numpy`` rather than ``ember.tensor`` so that a bug in one creation path does not
    mask every op test (``ember.tensor`` itself is tested in test_tensor_api.py).
    """
    t = ember.from_numpy(np.asarray(a))
    return t if DEVICE.type == "cpu" else t.to(DEVICE)


def check(t, expected, rtol=None, atol=0.0, dtype=None):
    """Assert that Ember tensor ``t`` matches numpy ``expected`` in shape, dtype and values.

    ``dtype`` overrides the expected dtype (default: ``expected``'s).  Integers and bools must
    be equal; floats and complex numbers agree within ``rtol``/``atol`` (NaN matches NaN,
    infinities must match).
    """
    assert isinstance(t, ember.Tensor), f"expected an ember.Tensor, got {type(t).__name__}"
    expected = np.asarray(expected)
    want = np.dtype(dtype) if dtype is not None else expected.dtype
    assert t.shape == expected.shape, f"shape {t.shape} != expected {expected.shape}"
    assert t.dtype == want, f"dtype {t.dtype} != expected {want}"
    got = t.numpy()
    assert isinstance(got, np.ndarray)
    assert got.dtype == want, f"numpy() dtype {got.dtype} != {want}"
    assert got.shape == expected.shape
    if want.kind in "fc":
        if rtol is None:
            rtol = DEFAULT_RTOL[want]
        np.testing.assert_allclose(got, expected.astype(want), rtol=rtol, atol=atol,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected.astype(want))


def assert_not_numba(excinfo):
    """The raised exception must be one of Ember's/Python's, never a Numba internal type."""
    for cls in type(excinfo.value).__mro__:
        assert not cls.__module__.startswith("numba"), (
            f"a Numba exception escaped: {type(excinfo.value).__module__}."
            f"{type(excinfo.value).__name__}: {excinfo.value}")


# Non-contiguous layouts: (base shape, view on an ember tensor, the same view on a numpy array)
LAYOUTS = {
    "transposed": ((5, 4), lambda t: t.T, lambda a: a.T),
    "stepped": ((13,), lambda t: t[::2], lambda a: a[::2]),
    "reversed": ((7,), lambda t: t[::-1], lambda a: a[::-1]),
    "step_neg_2d": ((5, 7), lambda t: t[::2, ::-3], lambda a: a[::2, ::-3]),
    "expanded": ((1, 5), lambda t: t.expand(4, 5), lambda a: np.broadcast_to(a, (4, 5))),
    "permuted3d": ((2, 3, 4), lambda t: t.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
}


# Counts Numba compilations in the process it is prepended to (``compiled_in_new_process``).
_COUNT_COMPILES = """
import json
from numba.core import event

_compiled = []


class _Count(event.Listener):
    def on_start(self, ev):
        _compiled.append(ev.data["dispatcher"].py_func.__qualname__)

    def on_end(self, ev):
        pass


event.register("numba:compile", _Count())
"""


def compiled_in_new_process(code, cache_dir, timeout=600, **env):
    """The qualified names of the functions Numba compiled while a new Python process ran
    ``code`` with its kernel cache in ``cache_dir`` (``env``: more environment variables).

    Run it twice on one directory: the second run compiling nothing shows that every kernel
    the code used loads from the disk cache.
    """
    script = _COUNT_COMPILES + textwrap.dedent(code) + "\nprint(json.dumps(_compiled))\n"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=timeout,
                         env=dict(os.environ, EMBER_CACHE_DIR=str(cache_dir), **env))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])
