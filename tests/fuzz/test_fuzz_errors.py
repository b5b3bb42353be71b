"""Fuzz: bad arguments of every kind raise TypeError, ValueError or IndexError naming the op,
and nothing that could kill the interpreter is reachable from the public API.

Crash candidates (DLPack export of views to PyTorch and numpy, DLPack import, ``from_numpy``
of arbitrary strided arrays followed by ops) run in a subprocess, a batch of drawn examples
per process: a crash fails the test with the example the child was running.
"""
import json
import subprocess
import sys
import textwrap

import numpy as np
from hypothesis import strategies as st

import ember

from .settings import fuzz
from .strategies import assert_raises_clearly, shapes

BAD_VALUES = [None, "0", 1.5, [0, 1], {"a": 1}, 1j, object(), True, float("nan"), -10, 10,
              2 ** 70, (0, 0), (5,), np.float64(1.0)]


def _t(dtype="float32", shape=(2, 3)):
    return ember.ones(shape, dtype=getattr(ember, dtype) if dtype != "bool" else ember.bool_)


# op -> call(t, bad) with ``bad`` in a place where only some values are legal
CALLS = {
    "sum": lambda t, v: t.sum(v), "mean": lambda t, v: t.mean(v), "max": lambda t, v: t.max(v),
    "argmax": lambda t, v: t.argmax(v), "cumsum": lambda t, v: t.cumsum(v),
    "softmax": lambda t, v: t.softmax(v), "sort": lambda t, v: t.sort(v),
    "topk": lambda t, v: t.topk(v), "transpose": lambda t, v: t.transpose(v, 0),
    "unsqueeze": lambda t, v: t.unsqueeze(v), "flip": lambda t, v: t.flip(v),
    "reshape": lambda t, v: t.reshape(v), "expand": lambda t, v: t.expand(v, 3),
    "permute": lambda t, v: t.permute(v, 0), "narrow": lambda t, v: t.narrow(0, v, 1),
    "split": lambda t, v: t.split(v), "chunk": lambda t, v: t.chunk(v),
    "repeat": lambda t, v: t.repeat(v, 1), "gather": lambda t, v: t.gather(0, v),
    "index_select": lambda t, v: t.index_select(0, v), "scatter": lambda t, v: t.scatter(0, v, 1.0),
    "mask_fill": lambda t, v: t.mask_fill(v, 0.0), "where": lambda t, v: ember.where(v, t, t),
    "cat": lambda t, v: ember.cat([t, v]), "stack": lambda t, v: ember.stack([t, v]),
    "matmul": lambda t, v: t @ v, "add": lambda t, v: t + v, "lt": lambda t, v: t < v,
    "clamp": lambda t, v: t.clamp(v, None), "cast": lambda t, v: t.cast(v),
    "one_hot": lambda t, v: t.cast(ember.int64).one_hot(v), "getitem": lambda t, v: t[v],
    "pow": lambda t, v: t.cast(ember.int64) ** v, "tril": lambda t, v: t.tril(v),
}
# the word each op's messages use
WORDS = {"getitem": "", "cast": "", "add": "", "lt": "", "pow": "pow", "matmul": "matmul"}


@fuzz("errors", 150, name=st.sampled_from(sorted(CALLS)), value=st.sampled_from(BAD_VALUES),
      dtype=st.sampled_from(["float32", "int64", "bool"]), shape=shapes(max_dims=3, max_side=3))
def test_bad_arguments_raise_clearly(name, value, dtype, shape):
    """Either the call is legal (and gives a tensor or a list of tensors) or it raises one of
    TypeError/ValueError/IndexError (DeviceError for devices) naming the op: never an
    AttributeError, a Numba error, a ZeroDivisionError or a crash."""
    t = _t(dtype, shape)
    try:
        out = CALLS[name](t, value)
    except (TypeError, ValueError, IndexError, ember.DeviceError) as e:
        for cls in type(e).__mro__:
            assert not cls.__module__.startswith("numba"), f"a Numba error escaped: {e!r}"
        word = WORDS.get(name, name)
        assert word in str(e), f"{name}({value!r}): {type(e).__name__} {str(e)!r} does not name it"
        return
    outs = out if isinstance(out, (list, tuple)) else [out]
    for o in outs:
        assert isinstance(o, ember.Tensor), (name, value, type(o))
        o.numpy()


@fuzz("errors", 40, dtype=st.sampled_from(["int8", "uint8", "int32", "int64"]),
      value=st.sampled_from([-2 ** 70, -2 ** 63 - 1, -129, -1, 128, 256, 2 ** 31, 2 ** 63, 2 ** 70]),
      name=st.sampled_from(["add", "sub", "mul", "floordiv", "mod", "and", "maximum", "shl"]))
def test_out_of_range_python_ints_raise_naming_the_op(dtype, value, name):
    """Arithmetic with an integer the dtype cannot hold raises (numpy's OverflowError, which
    is a ValueError here too); in-range values work."""
    t = ember.ones(3, dtype=getattr(ember, dtype))
    info = np.iinfo(dtype)
    fns = {"add": lambda: t + value, "sub": lambda: t - value, "mul": lambda: t * value,
           "floordiv": lambda: t // value, "mod": lambda: t % value, "and": lambda: t & value,
           "maximum": lambda: t.maximum(value), "shl": lambda: t << value}
    if info.min <= value <= info.max:
        fns[name]().numpy()
        return
    e = assert_raises_clearly(fns[name], name)
    assert isinstance(e, OverflowError) and isinstance(e, ValueError)


