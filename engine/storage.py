"""What a tensor holds, and the one accessor that reads it.

``TensorBase`` is the data half of ``ember.Tensor`` (``engine/tensor.py`` adds the methods):
four slots, set once when the tensor is made and never changed afterwards (tensors are
values), except ``_buf`` when a deferred value is computed in place of its node, and
``_buf``/``_device``/``_node`` together when ``t[key] = value`` rebinds ``t`` to a new value
(copy-on-write: no storage is ever written).

- ``_buf``: the storage, one of
  - a numpy array (CPU),
  - a ``CudaArray`` (CUDA: a typed device buffer, an element offset, a shape and element
    strides; ``engine/backends/cuda/array.py``),
  - a ``Deferred`` node (``engine/fusion.py``): an elementwise op that has not run yet; the
    fusing layer computes it, together with the pending ops below it, when ``_data`` is
    first read,
  - a ``QuantData`` (``engine/quant``): a quantized tensor's integer values and float32
    scales, each a backend array of the tensor's device; then ``_dtype`` is a ``QFloat``.
  Every one of them has ``.shape``: shape queries read ``_buf.shape`` and never compute.
- ``_device``: the ``Device`` (with its autodiff flag and checkpointing strategy).
- ``_dtype``: the Ember ``DType``.
- ``_node``: the autodiff node (``ember.autograd.graph.Node``) of a tracked tensor, else None.

``_data`` is the storage with a deferred value computed: what a backend receives.
"""
from .fusion import Deferred


class TensorBase:
    """The storage of a tensor; ``ember.Tensor`` is its only subclass in Ember itself.

    Dispatch never names ``Tensor``: an op's result has the class of its first tensor input
    (``type(x)()``), and ``isinstance(x, TensorBase)`` tells tensors from Python scalars.
    """

    __slots__ = ("_buf", "_device", "_dtype", "_node", "__weakref__")

    @property
    def _data(self):
        """The backend storage, computing a deferred (fused) value first."""
        d = self._buf
        if type(d) is Deferred:
            d = self._buf = d.force()
        return d


def make(cls, data, device, dtype, node=None):
    """A new tensor of class ``cls`` around storage ``data``."""
    # (the classes have no __init__: calling one is the cheapest way to make an instance,
    # ~14 ns less than object.__new__)
    t = cls()
    t._buf = data
    t._device = device
    t._dtype = dtype
    t._node = node
    return t
