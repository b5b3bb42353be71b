"""Gradient rules: one entry per differentiable primitive of the IR.

An entry is ``Rule(deps, backward)``.  ``deps[i]`` lists what the gradient of
input ``i`` reads: input indices, or ``"out"`` for the op's result; a step
saves only what the inputs that take a gradient read (Burn saves ``mul``'s
other operand only when this one is tracked).  Inputs past the end of ``deps`` read nothing.  ``backward(s, g)`` gets the
node, which carries the step (``s.x`` saved inputs, ``s.out``, ``s.params``, ``s.shapes``,
``s.dtypes``; ``s.parents[i]`` is None where input i takes no gradient), and the output
gradient, and returns one gradient per input,
``None`` where there is none.  Rules are written with tensor ops on tensors
without autodiff, so they run on every device, and return gradients in the
shape of the op's output: the walk sums them back to broadcast inputs.

Complex values follow PyTorch's convention: the gradient of a real loss ``L`` with respect
to ``z = x + iy`` is ``dL/dx + i dL/dy`` (twice the conjugate Wirtinger derivative).  A
holomorphic ``f`` then passes ``g * conj(f'(z))`` back, which is its real rule's formula with
the saved values conjugated (``holomorphic``); ``COMPLEX_RULES`` holds the rules of ops
whose first input is complex where they differ from ``RULES``, and ``graph.record`` takes
them from there.
"""
import math
from typing import Callable, NamedTuple

from ember import dispatch
from ember import dtypes as dt
from ember.backends import recorder
from ember.ir import ELEMENTWISE, Op


class Rule(NamedTuple):
    deps: tuple
    backward: Callable


def _tracing():
    """True inside a step ``ember.compile`` traces: a rule must not read values there, so a
    rule that picks a formula by the data (a zero pivot, an unused output) takes the one that
    holds in every case (the trace replays it whatever the values)."""
    return recorder() is not None


def _has(mask):
    """Whether some entry of bool tensor ``mask`` is true (a value read: not while tracing)."""
    return bool(mask.any().item())


def _zeros(shape, like):
    from ember.creation import zeros
    return zeros(shape, dtype=like.dtype, device=like.device)


def unary(deps, fn):
    return Rule((deps,), lambda s, g: (fn(s, g),))


def _no_grad(s, g):
    return _zeros(g.shape, g)


def _if(need, fn):
    return fn() if need else None


# --- elementwise helpers -----------------------------------------------------------
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


def _sqrt(s, g):
    # d sqrt(x) = 1 / (2 sqrt(x)); at x = 0 the slope is +inf: give inf where g != 0, 0 where g == 0
    return (g * 0.5 / s.out).mask_fill(g == 0, 0)


def _gelu(s, g):
    x = s.x[0]
    cdf = ((x * (1 / math.sqrt(2))).erf() + 1) * 0.5
    pdf = (x * x * -0.5).exp() * _INV_SQRT_2PI
    return g * (cdf + x * pdf)


def _silu(s, g):
    x = s.x[0]
    sig = x.sigmoid()
    return g * sig * (x * (1 - sig) + 1)


def _pow(s, g):
    a, b = s.x
    ga = _if(s.parents[0], lambda: (g * b * a.pow(b - 1)).mask_fill(b == 0, 0))
    gb = _if(s.parents[1], lambda: (g * s.out * a.log()).mask_fill(a == 0, 0))
    return ga, gb


def _extremum(larger):
    # maximum/minimum: the winning input takes the gradient; ties split it evenly, and the
    # losing side gets an exact 0 even where g is NaN or inf (masked, not multiplied by 0),
    # as PyTorch; a NaN input loses to nothing, so both sides take g there (PyTorch too)
    def backward(s, g):
        a, b = s.x
        shared = ember_where(a == b, g * 0.5, g)
        a_loses, b_loses = ((a < b), (a > b)) if larger else ((a > b), (a < b))
        return (_if(s.parents[0], lambda: shared.mask_fill(a_loses, 0)),
                _if(s.parents[1], lambda: shared.mask_fill(b_loses, 0)))
    return backward


def ember_where(cond, x, y):
    return dispatch.elementwise(Op.WHERE, cond, x, y)


def _clamp(s, g):
    x, lo, hi = s.x
    below = x < lo
    above = (x > hi) | (below & (lo > hi))   # the upper bound wins when the bounds cross
    below = below & ~above
    return (g.mask_fill(below | above, 0),
            _if(s.parents[1], lambda: g.mask_fill(~below, 0)),
            _if(s.parents[2], lambda: g.mask_fill(~above, 0)))


def _where(s, g):
    cond = s.x[0]
    return None, _if(s.parents[1], lambda: g.mask_fill(~cond, 0)), _if(s.parents[2], lambda: g.mask_fill(cond, 0))


_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


