"""Statistical, searching, sorting, set and utility functions of the standard."""

from collections import namedtuple

from .. import creation, dispatch, manipulation, search
from .. import dtypes as dt
from ..ir import Op

from ._dtypes import _check_array, as_dtype
from ._manipulation import _axes


def _sum_dtype(x, dtype, name):
    """The standard's accumulator: ``dtype``, else the input's for floats and complex numbers,
    int64 for signed ints (the default integer), uint64 for unsigned ints."""
    if dtype is not None:
        return as_dtype(dtype, name)
    if x.dtype.kind is dt.Float or x.dtype.kind is dt.Complex:
        return x.dtype
    return dt.uint64 if x.dtype.np.kind == "u" else dt.int64


def sum(x, /, *, axis=None, dtype=None, keepdims=False):
    _check_array("sum", x)
    return x.sum(_axes("sum", axis, x.ndim), keepdims, _sum_dtype(x, dtype, "sum"))


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    _check_array("prod", x)
    return x.prod(_axes("prod", axis, x.ndim), keepdims, _sum_dtype(x, dtype, "prod"))


def _float_only(name, x, complex_too=False):
    _check_array(name, x)
    if x.dtype.kind is not dt.Float and not (complex_too and x.dtype.kind is dt.Complex):
        raise TypeError(f"{name}: expected a {'' if complex_too else 'real '}floating array, got "
                        f"{x.dtype.name}")


def mean(x, /, *, axis=None, keepdims=False):
    _float_only("mean", x, complex_too=True)
    return x.mean(_axes("mean", axis, x.ndim), keepdims)


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Variance with ``correction`` degrees of freedom removed (0 by default: the standard's
    and numpy's, where Ember's ``Tensor.var`` follows PyTorch's 1)."""
    _float_only("var", x)
    return x.var(_axes("var", axis, x.ndim), keepdims, correction)


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    _float_only("std", x)
    return x.std(_axes("std", axis, x.ndim), keepdims, correction)


def max(x, /, *, axis=None, keepdims=False):
    _check_array("max", x)
    return x.max(_axes("max", axis, x.ndim), keepdims)


def min(x, /, *, axis=None, keepdims=False):
    _check_array("min", x)
    return x.min(_axes("min", axis, x.ndim), keepdims)


def all(x, /, *, axis=None, keepdims=False):
    _check_array("all", x)
    return x.all(_axes("all", axis, x.ndim), keepdims)


def any(x, /, *, axis=None, keepdims=False):
    _check_array("any", x)
    return x.any(_axes("any", axis, x.ndim), keepdims)


def _cumulative(name, method, identity, x, axis, dtype, include_initial):
    _check_array(name, x)
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"{name}: axis is required for an array of {x.ndim} dims")
        axis = 0
    if x.ndim == 0:
        raise ValueError(f"{name}: expected at least one dim, got a 0-d array")
    a = dispatch.normalize_dim(name, axis, x.ndim)
    d = _sum_dtype(x, dtype, name)
    out = getattr(x, method)(a, dtype=d)
    if include_initial:
        shape = x.shape[:a] + (1,) + x.shape[a + 1:]
        first = creation.full(shape, identity, d, x.device.base())
        out = creation.cat([first, out], a)
    return out


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running sums along ``axis``; ``include_initial`` puts the empty sum (0) first."""
    return _cumulative("cumulative_sum", "cumsum", 0, x, axis, dtype, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    return _cumulative("cumulative_prod", "cumprod", 1, x, axis, dtype, include_initial)


def argmax(x, /, *, axis=None, keepdims=False):
    _check_array("argmax", x)
    return x.argmax(axis, keepdims)


def argmin(x, /, *, axis=None, keepdims=False):
    _check_array("argmin", x)
    return x.argmin(axis, keepdims)


def count_nonzero(x, /, *, axis=None, keepdims=False):
    _check_array("count_nonzero", x)
    return search.count_nonzero(x, _axes("count_nonzero", axis, x.ndim), keepdims)


def nonzero(x, /):
    """The indices of the non-zero entries, one int64 array per dim (a 0-d array raises)."""
    _check_array("nonzero", x)
    if x.ndim == 0:
        raise ValueError("nonzero: a 0-d array has no dims to index; use nonzero(reshape(x, (1,)))")
    return tuple(x.nonzero())


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    _check_array("searchsorted", x1)
    return search.searchsorted(x1, x2, side=side, sorter=sorter)


def where(condition, x1=None, x2=None, /):
    """``x1`` where ``condition`` is true, else ``x2`` (broadcast; scalars allowed).  Without
    ``x1`` and ``x2``, ``nonzero(condition)`` (numpy's one-argument form, which scikit-learn
    uses)."""
    if x1 is None and x2 is None:
        return nonzero(condition)
    return dispatch.elementwise(Op.WHERE, condition, x1, x2)


def _sort_args(name, x, axis):
    _check_array(name, x)
    if x.dtype is dt.bool_:   # sorted as 0/1
        return x.cast(dt.uint8), True
    return x, False


def sort(x, /, *, axis=-1, descending=False, stable=True):
    """Sorted along ``axis`` (always stable; NaN last ascending, first descending)."""
    y, was_bool = _sort_args("sort", x, axis)
    out = y.sort(axis, descending)
    return out.cast(dt.bool_) if was_bool else out


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    y, _ = _sort_args("argsort", x, axis)
    return y.argsort(axis, descending)


UniqueAllResult = namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])


def unique_all(x, /):
    """Distinct values (sorted; each NaN distinct), the index of each one's first occurrence,
    the inverse indices (``x``'s shape) and the counts."""
    _check_array("unique_all", x)
    return UniqueAllResult(*search.unique(x, True, True, True))


def unique_counts(x, /):
    _check_array("unique_counts", x)
    return UniqueCountsResult(*search.unique(x, return_counts=True))


def unique_inverse(x, /):
    _check_array("unique_inverse", x)
    return UniqueInverseResult(*search.unique(x, return_inverse=True))


def unique_values(x, /):
    _check_array("unique_values", x)
    return search.unique(x)


def diff(x, /, n=1, axis=-1, *, prepend=None, append=None):
    """The ``n``-th forward difference along ``axis``.  (``n`` and ``axis`` may also be given
    by position, in numpy's order: scikit-learn calls ``xp.diff(x, 2)``.)"""
    _check_array("diff", x)
    return manipulation.diff(x, n, axis, prepend, append)



