"""Ember: a JIT-compiled tensor engine for Python.

Tensors live on a device (``ember.Device.cpu()``); their ops run in Numba
kernels compiled once and cached on disk.  ``import ember`` is fast: Numba is
loaded when the first op runs, and CUDA only when a CUDA device is used.
"""
from . import threads  # noqa: F401  (first: OMP_WAIT_POLICY, before any OpenMP runtime loads)
from . import random
from .compile import CompileError, compile

from .contract import einsum, outer, tensordot, trace
from .creation import (arange, cat, empty, empty_like, eye, from_cuda_array, from_dlpack, from_numpy, full,
                       full_like, linspace, log_softmax, ones, ones_like, softmax, stack, tensor,
                       where, zeros, zeros_like)
from .complex_ops import angle, complex, conj, imag, is_complex, polar, real
from .device import (CheckpointingStrategy, Device, DeviceError, StrategyError, empty_cache,
                     memory_stats, set_default_device)
from .dtypes import (Bool, Complex, DType, Float, Int, Kind, QFloat, bool_, complex64, complex128,
                     float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64)
from .ir import Op
from .quant import (QuantScheme, QuantStore, QuantValue, get_quant_propagation,
                    set_quant_propagation)
from .tensor import Tensor
from .elementwise import (abs, absolute, acos, acosh, add, arccos, arccosh, arcsin, arcsinh, arctan,
                          arctan2, arctanh, asin, asinh, atan, atan2, atanh, bitwise_and,
                          bitwise_left_shift, bitwise_not, bitwise_or, bitwise_right_shift,
                          bitwise_xor, ceil, clamp, clip, copysign, cos, cosh, div, divide, eq,
                          equal, erf, exp, expm1, floor, floor_divide, ge, gelu, greater,
                          greater_equal, gt, hypot, isclose, isfinite, isinf, isnan, le, less,
                          less_equal, log, log1p, log2, log10, logaddexp, logical_and,
                          logical_not, logical_or, logical_xor, lt, maximum, minimum, mul,
                          multiply, ne, neg, negative, nextafter, not_equal, pow, recip,
                          reciprocal, relu, remainder, round, rsqrt, sigmoid, sign, signbit, silu,
                          sin, sinh, sqrt, square, sub, subtract, tan, tanh, true_divide, trunc)
from .manipulation import (broadcast_shapes, broadcast_tensors, diff, meshgrid, moveaxis, movedim,
                           repeat_interleave, roll, take_along_dim, tile, unbind)
from .search import count_nonzero, searchsorted, unique
from .benchmark import benchmark, synchronize  # timing helpers (perf/, README "Performance regression scripts")


def __getattr__(name):
    # autodiff names load the autograd package on first use, keeping `import ember` light
    if name in ("Gradients", "AutodiffError", "NotTrackedError", "GraphConsumedError"):
        from .autograd import graph
        return getattr(graph, name)
    if name in ("nn", "optim", "distributed", "fft", "linalg", "array_api"):
        import importlib
        return importlib.import_module(f"ember.{name}")
    raise AttributeError(f"module 'ember' has no attribute {name!r}")

__version__ = "0.1.0"

__all__ = [
    "Tensor", "Device", "DeviceError", "StrategyError", "CheckpointingStrategy", "set_default_device", "Op",
    "DType", "Kind", "Float", "Int", "Bool", "Complex", "QFloat",
    "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool_",
    "complex64", "complex128",
    "tensor", "from_numpy", "from_dlpack", "zeros", "ones", "full", "empty",
    "zeros_like", "ones_like", "full_like", "empty_like", "arange", "linspace", "eye",
    "cat", "stack", "where", "softmax", "log_softmax", "random", "nn", "optim", "distributed",
    "linalg", "einsum", "tensordot", "outer", "trace",
    "QuantScheme", "QuantValue", "QuantStore", "set_quant_propagation", "get_quant_propagation",
    "from_cuda_array", "empty_cache", "memory_stats", "synchronize", "benchmark", "array_api",
    "compile", "CompileError",
    "complex", "polar", "real", "imag", "conj", "angle", "is_complex", "fft",
    # elementwise functions (engine/elementwise.py)
    "abs", "absolute", "acos", "acosh", "add", "arccos", "arccosh", "arcsin", "arcsinh", "arctan",
    "arctan2", "arctanh", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
    "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift", "bitwise_xor", "ceil",
    "clamp", "clip", "copysign", "cos", "cosh", "div", "divide", "eq", "equal", "erf", "exp",
    "expm1", "floor", "floor_divide", "ge", "gelu", "greater", "greater_equal", "gt", "hypot",
    "isclose", "isfinite", "isinf", "isnan", "le", "less", "less_equal", "log", "log1p", "log2",
    "log10", "logaddexp", "logical_and", "logical_not", "logical_or", "logical_xor", "lt",
    "maximum", "minimum", "mul", "multiply", "ne", "neg", "negative", "nextafter", "not_equal",
    "pow", "recip", "reciprocal", "relu", "remainder", "round", "rsqrt", "sigmoid", "sign",
    "signbit", "silu", "sin", "sinh", "sqrt", "square", "sub", "subtract", "tan", "tanh",
    "true_divide", "trunc",
    # layout, search and set functions (engine/manipulation.py, engine/search.py)
    "broadcast_shapes", "broadcast_tensors", "diff", "meshgrid", "moveaxis", "movedim",
    "repeat_interleave", "roll", "take_along_dim", "tile", "unbind", "count_nonzero",
    "searchsorted", "unique",
]