def _atan2(s, g):
    a, b = s.x
    den = a * a + b * b
    return _if(s.parents[0], lambda: g * b / den), _if(s.parents[1], lambda: -g * a / den)


def _hypot(s, g):
    # d hypot / da = a / hypot; at the origin (no slope) the gradient is 0, not 0/0
    a, b = s.x
    zero = s.out == 0
    return (_if(s.parents[0], lambda: (g * a / s.out).mask_fill(zero, 0)),
            _if(s.parents[1], lambda: (g * b / s.out).mask_fill(zero, 0)))


def _copysign(s, g):
    # the magnitude's gradient, negated where the sign is flipped; none to the sign's source
    a, b = s.x
    return (_if(s.parents[0], lambda: g * (1 - (a.signbit() ^ b.signbit()).cast(g.dtype) * 2)),
            _if(s.parents[1], lambda: _no_grad(s, g)))


def _logaddexp(s, g):
    a, b = s.x
    return (_if(s.parents[0], lambda: g * (a - s.out).exp()),
            _if(s.parents[1], lambda: g * (b - s.out).exp()))


# --- reductions and scans ----------------------------------------------------------------
def _keepdims(g, shape, axes):
    return g.reshape(tuple(1 if d in axes else n for d, n in enumerate(shape)))


def _sum(s, g):
    return (_keepdims(g, s.shapes[0], s.params["axes"]).expand(s.shapes[0]),)


def _max_min(s, g):
    # the gradient goes to the entries equal to the result, split evenly among ties
    shape, axes = s.shapes[0], s.params["axes"]
    hit = (s.x[0] == _keepdims(s.out, shape, axes)).cast(g.dtype)
    return (hit * _keepdims(g, shape, axes) / hit.sum(axes, keepdim=True),)


def _others_product(x, axis):
    """prod of every other entry along ``axis``, without dividing (zero-safe)."""
    from ember.creation import cat, ones
    n = x.shape[axis]
    one = ones(x.shape[:axis] + (1,) + x.shape[axis + 1:], dtype=x.dtype, device=x.device)
    before = cat([one, x.narrow(axis, 0, n - 1).cumprod(axis)], axis)
    xf = x.flip(axis)
    after = cat([one, xf.narrow(axis, 0, n - 1).cumprod(axis)], axis).flip(axis)
    return before * after


def _prod(s, g):
    x, shape, axes = s.x[0], s.shapes[0], s.params["axes"]
    if not axes or x.numel() == 0:
        return (_keepdims(g, shape, axes).expand(shape),)
    kept = [d for d in range(len(shape)) if d not in axes]
    perm = kept + list(axes)
    moved = x.permute(perm)
    flat = moved.reshape(moved.shape[:len(kept)] + (-1,))
    others = _others_product(flat, len(kept)).reshape(moved.shape)
    inverse = [perm.index(d) for d in range(len(shape))]
    return (others.permute(inverse) * _keepdims(g, shape, axes),)


def _cumsum(s, g):
    axis = s.params["axis"]
    return (g.flip(axis).cumsum(axis).flip(axis),)


def _cumprod(s, g):
    # d out_i / d x_j = prod_{k <= i, k != j} x_k  for i >= j
    x, axis = s.x[0], s.params["axis"]
    n = x.shape[axis]
    if n == 0:
        return (g,)
    if not _tracing() and not _has(x == 0):
        return ((g * s.out).flip(axis).cumsum(axis).flip(axis) / x,)
    from ember.creation import arange, cat, ones
    # zero-safe O(n^2): row j of m holds x with entries k <= j replaced by 1
    xm = x.transpose(axis, -1).unsqueeze(-2)                       # (..., 1, n)
    k = arange(n, device=x.device)
    upto = k.unsqueeze(-1) >= k                                    # (n, n): k <= j
    m = xm.expand(xm.shape[:-2] + (n, n)).mask_fill(upto, 1).cumprod(-1)   # prod_{j<k<=i} x_k
    one = ones(xm.shape[:-2] + (1,), dtype=x.dtype, device=x.device)
    xt = x.transpose(axis, -1)
    before = cat([one, xt.narrow(-1, 0, n - 1).cumprod(-1)], -1)  # prod_{k<j} x_k
    gt = g.transpose(axis, -1).unsqueeze(-2)                      # (..., 1, n): g_i
    below_diag = k.unsqueeze(-1) > k                               # i < j: no contribution
    inner_sum = (m * gt).mask_fill(below_diag, 0).sum(-1)          # sum_{i >= j}
    return ((before * inner_sum).transpose(axis, -1),)


def _softmax(s, g):
    y = s.out
    return y * (g - (g * y).sum(s.params["axis"], keepdim=True))


def _log_softmax(s, g):
    return g - s.out.exp() * g.sum(s.params["axis"], keepdim=True)


