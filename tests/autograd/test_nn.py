"""``ember.nn.functional``: values against numpy (and PyTorch when installed), gradients against
central finite differences (and PyTorch), errors.

Every function is a composition of differentiable tensor ops, so the gradient rows below test
the composition (im2col through ``index_select``, max pool through ``argmax`` + ``gather``,
losses through ``gather``/``mask_fill``), under both checkpointing strategies (``device``).
Decisions pinned down here:
- max pooling sends a window's gradient to its first maximum (PyTorch), not split among ties;
- cross_entropy takes class indices (Int) or class probabilities (Float), with PyTorch's
  ``weight``, ``ignore_index``, ``reduction`` and ``label_smoothing`` semantics;
- mse_loss refuses inputs of different shapes (PyTorch broadcasts with a warning).
"""
import math
import zlib

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from .gradcheck import case, check_case, distinct, nonzero, normal, positive, uniform

try:
    import torch
    import torch.nn.functional as TF
except ImportError:   # the torch comparisons are skipped
    torch = TF = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
F64 = ember.float64


def idx(values):
    return ember.tensor(np.asarray(values), dtype=ember.int64)


def t64(a):
    return ember.tensor(np.asarray(a, dtype=np.float64), dtype=F64)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


# --- numpy references (written from the definitions, one window at a time) ----------------------
def conv2d_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, ho, wo))
    per_group = o // groups
    for oc in range(o):
        g = oc // per_group
        xs = xp[:, g * cg:(g + 1) * cg]
        for i in range(ho):
            for j in range(wo):
                patch = xs[:, :, i * sh:i * sh + dh * (kh - 1) + 1:dh, j * sw:j * sw + dw * (kw - 1) + 1:dw]
                out[:, oc, i, j] = (patch * w[oc]).sum((1, 2, 3))
    return out if b is None else out + b.reshape(1, -1, 1, 1)


def _pool_out(size, k, s, p, d, ceil_mode):
    span = d * (k - 1) + 1
    out = (size + 2 * p - span + ((s - 1) if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def max_pool2d_ref(x, k, s=None, p=0, d=1, ceil_mode=False):
    (kh, kw), (ph, pw), (dh, dw) = _pair(k), _pair(p), _pair(d)
    sh, sw = _pair(s if s is not None else k)
    h, w = x.shape[-2:]
    ho, wo = _pool_out(h, kh, sh, ph, dh, ceil_mode), _pool_out(w, kw, sw, pw, dw, ceil_mode)
    out = np.empty(x.shape[:-2] + (ho, wo))
    for i in range(ho):
        for j in range(wo):
            rows = [r for r in range(i * sh - ph, i * sh - ph + dh * (kh - 1) + 1, dh) if 0 <= r < h]
            cols = [c for c in range(j * sw - pw, j * sw - pw + dw * (kw - 1) + 1, dw) if 0 <= c < w]
            out[..., i, j] = x[..., rows, :][..., cols].max(axis=(-1, -2))
    return out


def avg_pool2d_ref(x, k, s=None, p=0, ceil_mode=False, count_include_pad=True, divisor=None):
    (kh, kw), (ph, pw) = _pair(k), _pair(p)
    sh, sw = _pair(s if s is not None else k)
    h, w = x.shape[-2:]
    ho, wo = _pool_out(h, kh, sh, ph, 1, ceil_mode), _pool_out(w, kw, sw, pw, 1, ceil_mode)
    out = np.empty(x.shape[:-2] + (ho, wo))
    for i in range(ho):
        for j in range(wo):
            r0, c0 = i * sh - ph, j * sw - pw
            r1, c1 = min(r0 + kh, h + ph), min(c0 + kw, w + pw)   # the window, clipped to the padding
            window = x[..., max(r0, 0):min(r1, h), max(c0, 0):min(c1, w)]
            if divisor is not None:
                count = divisor
            elif count_include_pad:
                count = (r1 - r0) * (c1 - c0)
            else:
                count = window.shape[-1] * window.shape[-2]
            out[..., i, j] = window.sum(axis=(-1, -2)) / count
    return out


def log_softmax_ref(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def cross_entropy_ref(logits, target, weight=None, ignore_index=-100, reduction="mean",
                      label_smoothing=0.0):
    """Per sample ``-sum_c w_c q_c log p_c`` with ``q`` the smoothed one-hot target."""
    classes = logits.shape[1]
    logp = np.moveaxis(log_softmax_ref(logits, 1), 1, -1)          # (..., C)
    w = np.ones(classes) if weight is None else weight
    keep = target != ignore_index
    q = np.eye(classes)[np.where(keep, target, 0)] * (1 - label_smoothing) + label_smoothing / classes
    loss = -(w * q * logp).sum(-1) * keep
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / (w[np.where(keep, target, 0)] * keep).sum()


def erf(x):
    return np.vectorize(math.erf)(x)


# --- values against numpy ----------------------------------------------------------------------
CONV2D_SETTINGS = [
    dict(),
    dict(stride=2, padding=1),
    dict(stride=(2, 1), padding=(2, 1), dilation=(2, 1)),
    dict(padding=1, dilation=2, groups=2),
    dict(stride=3, groups=4),
]


@pytest.mark.parametrize("kw", CONV2D_SETTINGS, ids=str)
def test_conv2d_matches_numpy(kw):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 7, 6))
    w = rng.standard_normal((4, 4 // kw.get("groups", 1), 3, 2))
    b = rng.standard_normal(4)
    got = F.conv2d(t64(x), t64(w), t64(b), **kw)
    np.testing.assert_allclose(got.numpy(), conv2d_ref(x, w, b, **kw), rtol=1e-12, atol=1e-12)


def test_conv2d_same_valid_unbatched_and_float32():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 6, 5))
    w = rng.standard_normal((2, 3, 3, 3))
    same = F.conv2d(t64(x), t64(w), padding="same")
    assert same.shape == (2, 6, 5)
    np.testing.assert_allclose(same.numpy(), conv2d_ref(x[None], w, padding=1)[0], rtol=1e-12, atol=1e-12)
    valid = F.conv2d(t64(x), t64(w), padding="valid")
    np.testing.assert_allclose(valid.numpy(), conv2d_ref(x[None], w)[0], rtol=1e-12, atol=1e-12)
    got32 = F.conv2d(ember.tensor(x[None], dtype=ember.float32), ember.tensor(w, dtype=ember.float32))
    assert got32.dtype == ember.float32
    np.testing.assert_allclose(got32.numpy(), conv2d_ref(x[None], w), rtol=1e-5, atol=1e-5)


def test_conv1d_matches_numpy():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 11))
    w = rng.standard_normal((6, 2, 3))
    b = rng.standard_normal(6)
    got = F.conv1d(t64(x), t64(w), t64(b), stride=2, padding=2, dilation=2, groups=2)
    ref = conv2d_ref(x[:, :, None], w[:, :, None], b, stride=(1, 2), padding=(0, 2), dilation=(1, 2),
                     groups=2)[:, :, 0]
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-12, atol=1e-12)
    assert F.conv1d(t64(x[0]), t64(w[:, :1].repeat(4, 1)), padding="same").shape == (6, 11)


