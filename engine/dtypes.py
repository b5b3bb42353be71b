"""Data types and kinds.

Every tensor has a dtype and a kind (Float, Int, Bool or Complex).  Promotion
follows numpy: two tensors promote with ``np.result_type``; a Python scalar is
"weak" and takes the tensor's dtype when its kind allows (``int32 + 2 ->
int32``, ``float32 * 0.5 -> float32``, ``int32 * 0.5 -> float64``, ``float32 *
1j -> complex64``, ``complex64 * 0.5 -> complex64``).  Python floats without a
tensor (``ember.tensor([1.0])``) default to float32 and Python complex numbers
to complex64, as in PyTorch and JAX.
"""
import numpy as np


class Kind(str):
    """One of the kinds of tensor data: ``ember.Float``, ``ember.Int``, ``ember.Bool``,
    ``ember.Complex``.

    Each kind is a singleton (compare with ``is``), and also the string of numpy's
    ``dtype.kind`` character ("f", "i", "b", "c"), so code written for numpy dtypes that tests
    ``dtype.kind in "biu"`` (scikit-learn does) reads Ember dtypes right; unsigned ints are of
    kind Int, "i".
    """

    def __new__(cls, name, char):
        kind = super().__new__(cls, char)
        kind.name = name
        return kind

    def __repr__(self):
        return f"ember.{self.name}"

    __str__ = __repr__

    def __reduce__(self):
        return (_kind, (self.name,))


Float = Kind("Float", "f")
Int = Kind("Int", "i")
Bool = Kind("Bool", "b")
Complex = Kind("Complex", "c")


def _kind(name):
    return {"Float": Float, "Int": Int, "Bool": Bool, "Complex": Complex}[name]


class DType:
    """An Ember dtype: a numpy dtype plus its kind.  Compares equal to its numpy dtype (and
    numpy scalar type), never to None, Python types or strings."""

    __slots__ = ("name", "np", "kind", "itemsize")
    quantized = False   # True only for QFloat; dispatch tests it once per input

    def __init__(self, name, np_dtype, kind):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.kind = kind
        self.itemsize = self.np.itemsize

    def __repr__(self):
        return f"ember.{self.name}"

    def __eq__(self, other):
        # Another DType by identity; a numpy dtype or numpy scalar type by value.  Anything
        # else (None, Python types, strings, dicts) is not a dtype here: ``np.dtype(None)`` is
        # float64 and ``np.dtype(float)`` float64 while Ember's float is float32, so letting
        # numpy parse ``other`` made ``ember.float64 == None`` true (and dicts raise).
        if isinstance(other, DType):
            return self is other
        if isinstance(other, np.dtype):
            return self.np == other
        if isinstance(other, type) and issubclass(other, np.generic):
            return self.np == np.dtype(other)
        return False

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(self.np)

    @property
    def is_floating_point(self):
        return self.kind is Float

    @property
    def is_complex(self):
        return self.kind is Complex


float32 = DType("float32", np.float32, Float)
float64 = DType("float64", np.float64, Float)
int8 = DType("int8", np.int8, Int)
int16 = DType("int16", np.int16, Int)
int32 = DType("int32", np.int32, Int)
int64 = DType("int64", np.int64, Int)
uint8 = DType("uint8", np.uint8, Int)
uint16 = DType("uint16", np.uint16, Int)
uint32 = DType("uint32", np.uint32, Int)
uint64 = DType("uint64", np.uint64, Int)
bool_ = DType("bool", np.bool_, Bool)
complex64 = DType("complex64", np.complex64, Complex)
complex128 = DType("complex128", np.complex128, Complex)


class QFloat(DType):
    """The dtype of a quantized tensor (``ember.quant``): kind Float, carrying its ``QuantScheme``.

    Its values are stored as integers plus float32 scales; they read as float32 (``np``), and
    promotion with other dtypes treats them as float32.  Two QFloats are equal when their
    schemes are; ``ember.quant.qfloat(scheme)`` gives the one instance per scheme.
    """

    __slots__ = ("scheme",)
    quantized = True

    def __init__(self, scheme):
        super().__init__(f"qfloat[{scheme.describe()}]", np.float32, Float)
        self.scheme = scheme

    def __eq__(self, other):
        return isinstance(other, QFloat) and other.scheme == self.scheme

    def __hash__(self):
        return hash(("qfloat", self.scheme))


ALL = (float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64, bool_, complex64,
       complex128)
_BY_NP = {d.np: d for d in ALL}
DEFAULT_FLOAT = float32
DEFAULT_INT = int64
DEFAULT_COMPLEX = complex64   # the complex dtype of DEFAULT_FLOAT (PyTorch's rule)

# a complex dtype and the real dtype of its parts, both ways
_REAL = {complex64: float32, complex128: float64}
_COMPLEX = {float32: complex64, float64: complex128}


def real_of(dtype):
    """The dtype of a complex dtype's parts (``complex64 -> float32``); others are themselves."""
    return _REAL.get(dtype, dtype)


def complex_of(dtype):
    """The complex dtype whose parts are ``dtype`` (``float32 -> complex64``); complex dtypes
    are themselves, other kinds compute in complex128 (numpy)."""
    if dtype.kind is Complex:
        return dtype
    return _COMPLEX.get(dtype, complex128)


def differentiable(dtype):
    """Float and Complex tensors take gradients (quantized ones never do)."""
    return (dtype.kind is Float or dtype.kind is Complex) and not dtype.quantized


def from_numpy(np_dtype):
    """The Ember dtype of a numpy dtype; TypeError when Ember has none."""
    d = _BY_NP.get(np.dtype(np_dtype).newbyteorder("="))
    if d is None:
        raise TypeError(f"ember: unsupported dtype {np.dtype(np_dtype)}; "
                        f"supported: {', '.join(x.name for x in ALL)}")
    return d


def as_dtype(dtype):
    """Accept ember dtypes, numpy dtypes, Python types and names."""
    if isinstance(dtype, DType):
        # a QFloat where a dtype is asked for (zeros_like(q), q.cast(q.dtype)) means its float
        # dtype: only quantize() makes quantized tensors
        return float32 if dtype.quantized else dtype
    if dtype is float:
        return DEFAULT_FLOAT
    if dtype is int:
        return DEFAULT_INT
    if dtype is bool:
        return bool_
    if dtype is complex:
        return DEFAULT_COMPLEX
    try:
        return from_numpy(dtype)
    except TypeError:
        raise TypeError(f"ember: {dtype!r} is not a dtype") from None


_PROMOTE = {}


def promote(a, b):
    """The dtype two tensor dtypes compute in (numpy's rules)."""
    key = (a, b)
    d = _PROMOTE.get(key)
    if d is None:
        # a dtype with itself is itself (numpy's answer, and a QFloat stays quantized: cat)
        d = _PROMOTE[key] = a if a is b else from_numpy(np.result_type(a.np, b.np))
    return d


def scalar_dtype(value, other):
    """The dtype a Python scalar takes next to a tensor of dtype ``other``."""
    if isinstance(value, (bool, np.bool_)):
        return other
    if isinstance(value, (int, np.integer)):
        return other if other.kind is not Bool else DEFAULT_INT
    if isinstance(value, (float, np.floating)):
        return other if other.kind is Float or other.kind is Complex else float64
    if isinstance(value, (complex, np.complexfloating)):
        return complex_of(other)
    raise TypeError(f"cannot combine a tensor with {type(value).__name__}")