# --- linear algebra, sorting, indexing --------------------------------------------------------
def _matmul(s, g):
    # 1-D operands act as matrices (numpy): add their unit dim to g, drop it from their gradient
    a, b = s.x
    a_vec, b_vec = len(s.shapes[0]) == 1, len(s.shapes[1]) == 1
    if b_vec:
        g = g.unsqueeze(-1)
    if a_vec:
        g = g.unsqueeze(-2)
    ga = gb = None
    if s.parents[0]:
        ga = g @ (b.unsqueeze(-1) if b_vec else b).transpose()
        ga = ga.squeeze(-2) if a_vec else ga
    if s.parents[1]:
        gb = (a.unsqueeze(-2) if a_vec else a).transpose() @ g
        gb = gb.squeeze(-1) if b_vec else gb
    return ga, gb


# The backward's gathers and scatters read indices that their forward op already checked
# (dispatch.check_index_range) or made (sort): they apply the IR op directly, without taking
# the indices' minimum and maximum again (two reductions and a read eagerly, three launches and
# a check in each replay of a compiled step)
def _scatter_back(s, g, index):
    return dispatch.apply(Op.SCATTER, _zeros(s.shapes[0], g), index, g, axis=s.params["axis"],
                          reduce="add")


def _sorted(s, g):
    return (_scatter_back(s, g, s.out[1]),)


def _gather(s, g):
    return _scatter_back(s, g, s.x[1]), None


def _scatter(s, g):
    axis, index = s.params["axis"], s.x[1]
    if s.params["reduce"] == "add":
        gx = g
    else:  # assigned entries take no gradient from the original tensor
        gx = _if(s.parents[0], lambda: dispatch.apply(Op.SCATTER, g, index, _zeros(index.shape, g),
                                                      axis=axis, reduce="assign"))
    return gx, None, _if(s.parents[2], lambda: dispatch.apply(Op.GATHER, g, index, axis=axis))


def _index_select(s, g):
    axis, idx = s.params["axis"], s.x[1]
    shape = [1] * g.ndim
    shape[axis] = idx.shape[0]
    index = idx.reshape(shape).expand(g.shape)
    return _scatter_back(s, g, index), None


def _permute(s, g):
    dims = s.params["dims"]
    return g.permute([dims.index(d) for d in range(len(dims))])


def _slice(s, g):
    return _zeros(s.shapes[0], g).slice_assign(s.params["index"], g)


def _slice_assign(s, g):
    index = s.params["index"]
    return _if(s.parents[0], lambda: g.slice_assign(index, 0)), _if(s.parents[1], lambda: g[index])


def _cat(s, g):
    axis = s.params["axis"]
    pieces = g.split([shape[axis] for shape in s.shapes], axis)
    return tuple(p if need else None for p, need in zip(pieces, s.parents))


# --- complex numbers ---------------------------------------------------------------------
class _Conjugated:
    """A step seen with its saved values conjugated (what ``holomorphic`` rules read)."""

    __slots__ = ("x", "out", "params", "shapes", "dtypes", "parents")

    def __init__(self, s):
        self.x = tuple(None if v is None else v.conj() for v in s.x)
        self.out = None if s.out is None else s.out.conj()
        self.params = s.params
        self.shapes = s.shapes
        self.dtypes = s.dtypes
        self.parents = s.parents


def holomorphic(rule):
    """``rule`` for complex inputs of a holomorphic op: ``g * conj(f'(z))`` is the real rule's
    formula (a polynomial or analytic function with real coefficients in the saved values,
    linear in ``g``) evaluated on the conjugated values."""
    backward = rule.backward
    return Rule(rule.deps, lambda s, g: backward(_Conjugated(s), g))


def _complex_sign(s, g):
    # sgn(z) = z / |z| turns with z's angle only: d sgn = i sgn d(angle), so the gradient is
    # Re(conj(g) i sgn) times angle's (i z / |z|^2 = i sgn / |z|); 0 at z = 0
    z = s.x[0]
    r = z.abs()
    sgn = z.sign()
    turn = (g.conj() * sgn * 1j).real
    return ((turn / r.mask_fill(r == 0, 1)) * sgn * 1j).mask_fill(r == 0, 0)


def _complex_angle(s, g):
    # angle(x + iy) = atan2(y, x): dL/dx + i dL/dy = g (-y + ix) / |z|^2 = g i z / |z|^2; 0 at 0
    z = s.x[0]
    r2 = z.real * z.real + z.imag * z.imag
    return (g * z * 1j / r2.mask_fill(r2 == 0, 1)).mask_fill(r2 == 0, 0)


def _imag(s, g):
    # imag(x + iy) = y: the gradient is i g
    return dispatch.elementwise(Op.COMPLEX, 0.0, g)


# --- Fourier transforms (ember.fft): the gradient of a transform is its adjoint -------------
def _fft(s, g):
    # the adjoint of a DFT is the inverse DFT with the dual norm's scaling
    from ember import fft
    p = s.params
    return dispatch.apply(Op.FFT, g, dims=p["dims"], inverse=not p["inverse"],
                          norm=fft.dual(p["norm"]), dtype=g.dtype)


