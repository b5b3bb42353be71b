"""The fused softmax and log_softmax ops (``Op.SOFTMAX``, ``Op.LOG_SOFTMAX``) against numpy.

References are computed in float64 from the same inputs and rounded to the input's dtype.
Shapes cover every path of the CPU kernel (``kernels/cpu/softmax.py``): rows with the dim
last in memory (serial and parallel, one long row split into chunks), column tiles when a
wide block follows the dim, narrow blocks moved last by a copy, and non-dense views.
Gradients are checked by central differences under both checkpointing strategies with the
helpers of ``tests/autograd/gradcheck.py``.
"""
import importlib.util
import pathlib
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from checks import LAYOUTS, as_tensor, check, compiled_in_new_process
from ember.ir import Op
from ember.backends.cpu.elementwise import PARALLEL_MIN

# tests/autograd is a package named ``autograd`` for pytest, which the repository's own
# ``autograd/`` folder can shadow: load its helpers by path
_spec = importlib.util.spec_from_file_location(
    "softmax_gradcheck", pathlib.Path(__file__).parent / "autograd" / "gradcheck.py")
gradcheck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gradcheck)

FLOATS = ("float32", "float64")
OPS = ("softmax", "log_softmax")
STRATEGIES = [ember.CheckpointingStrategy.NONE, ember.CheckpointingStrategy.BALANCED]


def reference(a, dim, op):
    """softmax / log_softmax of ``a`` along ``dim`` in float64, as ``a``'s dtype."""
    x = np.asarray(a, dtype=np.float64)
    if x.ndim == 0:
        x = x.reshape(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")    # inf - inf, log(0): the NaN/-inf numpy gives
        shifted = x - x.max(axis=dim, keepdims=True)
        lse = np.log(np.exp(shifted).sum(axis=dim, keepdims=True))
        out = shifted - lse if op == "log_softmax" else np.exp(shifted - lse)
    return out.reshape(np.shape(a)).astype(a.dtype)


def tolerance(dtype, want):
    """float32: a few ulp of each result plus the rounding of x - max and of the sum."""
    if np.dtype(dtype) == np.float64:
        return dict(rtol=1e-12, atol=1e-14 * max(1.0, np.abs(want).max(initial=0)))
    return dict(rtol=2e-5, atol=2e-7 * max(1.0, np.abs(want).max(initial=0)))


def check_op(t, a, dim, op):
    want = reference(a, dim, op)
    got = getattr(t, op)(dim)
    check(got, want, **tolerance(a.dtype, want))
    return got


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape, dim", [
    ((7,), 0), ((7,), -1), ((4, 5), 0), ((4, 5), 1), ((4, 5), -1), ((2, 3, 4), 0),
    ((2, 3, 4), 1), ((2, 3, 4), -1), ((2, 3, 4), -3), ((1, 5), 0), ((5, 1), 1), ((1,), 0),
    ((), 0), ((), -1), ((3, 130), 1), ((130, 3), 0)], ids=str)
def test_matches_numpy(shape, dim, op, dtype, rng):
    a = rng.uniform(-6, 6, shape).astype(dtype)
    got = check_op(as_tensor(a), a, dim, op)
    if op == "softmax" and a.ndim:
        ones = np.ones(np.delete(np.array(shape), dim % a.ndim), dtype)
        check(got.sum(dim), ones, **tolerance(dtype, ones))


def test_function_forms_and_nn_functional(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    t = as_tensor(a)
    for f, op in ((ember.softmax, "softmax"), (ember.log_softmax, "log_softmax"),
                  (F.softmax, "softmax"), (F.log_softmax, "log_softmax")):
        check(f(t, 1), reference(a, 1, op), **tolerance(a.dtype, reference(a, 1, op)))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_non_contiguous(layout, op, rng):
    base, ember_view, numpy_view = LAYOUTS[layout]
    a = rng.standard_normal(base)
    v = numpy_view(a)
    for dim in range(v.ndim):
        check_op(ember_view(as_tensor(a)), v, dim, op)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape, dim, view", [
    ((8192, 128), 1, None),           # rows, parallel: blocks of rows
    ((3, 1 << 18), 1, None),          # few long rows: each split into chunks
    ((1 << 20,), 0, None),            # one row, split
    ((1 << 18, 3), 0, None),          # narrow block after the dim: moved last by a copy
    ((4, 600, 300), 1, None),         # column tiles, parallel
    ((2, 4096, 128), 1, None),        # column tiles over long columns (two-level sums)
    ((700, 1100), 0, None),           # column tiles, tiles narrowed for the threads
    ((1100, 700), 1, "T"),            # transposed input: dim last in memory, no copy
    ((1100, 700), 0, "T"),
    ((900, 1400), 1, "step"),         # not dense: copied first
], ids=str)
def test_large_inputs_every_kernel_path(shape, dim, view, op, dtype, rng):
    a = rng.normal(0, 3, shape).astype(dtype)
    if view == "T":
        a = a.T
    elif view == "step":
        a = a[:, ::2]
    assert a.size >= PARALLEL_MIN // 2
    check_op(as_tensor(a), a, dim, op)


