"""Fuzz: fusion on against fusion off, bit for bit.

Random chains of elementwise ops (a small vocabulary, so that chains repeat and their
generated kernels come from the disk cache on a second run) over broadcast operands in
random layouts with special values, sometimes ending in a reduction that fusion computes
inside its kernel.  Fused and unfused results must be identical: values, NaN positions, the
sign of zeros, dtypes and shapes; for float chains, half of the time, the gradients of the
result's sum as well (under NONE or BALANCED).
"""
import numpy as np
from hypothesis import strategies as st

import ember
from ember import fusion

from .settings import fuzz
from .strategies import broadcast_shapes, operands

NONE, BALANCED = ember.CheckpointingStrategy.NONE, ember.CheckpointingStrategy.BALANCED

FLOAT_UNARY = {
    "neg": lambda x: -x, "abs": lambda x: x.abs(), "exp": lambda x: x.exp(),
    "tanh": lambda x: x.tanh(), "sqrt": lambda x: x.sqrt(), "floor": lambda x: x.floor(),
    "relu": lambda x: x.relu(), "sigmoid": lambda x: x.sigmoid(),
}
FLOAT_BINARY = {
    "add": lambda x, y: x + y, "mul": lambda x, y: x * y, "sub": lambda x, y: x - y,
    "div": lambda x, y: x / y, "max": lambda x, y: x.maximum(y),
    "where": lambda x, y: ember.where(x < y, x, y * 0.5),
}
INT_UNARY = {"neg": lambda x: -x, "abs": lambda x: x.abs(), "not": lambda x: ~x}
INT_BINARY = {
    "add": lambda x, y: x + y, "mul": lambda x, y: x * y, "floordiv": lambda x, y: x // y,
    "shl": lambda x, y: x << y, "and": lambda x, y: x & y, "max": lambda x, y: x.maximum(y),
}
REDUCTIONS = {"sum": lambda x: x.sum(-1), "max": lambda x: x.max(), "prod": lambda x: x.prod(-1)}


@st.composite
def chains(draw):
    dtype = draw(st.sampled_from(["float32", "float64", "int32"]))
    unary, binary = (INT_UNARY, INT_BINARY) if dtype == "int32" else (FLOAT_UNARY, FLOAT_BINARY)
    steps = []
    for _ in range(draw(st.integers(2, 5))):
        if draw(st.booleans()):
            steps.append(("u", draw(st.sampled_from(sorted(unary)))))
        else:
            steps.append(("b", draw(st.sampled_from(sorted(binary))), draw(st.integers(0, 2))))
    reduction = draw(st.sampled_from([None, None, "sum", "max", "prod"]))
    return dtype, steps, reduction


def _run(dtype, steps, reduction, tensors, fused, strategy=None):
    """The chain's result, and with ``strategy`` the gradients of ``sum(result)`` for the
    tensors (autodiff leaves under that checkpointing strategy)."""
    unary, binary = (INT_UNARY, INT_BINARY) if dtype == "int32" else (FLOAT_UNARY, FLOAT_BINARY)
    previous = fusion.set_enabled(fused)
    try:
        if strategy is not None:
            device = ember.Device.cpu().gradient_checkpointing(strategy)
            tensors = [ember.tensor(t, device=device).require_grad() for t in tensors]
        x = tensors[0]
        for step in steps:
            if step[0] == "u":
                x = unary[step[1]](x)
            else:
                x = binary[step[1]](x, tensors[step[2]])
        out = x if reduction is None or x.ndim == 0 or x.numel() == 0 else REDUCTIONS[reduction](x)
        result = [(out.numpy().copy(), out.dtype)]
        if strategy is not None:
            grads = out.sum().backward()
            for t in tensors:
                g = t.grad(grads)
                result.append((None, None) if g is None else (g.numpy().copy(), g.dtype))
        return result
    finally:
        fusion.set_enabled(previous)


@fuzz("fusion", 15, data=st.data())
def test_fused_chains_equal_unfused(data, monkeypatch, hot_chains):
    monkeypatch.setattr(fusion, "REDUCE_MIN_SIZE", 1)   # small inputs fuse into reductions too
    dtype, steps, reduction = data.draw(chains(), "chain")
    shps = data.draw(broadcast_shapes(3, max_dims=3), "shapes")
    arrays = [data.draw(operands(dtype, s)) for s in shps]
    tensors = [t for _, t in arrays]
    strategy = None
    if dtype != "int32" and data.draw(st.booleans(), "gradients"):
        strategy = data.draw(st.sampled_from([NONE, BALANCED]), "strategy")
    with np.errstate(all="ignore"):
        fused = _run(dtype, steps, reduction, tensors, True, strategy)
        unfused = _run(dtype, steps, reduction, tensors, False, strategy)
    for (got, gd), (want, wd) in zip(fused, unfused):
        assert gd is wd, (gd, wd, steps)
        if got is None:
            continue
        assert got.shape == want.shape, (got.shape, want.shape)
        np.testing.assert_array_equal(got, want, err_msg=f"{dtype} {steps} {reduction} {strategy}")
        if got.dtype.kind == "f":
            assert (np.signbit(got) == np.signbit(want))[~np.isnan(want)].all(), (steps, reduction)
