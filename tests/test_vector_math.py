"""Vectorisable transcendental functions: error bounds against a float64 reference."""
import numpy as np
import pytest

import ember


def ulp_error(got, want, dtype):
    want_t = want.astype(dtype)
    spacing = np.spacing(np.abs(want_t)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want_t.astype(np.float64)) / spacing


def wide(dtype, n=200_001):
    lo, hi = (-110.0, 95.0) if dtype == np.float32 else (-760.0, 720.0)
    x = np.concatenate([np.linspace(lo, hi, n), np.random.default_rng(0).normal(0, 5, n),
                        np.geomspace(1e-30, 1.0, 1000), -np.geomspace(1e-30, 1.0, 1000)])
    return x.astype(dtype)


@pytest.mark.parametrize("dtype, bound", [(np.float32, 2), (np.float64, 4)])
def test_exp_error_bound(dtype, bound):
    x = wide(dtype)
    got = ember.from_numpy(x).exp().numpy()
    with np.errstate(over="ignore", under="ignore"):
        want = np.exp(x.astype(np.float64))
        finite = np.isfinite(want.astype(dtype)) & (want.astype(dtype) >= np.finfo(dtype).tiny)
    assert ulp_error(got[finite], want[finite], dtype).max() <= bound
    # overflow to inf and underflow to (sub)normals/zero agree with numpy exactly where numpy saturates
    with np.errstate(over="ignore", under="ignore"):
        ref = np.exp(x)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    tiny = ref < np.finfo(dtype).tiny
    np.testing.assert_allclose(got[tiny], ref[tiny], atol=float(np.finfo(dtype).smallest_subnormal) * 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exp_special_values(dtype):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype)
    got = ember.from_numpy(x).exp().numpy()
    np.testing.assert_array_equal(got, np.exp(x))
    assert got.dtype == dtype


@pytest.mark.parametrize("dtype, bound", [(np.float32, 3), (np.float64, 4)])
def test_sigmoid_error_bound(dtype, bound):
    x = wide(dtype)
    got = ember.from_numpy(x).sigmoid().numpy()
    x64 = x.astype(np.float64)
    want = np.where(x64 >= 0, 1 / (1 + np.exp(-np.abs(x64))), np.exp(-np.abs(x64)) / (1 + np.exp(-np.abs(x64))))
    ok = want.astype(dtype) >= np.finfo(dtype).tiny
    assert ulp_error(got[ok], want[ok], dtype).max() <= bound
    special = ember.from_numpy(np.array([np.inf, -np.inf, np.nan, 0.0], dtype)).sigmoid().numpy()
    np.testing.assert_array_equal(special, np.array([1.0, 0.0, np.nan, 0.5], dtype))


@pytest.mark.parametrize("dtype, bound", [(np.float32, 1), (np.float64, 4)])
def test_tanh_error_bound(dtype, bound):
    x = np.concatenate([wide(dtype), np.linspace(-0.5, 0.5, 100_001).astype(dtype)])
    got = ember.from_numpy(x).tanh().numpy()
    want = np.tanh(x.astype(np.float64))
    assert ulp_error(got, want, dtype).max() <= bound
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -1e-300], dtype)
    np.testing.assert_array_equal(ember.from_numpy(special).tanh().numpy(), np.tanh(special))
    assert np.signbit(ember.from_numpy(np.array([-0.0], dtype)).tanh().numpy()[0])