MAX_POOL_SETTINGS = [
    dict(k=2),
    dict(k=3, s=1),
    dict(k=3, s=2, p=1),
    dict(k=3, s=2, p=1, ceil_mode=True),
    dict(k=(3, 2), s=(2, 3), p=(1, 1), d=(2, 1), ceil_mode=True),
]


@pytest.mark.parametrize("kw", MAX_POOL_SETTINGS, ids=str)
def test_max_pool2d_matches_numpy(kw):
    x = np.random.default_rng(3).standard_normal((2, 3, 7, 6))
    got = F.max_pool2d(t64(x), kw["k"], kw.get("s"), kw.get("p", 0), kw.get("d", 1),
                       kw.get("ceil_mode", False))
    np.testing.assert_array_equal(got.numpy(), max_pool2d_ref(x, **kw))


AVG_POOL_SETTINGS = [
    dict(k=2),
    dict(k=3, s=2, p=1),
    dict(k=3, s=2, p=1, count_include_pad=False),
    dict(k=3, s=2, p=1, ceil_mode=True),
    dict(k=(3, 2), s=(2, 3), p=(1, 1), ceil_mode=True, count_include_pad=False),
    dict(k=3, p=1, divisor=5),
]


@pytest.mark.parametrize("kw", AVG_POOL_SETTINGS, ids=str)
def test_avg_pool2d_matches_numpy(kw):
    x = np.random.default_rng(4).standard_normal((2, 3, 7, 6))
    got = F.avg_pool2d(t64(x), kw["k"], kw.get("s"), kw.get("p", 0), kw.get("ceil_mode", False),
                       kw.get("count_include_pad", True), kw.get("divisor"))
    np.testing.assert_allclose(got.numpy(), avg_pool2d_ref(x, **kw), rtol=1e-12, atol=1e-14)