def _rfft(s, g):
    # rfft keeps the first n // 2 + 1 outputs of a complex DFT of a real signal: its adjoint is
    # the real part of the inverse DFT of g padded with zeros, which is irfft (dual norm) of g
    # with the frequencies that have conjugate twins halved (irfft counts each twice)
    from ember import fft
    p = s.params
    dims = p["dims"]
    n = s.shapes[0][dims[-1]]
    w = fft.one_sided_weights(n, dims[-1], g.ndim, dt.real_of(g.dtype), g.device)
    return dispatch.apply(Op.IRFFT, g / w, dims=dims, n=n, norm=fft.dual(p["norm"]),
                          dtype=s.dtypes[0])


def _irfft(s, g):
    # irfft reads each one-sided value once or, standing for its conjugate twin too, twice:
    # the adjoint is rfft (dual norm) of g with those frequencies doubled
    from ember import fft
    p = s.params
    dims = p["dims"]
    w = fft.one_sided_weights(p["n"], dims[-1], g.ndim, g.dtype, g.device)
    return dispatch.apply(Op.RFFT, g, dims=dims, norm=fft.dual(p["norm"]),
                          dtype=s.dtypes[0]) * w

# --- ember.linalg: factorisations and solves (torch's formulas; docs/decisions.md) ---------------
# Multi-output ops return their outputs packed in one tensor (engine/backends/shared.py):
# the rules unpack the saved result and the packed gradient.  A gradient part that is exactly
# zero (an output the loss does not use) is skipped: that is torch's "undefined gradient".
# The formulas are written for complex matrices, with conjugate transposes (``_mH``), which
# are the real formulas for real ones (a real tensor's ``conj`` is itself: no launch).
def _mH(x):
    return x.transpose(-2, -1).conj()


def _la():
    from ember import linalg
    return linalg


def _used(g):
    """Whether gradient part ``g`` is not all zero; while tracing every part counts as used
    (an unused part's terms then add exact zeros: see ``_divide``)."""
    return _tracing() or bool(g.any().item())


def _divide(num, den):
    """``num / den``; while tracing, 0 wherever ``num`` is 0: the part of an unused output
    divided by a zero singular value stays 0, as eager mode, which skips the part, gives."""
    q = num / den
    return q.mask_fill(num == 0, 0) if _tracing() else q


def _diag_embed(v):
    from ember.creation import eye
    return v.unsqueeze(-1) * eye(v.shape[-1], dtype=v.dtype, device=v.device)


def _off_diagonal_ratio(num, den):
    """``num / den`` off the diagonal, 0 on it and wherever ``num`` is 0: where ``den`` is 0
    (repeated eigen- or singular values) and ``num`` is not, the result is inf, as torch's."""
    from ember.creation import eye
    diag = eye(den.shape[-1], dtype=den.dtype, device=den.device) == 1
    return (num / den.mask_fill(diag, 1)).mask_fill(diag | (num == 0), 0)


def _check_phase(name, what, imag_diag):
    """torch's test that a loss does not depend on the phase of complex eigen- or singular
    vectors (each is defined up to a factor e^{i phi}): the imaginary diagonal of V^H gV
    (for svd: U^H gU + V^H gV) must vanish, to torch's lax tolerance.  (A traced step cannot
    test values: it skips the check.)"""
    if not _tracing() and not bool((imag_diag.abs() <= 1e-2).all().item()):
        raise RuntimeError(f"linalg.{name}: the {what} of a complex matrix are defined up to a "
                           f"factor e^(i phi) each, and the loss depends on that phase, so its "
                           f"gradient is not defined (use a phase-free function of them, as "
                           f"torch requires)")


def _cholesky_grad(s, g):
    # gA = L^-H Phi L^-1, Phi = the Hermitian part of tril(L^H gL) (torch's cholesky_backward):
    # one IR op, which the CPU backend computes by blocks for a real matrix
    L = s.out
    if s.params["upper"]:
        L, g = _mH(L), _mH(g)
    return (dispatch.apply(Op.CHOLESKY_BACKWARD, L, g),)


def _triangular_solve_grad(s, g):
    a, x = s.x[0], s.out
    upper, unit = s.params["upper"], s.params["unitriangular"]
    gb = _la().solve_triangular(_mH(a), g, upper=not upper, unitriangular=unit)
    ga = None
    if s.parents[0]:
        ga = -(gb @ _mH(x))   # only the triangle the solve read takes a gradient
        ga = ga.triu(1 if unit else 0) if upper else ga.tril(-1 if unit else 0)
    return ga, gb if s.parents[1] else None


