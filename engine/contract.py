"""Contractions: ``ember.einsum``, ``ember.tensordot``, ``ember.outer``, ``ember.trace``.

``einsum`` takes its contraction order from ``opt_einsum`` (imported on the first call) and
runs each pairwise contraction as permutes and reshapes around one batched matmul (BLAS on the
CPU), so autodiff, fusion and both devices work through Ember's own ops.  Before that, each
operand's repeated letters become diagonals and letters no one else needs are summed out.
Paths are cached per (equation, shapes).
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


@functools.lru_cache(maxsize=512)
def _path(equation, shapes):
    import opt_einsum
    return tuple(opt_einsum.contract_path(equation, *shapes, shapes=True, optimize="auto")[0])


def _diagonal(x, letters, c):
    """Merge the dims of repeated letter ``c`` into one (the diagonal)."""
    from .linalg import diagonal
    i = letters.index(c)
    j = letters.index(c, i + 1)
    x = diagonal(x, dim1=i, dim2=j)
    return x, letters[:i] + letters[i + 1:j] + letters[j + 1:] + c


def _prepare(x, letters, needed):
    while any(letters.count(c) > 1 for c in letters):
        c = next(c for c in letters if letters.count(c) > 1)
        x, letters = _diagonal(x, letters, c)
    private = tuple(i for i, c in enumerate(letters) if c not in needed)
    if private:
        x = x.sum(private)
        letters = "".join(c for c in letters if c in needed)
    return x, letters


def _pair(a, la, b, lb, keep, sizes):
    """Contract ``a`` (letters ``la``) with ``b`` over the letters they share that ``keep``
    does not need: one batched matmul."""
    batch = [c for c in la if c in lb and c in keep]
    summed = [c for c in la if c in lb and c not in keep]
    fa = [c for c in la if c not in lb]
    fb = [c for c in lb if c not in la]

    def arranged(x, letters, order):
        x = x.expand(*[sizes[c] for c in letters]) if x.ndim else x
        return x.permute(*[letters.index(c) for c in order]) if order else x

    nb = [sizes[c] for c in batch]
    ma, mb, k = (math.prod(sizes[c] for c in cs) for cs in (fa, fb, summed))
    a2 = arranged(a, la, batch + fa + summed).reshape(*nb, ma, k)
    b2 = arranged(b, lb, batch + summed + fb).reshape(*nb, k, mb)
    out = (a2 @ b2).reshape(*(nb + [sizes[c] for c in fa + fb]))
    return out, "".join(batch + fa + fb)


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
    shapes = [tuple(t.shape) for t in operands]
    terms, out = _parse(equation, shapes)
    ell = set(c for c in out if c not in equation)
    sizes = _sizes(terms, shapes, ell | set(c for c in "".join(terms) if c not in equation))
    dtype = operands[0]._dtype
    for t in operands[1:]:
        dtype = dt.promote(dtype, t._dtype)
    xs = [t.cast(dtype) for t in operands]
    letters = list(terms)
    for i in range(len(xs)):
        others = set(out).union(*(set(t) for j, t in enumerate(letters) if j != i))
        xs[i], letters[i] = _prepare(xs[i], letters[i], others)
    if len(xs) > 1:
        eq = ",".join(letters) + "->" + out
        for step in _path(eq, tuple(tuple(sizes[c] for c in t) for t in letters)):
            picked = sorted(step, reverse=True)
            group = [(xs.pop(p), letters.pop(p)) for p in picked][::-1]
            x, lx = group[0]
            for gi, (y, ly) in enumerate(group[1:], start=2):
                later = [set(l) for _, l in group[gi:]]
                x, lx = _pair(x, lx, y, ly, set(out).union(*map(set, letters), *later), sizes)
            if len(group) == 1:
                x, lx = _prepare(x, lx, set(out).union(*map(set, letters)))
            xs.append(x)
            letters.append(lx)
    (x,), (lx,) = xs, letters
    x, lx = _prepare(x, lx, set(out))
    if x.ndim and sizes and tuple(x.shape) != tuple(sizes[c] for c in lx):
        x = x.expand(*[sizes[c] for c in lx])
    return x.permute(*[lx.index(c) for c in out]) if out else x


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
