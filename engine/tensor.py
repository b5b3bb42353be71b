"""The public Tensor class.

A Tensor is a value: ops return new tensors and never change their inputs.
It holds backend storage (a numpy array on the CPU), a device and a dtype.
Every method goes through ``ember.dispatch``; this file only names ops and
their parameters.
"""
import math
import numbers
import operator
import sys

import numpy as np

from . import dispatch, indexing, layout, quant
from . import dtypes as dt
from .dispatch import apply, elementwise, normalize_dim, normalize_dims
from .backends import recorder
from .device import parse as parse_device
from .ir import Op
from .storage import TensorBase, make


# The ops of the arithmetic operators, matmul, reshape and indexing as module globals: looking
# up an Enum member (``Op.ADD``) costs ~40 ns per call on Python 3.11, a tenth of a small op's
# dispatch
_ADD, _SUB, _MUL, _DIV, _MATMUL = Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.MATMUL
_RESHAPE, _SLICE, _PERMUTE = Op.RESHAPE, Op.SLICE, Op.PERMUTE
_BASIC_INDEX = indexing._BASIC   # index entries of basic indexing: int, slice, None, ...


def _is_tensor(x):
    return isinstance(x, Tensor)


def wrap(data, device, dtype, node=None):
    """A new Tensor around backend storage ``data`` (see ``engine/storage.py``)."""
    return make(Tensor, data, device, dtype, node)


