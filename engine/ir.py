"""The closed IR: every backend call is one ``Op`` plus static parameters.

Dispatch turns a user call into an ``Op`` and its parameters; a backend
executes it (``backend.execute(op, inputs, **params)``).  The autodiff layer,
and later a fusing layer, wrap this one seam.

Elementwise ops carry the name of their scalar function in
``ember.kernels.scalar``, the kinds they accept, and the kind of result:

- ``SAME``: the promoted input dtype,
- ``BOOL``: a bool tensor (comparisons, predicates),
- ``FLOAT``: the promoted dtype, or float64 for integer inputs (true division).
"""
import enum

from .dtypes import Bool, Float, Int

ANY = frozenset((Float, Int, Bool))
NUM = frozenset((Float, Int))
FLT = frozenset((Float,))
INT = frozenset((Int,))
INT_BOOL = frozenset((Int, Bool))
BOOL_ONLY = frozenset((Bool,))

SAME, BOOL, FLOAT = "same", "bool", "float"


class Op(enum.Enum):
    """A primitive op.  Elementwise members hold (scalar function, kinds, result)."""

    def __new__(cls, scalar, kinds=ANY, result=SAME):
        op = object.__new__(cls)
        op._value_ = len(cls.__members__) + 1  # unique even when the fields repeat
        op.scalar = scalar
        op.kinds = kinds
        op.result = result
        return op

    # --- elementwise, one operand
    CAST = ("identity",)
    NEG = ("neg", NUM)
    ABS = ("absolute", NUM)
    SIGN = ("sign", NUM)
    EXP = ("exp", FLT)
    LOG = ("log", FLT)
    LOG1P = ("log1p", FLT)
    SQRT = ("sqrt", FLT)
    RSQRT = ("rsqrt", FLT)
    RECIP = ("recip", FLT)
    SIN = ("sin", FLT)
    COS = ("cos", FLT)
    TAN = ("tan", FLT)
    TANH = ("tanh", FLT)
    SIGMOID = ("sigmoid", FLT)
    ERF = ("erf", FLT)
    RELU = ("relu", FLT)
    GELU = ("gelu", FLT)
    SILU = ("silu", FLT)
    # rounding leaves integers as they are (the array API standard), predicates of integers
    # and bools are constant: both kinds go through the same scalar functions
    ROUND = ("round_even", NUM)
    FLOOR = ("floor", NUM)
    CEIL = ("ceil", NUM)
    TRUNC = ("trunc", NUM)
    ISNAN = ("isnan", ANY, BOOL)
    ISINF = ("isinf", ANY, BOOL)
    ISFINITE = ("isfinite", ANY, BOOL)
    BIT_NOT = ("bit_not", INT)
    LOGICAL_NOT = ("logical_not", BOOL_ONLY)
    ACOS = ("acos", FLT)
    ACOSH = ("acosh", FLT)
    ASIN = ("asin", FLT)
    ASINH = ("asinh", FLT)
    ATAN = ("atan", FLT)
    ATANH = ("atanh", FLT)
    COSH = ("cosh", FLT)
    SINH = ("sinh", FLT)
    EXPM1 = ("expm1", FLT)
    LOG2 = ("log2", FLT)
    LOG10 = ("log10", FLT)
    SQUARE = ("square", NUM)
    SIGNBIT = ("signbit", NUM, BOOL)
    # --- elementwise, two operands
    ADD = ("add", NUM)
    SUB = ("sub", NUM)
    MUL = ("mul", NUM)
    DIV = ("truediv", NUM, FLOAT)
    FLOORDIV = ("floordiv", NUM)
    MOD = ("mod", NUM)
    POW = ("power", NUM)
    MAXIMUM = ("maximum", NUM)
    MINIMUM = ("minimum", NUM)
    EQ = ("eq", ANY, BOOL)
    NE = ("ne", ANY, BOOL)
    LT = ("lt", NUM, BOOL)
    LE = ("le", NUM, BOOL)
    GT = ("gt", NUM, BOOL)
    GE = ("ge", NUM, BOOL)
    AND = ("bit_and", INT_BOOL)
    OR = ("bit_or", INT_BOOL)
    XOR = ("bit_xor", INT_BOOL)
    SHL = ("shl", INT)
    SHR = ("shr", INT)
    ATAN2 = ("atan2", FLT)
    HYPOT = ("hypot", FLT)
    COPYSIGN = ("copysign", FLT)
    LOGADDEXP = ("logaddexp", FLT)
    NEXTAFTER = ("nextafter", FLT)
    # backward formulas of the autodiff rules, one op each (PyTorch's tanh_backward):
    # (g, y) -> g * (1 - y*y) and g * y * (1 - y), y the forward op's output
    TANH_GRAD = ("tanh_grad", FLT)
    SIGMOID_GRAD = ("sigmoid_grad", FLT)
    # --- elementwise, three operands
    WHERE = ("where",)
    CLAMP = ("clamp", NUM)
    # --- reductions (params: axes, dtype)
    SUM = ("add", ANY)
    PROD = ("mul", ANY)
    MAX = ("maximum", NUM)
    MIN = ("minimum", NUM)
    ANY_ = ("logical_or", ANY)
    ALL = ("logical_and", ANY)
    ARGMAX = ("argmax", NUM)
    ARGMIN = ("argmin", NUM)
    # --- scans (params: axis, dtype)
    CUMSUM = ("cumsum", ANY)
    CUMPROD = ("cumprod", ANY)
    # --- normalisations along one dim (params: axis, dtype); fused, not elementwise
    SOFTMAX = ("softmax", FLT)
    LOG_SOFTMAX = ("log_softmax", FLT)
    # --- linear algebra, sorting, indexing
    MATMUL = ("matmul", NUM)
    SORT = ("sort", NUM)
    TOPK = ("topk", NUM)
    GATHER = ("gather",)
    SCATTER = ("scatter",)
    INDEX_SELECT = ("index_select",)
    NONZERO = ("nonzero",)
    SEARCHSORTED = ("searchsorted", NUM)   # (sorted 1-D sequence, values; params: right)
    # --- layout (views where the backend can)
    RESHAPE = ("reshape",)
    PERMUTE = ("permute",)
    EXPAND = ("expand",)
    SLICE = ("slice",)
    FLIP = ("flip",)
    CONTIGUOUS = ("contiguous",)
    SLICE_ASSIGN = ("slice_assign",)
    CAT = ("cat",)
    # --- creation and transfer
    FULL = ("full",)
    ARANGE = ("arange",)
    FROM_HOST = ("from_host",)
    TO_HOST = ("to_host",)
    RANDOM = ("random",)

    __hash__ = object.__hash__  # members are singletons; C-level hashing keeps dispatch cheap

    def __repr__(self):
        return f"Op.{self.name}"


ELEMENTWISE = frozenset(Op[n] for n in (
    "CAST NEG ABS SIGN EXP LOG LOG1P SQRT RSQRT RECIP SIN COS TAN TANH SIGMOID ERF RELU "
    "GELU SILU ROUND FLOOR CEIL TRUNC ISNAN ISINF ISFINITE BIT_NOT LOGICAL_NOT ADD SUB MUL "
    "DIV FLOORDIV MOD POW MAXIMUM MINIMUM EQ NE LT LE GT GE AND OR XOR SHL SHR TANH_GRAD "
    "SIGMOID_GRAD WHERE CLAMP ACOS ACOSH ASIN ASINH ATAN ATANH COSH SINH EXPM1 LOG2 LOG10 SQUARE "
    "SIGNBIT ATAN2 HYPOT COPYSIGN LOGADDEXP NEXTAFTER"
).split())
REDUCTIONS = frozenset((Op.SUM, Op.PROD, Op.MAX, Op.MIN, Op.ANY_, Op.ALL))
