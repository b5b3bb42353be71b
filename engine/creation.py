"""Creating tensors: from Python data and numpy arrays, and filled shapes."""
import numbers

import numpy as np

from . import dispatch, layout
from . import dtypes as dt
from .device import parse as parse_device
from .ir import Op
from .tensor import Tensor, wrap


def _from_host(array, dtype, device):
    device = parse_device(device)
    return wrap(device.backend.execute(Op.FROM_HOST, array), device, dtype)


def tensor(data, dtype=None, device=None):
    """A tensor from a scalar, a nested list, a numpy array or a tensor (always a copy).

    Python floats become float32, complex numbers complex64 and ints int64 unless
    ``dtype`` says otherwise; numpy arrays keep their dtype.

    >>> ember.tensor([[1, 2], [3, 4]]).dtype
    ember.int64
    """
    if isinstance(data, Tensor):
        out = data.cast(dtype) if dtype is not None else data
        out = out.to(device) if device is not None else out
        out = out.clone() if out is data else out
        if device is not None and not out._dtype.quantized:
            # the device as asked, autodiff and strategy included (``to`` keeps a tensor's
            # own: devices compare equal regardless of them), as for any other data
            d = parse_device(device)
            if d._autodiff != out._device._autodiff or d.checkpointing is not out._device.checkpointing:
                out = wrap(out._buf, d, out._dtype)
        return out
    want = dt.as_dtype(dtype) if dtype is not None else None
    if isinstance(data, np.ndarray) or hasattr(data, "__array_interface__") or hasattr(data, "__dlpack__"):
        array = np.array(data, copy=True)
        d = want or dt.from_numpy(array.dtype)
    else:
        try:
            array = np.array(data)
        except ValueError as e:
            raise ValueError(f"tensor: nested lists must be rectangular ({e})") from None
        if array.dtype == object:
            raise ValueError("tensor: nested lists must be rectangular and hold numbers")
        if want is not None:
            d = want
        elif array.dtype.kind == "f":
            d = dt.DEFAULT_FLOAT
        elif array.dtype.kind in "iu":
            d = dt.DEFAULT_INT
        elif array.dtype.kind == "b":
            d = dt.bool_
        elif array.dtype.kind == "c":
            d = dt.DEFAULT_COMPLEX
        else:
            raise TypeError(f"tensor: cannot make a tensor from {array.dtype} data")
    if array.dtype != d.np:
        if array.dtype.kind == "c" and d.kind is not dt.Complex:
            array = array.real   # complex -> real keeps the real part, as Tensor.cast
        if (d.kind is not dt.Float and d.kind is not dt.Complex and array.dtype.kind == "f"
                and not np.isfinite(array).all()):
            raise ValueError(f"tensor: cannot convert NaN or infinite values to {d.name}")
        array = array.astype(d.np)
    if not array.flags.c_contiguous:
        array = np.array(array, order="C")   # (np.ascontiguousarray would make 0-d arrays 1-d)
    return _from_host(array, d, device)