@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 2, 0), (0, 2, 1)], ids=str)
def test_dense_inputs_keep_their_layout(order, dim, rng):
    """A permuted contiguous input is read in memory order, without a copy, and the result has
    its strides, unless the dim is followed in memory by fewer than 16 elements (then it moves
    last in a copy, and the result keeps that layout)."""
    a = rng.standard_normal((20, 30, 40)).transpose(order)
    got = check_op(as_tensor(a), a, dim, "softmax").numpy()
    inner = np.prod([a.shape[d] for d in range(3) if a.strides[d] < a.strides[dim]], dtype=int)
    if inner == 1 or inner >= 16:
        assert got.strides == a.strides
    else:
        assert got.strides[dim] == got.itemsize


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", OPS)
def test_large_values_do_not_overflow(op, dtype):
    a = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -1000.0],
                  [1000.0, -1000.0, 0.0], [3e38, 3e38, 0.0]], dtype)
    got = check_op(as_tensor(a), a, 1, op)
    assert np.isfinite(got.numpy()).all()
    np.testing.assert_allclose(got.numpy()[0], reference(a, 1, op)[0], rtol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [3, 1 << 20], ids=["short", "split"])
def test_inf_and_nan(n, op, dtype):
    """-inf entries get 0 (-inf for log_softmax); a row of -inf, a NaN or +inf gives NaN (numpy)."""
    rows = np.full((5, n), -np.inf, dtype)
    rows[0, [0, n - 1]] = [1.0, 2.0]          # -inf between finite values
    rows[2, n // 2] = 0.5
    rows[2, n - 1] = np.nan                   # a NaN anywhere in the row
    rows[3, [0, n // 2]] = [np.inf, 1.0]      # +inf: inf - inf
    rows[4, :] = np.linspace(-3, 3, n)       # an ordinary row beside them
    got = np.stack([getattr(as_tensor(r), op)(0).numpy() for r in rows])
    want = reference(rows, 1, op)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-7, equal_nan=True)
    assert np.isnan(got[1:4]).all() and not np.isnan(got[[0, 4]]).any()
    assert (got[0, 1:n - 1] == (-np.inf if op == "log_softmax" else 0)).all()


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape, dim", [((0,), 0), ((0, 3), 1), ((0, 3), 0), ((3, 0), 1),
                                        ((2, 0, 4), 2)], ids=str)
def test_empty(shape, dim, op):
    a = np.zeros(shape, np.float32)
    got = getattr(as_tensor(a), op)(dim)
    check(got, a)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "bool"])
def test_int_and_bool_inputs_raise(op, dtype):
    t = ember.zeros((2, 3), dtype=ember.bool_ if dtype == "bool" else getattr(ember, dtype))
    with pytest.raises(TypeError, match=op):
        getattr(t, op)(1)


@pytest.mark.parametrize("op", OPS)
def test_bad_dim_raises(op):
    t = ember.zeros((2, 3))
    for dim in (2, -3, 5):
        with pytest.raises(IndexError, match=op):
            getattr(t, op)(dim)
    with pytest.raises(TypeError, match=op):
        getattr(t, op)(1.0)
    with pytest.raises(TypeError, match=op):
        getattr(t, op)(None)


@pytest.mark.parametrize("op", OPS)
def test_quantized_input_is_dequantized(op, rng):
    a = rng.standard_normal((4, 32)).astype(np.float32)
    q = as_tensor(a).quantize(ember.QuantScheme(ember.QuantValue.Q8S, block_size=[16]))
    got = getattr(q, op)(1)
    assert got.dtype == ember.float32 and not got.is_quantized
    np.testing.assert_array_equal(got.numpy(), getattr(q.dequantize(), op)(1).numpy())
    previous = ember.get_quant_propagation()
    ember.set_quant_propagation("propagate")
    try:
        assert getattr(q, op)(1).is_quantized
    finally:
        ember.set_quant_propagation(previous)


