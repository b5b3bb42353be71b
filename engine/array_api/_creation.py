"""Creation functions of the standard, over ``ember.creation``.

``dtype=None`` means the default dtypes everywhere (float32 for Python floats, int64 for
ints, as in ``ember.tensor``; ``__array_namespace_info__().default_dtypes()``).
"""
import builtins
import numbers

import numpy as np

from .. import creation, dispatch
from .. import dtypes as dt
from .. import manipulation
from ..device import parse as parse_device
from ..storage import make
from ..tensor import Tensor
from ._dtypes import _check_array, as_dtype

_INT64 = np.iinfo(np.int64)


def _opt_dtype(dtype, name):
    return None if dtype is None else as_dtype(dtype, name)


def _shape(shape, name):
    if isinstance(shape, numbers.Integral):
        return (int(shape),)
    return tuple(shape)


def _wrap_copy(x):
    # a new array object on the same storage: storage is never written (``__setitem__``
    # rebinds), so this is a copy as far as anyone can observe
    return make(type(x), x._buf, x._device, x._dtype, x._node)


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """An array from an array, a Python scalar or (nested) sequence, or a buffer (numpy array).

    ``copy=True`` always gives a new array, ``False`` never copies (``ValueError`` where it
    would have to), ``None`` copies only when needed.
    """
    d = _opt_dtype(dtype, "asarray")
    dev = None if device is None else parse_device(device)
    if isinstance(obj, Tensor):
        out = obj
        if d is not None and d is not out.dtype:
            if copy is False:
                raise ValueError(f"asarray: copy=False but converting {out.dtype.name} to "
                                 f"{d.name} needs a copy")
            out = out.cast(d)
        if dev is not None and dev != out.device:
            if copy is False:
                raise ValueError(f"asarray: copy=False but moving to {dev} needs a copy")
            out = out.to(dev)
        return _wrap_copy(out) if copy and out is obj else out
    if copy is False:
        if isinstance(obj, np.ndarray) or hasattr(obj, "__dlpack__") or _is_buffer(obj):
            a = np.asarray(obj)
            if (d is not None and a.dtype != d.np) or (dev is not None and dev.type != "cpu"):
                raise ValueError("asarray: copy=False but the conversion needs a copy")
            return creation.from_numpy(a)
        raise ValueError(f"asarray: copy=False is impossible for a {type(obj).__name__}: "
                         f"Python scalars and sequences are always copied")
    if isinstance(obj, (list, tuple)) and _holds_tensors(obj):
        obj = _host_nested(obj)
    if d is None:
        if isinstance(obj, builtins.bool):
            d = dt.bool_
        elif isinstance(obj, int):
            if not _INT64.min <= obj <= _INT64.max:
                raise OverflowError(f"asarray: {obj} does not fit the default integer dtype int64")
    if not isinstance(obj, (np.ndarray, list, tuple, numbers.Number, np.generic)) and _is_buffer(obj):
        obj = np.asarray(obj)
    return creation.tensor(obj, dtype=d, device=dev)


def _is_buffer(obj):
    try:
        memoryview(obj)
        return True
    except TypeError:
        return False


def _holds_tensors(seq):
    for v in seq:
        if isinstance(v, Tensor) or (isinstance(v, (list, tuple)) and _holds_tensors(v)):
            return True
    return False


def _host_nested(seq):
    return [_host_nested(v) if isinstance(v, (list, tuple)) else
            (v.numpy() if isinstance(v, Tensor) else v) for v in seq]


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    return creation.arange(start, stop, step, dtype=_opt_dtype(dtype, "arange"), device=device)


def _default_float(dtype, name):
    return dt.DEFAULT_FLOAT if dtype is None else as_dtype(dtype, name)


def zeros(shape, *, dtype=None, device=None):
    return creation.full(_shape(shape, "zeros"), 0, _default_float(dtype, "zeros"), device)


def ones(shape, *, dtype=None, device=None):
    return creation.full(_shape(shape, "ones"), 1, _default_float(dtype, "ones"), device)


def empty(shape, *, dtype=None, device=None):
    return creation.full(_shape(shape, "empty"), 0, _default_float(dtype, "empty"), device)


def full(shape, fill_value, *, dtype=None, device=None):
    return creation.full(_shape(shape, "full"), fill_value, _opt_dtype(dtype, "full"), device)


def _like(name, x, dtype, device):
    _check_array(name, x)
    return (x.shape, x.dtype if dtype is None else as_dtype(dtype, name),
            x.device if device is None else parse_device(device))


def zeros_like(x, /, *, dtype=None, device=None):
    shape, d, dev = _like("zeros_like", x, dtype, device)
    return creation.full(shape, 0, d, dev)


def ones_like(x, /, *, dtype=None, device=None):
    shape, d, dev = _like("ones_like", x, dtype, device)
    return creation.full(shape, 1, d, dev)


def empty_like(x, /, *, dtype=None, device=None):
    shape, d, dev = _like("empty_like", x, dtype, device)
    return creation.full(shape, 0, d, dev)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    shape, d, dev = _like("full_like", x, dtype, device)
    return creation.full(shape, fill_value, d, dev)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    """Ones on the ``k``-th diagonal (``k > 0`` above the main one)."""
    d = _default_float(dtype, "eye")
    if n_rows < 0 or (n_cols is not None and n_cols < 0):
        raise ValueError(f"eye: negative dimensions ({n_rows}, {n_cols})")
    return creation.tensor(np.eye(n_rows, n_cols, k=k, dtype=d.np), dtype=d, device=device)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    """``num`` evenly spaced values from ``start`` to ``stop`` (included when ``endpoint``)."""
    if num < 0:
        raise ValueError(f"linspace: num must be non-negative, got {num}")
    if isinstance(start, complex) or isinstance(stop, complex):
        d = dt.DEFAULT_COMPLEX if dtype is None else as_dtype(dtype, "linspace")
        wide = np.complex128
    else:
        d = _default_float(dtype, "linspace")
        wide = np.float64
    values = np.linspace(start, stop, num, endpoint=endpoint, dtype=wide)
    return creation.tensor(values.astype(d.np), dtype=d, device=device)


def meshgrid(*arrays, indexing="xy"):
    return manipulation.meshgrid(*arrays, indexing=indexing)


def tril(x, /, *, k=0):
    _check_array("tril", x)
    return x.tril(k)


def triu(x, /, *, k=0):
    _check_array("triu", x)
    return x.triu(k)


def from_dlpack(x, /, *, device=None, copy=None):
    """An array from a DLPack producer (CPU memory; zero-copy unless ``copy=True``)."""
    if isinstance(x, Tensor):
        return asarray(x, device=device, copy=copy)
    if device is not None and parse_device(device).type != "cpu":
        return creation.from_dlpack(x).to(device)
    kwargs = {} if copy is None else {"copy": copy}
    a = np.from_dlpack(x, **kwargs)
    return creation.from_numpy(a)