def test_pool1d_unbatched_and_indices():
    x = np.random.default_rng(5).standard_normal((3, 10))
    got = F.max_pool1d(t64(x), 3, 2, 1)
    ref = max_pool2d_ref(x[:, None, :], (1, 3), (1, 2), (0, 1))[:, 0]
    np.testing.assert_array_equal(got.numpy(), ref)
    avg = F.avg_pool1d(t64(x), 4, ceil_mode=True)
    np.testing.assert_allclose(avg.numpy(), avg_pool2d_ref(x[:, None, :], (1, 4), ceil_mode=True)[:, 0],
                               rtol=1e-12)
    values, where = F.max_pool2d(t64(x.reshape(1, 3, 2, 5)), (2, 2), return_indices=True)
    assert where.dtype == ember.int64 and where.shape == values.shape
    flat = x.reshape(1, 3, 10)
    np.testing.assert_array_equal(np.take_along_axis(flat, where.numpy().reshape(1, 3, -1), 2),
                                  values.numpy().reshape(1, 3, -1))


def test_linear_embedding_activations_match_numpy():
    rng = np.random.default_rng(6)
    x, w, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((5, 4)), rng.standard_normal(5)
    np.testing.assert_allclose(F.linear(t64(x), t64(w), t64(b)).numpy(), x @ w.T + b, rtol=1e-12)
    np.testing.assert_allclose(F.linear(t64(x), t64(w)).numpy(), x @ w.T, rtol=1e-12)
    table = rng.standard_normal((6, 3))
    ind = np.array([[0, 5, 2], [2, 2, 1]])
    np.testing.assert_array_equal(F.embedding(idx(ind), t64(table)).numpy(), table[ind])
    z = rng.standard_normal((3, 5)) * 3
    np.testing.assert_allclose(F.relu(t64(z)).numpy(), np.maximum(z, 0))
    # erfc form: 1 + erf(z / sqrt 2) cancels for negative z (a 1e-11 relative error at z = -8)
    erfc = np.vectorize(math.erfc)
    np.testing.assert_allclose(F.gelu(t64(z)).numpy(), z * 0.5 * erfc(-z / math.sqrt(2)), rtol=1e-12)
    tanh_gelu = 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))
    np.testing.assert_allclose(F.gelu(t64(z), approximate="tanh").numpy(), tanh_gelu, rtol=1e-12)
    np.testing.assert_allclose(F.silu(t64(z)).numpy(), z / (1 + np.exp(-z)), rtol=1e-12)
    np.testing.assert_allclose(F.log_softmax(t64(z), 1).numpy(), log_softmax_ref(z, 1), rtol=1e-12)
    np.testing.assert_allclose(F.softmax(t64(z), 0).numpy(), np.exp(log_softmax_ref(z, 0)), rtol=1e-12)


CE_SETTINGS = [
    dict(),
    dict(reduction="sum"),
    dict(reduction="none"),
    dict(label_smoothing=0.2),
    dict(weighted=True),
    dict(weighted=True, label_smoothing=0.1, ignore=True),
    dict(ignore=True, reduction="sum", label_smoothing=0.3),
    dict(ignore=True, reduction="none"),
]


@pytest.mark.parametrize("kw", CE_SETTINGS, ids=str)
@pytest.mark.parametrize("shape", [(5, 4), (3, 4, 2)], ids=["NC", "NCd"])
def test_cross_entropy_matches_numpy(kw, shape):
    kw = dict(kw)
    rng = np.random.default_rng(7)
    logits = rng.standard_normal(shape) * 2
    target = rng.integers(0, shape[1], (shape[0],) + shape[2:])
    weight = rng.uniform(0.5, 2, shape[1]) if kw.pop("weighted", False) else None
    if kw.pop("ignore", False):
        target.reshape(-1)[[0, 2]] = -100
    got = F.cross_entropy(t64(logits), idx(target), None if weight is None else t64(weight), **kw)
    np.testing.assert_allclose(got.numpy(), cross_entropy_ref(logits, target, weight, **kw),
                               rtol=1e-12, atol=1e-14)


