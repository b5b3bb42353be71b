"""Contractions: ``ember.einsum``, ``ember.tensordot``, ``ember.outer``, ``ember.trace``.

``einsum`` takes its contraction order from ``opt_einsum`` (imported on the first call) and
runs each pairwise contraction as permutes and reshapes around one batched matmul (BLAS on the
CPU), so autodiff, fusion and both devices work through Ember's own ops.  Before that, each
operand's repeated letters become diagonals and letters no one else needs are summed out.
Each (equation, shapes) is planned once (cached): the steps a call then runs.
"""
import functools
import math
import string

from . import dispatch
from . import dtypes as dt
from .tensor import Tensor

_LETTERS = string.ascii_letters


def _check_tensors(name, tensors):
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: expected tensors, got {type(t).__name__}")
        if t._dtype.kind is dt.Bool:
            raise TypeError(f"{name}: expected Float or Int tensors, got Bool")
    if len(tensors) > 1:
        dispatch.same_device(name, list(tensors))


def _parse(equation, shapes):
    """(input letter strings, output letters) with ``...`` replaced by letters of its own."""
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, out = eq.split("->")
        explicit = True
    else:
        lhs, out, explicit = eq, "", False
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum: the equation {equation!r} has {len(terms)} operands, "
                         f"got {len(shapes)} tensors")
    used = set(c for c in eq if c.isalpha())
    spare = [c for c in _LETTERS if c not in used]
    n_ell = 0
    for t, shape in zip(terms, shapes):
        named = len(t.replace("...", ""))
        if "..." in t:
            n_ell = max(n_ell, len(shape) - named)
    ell = "".join(spare[:n_ell])
    out_terms = []
    for t, shape in zip(terms, shapes):
        if t.count("...") > 1 or any(not (c.isalpha() or c == ".") for c in t):
            raise ValueError(f"einsum: invalid subscripts {t!r} in {equation!r}")
        if "..." in t:
            k = len(shape) - len(t.replace("...", ""))
            if k < 0:
                raise ValueError(f"einsum: operand of shape {shape} has fewer dims than {t!r}")
            t = t.replace("...", ell[n_ell - k:])
        if len(t) != len(shape):
            raise ValueError(f"einsum: subscripts {t!r} name {len(t)} dims, the operand has "
                             f"{len(shape)} (shape {shape})")
        out_terms.append(t)
    if explicit:
        if out.count("...") > 1:
            raise ValueError(f"einsum: invalid output subscripts in {equation!r}")
        out = out.replace("...", ell)
        for c in out:
            if not c.isalpha() or out.count(c) > 1 or not any(c in t for t in out_terms):
                raise ValueError(f"einsum: output subscript {c!r} of {equation!r} is invalid "
                                 f"(repeated, or in no operand)")
    else:   # numpy's implicit mode: the ellipsis, then the letters used once, sorted
        counts = {}
        for t in out_terms:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    return out_terms, out


def _sizes(terms, shapes, ell):
    sizes = {}
    for t, shape in zip(terms, shapes):
        for c, n in zip(t, shape):
            old = sizes.get(c)
            if old is None or old == 1:
                sizes[c] = n
            elif n != 1 and n != old:
                raise ValueError(f"einsum: subscript {c!r} has sizes {old} and {n}")
            elif n == 1 and c not in ell:
                raise ValueError(f"einsum: subscript {c!r} has sizes {old} and {n} (only the "
                                 f"dims of '...' broadcast)")
    return sizes


def _path(equation, shapes):
    import opt_einsum
    return tuple(opt_einsum.contract_path(equation, *shapes, shapes=True, optimize="auto")[0])


# What a plan's steps run, on one value and the step's arguments.
def _DIAGONAL(x, i, j):
    from .linalg import diagonal
    return diagonal(x, dim1=i, dim2=j)


def _SUM(x, dims):
    return x.sum(dims)


def _EXPAND(x, shape):
    return x.expand(*shape)


