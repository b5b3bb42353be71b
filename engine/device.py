"""Devices, the backends behind them, and checkpointing strategies."""
import enum
import os

from .memory import CPU_POOL


class CheckpointingStrategy(enum.Enum):
    """How autodiff keeps what backward needs (DESIGN §4 item 11)."""
    NONE = "none"
    BALANCED = "balanced"


class DeviceError(RuntimeError):
    """Tensors of one op live on different devices, or a device is unavailable."""


class StrategyError(ValueError):
    """Tensors of one op use different gradient checkpointing strategies."""


class Device:
    """Where a tensor lives: ``Device.cpu()`` or ``Device.cuda(index)``.

    ``device.autodiff()`` is the same device with autodiff enabled; devices
    compare equal regardless of autodiff and strategy.

    >>> ember.Device.cpu() == ember.Device.cpu().autodiff()
    True
    """

    __slots__ = ("type", "index", "_autodiff", "checkpointing", "_backend")

    def __init__(self, type, index=0, autodiff=False, checkpointing=None):
        self.type = type
        self.index = index
        self._autodiff = autodiff
        self.checkpointing = checkpointing if autodiff else None
        self._backend = None

    @classmethod
    def cpu(cls):
        return CPU

    @classmethod
    def cuda(cls, index=0):
        """GPU ``index``; ``DeviceError`` when there is no such CUDA device.

        The first call imports ``numba.cuda`` (never ``import ember``).  Without
        a GPU, Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1`` set before
        Numba is imported) provides one simulated device.
        """
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ValueError(f"Device.cuda: index must be a non-negative int, got {index!r}")
        count = cuda_device_count()
        if index >= count:
            raise DeviceError(f"ember: CUDA device {index} does not exist "
                              f"({count} device{'s' if count != 1 else ''} available)")
        return Device("cuda", index)

    def autodiff(self):
        if self._autodiff:
            return self
        return Device(self.type, self.index, True, CheckpointingStrategy.NONE)

    def gradient_checkpointing(self, strategy=CheckpointingStrategy.BALANCED):
        if not isinstance(strategy, CheckpointingStrategy):
            raise TypeError(f"gradient_checkpointing: expected a CheckpointingStrategy, got {strategy!r}")
        return Device(self.type, self.index, True, strategy)

    def base(self):
        """The same device without autodiff."""
        return CPU if self.type == "cpu" else Device(self.type, self.index)

    def is_autodiff(self):
        return self._autodiff

    @property
    def backend(self):
        """The backend that runs ops on this device (imported on first use)."""
        b = self._backend
        if b is None:
            from .backends import get_backend
            b = self._backend = get_backend(self.type, self.index)
        return b

    def __eq__(self, other):
        if self is other:
            return True
        return isinstance(other, Device) and self.type == other.type and self.index == other.index

    def __hash__(self):
        return hash((self.type, self.index))

    def __repr__(self):
        name = "cpu" if self.type == "cpu" else f"cuda:{self.index}"
        if self._autodiff:
            return f"Device({name}, autodiff, {self.checkpointing.name})"
        return f"Device({name})"


CPU = Device("cpu")
_default = None
_cuda_count = None


def cuda_device_count():
    """Number of usable CUDA devices (imports ``numba.cuda`` on the first call).

    Raises ``DeviceError`` when there is none.
    """
    global _cuda_count
    if _cuda_count is None:
        reason = "numba.cuda.is_available() is False (no NVIDIA GPU or driver found)"
        try:
            from numba import config
            from numba import cuda
            if config.ENABLE_CUDASIM or cuda.is_available():
                _cuda_count = len(cuda.gpus)
            else:
                _cuda_count = 0
        except Exception as e:  # a broken CUDA installation
            reason = f"numba.cuda failed to load ({type(e).__name__}: {e})"
            _cuda_count = 0
        if _cuda_count == 0:
            _cuda_count = reason
    if isinstance(_cuda_count, str):
        raise DeviceError(f"ember: no CUDA device is available: {_cuda_count}. Use "
                          f"ember.Device.cpu(), or set NUMBA_ENABLE_CUDASIM=1 before importing "
                          f"ember to run CUDA code on Numba's simulator.")
    return _cuda_count


def default_device():
    global _default
    if _default is None:
        name = os.environ.get("EMBER_DEVICE", "cpu").lower()
        _default = parse(name)
    return _default


def set_default_device(device):
    """Make ``device`` (a Device or "cpu"/"cuda"/"cuda:1") the default for new tensors."""
    global _default
    _default = parse(device)


def parse(device):
    if device is None:
        return default_device()
    if isinstance(device, Device):
        return device
    if isinstance(device, str):
        name, _, idx = device.partition(":")
        if name == "cpu":
            return CPU
        if name == "cuda":
            return Device.cuda(int(idx or 0))
    raise ValueError(f"ember: unknown device {device!r}; use ember.Device.cpu() or 'cpu'")


def empty_cache(device=None):
    """Free the buffers that ``device``'s caching allocator keeps for reuse.

    ``device`` is a Device, ``"cpu"``, ``"cuda"``/``"cuda:1"`` or None (the CPU and every CUDA
    device in use).  Memory that tensors (or numpy views of them) still use is not affected;
    ``ember.memory_stats`` shows the bytes.

    >>> ember.empty_cache()
    """
    if device is not None:
        d = parse(device)
        if d.type == "cpu":
            CPU_POOL.empty_cache()
        else:
            d.backend.empty_cache()
        return
    CPU_POOL.empty_cache()
    from .backends import loaded_backends
    for b in loaded_backends():
        b.empty_cache()


def memory_stats(device=None):
    """Counters of ``device``'s caching allocator as a dict (default: the default device).

    ``bytes_in_use``: bytes of pooled blocks that some array can still see;
    ``bytes_cached``: bytes of freed blocks kept for reuse; ``peak_bytes_in_use``:
    the highest ``bytes_in_use`` so far; ``allocations``: pooled requests, of which
    ``hits`` reused a cached block and ``misses`` allocated a fresh one;
    ``evictions``: blocks freed because the cache exceeded ``limit`` (bytes,
    None: no cap); ``cached_blocks``; ``enabled`` (``EMBER_POOL``); ``min_bytes``.

    Sizes are size classes (a request rounded up by at most 12.5 %).  On the CPU
    only allocations of at least ``min_bytes`` (128 KiB) go through the pool and
    are counted: op outputs and copies made by Ember's kernels; small arrays,
    ``from_numpy`` data and numpy temporaries are not.  On CUDA every buffer
    Ember allocates is counted.

    >>> x = ember.ones(1 << 20)          # 4 MiB: a pooled block
    >>> ember.memory_stats("cpu")["bytes_in_use"] >= 4 << 20
    True
    """
    d = parse(device)
    if d.type == "cpu":   # (without loading the CPU backend, hence Numba)
        return CPU_POOL.stats()
    return d.backend.memory_stats()