def test_indices_are_checked_once_forward_and_not_again_backward(monkeypatch):
    # cross_entropy checks its targets; its gather and index_select, and the backward's
    # scatters of every indexing op, read indices already checked: no second min/max pass
    from ember import dispatch
    checks = []
    real = dispatch.check_index_range
    monkeypatch.setattr(dispatch, "check_index_range",
                        lambda name, *a, **k: checks.append(name) or real(name, *a, **k))
    rng = np.random.default_rng(12)
    x = ember.tensor(rng.standard_normal((6, 4))).autodiff().require_grad()
    target = idx(rng.integers(0, 4, 6))
    for weight in (None, t64(rng.uniform(0.5, 2, 4))):
        checks.clear()
        loss = F.cross_entropy(x, target, weight)
        grad = x.grad(loss.backward())
        assert checks == ["cross_entropy"], checks
        assert np.isfinite(grad.numpy()).all()
    index = idx(rng.integers(0, 6, (3, 4)))
    for name, fwd in [("gather", lambda: x.gather(0, index)),
                      ("scatter", lambda: x.scatter(0, index[:1], x[:1] * 2)),
                      ("index_select", lambda: x.index_select(0, idx([5, 0, 5])))]:
        checks.clear()
        out = fwd()
        grad = x.grad((out * out).sum().backward())
        assert checks == [name], (name, checks)
        assert grad.shape == x.shape
    with pytest.raises(IndexError, match="cross_entropy: target class 4 is out of range"):
        F.cross_entropy(x, idx([0, 1, 2, 3, 4, 0]))


def test_cross_entropy_probabilities_nll_and_mse():
    rng = np.random.default_rng(8)
    logits = rng.standard_normal((4, 3))
    probs = rng.dirichlet(np.ones(3), 4)
    got = F.cross_entropy(t64(logits), t64(probs), label_smoothing=0.1)
    smoothed = probs * 0.9 + 0.1 / 3
    np.testing.assert_allclose(got.item(), -(smoothed * log_softmax_ref(logits, 1)).sum(1).mean(), rtol=1e-12)
    target = np.array([2, 0, 1, 1])
    nll = F.nll_loss(t64(log_softmax_ref(logits, 1)), idx(target), reduction="sum")
    np.testing.assert_allclose(nll.item(), cross_entropy_ref(logits, target, reduction="sum"), rtol=1e-12)
    unbatched = F.cross_entropy(t64(logits[0]), idx(2).reshape(()))
    np.testing.assert_allclose(unbatched.item(), -log_softmax_ref(logits[:1], 1)[0, 2], rtol=1e-12)
    a, b = rng.standard_normal((2, 3, 4))
    np.testing.assert_allclose(F.mse_loss(t64(a), t64(b)).item(), ((a - b) ** 2).mean(), rtol=1e-12)
    np.testing.assert_allclose(F.mse_loss(t64(a), t64(b), "sum").item(), ((a - b) ** 2).sum(), rtol=1e-12)
    np.testing.assert_allclose(F.mse_loss(t64(a), t64(b), reduction="none").numpy(), (a - b) ** 2)


def test_layer_norm_matches_numpy():
    rng = np.random.default_rng(9)
    x, w, b = rng.standard_normal((2, 3, 4)) * 3 + 1, rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    mean = x.mean((1, 2), keepdims=True)
    var = x.var((1, 2), keepdims=True)
    ref = (x - mean) / np.sqrt(var + 1e-5) * w + b
    np.testing.assert_allclose(F.layer_norm(t64(x), (3, 4), t64(w), t64(b)).numpy(), ref, rtol=1e-10)
    last = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-3)
    np.testing.assert_allclose(F.layer_norm(t64(x), 4, eps=1e-3).numpy(), last, rtol=1e-10)


def test_dropout_is_seeded_scaled_and_off_when_not_training():
    x = ember.ones((200, 50))
    a = F.dropout(x, 0.3, seed=11).numpy()
    assert set(np.unique(a)) == {0.0, np.float32(1 / 0.7)}
    assert abs((a == 0).mean() - 0.3) < 0.02
    np.testing.assert_array_equal(a, F.dropout(x, 0.3, seed=11).numpy())
    assert not np.array_equal(a, F.dropout(x, 0.3, seed=12).numpy())
    g1, g2 = np.random.default_rng(5), np.random.default_rng(5)
    np.testing.assert_array_equal(F.dropout(x, 0.5, generator=g1).numpy(),
                                  F.dropout(x, 0.5, generator=g2).numpy())
    ember.random.seed(3)
    b = F.dropout(x, 0.5).numpy()
    ember.random.seed(3)
    np.testing.assert_array_equal(b, F.dropout(x, 0.5).numpy())
    assert F.dropout(x, 0.3, training=False) is x
    assert F.dropout(x, 0.0) is x
    assert (F.dropout(x, 1.0).numpy() == 0).all()


# --- gradients against finite differences --------------------------------------------------------
TARGET = idx([2, 0, 3, 1, 3])
TARGET_IGN = idx([2, -100, 3, 1, -100])
TARGET_NCD = idx([[0, 3], [2, 2], [1, 0]])
CLASS_W = t64([0.5, 1.5, 1.0, 2.0])
PROBS = t64(np.random.default_rng(10).dirichlet(np.ones(4), 5))

