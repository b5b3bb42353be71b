"""The tape interpreter: one compiled loop that runs a whole small float64 program.

A compiled step (``ember.compile``) of tiny tensors spends its time per launch, not per
element: a replay that calls a kernel per launch pays ~1-4 us of Python each, ~10^4 times
for an unrolled ODE solver.  ``engine/backends/cpu/tape.py`` lowers such a program instead to
a *tape* this one kernel runs, with no Python between its instructions:

- ``A``, the arena: one float64 array holding every value of the program (constants, the
  call's inputs, each instruction's result in a region of its own, written once);
- ``I``, the index pool: for each operand of an instruction, the arena position of each of
  its elements in C order (so views, broadcasting, concatenation and slice assignment cost
  nothing at run time: the lowering composed them into the positions);
- ``T``, the instructions: one int64 row ``(code, dst, ia, ib, n, p1, p2, p3)`` each.

Codes: ``UNARY[c]`` is code ``c``, ``BINARY[c]`` code ``BINARY_BASE + c`` (elementwise over
``n`` elements: ``A[dst + i] = f(A[I[ia + i]], A[I[ib + i]])``); ``MATMUL`` (``n`` matrices
of ``p1 x p2`` times ``p2 x p3``); ``REDUCE_BASE + r`` folds ``n`` groups of ``p1`` values
with ``REDUCERS[r]`` from its identity.  The scalar functions are those of
``kernels/scalar.py`` the eager kernels of float64 use, so an elementwise result is the
eager one to the bit; sums and matrix products add in their plain order (BLAS and the
blocked reduction may round differently in the last bit).

The interpreter's source is generated from these tables (a branch per op), written under
the kernel cache and compiled once, cached on disk like every kernel.
"""
import functools
import hashlib

from ..fused import import_generated
from ..rebind import specialize
from .builder import _jit, scalar_op

UNARY = ("identity", "neg", "absolute", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "recip",
         "sin", "cos", "tan", "tanh", "sigmoid", "relu", "square", "sign")
BINARY = ("add", "sub", "mul", "truediv", "power", "maximum", "minimum", "tanh_grad",
          "sigmoid_grad")
REDUCERS = (("add", "0.0"), ("mul", "1.0"), ("maximum", "-np.inf"), ("minimum", "np.inf"))
BINARY_BASE = 100
MATMUL = 200
REDUCE_BASE = 300
WIDTH = 8   # fields of an instruction


def source():
    """The interpreter's module text."""
    lines = ["import numpy as np", "", "", "def run(T, I, A):",
             "    for t in range(T.shape[0]):",
             "        code = T[t, 0]", "        d = T[t, 1]", "        ia = T[t, 2]",
             "        ib = T[t, 3]", "        n = T[t, 4]",
             "        if code < BINARY_BASE:"]
    for c, _ in enumerate(UNARY):
        lines += [f"            {'if' if c == 0 else 'elif'} code == {c}:",
                  "                for i in range(n):",
                  f"                    A[d + i] = U{c}(A[I[ia + i]])"]
    lines.append("        elif code < MATMUL:")
    for c, _ in enumerate(BINARY):
        lines += [f"            {'if' if c == 0 else 'elif'} code == {BINARY_BASE + c}:",
                  "                for i in range(n):",
                  f"                    A[d + i] = B{c}(A[I[ia + i]], A[I[ib + i]])"]
    lines += ["        elif code == MATMUL:",
              "            m = T[t, 5]", "            k = T[t, 6]", "            c = T[t, 7]",
              "            for b in range(n):",
              "                for i in range(m):",
              "                    row = ia + (b * m + i) * k",
              "                    out = d + (b * m + i) * c",
              "                    for j in range(c):",
              "                        col = ib + b * k * c + j",
              "                        s = 0.0",
              "                        for q in range(k):",
              "                            s += A[I[row + q]] * A[I[col + q * c]]",
              "                        A[out + j] = s",
              "        else:",
              "            g = T[t, 5]"]
    for r, (_, init) in enumerate(REDUCERS):
        lines += [f"            {'if' if r == 0 else 'elif'} code == {REDUCE_BASE + r}:",
                  "                for o in range(n):",
                  f"                    s = {init}",
                  "                    for q in range(g):",
                  f"                        s = R{r}(s, A[I[ia + o * g + q]])",
                  "                    A[d + o] = s"]
    return "\n".join(lines) + "\n"


@functools.cache
def interpreter():
    """The compiled ``run(T, I, A)`` (serial: a tape's instructions are tiny)."""
    text = source()
    name = "ember_tape_" + hashlib.sha256(text.encode()).hexdigest()[:16]
    mod = import_generated(name, text)
    bindings = {f"U{c}": scalar_op(op) for c, op in enumerate(UNARY)}
    bindings.update({f"B{c}": scalar_op(op) for c, op in enumerate(BINARY)})
    bindings.update({f"R{r}": scalar_op(op) for r, (op, _) in enumerate(REDUCERS)})
    bindings.update(BINARY_BASE=BINARY_BASE, MATMUL=MATMUL)
    return _jit(specialize(mod.run, name, **bindings), parallel=False)