def _PERMUTE(x, order):
    return x.permute(*order)


def _RESHAPE(x, shape):
    return x.reshape(*shape)


class _Plan:
    """The steps of one einsum, on value slots: the operands are slots 0..n-1 and each step
    ``(fn, slot, *args)`` (or ``(None, a, b)``, a matmul) fills the next slot."""

    def __init__(self, n):
        self.n = n
        self.steps = []

    def emit(self, fn, *args):
        self.steps.append((fn, *args))
        return self.n + len(self.steps) - 1

    def shaped(self, s, shape, target):
        return s if tuple(shape) == tuple(target) else self.emit(_RESHAPE, s, tuple(target))

    def permuted(self, s, letters, order):
        if list(letters) == list(order):
            return s
        return self.emit(_PERMUTE, s, tuple(letters.index(c) for c in order))

    def expanded(self, s, shape, letters, sizes):
        target = tuple(sizes[c] for c in letters)
        return s if not letters or tuple(shape) == target else self.emit(_EXPAND, s, target)


def _prepare(plan, s, letters, shape, needed):
    """Repeated letters of one value become its diagonal; letters no one else needs are
    summed out."""
    shape = list(shape)
    while any(letters.count(c) > 1 for c in letters):
        c = next(c for c in letters if letters.count(c) > 1)
        i = letters.index(c)
        j = letters.index(c, i + 1)
        s = plan.emit(_DIAGONAL, s, i, j)
        n = min(shape[i], shape[j])
        shape = shape[:i] + shape[i + 1:j] + shape[j + 1:] + [n]
        letters = letters[:i] + letters[i + 1:j] + letters[j + 1:] + c
    private = tuple(i for i, c in enumerate(letters) if c not in needed)
    if private:
        s = plan.emit(_SUM, s, private)
        shape = [n for c, n in zip(letters, shape) if c in needed]
        letters = "".join(c for c in letters if c in needed)
    return s, letters, tuple(shape)


def _pair(plan, a, b, keep, sizes):
    """Contract value ``a = (slot, letters, shape)`` with ``b`` over the letters they share
    that ``keep`` does not need: one batched matmul."""
    (sa, la, _), (sb, lb, _) = a, b
    batch = [c for c in la if c in lb and c in keep]
    summed = [c for c in la if c in lb and c not in keep]
    fa = [c for c in la if c not in lb]
    fb = [c for c in lb if c not in la]

    def arranged(value, order, target):
        s, letters, shape = value
        s = plan.expanded(s, shape, letters, sizes)
        s = plan.permuted(s, letters, order)
        return plan.shaped(s, [sizes[c] for c in order], target)

    nb = [sizes[c] for c in batch]
    ma, mb, k = (math.prod(sizes[c] for c in cs) for cs in (fa, fb, summed))
    a2 = arranged(a, batch + fa + summed, nb + [ma, k])
    b2 = arranged(b, batch + summed + fb, nb + [k, mb])
    out = plan.emit(None, a2, b2)
    shape = nb + [sizes[c] for c in fa + fb]
    return plan.shaped(out, nb + [ma, mb], shape), "".join(batch + fa + fb), tuple(shape)


@functools.lru_cache(maxsize=512)
def _plan(equation, shapes):
    """The steps of ``einsum(equation)`` on operands of these shapes and the slot of the
    result (errors name the op)."""
    terms, out = _parse(equation, shapes)
    ell = set(c for c in out if c not in equation)
    sizes = _sizes(terms, shapes, ell | set(c for c in "".join(terms) if c not in equation))
    plan = _Plan(len(shapes))
    values = list(zip(range(len(shapes)), terms, shapes))
    for i, (s, letters, shape) in enumerate(values):
        others = set(out).union(*(set(v[1]) for j, v in enumerate(values) if j != i))
        values[i] = _prepare(plan, s, letters, shape, others)
    if len(values) > 1:
        eq = ",".join(v[1] for v in values) + "->" + out
        for step in _path(eq, tuple(tuple(sizes[c] for c in v[1]) for v in values)):
            group = [values.pop(p) for p in sorted(step, reverse=True)][::-1]
            x = group[0]
            for gi, y in enumerate(group[1:], start=2):
                later = [set(v[1]) for v in group[gi:]]
                x = _pair(plan, x, y, set(out).union(*(set(v[1]) for v in values), *later),
                          sizes)
            if len(group) == 1:
                x = _prepare(plan, *x, set(out).union(*(set(v[1]) for v in values)))
            values.append(x)
    (x,) = values
    s, lx, shape = _prepare(plan, *x, set(out))
    s = plan.expanded(s, shape, lx, sizes)
    result = plan.permuted(s, lx, out)
    return tuple(plan.steps), result