CASES = [
    case("linear", lambda x, w, b: F.linear(x, w, b), normal(3, 4), normal(5, 4), normal(5)),
    case("linear_3d_no_bias", lambda x, w: F.linear(x, w), normal(2, 3, 4), normal(2, 4)),
    case("linear_1d_input", lambda x, w, b: F.linear(x, w, b), normal(4), normal(3, 4), normal(3)),
    case("conv2d", lambda x, w, b: F.conv2d(x, w, b), normal(2, 2, 4, 4), normal(3, 2, 2, 3), normal(3)),
    case("conv2d_stride_pad_dilation", lambda x, w: F.conv2d(x, w, stride=(2, 1), padding=1, dilation=(1, 2)),
         normal(1, 2, 5, 5), normal(2, 2, 3, 2)),
    case("conv2d_groups", lambda x, w, b: F.conv2d(x, w, b, padding="same", groups=2),
         normal(2, 4, 3, 3), normal(4, 2, 3, 3), normal(4)),
    case("conv2d_unbatched", lambda x, w: F.conv2d(x, w, stride=2), normal(2, 5, 4), normal(2, 2, 2, 2)),
    case("conv1d", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1, dilation=2),
         normal(2, 3, 7), normal(2, 3, 3), normal(2)),
    case("max_pool2d", lambda x: F.max_pool2d(x, 2), distinct(2, 2, 4, 4)),
    case("max_pool2d_overlap_pad_ceil", lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
         distinct(1, 2, 6, 5)),
    case("max_pool2d_dilation", lambda x: F.max_pool2d(x, 2, 1, dilation=2), distinct(1, 1, 5, 5)),
    case("max_pool1d", lambda x: F.max_pool1d(x, 3, 2, 1), distinct(2, 7)),
    case("avg_pool2d", lambda x: F.avg_pool2d(x, 2), normal(2, 2, 4, 4)),
    case("avg_pool2d_pad_ceil_exclude", lambda x: F.avg_pool2d(x, 3, 2, 1, True, False), normal(1, 2, 6, 5)),
    case("avg_pool1d", lambda x: F.avg_pool1d(x, 2, 1, 1), normal(2, 2, 5)),
    case("embedding", lambda w: F.embedding(idx([[0, 2], [2, 3]]), w), normal(4, 3)),
    case("relu", lambda x: F.relu(x), nonzero(3, 4)),
    case("gelu", lambda x: F.gelu(x), normal(3, 4, scale=2)),
    case("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), normal(3, 4, scale=2)),
    case("silu", lambda x: F.silu(x), normal(3, 4, scale=2)),
    case("softmax", lambda x: F.softmax(x, 1), normal(3, 4)),
    case("log_softmax", lambda x: F.log_softmax(x, 0), normal(3, 4)),
    case("cross_entropy", lambda x: F.cross_entropy(x, TARGET), normal(5, 4)),
    case("cross_entropy_sum_smoothing", lambda x: F.cross_entropy(x, TARGET, reduction="sum",
                                                                  label_smoothing=0.2), normal(5, 4)),
    case("cross_entropy_none", lambda x: F.cross_entropy(x, TARGET, reduction="none"), normal(5, 4)),
    case("cross_entropy_weight_ignore_smoothing",
         lambda x: F.cross_entropy(x, TARGET_IGN, CLASS_W, label_smoothing=0.1), normal(5, 4)),
    case("cross_entropy_ncd", lambda x: F.cross_entropy(x, TARGET_NCD), normal(3, 4, 2)),
    case("cross_entropy_probabilities", lambda x: F.cross_entropy(x, PROBS), normal(5, 4)),
    case("nll_loss", lambda x: F.nll_loss(x.log_softmax(1), TARGET, CLASS_W), normal(5, 4)),
    case("mse_loss", lambda a, b: F.mse_loss(a, b), normal(3, 4), normal(3, 4)),
    case("mse_loss_sum", lambda a, b: F.mse_loss(a, b, reduction="sum"), normal(2, 3), normal(2, 3)),
    case("dropout_seeded", lambda x: F.dropout(x, 0.4, seed=3), normal(4, 5)),
    case("layer_norm", lambda x, w, b: F.layer_norm(x, (4,), w, b), normal(3, 4), normal(4), normal(4)),
    case("layer_norm_2d", lambda x: F.layer_norm(x, (2, 3)), normal(2, 2, 3, scale=2)),
    case("tiny_cnn", lambda x, w, v: F.cross_entropy(
        F.linear(F.max_pool2d(F.relu(F.conv2d(x, w, padding=1)), 2).flatten(1), v), idx([1, 0])),
         normal(2, 1, 4, 4), normal(2, 1, 3, 3), normal(2, 8), rtol=1e-4, atol=1e-6),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gradient(case, device, unfused):
    check_case(case, device)


def test_max_pool_gradient_goes_to_the_first_maximum(device):
    x = ember.tensor([[[[1.0, 3.0, 3.0, 0.0], [3.0, 2.0, 0.0, 0.0]]]], dtype=F64,
                     device=device).require_grad()
    g = x.grad(F.max_pool2d(x, 2).sum().backward()).numpy()
    np.testing.assert_array_equal(g, [[[[0, 1, 1, 0], [0, 0, 0, 0]]]])


def test_float32_network_gradients(device):
    rng = np.random.default_rng(12)
    x = ember.tensor(rng.standard_normal((2, 3, 6, 6)), dtype=ember.float32, device=device)
    w = ember.tensor(rng.standard_normal((4, 3, 3, 3)), dtype=ember.float32, device=device).require_grad()
    b = ember.tensor(rng.standard_normal(4), dtype=ember.float32, device=device).require_grad()
    h = F.avg_pool2d(F.gelu(F.conv2d(x, w, b, stride=1, padding=1)), 2)
    loss = F.mse_loss(F.layer_norm(h, (3, 3)), ember.zeros(h.shape, device=device))
    grads = loss.backward()
    assert w.grad(grads).dtype == ember.float32 and w.grad(grads).shape == w.shape
    assert b.grad(grads).shape == (4,)
    assert not x.is_tracked() and x.grad(grads) is None


# --- against PyTorch ------------------------------------------------------------------------
def _rand(*shape, scale=1.0):
    return ("f", shape, scale)


def _const(*shape):
    return ("const", shape, 1.0)


def _ties(*shape):
    return ("ties", shape)


def _ints(values):
    return ("i", np.asarray(values))


TORCH_CASES = [
    ("linear", lambda F, x, w, b: F.linear(x, w, b), [_rand(3, 4), _rand(5, 4), _rand(5)]),
    ("conv2d", lambda F, x, w, b: F.conv2d(x, w, b, stride=2, padding=1, dilation=1),
     [_rand(2, 3, 7, 6), _rand(4, 3, 3, 3), _rand(4)]),
    ("conv2d_groups_dilation", lambda F, x, w: F.conv2d(x, w, padding=(2, 1), dilation=(2, 1), groups=3),
     [_rand(2, 3, 6, 5), _rand(6, 1, 3, 3)]),
    ("conv2d_same", lambda F, x, w: F.conv2d(x, w, padding="same"), [_rand(1, 2, 5, 6), _rand(3, 2, 3, 3)]),
    ("conv1d", lambda F, x, w, b: F.conv1d(x, w, b, stride=2, padding=1, groups=2),
     [_rand(2, 4, 9), _rand(6, 2, 3), _rand(6)]),
    ("max_pool2d", lambda F, x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), [_rand(2, 3, 7, 6)]),
    ("max_pool2d_ties", lambda F, x: F.max_pool2d(x, 2, 1), [_ties(1, 2, 5, 5)]),  # first max wins
    ("max_pool1d", lambda F, x: F.max_pool1d(x, 2, 2, 1, dilation=2), [_rand(2, 3, 9)]),
    ("avg_pool2d", lambda F, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
     [_rand(2, 3, 7, 6)]),
    ("avg_pool2d_divisor", lambda F, x: F.avg_pool2d(x, (2, 3), (1, 2), (1, 1), divisor_override=4),
     [_rand(1, 2, 5, 6)]),
    ("avg_pool1d", lambda F, x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True), [_rand(2, 3, 8)]),
    ("embedding", lambda F, i, w: F.embedding(i, w, padding_idx=1),
     [_ints([[0, 1, 3], [3, 3, 2]]), _rand(4, 5)]),
    ("gelu_tanh", lambda F, x: F.gelu(x, approximate="tanh"), [_rand(3, 4, scale=3)]),
    ("silu_softmax", lambda F, x: F.softmax(F.silu(x), 1) + F.log_softmax(x, 0), [_rand(3, 4)]),
    ("cross_entropy", lambda F, x, t, w: F.cross_entropy(x, t, w, ignore_index=1, label_smoothing=0.15),
     [_rand(6, 4, scale=2), _ints([0, 1, 3, 2, 1, 3]), _const(4)]),
    ("cross_entropy_ncd_sum", lambda F, x, t: F.cross_entropy(x, t, reduction="sum", label_smoothing=0.3),
     [_rand(2, 3, 4), _ints([[0, 2, 1, 1], [2, 2, 0, 1]])]),
    ("cross_entropy_probs", lambda F, x, p: F.cross_entropy(x, F.softmax(p, 1), label_smoothing=0.1),
     [_rand(4, 3), _rand(4, 3)]),
    ("nll_loss", lambda F, x, t: F.nll_loss(F.log_softmax(x, 1), t, reduction="none"),
     [_rand(5, 3), _ints([0, 2, 2, 1, 0])]),
    ("mse_loss", lambda F, a, b: F.mse_loss(a, b), [_rand(3, 4), _rand(3, 4)]),
    ("layer_norm", lambda F, x, w, b: F.layer_norm(x, (3, 4), w, b, eps=1e-3),
     [_rand(2, 3, 4, scale=2), _rand(3, 4), _rand(3, 4)]),
]


