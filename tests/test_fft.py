"""``ember.fft`` against numpy.fft (and torch.fft where installed), on the CPU.

``ROWS`` is the table: an ``ember.fft`` function, its keyword arguments in torch's spelling
(``n``/``s``, ``dim``, ``norm``) and the kind of input it takes.  Each row runs over real or
complex inputs of both precisions, batched (leading dims) and unbatched, and compares with
numpy's function of the same name (``dim`` becomes ``axis``/``axes``) and with torch's.
Gradients are in tests/autograd/test_complex_gradients.py, CUDA in tests/cuda/test_cuda_fft.py.
"""
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.fft
from checks import as_tensor, assert_not_numba

try:
    import torch
except ImportError:
    torch = None

REAL = ("float32", "float64")
COMPLEX = ("complex64", "complex128")
SHAPES = {"vec8": (8,), "vec7": (7,), "batched": (2, 3, 6), "mat5x4": (5, 4)}

ROWS = [  # (function, kwargs, input kinds)
    ("fft", {}, REAL + COMPLEX),
    ("fft", {"n": 5}, COMPLEX),
    ("fft", {"n": 12, "norm": "ortho"}, COMPLEX),
    ("fft", {"dim": 0, "norm": "forward"}, REAL + COMPLEX),
    ("ifft", {}, COMPLEX),
    ("ifft", {"n": 9, "norm": "ortho"}, REAL),
    ("ifft", {"norm": "forward"}, COMPLEX),
    ("fft2", {}, COMPLEX),
    ("fft2", {"s": (3, 5), "norm": "ortho"}, COMPLEX),
    ("ifft2", {"dim": (0, -1)}, REAL + COMPLEX),
    ("fftn", {}, COMPLEX),
    ("fftn", {"s": (4, 4)}, COMPLEX),
    ("fftn", {"dim": (0,), "norm": "forward"}, REAL),
    ("ifftn", {"norm": "ortho"}, COMPLEX),
    ("rfft", {}, REAL),
    ("rfft", {"n": 7, "norm": "ortho"}, REAL),
    ("rfft", {"dim": 0, "n": 10, "norm": "forward"}, REAL),
    ("irfft", {}, COMPLEX),
    ("irfft", {"n": 9}, COMPLEX),
    ("irfft", {"n": 4, "norm": "forward", "dim": 0}, COMPLEX),
    ("irfft", {"norm": "ortho"}, REAL),
    ("rfft2", {}, REAL),
    ("rfft2", {"s": (4, 6), "norm": "ortho"}, REAL),
    ("irfft2", {}, COMPLEX),
    ("irfft2", {"s": (4, 5)}, COMPLEX),
    ("rfftn", {}, REAL),
    ("rfftn", {"dim": (-1, 0)}, REAL),
    ("irfftn", {"norm": "forward"}, COMPLEX),
    ("irfftn", {"s": (3, 7)}, COMPLEX),
    ("hfft", {}, COMPLEX),
    ("hfft", {"n": 7, "norm": "ortho"}, COMPLEX),
    ("ihfft", {}, REAL),
    ("ihfft", {"n": 5, "norm": "forward"}, REAL),
]
_TWO_DIM = {"fft2", "ifft2", "rfft2", "irfft2"}


def _numpy_kwargs(name, kw, ndim):
    out = {k: v for k, v in kw.items() if k != "dim"}
    if "dim" in kw:
        d = kw["dim"]
        out["axis" if isinstance(d, int) else "axes"] = d
    elif "s" in kw and name not in _TWO_DIM:   # (numpy 2 wants the axes of s spelled out)
        out["axes"] = tuple(range(ndim - len(kw["s"]), ndim))
    return out


def _cases():
    for name, kw, kinds in ROWS:
        for dtype in kinds:
            for sid, shape in SHAPES.items():
                ndim = len(shape)
                need = 2 if name in _TWO_DIM or "s" in kw or isinstance(kw.get("dim"), tuple) else 1
                if ndim < need:
                    continue
                yield pytest.param(name, kw, dtype, shape,
                                   id=f"{name}-{'-'.join(f'{k}{v}' for k, v in kw.items())}-{dtype}-{sid}")


def _data(rng, shape, dtype):
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _close(got, want, single):
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    tol = 2e-5 if single else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)


@pytest.mark.parametrize("name, kw, dtype, shape", list(_cases()))
def test_fft_matches_numpy_and_torch(name, kw, dtype, shape, rng):
    a = _data(rng, shape, dtype)
    got = getattr(ember.fft, name)(as_tensor(a), **kw)
    want = getattr(np.fft, name)(a, **_numpy_kwargs(name, kw, a.ndim))
    single = np.dtype(dtype) in (np.float32, np.complex64)
    # numpy keeps single precision too (NumPy 2); the result kind is the transform's
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    _close(got.numpy(), want, single)
    if torch is not None:
        t = getattr(torch.fft, name)(torch.from_numpy(a), **kw).resolve_conj().numpy()
        assert t.dtype == want.dtype
        _close(got.numpy(), t, single)


