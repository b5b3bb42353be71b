"""Complex tensors on CUDA (simulator or GPU) agree with the CPU backend.

The elementwise table ``op_table.COMPLEX_ROWS`` runs through the CUDA kernels (the same
scalar definitions, ``cmath`` as device functions), then reductions, scans, matmul (the
tiled kernel with complex shared tiles), casts, indexing and fusion.
"""
import numpy as np
import pytest

import ember
from cuda_helpers import to_cuda
from op_table import (COMPLEX, COMPLEX_ROWS, SPECIAL_FUNCTIONS, SPECIAL_GRID,
                      assert_same_special_values, d_cplx, operand_dtypes)


def _same(got, want, rtol):
    assert got.device.type == "cuda"
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype)
    g, w = got.numpy(), want.numpy()
    if w.dtype.kind in "fc":
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, w)


def _tol(dtype):
    return 2e-5 if dtype == "complex64" else 1e-12


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("row", COMPLEX_ROWS, ids=repr)
def test_complex_elementwise_matches_cpu(cuda, rng, row, dtype):
    shapes = [(3, 4), (4,), (3, 1)][:row.arity]
    arrays = [np.asarray(dom(rng, s, dt)) for dom, s, dt in
              zip(row.domain, shapes, operand_dtypes(row, dtype))]
    cpu = [ember.from_numpy(a) for a in arrays]
    _same(row.fn(*[to_cuda(a, cuda) for a in arrays]), row.fn(*cpu), _tol(dtype))


@pytest.mark.parametrize("name", sorted(SPECIAL_FUNCTIONS))
def test_special_values_follow_c99(cuda, name):
    """The CUDA kernels give C99's values at infinite, NaN, signed-zero and huge parts."""
    with np.errstate(all="ignore"):
        want = SPECIAL_FUNCTIONS[name](SPECIAL_GRID)
    got = getattr(to_cuda(SPECIAL_GRID, cuda), name)()
    assert got.device.type == "cuda"
    assert_same_special_values(got.numpy(), want, name)


OPS = [
    ("sum", lambda t: t.sum(1)), ("sum_all", lambda t: t.sum()), ("prod", lambda t: t.prod(0)),
    ("mean", lambda t: t.mean()), ("cumsum", lambda t: t.cumsum(1)),
    ("cumprod", lambda t: t.cumprod(0)), ("matmul", lambda t: t @ t.T),
    ("matmul_vec", lambda t: t[0] @ t.T), ("cast_c128", lambda t: t.cast(ember.complex128)),
    ("cast_f32", lambda t: t.cast(ember.float32)), ("cast_bool", lambda t: t.cast(ember.bool_)),
    ("index_select", lambda t: t.index_select(1, ember.tensor([3, 0], device=t.device))),
    ("gather", lambda t: t.gather(1, ember.tensor([[0], [3], [1]], device=t.device))),
    ("scatter_add", lambda t: t.scatter(1, ember.tensor([[0], [3], [0]], device=t.device),
                                        t[:, :1], reduce="add")),
    ("cat_flip", lambda t: ember.cat([t, t.flip(0)], 1)), ("transpose", lambda t: t.T.contiguous()),
    ("argwhere", lambda t: (t * (t.real > 0)).argwhere()), ("any", lambda t: t.any(0)),
    ("var", lambda t: t.var(1)), ("fused", lambda t: ((t * 2j).exp() / (t + 3)).conj().abs()),
]


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("name, op", OPS, ids=[o[0] for o in OPS])
def test_complex_ops_match_cpu(cuda, rng, name, op, dtype):
    z = d_cplx(rng, (3, 4), dtype)
    _same(op(to_cuda(z, cuda)), op(ember.from_numpy(z)), _tol(dtype))


def test_complex_promotion_and_scalars(cuda, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    z = d_cplx(rng, (3, 4), "complex64")
    got = to_cuda(x, cuda) * to_cuda(z, cuda) + 1j
    _same(got, ember.from_numpy(x) * ember.from_numpy(z) + 1j, 2e-5)
    assert (to_cuda(x, cuda) * 1j).dtype == ember.complex64