@needs_torch
@pytest.mark.parametrize("name, fn, specs", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_matches_torch(name, fn, specs, device):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    arrays = [rng.standard_normal(s[1]) * s[2] if s[0] in ("f", "const") else
              rng.integers(0, 3, s[1]).astype(np.float64) if s[0] == "ties" else s[1] for s in specs]
    grad = [s[0] in ("f", "ties") for s in specs]
    ours = [ember.tensor(a, dtype=F64, device=device).require_grad() if g else
            t64(a) if a.dtype.kind == "f" else idx(a) for a, g in zip(arrays, grad)]
    theirs = [torch.tensor(a, requires_grad=g) for a, g in zip(arrays, grad)]
    out, ref = fn(F, *ours), fn(TF, *theirs)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    weights = rng.uniform(0.5, 1.5, ref.shape)
    grads = (out * t64(weights)).sum().backward()
    (ref * torch.tensor(weights)).sum().backward()
    for o, th in zip(ours, theirs):
        if th.requires_grad:
            np.testing.assert_allclose(o.grad(grads).numpy(), th.grad.numpy(), rtol=1e-9, atol=1e-12)


# --- errors -------------------------------------------------------------------------------
Z = ember.zeros
X4 = Z((2, 3, 5, 5))
W4 = Z((4, 3, 3, 3))
LOGITS = Z((2, 4))
I64, I32, BOOL = ember.int64, ember.int32, ember.bool_

ERRORS = [
    ("linear_shapes", lambda: F.linear(Z((2, 3)), Z((4, 5))), ValueError,
     r"linear.*\(2, 3\).*\(4, 5\)"),
    ("linear_bias", lambda: F.linear(Z((2, 3)), Z((4, 3)), Z(3)), ValueError, "linear: bias"),
    ("linear_int", lambda: F.linear(Z((2, 3), dtype=I64), Z((4, 3))), TypeError, "linear: input"),
    ("conv2d_channels", lambda: F.conv2d(X4, Z((4, 2, 3, 3))), ValueError,
     r"conv2d.*\(2, 3, 5, 5\).*\(4, 2, 3, 3\)"),
    ("conv2d_input_rank", lambda: F.conv2d(Z((5, 5)), W4), ValueError,
     r"conv2d: expected a 3-D .* \(5, 5\)"),
    ("conv2d_weight_rank", lambda: F.conv2d(X4, Z((4, 3, 3))), ValueError, "conv2d: expected a 4-D weight"),
    ("conv2d_too_small", lambda: F.conv2d(X4, Z((4, 3, 7, 7))), ValueError,
     r"conv2d: input of shape \(2, 3, 5, 5\)"),
    ("conv2d_groups", lambda: F.conv2d(X4, W4, groups=2), ValueError, "conv2d.*groups=2"),
    ("conv2d_out_groups", lambda: F.conv2d(Z((1, 4, 5, 5)), Z((3, 2, 3, 3)), groups=2), ValueError,
     "not divisible by groups"),
    ("conv2d_bias", lambda: F.conv2d(X4, W4, Z(3)), ValueError, "conv2d: bias"),
    ("conv2d_stride", lambda: F.conv2d(X4, W4, stride=0), ValueError, "conv2d: stride"),
    ("conv2d_same_strided", lambda: F.conv2d(X4, W4, stride=2, padding="same"), ValueError, "same"),
    ("conv2d_padding_str", lambda: F.conv2d(X4, W4, padding="full"), ValueError, "conv2d: padding"),
    ("conv2d_int_weight", lambda: F.conv2d(X4, Z((4, 3, 3, 3), dtype=I32)), TypeError, "conv2d: weight"),
    ("conv1d_rank", lambda: F.conv1d(X4, Z((4, 3, 3))), ValueError, "conv1d: expected a 2-D"),
    ("max_pool2d_rank", lambda: F.max_pool2d(Z((5, 5)), 2), ValueError, "max_pool2d"),
    ("max_pool2d_padding", lambda: F.max_pool2d(X4, 2, padding=2), ValueError, "max_pool2d: padding"),
    ("max_pool2d_kernel", lambda: F.max_pool2d(X4, 0), ValueError, "max_pool2d: kernel_size"),
    ("max_pool2d_too_small", lambda: F.max_pool2d(X4, 6), ValueError,
     r"max_pool2d: input of shape \(2, 3, 5, 5\)"),
    ("avg_pool2d_int", lambda: F.avg_pool2d(Z((1, 1, 4, 4), dtype=I64), 2), TypeError, "avg_pool2d"),
    ("embedding_float_index", lambda: F.embedding(Z(3), Z((4, 2))), TypeError, "embedding: input"),
    ("embedding_range", lambda: F.embedding(idx([0, 4]), Z((4, 2))), IndexError, "embedding: index 4"),
    ("embedding_weight_rank", lambda: F.embedding(idx([0]), Z(4)), ValueError, "embedding: weight"),
    ("cross_entropy_target_shape", lambda: F.cross_entropy(Z((3, 4)), idx([0, 1])), ValueError,
     r"cross_entropy: target of shape \(2,\).*\(3, 4\)"),
    ("cross_entropy_class_range", lambda: F.cross_entropy(LOGITS, idx([0, 4])), IndexError,
     "cross_entropy: target class 4"),
    ("cross_entropy_reduction", lambda: F.cross_entropy(LOGITS, idx([0, 1]), reduction="avg"),
     ValueError, "reduction"),
    ("cross_entropy_smoothing", lambda: F.cross_entropy(LOGITS, idx([0, 1]), label_smoothing=2),
     ValueError, "label_smoothing"),
    ("cross_entropy_bool_target", lambda: F.cross_entropy(LOGITS, Z(2, dtype=BOOL)), TypeError,
     "cross_entropy: target"),
    ("cross_entropy_weight", lambda: F.cross_entropy(LOGITS, idx([0, 1]), ember.ones(3)), ValueError,
     "cross_entropy: weight"),
    ("mse_shapes", lambda: F.mse_loss(Z((2, 3)), Z(3)), ValueError, r"mse_loss.*\(2, 3\).*\(3,\)"),
    ("dropout_p", lambda: F.dropout(Z(3), 1.5), ValueError, "dropout: p"),
    ("dropout_generator", lambda: F.dropout(Z(3), 0.5, generator=3), TypeError, "dropout: generator"),
    ("layer_norm_shape", lambda: F.layer_norm(Z((2, 3)), (2,)), ValueError, r"layer_norm.*\(2,\).*\(2, 3\)"),
    ("layer_norm_weight", lambda: F.layer_norm(Z((2, 3)), 3, ember.ones(2)), ValueError,
     "layer_norm: weight"),
    ("gelu_approximate", lambda: F.gelu(Z(3), approximate="fast"), ValueError, "gelu"),
    ("relu_int", lambda: F.relu(Z(3, dtype=I64)), TypeError, "relu"),
]


@pytest.mark.parametrize("name, fn, exc, match", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
def test_cross_entropy_without_ignored_targets_equals_the_general_formula(
        reduction, label_smoothing, device, monkeypatch):
    """Eager on the CPU, targets none of which is ignored take the short formula (the gathered
    log-probabilities alone): the loss and its gradient equal the general formula's bit for
    bit (the one a traced step, CUDA or a class weight take)."""
    from ember.nn import functional
    rng = np.random.default_rng(5)
    logits = rng.standard_normal((7, 3))
    target = idx(rng.integers(0, 3, 7))

    def loss_and_grad():
        x = ember.tensor(logits, device=device).require_grad()
        loss = F.cross_entropy(x * 1.5, target, reduction=reduction,
                               label_smoothing=label_smoothing)
        return loss.inner().numpy(), x.grad(loss.sum().backward()).numpy()

    short = loss_and_grad()
    monkeypatch.setattr(functional, "_tracing", lambda: True)   # the general formula
    general = loss_and_grad()
    for a, b in zip(short, general):
        np.testing.assert_array_equal(a, b)
