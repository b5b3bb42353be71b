"""Vectorisable transcendental functions: error bounds against a float64 reference."""
import math
from decimal import Decimal, localcontext

import numpy as np
import pytest

import ember

SQRT1_2 = 0.7071067811865476


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


# float32 computes in float32 arithmetic (tanh_f32): 2 ulp, where the float64 formula gave 1
@pytest.mark.parametrize("dtype, bound", [(np.float32, 2), (np.float64, 4)])
def test_tanh_error_bound(dtype, bound):
    x = np.concatenate([wide(dtype), np.linspace(-0.6, 0.6, 1_000_001).astype(dtype)])
    got = ember.from_numpy(x).tanh().numpy()
    want = np.tanh(x.astype(np.float64))
    assert ulp_error(got, want, dtype).max() <= bound
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-300, -1e-300], dtype)
    np.testing.assert_array_equal(ember.from_numpy(special).tanh().numpy(), np.tanh(special))
    assert np.signbit(ember.from_numpy(np.array([-0.0], dtype)).tanh().numpy()[0])


# --- log, erf, gelu -------------------------------------------------------------------------
# float32 results are checked on many points against float64 numpy/math references; float64
# results on fewer points against exact values computed with Python's decimal (40 digits).
PI = Decimal("3.14159265358979323846264338327950288419716939937511")


def dec_erf_erfc(w):
    """(erf(w), erfc(w)) of a Decimal w >= 0, to ~30 digits: erf's Taylor series below 3,
    Laplace's continued fraction for erfc above (200 terms: converged from 3 on)."""
    with localcontext() as ctx:
        ctx.prec = 40
        if w < 3:
            term = total = w
            n = 0
            while abs(term) > Decimal(10) ** -45:
                n += 1
                term = -term * w * w / n
                total += term / (2 * n + 1)
            erf = 2 / PI.sqrt() * total
            return erf, 1 - erf
        f = w
        for k in range(200, 0, -1):
            f = w + Decimal(k) / 2 / f
        erfc = (-w * w).exp() / PI.sqrt() / f
        return 1 - erfc, erfc


def dec_erf(x):
    e = dec_erf_erfc(abs(Decimal(float(x))))[0]
    return e if x >= 0 else -e


def dec_gelu(x):
    d = Decimal(float(x))
    with localcontext() as ctx:
        ctx.prec = 40
        w = d / Decimal(2).sqrt()
        erf, erfc = dec_erf_erfc(abs(w))
        return d / 2 * (erfc if d < 0 else 1 + erf)   # = x/2 * erfc(-x / sqrt 2)


def dec_log(x):
    with localcontext() as ctx:
        ctx.prec = 40
        return Decimal(float(x)).ln()


def exact_ulps(got, exact):
    """|got - exact| in float64 ulps, for exact values as Decimals."""
    return np.array([float(abs(Decimal(float(g)) - e) / Decimal(np.spacing(abs(float(e)))))
                     for g, e in zip(got, exact)])


def f32_ulps(got, want64):
    """|got - want| in float32 ulps, against the float64 value (``ulp_error`` uses it rounded)."""
    spacing = np.spacing(np.abs(want64.astype(np.float32))).astype(np.float64)
    return np.abs(got.astype(np.float64) - want64) / spacing


def run(name, x):
    return getattr(ember.from_numpy(x), name)().numpy()


def test_log_error_bound_float32(rng):
    bits = rng.integers(1, 0x7F800000, 400_000, dtype=np.int32)   # positive floats, every exponent
    x = np.concatenate([bits.view(np.float32), rng.uniform(0.5, 2.0, 200_000).astype(np.float32),
                        np.float32(1) + np.arange(-200, 200, dtype=np.float32) * np.float32(2 ** -23)])
    got = run("log", x)
    assert got.dtype == np.float32
    assert f32_ulps(got, np.log(x.astype(np.float64))).max() <= 1


def test_log_error_bound_float64(rng):
    x = np.concatenate([np.exp(rng.uniform(-744, 709, 1500)), rng.uniform(0.7, 1.5, 1000),
                        1 + rng.uniform(-1e-8, 1e-8, 200), np.geomspace(5e-324, 2.3e-308, 100),
                        [np.finfo(np.float64).max, 2.0 ** -1022]])
    assert exact_ulps(run("log", x), [dec_log(v) for v in x]).max() <= 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log_special_values(dtype):
    fi = np.finfo(dtype)
    x = np.array([0.0, -0.0, -1.0, -fi.tiny, -np.inf, np.inf, np.nan, 1.0], dtype)
    np.testing.assert_array_equal(run("log", x), np.array([-np.inf, -np.inf, np.nan, np.nan, np.nan,
                                                            np.inf, np.nan, 0.0], dtype))
    # subnormals and the extremes of the range, against numpy (<= 1 ulp apart)
    edge = np.array([fi.smallest_subnormal, fi.smallest_subnormal * 3, fi.tiny / 2, fi.tiny,
                     fi.max, 2.0], dtype)
    np.testing.assert_array_max_ulp(run("log", edge), np.log(edge), maxulp=1)


def test_erf_error_bound_float32(rng):
    x = np.concatenate([rng.uniform(-5, 5, 300_000), rng.uniform(-1, 1, 100_000),
                        np.geomspace(1e-45, 1e-3, 1000)]).astype(np.float32)
    got = run("erf", x)
    assert got.dtype == np.float32
    assert f32_ulps(got, np.vectorize(math.erf)(x.astype(np.float64))).max() <= 2


