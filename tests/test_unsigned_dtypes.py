"""uint16, uint32 and uint64 through the engine, against numpy: arithmetic and comparisons,
promotion with the other dtypes, reductions and scans (unsigned sums are uint64), sorting,
searching, indexing and casts.  One table of expressions, each applied unchanged to a numpy
array and an Ember tensor."""
import numpy as np
import pytest

import ember
from checks import check

UNSIGNED = ("uint16", "uint32", "uint64")

EXPRS = {
    "add_mul": lambda x: x * 3 + x,
    "sub_wraps": lambda x: x - 7,                          # wraps around, as numpy
    "floordiv_mod": lambda x: x // 4 + x % 5,
    "divide": lambda x: x / 4,                             # true division: float64
    "compare": lambda x: (x > 5) | (x == 3),
    "bitwise": lambda x: (x & 6) ^ (x | 1),
    "shift": lambda x: (x << 2) >> 1,
    "maximum": lambda x: np.maximum(x, x[::-1]) if isinstance(x, np.ndarray) else x.maximum(x[::-1]),
    "sum": lambda x: x.sum(),
    "sum_dim": lambda x: x.reshape(3, 4).sum(1),
    "prod": lambda x: x[:5].prod(),
    "cumsum": lambda x: x.cumsum(0),
    "max": lambda x: x.max(),
    "argmin": lambda x: x.argmin(),
    "mean": lambda x: x.mean(),
    "sort": lambda x: np.sort(x, kind="stable") if isinstance(x, np.ndarray) else x.sort(),
    "argsort_desc": lambda x: (np.argsort(-x.astype(np.float64), kind="stable")
                               if isinstance(x, np.ndarray) else x.argsort(descending=True)),
    "mask_index": lambda x: x[x > 4],
    "int_index": lambda x: x[[0, -1, 3]],
    "cast_float32": lambda x: x.astype(np.float32) if isinstance(x, np.ndarray) else x.cast(ember.float32),
    "cast_int8": lambda x: x.astype(np.int8) if isinstance(x, np.ndarray) else x.cast(ember.int8),
}


@pytest.mark.parametrize("dtype", UNSIGNED)
@pytest.mark.parametrize("name", EXPRS)
def test_unsigned_ops_match_numpy(name, dtype):
    a = np.array([5, 3, 9, 0, 2, 40000 % 2 ** 16, 7, 3, 12, 1, 65535, 4], dtype)
    fn = EXPRS[name]
    with np.errstate(over="ignore"):
        want = fn(a)
    got = fn(ember.tensor(a))
    if name == "argsort_desc":
        want = np.argsort(-a.astype(np.float64), kind="stable")
    check(got, np.asarray(want).astype(np.int64) if np.asarray(want).dtype == np.intp else want)


@pytest.mark.parametrize("a, b", [("uint16", "int16"), ("uint32", "int32"), ("uint64", "int64"),
                                  ("uint8", "uint64"), ("uint32", "float32"), ("uint16", "int8")])
def test_promotion_with_other_dtypes(a, b):
    x = np.array([1, 2, 3], a)
    y = np.array([4, 5, 6], b)
    check(ember.tensor(x) + ember.tensor(y), x + y)


@pytest.mark.parametrize("src", UNSIGNED)
@pytest.mark.parametrize("dst", ["float64", "int64", "uint8", "bool", "uint16", "uint64"])
def test_casts(src, dst):
    a = np.array([0, 1, 200, 255, 1000], src)
    check(ember.tensor(a).cast(getattr(ember, dst) if dst != "bool" else ember.bool_), a.astype(dst))
    b = np.array([0.0, 1.5, 250.0, 60000.7])
    check(ember.tensor(b).cast(getattr(ember, src)), b.astype(src))


def test_search_and_unique():
    a = np.array([4, 1, 4, 9, 0], np.uint32)
    s = np.sort(a)
    check(ember.searchsorted(ember.tensor(s), ember.tensor(np.array([4, 10], np.uint32))),
          np.searchsorted(s, np.array([4, 10], np.uint32)))
    values, counts = ember.unique(ember.tensor(a), return_counts=True)
    want_v, want_c = np.unique(a, return_counts=True)
    check(values, want_v)
    check(counts, want_c.astype(np.int64))
