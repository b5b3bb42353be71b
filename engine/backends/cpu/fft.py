"""The CPU's discrete Fourier transforms (IR ops FFT, RFFT, IRFFT): SciPy's pocketfft.

``scipy.fft`` is imported on the first transform (``import ember`` stays light).  It takes
``workers=``, which spreads a batch of transforms (the rows of an ``fft2``, the columns of a
batched ``fft``) over threads; one 1-D transform stays on one thread (a four-step split over
threads measured slower: docs/decisions.md "FFT", with why SciPy and not numpy.fft).

The transforms keep single precision (complex64 in, complex64 out) and return fresh arrays.
"""
import os

# Transforms of fewer elements run on one thread: waking workers costs more than they save
PARALLEL_MIN = 1 << 15

_WORKERS = None


def workers(size):
    """The ``workers=`` for a transform over ``size`` elements."""
    global _WORKERS
    if _WORKERS is None:
        n = os.environ.get("EMBER_FFT_WORKERS")
        if n:
            _WORKERS = max(1, int(n))
        else:
            import numba
            _WORKERS = numba.get_num_threads()   # the threads Ember's kernels use
    return _WORKERS if size >= PARALLEL_MIN else 1


def _fft():
    import scipy.fft
    return scipy.fft


def fft(x, dims, inverse, norm):
    """The complex transform of ``x`` over ``dims`` (``inverse``: the +i sign and its scaling)."""
    f = _fft()
    return (f.ifftn if inverse else f.fftn)(x, axes=dims, norm=norm, workers=workers(x.size))


def rfft(x, dims, norm):
    """The transform of real ``x`` over ``dims``, the last of them cut to ``n // 2 + 1``."""
    return _fft().rfftn(x, axes=dims, norm=norm, workers=workers(x.size))


def irfft(x, dims, n, norm):
    """The real inverse of the one-sided ``x``; ``n`` is the output length along ``dims[-1]``."""
    s = [x.shape[d] for d in dims[:-1]] + [n]
    return _fft().irfftn(x, s=s, axes=dims, norm=norm, workers=workers(x.size))
