"""Every differentiable op's gradient against central finite differences (DESIGN §4, §7).

``CASES`` is the declarative table: one row per op (or per interesting variant of an op:
dims, broadcasting, zeros, 1-D matmul operands...).  ``test_gradient`` runs each row under both
checkpointing strategies (the ``device`` fixture) through ``gradcheck.check_case``: float64
leaves, ``loss = sum(out * W)`` with fixed random weights, backward, and every marked leaf's
gradient compared with central differences of the same Ember forward run without autodiff.

A few behaviours finite differences cannot see (ties, kinks hit exactly) have their own tests
at the end, with the expected gradient written out.  Decisions they pin down:
- maximum/minimum of equal inputs split the gradient 0.5/0.5 (PyTorch);
- max/min reductions split the gradient evenly among tied extrema (PyTorch's max/amax without
  dim; deterministic, unlike "first index wins");
- relu'(0) = 0, abs'(0) = sign(0) = 0;
- sqrt at exactly 0: gradient 0 where the upstream gradient is 0 (never NaN), +inf otherwise.
"""
import numpy as np
import pytest

import ember
from ember import dispatch
from ember.ir import Op
from .gradcheck import (apart_from, around_bounds, case, check_case, distinct, dividend_of, f32,
                       fixed, gradients, nonzero, normal, off_half, off_integer, plain, positive,
                       uniform, untracked, with_zeros)

F64 = ember.float64


def idx(values):
    """An int64 index tensor (without autodiff: a constant for every op)."""
    return ember.tensor(np.asarray(values), dtype=ember.int64)


def mask(values):
    return ember.tensor(np.asarray(values, dtype=bool), dtype=ember.bool_)


def M34():   # (made when a row runs: on the default device of that run, see gradcheck.py)
    return mask([[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]])


def M4():
    return mask([1, 0, 1, 0])


# --- composed graphs -----------------------------------------------------------------
def _mlp(w1, b1, w2, b2):
    rng = np.random.default_rng(7)
    x = ember.tensor(rng.standard_normal((5, 3)), dtype=F64)
    targets = np.array([0, 2, 1, 2, 0])
    onehot = ember.tensor(np.eye(3)[targets], dtype=F64)
    h = (x @ w1 + b1).tanh()
    logits = h @ w2 + b2
    return -(onehot * logits.log_softmax(-1)).sum(-1).mean()


def _mlp_softmax(w1, b1, w2):
    rng = np.random.default_rng(8)
    x = ember.tensor(rng.standard_normal((4, 3)), dtype=F64)
    onehot = ember.tensor(np.eye(3)[[2, 0, 1, 1]], dtype=F64)
    probs = ((x @ w1 + b1).tanh() @ w2).softmax(-1)
    return -(onehot * probs.log()).sum() / 4


def _fan_out(x):
    a = x * x + x.sin() * x
    return a - x.exp() / (x * x + 1) + x.sum() * x + a.mean(0, keepdim=True) * x


def _deep_chain(x, w):
    ops = [
        lambda y: y.sin(),
        lambda y: y * 1.1 + 0.05,
        lambda y: y.tanh(),
        lambda y: y + x * 0.3,
        lambda y: (y * w).sigmoid(),
        lambda y: y - y.mean(-1, keepdim=True),
        lambda y: y.exp() * 0.5,
        lambda y: y.flip(1),
        lambda y: y.transpose().reshape(3, 4),
        lambda y: y.cos() * y,
    ]
    y = x
    for i in range(50):
        y = ops[i % len(ops)](y)
    return y


def _assigned(x, key, value):
    """``x`` with ``x[key] = value`` applied to a new tensor (``__setitem__`` is recorded)."""
    y = x * 1.0
    y[key] = value
    return y