def _triangular_matmul_grad(s, g):
    # C = T(a) @ b: gA = T(g b^H) (the triangle read), gB = T(a)^H g = T'(a^H) g
    a, b = s.x
    upper = s.params["upper"]
    ga = gb = None
    if s.parents[0]:
        ga = g @ _mH(b)
        ga = ga.triu() if upper else ga.tril()
    if s.parents[1]:
        gb = dispatch.apply(Op.TRIANGULAR_MATMUL, _mH(a), g, upper=not upper)
    return ga, gb


def _solve_grad(s, g):
    a, x = s.x[0], s.out
    gb = _la().solve(_mH(a), g)
    return (-(gb @ _mH(x)) if s.parents[0] else None), (gb if s.parents[1] else None)


def _inv_grad(s, g):
    x = s.out   # d inv(A) = -X dA X
    return (-(_mH(x) @ g @ _mH(x)),)


def _adjugate_h(a):
    """adj(A)^H, the conjugate of d det(A) / dA, also for singular A:
    conj(det(U) det(Vh)) U diag(prod_{j!=i} s_j) Vh."""
    la = _la()
    u, sv, vh = la.svd(a)
    sign = (la.det(u) * la.det(vh)).conj()
    return (u * _others_product(sv, sv.ndim - 1).unsqueeze(-2)) @ vh * sign.unsqueeze(-1).unsqueeze(-1)


def _det_grad(s, g):
    a, d = s.x[0], s.out
    if not _tracing() and not _has(d == 0):
        gd = (g * d.conj()).unsqueeze(-1).unsqueeze(-1)
        return (gd * _mH(_la().inv(a)),)
    # a singular matrix, or a traced step (no value to test): the adjugate, right for every A
    return (g.unsqueeze(-1).unsqueeze(-1) * _adjugate_h(a),)


def _slogdet_grad(s, g):
    # gA = gl A^-H; a complex sign (det / |det|) turns with Im tr(A^-1 dA), which adds
    # -i Im(conj(g_sign) sign) to gl (torch's slogdet_backward); a real sign is flat
    la = _la()
    a = s.x[0]
    sign, logabsdet = la._unpack(Op.SLOGDET, s.out, s.shapes[0], s.params)
    gsign, gl = la._unpack(Op.SLOGDET, g, s.shapes[0], s.params)
    if sign.dtype.is_complex:
        gl = gl - (gsign.conj() * sign).imag * 1j
    gl = gl.unsqueeze(-1).unsqueeze(-1)
    # (a traced step takes this formula: slogdet serves matrices whose det over- or underflows,
    # where the adjugate's would not; a singular matrix then raises LinAlgError at the replay)
    if _tracing() or not _has(sign == 0):
        return (gl * _mH(la.inv(a)),)
    det = (sign * logabsdet.exp()).unsqueeze(-1).unsqueeze(-1)   # 0 where singular: +-inf, as torch
    return (gl / det.conj() * _adjugate_h(a),)


def _eigh_grad(s, g):
    if not s.params["vectors"]:
        raise RuntimeError("linalg.eigvalsh: the gradient needs the eigenvectors (use eigh)")
    la = _la()
    w, v = la._unpack(Op.EIGH, s.out, s.shapes[0], s.params)
    gw, gv = la._unpack(Op.EIGH, g, s.shapes[0], s.params)
    inner = _diag_embed(gw)
    if _used(gv):
        m = _mH(v) @ gv
        if m.dtype.is_complex:
            _check_phase("eigh", "eigenvectors", la.diagonal(m).imag)
        inner = inner + _off_diagonal_ratio((m - _mH(m)) * 0.5, w.unsqueeze(-2) - w.unsqueeze(-1))
    return (v @ inner @ _mH(v),)


def _svd_grad(s, g):
    la = _la()
    shape = s.shapes[0]
    m, n = shape[-2:]
    k = min(m, n)
    u, sv, vh = la._unpack(Op.SVD, s.out, shape, s.params)
    gu, gs, gvh = la._unpack(Op.SVD, g, shape, s.params)
    if s.params["full_matrices"]:   # the extra columns/rows are arbitrary bases: ignored (torch)
        u, gu, vh, gvh = u[..., :, :k], gu[..., :, :k], vh[..., :k, :], gvh[..., :k, :]
    has_u, has_v = _used(gu), _used(gvh)
    ga = _diag_embed(gs)
    if has_u or has_v:
        s2 = sv * sv
        num = uu = vv = None
        if has_u:
            uu = _mH(u) @ gu
            uu = uu - _mH(uu)
            num = uu * sv.unsqueeze(-2)
        if has_v:
            vv = vh @ _mH(gvh)     # V^H gV, with V = Vh^H
            vv = vv - _mH(vv)
            term = sv.unsqueeze(-1) * vv
            num = term if num is None else num + term
        if u.dtype.is_complex:
            # the imaginary diagonals of the two skew parts must cancel (the phase test), and
            # U^H gU's gives the diagonal term i Im(diag(U^H gU)) / S
            im = sum(la.diagonal(x).imag for x in (uu, vv) if x is not None)
            _check_phase("svd", "singular vectors", im * 0.5)
            if has_u:
                ga = ga + _diag_embed(_divide(la.diagonal(uu), sv * 2))
        ga = ga + _off_diagonal_ratio(num, s2.unsqueeze(-2) - s2.unsqueeze(-1))
    if m > n and has_u:
        ga = u @ ga
        gu_sinv = _divide(gu, sv.unsqueeze(-2))
        ga = (ga + gu_sinv - u @ (_mH(u) @ gu_sinv)) @ vh
    elif m < n and has_v:
        ga = ga @ vh
        sinv_gvh = _divide(gvh, sv.unsqueeze(-1))
        ga = u @ (ga + sinv_gvh - (sinv_gvh @ _mH(vh)) @ vh)
    else:
        ga = u @ ga @ vh
    return (ga,)


