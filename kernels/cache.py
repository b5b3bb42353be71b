"""On-disk cache for Ember's generated kernels.

Numba's own cache keys a function by its source file's content and its byte
code.  Our kernels are loop templates re-bound to a scalar op that lives in
another file, so an edited scalar op would not invalidate them.  We therefore
keep every kernel in a directory named by Ember's version and a hash of all
kernel sources: any edit under ``kernels/`` starts a fresh cache.

The directory is ``$EMBER_CACHE_DIR`` or ``~/.cache/ember/kernels``.
"""
import functools
import hashlib
import os
import pathlib

from numba.core import caching

_KERNEL_ROOT = pathlib.Path(__file__).resolve().parent


@functools.cache
def source_hash():
    """Hash of every kernel source file (what a compiled kernel depends on)."""
    h = hashlib.sha256()
    for path in sorted(_KERNEL_ROOT.rglob("*.py")):
        h.update(str(path.relative_to(_KERNEL_ROOT)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


@functools.cache
def cache_dir():
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("ember")
    except PackageNotFoundError:  # running from a source tree
        ver = "dev"
    root = os.environ.get("EMBER_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "ember", "kernels")
    return os.path.join(root, f"{ver}-{source_hash()}")


class _Locator(caching._CacheLocator):
    def __init__(self, py_func, py_file):
        self._path = cache_dir()

    def get_cache_path(self):
        return self._path

    def get_source_stamp(self):
        return source_hash()

    def get_disambiguator(self):
        return "ember"

    @classmethod
    def from_function(cls, py_func, py_file):
        self = cls(py_func, py_file)
        try:
            self.ensure_cache_path()
        except OSError:
            return None
        return self


class _Impl(caching.CompileResultCacheImpl):
    _locator_classes = [_Locator]


class KernelCache(caching.FunctionCache):
    """A Numba function cache that stores in Ember's versioned directory."""
    _impl_class = _Impl
