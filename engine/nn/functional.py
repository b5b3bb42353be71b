"""Module ops a scientific script needs, with PyTorch's names and argument order.

Every function here is a composition of Ember tensor ops (matmul, reshape,
index_select, gather, where, reductions...), so its gradient comes from the
rule table in ``ember.autograd.rules`` with no rule of its own, on every device
and under every checkpointing strategy.

Convolution and pooling use im2col: the input, flattened per channel, is read
through one ``index_select`` of precomputed positions (the window offsets of
every output position; padding reads an extra "pad" slot appended to each
channel), giving a ``(N, C, K, L)`` matrix of ``K`` window entries for each of
``L`` output positions.  A convolution is then one batched matmul with the
weight (BLAS on the CPU); a max pool is an argmax and a gather over the ``K``
dim (the gradient goes to the first maximum of each window, as in PyTorch),
an average pool a sum over it.

>>> import ember.nn.functional as F
>>> x = ember.ones((1, 1, 4, 4))
>>> F.conv2d(x, ember.ones((2, 1, 3, 3)), padding=1).shape
(1, 2, 4, 4)
"""
import functools
import math
import numbers

import numpy as np

from .. import dispatch
from .. import dtypes as dt
from .. import random as _random
from ..creation import cat, from_numpy, full
from ..backends import recorder as _recorder
from ..ir import Op
from ..tensor import Tensor


def _tracing():
    """Inside a step ``ember.compile`` traces (no value may be read: one formula for all)."""
    return _recorder() is not None

__all__ = [
    "linear", "conv1d", "conv2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d",
    "embedding", "relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax",
    "cross_entropy", "nll_loss", "mse_loss", "dropout", "layer_norm",
]

_REDUCTIONS = ("mean", "sum", "none")


# --- argument checks -----------------------------------------------------------------------
def _check_tensor(name, what, t):
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: {what} must be a tensor, got {type(t).__name__}")


def _check_float(name, what, t):
    _check_tensor(name, what, t)
    if t.kind is not dt.Float:
        raise TypeError(f"{name}: {what} must be a Float tensor, got {t.dtype.name}")


def _check_int(name, what, t):
    _check_tensor(name, what, t)
    if t.kind is not dt.Int:
        raise TypeError(f"{name}: {what} must be an Int tensor, got {t.dtype.name}")