def _qr_tall(q, r, gq, gr):
    # m >= n: gA = (gQ + Q copyltu(M)) R^-H, M = R gR^H - gQ^H Q, copyltu(M) the Hermitian
    # matrix of M's lower triangle; of a complex M only the diagonal's real part counts, as
    # LAPACK's R has a real diagonal (derived in docs/decisions.md)
    la = _la()
    mm = r @ _mH(gr) - _mH(gq) @ q
    sym = mm.tril() + _mH(mm.tril(-1))
    if sym.dtype.is_complex:
        sym = sym - _diag_embed(la.diagonal(mm).imag * 1j)
    return la.solve_triangular(_mH(r), gq + q @ sym, upper=False, left=False)


def _qr_grad(s, g):
    mode = s.params["mode"]
    shape = s.shapes[0]
    m, n = shape[-2:]
    if mode == "r":
        raise RuntimeError("linalg.qr: the derivative of qr depends on Q, which is not computed "
                           "when mode='r'; use mode='reduced' to differentiate through qr")
    if mode == "complete" and m > n:
        raise RuntimeError("linalg.qr: the QR decomposition is not differentiable when "
                           "mode='complete' and nrows > ncols (as in torch)")
    la = _la()
    q, r = la._unpack(Op.QR, s.out, shape, s.params)
    gq, gr = la._unpack(Op.QR, g, shape, s.params)
    if m >= n:
        return (_qr_tall(q, r, gq, gr),)
    # m < n: A = [X | Y] with X = Q R[:, :m] square, Y = Q R[:, m:]
    from ember.creation import cat
    y = s.x[0][..., :, m:]
    gr_y = gr[..., :, m:]
    gx = _qr_tall(q, r[..., :, :m], gq + y @ _mH(gr_y), gr[..., :, :m])
    return (cat([gx, q @ gr_y], -1),)


def _pinv_grad(s, g):
    # gA = -P^H G P^H + (I - A P) G^H P P^H + P^H P G^H (I - P A)  (torch's pinv_backward)
    a, p = s.x[0], s.out
    gt = _mH(g)
    t = gt @ (p @ _mH(p))
    u = (_mH(p) @ p) @ gt
    return (-(_mH(p) @ g @ _mH(p)) + t - a @ (p @ t) + u - (u @ p) @ a,)


OUT = "out"