# --- the table ----------------------------------------------------------------------------
CASES = [
    # cast: float32 inside a float64 graph (float32 rounding: larger step, looser tolerance)
    case("cast_f64_f32_f64", lambda x: (x.cast(ember.float32) * 2.0).cast(F64) * x,
         uniform(3, 4, lo=0.5, hi=1.5), eps=1e-3, rtol=1e-4, atol=1e-5),
    case("cast_f32_leaf_to_f64", lambda x: x.cast(F64).exp(), f32(uniform(3, 4)),
         eps=1e-2, rtol=2e-3, atol=1e-4),
    case("cast_f32_leaf_in_f64_op", lambda x, y: x * y, f32(uniform(3, 4)), normal(3, 4),
         eps=1e-2, rtol=2e-3, atol=1e-4),
    # unary elementwise
    case("neg", lambda x: -x, normal(3, 4)),
    case("abs", lambda x: x.abs(), nonzero(3, 4)),
    case("sign", lambda x: x.sign(), nonzero(3, 4)),
    case("exp", lambda x: x.exp(), uniform(3, 4, lo=-2, hi=2)),
    case("log", lambda x: x.log(), positive(3, 4)),
    case("log1p", lambda x: x.log1p(), uniform(3, 4, lo=-0.6, hi=3)),
    case("sqrt", lambda x: x.sqrt(), positive(3, 4)),
    case("rsqrt", lambda x: x.rsqrt(), positive(3, 4)),
    case("recip", lambda x: x.recip(), nonzero(3, 4, lo=0.4)),
    case("sin", lambda x: x.sin(), normal(3, 4, scale=2)),
    case("cos", lambda x: x.cos(), normal(3, 4, scale=2)),
    case("tan", lambda x: x.tan(), uniform(3, 4, lo=-1.2, hi=1.2)),
    case("tanh", lambda x: x.tanh(), normal(3, 4, scale=1.5)),
    case("sigmoid", lambda x: x.sigmoid(), normal(3, 4, scale=2)),
    # the backward formulas the tanh and sigmoid rules use are ops too (second derivatives)
    case("tanh_grad", lambda g, y: dispatch.elementwise(Op.TANH_GRAD, g, y), normal(3, 4),
         uniform(3, 4, lo=-1, hi=1)),
    case("sigmoid_grad", lambda g, y: dispatch.elementwise(Op.SIGMOID_GRAD, g, y), normal(3, 4),
         uniform(3, 4, lo=0, hi=1)),
    case("erf", lambda x: x.erf(), normal(3, 4)),
    case("relu", lambda x: x.relu(), nonzero(3, 4)),
    case("gelu", lambda x: x.gelu(), normal(3, 4, scale=2)),
    case("silu", lambda x: x.silu(), normal(3, 4, scale=2)),
    case("acos", lambda x: x.acos(), uniform(3, 4, lo=-0.9, hi=0.9)),
    case("asin", lambda x: x.asin(), uniform(3, 4, lo=-0.9, hi=0.9)),
    case("atan", lambda x: x.atan(), normal(3, 4, scale=2)),
    case("acosh", lambda x: x.acosh(), uniform(3, 4, lo=1.2, hi=4)),
    case("asinh", lambda x: x.asinh(), normal(3, 4, scale=2)),
    case("atanh", lambda x: x.atanh(), uniform(3, 4, lo=-0.9, hi=0.9)),
    case("cosh", lambda x: x.cosh(), normal(3, 4)),
    case("sinh", lambda x: x.sinh(), normal(3, 4)),
    case("expm1", lambda x: x.expm1(), uniform(3, 4, lo=-2, hi=2)),
    case("log2", lambda x: x.log2(), positive(3, 4)),
    case("log10", lambda x: x.log10(), positive(3, 4)),
    case("square", lambda x: x.square(), normal(3, 4)),
    case("square_function", lambda x: ember.square(x) + ember.exp(x), normal(3, 4)),
    case("atan2", lambda a, b: a.atan2(b), normal(3, 4), nonzero(3, 4)),
    case("atan2_bcast", lambda a, b: ember.atan2(a, b), normal(3, 1), nonzero(1, 4)),
    case("hypot", lambda a, b: a.hypot(b), nonzero(3, 4), normal(3, 4)),
    case("copysign", lambda a, b: a.copysign(b), nonzero(3, 4), nonzero(3, 4)),
    case("copysign_scalar", lambda a: a.copysign(-1.0), nonzero(3, 4)),
    case("logaddexp", lambda a, b: a.logaddexp(b), normal(3, 4, scale=3), normal(3, 4, scale=3)),
    case("nextafter", lambda a, b: a.nextafter(b), normal(3, 4), normal(3, 4)),
    case("round", lambda x: x.round(), off_half(3, 4)),
    case("floor", lambda x: x.floor(), off_integer(3, 4)),
    case("ceil", lambda x: x.ceil(), off_integer(3, 4)),
    case("trunc", lambda x: x.trunc(), off_integer(3, 4)),
    case("round_times_x", lambda x: x.round() * x + x.floor(), off_half(3, 4)),
    # binary elementwise, same shapes
    case("add", lambda a, b: a + b, normal(3, 4), normal(3, 4)),
    case("sub", lambda a, b: a - b, normal(3, 4), normal(3, 4)),
    case("mul", lambda a, b: a * b, normal(3, 4), normal(3, 4)),
    case("div", lambda a, b: a / b, normal(3, 4), nonzero(3, 4, lo=0.5)),
    case("add_scalar", lambda a: 2.5 + a - 1.0, normal(3, 4)),
    case("mul_scalar", lambda a: 3.0 * a * -0.5, normal(3, 4)),
    case("rdiv_scalar", lambda a: 2.0 / a, nonzero(3, 4, lo=0.5)),
    case("div_scalar", lambda a: a / 4.0, normal(3, 4)),
    case("rsub_scalar", lambda a: 1.0 - a, normal(3, 4)),
    case("floordiv", lambda b, a: a // b, nonzero(3, 4, lo=0.5), dividend_of(0)),
    case("floordiv_scalar", lambda a: a // 0.7, off_integer(3, 4)),
    case("mod", lambda b, a: a % b, nonzero(3, 4, lo=0.5), dividend_of(0)),
    case("mod_scalar", lambda a: a % 1.0, off_integer(3, 4)),
    case("mod_negative_divisor_scalar", lambda a: a % -1.0, off_integer(3, 4)),
    case("rmod_scalar", lambda b: 1.0 % b, fixed([[0.3, 0.45, 0.7, 1.6], [-0.3, -0.45, -0.7, -1.6],
                                                  [2.5, -2.5, 0.27, -0.38]])),
    case("pow_tensor_tensor", lambda a, b: a ** b, positive(3, 4, lo=0.5, hi=2), normal(3, 4)),
    case("pow_tensor_int_scalar", lambda a: a ** 3, normal(3, 4)),
    case("pow_tensor_float_scalar", lambda a: a.pow(2.5), positive(3, 4)),
    case("pow_tensor_negative_scalar", lambda a: a ** -1.5, positive(3, 4, lo=0.5)),
    case("pow_square_with_zero", lambda a: a ** 2, with_zeros(normal(3, 4), (0, 0), (2, 3))),
    case("pow_one_with_zero", lambda a: a ** 1, with_zeros(normal(3, 4), (1, 1))),
    case("pow_zero_exponent_with_zero", lambda a: a ** 0 + a, with_zeros(normal(3, 4), (1, 2))),
    case("pow_scalar_tensor", lambda b: 2.0 ** b, normal(3, 4)),
    case("pow_e_scalar_tensor", lambda b: 0.5 ** b, normal(3, 4)),
    case("maximum", lambda a, b: a.maximum(b), normal(3, 4), apart_from(0)),
    case("minimum", lambda a, b: a.minimum(b), normal(3, 4), apart_from(0)),
    case("maximum_scalar", lambda a: a.maximum(0.25), nonzero(3, 4, lo=0.5)),
    case("clamp_min", lambda x: x.clamp(min=-0.5), around_bounds(-0.5, None, (3, 4))),
    case("clamp_max", lambda x: x.clamp(max=0.4), around_bounds(None, 0.4, (3, 4))),
    case("clamp_both", lambda x: x.clamp(-0.5, 0.4), around_bounds(-0.5, 0.4, (3, 4))),
    case("clamp_tensor_bounds", lambda lo, hi, x: x.clamp(lo, hi),
         uniform(3, 4, lo=-1, hi=0), uniform(3, 4, lo=0.3, hi=1), around_bounds(0, 1, (3, 4))),
    case("clamp_tensor_min_broadcast", lambda lo, x: x.clamp(min=lo),
         uniform(4, lo=-1, hi=0), around_bounds(0, None, (3, 4))),
    case("clamp_tensor_max_only", lambda hi, x: x.clamp(max=hi),
         uniform(3, 1, lo=-0.5, hi=0.5), around_bounds(None, 0, (3, 4))),
    # crossed bounds (lo > hi): the result is hi everywhere (numpy.clip, torch.clamp); each output element
    # depends on one bound only, so only that bound may take its gradient
    case("clamp_crossed_tensor_bounds", lambda lo, hi, x: x.clamp(lo, hi) * 1.0,
         uniform(2, 3, lo=0.5, hi=1.0), uniform(2, 3, lo=-1.0, hi=-0.5), normal(2, 3)),
    # selection
    case("where", lambda a, b: ember.where(M34(), a, b), normal(3, 4), normal(3, 4)),
    case("where_broadcast", lambda a, b: ember.where(M34(), a, b), normal(3, 1), normal()),
    case("where_scalar_branch", lambda a: ember.where(M34(), a, 0.5) + ember.where(M34(), 1.0, a),
         normal(3, 4)),
    case("mask_where", lambda x, v: x.mask_where(M34(), v), normal(3, 4), normal(3, 4)),
    case("mask_where_broadcast_values", lambda x, v: x.mask_where(M34(), v), normal(3, 4), normal(4)),
    case("mask_where_broadcast_mask", lambda x, v: x.mask_where(M4(), v), normal(3, 4), normal(3, 4)),
    case("mask_fill", lambda x: x.mask_fill(M34(), 0.5), normal(3, 4)),
    # broadcasting binary ops: un-broadcasting in the graph walk
    case("add_bcast_3x1_1x4", lambda a, b: a + b, normal(3, 1), normal(1, 4)),
    case("sub_bcast_4_2x3x4", lambda a, b: a - b, normal(4), normal(2, 3, 4)),
    case("sub_bcast_2x3x4_4", lambda a, b: a - b, normal(2, 3, 4), normal(4)),
    case("mul_bcast_3x1_1x4", lambda a, b: a * b, normal(3, 1), normal(1, 4)),
    case("mul_bcast_4_2x3x4", lambda a, b: a * b, normal(4), normal(2, 3, 4)),
    case("mul_bcast_scalar0d", lambda s, b: s * b, normal(), normal(3, 4)),
    case("div_bcast_3x1_1x4", lambda a, b: a / b, normal(3, 1), nonzero(1, 4, lo=0.5)),
    case("div_bcast_scalar0d", lambda a, s: a / s, normal(2, 3), nonzero(lo=0.5)),
    case("div_bcast_4_2x3x4", lambda a, b: a / b, normal(4), nonzero(2, 3, 4, lo=0.5)),
    case("pow_bcast_3x1_1x4", lambda a, b: a ** b, positive(3, 1, lo=0.5, hi=2), normal(1, 4)),
    case("maximum_bcast", lambda a, b: a.maximum(b), distinct(3, 1), distinct(1, 4)),
    case("minimum_bcast_scalar0d", lambda a, s: a.minimum(s), fixed([[0.1, 0.9], [-0.5, 1.7]]),
         fixed(0.55)),
    case("add_bcast_0d_0d", lambda a, b: a * b + a, normal(), normal()),
    case("add_bcast_middle_dim", lambda a, b: a + b, normal(2, 1, 4), normal(2, 3, 1)),
    # reductions
    case("sum_all", lambda x: x.sum(), normal(4, 5)),
    case("sum_dim0", lambda x: x.sum(0), normal(4, 5)),
    case("sum_dim1_keepdim", lambda x: x.sum(1, keepdim=True), normal(4, 5)),
    case("sum_dims_0_2", lambda x: x.sum((0, 2)), normal(2, 3, 4)),
    case("sum_0d", lambda x: x.sum() * 2, normal()),
    case("mean_all", lambda x: x.mean(), normal(4, 5)),
    case("mean_dim1_keepdim", lambda x: x.mean(1, keepdim=True), normal(4, 5)),
    case("mean_dims_neg", lambda x: x.mean((-1, -2)), normal(2, 3, 4)),
    case("prod_all", lambda x: x.prod(), uniform(3, 4, lo=0.5, hi=1.5)),
    case("prod_dim1", lambda x: x.prod(1), uniform(4, 5, lo=-1.5, hi=1.5)),
    case("prod_dim0_keepdim", lambda x: x.prod(0, keepdim=True), uniform(4, 5, lo=-1.5, hi=1.5)),
    case("prod_dims_0_2", lambda x: x.prod((0, 2)), uniform(2, 3, 2, lo=0.5, hi=1.5)),
    case("prod_all_one_zero", lambda x: x.prod(), with_zeros(uniform(3, 4, lo=0.5, hi=1.5), (1, 2))),
    case("prod_all_two_zeros", lambda x: x.prod(),
         with_zeros(uniform(3, 4, lo=0.5, hi=1.5), (0, 1), (2, 3))),
    case("prod_dim1_zeros", lambda x: x.prod(1),   # row 0: one zero, row 2: two zeros, row 3: none
         with_zeros(uniform(4, 5, lo=-1.5, hi=1.5), (0, 2), (2, 0), (2, 4))),
    case("prod_dim0_zeros", lambda x: x.prod(0),
         with_zeros(uniform(4, 3, lo=-1.5, hi=1.5), (0, 0), (3, 0), (1, 2))),
    case("prod_0d", lambda x: x.prod(), normal()),
    case("sum_empty", lambda x: x.sum(0) + 1, normal(0, 3)),
    case("prod_empty_dim", lambda x: x.prod(1), normal(3, 0)),
    case("max_all", lambda x: x.max(), distinct(4, 5)),
    case("min_all", lambda x: x.min(), distinct(4, 5)),
    case("max_dim0", lambda x: x.max(0), distinct(4, 5)),
    case("max_dim1_keepdim", lambda x: x.max(1, keepdim=True), distinct(4, 5)),
    case("min_dim1", lambda x: x.min(1), distinct(4, 5)),
    case("min_dim0_keepdim", lambda x: x.min(0, keepdim=True), distinct(4, 5)),
    case("max_dims_0_2", lambda x: x.max((0, 2)), distinct(2, 3, 4)),
    case("var_all", lambda x: x.var(), normal(4, 5)),
    case("var_dim1", lambda x: x.var(1), normal(4, 5)),
    case("var_dim0_keepdim_correction0", lambda x: x.var(0, keepdim=True, correction=0), normal(4, 5)),
    case("std_all", lambda x: x.std(), normal(4, 5)),
    case("std_dim0", lambda x: x.std(0), normal(4, 5)),
    case("std_dim1_keepdim", lambda x: x.std(1, keepdim=True), normal(4, 5)),
    case("softmax_last", lambda x: x.softmax(-1), normal(3, 5, scale=2)),
    case("softmax_dim0", lambda x: ember.softmax(x, 0), normal(3, 5, scale=2)),
    case("log_softmax_last", lambda x: x.log_softmax(-1), normal(3, 5, scale=2)),
    case("log_softmax_dim0", lambda x: ember.log_softmax(x, 0), normal(3, 5, scale=2)),
    case("softmax_3d_middle", lambda x: x.softmax(1), normal(2, 3, 4)),
    # scans
    case("cumsum_dim0", lambda x: x.cumsum(0), normal(4, 5)),
    case("cumsum_dim1", lambda x: x.cumsum(1), normal(4, 5)),
    case("cumsum_3d_middle", lambda x: x.cumsum(1), normal(2, 3, 4)),
    case("cumprod_dim0", lambda x: x.cumprod(0), uniform(4, 5, lo=-1.5, hi=1.5)),
    case("cumprod_dim1", lambda x: x.cumprod(1), uniform(4, 5, lo=-1.5, hi=1.5)),
    case("cumprod_3d_middle", lambda x: x.cumprod(1), uniform(2, 3, 4, lo=0.5, hi=1.5)),
    case("cumprod_dim1_zeros", lambda x: x.cumprod(1),   # one zero, two zeros, zero first, zero last
         with_zeros(uniform(4, 5, lo=-1.5, hi=1.5), (0, 2), (1, 1), (1, 3), (2, 0), (3, 4))),
    case("cumprod_dim0_zeros", lambda x: x.cumprod(0),
         with_zeros(uniform(4, 3, lo=-1.5, hi=1.5), (1, 0), (0, 1), (2, 1))),
    case("cumprod_1d_zero", lambda x: x.cumprod(0), with_zeros(uniform(5, lo=0.5, hi=1.5), (2,))),
    case("cumprod_3d_zeros", lambda x: x.cumprod(-1),
         with_zeros(uniform(2, 2, 3, lo=0.5, hi=1.5), (0, 1, 1), (1, 0, 0), (1, 0, 2))),
    # matmul
    case("matmul_2d", lambda a, b: a @ b, normal(3, 4), normal(4, 2)),
    case("matmul_batched", lambda a, b: a.matmul(b), normal(2, 3, 4), normal(2, 4, 2)),
    case("matmul_batched_broadcast", lambda a, b: a @ b, normal(2, 1, 3, 4), normal(3, 4, 2)),
    case("matmul_batched_2d_rhs", lambda a, b: a @ b, normal(2, 3, 4), normal(4, 5)),
    case("matmul_2d_batched_rhs", lambda a, b: a @ b, normal(3, 4), normal(2, 4, 2)),
    case("matmul_1d_2d", lambda a, b: a @ b, normal(4), normal(4, 3)),
    case("matmul_2d_1d", lambda a, b: a @ b, normal(3, 4), normal(4)),
    case("matmul_1d_1d", lambda a, b: a @ b, normal(4), normal(4)),
    case("matmul_batched_1d", lambda a, b: a @ b, normal(2, 3, 4), normal(4)),
    case("matmul_1d_batched", lambda a, b: a @ b, normal(4), normal(2, 4, 3)),
    case("matmul_one_tracked", lambda a, b: a @ b, plain(normal(3, 4)), normal(4, 2)),
    case("matmul_transposed_operand", lambda a, b: a.T @ b, normal(4, 3), normal(4, 2)),
    # sorting
    case("sort_last", lambda x: x.sort(), distinct(3, 5)),
    case("sort_dim0", lambda x: x.sort(0), distinct(4, 3)),
    case("sort_descending", lambda x: x.sort(-1, descending=True), distinct(3, 5)),
    case("sort_with_indices_values", lambda x: x.sort_with_indices(1)[0] * x, distinct(3, 5)),
    case("sort_1d", lambda x: x.sort(descending=True), distinct(6)),
    case("topk_last", lambda x: x.topk(2), distinct(3, 5)),
    case("topk_dim0", lambda x: x.topk(3, dim=0), distinct(4, 3)),
    case("topk_all", lambda x: x.topk(5), distinct(2, 5)),
    case("topk_smallest", lambda x: x.topk_with_indices(2, dim=1, largest=False)[0], distinct(3, 5)),
    # indexing
    case("gather_dim1", lambda x: x.gather(1, idx([[0, 2, 2], [3, 3, 3], [1, 0, 3]])), normal(3, 4)),
    case("gather_dim0", lambda x: x.gather(0, idx([[2, 0, 1, 1], [0, 0, 2, 1]])), normal(3, 4)),
    case("scatter_assign", lambda x, v: x.scatter(1, idx([[0, 2], [3, 1], [2, 0]]), v),
         normal(3, 4), normal(3, 2)),
    case("scatter_assign_dim0", lambda x, v: x.scatter(0, idx([[2, 0, 1, 0]]), v),
         normal(3, 4), normal(1, 4)),
    case("scatter_assign_scalar", lambda x: x.scatter(1, idx([[0], [3], [2]]), 0.5), normal(3, 4)),
    case("scatter_add", lambda x, v: x.scatter(1, idx([[0, 0, 2], [3, 1, 3], [2, 2, 2]]), v, reduce="add"),
         normal(3, 4), normal(3, 3)),
    case("scatter_add_dim0", lambda x, v: x.scatter(0, idx([[1, 1, 0, 2], [1, 0, 0, 2]]), v, reduce="add"),
         normal(3, 4), normal(2, 4)),
    case("scatter_values_only", lambda x, v: x.scatter(1, idx([[1], [0], [3]]), v),
         plain(normal(3, 4)), normal(3, 1)),
    case("index_select_dim0", lambda x: x.index_select(0, idx([2, 0, 2, 1])), normal(3, 4)),
    case("index_select_dim1", lambda x: x.index_select(1, idx([3, 3, 0])), normal(3, 4)),
    case("getitem_int_tensor", lambda x: x[idx([1, 1, 0])], normal(3, 4)),
    case("getitem_bool_mask", lambda x: x[M34()], normal(3, 4)),
    # layout
    case("reshape", lambda x: x.reshape(2, 6), normal(3, 4)),
    case("reshape_minus1", lambda x: x.reshape(-1, 2) * x.reshape(6, 2), normal(3, 4)),
    case("view", lambda x: x.view(4, 3), normal(3, 4)),
    case("flatten", lambda x: x.flatten(), normal(2, 3, 2)),
    case("flatten_from1", lambda x: x.flatten(1), normal(2, 3, 2)),
    case("squeeze_all", lambda x: x.squeeze(), normal(3, 1, 4, 1)),
    case("squeeze_dim", lambda x: x.squeeze(1), normal(3, 1, 4, 1)),
    case("unsqueeze_0", lambda x: x.unsqueeze(0) * x.unsqueeze(1), normal(3, 4)),
    case("unsqueeze_last", lambda x: x.unsqueeze(-1), normal(3, 4)),
    case("permute", lambda x: x.permute(2, 0, 1), normal(2, 3, 4)),
    case("permute_list", lambda x: x.permute([1, 2, 0]), normal(2, 3, 4)),
    case("transpose_default", lambda x: x.transpose(), normal(2, 3, 4)),
    case("transpose_0_2", lambda x: x.transpose(0, 2), normal(2, 3, 4)),
    case("swap_dims", lambda x: x.swap_dims(0, 1), normal(3, 4)),
    case("T", lambda x: x.T, normal(3, 4)),
    case("expand", lambda x: x.expand(3, 4), normal(3, 1)),
    case("expand_new_dims", lambda x: x.expand(2, 3, 4), normal(4)),
    case("expand_minus1", lambda x: x.expand(2, -1, 4), normal(3, 1)),
    case("broadcast_to", lambda x: x.broadcast_to(2, 3), normal(1, 3)),
    case("flip_dim0", lambda x: x.flip(0), normal(3, 4)),
    case("flip_dims_01", lambda x: x.flip((0, 1)), normal(3, 4)),
    case("flip_last_3d", lambda x: x.flip(-1), normal(2, 3, 4)),
    case("contiguous_of_permute", lambda x: x.permute(1, 0).contiguous(), normal(3, 4)),
    case("clone", lambda x: x.clone() * x, normal(3, 4)),
    case("getitem_int", lambda x: x[1], normal(3, 4)),
    case("getitem_negative_ints", lambda x: x[-1, -2], normal(3, 4)),
    case("getitem_slice", lambda x: x[1:3], normal(4, 5)),
    case("getitem_step", lambda x: x[::2, 1::2], normal(4, 5)),
    case("getitem_negative_step", lambda x: x[::-1], normal(4, 5)),
    case("getitem_negative_step_bounds", lambda x: x[3:0:-2, ::-3], normal(4, 5)),
    case("getitem_none_ellipsis", lambda x: x[None, 1:, ...], normal(4, 5)),
    case("getitem_ellipsis_int", lambda x: x[..., 1], normal(2, 3, 4)),
    case("getitem_mixed", lambda x: x[:, None, ::-2], normal(4, 5)),
    case("getitem_overlapping", lambda x: x[1:] * x[:-1], normal(5, 3)),
    case("slice_assign", lambda x, v: x.slice_assign((slice(1, 3), slice(None, None, 2)), v),
         normal(4, 5), normal(2, 3)),
    case("slice_assign_broadcast_values", lambda x, v: x.slice_assign((slice(1, 3),), v),
         normal(4, 5), normal(5)),
    case("slice_assign_0d_values", lambda x, v: x.slice_assign((slice(None), 2), v),
         normal(4, 5), normal()),
    case("slice_assign_scalar", lambda x: x.slice_assign((slice(0, 2), slice(1, 3)), 0.5), normal(4, 5)),
    case("slice_assign_negative_step", lambda x, v: x.slice_assign((slice(None, None, -2),), v),
         normal(4, 5), normal(2, 5)),
    case("slice_assign_int", lambda x, v: x.slice_assign(1, v), normal(4, 5), normal(5)),
    case("slice_assign_all_ints", lambda x, v: x.slice_assign((2, -1), v), normal(4, 5), normal()),
    case("slice_assign_values_only", lambda x, v: x.slice_assign((slice(1, 3),), v),
         untracked(normal(4, 5)), normal(2, 5)),
    case("narrow", lambda x: x.narrow(1, 1, 3), normal(4, 5)),
    case("narrow_negative_start", lambda x: x.narrow(0, -2, 2), normal(4, 5)),
    case("split_int", lambda x: x.split(2, dim=1), normal(3, 5)),
    case("split_sections", lambda x: x.split([1, 3], dim=0), normal(4, 3)),
    case("split_partial_use", lambda x: x.split(2, dim=1)[1] * 2, normal(3, 5)),
    case("chunk", lambda x: x.chunk(3, dim=0), normal(5, 2)),
    case("cat_dim0", lambda a, b: ember.cat([a, b], 0), normal(2, 3), normal(3, 3)),
    case("cat_dim1", lambda a, b, c: ember.cat([a, b, c], 1), normal(2, 1), normal(2, 3), normal(2, 2)),
    case("cat_untracked_inputs", lambda a, p, u, b: ember.cat([a, p, u, b], 0),
         normal(1, 3), plain(normal(2, 3)), untracked(normal(1, 3)), normal(2, 3)),
    case("cat_same_leaf_twice", lambda a: ember.cat([a, a * 2], -1), normal(2, 3)),
    case("cat_mixed_dtype", lambda a, b: ember.cat([a, b], 0), f32(normal(2, 3)), normal(1, 3),
         eps=1e-2, rtol=1e-4, atol=1e-5),
    case("stack_dim0", lambda a, b: ember.stack([a, b]), normal(2, 3), normal(2, 3)),
    case("stack_dim_last", lambda a, b, c: ember.stack([a, b, c], -1), normal(2, 3),
         plain(normal(2, 3)), normal(2, 3)),
    case("stack_dim1", lambda a, b: ember.stack([a, b], 1), normal(3), normal(3)),
    case("repeat", lambda x: x.repeat(2, 3), normal(2, 3)),
    case("repeat_new_dims", lambda x: x.repeat(2, 1, 2), normal(2, 3)),
    case("tril", lambda x: x.tril(), normal(4, 5)),
    case("tril_negative_diag", lambda x: x.tril(-1), normal(4, 5)),
    case("triu", lambda x: x.triu(), normal(4, 5)),
    case("triu_positive_diag", lambda x: x.triu(1), normal(2, 3, 4)),
    # vectorised indexing and assignment (engine/indexing.py: slice, permute, index_select,
    # where, scatter)
    case("getitem_int_arrays_2d", lambda x: x[idx([[0, 2], [1, 1]]), idx([3, 0])], normal(3, 4)),
    case("getitem_int_array_dim1", lambda x: x[:, idx([3, -1, 0])], normal(3, 4)),
    case("getitem_leading_mask", lambda x: x[mask([True, False, True])], normal(3, 4)),
    case("getitem_arrays_apart", lambda x: x[idx([1, 0]), :, idx([2, 2])], normal(2, 3, 4)),
    case("setitem_slice", lambda x, v: _assigned(x, (slice(1, 3), slice(None, None, 2)), v),
         normal(4, 5), normal(2, 3)),
    case("setitem_mask_scalar", lambda x: _assigned(x, M34(), 0.5), normal(3, 4)),
    case("setitem_mask_values", lambda x, v: _assigned(x, M34(), v), normal(3, 4), normal(6)),
    case("setitem_int_arrays", lambda x, v: _assigned(x, (idx([0, 2]), idx([1, 3])), v),
         normal(3, 4), normal(2)),
    case("setitem_leading_mask_rows", lambda x, v: _assigned(x, mask([False, True, True]), v),
         normal(3, 4), normal(4)),
    # composed layout functions (engine/manipulation.py)
    case("roll", lambda x: ember.roll(x, (1, -2), (0, 1)), normal(3, 4)),
    case("roll_flat", lambda x: ember.roll(x, 5), normal(3, 4)),
    case("movedim", lambda x: ember.movedim(x, 0, -1), normal(2, 3, 4)),
    case("tile", lambda x: ember.tile(x, (2, 1, 3)), normal(2, 3)),
    case("repeat_interleave", lambda x: ember.repeat_interleave(x, idx([2, 0, 1]), 0),
         normal(3, 4)),
    case("diff", lambda x: ember.diff(x, 2, 1), normal(3, 5)),
    case("diff_prepend", lambda x, p: ember.diff(x, 1, 0, prepend=p), normal(3, 4), normal(1, 4)),
    case("take_along_dim", lambda x: ember.take_along_dim(x, idx([[0, 2], [1, 1], [3, 0]]), 1),
         normal(3, 4)),
    case("take_along_dim_broadcast", lambda x: ember.take_along_dim(x, idx([[2, 0, 1, 2]]), 0),
         normal(3, 4)),
    case("unique_values", lambda x: ember.unique(x.round()) * 1.0 + x.sum(), off_half(4, 3)),
    case("meshgrid", lambda a, b: ember.meshgrid(a, b, indexing="xy")[0] * ember.meshgrid(a, b)[1].T,
         normal(3), normal(4)),
    # composed graphs
    case("mlp_tanh_log_softmax_xent", _mlp, normal(3, 4, scale=0.5), normal(4, scale=0.1),
         normal(4, 3, scale=0.5), normal(3, scale=0.1)),
    case("mlp_tanh_softmax_xent", _mlp_softmax, normal(3, 4, scale=0.5), normal(4, scale=0.1),
         normal(4, 3, scale=0.5)),
    case("fan_out", _fan_out, normal(3, 4)),
    case("same_leaf_both_operands", lambda x: x * x + x / (x * x + 1) - x @ x.T, normal(3, 3)),
    case("deep_chain_50", _deep_chain, normal(3, 4), uniform(3, 4, lo=0.5, hi=1.5),
         rtol=1e-5, atol=1e-7),
]


def _unique_names(cases):
    names = [c.name for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"duplicate case names: {dup}"
    return cases


def _table(cases):
    """The rows this process checks: all of them on the CPU; on CUDA (the simulator tier, a
    second or so per row) the first row of each op (rows are named ``<op>`` or
    ``<op>_<variant>``): every rule's kernels run on the device, and the rules themselves
    are the same tensor code on every device."""
    cases = _unique_names(cases)
    from checks import DEVICE
    if DEVICE.type == "cpu":
        return cases
    seen, out = set(), []
    for c in cases:
        op = c.name.split("_")[0]
        if op not in seen:
            seen.add(op)
            out.append(c)
    return out


@pytest.mark.devices
@pytest.mark.parametrize("case", _table(CASES), ids=lambda c: c.name)
def test_gradient(case, device, unfused):
    check_case(case, device)


# rows whose forward and backward are chains of elementwise ops (with reductions, broadcasting,
# saved values and BALANCED recompute in them): fused, their gradients are the unfused ones
FUSION_ROWS = ("tanh", "sigmoid", "gelu", "silu", "pow_tensor_tensor", "div", "maximum",
               "clamp_tensor_bounds", "where", "softmax_last", "sum_dims_0_2",
               "mlp_tanh_log_softmax_xent")


@pytest.mark.parametrize("name", FUSION_ROWS)
def test_gradient_fused_equals_unfused(name, device, monkeypatch):
    monkeypatch.setattr(ember.fusion, "MIN_SIZE", ember.fusion.TRACED_MIN_SIZE)  # (tiny cases)
    c = next(c for c in CASES if c.name == name)
    previous = ember.fusion.set_enabled(False)
    try:
        want = gradients(c, device)
        ember.fusion.set_enabled(True)
        got = gradients(c, device)
    finally:
        ember.fusion.set_enabled(previous)
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_array_equal(g, w, err_msg=f"{name}: fused gradient differs")


# --- what finite differences cannot check ------------------------------------------------
def _grad(leaf_t, loss):
    g = leaf_t.grad(loss.backward())
    assert g is not None
    return g.numpy()


def test_maximum_minimum_ties_split_evenly(leaf):
    for name in ("maximum", "minimum"):
        a = leaf([1.0, 2.0, 3.0, -1.0])
        b = leaf([1.0, 0.0, 3.0, 5.0])
        grads = (getattr(a, name)(b) * ember.tensor([1.0, 2.0, 4.0, 8.0], dtype=F64)).sum().backward()
        if name == "maximum":
            want_a, want_b = [0.5, 2.0, 2.0, 0.0], [0.5, 0.0, 2.0, 8.0]
        else:
            want_a, want_b = [0.5, 0.0, 2.0, 8.0], [0.5, 2.0, 2.0, 0.0]
        np.testing.assert_array_equal(a.grad(grads).numpy(), want_a, err_msg=name)
        np.testing.assert_array_equal(b.grad(grads).numpy(), want_b, err_msg=name)


def test_maximum_of_a_tensor_with_itself(leaf):
    x = leaf([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(_grad(x, x.maximum(x).sum()), [1.0, 1.0, 1.0])
    x = leaf([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(_grad(x, x.minimum(x).sum()), [1.0, 1.0, 1.0])


def test_max_min_whole_ties_split_evenly(leaf):
    x = leaf([[1.0, 3.0, 0.0], [3.0, 2.0, 3.0]])
    np.testing.assert_allclose(_grad(x, x.max() * 3), [[0, 1, 0], [1, 0, 1]], rtol=1e-15)
    x = leaf([[1.0, 0.0], [0.0, 2.0]])
    np.testing.assert_allclose(_grad(x, x.min()), [[0, 0.5], [0.5, 0]], rtol=1e-15)


def test_max_min_per_dim_ties_split_evenly(leaf):
    x = leaf([[3.0, 3.0, 1.0], [2.0, 0.0, 2.0], [5.0, 5.0, 5.0]])
    w = ember.tensor([1.0, 2.0, 3.0], dtype=F64)
    np.testing.assert_allclose(_grad(x, (x.max(1) * w).sum()),
                               [[0.5, 0.5, 0], [1, 0, 1], [1, 1, 1]], rtol=1e-15)
    x = leaf([[3.0, 3.0, 1.0], [2.0, 0.0, 2.0], [5.0, 5.0, 5.0]])
    np.testing.assert_allclose(_grad(x, (x.min(0, keepdim=True) * w).sum()),
                               [[0, 0, 3], [1, 2, 0], [0, 0, 0]], rtol=1e-15)


def test_sqrt_at_zero(leaf):
    # zero upstream gradient at the zero: gradient 0, not 0 * inf = NaN
    x = leaf([0.0, 1.0, 4.0])
    w = ember.tensor([0.0, 1.0, 1.0], dtype=F64)
    np.testing.assert_array_equal(_grad(x, (x.sqrt() * w).sum()), [0.0, 0.5, 0.25])
    # the zero upstream gradient coming from a later op (relu of a negative value)
    x = leaf([0.0, 4.0])
    np.testing.assert_array_equal(_grad(x, (x.sqrt() - 1).relu().sum()), [0.0, 0.25])
    # non-zero upstream gradient at the zero: the slope, +inf
    x = leaf([0.0, 1.0])
    np.testing.assert_array_equal(_grad(x, x.sqrt().sum()), [np.inf, 0.5])


def test_relu_and_abs_at_zero(leaf):
    x = leaf([0.0, -1.0, 2.0])
    np.testing.assert_array_equal(_grad(x, x.relu().sum()), [0.0, 0.0, 1.0])
    x = leaf([0.0, -1.0, 2.0])
    np.testing.assert_array_equal(_grad(x, x.abs().sum()), [0.0, -1.0, 1.0])


def test_zero_gradient_ops_give_zeros_not_none(leaf):
    for name in ("sign", "round", "floor", "ceil", "trunc"):
        x = leaf([-1.3, 0.2, 2.7])
        g = _grad(x, getattr(x, name)().sum())
        np.testing.assert_array_equal(g, [0.0, 0.0, 0.0], err_msg=name)


def test_untracked_cat_inputs_get_no_gradient(leaf, device):
    a = leaf([[1.0, 2.0]])
    p = ember.tensor([[3.0, 4.0]], dtype=F64)                 # without autodiff
    u = ember.tensor([[5.0, 6.0]], dtype=F64, device=device)  # autodiff, not marked
    grads = (ember.cat([p, a, u], 0) * 2).sum().backward()
    np.testing.assert_array_equal(a.grad(grads).numpy(), [[2.0, 2.0]])
    assert p.grad(grads) is None and u.grad(grads) is None


def test_detach_blocks_the_gradient(leaf):
    x = leaf([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(_grad(x, (x * x.detach()).sum()), [1.0, -2.0, 3.0])


STRATEGY_ROWS = ["mlp_tanh_log_softmax_xent", "deep_chain_50", "cumprod_dim1_zeros",
                 "prod_dim1_zeros", "matmul_batched_broadcast", "softmax_last", "std_dim0",
                 "sort_descending", "slice_assign", "cat_untracked_inputs"]


@pytest.mark.parametrize("name", STRATEGY_ROWS)
def test_strategies_give_identical_gradients(name, device):
    """DESIGN §4 item 11: every gradient is identical (bit for bit) under NONE and BALANCED."""
    c = next(c for c in CASES if c.name == name)
    none = ember.Device.cpu().gradient_checkpointing(ember.CheckpointingStrategy.NONE)
    got, want = gradients(c, device), gradients(c, none)
    for g, w in zip(got, want):
        if w is None:
            assert g is None
        else:
            np.testing.assert_array_equal(g, w)


def test_0d_leaf_gradient_is_0d(leaf):
    s = leaf(np.float64(1.5))
    assert s.shape == ()
    x = leaf([1.0, 2.0])
    grads = (s * x).sum().backward()
    assert s.grad(grads).shape == ()
    np.testing.assert_array_equal(s.grad(grads).numpy(), 3.0)