def _check_reduction(name, reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _ints(name, what, value, n, minimum):
    """``value`` (an int or a sequence of ``n`` ints) as a tuple of ``n`` ints >= ``minimum``."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        out = (int(value),) * n
    elif isinstance(value, (tuple, list)) and len(value) == n and all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value):
        out = tuple(int(v) for v in value)
    else:
        raise ValueError(f"{name}: {what} must be an int or {n} ints, got {value!r}")
    if any(v < minimum for v in out):
        raise ValueError(f"{name}: {what} must be >= {minimum}, got {value!r}")
    return out


def _reduce(loss, reduction, count=None):
    """``loss`` summed, averaged (over ``count``: a number or a tensor; default its size) or kept."""
    if reduction == "none":
        return loss
    total = loss.sum()
    if reduction == "sum":
        return total
    return total / (loss.numel() if count is None else count)


# --- linear and activations ---------------------------------------------------------------
def linear(input, weight, bias=None):
    """``input @ weight.T + bias``; ``weight`` is ``(out_features, in_features)``.

    >>> F.linear(ember.ones((2, 3)), ember.ones((4, 3)), ember.zeros(4)).shape
    (2, 4)
    """
    _check_float("linear", "input", input)
    _check_float("linear", "weight", weight)
    if weight.ndim not in (1, 2):
        raise ValueError(f"linear: weight must be 1-D or 2-D (out_features, in_features), "
                         f"got shape {weight.shape}")
    if input.ndim == 0 or input.shape[-1] != weight.shape[-1]:
        raise ValueError(f"linear: input of shape {input.shape} does not match weight of shape "
                         f"{weight.shape} (in_features {weight.shape[-1]})")
    out = input @ (weight.T if weight.ndim == 2 else weight)
    if bias is not None:
        _check_float("linear", "bias", bias)
        features = weight.shape[:1] if weight.ndim == 2 else ()
        if bias.shape not in (features, ()):
            raise ValueError(f"linear: bias of shape {bias.shape} does not match weight of shape "
                             f"{weight.shape} (expected {features})")
        out = out + bias
    return out


def relu(input):
    """``max(input, 0)``."""
    return input.relu()


def gelu(input, approximate="none"):
    """GELU: exact ``x * Φ(x)``, or PyTorch's tanh approximation (``approximate="tanh"``)."""
    if approximate == "none":
        return input.gelu()
    if approximate != "tanh":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    _check_float("gelu", "input", input)
    inner = (input + input * input * input * 0.044715) * math.sqrt(2 / math.pi)
    return input * 0.5 * (inner.tanh() + 1)


def silu(input):
    """``x * sigmoid(x)``."""
    return input.silu()


def sigmoid(input):
    return input.sigmoid()


def tanh(input):
    return input.tanh()


def softmax(input, dim):
    """``exp(x) / sum(exp(x))`` along ``dim`` (computed stably)."""
    return input.softmax(dim)


def log_softmax(input, dim):
    """``x - log(sum(exp(x)))`` along ``dim`` (computed stably)."""
    return input.log_softmax(dim)


# --- im2col -------------------------------------------------------------------------------
class _Window:
    """Sliding windows over an ``(H, W)`` plane: kernel, stride, dilation, leading padding, output size.

    Windows that reach past the plane's end read padding, so trailing padding needs no field.
    """

    __slots__ = ("size", "kernel", "stride", "dilation", "pad_lo", "out")

    def __init__(self, size, kernel, stride, dilation, pad_lo, out):
        self.size, self.kernel, self.stride, self.dilation = size, kernel, stride, dilation
        self.pad_lo, self.out = pad_lo, out

    def key(self):
        return (self.size, self.kernel, self.stride, self.dilation, self.pad_lo, self.out)


@functools.lru_cache(maxsize=256)
def _unfold_index(size, kernel, stride, dilation, pad_lo, out):
    """Flat positions read by every (window entry, output position): shape ``(K * L,)``.

    Entry ``k = i * kw + j`` of output position ``l = oh * Wo + ow`` reads input
    ``(oh * sh - ph + i * dh, ow * sw - pw + j * dw)``; positions outside the
    plane read the pad slot ``H * W``.  Also says whether any position does.
    """
    (h, w), (kh, kw), (sh, sw), (dh, dw), (ph, pw), (ho, wo) = (
        size, kernel, stride, dilation, pad_lo, out)
    rows = (np.arange(kh) * dh)[:, None, None, None] + (np.arange(ho) * sh - ph)[None, None, :, None]
    cols = (np.arange(kw) * dw)[None, :, None, None] + (np.arange(wo) * sw - pw)[None, None, None, :]
    rows, cols = np.broadcast_arrays(rows, cols)
    inside = (rows >= 0) & (rows < h) & (cols >= 0) & (cols < w)
    index = np.where(inside, rows * w + cols, h * w).astype(np.int64).reshape(-1)
    return index, not bool(inside.all())


def _unfold(x, win, fill):
    """im2col of ``x`` ``(N, C, H, W)``: ``(N, C, K, L)``, padding read as ``fill``."""
    n, c, h, w = x.shape
    index, padded = _unfold_index(*win.key())
    flat = x.reshape(n, c, h * w)
    if padded:
        base = x.device.base()
        flat = cat([flat, full((n, c, 1), fill, dtype=x.dtype, device=base)], 2)
    idx = from_numpy(index)
    if x.device.type != "cpu":
        idx = idx.to(x.device.base())
    k = win.kernel[0] * win.kernel[1]
    return flat.index_select(2, idx).reshape(n, c, k, win.out[0] * win.out[1])


def _out_size(name, size, kernel, stride, dilation, lo, hi, ceil_mode, shape_msg):
    span = dilation * (kernel - 1) + 1
    room = size + lo + hi - span
    if room < 0:
        raise ValueError(f"{name}: {shape_msg}: the (padded) input size {size + lo + hi} is "
                         f"smaller than the kernel's extent {span}")
    out = (room + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + lo:   # the last window must start inside
        out -= 1
    return out


# --- convolution --------------------------------------------------------------------------
def _conv_padding(name, padding, nd, kernel, stride, dilation):
    """Per spatial dim ``(lo, hi)`` padding from an int, ints, ``"valid"`` or ``"same"``."""
    if padding == "valid":
        return [(0, 0)] * nd
    if padding == "same":
        if any(s != 1 for s in stride):
            raise ValueError(f"{name}: padding='same' needs stride 1, got stride {stride}")
        pads = []
        for k, d in zip(kernel, dilation):
            total = d * (k - 1)
            pads.append((total // 2, total - total // 2))   # the extra one on the right, as PyTorch
        return pads
    if isinstance(padding, str):
        raise ValueError(f"{name}: padding must be an int, ints, 'valid' or 'same', got {padding!r}")
    return [(p, p) for p in _ints(name, "padding", padding, nd, 0)]


def _conv(name, nd, input, weight, bias, stride, padding, dilation, groups):
    _check_float(name, "input", input)
    _check_float(name, "weight", weight)
    if input.ndim not in (nd + 1, nd + 2):
        raise ValueError(f"{name}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, "
                         f"got shape {input.shape}")
    if weight.ndim != nd + 2:
        raise ValueError(f"{name}: expected a {nd + 2}-D weight (out_channels, in_channels / groups, "
                         f"*kernel), got shape {weight.shape}")
    if not isinstance(groups, numbers.Integral) or isinstance(groups, bool) or groups < 1:
        raise ValueError(f"{name}: groups must be a positive int, got {groups!r}")
    batched = input.ndim == nd + 2
    x = input if batched else input.unsqueeze(0)
    n, c = x.shape[:2]
    o, cg = weight.shape[:2]
    if c != cg * groups:
        raise ValueError(f"{name}: input of shape {input.shape} has {c} channels, but weight of shape "
                         f"{weight.shape} with groups={groups} expects {cg * groups}")
    if o % groups:
        raise ValueError(f"{name}: weight of shape {weight.shape} has {o} output channels, "
                         f"not divisible by groups={groups}")
    if bias is not None:
        _check_float(name, "bias", bias)
        if bias.shape != (o,):
            raise ValueError(f"{name}: bias of shape {bias.shape} does not match weight of shape "
                             f"{weight.shape} (expected ({o},))")
    kernel = weight.shape[2:]
    stride = _ints(name, "stride", stride, nd, 1)
    dilation = _ints(name, "dilation", dilation, nd, 1)
    pads = _conv_padding(name, padding, nd, kernel, stride, dilation)
    spatial = x.shape[2:]
    msg = f"input of shape {input.shape}, weight of shape {weight.shape}"
    out = tuple(_out_size(name, s, k, st, d, lo, hi, False, msg)
                for s, k, st, d, (lo, hi) in zip(spatial, kernel, stride, dilation, pads))
    if nd == 1:   # a 1-D convolution is a 2-D one over a plane of height 1
        spatial, kernel, stride, dilation = (1,) + spatial, (1,) + kernel, (1,) + stride, (1,) + dilation
        pads, out = [(0, 0)] + pads, (1,) + out
        x = x.reshape(n, c, *spatial)
    win = _Window(spatial, kernel, stride, dilation, tuple(p[0] for p in pads), out)
    cols = _unfold(x, win, 0.0)                                  # (N, C, K, L)
    k, positions = cols.shape[2], cols.shape[3]
    if groups == 1:
        y = weight.reshape(o, c * k) @ cols.reshape(n, c * k, positions)   # (N, O, L)
    else:
        w = weight.reshape(groups, o // groups, cg * k)
        y = w @ cols.reshape(n, groups, cg * k, positions)                 # (N, G, O/G, L)
    y = y.reshape((n, o) + out[-nd:])
    if bias is not None:
        y = y + bias.reshape((o,) + (1,) * nd)
    return y if batched else y.squeeze(0)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution (cross-correlation, as PyTorch) of ``(N, C_in, L)`` or ``(C_in, L)``.

    ``weight`` is ``(C_out, C_in / groups, k)``; ``padding`` an int, ``"valid"`` or ``"same"``.
    """
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation, as PyTorch) of ``(N, C_in, H, W)`` or ``(C_in, H, W)``.

    ``weight`` is ``(C_out, C_in / groups, kh, kw)``; ``stride``, ``padding`` and
    ``dilation`` are ints or pairs (``padding`` also ``"valid"`` or ``"same"``).
    Runs as im2col (one ``index_select``) and one batched matmul.

    >>> F.conv2d(ember.ones((1, 2, 5, 5)), ember.ones((3, 2, 3, 3)), stride=2).shape
    (1, 3, 2, 2)
    """
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


# --- pooling ------------------------------------------------------------------------------
def _pool_window(name, nd, input, kernel_size, stride, padding, dilation, ceil_mode, max_pad):
    """(input as ``(N, C, H, W)``, its windows, the output shape) for a pooling op."""
    _check_float(name, "input", input)
    if input.ndim not in (nd + 1, nd + 2):
        raise ValueError(f"{name}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, "
                         f"got shape {input.shape}")
    kernel = _ints(name, "kernel_size", kernel_size, nd, 1)
    stride = kernel if stride is None or stride == () or stride == [] else _ints(
        name, "stride", stride, nd, 1)
    pad = _ints(name, "padding", padding, nd, 0)
    dilation = _ints(name, "dilation", dilation, nd, 1)
    for p, k, d in zip(pad, kernel, dilation):
        if p > max_pad(k, d):
            raise ValueError(f"{name}: padding {padding!r} must be at most half the kernel size "
                             f"{kernel_size!r}")
    batched = input.ndim == nd + 2
    x = input if batched else input.unsqueeze(0)
    spatial = x.shape[2:]
    msg = f"input of shape {input.shape}, kernel_size {kernel_size!r}"
    out = tuple(_out_size(name, s, k, st, d, p, p, ceil_mode, msg)
                for s, k, st, d, p in zip(spatial, kernel, stride, dilation, pad))
    if nd == 1:
        spatial, kernel, stride, dilation = (1,) + spatial, (1,) + kernel, (1,) + stride, (1,) + dilation
        pad, out = (0,) + pad, (1,) + out
    x = x.reshape(x.shape[:2] + spatial)
    win = _Window(spatial, kernel, stride, dilation, pad, out)
    return x, win, input.shape[:-nd] + out[-nd:]


def _max_pool(name, nd, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    x, win, shape = _pool_window(name, nd, input, kernel_size, stride, padding, dilation, ceil_mode,
                                 lambda k, d: (d * (k - 1) + 1) // 2)
    cols = _unfold(x, win, -math.inf)                  # (N, C, K, L)
    first = cols.argmax(2, keepdim=True)               # the first maximum of each window
    out = cols.gather(2, first).reshape(shape)
    if not return_indices:
        return out
    index = from_numpy(_unfold_index(*win.key())[0].reshape(1, 1, cols.shape[2], cols.shape[3]))
    if x.device.type != "cpu":
        index = index.to(x.device.base())
    return out, index.expand(cols.shape).gather(2, first).reshape(shape)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Largest value of each window of ``(N, C, H, W)`` or ``(C, H, W)``; ``stride`` defaults to the kernel.

    Padding counts as ``-inf``.  The gradient of a window goes to its first maximum
    (PyTorch).  ``return_indices=True`` also gives the flat ``h * W + w`` position of each.

    >>> F.max_pool2d(ember.arange(16.0).reshape(1, 1, 4, 4), 2)
    tensor([[[[ 5.,  7.],
              [13., 15.]]]], dtype=float32)
    """
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Largest value of each window of ``(N, C, L)`` or ``(C, L)``."""
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


@functools.lru_cache(maxsize=256)
def _avg_divisors(size, kernel, stride, pad, out, count_include_pad):
    """Per output position, how many entries PyTorch's avg_pool divides by (flat, ``(L,)``)."""
    per_dim = []
    for s, k, st, p, o in zip(size, kernel, stride, pad, out):
        start = np.arange(o) * st - p
        end = np.minimum(start + k, s + p)
        whole = end - start                                     # the window, padding included
        inside = np.minimum(end, s) - np.maximum(start, 0)      # the part inside the input
        per_dim.append(whole if count_include_pad else inside)
    return (per_dim[0][:, None] * per_dim[1][None, :]).reshape(-1).astype(np.float64)


def _avg_pool(name, nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override):
    x, win, shape = _pool_window(name, nd, input, kernel_size, stride, padding, 1, ceil_mode,
                                 lambda k, d: k // 2)
    total = _unfold(x, win, 0.0).sum(2)                # (N, C, L)
    if divisor_override is not None:
        if not divisor_override:
            raise ValueError(f"{name}: divisor_override must not be zero")
        return (total / divisor_override).reshape(shape)
    div = _avg_divisors(win.size, win.kernel, win.stride, win.pad_lo, win.out, bool(count_include_pad))
    if (div == div[0]).all():
        return (total / float(div[0])).reshape(shape)
    d = from_numpy(div.astype(input.dtype.np))
    if x.device.type != "cpu":
        d = d.to(x.device.base())
    return (total / d).reshape(shape)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean of each window of ``(N, C, H, W)`` or ``(C, H, W)``; ``stride`` defaults to the kernel.

    Padding counts as zeros and, with ``count_include_pad`` (the default), in the divisor.
    """
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Mean of each window of ``(N, C, L)`` or ``(C, L)``."""
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, None)


# --- embedding ----------------------------------------------------------------------------
def _check_range(name, what, index, size):
    dispatch.check_index_range(name, index, size, what=what)


def embedding(input, weight, padding_idx=None):
    """Rows of ``weight`` ``(num_embeddings, dim)`` picked by the Int tensor ``input``.

    The output has shape ``input.shape + (dim,)``.  Entries equal to ``padding_idx``
    take no gradient (their row keeps its value), as in PyTorch.

    >>> F.embedding(ember.tensor([[0, 2]]), ember.eye(3)).shape
    (1, 2, 3)
    """
    _check_int("embedding", "input", input)
    _check_float("embedding", "weight", weight)
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), "
                         f"got shape {weight.shape}")
    rows = weight.shape[0]
    _check_range("embedding", "index", input, rows)
    out = weight.index_select(0, input.reshape(-1)).reshape(input.shape + weight.shape[1:])
    if padding_idx is not None:
        if not -rows <= padding_idx < rows:
            raise ValueError(f"embedding: padding_idx {padding_idx} is out of range for weight of "
                             f"shape {weight.shape}")
        pad = (input == padding_idx % rows).unsqueeze(-1)
        out = out.mask_where(pad, out.without_autodiff())   # same values, no gradient there
    return out


# --- losses -------------------------------------------------------------------------------
def _class_weight(name, weight, classes):
    if weight is None:
        return None
    _check_float(name, "weight", weight)
    if weight.shape != (classes,):
        raise ValueError(f"{name}: weight of shape {weight.shape} must have one entry per class "
                         f"({classes},)")
    return weight


def _nll(name, logp, target, weight, ignore_index):
    """(per-entry loss, its denominator for 'mean', ignored mask or None) for class indices."""
    class_dim = 0 if logp.ndim == 1 else 1
    classes = logp.shape[class_dim]
    expected = logp.shape[:class_dim] + logp.shape[class_dim + 1:]
    if target.shape != expected:
        raise ValueError(f"{name}: target of shape {target.shape} does not match input of shape "
                         f"{logp.shape} (expected class indices of shape {expected})")
    if weight is None and target._device.type == "cpu" and target.numel() and not _tracing():
        # eager on the CPU the targets are read anyway (the range check, on the host's own
        # array): when none is ignored, the loss is the picked log-probabilities alone, the
        # same values as below without its seven masking and counting ops
        if not (target._host(f"{name}: the target check") == ignore_index).any():
            _check_range(name, "target class", target, classes)
            loss = -dispatch.apply(Op.GATHER, logp, target.unsqueeze(class_dim),
                                   axis=class_dim).squeeze(class_dim)
            return loss, loss.numel(), None
    # (no branch on the data: the same ops whether or not any target is ignored, so the loss
    # traces inside ember.compile)
    ignored = target == ignore_index
    safe = target.mask_fill(ignored, 0)
    _check_range(name, "target class", safe, classes)
    # (checked once, above: the gather and index_select ops take the classes as they are)
    loss = -dispatch.apply(Op.GATHER, logp, safe.unsqueeze(class_dim), axis=class_dim).squeeze(
        class_dim)
    if weight is not None:
        picked = dispatch.apply(Op.INDEX_SELECT, weight, safe.reshape(-1), axis=0)
        picked = picked.reshape(safe.shape).mask_fill(ignored, 0)
        loss = loss * picked
        count = picked.sum()
    else:
        count = (~ignored).sum().cast(logp.dtype)
    return loss.mask_fill(ignored, 0), count, ignored


def nll_loss(input, target, weight=None, *, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of class indices ``target`` under log-probabilities ``input``.

    ``input`` is ``(C,)``, ``(N, C)`` or ``(N, C, d1, ...)``; ``target`` has its shape without
    the class dim.  ``reduction="mean"`` divides by the (weighted) count of non-ignored targets.
    """
    _check_float("nll_loss", "input", input)
    _check_int("nll_loss", "target", target)
    _check_reduction("nll_loss", reduction)
    if input.ndim == 0:
        raise ValueError("nll_loss: input must have a class dim, got a 0-d tensor")
    weight = _class_weight("nll_loss", weight, input.shape[0 if input.ndim == 1 else 1])
    loss, count, _ = _nll("nll_loss", input, target, weight, ignore_index)
    return _reduce(loss, reduction, count)


def cross_entropy(input, target, weight=None, *, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    """Cross entropy between logits ``input`` and ``target`` (PyTorch's ``F.cross_entropy``).

    ``input`` is ``(C,)``, ``(N, C)`` or ``(N, C, d1, ...)`` (classes in dim 1).  ``target``
    is either class indices (an Int tensor of ``input``'s shape without the class dim;
    entries equal to ``ignore_index`` are skipped) or class probabilities (a Float tensor of
    ``input``'s shape).  ``label_smoothing`` mixes the target with the uniform distribution;
    ``weight`` rescales each class.

    >>> F.cross_entropy(ember.zeros((2, 4)), ember.tensor([1, 3])).item()  # log(4)
    1.3862943649291992
    """
    name = "cross_entropy"
    _check_float(name, "input", input)
    _check_tensor(name, "target", target)
    _check_reduction(name, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{name}: label_smoothing must lie in [0, 1], got {label_smoothing}")
    if input.ndim == 0:
        raise ValueError(f"{name}: input must have a class dim, got a 0-d tensor")
    class_dim = 0 if input.ndim == 1 else 1
    classes = input.shape[class_dim]
    weight = _class_weight(name, weight, classes)
    w_shape = tuple(classes if d == class_dim else 1 for d in range(input.ndim))
    logp = input.log_softmax(class_dim)
    if target.kind is dt.Float:       # class probabilities
        if target.shape != input.shape:
            raise ValueError(f"{name}: probability target of shape {target.shape} must match input "
                             f"of shape {input.shape}")
        if label_smoothing:
            target = target * (1 - label_smoothing) + label_smoothing / classes
        terms = logp * target
        if weight is not None:
            terms = terms * weight.reshape(w_shape)
        loss = -terms.sum(class_dim)
        return _reduce(loss, reduction, input.numel() // classes if classes else 0)
    if target.kind is not dt.Int:
        raise TypeError(f"{name}: target must be Int class indices or Float probabilities, "
                        f"got {target.dtype.name}")
    nll, count, ignored = _nll(name, logp, target, weight, ignore_index)
    loss = _reduce(nll, reduction, count)
    if not label_smoothing:
        return loss
    terms = logp if weight is None else logp * weight.reshape(w_shape)
    smooth = -terms.sum(class_dim)
    if ignored is not None:
        smooth = smooth.mask_fill(ignored, 0)
    smooth = _reduce(smooth, reduction, count)
    return loss * (1 - label_smoothing) + smooth * (label_smoothing / classes)


def mse_loss(input, target, reduction="mean"):
    """Mean (or sum, or per-entry) squared difference of two tensors of the same shape."""
    _check_float("mse_loss", "input", input)
    _check_float("mse_loss", "target", target)
    _check_reduction("mse_loss", reduction)
    if input.shape != target.shape:
        raise ValueError(f"mse_loss: input of shape {input.shape} and target of shape "
                         f"{target.shape} must have the same shape")
    d = input - target
    return _reduce(d * d, reduction)


# --- regularisation and normalisation ------------------------------------------------------
def dropout(input, p=0.5, training=True, *, seed=None, generator=None):
    """Zero each entry with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    The mask is drawn from ``generator`` (a ``numpy.random.Generator``), else from a fresh
    generator seeded with ``seed``, else from Ember's generator (``ember.random.seed``).
    With ``training=False`` (or ``p == 0``) the input is returned unchanged.

    >>> F.dropout(ember.ones(6), 0.5, seed=0).tolist()
    [2.0, 0.0, 0.0, 0.0, 2.0, 2.0]
    """
    _check_float("dropout", "input", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must lie in [0, 1], got {p}")
    if seed is not None and generator is not None:
        raise ValueError("dropout: give seed or generator, not both")
    if not training or p == 0:
        return input
    if p == 1:
        return input * 0.0
    base = input.device.base()
    if generator is not None or seed is not None:
        rng = generator if generator is not None else np.random.default_rng(seed)
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"dropout: generator must be a numpy.random.Generator, "
                            f"got {type(rng).__name__}")
        keep = from_numpy(rng.random(input.shape) >= p)
        if base.type != "cpu":
            keep = keep.to(base)
    else:
        keep = _random.bernoulli(1 - p, input.shape, device=base)
    return input * (keep.cast(input.dtype) * (1 / (1 - p)))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the last dims (``normalized_shape``) to zero mean and unit variance.

    ``(x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance, as PyTorch.
    """
    _check_float("layer_norm", "input", input)
    shape = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) else tuple(
        normalized_shape)
    k = len(shape)
    if not k or input.ndim < k or input.shape[input.ndim - k:] != shape:
        raise ValueError(f"layer_norm: normalized_shape {shape} does not match the last dims of "
                         f"input of shape {input.shape}")
    dims = tuple(range(input.ndim - k, input.ndim))
    centered = input - input.mean(dims, keepdim=True)
    var = (centered * centered).mean(dims, keepdim=True)
    out = centered * (var + eps).rsqrt()
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            _check_float("layer_norm", what, t)
            if t.shape != shape:
                raise ValueError(f"layer_norm: {what} of shape {t.shape} must have the "
                                 f"normalized shape {shape}")
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out
