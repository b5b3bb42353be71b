"""The Python array API standard, revision 2024.12, over ordinary ``ember.Tensor``s.

``x.__array_namespace__()`` returns this module; libraries that dispatch on it
(scikit-learn with ``array_api_dispatch=True``, SciPy with ``SCIPY_ARRAY_API=1``,
array-api-compat, array-api-extra) run on Ember tensors.  Its functions spell things the
standard's way (``axis=``, ``keepdims=``, ``concat``, ``correction=0``, positional-only
arrays) and are thin wrappers over Ember's own PyTorch-like API, so both reach the same
kernels, autodiff and fusion.

>>> import ember.array_api as xp
>>> x = xp.asarray([[1.0, 2.0], [3.0, 4.0]])
>>> xp.sum(x, axis=0), xp.concat([x, x], axis=None).shape
(tensor([4., 6.], dtype=float32), (8,))

The ``linalg`` and ``fft`` extensions are ``xp.linalg`` and ``xp.fft`` (over ``ember.linalg``
and ``ember.fft``).
"""
import math as _math

from .. import dtypes as _dt
from ._creation import (arange, asarray, empty, empty_like, eye, from_dlpack, full, full_like,
                        linspace, meshgrid, ones, ones_like, tril, triu, zeros, zeros_like)
from ._dtypes import (astype, can_cast, finfo, iinfo, isdtype, result_type)
from ._elementwise import (abs, acos, acosh, add, asin, asinh, atan, atan2, atanh, bitwise_and,
                           bitwise_invert, bitwise_left_shift, bitwise_or, bitwise_right_shift,
                           bitwise_xor, ceil, clip, conj, copysign, cos, cosh, divide, equal, exp,
                           expm1, floor, floor_divide, greater, greater_equal, hypot, imag,
                           isfinite, isinf, isnan, less, less_equal, log, log1p, log2, log10,
                           logaddexp, logical_and, logical_not, logical_or, logical_xor, maximum,
                           minimum, multiply, negative, nextafter, not_equal, positive, pow, real,
                           reciprocal, remainder, round, sign, signbit, sin, sinh, sqrt, square,
                           subtract, tan, tanh, trunc)
from ._info import __array_namespace_info__
from ._manipulation import (broadcast_arrays, broadcast_to, concat, expand_dims, flip, matmul,
                            matrix_transpose, moveaxis, permute_dims, repeat, reshape, roll,
                            squeeze, stack, take, take_along_axis, tensordot, tile, unstack,
                            vecdot)
from ._statistics import (all, any, argmax, argmin, argsort, count_nonzero, cumulative_prod,
                          cumulative_sum, diff, max, mean, min, nonzero, prod, searchsorted, sort,
                          std, sum, unique_all, unique_counts, unique_inverse, unique_values, var,
                          where)

from . import fft, linalg

__array_api_version__ = "2024.12"

# the revisions this namespace answers for: it has every name of each, with 2024.12's meaning
SUPPORTED_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")

e = _math.e
inf = _math.inf
nan = _math.nan
pi = _math.pi
newaxis = None

bool = _dt.bool_
int8, int16, int32, int64 = _dt.int8, _dt.int16, _dt.int32, _dt.int64
uint8, uint16, uint32, uint64 = _dt.uint8, _dt.uint16, _dt.uint32, _dt.uint64
float32, float64 = _dt.float32, _dt.float64
complex64, complex128 = _dt.complex64, _dt.complex128


def _namespace(api_version):
    """This module, for ``Tensor.__array_namespace__(api_version=...)``."""
    if api_version is not None and api_version not in SUPPORTED_VERSIONS:
        raise ValueError(f"ember.array_api: unsupported array API version {api_version!r}; "
                         f"supported: {', '.join(SUPPORTED_VERSIONS)}")
    import sys
    return sys.modules[__name__]


__all__ = [
    "__array_api_version__", "__array_namespace_info__", "fft", "linalg",
    "e", "inf", "nan", "pi", "newaxis",
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128",
    # creation
    "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like",
    "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
    # data types
    "astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type",
    # elementwise
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
    "bitwise_invert", "bitwise_left_shift", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
    "ceil", "clip", "conj", "copysign", "cos", "cosh", "divide", "equal", "exp", "expm1", "floor",
    "floor_divide", "greater", "greater_equal", "hypot", "imag", "isfinite", "isinf", "isnan",
    "less", "less_equal", "log", "log1p", "log2", "log10", "logaddexp", "logical_and",
    "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "multiply", "negative",
    "nextafter", "not_equal", "positive", "pow", "real", "reciprocal", "remainder", "round",
    "sign", "signbit", "sin", "sinh", "sqrt", "square", "subtract", "tan", "tanh", "trunc",
    # indexing, linear algebra, manipulation
    "take", "take_along_axis", "matmul", "matrix_transpose", "tensordot", "vecdot",
    "broadcast_arrays", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis",
    "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile", "unstack",
    # searching, sets, sorting, statistics, utilities
    "argmax", "argmin", "count_nonzero", "nonzero", "searchsorted", "where", "unique_all",
    "unique_counts", "unique_inverse", "unique_values", "argsort", "sort", "cumulative_prod",
    "cumulative_sum", "max", "mean", "min", "prod", "std", "sum", "var", "all", "any", "diff",
]
