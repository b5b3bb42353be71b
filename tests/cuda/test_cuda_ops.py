"""Reductions, scans, matmul, sorting, indexing, layout, creation and transfers on CUDA,
each checked against the CPU backend."""
import numpy as np
import pytest
from cuda_helpers import assert_same

import ember


def pair(a):
    c = ember.from_numpy(np.asarray(a))
    return c, c.to(ember.Device.cuda())


def _data(rng, dtype, shape):
    if np.dtype(dtype).kind == "f":
        return rng.uniform(-3, 3, shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) < 0.5
    return rng.integers(-4, 5, shape).astype(dtype)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "any", "all", "argmax", "argmin"])
def test_reductions(cuda, rng, dtype, name):
    if dtype == "bool" and name in ("max", "min", "argmax", "argmin", "prod"):
        pytest.skip("numeric only")
    c, g = pair(_data(rng, dtype, (3, 4, 5)))
    dims = [None, 2] if name.startswith("arg") else [None, 1, (0, 2)]
    for dim in dims:
        for keepdim in ((False, True) if dim == 1 else (False,)):
            assert_same(getattr(g, name)(dim=dim, keepdim=keepdim),
                        getattr(c, name)(dim=dim, keepdim=keepdim), rtol=1e-5)


def test_reductions_long_rows_nan_and_strided(cuda, rng):
    a = rng.uniform(-1, 1, (2, 3000))
    a[1, 1234] = np.nan
    c, g = pair(a)
    assert_same(g.sum(dim=1), c.sum(dim=1))
    assert_same(g.sum(), c.sum())
    assert_same(g.max(dim=1), c.max(dim=1))
    assert_same(g.argmax(dim=1), c.argmax(dim=1))
    assert_same(g.T[::3].sum(dim=0), c.T[::3].sum(dim=0))
    t = np.array([1.0, 3.0, 3.0, -1.0, 3.0])
    c, g = pair(t)
    assert_same(g.argmax(), c.argmax())
    assert_same(g.argmin(), c.argmin())


def test_kernels_reading_a_view_with_an_offset(cuda, rng):
    # contiguous views that start inside their buffer (g[1:], g[2]): the reduction, scan
    # and sort kernels index a bare buffer and must start at the view's first element
    c, g = pair(rng.uniform(-3, 3, (4, 6)))
    for cv, gv in ((c[1:], g[1:]), (c[2], g[2]), (c[1:3], g[1:3])):
        assert_same(gv.sum(1 if gv.ndim == 2 else 0), cv.sum(1 if cv.ndim == 2 else 0))
        assert_same(gv.sum(), cv.sum())
        assert_same(gv.max(), cv.max())
        assert_same(gv.argmax(), cv.argmax())
        assert_same(gv.cumsum(0), cv.cumsum(0))
        assert_same(gv.sort(-1)[0], cv.sort(-1)[0])
        assert_same(gv.sort(-1)[1], cv.sort(-1)[1])
    np.testing.assert_allclose(g[1:].sum(1).numpy(), c.numpy()[1:].sum(1))


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_scans(cuda, rng, dtype):
    c, g = pair(_data(rng, dtype, (3, 4, 5)))
    for dim in (0, 1, -1):
        assert_same(g.cumsum(dim), c.cumsum(dim))
        if dtype != "bool":
            assert_same(g.cumprod(dim), c.cumprod(dim))
    assert_same(g.permute(2, 0, 1).cumsum(1), c.permute(2, 0, 1).cumsum(1))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("sa,sb", [((5, 7), (7, 6)), ((2, 3, 9), (9, 4)), ((4, 1, 3, 5), (2, 5, 3)),
                                   ((7,), (7, 3)), ((2, 6, 7), (7,)), ((7,), (7,)), ((3, 0), (0, 2))])
def test_matmul(cuda, rng, dtype, sa, sb):
    ca, ga = pair(_data(rng, dtype, sa))
    cb, gb = pair(_data(rng, dtype, sb))
    assert_same(ga @ gb, ca @ cb, rtol=1e-5)


def test_matmul_transposed_operands(cuda, rng):
    ca, ga = pair(rng.standard_normal((6, 5)))
    assert_same(ga.T @ ga, ca.T @ ca)
    assert_same(ga[::2] @ ga.T[:, 1:4], ca[::2] @ ca.T[:, 1:4])


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_sort_topk(cuda, rng, dtype):
    if dtype == "bool":
        a = rng.random((3, 9)) < 0.5
    else:
        a = rng.integers(-3, 4, (3, 9)).astype(dtype)
    if dtype == "float32":
        a[0, 2] = np.nan
        a[1, 4] = -0.0
        a[2, 5] = np.inf
    c, g = pair(a)
    if dtype == "bool":
        with pytest.raises(TypeError):
            g.sort()
        return
    for dim in (0, 1):
        for desc in (False, True):
            gv, gi = g.sort_with_indices(dim, desc)
            cv, ci = c.sort_with_indices(dim, desc)
            assert_same(gv, cv)
            assert_same(gi, ci)
        gv, gi = g.topk_with_indices(2, dim)
        cv, ci = c.topk_with_indices(2, dim)
        assert_same(gv, cv)
        assert_same(gi, ci)