# --- crash candidates, in a subprocess ---------------------------------------------------------
VIEWS = st.lists(st.tuples(
    shapes(max_dims=3, max_side=4),
    st.sampled_from(["flip", "step_neg", "transpose", "expand", "stepped", "narrow", "none"]),
    st.sampled_from(["torch", "numpy", "ember", "numpy_copy_false", "torch_in"]),
    st.sampled_from(["float32", "float64", "int64", "int8", "bool"])), min_size=1, max_size=40)

_CHILD = textwrap.dedent('''
    import json, sys
    import numpy as np
    import ember
    try:
        import torch
    except ImportError:
        torch = None
    cases = json.loads(sys.argv[1])
    for i, (shape, view, consumer, dtype) in enumerate(cases):
        print("case", i, flush=True)
        d = ember.bool_ if dtype == "bool" else getattr(ember, dtype)
        t = ember.arange(int(np.prod(shape))).reshape(*shape).cast(d) if shape else ember.tensor(3).cast(d)
        if view == "flip" and t.ndim:
            t = t.flip(tuple(range(t.ndim)))
        elif view == "step_neg" and t.ndim:
            t = t[::-2]
        elif view == "transpose" and t.ndim > 1:
            t = t.transpose(0, -1)
        elif view == "expand":
            t = t.unsqueeze(0).expand(3, *t.shape)
        elif view == "stepped" and t.ndim:
            t = t[::2]
        elif view == "narrow" and t.ndim and t.shape[0] > 1:
            t = t.narrow(0, 1, t.shape[0] - 1)
        want = t.numpy().copy()
        if consumer == "torch":
            if torch is None:
                continue
            got = torch.from_dlpack(t).numpy()
        elif consumer == "numpy":
            got = np.from_dlpack(t)
        elif consumer == "numpy_copy_false":
            try:
                cap = t.__dlpack__(copy=False)
            except BufferError:
                assert any(s < 0 for s in t.numpy().strides), "BufferError without a negative stride"
                continue
            got = np.from_dlpack(t)
        elif consumer == "torch_in":
            if torch is None:
                continue
            src = torch.from_numpy(want.copy())
            if src.ndim:
                src = src.transpose(0, -1) if src.ndim > 1 else src[::2]
            want = src.numpy()
            got = (ember.from_dlpack(src) + 0 if dtype != "bool" else ~ember.from_dlpack(src)).numpy()
            if dtype == "bool":
                got = ~got
        else:
            got = ember.from_dlpack(t).numpy()
        assert got.shape == want.shape and (got == want).all(), (i, got, want)
    print("done", flush=True)
''')


@fuzz("crash", 3, max_scale=4, cases=VIEWS)
def test_dlpack_of_any_view_never_crashes(cases):
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(cases)], capture_output=True,
                         text=True, timeout=300)
    last = [line for line in out.stdout.splitlines() if line.startswith("case")]
    at = cases[int(last[-1].split()[1])] if last else None
    assert out.returncode == 0 and out.stdout.strip().endswith("done"), (
        f"exit {out.returncode} at {at}: {out.stderr[-2000:]}")


_STRIDED_CHILD = textwrap.dedent('''
    import json, sys
    import numpy as np
    from numpy.lib.stride_tricks import as_strided
    import ember
    for i, (n, shape, strides, offset, op) in enumerate(json.loads(sys.argv[1])):
        print("case", i, flush=True)
        base = np.arange(n, dtype=np.float64)
        a = as_strided(base[offset:], shape=shape, strides=[s * 8 for s in strides], writeable=False)
        t = ember.from_numpy(a)
        r = {"neg": lambda: -t, "sum": lambda: t.sum(), "sort": lambda: t.sort(-1) if t.ndim else t,
             "copy": lambda: t.contiguous(), "cumsum": lambda: t.cumsum(-1) if t.ndim else t,
             "dlpack": lambda: ember.from_dlpack(t), "matmul": lambda: t @ t.transpose() if t.ndim == 2 else t}[op]()
        want = {"neg": lambda: -a, "sum": lambda: a.sum(), "sort": lambda: np.sort(a, -1) if a.ndim else a,
                "copy": lambda: a, "cumsum": lambda: np.cumsum(a, -1) if a.ndim else a,
                "dlpack": lambda: a, "matmul": lambda: a @ a.T if a.ndim == 2 else a}[op]()
        assert np.allclose(r.numpy(), want), (i, r.numpy(), want)
    print("done", flush=True)
''')


@st.composite
def strided_arrays(draw):
    """(buffer size, shape, element strides, offset, op): any strides inside a buffer,
    negative and zero (overlapping) ones included."""
    shape = draw(shapes(max_dims=3, max_side=4))
    strides = [draw(st.integers(-3, 3)) for _ in shape]
    low = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0 and n)
    high = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0 and n)
    offset = -low
    n = offset + high + 1 + draw(st.integers(0, 2))
    op = draw(st.sampled_from(["neg", "sum", "sort", "copy", "cumsum", "dlpack", "matmul"]))
    return n, list(shape), strides, offset, op


@fuzz("crash", 3, max_scale=4, cases=st.lists(strided_arrays(), min_size=1, max_size=40))
def test_from_numpy_of_any_strides_never_crashes(cases):
    out = subprocess.run([sys.executable, "-c", _STRIDED_CHILD, json.dumps(cases)],
                         capture_output=True, text=True, timeout=300)
    last = [line for line in out.stdout.splitlines() if line.startswith("case")]
    at = cases[int(last[-1].split()[1])] if last else None
    assert out.returncode == 0 and out.stdout.strip().endswith("done"), (
        f"exit {out.returncode} at {at}: {out.stderr[-2000:]}")