def from_numpy(array):
    """A CPU tensor sharing memory with ``array`` (zero-copy where its layout allows)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy array, got {type(array).__name__}")
    d = dt.from_numpy(array.dtype)
    if not array.dtype.isnative or any(s % array.itemsize for s in array.strides):
        array = np.ascontiguousarray(array, dtype=d.np)
    return _from_host(array, d, "cpu")


def from_dlpack(obj):
    """A tensor from any object implementing the DLPack protocol (CPU memory: zero-copy)."""
    return from_numpy(np.from_dlpack(obj))


def from_cuda_array(obj):
    """A CUDA tensor sharing memory with ``obj`` (a Numba device array or any object with
    ``__cuda_array_interface__``); a non-contiguous array is copied."""
    from .device import Device
    Device.cuda()   # DeviceError without CUDA, before anything imports the CUDA backend
    from .backends.cuda.array import current_index, is_cuda_array
    if not is_cuda_array(obj):
        raise TypeError(f"from_cuda_array: expected a CUDA array, got {type(obj).__name__}")
    device = Device.cuda(current_index())
    data = device.backend.from_cuda_array(obj)
    return wrap(data, device, dt.from_numpy(data.dtype))


def full(shape, fill_value, dtype=None, device=None):
    shape = layout.creation_shape("full", (shape,) if isinstance(shape, numbers.Integral) else shape)
    if dtype is None:
        dtype = (dt.bool_ if isinstance(fill_value, (bool, np.bool_)) else
                 dt.DEFAULT_INT if isinstance(fill_value, numbers.Integral) else
                 dt.DEFAULT_COMPLEX if isinstance(fill_value, complex | np.complexfloating) else
                 dt.DEFAULT_FLOAT)
    d = dt.as_dtype(dtype)
    device = parse_device(device)
    data = device.backend.execute(Op.FULL, shape=shape, value=fill_value, dtype=d)
    return wrap(data, device, d)


def _shape_args(shape):
    return shape[0] if len(shape) == 1 else shape


def _float_default(dtype):
    # dtype=None is the default float, as PyTorch (not the fill value's int64, nor numpy's float64)
    return dt.DEFAULT_FLOAT if dtype is None else dtype


def zeros(*shape, dtype=dt.float32, device=None):
    """A tensor of zeros; ``shape`` is an int, a tuple, or several ints."""
    return full(_shape_args(shape), 0, _float_default(dtype), device)


def ones(*shape, dtype=dt.float32, device=None):
    return full(_shape_args(shape), 1, _float_default(dtype), device)


def empty(*shape, dtype=dt.float32, device=None):
    """An uninitialised tensor (Ember fills it with zeros: never garbage)."""
    return full(_shape_args(shape), 0, _float_default(dtype), device)


def zeros_like(t, dtype=None, device=None):
    return full(t.shape, 0, dtype or t.dtype, device or t.device)


def ones_like(t, dtype=None, device=None):
    return full(t.shape, 1, dtype or t.dtype, device or t.device)


def empty_like(t, dtype=None, device=None):
    return full(t.shape, 0, dtype or t.dtype, device or t.device)


def full_like(t, fill_value, dtype=None, device=None):
    return full(t.shape, fill_value, dtype or t.dtype, device or t.device)


def arange(start, stop=None, step=1, dtype=None, device=None):
    """Values ``start, start + step, ...`` below ``stop``: int64 for int arguments, else float32."""
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange: step must not be zero")
    if dtype is None:
        ints = all(isinstance(v, numbers.Integral) for v in (start, stop, step))
        dtype = dt.DEFAULT_INT if ints else dt.DEFAULT_FLOAT
    d = dt.as_dtype(dtype)
    device = parse_device(device)
    data = device.backend.execute(Op.ARANGE, start=start, stop=stop, step=step, dtype=d)
    return wrap(data, device, d)


def linspace(start, stop, num, dtype=dt.float32, device=None):
    if num < 0:
        raise ValueError(f"linspace: num must be non-negative, got {num}")
    d = dt.as_dtype(_float_default(dtype))
    return _from_host(np.linspace(start, stop, num).astype(d.np), d, device)


def eye(n, m=None, dtype=dt.float32, device=None):
    d = dt.as_dtype(_float_default(dtype))
    return _from_host(np.eye(n, m, dtype=d.np), d, device)


def cat(tensors, dim=0):
    """Join tensors along an existing dim; dtypes promote as numpy's ``concatenate``."""
    tensors = _tensor_list("cat", tensors)
    dispatch.same_device("cat", tensors)
    ndim = len(tensors[0]._buf.shape)
    if ndim == 0:
        raise ValueError("cat: zero-dimensional tensors cannot be concatenated; use stack")
    shapes = [t._buf.shape for t in tensors]
    for s in shapes:
        if len(s) != ndim:
            raise ValueError(f"cat: tensors must have the same number of dims, got shapes {shapes}")
    axis = dispatch.normalize_dim("cat", dim, ndim)
    layout.cat_shape(shapes, axis)
    return _cat(tensors, axis)


def stack(tensors, dim=0):
    """Join tensors of one shape along a new dim."""
    tensors = _tensor_list("stack", tensors)
    dispatch.same_device("stack", tensors)
    shape = tensors[0]._buf.shape
    if any(t._buf.shape != shape for t in tensors):
        raise ValueError(f"stack: tensors must have the same shape, got {[t.shape for t in tensors]}")
    dim = dispatch.normalize_dim("stack", dim, len(shape) + 1)
    # each tensor with a dim of size 1 at ``dim``, then one cat (checked here already)
    new = shape[:dim] + (1,) + shape[dim:]
    return _cat([dispatch.apply(_RESHAPE, t, shape=new) for t in tensors], dim)


_CAT, _RESHAPE = Op.CAT, Op.RESHAPE   # (an enum class attribute costs ~50 ns a read)


def _cat(tensors, axis):
    """``cat`` of checked ``tensors`` (same device, same dims but ``axis``)."""
    dtype = tensors[0]._dtype
    for t in tensors:
        if t._dtype is not dtype:
            dtype = dt.promote(dtype, t._dtype)
    return dispatch.apply(_CAT, *[dispatch.cast(t, dtype) for t in tensors], axis=axis,
                          dtype=dtype)


def _tensor_list(name, tensors):
    """``tensors`` as a non-empty list of tensors; TypeError naming the op and the first
    entry that is not a tensor."""
    if isinstance(tensors, Tensor) or not hasattr(tensors, "__iter__"):
        raise TypeError(f"{name}: expected a sequence of tensors, got {type(tensors).__name__}")
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"{name}: expected a non-empty list of tensors")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: expected a sequence of tensors, got {type(t).__name__} "
                            f"at position {i}")
    return tensors


def where(condition, x, y):
    """``x`` where ``condition`` is true, else ``y`` (broadcast; numpy promotion)."""
    return dispatch.elementwise(Op.WHERE, condition, x, y)


def softmax(x, dim):
    return x.softmax(dim)


def log_softmax(x, dim):
    return x.log_softmax(dim)