class Tensor(TensorBase):
    """An n-dimensional array on a device, of kind Float, Int, Bool or Complex.

    >>> x = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> (x * 2 + 1).sum(dim=1)
    tensor([ 8., 16.], dtype=float32)
    """

    # the storage slots and the ``_data`` accessor are TensorBase's (engine/storage.py)
    __slots__ = ()
    __hash__ = object.__hash__
    __array_priority__ = 1000  # numpy defers to our reflected operators

    # --- attributes -----------------------------------------------------------
    @property
    def shape(self):
        """The shape as a tuple of ints."""
        return self._buf.shape

    @property
    def ndim(self):
        return len(self._buf.shape)

    @property
    def dtype(self):
        return self._dtype

    @property
    def kind(self):
        """``ember.Float``, ``ember.Int``, ``ember.Bool`` or ``ember.Complex``."""
        return self._dtype.kind

    @property
    def device(self):
        return self._device

    # --- quantization (DESIGN §5; the logic lives in engine/quant/) --------------------
    @property
    def is_quantized(self):
        """True for a tensor made by ``quantize`` (its dtype is a ``QFloat``)."""
        return self._dtype.quantized

    @property
    def nbytes(self):
        """Bytes of the values' storage: ``numel * itemsize`` (numpy's ``nbytes``, views count
        their elements); for a quantized tensor its integer values (int8 or packed words),
        scales not counted (``t.quantization_scales().nbytes`` gives those)."""
        if self._dtype.quantized:
            return quant.nbytes(self)
        return self.numel() * self._dtype.itemsize

    def quantize(self, scheme, scales=None):
        """This Float tensor quantized with ``scheme`` (an ``ember.QuantScheme``).

        Scales come from the data (``2 * max|x| / (b - a)`` per tensor or per block), or from
        ``scales`` (a tensor, array or float of the scale grid's shape, positive).  The result
        has a ``QFloat`` dtype, keeps the autodiff association and has no node (quantizing
        detaches).  NaN or infinite values raise ``ValueError``.

        >>> q = ember.tensor([-1.8, -1.0, 0.0, 0.5]).quantize(ember.QuantScheme(ember.QuantValue.Q8S))
        >>> q.quantized_values()
        tensor([-127,  -71,    0,   35], dtype=int8)
        """
        return quant.quantize(self, scheme, scales)

    def dequantize(self):
        """The float32 values ``scale * q`` of a quantized tensor (other tensors: unchanged)."""
        if not self._dtype.quantized:
            return self
        return quant.dequantize(self)

    def quantization_scales(self):
        """The float32 scales: shape ``()`` per tensor, else one per block along each dim.

        >>> s = ember.QuantScheme(ember.QuantValue.Q8S, block_size=[16])
        >>> ember.ones((4, 40)).quantize(s).quantization_scales().shape
        (4, 3)
        """
        return quant.scales_of(_check_quantized("quantization_scales", self))

    def quantized_values(self):
        """The integer values as an int8 tensor of this tensor's shape (unpacked if packed)."""
        return quant.values_of(_check_quantized("quantized_values", self))
    # --- end of quantization ----------------------------------------------------------------

    def numel(self):
        return math.prod(self._buf.shape)

    size = property(numel)

    def __len__(self):
        if not self._buf.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._buf.shape[0]

    def __iter__(self):
        if not self._buf.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._buf.shape[0]))

    # --- host interop -----------------------------------------------------------
    def _host(self, what):
        """The data as a numpy array: every read of a tensor's values goes through here, and
        inside a traced ``ember.compile`` step it raises ``CompileError`` naming ``what``."""
        if recorder() is not None:
            from .compile import value_read
            raise value_read(what)
        if self._dtype.quantized:
            return self.dequantize()._host(what)
        return self._device.backend.execute(Op.TO_HOST, self._data)

    def numpy(self):
        """The data as a numpy array (zero-copy on the CPU; quantized tensors: dequantized)."""
        return self._host("numpy()")

    def __array__(self, dtype=None, copy=None):
        a = self._host("np.asarray()")
        if dtype is not None:
            a = a.astype(dtype, copy=False)
        return a.copy() if copy else a

    def item(self):
        """The value of a one-element tensor as a Python scalar."""
        if self.numel() != 1:
            raise ValueError(f"item: the tensor has {self.numel()} elements, not 1")
        return self._host("item()").reshape(()).item()

    def tolist(self):
        return self._host("tolist()").tolist()

    @property
    def __cuda_array_interface__(self):
        """CUDA Array Interface v3 of a CUDA tensor's memory (zero-copy to Numba, CuPy, PyTorch)."""
        if self._device.type != "cuda":
            raise AttributeError("__cuda_array_interface__: only CUDA tensors have one")
        return self._data.__cuda_array_interface__

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack export of the values (zero-copy on the CPU).

        A view with a negative stride (``flip``, ``[::-1]``) is exported as a contiguous copy,
        or raises ``BufferError`` when ``copy=False``: consumers such as PyTorch abort the
        interpreter on negative DLPack strides.  A read-only view (``expand``) goes out as is to
        a DLPack >= 1.0 consumer (flagged read-only), else as a copy, or ``BufferError`` when
        ``copy=False``.
        """
        a = self._host("__dlpack__()")
        if a.size > 1 and any(s < 0 for s in a.strides):
            if copy is False:
                raise BufferError("__dlpack__: a view with negative strides cannot be exported "
                                  "without a copy (copy=False was asked)")
            a = np.ascontiguousarray(a)
        elif not a.flags.writeable and (max_version is None or tuple(max_version) < (1, 0)):
            # a read-only view (expand, broadcast): only DLPack >= 1.0 can say so
            if copy is False:
                raise BufferError("__dlpack__: a read-only view (expand, broadcast) cannot be "
                                  "exported without a copy to a consumer older than DLPack 1.0 "
                                  "(copy=False was asked, max_version is below (1, 0))")
            a = np.array(a)
        kwargs = {"stream": stream}
        if max_version is not None:
            kwargs["max_version"] = max_version
        if dl_device is not None:
            kwargs["dl_device"] = dl_device
        if copy is not None:
            kwargs["copy"] = copy
        return a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._host("__dlpack_device__()").__dlpack_device__()

    def __bool__(self):
        if self.numel() != 1:
            raise ValueError("the truth value of a tensor with more than one element is ambiguous; "
                             "use .any() or .all()")
        return bool(self._scalar("bool()"))

    def __float__(self):
        return float(self._scalar("float()"))

    def __complex__(self):
        return complex(self._scalar("complex()"))

    def __int__(self):
        return int(self._scalar("int()"))

    def _scalar(self, what):
        if self.numel() != 1:
            raise ValueError(f"{what}: the tensor has {self.numel()} elements, not 1")
        return self._host(what).reshape(()).item()

    def __index__(self):
        if self._dtype.kind is not dt.Int or self.numel() != 1:
            raise TypeError("only one-element Int tensors can be used as an index")
        return int(self._scalar("__index__()"))

    def __repr__(self):
        body = np.array2string(self._host("repr()"), separator=", ", prefix="tensor(")
        extra = f", dtype={self._dtype.name}"
        if self._device.type != "cpu":
            extra += f", device={self._device}"
        return f"tensor({body}{extra})"

    # --- dtype and device -------------------------------------------------------
    def cast(self, dtype):
        """A copy converted to ``dtype`` (floats truncate towards zero when cast to ints)."""
        dtype = dt.as_dtype(dtype)
        if dtype is self._dtype:
            return self
        return dispatch.cast(self, dtype)

    astype = cast

    def to_device(self, device, /, *, stream=None):
        """``to(device)``, in the array API standard's spelling (``stream`` is not used:
        every device runs its work on one stream of its own)."""
        return self.to(device)

    def __array_namespace__(self, /, *, api_version=None):
        """The array API standard's namespace for tensors: ``ember.array_api``."""
        from . import array_api
        return array_api._namespace(api_version)

    def to(self, device):
        device = parse_device(device)
        if device == self._device:
            return self
        if self._dtype.quantized:
            return quant.to_device(self, device)
        host = self._device.backend.execute(Op.TO_HOST, self._data)   # (a launch, not a read)
        return wrap(device.backend.execute(Op.FROM_HOST, host), device, self._dtype)

    def clone(self):
        """A copy with its own storage; a tracked clone shares the original's node and steps."""
        if self._dtype.quantized:
            return quant.clone(self)
        data = self._device.backend.execute(Op.CAST, self._data, shape=self.shape, dtype=self._dtype)
        return wrap(data, self._device, self._dtype, self._node)

    # --- autodiff (DESIGN §4) -------------------------------------------------------
    def is_autodiff(self):
        """True when the tensor's device has autodiff enabled."""
        return self._device._autodiff

    def autodiff(self):
        """The same tensor with autodiff enabled (idempotent; marks nothing)."""
        if self._device._autodiff:
            return self
        return wrap(self._buf, self._device.autodiff(), self._dtype)

    @staticmethod
    def from_inner(t):
        """``t`` with autodiff enabled: the same as ``t.autodiff()``."""
        return t.autodiff()

    def without_autodiff(self):
        """The same values without autodiff and without any graph reference (idempotent)."""
        if not self._device._autodiff and self._node is None:
            return self
        return wrap(self._buf, self._device.base(), self._dtype)

    inner = without_autodiff

    def gradient_checkpointing_strategy(self):
        """The tensor's ``CheckpointingStrategy``, or None without autodiff."""
        return self._device.checkpointing

    def with_gradient_checkpointing_strategy(self, strategy):
        """The same tensor (same lineage) under another checkpointing strategy."""
        if not self._device._autodiff:
            raise ValueError("with_gradient_checkpointing_strategy: the tensor is not autodiff-enabled; "
                             "call .autodiff() first")
        return wrap(self._buf, self._device.gradient_checkpointing(strategy), self._dtype,
                             self._node)

    def require_grad(self):
        """This float (or complex) leaf, marked so that backward keeps its gradient:
        ``w = w.require_grad()``.  A complex leaf's gradient follows PyTorch: for a real loss
        ``L`` of ``z = x + iy`` it is ``dL/dx + i dL/dy``."""
        return self.set_require_grad(True)

    def set_require_grad(self, flag):
        """Mark (``True``) or unmark (``False``: a fresh untracked leaf) this leaf."""
        if not self._device._autodiff:
            return self
        if not dt.differentiable(self._dtype):
            raise TypeError("require_grad: only Float and Complex tensors take gradients, got "
                            f"{self._dtype.name}")
        node = self._node
        if not flag:
            return self if node is None else wrap(self._buf, self._device, self._dtype)
        if node is not None:
            if node.leaf:
                return self
            raise ValueError("require_grad: only leaves can be marked; this tensor is the output of "
                             f"{dispatch.op_name(node.op)} on a tracked tensor (use detach() first)")
        from ember.autograd import graph
        return wrap(self._buf, self._device, self._dtype, graph.leaf(self.shape))

    def is_require_grad(self):
        """True only for marked leaves."""
        return self._node is not None and self._node.leaf

    def is_tracked(self):
        """True for marked leaves and every op output that descends from one."""
        return self._node is not None

    def detach(self):
        """A new lineage with the same values; a marked leaf stays marked, under a new identity."""
        node = self._node
        if node is None:
            return wrap(self._buf, self._device, self._dtype)
        if node.leaf:
            from ember.autograd import graph
            return wrap(self._buf, self._device, self._dtype,
                                 graph.leaf(self.shape, node.distributed))
        return wrap(self._buf, self._device, self._dtype)

    def set_distributed(self, flag=True):
        """This float leaf, marked so that backward all-reduces its gradient across processes.

        Needs autodiff and ``ember.distributed.init()``, and implies ``require_grad()``.  Like
        ``detach()``, it returns the leaf under a new identity (the same tensor when it is
        already distributed).  The mark lives with the leaf: ``detach()``, ``clone()`` and the
        optimizers keep it, ``set_require_grad(False)`` drops it, and ``set_distributed(False)``
        gives back a marked leaf without it.

        >>> ember.distributed.init()                     # under mpiexec -n 2
        >>> w = ember.zeros((3,)).autodiff().set_distributed()
        >>> w.is_distributed(), w.is_require_grad()
        (True, True)
        """
        from . import distributed
        return distributed.mark(self, flag)

    def is_distributed(self):
        """True for a leaf marked with ``set_distributed()``."""
        return self._node is not None and self._node.distributed is not None

    def backward(self):
        """Gradients of this tensor (of its sum, when not a scalar) for the marked leaves it depends on.

        >>> w = ember.tensor([1.0, 2.0]).autodiff().require_grad()
        >>> grads = (w * w).sum().backward()
        >>> w.grad(grads)
        tensor([2., 4.], dtype=float32)
        """
        from ember.autograd import graph
        return graph.backward(self)

    def _grad_key(self):
        node = self._node
        if (not self._device._autodiff or node is None or not node.leaf
                or not dt.differentiable(self._dtype)):
            return None
        return node

    def grad(self, grads):
        """This marked leaf's gradient in ``grads`` (a tensor without autodiff), or None."""
        key = self._grad_key()
        return None if key is None else grads._grads.get(key)

    def grad_remove(self, grads):
        """Return this leaf's gradient and delete it from ``grads``."""
        key = self._grad_key()
        return None if key is None else grads._grads.pop(key, None)

    def grad_replace(self, grads, gradient):
        """Set this leaf's gradient in ``grads`` to ``gradient`` (no accumulation)."""
        if not self._device._autodiff:
            raise ValueError("grad_replace: the tensor is not autodiff-enabled")
        if not _is_tensor(gradient) or gradient.is_autodiff():
            raise ValueError("grad_replace: the gradient must be a tensor without autodiff")
        if gradient._device != self._device:
            raise ValueError(f"grad_replace: the gradient is on {gradient._device}, the tensor on {self._device}")
        if gradient.shape != self.shape:
            raise ValueError(f"grad_replace: gradient shape {gradient.shape} != tensor shape {self.shape}")
        key = self._grad_key()
        if key is None:
            raise ValueError("grad_replace: only marked float leaves have gradients")
        grads._grads[key] = gradient

    # --- elementwise arithmetic ---------------------------------------------------
    def __add__(self, other):
        return elementwise(_ADD, self, other)

    def __radd__(self, other):
        return elementwise(_ADD, other, self)

    def __sub__(self, other):
        return elementwise(_SUB, self, other)

    def __rsub__(self, other):
        return elementwise(_SUB, other, self)

    def __mul__(self, other):
        return elementwise(_MUL, self, other)

    def __rmul__(self, other):
        return elementwise(_MUL, other, self)

    def __truediv__(self, other):
        return elementwise(_DIV, self, other)

    def __rtruediv__(self, other):
        return elementwise(_DIV, other, self)

    def __floordiv__(self, other):
        return elementwise(Op.FLOORDIV, self, other)

    def __rfloordiv__(self, other):
        return elementwise(Op.FLOORDIV, other, self)

    def __mod__(self, other):
        """Remainder; its sign follows the divisor (numpy, Python)."""
        return elementwise(Op.MOD, self, other)

    def __rmod__(self, other):
        return elementwise(Op.MOD, other, self)

    def pow(self, exponent):
        """``self ** exponent`` for a tensor or scalar exponent.

        Integer powers wrap like numpy's; a negative integer exponent raises ``ValueError``.
        """
        _check_int_power(self, exponent)
        if (isinstance(exponent, (float, np.floating)) and exponent == 0.5
                and self._dtype.kind is dt.Float and not self._dtype.quantized):
            # a scalar exponent of 0.5 is sqrt, as in numpy and PyTorch: -0.0 ** 0.5 is -0.0
            # and -inf ** 0.5 NaN (IEEE pow: +0.0 and +inf), and the gradient is sqrt's
            # (PyTorch's too); a tensor exponent is IEEE pow (docs/decisions.md)
            return elementwise(Op.SQRT, self)
        return elementwise(Op.POW, self, exponent)

    __pow__ = pow

    def __rpow__(self, other):
        _check_int_power(other, self)
        return elementwise(Op.POW, other, self)

    def __neg__(self):
        return elementwise(Op.NEG, self)

    def __pos__(self):
        # a new tensor object on the same storage: with ``__setitem__`` rebinding tensors,
        # ``+x`` must not be ``x`` itself (numpy's ``+x`` is a copy)
        return make(type(self), self._buf, self._device, self._dtype, self._node)

    def __abs__(self):
        return elementwise(Op.ABS, self)

    abs = absolute = __abs__
    neg = negative = __neg__
    add = __add__
    sub = subtract = __sub__
    mul = multiply = __mul__
    div = divide = true_divide = __truediv__
    floor_divide = __floordiv__
    remainder = __mod__

    def sign(self):
        return elementwise(Op.SIGN, self)

    def maximum(self, other):
        return elementwise(Op.MAXIMUM, self, other)

    def minimum(self, other):
        return elementwise(Op.MINIMUM, self, other)

    def clamp(self, min=None, max=None):
        """Limit values to ``[min, max]``; either bound may be None."""
        if min is None and max is None:
            raise ValueError("clamp: give min, max or both")
        dtype = self._dtype
        if dtype.kind is not dt.Float:
            if dtype.kind is dt.Int:
                # an integer bound at or beyond the dtype's limit on its own side bounds
                # nothing: it counts as absent (numpy.clip, also where the other bound is a
                # float); one beyond the other side is not representable and raises in dispatch
                info = np.iinfo(dtype.np)
                if _is_int_scalar(min) and min <= info.min:
                    min = None
                if _is_int_scalar(max) and max >= info.max:
                    max = None
            # the dtype the bounds promote the result to (an int tensor with a float bound
            # clamps in float64, as numpy.clip): an absent bound is that dtype's limit
            given = [b for b in (min, max) if b is not None]
            try:
                dtype = dispatch.promote_args([self] + [b for b in given if _is_tensor(b)],
                                              [self] + given)
            except TypeError as e:   # a bound that is neither a tensor nor a number
                raise TypeError(f"clamp: {e}") from None
        if dtype.kind is dt.Int:
            info = np.iinfo(dtype.np)
            lo, hi = (info.min if min is None else min), (info.max if max is None else max)
        elif dtype.kind is dt.Bool:   # refused by the op's kinds (in dispatch, naming clamp)
            lo, hi = (False if min is None else min), (True if max is None else max)
        else:
            lo, hi = (-math.inf if min is None else min), (math.inf if max is None else max)
        return elementwise(Op.CLAMP, self, lo, hi)

    clip = clamp

    # --- comparisons ----------------------------------------------------------------
    def __eq__(self, other):
        return elementwise(Op.EQ, self, other)

    def __ne__(self, other):
        return elementwise(Op.NE, self, other)

    def __lt__(self, other):
        return elementwise(Op.LT, self, other)

    def __le__(self, other):
        return elementwise(Op.LE, self, other)

    def __gt__(self, other):
        return elementwise(Op.GT, self, other)

    def __ge__(self, other):
        return elementwise(Op.GE, self, other)

    equal = __eq__
    not_equal = __ne__
    greater = __gt__
    greater_equal = __ge__
    lower = __lt__
    lower_equal = __le__
    less = __lt__
    less_equal = __le__
    eq, ne, lt, le, gt, ge = __eq__, __ne__, __lt__, __le__, __gt__, __ge__

    def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        """Elementwise ``|self - other| <= atol + rtol * |other|`` (``ember.isclose``)."""
        from .elementwise import isclose
        return isclose(self, other, rtol, atol, equal_nan)

    def all_close(self, other, rtol=1e-5, atol=1e-8):
        """True when ``|self - other| <= atol + rtol * |other|`` everywhere (NaN never matches)."""
        wide = dt.complex128 if self._dtype.kind is dt.Complex or (
            _is_tensor(other) and other._dtype.kind is dt.Complex) else dt.float64
        diff = (self.cast(wide) - other).abs()
        bound = (other.cast(wide).abs() if _is_tensor(other) else abs(other)) * rtol + atol
        return bool((diff <= bound).all().item())

    allclose = all_close

    # --- bitwise and logical --------------------------------------------------------
    def __and__(self, other):
        return elementwise(Op.AND, self, other)

    def __rand__(self, other):
        return elementwise(Op.AND, other, self)

    def __or__(self, other):
        return elementwise(Op.OR, self, other)

    def __ror__(self, other):
        return elementwise(Op.OR, other, self)

    def __xor__(self, other):
        return elementwise(Op.XOR, self, other)

    def __rxor__(self, other):
        return elementwise(Op.XOR, other, self)

    def __invert__(self):
        if self._dtype.kind is dt.Bool:
            return elementwise(Op.LOGICAL_NOT, self)
        return elementwise(Op.BIT_NOT, self)

    def __lshift__(self, other):
        return elementwise(Op.SHL, self, other)

    def __rshift__(self, other):
        return elementwise(Op.SHR, self, other)

    def __rlshift__(self, other):
        return elementwise(Op.SHL, other, self)

    def __rrshift__(self, other):
        return elementwise(Op.SHR, other, self)

    bitwise_and = __and__
    bitwise_or = __or__
    bitwise_xor = __xor__
    bitwise_not = __invert__
    bitwise_left_shift = __lshift__
    bitwise_right_shift = __rshift__
    logical_and = __and__
    logical_or = __or__
    logical_xor = __xor__
    logical_not = __invert__

    # --- float functions -----------------------------------------------------------
    def exp(self):
        return elementwise(Op.EXP, self)

    def log(self):
        return elementwise(Op.LOG, self)

    def log1p(self):
        return elementwise(Op.LOG1P, self)

    def sqrt(self):
        return elementwise(Op.SQRT, self)

    def rsqrt(self):
        return elementwise(Op.RSQRT, self)

    def recip(self):
        return elementwise(Op.RECIP, self)

    reciprocal = recip

    def sin(self):
        return elementwise(Op.SIN, self)

    def cos(self):
        return elementwise(Op.COS, self)

    def tan(self):
        return elementwise(Op.TAN, self)

    def tanh(self):
        return elementwise(Op.TANH, self)

    def sigmoid(self):
        return elementwise(Op.SIGMOID, self)

    def erf(self):
        return elementwise(Op.ERF, self)

    def relu(self):
        return elementwise(Op.RELU, self)

    def gelu(self):
        """Exact GELU, ``x * Φ(x)``."""
        return elementwise(Op.GELU, self)

    def silu(self):
        return elementwise(Op.SILU, self)

    def round(self):
        """Round half to even, as numpy and PyTorch."""
        return elementwise(Op.ROUND, self)

    def floor(self):
        return elementwise(Op.FLOOR, self)

    def ceil(self):
        return elementwise(Op.CEIL, self)

    def trunc(self):
        return elementwise(Op.TRUNC, self)

    def is_nan(self):
        """True where the value is NaN (complex: either part)."""
        if self._dtype.kind is dt.Complex:
            return self.real.is_nan() | self.imag.is_nan()
        return elementwise(Op.ISNAN, self)

    def is_inf(self):
        """True where the value is infinite (complex: either part, as numpy)."""
        if self._dtype.kind is dt.Complex:
            return self.real.is_inf() | self.imag.is_inf()
        return elementwise(Op.ISINF, self)

    def is_finite(self):
        if self._dtype.kind is dt.Complex:
            return self.real.is_finite() & self.imag.is_finite()
        return elementwise(Op.ISFINITE, self)

    # --- complex numbers -------------------------------------------------------------
    @property
    def real(self):
        """The real part: a float tensor for a complex one, the tensor itself otherwise.

        >>> ember.tensor([1 + 2j, 3 - 1j]).real
        tensor([1., 3.], dtype=float32)
        """
        if self._dtype.kind is not dt.Complex:
            return self
        return elementwise(Op.REAL, self)

    @property
    def imag(self):
        """The imaginary part: a float tensor for a complex one, zeros of this dtype otherwise
        (numpy)."""
        if self._dtype.kind is not dt.Complex:
            from .creation import zeros_like
            return zeros_like(self)
        return elementwise(Op.IMAG, self)

    def conj(self):
        """The complex conjugate (a real tensor is its own).

        >>> ember.tensor([1 + 2j]).conj()
        tensor([1.-2.j], dtype=complex64)
        """
        if self._dtype.kind is not dt.Complex:
            return self
        return elementwise(Op.CONJ, self)

    conjugate = conj

    def angle(self):
        """The argument ``atan2(imag, real)`` in radians, a real tensor (0 or pi for reals)."""
        return elementwise(Op.ANGLE, self)

    isnan = is_nan
    isinf = is_inf
    isfinite = is_finite

    def acos(self):
        return elementwise(Op.ACOS, self)

    def acosh(self):
        return elementwise(Op.ACOSH, self)

    def asin(self):
        return elementwise(Op.ASIN, self)

    def asinh(self):
        return elementwise(Op.ASINH, self)

    def atan(self):
        return elementwise(Op.ATAN, self)

    def atanh(self):
        return elementwise(Op.ATANH, self)

    def atan2(self, other):
        """The angle of the point ``(other, self)``: ``atan(self / other)`` in the right quadrant."""
        return elementwise(Op.ATAN2, self, other)

    def cosh(self):
        return elementwise(Op.COSH, self)

    def sinh(self):
        return elementwise(Op.SINH, self)

    def expm1(self):
        """``exp(x) - 1``, accurate near 0."""
        return elementwise(Op.EXPM1, self)

    def log2(self):
        return elementwise(Op.LOG2, self)

    def log10(self):
        return elementwise(Op.LOG10, self)

    def logaddexp(self, other):
        """``log(exp(self) + exp(other))`` without overflow."""
        return elementwise(Op.LOGADDEXP, self, other)

    def hypot(self, other):
        """``sqrt(self**2 + other**2)`` without overflow."""
        return elementwise(Op.HYPOT, self, other)

    def copysign(self, other):
        """The magnitude of ``self`` with the sign of ``other`` (signs of zeros and NaNs too)."""
        return elementwise(Op.COPYSIGN, self, other)

    def nextafter(self, other):
        """The next representable value after ``self`` towards ``other``."""
        return elementwise(Op.NEXTAFTER, self, other)

    def signbit(self):
        """True where the sign bit is set (``-0.0`` and negative NaNs included)."""
        return elementwise(Op.SIGNBIT, self)

    def square(self):
        return elementwise(Op.SQUARE, self)

    arccos, arccosh, arcsin, arcsinh, arctan, arctanh, arctan2 = acos, acosh, asin, asinh, atan, atanh, atan2

    def softmax(self, dim):
        """``exp(x - max) / sum(exp(x - max))`` along ``dim``, as one fused op (no overflow).

        >>> ember.tensor([[1.0, 2.0, 3.0]]).softmax(1)
        tensor([[0.09003057, 0.24472848, 0.66524094]], dtype=float32)
        """
        _check_float("softmax", self)
        return apply(Op.SOFTMAX, self, axis=normalize_dim("softmax", dim, self.ndim), dtype=self._dtype)

    def log_softmax(self, dim):
        """``(x - max) - log(sum(exp(x - max)))`` along ``dim``, as one fused op.

        >>> ember.tensor([0.0, 0.0]).log_softmax(0)
        tensor([-0.6931472, -0.6931472], dtype=float32)
        """
        _check_float("log_softmax", self)
        return apply(Op.LOG_SOFTMAX, self, axis=normalize_dim("log_softmax", dim, self.ndim),
                     dtype=self._dtype)

    # --- reductions -----------------------------------------------------------------
    def sum(self, dim=None, keepdim=False, dtype=None):
        """Sum over ``dim`` (an int, a tuple, or None for all dims), in ``dtype`` when given.
        Signed Int and Bool sum to int64, unsigned Int to uint64 (numpy)."""
        return _reduce(Op.SUM, self, dim, keepdim, dtype)

    def prod(self, dim=None, keepdim=False, dtype=None):
        return _reduce(Op.PROD, self, dim, keepdim, dtype)

    def max(self, dim=None, keepdim=False):
        """Largest values over ``dim`` (NaN propagates)."""
        return _reduce(Op.MAX, self, dim, keepdim)

    def min(self, dim=None, keepdim=False):
        return _reduce(Op.MIN, self, dim, keepdim)

    def any(self, dim=None, keepdim=False):
        return _reduce(Op.ANY_, self, dim, keepdim)

    def all(self, dim=None, keepdim=False):
        return _reduce(Op.ALL, self, dim, keepdim)

    def mean(self, dim=None, keepdim=False):
        """Mean over ``dim``; integer tensors give float64 (numpy)."""
        dispatch.check_kind("mean", Op.SUM, self)
        kind = self._dtype.kind
        x = self if kind is dt.Float or kind is dt.Complex else self.cast(dt.float64)
        axes = normalize_dims("mean", dim, self.ndim)
        count = math.prod(self.shape[a] for a in axes)
        return x.sum(dim, keepdim) / count

    def var(self, dim=None, keepdim=False, correction=1):
        """Variance over ``dim`` with Bessel's ``correction`` (1 by default, as PyTorch); of a
        complex tensor, the real mean of ``|x - mean|**2`` (numpy, PyTorch)."""
        if self._dtype.kind is not dt.Complex:
            _check_float("var", self)
        axes = normalize_dims("var", dim, self.ndim)
        count = math.prod(self.shape[a] for a in axes)
        centered = self - self.mean(dim, keepdim=True)
        if self._dtype.kind is dt.Complex:
            sq = centered.real * centered.real + centered.imag * centered.imag
        else:
            sq = centered * centered
        return sq.sum(dim, keepdim) / max(count - correction, 0)

    def std(self, dim=None, keepdim=False, correction=1):
        """Standard deviation: ``sqrt(var)``; where it is 0 its gradient is 0 (PyTorch), not
        the inf * 0 = NaN that sqrt's slope at 0 would give."""
        v = self.var(dim, keepdim, correction)
        s = v.sqrt()
        if s._node is None:
            return s
        return s.mask_fill(v == 0, 0)

    def argmax(self, dim=None, keepdim=False):
        """Index of the largest value (first one on ties; NaN counts as largest)."""
        return _arg_reduce(Op.ARGMAX, self, dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        return _arg_reduce(Op.ARGMIN, self, dim, keepdim)

    def cumsum(self, dim, dtype=None):
        """Running sums along ``dim`` (in ``dtype`` when given; Int and Bool as ``sum``)."""
        return _scan(Op.CUMSUM, self, dim, dtype)

    def cumprod(self, dim, dtype=None):
        return _scan(Op.CUMPROD, self, dim, dtype)

    # --- linear algebra ---------------------------------------------------------------
    def matmul(self, other):
        """Matrix product with numpy's rules (1-D operands, broadcast batch dims); BLAS on the CPU."""
        if isinstance(other, np.ndarray):
            other = _from_array(other, self)
        if not isinstance(other, Tensor):
            raise TypeError(f"matmul: expected a tensor, got {type(other).__name__}")
        kinds = _MATMUL.kinds
        if self._dtype.kind not in kinds or other._dtype.kind not in kinds:
            dispatch.check_kind("matmul", _MATMUL, self)
            dispatch.check_kind("matmul", _MATMUL, other)
        # (the devices: ``apply`` joins them, naming matmul in its DeviceError)
        a, b = self._buf.shape, other._buf.shape
        if not a or not b:
            raise ValueError(f"matmul: operands must have at least one dim, got shapes {a} and {b}")
        k1 = a[-1]
        k2 = b[-2] if len(b) > 1 else b[0]
        if k1 != k2:
            raise ValueError(f"matmul: shapes {a} and {b} do not match ({k1} != {k2})")
        if len(a) > 2 and len(b) > 2:   # batch dims on both sides
            dispatch.broadcast_shapes("matmul", a[:-2], b[:-2])
        dtype = self._dtype
        if other._dtype is dtype:
            return apply(_MATMUL, self, other)
        dtype = dt.promote(dtype, other._dtype)
        # a quantized operand stays quantized: dispatch sends it to the quantized matmul
        x = self if self._dtype.quantized else dispatch.cast(self, dtype)
        y = other if other._dtype.quantized else dispatch.cast(other, dtype)
        return apply(_MATMUL, x, y)

    __matmul__ = matmul

    def __rmatmul__(self, other):
        if isinstance(other, np.ndarray):
            return _from_array(other, self).matmul(self)
        raise TypeError(f"matmul: expected a tensor, got {type(other).__name__}")

    # --- sorting ----------------------------------------------------------------------
    def sort(self, dim=-1, descending=False):
        """Sorted values along ``dim`` (stable; NaN sorts as the largest value)."""
        return self.sort_with_indices(dim, descending)[0]

    def sort_with_indices(self, dim=-1, descending=False):
        dispatch.check_kind("sort", Op.SORT, self)
        axis = normalize_dim("sort", dim, self.ndim)
        return apply(Op.SORT, self, axis=axis, descending=descending,
                     out_dtype=(self._dtype, dt.int64))

    def argsort(self, dim=-1, descending=False):
        return self.sort_with_indices(dim, descending)[1]

    def topk(self, k, dim=-1):
        """The ``k`` largest values along ``dim``, largest first."""
        return self.topk_with_indices(k, dim)[0]

    def topk_with_indices(self, k, dim=-1, largest=True):
        dispatch.check_kind("topk", Op.TOPK, self)
        axis = normalize_dim("topk", dim, self.ndim)
        n = self.shape[axis] if self.ndim else 1
        if not isinstance(k, numbers.Integral) or not 0 <= k <= n:
            raise ValueError(f"topk: k={k!r} is out of range for dim {dim} of size {n}")
        return apply(Op.TOPK, self, k=int(k), axis=axis, largest=largest,
                     out_dtype=(self._dtype, dt.int64))

    # --- layout -------------------------------------------------------------------------
    def reshape(self, *shape):
        """Same data in a new shape; one dim may be -1."""
        new = layout.reshape(self.shape, shape)
        if new == self.shape:
            return self
        return apply(_RESHAPE, self, shape=new)

    view = reshape

    def flatten(self, start_dim=0, end_dim=-1):
        if self.ndim == 0:
            return self.reshape(1)
        s = normalize_dim("flatten", start_dim, self.ndim)
        e = normalize_dim("flatten", end_dim, self.ndim)
        if s > e:
            raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
        shape = self.shape
        return self.reshape(shape[:s] + (math.prod(shape[s:e + 1]),) + shape[e + 1:])

    def squeeze(self, dim=None):
        """Drop dims of size 1 (all of them, or the given ones; others are kept)."""
        dims = normalize_dims("squeeze", dim, self.ndim)
        return self.reshape(tuple(n for d, n in enumerate(self.shape) if not (d in dims and n == 1)))

    def unsqueeze(self, dim):
        """Insert a dim of size 1 at ``dim`` (``-1`` appends)."""
        if not isinstance(dim, int) or not -self.ndim - 1 <= dim <= self.ndim:
            raise IndexError(f"unsqueeze: dim {dim} is out of range for a tensor with {self.ndim} dims")
        dim %= self.ndim + 1
        shape = self.shape
        return self.reshape(shape[:dim] + (1,) + shape[dim:])

    def permute(self, *dims):
        perm = layout.permutation(dims, self.ndim)
        if perm == tuple(range(self.ndim)):
            return self
        return apply(Op.PERMUTE, self, dims=perm)

    def transpose(self, dim0=-2, dim1=-1):
        """Swap two dims (the last two by default)."""
        ndim = len(self._buf.shape)
        if ndim < 2 and (dim0, dim1) == (-2, -1):
            return self
        d0 = normalize_dim("transpose", dim0, ndim)
        d1 = normalize_dim("transpose", dim1, ndim)
        if d0 == d1:
            return self
        perm = list(range(ndim))
        perm[d0], perm[d1] = d1, d0
        # (a permutation by construction: not ``permute``'s checks again, per-op overhead)
        return apply(_PERMUTE, self, dims=tuple(perm))

    swap_dims = transpose

    @property
    def T(self):
        if len(self._buf.shape) != 2:
            raise ValueError(f"T: expected a 2-D tensor, got shape {self.shape}; use permute")
        return apply(_PERMUTE, self, dims=(1, 0))

    @property
    def mT(self):
        """The last two dims swapped (a batch of transposed matrices)."""
        ndim = len(self._buf.shape)
        if ndim < 2:
            raise ValueError(f"mT: expected at least 2 dims, got shape {self.shape}")
        return apply(_PERMUTE, self, dims=tuple(range(ndim - 2)) + (ndim - 1, ndim - 2))

    def expand(self, *shape):
        """Broadcast to ``shape`` without copying (-1 keeps a dim)."""
        new = layout.expand(self.shape, shape)
        if new == self.shape:
            return self
        return apply(Op.EXPAND, self, shape=new)

    def broadcast_to(self, *shape):
        return self.expand(*shape)

    def flip(self, dims):
        dims = normalize_dims("flip", dims, self.ndim)
        return apply(Op.FLIP, self, dims=dims)

    def __getitem__(self, index):
        """Basic indexing (ints, slices with any step, None, ``...``) gives views; Int and Bool
        tensors (numpy arrays, lists of ints) index as numpy's vectorised indexing does.

        >>> x = ember.tensor([[1, 2], [3, 4], [5, 6]])
        >>> x[x[:, 0] > 2], x[[0, 2], 1]
        (tensor([[3, 4],
               [5, 6]], dtype=int64), tensor([2, 6], dtype=int64))
        """
        kind = type(index)
        if kind is tuple:
            for k in index:   # a basic key is told apart without a call (per-op overhead)
                if type(k) not in _BASIC_INDEX:
                    advanced = indexing.normalize_key(index, self)
                    if advanced is not None:
                        return indexing.getitem(self, advanced)
                    break
        elif kind not in _BASIC_INDEX:
            advanced = indexing.normalize_key(index, self)
            if advanced is not None:
                return indexing.getitem(self, advanced)
        idx = layout.basic_index(index, self.shape)
        return apply(_SLICE, self, index=idx)

    def __setitem__(self, index, value):
        """``t[index] = value`` (any index ``[]`` takes; ``value`` a tensor or Python scalar,
        broadcast, cast to ``t``'s dtype).

        Copy-on-write: the new value is computed (``slice_assign``, ``where`` or ``scatter``,
        recorded for autodiff like any op) and ``t`` is rebound to it.  No storage is written,
        so views taken before, deferred (fused) readers and saved autodiff values keep the old
        value (docs/decisions.md "__setitem__").

        >>> x = ember.zeros(4)
        >>> x[1:3] = 5.0
        >>> x
        tensor([0., 5., 5., 0.], dtype=float32)
        """
        new = indexing.setitem(self, index, value)
        self._buf = new._buf
        self._device = new._device
        self._node = new._node

    def narrow(self, dim, start, length):
        if self.ndim == 0:
            raise IndexError("narrow: a 0-d tensor has no dim to narrow")
        d = normalize_dim("narrow", dim, self.ndim)
        start, length = _int_arg("narrow", "start", start), _int_arg("narrow", "length", length)
        n = self.shape[d]
        if start < 0:
            start += n
        if not (0 <= start <= n and 0 <= length <= n - start):
            raise IndexError(f"narrow: start {start} and length {length} out of range for dim {dim} of size {n}")
        return self[(slice(None),) * d + (slice(start, start + length),)]

    def split(self, split_size_or_sections, dim=0):
        """Split along ``dim`` into pieces of a given size, or of the listed sizes."""
        if self.ndim == 0:
            raise IndexError("split: a 0-d tensor has no dim to split")
        d = normalize_dim("split", dim, self.ndim)
        n = self.shape[d]
        sections = split_size_or_sections
        if isinstance(sections, numbers.Integral) and not isinstance(sections, (bool, np.bool_)):
            size = int(sections)
            if size <= 0:
                raise ValueError(f"split: split size must be positive, got {size}")
            sizes = [min(size, n - s) for s in range(0, n, size)] or [0]
        else:
            if not isinstance(sections, (list, tuple)):
                raise TypeError(f"split: expected a split size (int) or a list of sizes, got {sections!r}")
            sizes = [_int_arg("split", "a section size", v) for v in sections]
            if sum(sizes) != n or any(s < 0 for s in sizes):
                raise ValueError(f"split: sections {sizes} do not add up to dim {dim} of size {n}")
        out, start = [], 0
        for s in sizes:
            out.append(self.narrow(d, start, s))
            start += s
        return out

    def chunk(self, chunks, dim=0):
        """Up to ``chunks`` pieces of equal size (the last may be smaller), as PyTorch."""
        if not isinstance(chunks, numbers.Integral) or chunks <= 0:
            raise ValueError(f"chunk: chunks must be a positive int, got {chunks!r}")
        if self.ndim == 0:
            raise IndexError("chunk: a 0-d tensor has no dim to chunk")
        d = normalize_dim("chunk", dim, self.ndim)
        return self.split(max(1, -(-self.shape[d] // chunks)), d)

    def repeat(self, *sizes):
        """Tile the tensor ``sizes[i]`` times along each dim (PyTorch ``repeat``)."""
        sizes = layout.normalize_shape("repeat", sizes)
        if len(sizes) < self.ndim or any(s < 0 for s in sizes):
            raise ValueError(f"repeat: sizes {sizes} must be non-negative and at least {self.ndim} long")
        shape = (1,) * (len(sizes) - self.ndim) + self.shape
        if any(r > sys.maxsize for r in sizes):
            raise ValueError(f"repeat: sizes {sizes} beyond 2**63 - 1")
        layout.check_size("repeat", tuple(r * n for r, n in zip(sizes, shape)))
        x = self.reshape(shape)
        inter = []
        expanded = []
        for r, n in zip(sizes, shape):
            inter += [1, n]
            expanded += [r, n]
        x = x.reshape(inter).expand(expanded)
        return apply(Op.CONTIGUOUS, x).reshape(tuple(r * n for r, n in zip(sizes, shape)))

    def contiguous(self):
        return apply(Op.CONTIGUOUS, self)

    def slice_assign(self, index, values):
        """A copy of ``self`` with ``self[index]`` replaced by ``values`` (broadcast)."""
        idx = layout.basic_index(index, self.shape, "slice_assign")
        target = self._data[idx].shape
        v = _as_tensor_like(values, self, "slice_assign")
        if dispatch.broadcast_shapes("slice_assign", v.shape, target) != target:
            raise ValueError(f"slice_assign: values of shape {v.shape} do not fit the slice of shape {target}")
        return apply(Op.SLICE_ASSIGN, self, v.cast(self._dtype), index=idx)

    # --- indexing -------------------------------------------------------------------------
    def index_select(self, dim, indices):
        """Entries at ``indices`` (a 1-D Int tensor) along ``dim``."""
        axis = normalize_dim("index_select", dim, self.ndim)
        _check_index_tensor("index_select", indices, self)
        if indices.ndim != 1:
            raise ValueError(f"index_select: indices must be 1-D, got shape {indices.shape}")
        if self.ndim == 0 and indices.shape[0] != 1:
            raise ValueError(f"index_select: a 0-d tensor takes exactly one index, got {indices.shape[0]}")
        dispatch.check_index_range("index_select", indices, self.shape[axis] if self.ndim else 1, axis)
        return apply(Op.INDEX_SELECT, self, indices, axis=axis)

    def gather(self, dim, index):
        """``out[i][j] = self[index[i][j]][j]`` along ``dim`` (PyTorch ``gather``)."""
        axis = normalize_dim("gather", dim, self.ndim)
        _check_index_tensor("gather", index, self)
        _check_index_shape("gather", index, self, axis)
        dispatch.check_index_range("gather", index, self.shape[axis] if self.ndim else 1, axis)
        return apply(Op.GATHER, self, index, axis=axis)

    def scatter(self, dim, index, values, reduce="assign"):
        """A copy with ``values`` written (or added, ``reduce="add"``) at ``index`` along ``dim``."""
        if reduce not in ("assign", "add"):
            raise ValueError(f"scatter: reduce must be 'assign' or 'add', got {reduce!r}")
        axis = normalize_dim("scatter", dim, self.ndim)
        _check_index_tensor("scatter", index, self)
        _check_index_shape("scatter", index, self, axis)
        v = _as_tensor_like(values, self, "scatter").cast(self._dtype)
        if v.shape != index.shape:
            if v.ndim:
                raise ValueError(f"scatter: values shape {v.shape} must equal index shape "
                                 f"{index.shape} (or values be a scalar)")
            v = v.expand(index.shape)
        dispatch.check_index_range("scatter", index, self.shape[axis] if self.ndim else 1, axis)
        return apply(Op.SCATTER, self, index, v, axis=axis, reduce=reduce)

    def mask_where(self, mask, values):
        """``values`` where ``mask`` is true, else ``self`` (broadcast; keeps self's dtype)."""
        _check_mask("mask_where", mask, self)
        v = _as_tensor_like(values, self, "mask_where").cast(self._dtype)
        return elementwise(Op.WHERE, mask, v, self)

    def mask_fill(self, mask, value):
        """``value`` where ``mask`` is true, else ``self``."""
        _check_mask("mask_fill", mask, self)
        return elementwise(Op.WHERE, mask, _as_tensor_like(value, self, "mask_fill").cast(self._dtype), self)

    def nonzero(self):
        """Indices of the non-zero entries, one 1-D int64 tensor per dim (numpy ``nonzero``)."""
        idx = self.argwhere()
        return [idx[:, d] for d in range(self.ndim)]

    def argwhere(self):
        """Indices of the non-zero entries as an ``(n, ndim)`` int64 tensor."""
        if self._dtype.kind is dt.Complex:   # (the kernels test bit patterns of real values)
            return (self != 0).argwhere()
        return apply(Op.NONZERO, self, dtype=dt.int64)

    def one_hot(self, num_classes):
        """Int tensor of class indices -> int64 tensor with a trailing one-hot dim."""
        if self._dtype.kind is not dt.Int:
            raise TypeError(f"one_hot: expected an Int tensor, got {self._dtype.name}")
        num_classes = _int_arg("one_hot", "num_classes", num_classes)
        if not 0 <= num_classes < 2 ** 63:
            raise ValueError(f"one_hot: num_classes must be non-negative and fit an int64, got {num_classes}")
        dispatch.check_index_range("one_hot", self, num_classes, what="class value",
                                   error=ValueError)
        from .creation import arange
        classes = arange(num_classes, device=self._device)
        return (self.unsqueeze(-1) == classes).cast(dt.int64)

    def tril(self, diagonal=0):
        """Keep the lower triangle of the last two dims (zero above ``diagonal``)."""
        return self.mask_fill(~_triangle(self, "tril", diagonal, lower=True), 0)

    def triu(self, diagonal=0):
        return self.mask_fill(~_triangle(self, "triu", diagonal, lower=False), 0)


# --- helpers used by the methods above ----------------------------------------------------
def _check_float(name, t):
    if t._dtype.kind is not dt.Float:
        raise TypeError(f"{name}: expected a Float tensor, got {t._dtype.kind.name} ({t._dtype.name})")


def _int_arg(name, what, value):
    """``value`` as an int (any integer type); TypeError naming the op otherwise."""
    if not isinstance(value, (bool, np.bool_)):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(f"{name}: {what} must be an int, got {value!r}")


def _is_int_scalar(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_))


def _check_int_power(base, exponent):
    """numpy refuses integer powers with negative exponents (its result would be a fraction)."""
    for x in (base, exponent):
        if (x._dtype.kind is dt.Float) if _is_tensor(x) else not isinstance(x, numbers.Integral):
            return   # a float power
    shapes = [x.shape for x in (base, exponent) if _is_tensor(x)]
    if 0 in dispatch.broadcast_shapes("pow", *shapes):
        return   # nothing is computed (numpy raises per element computed)
    if _is_tensor(exponent):
        negative = exponent._dtype.np.kind == "i" and (exponent < 0).any().item()
    else:
        negative = exponent < 0
    if negative:
        raise ValueError("pow: integers to negative integer powers are not allowed")


def _check_quantized(name, t):
    if not t._dtype.quantized:
        raise TypeError(f"{name}: the tensor is not quantized ({t._dtype.name}); use quantize() first")
    return t


def _check_index_tensor(name, idx, t):
    if not _is_tensor(idx) or idx._dtype.kind is not dt.Int:
        raise TypeError(f"{name}: indices must be an Int tensor, got "
                        f"{idx._dtype.name if _is_tensor(idx) else type(idx).__name__}")
    dispatch.same_device(name, [t, idx])


def _check_index_shape(name, index, t, axis):
    """gather and scatter: ``index`` has ``t``'s number of dims and fits ``t`` outside ``axis``."""
    if t.ndim == 0:
        return
    if index.ndim != t.ndim:
        raise ValueError(f"{name}: index must have as many dims as the tensor: index shape "
                         f"{index.shape}, tensor shape {t.shape}")
    for d, (ni, nx) in enumerate(zip(index.shape, t.shape)):
        if d != axis and ni > nx:
            raise ValueError(f"{name}: index shape {index.shape} exceeds the tensor's shape "
                             f"{t.shape} in dim {d} (only dim {axis}, the indexed one, may be larger)")


def _check_mask(name, mask, t):
    if not _is_tensor(mask) or mask._dtype is not dt.bool_:
        raise TypeError(f"{name}: the mask must be a Bool tensor")
    dispatch.same_device(name, [t, mask])
    dispatch.broadcast_shapes(name, mask.shape, t.shape)


def _from_array(a, t):
    """numpy array ``a`` next to tensor ``t``: a tensor of ``a``'s dtype on ``t``'s device."""
    from .creation import tensor
    return tensor(a, device=t._device.base())


def _as_tensor_like(values, t, name):
    if _is_tensor(values):
        dispatch.same_device(name, [t, values])
        return values
    from .creation import tensor
    return tensor(values, dtype=t._dtype, device=t._device)


def _accumulator(t, dtype):
    """The dtype a sum, product or scan of ``t`` runs in: ``dtype`` when given, else ``t``'s
    for floats and complex numbers (a quantized tensor keeps its QFloat dtype: quant.apply
    reduces it), uint64 for unsigned ints and int64 for signed ints and bools (numpy)."""
    if dtype is not None:
        return dt.as_dtype(dtype)
    if t._dtype.kind is dt.Float or t._dtype.kind is dt.Complex:
        return t._dtype
    return dt.uint64 if t._dtype.np.kind == "u" else dt.int64


_LOGICAL_REDUCTIONS = frozenset((Op.ANY_, Op.ALL))
_SUM_PROD = frozenset((Op.SUM, Op.PROD))
_MAX_MIN = frozenset((Op.MAX, Op.MIN))


def _reduce(op, t, dim, keepdim, dtype=None):
    name = dispatch.op_name(op)
    dispatch.check_kind(name, op, t)
    axes = normalize_dims(name, dim, len(t._buf.shape))
    if op in _LOGICAL_REDUCTIONS:
        x, dtype = (t if t._dtype is dt.bool_ else t != 0), dt.bool_
    elif op in _SUM_PROD:
        dtype = _accumulator(t, dtype)
        # a narrower integer input is read as it is (the kernels widen on the fly); any other
        # requested dtype is a cast first, so the sum runs (and wraps) in that dtype
        x = t if (t._dtype is dtype or dtype is _accumulator(t, None)) else t.cast(dtype)
    else:
        x, dtype = t, t._dtype
    if op in _MAX_MIN and x.numel() == 0 and (x.ndim == 0 or any(x.shape[a] == 0 for a in axes)):
        raise ValueError(f"{name}: cannot reduce an empty dim (shape {t.shape}, dims {axes})")
    out = apply(op, x, axes=axes, dtype=dtype)
    return _keep(out, t.shape, axes) if keepdim else out


def _keep(out, shape, axes):
    return out.reshape(tuple(1 if d in axes else n for d, n in enumerate(shape)))


def _arg_reduce(op, t, dim, keepdim):
    name = op.name.lower()
    dispatch.check_kind(name, op, t)
    if t.numel() == 0 and (dim is None or t.ndim == 0 or t.shape[normalize_dim(name, dim, t.ndim)] == 0):
        # an empty reduced dim has no extreme; empty other dims give an empty result (numpy)
        raise ValueError(f"{name}: cannot reduce an empty dim (shape {t.shape}, dim {dim})")
    if dim is None:
        out = apply(op, t, axis=None, dtype=dt.int64)
        return out.reshape((1,) * t.ndim) if keepdim else out
    axis = normalize_dim(name, dim, t.ndim)
    if t.ndim == 0:
        return apply(op, t, axis=None, dtype=dt.int64)
    out = apply(op, t, axis=axis, dtype=dt.int64)
    return _keep(out, t.shape, (axis,)) if keepdim else out


def _scan(op, t, dim, dtype=None):
    name = op.name.lower()
    dispatch.check_kind(name, op, t)
    axis = normalize_dim(name, dim, t.ndim)
    dtype = _accumulator(t, dtype)
    if t.ndim == 0:
        return t.cast(dtype)
    x = t if (t._dtype is dtype or dtype is _accumulator(t, None)) else t.cast(dtype)
    return apply(op, x, axis=axis, dtype=dtype)


def _triangle(t, name, diagonal, lower):
    diagonal = _int_arg(name, "diagonal", diagonal)
    if t.ndim < 2:
        raise ValueError(f"{name}: expected at least 2 dims, got shape {t.shape}")
    from .creation import arange
    rows = arange(t.shape[-2], device=t._device).unsqueeze(-1)
    cols = arange(t.shape[-1], device=t._device)
    return (cols - rows <= diagonal) if lower else (cols - rows >= diagonal)


