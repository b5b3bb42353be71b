"""The closed IR: every backend call is one ``Op`` plus static parameters.

Dispatch turns a user call into an ``Op`` and its parameters; a backend
executes it (``backend.execute(op, inputs, **params)``).  The autodiff layer,
and later a fusing layer, wrap this one seam.

Elementwise ops carry the name of their scalar function in
``ember.kernels.scalar``, the kinds they accept, and the kind of result:

- ``SAME``: the promoted input dtype,
- ``BOOL``: a bool tensor (comparisons, predicates),
- ``FLOAT``: the promoted dtype, or float64 for integer inputs (true division),
- ``TO_REAL``: the promoted dtype, or the dtype of its parts for a complex one (abs, angle),
- ``TO_COMPLEX``: the complex dtype of the promoted (float) dtype (``complex(re, im)``).

Kinds: ``NUM`` (ordered numbers: comparisons, max/min, sort) and ``FLT`` (real functions:
relu, floor, erf) leave Complex out; ``NUMC`` (arithmetic) and ``FLTC`` (exp, log, sqrt,
sin, ...) take it; ``ANY_REAL`` is every kind but Complex (isnan & co of the parts).
"""
import enum

from .dtypes import Bool, Complex, Float, Int

ANY = frozenset((Float, Int, Bool, Complex))
ANY_REAL = frozenset((Float, Int, Bool))
NUM = frozenset((Float, Int))
NUMC = frozenset((Float, Int, Complex))
FLT = frozenset((Float,))
FLTC = frozenset((Float, Complex))
CPX = frozenset((Complex,))
INT = frozenset((Int,))
INT_BOOL = frozenset((Int, Bool))
BOOL_ONLY = frozenset((Bool,))