CACHE_CODE = """
import numpy as np
import ember

for shape, dim in (((3, 5), 1), ((4, 30, 20), 1), ((8, 1 << 16), 1), ((2, 1 << 19), 1), ((4, 300, 500), 1)):
    x = ember.tensor(np.ones(shape, np.float32))
    x.softmax(dim).numpy(), x.log_softmax(dim).numpy()
"""


def test_kernels_load_from_the_disk_cache_in_a_new_process(tmp_path):
    """rows and cols tasks, serial and parallel drivers, the split rows' ``finish``."""
    first = compiled_in_new_process(CACHE_CODE, tmp_path)
    assert any("softmax_rows" in name for name in first), first
    assert compiled_in_new_process(CACHE_CODE, tmp_path) == []


# --- autodiff ---------------------------------------------------------------------------------
@pytest.fixture(params=STRATEGIES, ids=[s.name for s in STRATEGIES])
def device(request):
    return ember.Device.cpu().gradient_checkpointing(request.param)


@pytest.mark.parametrize("op, kind", [("softmax", Op.SOFTMAX), ("log_softmax", Op.LOG_SOFTMAX)])
def test_one_fused_node_saving_only_its_output(op, kind, device, rng):
    x = ember.tensor(rng.standard_normal((3, 4)), device=device).require_grad()
    y = getattr(x * 2, op)(1)
    node = y._node
    assert node.op is kind and node.parents[0].op is Op.MUL
    assert node.x == (None,) and node.out is not None and node.recipe is None


case, normal = gradcheck.case, gradcheck.normal
GRAD_CASES = [
    case("softmax_1d", lambda x: x.softmax(0), normal(6, scale=2)),
    case("log_softmax_1d", lambda x: x.log_softmax(-1), normal(6, scale=2)),
    case("softmax_3d_dim0", lambda x: x.softmax(0), normal(3, 2, 4)),
    case("softmax_3d_dim2", lambda x: x.softmax(2), normal(2, 3, 4)),
    case("log_softmax_3d_dim1", lambda x: x.log_softmax(1), normal(2, 3, 4)),
    case("log_softmax_3d_dim0", lambda x: x.log_softmax(-3), normal(3, 2, 2)),
    case("softmax_transposed", lambda x: x.T.softmax(1), normal(4, 3)),
    case("log_softmax_sliced", lambda x: x[:, ::2].log_softmax(0), normal(3, 6)),
    case("softmax_large_values", lambda x: (x * 1000).softmax(1), normal(3, 4, scale=0.002)),
    case("softmax_0d", lambda x: x.softmax(0) * x, normal()),
    case("softmax_of_chain", lambda x, w: (x * w).sin().softmax(1) + (x * w).log_softmax(0),
         normal(3, 4), normal(3, 4)),
    case("softmax_twice", lambda x: x.softmax(1).softmax(0).log_softmax(1), normal(3, 4, scale=2)),
]


@pytest.mark.parametrize("c", GRAD_CASES, ids=lambda c: c.name)
def test_gradient(c, device):
    gradcheck.check_case(c, device)


@pytest.mark.parametrize("c", GRAD_CASES[-2:], ids=lambda c: c.name)
def test_strategies_give_identical_gradients(c):
    balanced = ember.Device.cpu().gradient_checkpointing(ember.CheckpointingStrategy.BALANCED)
    none = ember.Device.cpu().gradient_checkpointing(ember.CheckpointingStrategy.NONE)
    for g, w in zip(gradcheck.gradients(c, balanced), gradcheck.gradients(c, none)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("op", OPS)
def test_float32_gradient_matches_float64(op, device, rng):
    a = rng.standard_normal((5, 7))
    w = rng.standard_normal((5, 7))
    grads = []
    for dtype in (ember.float32, ember.float64):
        x = ember.tensor(a, dtype=dtype, device=device).require_grad()
        loss = (getattr(x, op)(1) * ember.tensor(w, dtype=dtype)).sum()
        g = x.grad(loss.backward())
        assert g.dtype == dtype
        grads.append(g.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)
