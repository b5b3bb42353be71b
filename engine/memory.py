"""Caching allocator: freed buffers are kept by size and reused (DESIGN §8).

A fresh large buffer is expensive on the CPU: glibc serves it with new mmap
pages, so the first write page-faults and the kernel zeroes every page (a pass
over memory before the op's own pass).  A ``Pool`` keeps the raw blocks of dead
tensors, keyed by size class, and hands them out again.

CPU: ``empty(shape, dtype)`` returns a numpy array whose ``.base`` is a small
``_Holder``: a ctypes array over the block's bytes, which numpy reads through
the buffer protocol and keeps as the base of every view of the memory
(reshapes, slices, ``t.numpy()``, arrays made by Numba).  The block goes back
to the pool only when the holder dies, i.e. when no array can see the memory.
Only allocations of at least ``CPU_MIN_BYTES`` use the pool: a small
``np.empty`` is reused by malloc without page faults and costs 0.15 us, less
than the holder.  Pooled memory is dirty: it is used only for arrays that are
written completely (op outputs), never for ``ember.empty`` (zeros).

Each CUDA device has its own ``Pool`` (``engine/backends/cuda.py``), with
blocks held by ``Block`` objects in the same way.

Environment: ``EMBER_POOL=0`` turns pooling off (CPU arrays come from
``np.empty``; CUDA blocks are freed when released), ``EMBER_POOL_MAX`` caps the
bytes a pool keeps cached (``512M``, ``2G``, a byte count; default: an eighth
of the RAM on the CPU, no cap on CUDA, where a failed allocation releases the
cache and retries).
"""
import ctypes
import math
import operator
import os
import threading

import numpy as np

# Below this many bytes CPU arrays come from np.empty (see the module docstring
# and docs/decisions.md "Memory pool" for the measurements): glibc's initial mmap threshold
CPU_MIN_BYTES = 1 << 17
_SMALLEST_CLASS = 512


def _parse_bytes(text, name):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = units.get(t[-1:], 1)
    try:
        value = float(t[:-1] if t[-1:] in units else t)
    except ValueError:
        raise ValueError(f"ember: {name}={text!r} is not a size (examples: 0, 512M, 2G)") from None
    return int(value * scale)


def _default_cpu_limit():
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 8
    except (ValueError, OSError, AttributeError):
        return 1 << 30


ENABLED = os.environ.get("EMBER_POOL", "1").strip().lower() not in ("0", "false", "off", "no")
_LIMIT = os.environ.get("EMBER_POOL_MAX")
LIMIT = _parse_bytes(_LIMIT, "EMBER_POOL_MAX") if _LIMIT else None


def size_class(nbytes):
    """``nbytes`` rounded up to one of 8 sizes per power of two (at most 12.5 % more), >= 512.

    Nearby sizes share a class, so a slightly different shape still reuses a block.
    """
    if nbytes <= _SMALLEST_CLASS:
        return _SMALLEST_CLASS
    shift = nbytes.bit_length() - 4
    return -(-nbytes >> shift) << shift


class Pool:
    """Raw blocks of one device, cached by size class for reuse.

    ``allocate(size)`` makes a fresh block of ``size`` bytes.  ``acquire``
    returns ``(block, size)``; the owner calls ``release(block, size)`` when no
    view of the block is left.  ``limit`` caps the cached bytes (None: no cap,
    0: nothing is cached); above it the least recently released sizes go first.
    Thread-safe: a lock guards the free lists and counters.  It is reentrant
    because a release can run inside an acquire (a garbage collection triggered
    there finalizing a holder); every step leaves the state consistent.
    """

    def __init__(self, device, allocate, limit=None, enabled=True, min_bytes=0):
        self.device = device
        self.enabled = enabled
        self.min_bytes = min_bytes
        self._limit = (math.inf if limit is None else limit) if enabled else 0
        self._allocate = allocate
        self._free = {}   # size -> [block, ...]; dict order = least recently released first
        self._lock = threading.RLock()
        self.bytes_in_use = self.bytes_cached = self.peak = 0
        self.allocations = self.hits = self.evictions = 0

    @property
    def limit(self):
        """The cap on cached bytes (None: no cap)."""
        return None if self._limit == math.inf else self._limit

    def reset_peak(self):
        """Start peak tracking again from the bytes in use now."""
        with self._lock:
            self.peak = self.bytes_in_use

    def acquire(self, nbytes):
        """A block of at least ``nbytes``: a cached one of the same size class, else a fresh one."""
        size = size_class(nbytes)
        with self._lock:
            self.allocations += 1
            free = self._free.get(size)
            if free:
                block = free.pop()
                if not free:
                    del self._free[size]
                self.hits += 1
                self.bytes_cached -= size
                in_use = self.bytes_in_use = self.bytes_in_use + size
                if in_use > self.peak:
                    self.peak = in_use
                return block, size
        try:
            block = self._allocate(size)
        except Exception:  # out of memory (MemoryError, CudaAPIError): drop the cache, retry once
            if not self.bytes_cached:
                raise
            self.empty_cache()
            block = self._allocate(size)
        with self._lock:
            in_use = self.bytes_in_use = self.bytes_in_use + size
            if in_use > self.peak:
                self.peak = in_use
        return block, size

    def release(self, block, size):
        """Take back ``block`` (no view of it is left); cache it, evicting over the limit."""
        with self._lock:
            self.bytes_in_use -= size
            if size > self._limit:
                return
            free = self._free.pop(size, None)
            if free is None:
                free = [block]
            else:
                free.append(block)
            self._free[size] = free     # (re)inserted last: the most recently released size
            cached = self.bytes_cached = self.bytes_cached + size
            if cached <= self._limit:
                return
            dropped = self._evict()
        del dropped

    def _evict(self):
        dropped = []
        while self.bytes_cached > self._limit:
            size = next(iter(self._free))
            blocks = self._free[size]
            dropped.append(blocks.pop(0))
            if not blocks:
                del self._free[size]
            self.bytes_cached -= size
            self.evictions += 1
        return dropped   # freed by the caller, outside the lock

    def empty_cache(self):
        """Free every cached block (blocks in use are unaffected)."""
        with self._lock:
            free, self._free = self._free, {}
            self.bytes_cached = 0
        del free

    def stats(self):
        """The counters as a dict (see ``ember.memory_stats``)."""
        with self._lock:
            return {
                "device": self.device,
                "enabled": self.enabled,
                "bytes_in_use": self.bytes_in_use,
                "bytes_cached": self.bytes_cached,
                "peak_bytes_in_use": self.peak,
                "allocations": self.allocations,
                "hits": self.hits,
                "misses": self.allocations - self.hits,
                "evictions": self.evictions,
                "cached_blocks": sum(len(b) for b in self._free.values()),
                "limit": self.limit,
                "min_bytes": self.min_bytes,
            }


