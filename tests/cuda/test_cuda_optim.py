"""Optimizers on CUDA: parameters and state stay on the device (no device-to-host copy in a
step), and the updates equal the CPU's."""
import numpy as np
import pytest
from cuda_helpers import assert_same

import ember
import ember.optim
from ember.backends.cuda import CudaBackend


@pytest.fixture
def host_copies(monkeypatch):
    """Counts every device-to-host transfer: the backend's own, and any device array's."""
    from numba import cuda as nbcuda
    counts = []
    real_to_host = CudaBackend.to_host
    monkeypatch.setattr(CudaBackend, "to_host",
                        lambda self, x: counts.append("to_host") or real_to_host(self, x))
    arr_type = type(nbcuda.device_array(1))
    real_copy = arr_type.copy_to_host
    monkeypatch.setattr(arr_type, "copy_to_host",
                        lambda self, *a, **k: counts.append("copy_to_host") or real_copy(self, *a, **k))
    return counts


def _params(device):
    rng = np.random.default_rng(3)
    return [ember.tensor(rng.standard_normal(s), dtype=ember.float32,
                         device=device).autodiff().require_grad() for s in ((3, 4), (4,))]


def _loss(w, b):
    x = ember.tensor(np.linspace(-1, 1, 12).reshape(4, 3), dtype=ember.float32, device=w.device.base())
    return ((x @ w + b).tanh() ** 2).sum()


@pytest.mark.parametrize("make", [lambda ps: ember.optim.Adam(ps, lr=0.1),
                                  lambda ps: ember.optim.AdamW(ps, lr=0.1, amsgrad=True),
                                  lambda ps: ember.optim.SGD(ps, lr=0.1, momentum=0.9)],
                         ids=["adam", "adamw_amsgrad", "sgd_momentum"])
def test_a_step_makes_no_device_to_host_copy(cuda, host_copies, make):
    params = _params(cuda)
    opt = make(params)
    grads = _loss(*params).backward()
    host_copies.clear()
    new = opt.step(grads)
    ember.fusion.force(*new)                      # the updates ran, on the device
    for i in range(len(new)):
        for v in opt._state[i].values():
            if isinstance(v, ember.Tensor):
                ember.fusion.force(v)
    assert host_copies == []
    assert all(p.device == cuda and p.is_require_grad() for p in new)
    assert all(v.device == cuda for i in range(len(new)) for v in opt.state(i).values()
               if isinstance(v, ember.Tensor))
    new[0].numpy()                                # (the counter sees a copy when there is one)
    assert host_copies


def test_cuda_updates_equal_the_cpu_ones(cuda):
    from ember import optim
    cpu_params, gpu_params = _params(ember.Device.cpu()), _params(cuda)
    cpu_opt, gpu_opt = ember.optim.Adam(cpu_params, lr=0.05), ember.optim.Adam(gpu_params, lr=0.05)
    for _ in range(optim.HOT_STEPS + 2):   # op by op, then replays of the traced updates
        cpu_params = cpu_opt.step(_loss(*cpu_params).backward())
        gpu_params = gpu_opt.step(_loss(*gpu_params).backward())
    for c, g in zip(cpu_params, gpu_params):
        assert_same(g.inner(), c.inner(), rtol=1e-5)
    assert_same(gpu_opt.state(0)["exp_avg_sq"], cpu_opt.state(0)["exp_avg_sq"], rtol=1e-5)
    assert len(gpu_opt._programs) == 1 and gpu_opt.state(0)["step"] == optim.HOT_STEPS + 2


def test_replayed_cuda_updates_make_no_device_to_host_copy(cuda, host_copies):
    from ember import optim
    params = _params(cuda)
    opt = ember.optim.Adam(params, lr=0.1)
    for _ in range(optim.HOT_STEPS + 1):
        params = opt.step(_loss(*params).backward())
    grads = _loss(*params).backward()
    host_copies.clear()
    new = opt.step(grads)   # a replay
    assert len(opt._programs) == 1
    ember.fusion.force(*new)
    assert host_copies == [] and all(p.device == cuda and p.is_require_grad() for p in new)
