"""Integer semantics and the edge cases of issue 22 on CUDA: identical to the CPU and to numpy
(docs/decisions.md, "Integer semantics"); mixed devices raise naming the op."""
import numpy as np
import pytest

import ember
from cuda_helpers import DEV, assert_same, to_cuda

INT_DTYPES = ("int8", "int32", "int64", "uint8")

# the simulator runs scalar ops on numpy scalars, which warn when they wrap: wrapping is what
# these tests check
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _edge_values(dtype):
    i = np.iinfo(dtype)
    v = {i.min, i.min + 1, -7, -1, 0, 1, 2, 7, 63, 64, 65, i.max - 1, i.max}
    return np.array(sorted(x for x in v if i.min <= x <= i.max), dtype)


def _pairs(dtype):
    v = _edge_values(dtype)
    return np.repeat(v, v.size), np.tile(v, v.size)


BINARY = {
    "floordiv": (lambda a, b: a // b, np.floor_divide),
    "mod": (lambda a, b: a % b, np.remainder),
    "shl": (lambda a, b: a << b, np.left_shift),
    "shr": (lambda a, b: a >> b, np.right_shift),
    "mul": (lambda a, b: a * b, np.multiply),
    "add": (lambda a, b: a + b, np.add),
}


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_integer_edge_cases_match_cpu_and_numpy(name, dtype):
    """Division by 0 and -1, INT_MIN // -1, shifts by >= the width and by negative counts."""
    a, b = _pairs(dtype)
    fn, ref = BINARY[name]
    cpu = fn(ember.from_numpy(a), ember.from_numpy(b))
    gpu = fn(to_cuda(a), to_cuda(b))
    assert_same(gpu, cpu)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(cpu.numpy(), ref(a, b))


@pytest.mark.parametrize("dtype", ("int8", "int64"))
def test_integer_power_wraps_and_refuses_negative_exponents(dtype):
    base = np.array([3, -2, 0, 1, -1, 7], dtype)
    if dtype == "int8":
        exp = np.array([5, 7, 0, 100, 7, 40], dtype)
    else:
        exp = np.array([65537, 63, 0, 1000, 7, 40], dtype)
    gpu = to_cuda(base) ** to_cuda(exp)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(gpu.numpy(), np.power(base, exp))
    assert_same(gpu, ember.from_numpy(base) ** ember.from_numpy(exp))
    with pytest.raises(ValueError, match="pow: integers to negative integer powers"):
        to_cuda(base) ** to_cuda(np.array([1, -1, 0, 0, 0, 0], dtype))
    with pytest.raises(ValueError, match="pow"):
        2 ** to_cuda(np.array([-1], dtype))


def test_out_of_range_scalars_compare_by_value_and_clamp_bounds():
    t = to_cuda(np.array([1, 100, -100], np.int8))
    assert (t < 1000).numpy().all() and not (t == 1000).numpy().any()
    assert (t > -2 ** 70).numpy().all() and (1000 > t).numpy().all()
    u = to_cuda(np.array([1, 200], np.uint8))
    assert_same(u.clamp(-5, 50), ember.from_numpy(np.array([1, 200], np.uint8)).clamp(-5, 50))
    np.testing.assert_array_equal(u.clamp(-5, 50).numpy(), [1, 50])
    with pytest.raises(ValueError, match="add"):
        t + 1000


def test_rounding_keeps_the_sign_of_zero_and_clamp_propagates_nan():
    x = np.array([-0.5, -0.0, -0.4, 0.3, -1e-300, 2.5, -2.5], np.float64)
    for name in ("floor", "ceil", "trunc", "round"):
        gpu, cpu = getattr(to_cuda(x), name)(), getattr(ember.from_numpy(x), name)()
        want = getattr(np, name)(x)
        np.testing.assert_array_equal(np.signbit(gpu.numpy()), np.signbit(want), err_msg=name)
        assert_same(gpu, cpu)
    np.testing.assert_array_equal(to_cuda(x).clamp(min=float("nan")).numpy(), np.full(x.shape, np.nan))
    np.testing.assert_array_equal(np.signbit(to_cuda(np.array([-0.0])).sign().numpy()), [False])


def test_argmax_of_an_empty_tensor_along_a_non_empty_dim():
    out = to_cuda(np.zeros((0, 3), np.float32)).argmax(1)
    assert out.shape == (0,) and out.dtype == ember.int64


MIXED = {
    "add": lambda c, g: c + g, "where": lambda c, g: ember.where(c > 0, c, g),
    "matmul": lambda c, g: c.reshape(1, 3) @ g.reshape(3, 1),
    "gather": lambda c, g: c.gather(0, g.cast(ember.int64)),
    "scatter": lambda c, g: c.scatter(0, ember.zeros(3, dtype=ember.int64), g),
    "index_select": lambda c, g: c.index_select(0, g.cast(ember.int64)),
    "mask_fill": lambda c, g: c.mask_fill(g > 0, 0.0),
    "mask_where": lambda c, g: c.mask_where(c > 0, g),
    "slice_assign": lambda c, g: c.slice_assign(slice(0, 3), g),
    "cat": lambda c, g: ember.cat([c, g]), "stack": lambda c, g: ember.stack([c, g]),
    "maximum": lambda c, g: c.maximum(g), "clamp": lambda c, g: c.clamp(g, None),
    "lt": lambda c, g: c < g,
}


@pytest.mark.parametrize("name", sorted(MIXED))
def test_mixed_devices_raise_naming_the_op(name):
    cpu = ember.ones(3)
    gpu = ember.zeros(3, device=DEV)
    with pytest.raises((ember.DeviceError, TypeError, ValueError)) as e:
        MIXED[name](cpu, gpu).numpy()
    assert name in str(e.value), str(e.value)
    for cls in type(e.value).__mro__:
        assert not cls.__module__.startswith("numba")