SAME, BOOL, FLOAT, TO_REAL, TO_COMPLEX = "same", "bool", "float", "real", "complex"


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
    NEG = ("neg", NUMC)
    ABS = ("absolute", NUMC, TO_REAL)
    SIGN = ("sign", NUMC)
    EXP = ("exp", FLTC)
    LOG = ("log", FLTC)
    LOG1P = ("log1p", FLTC)
    SQRT = ("sqrt", FLTC)
    RSQRT = ("rsqrt", FLTC)
    RECIP = ("recip", FLTC)
    SIN = ("sin", FLTC)
    COS = ("cos", FLTC)
    TAN = ("tan", FLTC)
    TANH = ("tanh", FLTC)
    SIGMOID = ("sigmoid", FLT)
    ERF = ("erf", FLT)
    RELU = ("relu", FLT)
    GELU = ("gelu", FLT)
    SILU = ("silu", FLT)
    # rounding leaves integers as they are (the array API standard), predicates of integers
    # and bools are constant: both kinds go through the same scalar functions
    ROUND = ("round_even", NUMC)   # (complex: each part)
    FLOOR = ("floor", NUM)
    CEIL = ("ceil", NUM)
    TRUNC = ("trunc", NUM)
    ISNAN = ("isnan", ANY_REAL, BOOL)   # (complex: Tensor.isnan tests the parts)
    ISINF = ("isinf", ANY_REAL, BOOL)
    ISFINITE = ("isfinite", ANY_REAL, BOOL)
    BIT_NOT = ("bit_not", INT)
    LOGICAL_NOT = ("logical_not", BOOL_ONLY)
    # complex parts (Tensor.real/imag/conj of a real tensor give it, or zeros, without an op)
    CONJ = ("conj", CPX)
    REAL = ("real", CPX, TO_REAL)
    IMAG = ("imag", CPX, TO_REAL)
    ANGLE = ("angle", FLTC, TO_REAL)
    ACOS = ("acos", FLTC)
    ACOSH = ("acosh", FLTC)
    ASIN = ("asin", FLTC)
    ASINH = ("asinh", FLTC)
    ATAN = ("atan", FLTC)
    ATANH = ("atanh", FLTC)
    COSH = ("cosh", FLTC)
    SINH = ("sinh", FLTC)
    EXPM1 = ("expm1", FLTC)
    LOG2 = ("log2", FLTC)
    LOG10 = ("log10", FLTC)
    SQUARE = ("square", NUMC)
    SIGNBIT = ("signbit", NUM, BOOL)
    # --- elementwise, two operands
    ADD = ("add", NUMC)
    SUB = ("sub", NUMC)
    MUL = ("mul", NUMC)
    DIV = ("truediv", NUMC, FLOAT)
    FLOORDIV = ("floordiv", NUM)
    MOD = ("mod", NUM)
    POW = ("power", NUMC)
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
    COMPLEX = ("make_complex", FLT, TO_COMPLEX)   # (real part, imaginary part) -> complex
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
    MATMUL = ("matmul", NUMC)
    SORT = ("sort", NUM)
    TOPK = ("topk", NUM)
    GATHER = ("gather",)
    SCATTER = ("scatter",)
    INDEX_SELECT = ("index_select",)
    NONZERO = ("nonzero",)
    SEARCHSORTED = ("searchsorted", NUM)   # (sorted 1-D sequence, values; params: right)
    # --- discrete Fourier transforms over ``dims`` (ember.fft; params: dims, norm, dtype)
    FFT = ("fft", CPX)      # complex -> complex; param inverse (the +i sign and its scaling)
    RFFT = ("rfft", FLT)    # real -> complex, the last of dims cut to n // 2 + 1
    IRFFT = ("irfft", CPX)  # complex (n // 2 + 1 along the last of dims) -> real; param n

    # --- factorisations and solves of ember.linalg (engine/linalg.py): batched over leading
    # dims; float and complex kinds (engine/linalg.py's SUPPORTED). A multi-output one returns one
    # buffer of its outputs packed along a last dim in their common dtype (a complex input's real
    # eigen- and singular values and log|det| too: engine/backends/shared.py)
    CHOLESKY = ("cholesky", FLTC)                  # params: upper
    TRIANGULAR_SOLVE = ("triangular_solve", FLTC)  # (a, b): params upper, unitriangular
    TRIANGULAR_MATMUL = ("triangular_matmul", FLTC)  # (a, b): triu(a) or tril(a) @ b; param upper
    CHOLESKY_BACKWARD = ("cholesky_backward", FLTC)  # (l, gl): a's gradient from lower factor l's gl
    SOLVE = ("solve", FLTC)                        # (a, b): LU with partial pivoting
    INV = ("inv", FLTC)                            # LU, then getri (CPU) / getrs with I (CUDA)
    DET = ("det", FLTC)
    SLOGDET = ("slogdet", FLTC)                    # packed (sign, logabsdet)
    EIGH = ("eigh", FLTC)                          # params lower, vectors: packed (w, v) or w
    SVD = ("svd", FLTC)                            # params full_matrices, vectors: (U, S, Vh) or S
    QR = ("qr", FLTC)                              # params mode: packed (Q, R), or R for "r"
    PINV = ("pinv", FLTC)                          # params atol, rtol, hermitian
    # --- layout (views where the backend can)
    RESHAPE = ("reshape",)
    PERMUTE = ("permute",)
    EXPAND = ("expand",)
    SLICE = ("slice",)
    FLIP = ("flip",)
    CONTIGUOUS = ("contiguous",)
    SLICE_ASSIGN = ("slice_assign",)
    CAT = ("cat",)
    # --- planned by ember.fusion: a chain of elementwise ops as one kernel (params: the chain,
    # its prepared kernel, leaf kinds, shape, output dtypes), and a reduction computing its
    # pending input chain (CPU; the backend's ``fused_reduce_plan`` says when it applies)
    FUSED = ("fused",)
    FUSED_REDUCE = ("fused_reduce",)
    # --- quantization (ember.quant plans; the storage and geometry in its docstring)
    QUANT_CALIBRATE = ("quant_calibrate",)
    QUANTIZE = ("quantize",)
    DEQUANTIZE = ("dequantize",)
    PACK = ("pack",)
    UNPACK = ("unpack",)
    QMATMUL = ("qmatmul",)
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
    "GELU SILU ROUND FLOOR CEIL TRUNC ISNAN ISINF ISFINITE BIT_NOT LOGICAL_NOT CONJ REAL IMAG "
    "ANGLE ADD SUB MUL DIV FLOORDIV MOD POW MAXIMUM MINIMUM EQ NE LT LE GT GE AND OR XOR SHL SHR "
    "COMPLEX TANH_GRAD SIGMOID_GRAD WHERE CLAMP ACOS ACOSH ASIN ASINH ATAN ATANH COSH SINH EXPM1 "
    "LOG2 LOG10 SQUARE SIGNBIT ATAN2 HYPOT COPYSIGN LOGADDEXP NEXTAFTER"
).split())
REDUCTIONS = frozenset((Op.SUM, Op.PROD, Op.MAX, Op.MIN, Op.ANY_, Op.ALL))