RULES = {
    # elementwise, one operand
    Op.CAST: unary((), lambda s, g: g.cast(s.dtypes[0])),
    Op.NEG: unary((), lambda s, g: -g),
    Op.ABS: unary((0,), lambda s, g: g * s.x[0].sign()),
    Op.SIGN: unary((), _no_grad),
    Op.EXP: unary((OUT,), lambda s, g: g * s.out),
    Op.LOG: unary((0,), lambda s, g: g / s.x[0]),
    Op.LOG1P: unary((0,), lambda s, g: g / (s.x[0] + 1)),
    Op.SQRT: unary((OUT,), _sqrt),
    Op.RSQRT: unary((OUT,), lambda s, g: g * -0.5 * s.out * s.out * s.out),
    Op.RECIP: unary((OUT,), lambda s, g: -g * s.out * s.out),
    Op.SIN: unary((0,), lambda s, g: g * s.x[0].cos()),
    Op.COS: unary((0,), lambda s, g: -g * s.x[0].sin()),
    Op.TAN: unary((OUT,), lambda s, g: g * (s.out * s.out + 1)),
    Op.TANH: unary((OUT,), lambda s, g: dispatch.elementwise(Op.TANH_GRAD, g, s.out)),
    Op.SIGMOID: unary((OUT,), lambda s, g: dispatch.elementwise(Op.SIGMOID_GRAD, g, s.out)),
    Op.ERF: unary((0,), lambda s, g: g * (s.x[0] * s.x[0] * -1).exp() * _TWO_OVER_SQRT_PI),
    Op.RELU: unary((0,), lambda s, g: g.mask_fill(s.x[0] <= 0, 0)),
    Op.GELU: unary((0,), _gelu),
    Op.SILU: unary((0,), _silu),
    Op.CONJ: unary((), lambda s, g: g.conj()),
    Op.REAL: unary((), lambda s, g: g.cast(s.dtypes[0])),
    Op.IMAG: unary((), _imag),
    Op.ANGLE: unary((), _no_grad),   # of a real tensor: 0 or pi, flat
    Op.ACOS: unary((0,), lambda s, g: -g / (1 - s.x[0] * s.x[0]).sqrt()),
    Op.ASIN: unary((0,), lambda s, g: g / (1 - s.x[0] * s.x[0]).sqrt()),
    Op.ATAN: unary((0,), lambda s, g: g / (s.x[0] * s.x[0] + 1)),
    Op.ACOSH: unary((0,), lambda s, g: g / (s.x[0] * s.x[0] - 1).sqrt()),
    Op.ASINH: unary((0,), lambda s, g: g / (s.x[0] * s.x[0] + 1).sqrt()),
    Op.ATANH: unary((0,), lambda s, g: g / (1 - s.x[0] * s.x[0])),
    Op.COSH: unary((0,), lambda s, g: g * s.x[0].sinh()),
    Op.SINH: unary((0,), lambda s, g: g * s.x[0].cosh()),
    Op.EXPM1: unary((OUT,), lambda s, g: g * (s.out + 1)),
    Op.LOG2: unary((0,), lambda s, g: g / (s.x[0] * _LN2)),
    Op.LOG10: unary((0,), lambda s, g: g / (s.x[0] * _LN10)),
    Op.SQUARE: unary((0,), lambda s, g: g * s.x[0] * 2),
    Op.ROUND: unary((), _no_grad),
    Op.FLOOR: unary((), _no_grad),
    Op.CEIL: unary((), _no_grad),
    Op.TRUNC: unary((), _no_grad),
    # elementwise, two and three operands
    Op.ADD: Rule(((), ()), lambda s, g: (g, g)),
    Op.SUB: Rule(((), ()), lambda s, g: (g, -g)),
    # (the hottest rules: conditional expressions, no closures per call)
    Op.MUL: Rule(((1,), (0,)), lambda s, g: (g * s.x[1] if s.parents[0] else None,
                                           g * s.x[0] if s.parents[1] else None)),
    Op.DIV: Rule(((1,), (0, 1)), lambda s, g: (g / s.x[1] if s.parents[0] else None,
                                             -g * s.x[0] / (s.x[1] * s.x[1]) if s.parents[1] else None)),
    Op.FLOORDIV: Rule(((), ()), lambda s, g: (_no_grad(s, g), _no_grad(s, g))),
    Op.MOD: Rule(((), (0, 1)), lambda s, g: (g, _if(s.parents[1], lambda: -g * (s.x[0] / s.x[1]).floor()))),
    Op.POW: Rule(((0, 1), (0, 1, OUT)), _pow),
    Op.MAXIMUM: Rule(((0, 1), (0, 1)), _extremum(larger=True)),
    Op.MINIMUM: Rule(((0, 1), (0, 1)), _extremum(larger=False)),
    Op.CLAMP: Rule(((0, 1, 2), (0, 1), (0, 2)), _clamp),
    Op.COMPLEX: Rule(((), ()), lambda s, g: (_if(s.parents[0], lambda: g.real),
                                             _if(s.parents[1], lambda: g.imag))),
    Op.ATAN2: Rule(((0, 1), (0, 1)), _atan2),
    Op.HYPOT: Rule(((0, OUT), (1, OUT)), _hypot),
    Op.COPYSIGN: Rule(((0, 1), ()), _copysign),
    Op.LOGADDEXP: Rule(((0, OUT), (1, OUT)), _logaddexp),
    # nextafter moves by one ulp: locally the identity in its first operand, flat in the second
    Op.NEXTAFTER: Rule(((), ()), lambda s, g: (g, _no_grad(s, g))),
    # (g, y) -> g * (1 - y*y): d/dg = 1 - y*y, d/dy = -2 g y
    Op.TANH_GRAD: Rule(((1,), (0, 1)), lambda s, g: (
        dispatch.elementwise(Op.TANH_GRAD, g, s.x[1]) if s.parents[0] else None,
        g * s.x[0] * s.x[1] * -2 if s.parents[1] else None)),
    # (g, y) -> g * y * (1 - y): d/dg = y (1 - y), d/dy = g (1 - 2y)
    Op.SIGMOID_GRAD: Rule(((1,), (0, 1)), lambda s, g: (
        dispatch.elementwise(Op.SIGMOID_GRAD, g, s.x[1]) if s.parents[0] else None,
        g * s.x[0] * (1 - s.x[1] * 2) if s.parents[1] else None)),
    Op.WHERE: Rule(((), (0,), (0,)), _where),
    # reductions and scans
    Op.SUM: Rule(((),), _sum),
    Op.PROD: Rule(((0,),), _prod),
    Op.MAX: Rule(((0, OUT),), _max_min),
    Op.MIN: Rule(((0, OUT),), _max_min),
    Op.CUMSUM: Rule(((),), _cumsum),
    Op.CUMPROD: Rule(((0, OUT),), _cumprod),
    Op.SOFTMAX: unary((OUT,), _softmax),
    Op.LOG_SOFTMAX: unary((OUT,), _log_softmax),
    # linear algebra, sorting, indexing
    Op.MATMUL: Rule(((1,), (0,)), _matmul),
    Op.SORT: Rule(((OUT,),), _sorted),
    Op.TOPK: Rule(((OUT,),), _sorted),
    Op.GATHER: Rule(((1,), ()), _gather),
    Op.SCATTER: Rule(((1,), (), (1,)), _scatter),
    Op.INDEX_SELECT: Rule(((1,), ()), _index_select),
    Op.FFT: unary((), _fft),
    Op.RFFT: unary((), _rfft),
    Op.IRFFT: unary((), _irfft),

    # ember.linalg
    Op.CHOLESKY: Rule(((OUT,),), _cholesky_grad),
    Op.TRIANGULAR_SOLVE: Rule(((0, OUT), (0,)), _triangular_solve_grad),
    Op.TRIANGULAR_MATMUL: Rule(((1,), (0,)), _triangular_matmul_grad),
    Op.SOLVE: Rule(((0, OUT), (0,)), _solve_grad),
    Op.INV: Rule(((OUT,),), _inv_grad),
    Op.DET: Rule(((0, OUT),), _det_grad),
    Op.SLOGDET: Rule(((0, OUT),), _slogdet_grad),
    Op.EIGH: Rule(((OUT,),), _eigh_grad),
    Op.SVD: Rule(((OUT,),), _svd_grad),
    Op.QR: Rule(((0, OUT),), _qr_grad),
    Op.PINV: Rule(((0, OUT),), _pinv_grad),
    # layout
    Op.RESHAPE: unary((), lambda s, g: g.reshape(s.shapes[0])),
    Op.PERMUTE: unary((), _permute),
    Op.EXPAND: unary((), lambda s, g: g),
    Op.SLICE: unary((), _slice),
    Op.FLIP: unary((), lambda s, g: g.flip(s.params["dims"])),
    Op.CONTIGUOUS: unary((), lambda s, g: g),
    Op.SLICE_ASSIGN: Rule(((), ()), _slice_assign),
    Op.CAT: Rule((), _cat),  # variadic; no input's gradient reads anything
}


