"""The CPU's discrete Fourier transforms (IR ops FFT, RFFT, IRFFT): SciPy's pocketfft.

``scipy.fft`` is imported on the first transform (``import ember`` stays light).  It takes
``workers=``, which spreads a batch of transforms (the rows of an ``fft2``, the columns of a
batched ``fft``) over threads; one 1-D transform stays on one thread, which ``fft`` of a long
1-D signal works around by the four-step split below.  Why SciPy and not numpy.fft, and the
measurements behind ``PARALLEL_MIN`` and ``SPLIT_MIN``: docs/decisions.md "FFT".

The transforms keep single precision (complex64 in, complex64 out) and return fresh arrays.
"""
import math
import os

import numpy as np

# Transforms of fewer elements run on one thread: waking workers costs more than they save
PARALLEL_MIN = 1 << 15
# A 1-D complex transform of at least this many elements runs as the four-step split
SPLIT_MIN = 1 << 18

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
    w = workers(x.size)
    if len(dims) == 1 and w > 1 and x.shape[dims[0]] >= SPLIT_MIN and x.size == x.shape[dims[0]]:
        split = _split(x.shape[dims[0]])
        if split is not None:
            return _four_step(x.reshape(-1), split, inverse, norm, w).reshape(x.shape)
    return (f.ifftn if inverse else f.fftn)(x, axes=dims, norm=norm, workers=w)


def rfft(x, dims, norm):
    """The transform of real ``x`` over ``dims``, the last of them cut to ``n // 2 + 1``."""
    return _fft().rfftn(x, axes=dims, norm=norm, workers=workers(x.size))


def irfft(x, dims, n, norm):
    """The real inverse of the one-sided ``x``; ``n`` is the output length along ``dims[-1]``."""
    s = [x.shape[d] for d in dims[:-1]] + [n]
    return _fft().irfftn(x, s=s, axes=dims, norm=norm, workers=workers(x.size))


# --- one long 1-D transform on several threads -----------------------------------------------
def _split(n):
    """(n1, n2) with n1 * n2 == n, both near sqrt(n) (powers of two and other smooth sizes),
    or None when n has no such factors."""
    for n1 in range(math.isqrt(n), 1, -1):
        if n % n1 == 0:
            return (n1, n // n1) if n1 * 8 >= math.isqrt(n) else None
    return None


_TWIDDLES = {}


def _twiddles(n1, n2, inverse, dtype):
    key = (n1, n2, inverse, dtype)
    t = _TWIDDLES.get(key)
    if t is None:
        if len(_TWIDDLES) > 8:
            _TWIDDLES.clear()
        sign = 1.0 if inverse else -1.0
        k = np.outer(np.arange(n1), np.arange(n2)) * (sign * 2.0 * math.pi / (n1 * n2))
        t = _TWIDDLES[key] = np.exp(1j * k).astype(dtype)
    return t


def _four_step(x, split, inverse, norm, w):
    """The length-n transform of 1-D ``x`` as transforms of lengths n1 and n2 (Bailey):
    x[n2 * a + b] is row a, column b of an (n1, n2) matrix; transform the columns (n2 of
    them, spread over threads), multiply by the twiddles exp(-+2 pi i a' b / n), transform
    the rows, and read the result out transposed: X[k1 + n1 * k2] is row k1, column k2."""
    f = _fft()
    n1, n2 = split
    transform = f.ifft if inverse else f.fft
    # the per-axis norm scales multiply to the n-point one: run both passes unscaled (the
    # inverse's own 1/n1 and 1/n2 make 1/n), then apply what "ortho" and "forward" need
    from ember.kernels.cpu import launch   # Ember's parallel elementwise kernels
    inner = "backward"
    a = transform(x.reshape(n1, n2), axis=0, norm=inner, workers=w)
    launch.elementwise("mul", [a, _twiddles(n1, n2, inverse, a.dtype)], a)
    a = transform(a, axis=1, norm=inner, workers=w, overwrite_x=True)
    out = launch.elementwise("identity", [a.T], launch.alloc((n2, n1), a.dtype)).reshape(-1)
    scale = _rescale(n1 * n2, inverse, norm)
    if scale != 1.0:
        launch.elementwise("mul", [out, np.array(scale, out.real.dtype)], out)
    return out


def _rescale(n, inverse, norm):
    """The factor that turns the "backward"-normalised n-point result into ``norm``'s."""
    if norm == "backward":
        return 1.0
    if norm == "ortho":
        return math.sqrt(n) if inverse else 1.0 / math.sqrt(n)
    return n if inverse else 1.0 / n   # "forward"
