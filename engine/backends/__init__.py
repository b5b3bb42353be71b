"""Backends execute IR ops (``ember.ir.Op``) on one kind of device: the only layer that
allocates outputs, picks kernels and launches them.

Each backend is a package laid out the same way (``cpu/``, ``cuda/``): ``__init__`` holds
the backend class and its op table, and one module per area (``elementwise``, ``reduce``,
``scan``, ``sort``, ``index``, ``softmax``, ``quant``, ``fused``) plans and launches that
area's kernels from ``ember.kernels``.  ``shared.py`` holds what both use.  Calls arrive
validated by the dispatch layer.

A backend is imported the first time a tensor of its device runs an op, so ``import ember``
neither imports Numba's CUDA target nor compiles anything.  The CPU has one backend; CUDA
has one per GPU index (its own stream and memory pool).
"""
import functools

_BACKENDS = {}
# ``ember.compile``'s recorder while it traces a step (``set_recorder``), else None: every
# launch of every backend is reported to it (``recorder.launch(backend, op, inputs, params,
# out)``), so the step replays exactly the launches its trace ran
_recorder = None


def set_recorder(recorder):
    """Install ``recorder`` (None removes it); returns the previous one."""
    global _recorder
    previous, _recorder = _recorder, recorder
    return previous


def recorder():
    """The recorder of the step being traced, or None."""
    return _recorder


class Backend:
    """What every backend shares: ``execute`` runs an IR op through the backend's op table
    (``_table``: op -> launcher(op, *inputs, **params)), and reports it while a step is traced."""

    _table = {}

    def execute(self, op, *inputs, **params):
        """Run IR op ``op`` on storage ``inputs`` with static ``params``."""
        out = self._table[op](op, *inputs, **params)
        if _recorder is not None:
            _recorder.launch(self, op, inputs, params, out)
        return out

    def run(self, op, inputs, params):
        """``execute(op, *inputs, **params)`` with a tuple ``inputs`` and a dict ``params``
        passed as they are: the planning layer's entry (per-op overhead: no packing)."""
        out = self._table[op](op, *inputs, **params)
        if _recorder is not None:
            _recorder.launch(self, op, inputs, params, out)
        return out

    def bind(self, op, params, inputs, out):
        """A callable ``f(*inputs)`` that does what ``execute(op, *inputs, **params)`` does,
        without reporting to a recorder: what an ``ember.compile`` replay calls per launch.
        ``inputs`` and ``out`` are the traced launch's (a backend may pick its path from them;
        the bound callable must still accept any layout of the same shapes and dtypes)."""
        return functools.partial(self.execute, op, **params)

    def tape(self, steps, constants, inputs, outputs):
        """A replay ``replay(*ins) -> outs`` running a compiled step's ``steps`` (its kept
        launches and checks, all on this backend) as one launch, or None, and the replay binds
        each launch.  A register ``k`` holds ``constants[k]`` (None: none); ``inputs`` maps
        the registers a call passes, in order, to their arrays in the trace; ``outputs`` are
        the registers it returns (``engine/compile.py``)."""
        return None

    def elementwise(self, op, inputs, shape, dtype):
        """``execute(op, *inputs, shape=shape, dtype=dtype)`` for an elementwise ``op``, called
        positionally: dispatch's entry for ops run at once (per-op overhead)."""
        out = self._elementwise(op, inputs, shape, dtype)
        if _recorder is not None:
            _recorder.launch(self, op, inputs, {"shape": shape, "dtype": dtype}, out)
        return out


def get_backend(device_type, index=0):
    key = device_type if device_type == "cpu" else (device_type, index)
    b = _BACKENDS.get(key)
    if b is None:
        if device_type == "cpu":
            from .cpu import CpuBackend
            b = CpuBackend()
        elif device_type == "cuda":
            from .cuda import CudaBackend
            b = CudaBackend(index)
        else:
            raise RuntimeError(f"ember: no backend for device type {device_type!r}")
        _BACKENDS[key] = b
    return b


def loaded_backends():
    """The backends made so far (``ember.empty_cache`` and ``synchronize`` visit them)."""
    return list(_BACKENDS.values())


def check_table(name, table):
    """``table`` (IR op -> launcher) covers every IR op: both backends implement all of them."""
    from ..ir import Op
    missing = set(Op) - set(table)
    assert not missing, f"{name} lacks {sorted(op.name for op in missing)}"
    return table
