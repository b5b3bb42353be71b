"""``__array_namespace_info__()``: the devices and dtypes of this namespace (2023.12)."""
from .. import dtypes as dt
from ..device import CPU, Device, DeviceError, cuda_device_count, default_device as _default
from ._dtypes import KINDS


class Info:
    """What ``ember.array_api.__array_namespace_info__()`` returns."""

    def capabilities(self):
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self):
        return _default()

    def devices(self):
        out = [CPU]
        try:
            n = cuda_device_count()
        except (DeviceError, ImportError, OSError):
            n = 0
        out += [Device.cuda(i) for i in range(n)]
        d = _default()
        if d not in out:
            out.append(d)
        return out

    def default_dtypes(self, *, device=None):
        return {"real floating": dt.DEFAULT_FLOAT, "complex floating": dt.DEFAULT_COMPLEX,
                "integral": dt.DEFAULT_INT, "indexing": dt.int64}

    def dtypes(self, *, device=None, kind=None):
        if kind is None:
            chosen = dt.ALL
        else:
            kinds = kind if isinstance(kind, tuple) else (kind,)
            chosen = []
            for k in kinds:
                if isinstance(k, dt.DType):
                    picked = (k,)
                elif k in KINDS:
                    picked = KINDS[k]
                else:
                    raise ValueError(f"dtypes: unknown kind {k!r}")
                chosen += [d for d in picked if d not in chosen]
        return {d.name: d for d in dt.ALL if d in chosen}


def __array_namespace_info__():
    return Info()