def einsum(equation, *operands):
    """Einstein summation (numpy's and torch's ``einsum``), e.g. ``einsum("bij,bjk->bik", a, b)``;
    ``...`` stands for broadcast dims, and without ``->`` the output is the ellipsis and the
    letters used once, sorted.  Operands may also come as one list."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TypeError(f"einsum: the equation must be a string, got {type(equation).__name__}")
    if not operands:
        raise ValueError("einsum: give at least one operand")
    _check_tensors("einsum", operands)
    steps, result = _plan(equation, tuple(tuple(t.shape) for t in operands))
    dtype = operands[0]._dtype
    for t in operands[1:]:
        dtype = dt.promote(dtype, t._dtype)
    values = [t.cast(dtype) for t in operands]
    for fn, s, *args in steps:
        values.append(values[s] @ values[args[0]] if fn is None else fn(values[s], *args))
    return values[result]


def tensordot(a, b, dims=2):
    """torch.tensordot: contract the last ``dims`` dims of ``a`` with the first ``dims`` of
    ``b``, or the dims listed in ``dims = (dims_a, dims_b)``."""
    _check_tensors("tensordot", (a, b))
    if isinstance(dims, int):
        if dims < 0 or dims > min(a.ndim, b.ndim):
            raise ValueError(f"tensordot: dims={dims} is out of range for shapes {a.shape} and "
                             f"{b.shape}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
        if len(da) != len(db):
            raise ValueError(f"tensordot: dims {dims!r} list different numbers of dims")
        da = [dispatch.normalize_dim("tensordot", d, a.ndim) for d in da]
        db = [dispatch.normalize_dim("tensordot", d, b.ndim) for d in db]
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise ValueError(f"tensordot: contracted dims differ in size: {a.shape[i]} (dim {i} "
                             f"of {a.shape}) and {b.shape[j]} (dim {j} of {b.shape})")
    fa = [d for d in range(a.ndim) if d not in da]
    fb = [d for d in range(b.ndim) if d not in db]
    k = math.prod(a.shape[d] for d in da)
    a2 = a.permute(*(fa + da)).reshape(math.prod(a.shape[d] for d in fa), k)
    b2 = b.permute(*(db + fb)).reshape(k, math.prod(b.shape[d] for d in fb))
    dtype = dt.promote(a._dtype, b._dtype)
    out = a2.cast(dtype) @ b2.cast(dtype)
    return out.reshape(*([a.shape[d] for d in fa] + [b.shape[d] for d in fb]))


def outer(input, vec2):
    """The outer product of two 1-D tensors: ``out[i, j] = input[i] * vec2[j]``."""
    _check_tensors("outer", (input, vec2))
    if input.ndim != 1 or vec2.ndim != 1:
        raise ValueError(f"outer: expected 1-D tensors, got shapes {input.shape} and {vec2.shape}")
    return input.unsqueeze(-1) * vec2


def trace(input):
    """The sum of the main diagonal of a 2-D tensor (Int tensors sum to int64)."""
    _check_tensors("trace", (input,))
    if input.ndim != 2:
        raise ValueError(f"trace: expected a 2-D tensor, got shape {input.shape}")
    from .linalg import diagonal
    return diagonal(input).sum()