# --- CPU --------------------------------------------------------------------------------------

class _Holder(ctypes.Array):
    """The base of every array on a pooled CPU block: a ctypes array of the block's bytes
    (``_holder_type(size)``, one subclass per size class), which numpy takes through the
    buffer protocol; returns the block when it dies.  (It replaced an object exporting the
    block through ``__array_interface__``: numpy parsed that dict at every allocation, and a
    pooled ``empty`` took ~2.4 us against ~1.7 now in a loop, ~7 us against ~3 right after a
    kernel had passed over 1 MB of data.)"""

    _type_ = ctypes.c_char
    _length_ = 0
    __slots__ = ("block",)

    def __del__(self):
        try:
            CPU_POOL.release(self.block, len(self))
        except Exception:  # interpreter shutdown: the module is being torn down
            pass


_HOLDER_TYPES = {}   # size class -> its _Holder subclass


def _holder_type(size):
    """The _Holder subclass of ``size`` bytes, made on the first block of that size class
    (``empty`` looks it up in ``_HOLDER_TYPES`` first)."""
    t = _HOLDER_TYPES[size] = type(f"_Holder{size}", (_Holder,),
                                   {"_length_": size, "__slots__": ()})
    return t


# Pooled blocks (and large arrays when pooling is off) start on a cache line: vector loads
# are aligned, and a parallel full reduction of a fresh array always splits at the same
# elements (reduce._run_fold aligns its chunks to the array's address), so a reduction fused
# with its producer (fused_reduce) adds in the very order the unfused one does.
ALIGN = 64


def _cpu_allocate(size):
    raw = np.empty(size + ALIGN - 1, np.uint8)
    address = raw.ctypes.data
    return raw, address + (-address % ALIGN)


def _aligned_empty(shape, dtype, nbytes):
    raw = np.empty(nbytes + ALIGN - 1, np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start:start + nbytes].view(dtype).reshape(shape)


CPU_POOL = Pool("cpu", _cpu_allocate, _default_cpu_limit() if LIMIT is None else LIMIT,
                ENABLED, CPU_MIN_BYTES)
_MIN = CPU_MIN_BYTES
_prod = math.prod       # module-level names: the cheapest lookups in the per-op path
_np_empty = np.empty
_ndarray = np.ndarray


def empty(shape, dtype):
    """An uninitialised C-contiguous array for an output that will be written completely.

    Pooled from ``CPU_MIN_BYTES`` up; ``np.empty`` below, or when pooling is off.
    ``shape`` is an int or a tuple, ``dtype`` anything ``np.dtype`` takes.
    """
    try:    # the common call: a tuple and an np.dtype (no checks: this runs for every op)
        nbytes = _prod(shape) * dtype.itemsize
    except (TypeError, AttributeError):  # an int shape, a dtype given as a type or a name
        shape = tuple(shape) if hasattr(shape, "__len__") else (operator.index(shape),)
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < _MIN:
        return _np_empty(shape, dtype)
    if not ENABLED:
        return _aligned_empty(shape, dtype, nbytes)
    block, size = CPU_POOL.acquire(nbytes)
    holder = (_HOLDER_TYPES.get(size) or _holder_type(size)).from_address(block[1])
    holder.block = block     # (keeps the raw array alive; __del__ hands it back)
    return _ndarray(shape, dtype, holder)
