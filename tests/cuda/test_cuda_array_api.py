"""The array API work on CUDA (simulator tier): searchsorted's kernel, unsigned dtypes,
vectorised indexing and assignment, the composed functions and the namespace itself, each
against the CPU backend."""
import numpy as np
import pytest

import ember
import ember.array_api as xp

from cuda_helpers import assert_same


def pair(a):
    c = ember.from_numpy(np.asarray(a))
    return c, c.to(ember.Device.cuda())


@pytest.mark.parametrize("dtype", ["float64", "int32", "uint16"])
def test_searchsorted(cuda, rng, dtype):
    seq = np.sort(rng.integers(0, 20, 11)).astype(dtype)
    vals = rng.integers(-2, 23, (3, 4)).astype(dtype)
    if dtype == "float64":
        seq[-2:] = np.nan
        vals[0, 0] = np.nan
    cs, gs = pair(seq)
    cv, gv = pair(vals)
    for right in (False, True):
        assert_same(ember.searchsorted(gs, gv, right=right), ember.searchsorted(cs, cv, right=right))
    assert_same(ember.searchsorted(gs[:0], gv), ember.searchsorted(cs[:0], cv))


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
def test_unsigned_dtypes(cuda, rng, dtype):
    a = rng.integers(0, 1000, (3, 5)).astype(dtype)
    c, g = pair(a)
    for f in (lambda t: t + 7, lambda t: t * t // 3, lambda t: t.sum(1), lambda t: t.max(0),
              lambda t: t.sort(1), lambda t: t.argmax(1), lambda t: t.cumsum(0),
              lambda t: t.cast(ember.float32), lambda t: (t > 500) & (t % 2 == 0),
              lambda t: t.floor(), lambda t: t.isnan()):
        assert_same(f(g), f(c))


def test_vectorised_indexing_and_assignment(cuda, rng):
    a = rng.standard_normal((4, 5, 3))
    c, g = pair(a)
    ci, gi = pair(np.array([3, -1, 0]))
    cm, gm = pair(a[:, 0, 0] > 0)
    for key in (lambda i, m: i, lambda i, m: (slice(None), i, 1), lambda i, m: m,
                lambda i, m: (i[:2, None], i[1:]), lambda i, m: (Ellipsis, i % 3)):
        assert_same(g[key(gi, gm)], c[key(ci, cm)])

    def assign(t, i, m):
        t = +t
        t[1:3, ::2] = 0.5
        t[m] = -1.0
        t[i, 2] = t[0, 0] * 3
        return t
    assert_same(assign(g, gi, gm), assign(c, ci, cm))


def test_composed_functions_and_namespace(cuda, rng):
    a = rng.integers(0, 5, (4, 6))
    c, g = pair(a)
    for f in (lambda t: ember.roll(t, 2, 1), lambda t: ember.tile(t, (2,)),
              lambda t: ember.diff(t, 1, 0), lambda t: ember.repeat_interleave(t[0], t[1]),
              lambda t: ember.unique(t, True, True, True)[2], lambda t: ember.count_nonzero(t, 1),
              lambda t: xp.cumulative_sum(t, axis=1, include_initial=True),
              lambda t: xp.unique_counts(t).counts, lambda t: xp.take_along_axis(t, t % 4, axis=0),
              lambda t: xp.std(xp.astype(t, xp.float64), axis=0),
              lambda t: xp.acos(xp.astype(t, xp.float32) / 5)):
        assert_same(f(g), f(c))
