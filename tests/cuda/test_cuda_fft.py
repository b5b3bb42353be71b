"""``ember.fft`` on CUDA (simulator or GPU) agrees with the CPU (SciPy) and numpy.

The CUDA path plans every transform (transformed dims last and dense, batches of at most
three dims per cuFFT plan, norm scaling as a kernel, the dims moved back); under the
simulator a host stand-in replaces the cuFFT call itself, so these tests check that logic.
"""
import numpy as np
import pytest

import ember
import ember.fft
from cuda_helpers import to_cuda

CASES = [
    ("fft", {}, "complex64", (8,)),
    ("fft", {"n": 5, "dim": 0, "norm": "ortho"}, "complex128", (6, 3)),
    ("ifft", {"norm": "forward"}, "complex64", (2, 3, 8)),
    ("fft", {}, "float32", (4, 7)),
    ("fft2", {}, "complex128", (2, 4, 6)),
    ("ifft2", {"s": (3, 5)}, "complex64", (4, 4)),
    ("fftn", {"dim": (0, 2)}, "complex128", (3, 2, 4)),
    ("fftn", {}, "complex128", (2, 3, 2, 4, 3)),          # five dims: two cuFFT stages
    ("ifftn", {"norm": "ortho"}, "complex64", (2, 2, 3, 2)),
    ("rfft", {}, "float32", (3, 8)),
    ("rfft", {"n": 7, "norm": "forward"}, "float64", (7,)),
    ("rfft2", {}, "float64", (2, 4, 6)),
    ("rfftn", {"dim": (1, 0)}, "float32", (4, 5)),
    ("rfftn", {}, "float64", (2, 3, 2, 4, 4)),            # R2C stage then a C2C stage
    ("irfft", {}, "complex64", (3, 5)),
    ("irfft", {"n": 9, "norm": "ortho"}, "complex128", (2, 5)),
    ("irfft2", {"s": (4, 6)}, "complex128", (2, 4, 4)),
    ("irfftn", {}, "complex128", (2, 2, 3, 2, 3)),        # C2C stage then the C2R stage
    ("hfft", {}, "complex64", (2, 5)),
    ("ihfft", {"norm": "ortho"}, "float64", (3, 6)),
]


def _data(rng, shape, dtype):
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _numpy_kwargs(kw):
    out = {k: v for k, v in kw.items() if k != "dim"}
    if "dim" in kw:
        out["axis" if isinstance(kw["dim"], int) else "axes"] = kw["dim"]
    return out


@pytest.mark.parametrize("name, kw, dtype, shape", CASES,
                         ids=[f"{c[0]}-{c[2]}-{len(c[3])}d-{i}" for i, c in enumerate(CASES)])
def test_fft_matches_cpu_and_numpy(cuda, rng, name, kw, dtype, shape):
    a = _data(rng, shape, dtype)
    got = getattr(ember.fft, name)(to_cuda(a, cuda), **kw)
    cpu = getattr(ember.fft, name)(ember.from_numpy(a), **kw)
    want = getattr(np.fft, name)(a, **_numpy_kwargs(kw))
    assert got.device.type == "cuda"
    assert got.dtype == cpu.dtype and got.shape == cpu.shape == want.shape
    tol = 2e-5 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got.numpy(), cpu.numpy(), rtol=tol, atol=tol * scale)
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol * scale)


def test_fft_of_a_view_and_the_input_kept(cuda, rng):
    """A strided input is transformed through a dense copy; C2R never writes over the input."""
    a = _data(rng, (6, 8), "complex128")
    t = to_cuda(a, cuda)
    np.testing.assert_allclose(ember.fft.fft(t.T, dim=0).numpy(), np.fft.fft(a.T, axis=0))
    half = to_cuda(a[:, :5], cuda)
    np.testing.assert_allclose(ember.fft.irfft(half).numpy(), np.fft.irfft(a[:, :5]))
    np.testing.assert_array_equal(half.numpy(), a[:, :5])


def test_fft_gradient_on_cuda_matches_cpu(cuda, rng):
    z = _data(rng, (3, 8), "complex128")

    def grad(device):
        t = ember.from_numpy(z).to(device).autodiff().require_grad()
        loss = (ember.fft.fft(t * t.conj().exp(), norm="ortho").abs().sum()
                + ember.fft.irfft(t, n=10).sum() + ember.fft.rfft(t.real).imag.sum())
        return t.grad(loss.backward()).numpy()
    np.testing.assert_allclose(grad(cuda), grad(ember.Device.cpu()),
                               rtol=1e-10, atol=1e-12)