def test_erf_error_bound_float64(rng):
    x = np.concatenate([rng.uniform(-6.5, 6.5, 1500), rng.uniform(-1, 1, 1000),
                        rng.uniform(0.8, 0.95, 200), np.geomspace(5e-324, 1e-3, 100)])
    x = np.concatenate([x, -x[-100:]])
    assert exact_ulps(run("erf", x), [dec_erf(v) for v in x]).max() <= 2


@pytest.mark.parametrize("dtype, one", [(np.float32, 4.0), (np.float64, 6.0)])
def test_erf_special_values_and_saturation(dtype, one, rng):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype)
    got = run("erf", x)
    np.testing.assert_array_equal(got, np.array([0.0, -0.0, 1.0, -1.0, np.nan], dtype))
    assert not np.signbit(got[0]) and np.signbit(got[1])
    # exactly +-1 from where erf rounds to 1 on; odd exactly
    big = np.concatenate([np.linspace(one, 50, 1001), [1e10, np.finfo(dtype).max]]).astype(dtype)
    np.testing.assert_array_equal(run("erf", big), np.ones_like(big))
    np.testing.assert_array_equal(run("erf", -big), -np.ones_like(big))
    w = rng.uniform(-8, 8, 10_000).astype(dtype)
    np.testing.assert_array_equal(run("erf", -w), -run("erf", w))


def test_gelu_error_bound_float32(rng):
    x = np.concatenate([rng.uniform(-16, 16, 300_000), rng.uniform(-3, 3, 100_000),
                        rng.uniform(-14.5, -12.5, 50_000),   # results in float32's subnormal range
                        np.geomspace(1e-45, 1.0, 500), -np.geomspace(1e-45, 1.0, 500)]).astype(np.float32)
    got = run("gelu", x)
    assert got.dtype == np.float32
    x64 = x.astype(np.float64)
    want = 0.5 * x64 * np.vectorize(math.erfc)(-x64 * SQRT1_2)   # no cancellation for x < 0
    assert f32_ulps(got, want).max() <= 1


def test_gelu_error_bound_float64(rng):
    # the bound is against the exact value: x / sqrt 2 rounded would already cost up to x*x ulp
    x = np.concatenate([rng.uniform(-38.5, -1, 1000), rng.uniform(-1, 1, 1000), rng.uniform(1, 10, 500),
                        rng.uniform(-39.5, -37.5, 100),   # subnormal results
                        np.geomspace(1e-300, 1, 50), -np.geomspace(1e-300, 1, 50)])
    assert exact_ulps(run("gelu", x), [dec_gelu(v) for v in x]).max() <= 6


@pytest.mark.parametrize("dtype, zero", [(np.float32, 14.8), (np.float64, 38.8)])
def test_gelu_special_values_and_tails(dtype, zero):
    fi = np.finfo(dtype)
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype)
    got = run("gelu", x)
    np.testing.assert_array_equal(got, np.array([0.0, -0.0, np.inf, -0.0, np.nan], dtype))
    assert list(np.signbit(got[:4])) == [False, True, False, True]
    # far left: -0.0 once the result underflows (the limit, also for -inf)
    left = -np.array([zero, 40.0, 1e3, 1e30, fi.max], dtype)
    got = run("gelu", left)
    np.testing.assert_array_equal(got, np.zeros_like(left))
    assert np.signbit(got).all()
    assert run("gelu", np.array([-10.0], dtype))[0] < 0   # -7.6e-23: no cancellation to -0.0
    # far right: exactly x
    right = np.concatenate([np.linspace(10, 1e4, 1001), [1e30, fi.max]]).astype(dtype)
    np.testing.assert_array_equal(run("gelu", right), right)


def test_expm1_and_log1p_float32_error_bounds(rng):
    """float32 expm1 and log1p in float64 plain arithmetic (``expm1_f32``, ``log1p_f32``):
    within 1 ulp of float64's over their whole range (0 measured: rounded from float64),
    overflow, saturation at -1, the pole at -1, NaN below it and signed zeros as numpy's."""
    x = wide(np.float32)
    with np.errstate(all="ignore"):
        want = np.expm1(x.astype(np.float64))
        got = ember.from_numpy(x).expm1().numpy()
        finite = np.isfinite(want.astype(np.float32))
        assert ulp_error(got[finite], want[finite], np.float32).max() <= 1
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want.astype(np.float32)))
        y = np.concatenate([np.geomspace(1e-45, 3e38, 200_000), -np.geomspace(1e-45, 1, 200_000),
                            np.linspace(-1, 10, 200_001), rng.random(10_000) * 2e-9]).astype(np.float32)
        want = np.log1p(y.astype(np.float64))
        got = ember.from_numpy(y).log1p().numpy()
        finite = np.isfinite(want)
        assert ulp_error(got[finite], want[finite], np.float32).max() <= 1
        np.testing.assert_array_equal(got[~finite], want[~finite].astype(np.float32))
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -2.0, 1e-45, -1e-45], np.float32)
    with np.errstate(all="ignore"):
        for name in ("expm1", "log1p"):
            got = getattr(ember.from_numpy(special), name)().numpy()
            want = getattr(np, name)(special)
            np.testing.assert_array_equal(got, want)
            zeros = want == 0
            np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))