def test_indexing(cuda, rng):
    c, g = pair(rng.standard_normal((4, 5)))
    ci, gi = pair(rng.integers(0, 4, (3, 5)))
    assert_same(g.gather(0, gi), c.gather(0, ci))
    ci2, gi2 = pair(rng.integers(0, 5, (4, 2)))
    assert_same(g.gather(1, gi2), c.gather(1, ci2))
    cs, gs = pair(rng.integers(0, 5, (6,)))
    assert_same(g.index_select(1, gs), c.index_select(1, cs))
    assert_same(g.index_select(0, gs[:3] % 4), c.index_select(0, cs[:3] % 4))
    cv, gv = pair(rng.standard_normal((3, 5)))
    for reduce in ("assign", "add"):
        assert_same(g.scatter(0, gi, gv, reduce=reduce), c.scatter(0, ci, cv, reduce=reduce))
    assert_same(g.scatter(1, gi2, 7.0), c.scatter(1, ci2, 7.0))
    cm, gm = pair(np.array([[0.0, 1, -0.0], [np.nan, 0, 2]]))
    assert_same(gm.argwhere(), cm.argwhere())
    assert_same(g[g > 0], c[c > 0])
    bad = ember.tensor([0, 9], device=cuda)
    with pytest.raises(IndexError, match="index_select"):
        g.index_select(0, bad)


def test_layout_cat_where_slice_assign(cuda, rng):
    c, g = pair(rng.standard_normal((2, 3, 4)))
    for f in (lambda t: t.reshape(6, -1), lambda t: t.permute(2, 0, 1).reshape(-1),
              lambda t: t[:, None, ::-2, 1:].contiguous(), lambda t: t[1, ..., 2],
              lambda t: t.unsqueeze(0).expand(3, 2, 3, 4) + 0, lambda t: t.flip((0, 2)),
              lambda t: t.transpose(0, 2).flatten(), lambda t: ember.cat([t, t * 2], 1),
              lambda t: ember.cat([t[:, :, :1], t.permute(2, 1, 0).permute(2, 1, 0)], 2),
              lambda t: ember.stack([t, t], 0), lambda t: ember.where(t > 0, t, -1.0),
              lambda t: t.mask_fill(t < 0, 0.5), lambda t: t.slice_assign((0, slice(1, 3)), 9.0),
              lambda t: t.slice_assign((slice(None), 1), t[:, 2] * 10), lambda t: t.clamp(-1, 1),
              lambda t: t.softmax(-1), lambda t: t.log_softmax(1), lambda t: t.var(dim=1),
              lambda t: t.tril() if t.ndim == 2 else t[0].triu(1), lambda t: t.repeat(2, 1, 1)):
        assert_same(f(g), f(c))


def test_creation_and_transfers(cuda):
    for dtype in (ember.float32, ember.int64, ember.bool_, ember.uint8):
        assert_same(ember.full((2, 3), 1, dtype=dtype, device=cuda), ember.full((2, 3), 1, dtype=dtype))
        assert_same(ember.zeros((0, 3), dtype=dtype, device=cuda), ember.zeros((0, 3), dtype=dtype))
    assert_same(ember.arange(2, 17, 3, device=cuda), ember.arange(2, 17, 3))
    assert_same(ember.arange(0.0, 1.0, 0.125, device=cuda), ember.arange(0.0, 1.0, 0.125))
    assert_same(ember.arange(5, 2, device=cuda), ember.arange(5, 2))
    assert_same(ember.eye(3, device=cuda), ember.eye(3))
    assert_same(ember.linspace(0, 1, 5, device=cuda), ember.linspace(0, 1, 5), rtol=1e-6)
    a = np.arange(24.0).reshape(2, 3, 4)
    t = ember.tensor(a, device=cuda)
    assert t.device == cuda and t.device.type == "cuda"
    np.testing.assert_array_equal(t.numpy(), a)
    np.testing.assert_array_equal(t.to("cpu").numpy(), a)
    np.testing.assert_array_equal(ember.from_numpy(a).to("cuda:0").numpy(), a)
    np.testing.assert_array_equal(ember.from_numpy(a[:, ::-1].T).to(cuda).numpy(), a[:, ::-1].T)
    assert t[1, 2, 3].item() == 23.0 and t.tolist() == a.tolist()
    assert "cuda:0" in repr(t)
    ember.random.seed(3) if hasattr(ember.random, "seed") else None


def test_device_errors(cuda, monkeypatch):
    import ember.device as device_mod
    g = ember.ones(3, device=cuda)
    c = ember.ones(3)
    with pytest.raises(ember.DeviceError, match="different devices"):
        g + c
    with pytest.raises(ember.DeviceError, match="different devices"):
        ember.cat([g, c])
    with pytest.raises(ember.DeviceError, match="matmul: tensors are on different devices"):
        g.reshape(1, 3) @ c.reshape(3, 1)
    with pytest.raises(ember.DeviceError, match="does not exist"):
        ember.Device.cuda(99)
    monkeypatch.setattr(device_mod, "_cuda_count", "no GPU (test)")
    with pytest.raises(ember.DeviceError, match="no CUDA device is available"):
        ember.Device.cuda()


def test_import_ember_does_not_import_cuda():
    import subprocess
    import sys
    code = "import sys, ember; ember.ones(2) + 1; print(any(m.startswith('numba.cuda') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_no_cuda_error_without_simulator():
    import subprocess
    import sys
    code = ("import ember\ntry:\n    ember.Device.cuda()\n    print('available')\n"
            "except ember.DeviceError as e:\n    print('DeviceError', e)\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout
    assert out.startswith("available") or "no CUDA device is available" in out