# The ops whose rules are tensor ops alone, whatever the values: no value read, no formula
# picked by the data (``_tracing``), no linear-algebra routine that checks its input.  A
# backward over these only can be traced once and replayed (``graph.backward``);
# tests/test_architecture.py checks that none of their rules reaches a value read.
REPLAYABLE = frozenset(op for op in RULES if op in ELEMENTWISE) | frozenset((
    Op.SUM, Op.PROD, Op.MAX, Op.MIN, Op.CUMSUM, Op.SOFTMAX, Op.LOG_SOFTMAX, Op.MATMUL,
    Op.SORT, Op.TOPK, Op.GATHER, Op.SCATTER, Op.INDEX_SELECT, Op.RESHAPE, Op.PERMUTE,
    Op.EXPAND, Op.SLICE, Op.FLIP, Op.CONTIGUOUS, Op.SLICE_ASSIGN, Op.CAT))


# ops whose first input is complex: where the rule differs from RULES (graph.record)
COMPLEX_RULES = {op: holomorphic(RULES[op]) for op in (
    Op.MUL, Op.DIV, Op.POW, Op.EXP, Op.LOG, Op.SQRT, Op.RSQRT, Op.RECIP, Op.SIN, Op.COS,
    Op.TAN, Op.PROD, Op.CUMPROD, Op.MATMUL, Op.LOG1P, Op.EXPM1, Op.LOG2, Op.LOG10, Op.SQUARE,
    Op.COSH, Op.SINH, Op.ACOS, Op.ASIN, Op.ATAN, Op.ASINH, Op.ATANH)}
COMPLEX_RULES.update({
    # tanh' = 1 - tanh^2 (TANH_GRAD is a real op)
    Op.TANH: unary((OUT,), lambda s, g: g * (1 - s.out.conj() * s.out.conj())),
    # acosh' = 1 / (sqrt(z - 1) sqrt(z + 1)): 1 / sqrt(z^2 - 1) has the other sign where
    # Re z < 0 (the principal roots differ), though the two agree on the real line
    Op.ACOSH: holomorphic(unary((0,), lambda s, g: g / ((s.x[0] - 1).sqrt() * (s.x[0] + 1).sqrt()))),
    Op.SIGN: unary((0,), _complex_sign),
    Op.ANGLE: unary((0,), _complex_angle),
})