@pytest.mark.parametrize("inverse", [False, True], ids=["fft", "ifft"])
@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_long_1d_transform(inverse, dtype, norm, rng):
    """A long 1-D transform in single precision stays accurate against a complex128 one."""
    n = 1 << 18
    a = _data(rng, (n,), dtype)
    fn = "ifft" if inverse else "fft"
    got = getattr(ember.fft, fn)(as_tensor(a), norm=norm).numpy()
    want = getattr(np.fft, fn)(a.astype(np.complex128), norm=norm)
    assert got.dtype == np.dtype(dtype)
    _close(got, want, dtype == "complex64")


def test_large_batched_transforms_use_workers(rng):
    a = _data(rng, (64, 1024), "complex64")
    _close(ember.fft.fft2(as_tensor(a)).numpy(), np.fft.fft2(a), True)
    x = _data(rng, (256, 512), "float32")
    _close(ember.fft.rfft(as_tensor(x)).numpy(), np.fft.rfft(x), True)


def test_non_contiguous_and_empty_batch(rng):
    a = _data(rng, (6, 8), "complex128")
    _close(ember.fft.fft(as_tensor(a).T, dim=0).numpy(), np.fft.fft(a.T, axis=0), False)
    _close(ember.fft.rfft(as_tensor(a.real)[::2, ::-1]).numpy(), np.fft.rfft(a.real[::2, ::-1]),
           False)
    assert ember.fft.fft(ember.zeros((0, 4), dtype=ember.complex64)).shape == (0, 4)
    assert ember.fft.rfft(ember.zeros((0, 4))).shape == (0, 3)


# --- frequencies and shifts --------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 6, 7])
def test_frequencies(n):
    f = ember.fft.fftfreq(n, 0.5)
    assert f.dtype == ember.float32
    np.testing.assert_allclose(f.numpy(), np.fft.fftfreq(n, 0.5), rtol=1e-6)
    np.testing.assert_allclose(ember.fft.rfftfreq(n, dtype=ember.float64).numpy(),
                               np.fft.rfftfreq(n))


@pytest.mark.parametrize("dim", [None, 0, (1,), (0, 1)], ids=str)
def test_shifts(dim, rng):
    a = _data(rng, (5, 6), "complex64")
    axes = dim if dim is None or isinstance(dim, int) else tuple(dim)
    np.testing.assert_array_equal(ember.fft.fftshift(as_tensor(a), dim).numpy(),
                                  np.fft.fftshift(a, axes))
    np.testing.assert_array_equal(ember.fft.ifftshift(as_tensor(a), dim).numpy(),
                                  np.fft.ifftshift(a, axes))


# --- errors --------------------------------------------------------------------------------------
ERRORS = [
    ("fft", ValueError, lambda: ember.fft.fft(ember.ones(4), norm="bogus")),
    ("fft", TypeError, lambda: ember.fft.fft(ember.tensor([1, 2, 3]))),
    ("ifft2", TypeError, lambda: ember.fft.ifft2(ember.ones((2, 2), dtype=ember.bool_))),
    ("rfft", TypeError, lambda: ember.fft.rfft(ember.ones(4, dtype=ember.complex64))),
    ("ihfft", TypeError, lambda: ember.fft.ihfft(ember.ones(4, dtype=ember.complex64))),
    ("fft", ValueError, lambda: ember.fft.fft(ember.tensor(1.0))),
    ("fft", ValueError, lambda: ember.fft.fft(ember.ones(4), n=0)),
    ("fft", ValueError, lambda: ember.fft.fft(ember.ones(0))),
    ("fftn", ValueError, lambda: ember.fft.fftn(ember.ones((2, 2)), dim=(0, 0))),
    ("fft2", ValueError, lambda: ember.fft.fft2(ember.ones((2, 2)), s=(2,))),
    ("fft", IndexError, lambda: ember.fft.fft(ember.ones(4), dim=1)),
    ("irfft", ValueError, lambda: ember.fft.irfft(ember.ones(1, dtype=ember.complex64))),
    ("fft", TypeError, lambda: ember.fft.fft([1.0, 2.0])),
    ("fftfreq", ValueError, lambda: ember.fft.fftfreq(-1)),
]


@pytest.mark.parametrize("name, exc, call", ERRORS, ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)])
def test_bad_input_raises_naming_the_function(name, exc, call):
    with pytest.raises(exc, match=name) as e:
        call()
    assert_not_numba(e)


def test_import_stays_light():
    """``import ember`` and ``import ember.fft`` load neither SciPy nor Numba; a transform does."""
    code = ("import sys, ember, ember.fft; print('scipy' in sys.modules, 'numba' in sys.modules);"
            "ember.fft.fft(ember.ones(4)); print('scipy.fft' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "True"]
