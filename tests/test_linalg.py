"""ember.linalg and the contractions against numpy/SciPy: values, shapes, dtypes and errors.

``ROWS`` is the table: the Ember call, the numpy/SciPy reference, and the inputs (built per
dtype and batch shape).  Every row runs for float32 and float64, on one matrix and on
batches: (3,) goes to LAPACK one matrix at a time, (2, 5) = 10 matrices of order <= 16 to the
Numba kernels of kernels/cpu/linalg.py.  Factorisations whose factors are unique only up to
signs (eigh, svd, qr) are compared through sign-free quantities and reconstructions.  The rows
that apply to complex matrices (all but ``Row(..., complex=False)``) run again for complex64 and
complex128 on one matrix and on a batch of 3, their inputs drawn with complex normal entries
(Hermitian where the real row is symmetric).
"""
import math
import sys

import numpy as np
import pytest
import scipy.linalg as sl

import ember
from ember import linalg as LA
from ember.backends.cpu import CpuBackend
from ember.backends.cpu import linalg as cpu_linalg
from ember.backends.cpu import tape as cpu_tape

RTOL = {"float32": 2e-4, "float64": 1e-10, "complex64": 2e-4, "complex128": 1e-10}
BATCHES = [(), (3,), (2, 5)]


class ComplexRng:
    """A generator drawing complex normal entries where the rows ask for real ones."""

    def __init__(self, rng):
        self.rng = rng

    def standard_normal(self, shape):
        return self.rng.standard_normal(shape) + 1j * self.rng.standard_normal(shape)


def spd(rng, batch, n, dtype):
    # (Hermitian positive-definite from a complex generator)
    x = rng.standard_normal(batch + (n, n))
    return (x @ np.swapaxes(x.conj(), -1, -2) + n * np.eye(n)).astype(dtype)


def general(rng, batch, n, dtype, m=None):
    return (rng.standard_normal(batch + (n, m or n)) + 3 * np.eye(n, m or n)).astype(dtype)


def tri(rng, batch, n, dtype, upper):
    a = general(rng, batch, n, dtype)
    return np.triu(a) if upper else np.tril(a)


def rhs(rng, batch, n, dtype, k=2):
    return rng.standard_normal(batch + (n, k)).astype(dtype)


def per_matrix(f, *arrays):
    """Apply numpy/SciPy ``f`` to each matrix of a batch (SciPy's solvers are not batched)."""
    batch = arrays[0].shape[:-2]
    outs = [f(*(a[idx] for a in arrays)) for idx in np.ndindex(batch)]
    return np.array(outs).reshape(batch + np.shape(outs[0]))


def sorted_abs_cols(v):
    return np.abs(v)


def svd_check(u, s, vh):
    return s, np.abs(u[..., :, :s.shape[-1]] * s[..., None, :] @ vh[..., :s.shape[-1], :])


class Row:
    def __init__(self, name, ember_fn, ref, make, ns=(4,), complex=True):
        self.name, self.ember_fn, self.ref, self.make, self.ns = name, ember_fn, ref, make, ns
        self.complex = complex


def _sym_parts(w, v):
    return w, np.abs(v)


ROWS = [
    Row("cholesky", lambda a: LA.cholesky(a), np.linalg.cholesky, lambda r, b, n, d: [spd(r, b, n, d)],
        ns=(4, 20)),
    Row("cholesky_upper", lambda a: LA.cholesky(a, upper=True),
        lambda a: np.linalg.cholesky(a, upper=True), lambda r, b, n, d: [spd(r, b, n, d)]),
    Row("solve", lambda a, b: LA.solve(a, b), np.linalg.solve,
        lambda r, b, n, d: [general(r, b, n, d), rhs(r, b, n, d)], ns=(4, 20)),
    Row("solve_vector", lambda a, b: LA.solve(a, b), lambda a, b: np.linalg.solve(a, b[..., None])[..., 0],
        lambda r, b, n, d: [general(r, b, n, d), rhs(r, b, n, d)[..., 0]]),
    Row("solve_triangular_lower", lambda a, b: LA.solve_triangular(a, b, upper=False),
        lambda a, b: per_matrix(lambda x, y: sl.solve_triangular(x, y, lower=True), a, b),
        lambda r, b, n, d: [tri(r, b, n, d, False), rhs(r, b, n, d)], ns=(4, 20)),
    Row("solve_triangular_upper_unit", lambda a, b: LA.solve_triangular(a, b, upper=True, unitriangular=True),
        lambda a, b: per_matrix(lambda x, y: sl.solve_triangular(x, y, unit_diagonal=True), a, b),
        lambda r, b, n, d: [tri(r, b, n, d, True), rhs(r, b, n, d)]),
    Row("solve_triangular_right", lambda a, b: LA.solve_triangular(a, b, upper=False, left=False),
        lambda a, b: np.swapaxes(per_matrix(lambda x, y: sl.solve_triangular(x.T, y.T, lower=False), a, b), -1, -2),
        lambda r, b, n, d: [tri(r, b, n, d, False), np.swapaxes(rhs(r, b, n, d), -1, -2)]),
    Row("inv", lambda a: LA.inv(a), np.linalg.inv, lambda r, b, n, d: [general(r, b, n, d)]),
    Row("det", lambda a: LA.det(a), np.linalg.det, lambda r, b, n, d: [general(r, b, n, d)]),
    Row("slogdet", lambda a: tuple(LA.slogdet(a)), lambda a: tuple(np.linalg.slogdet(a)),
        lambda r, b, n, d: [general(r, b, n, d) - 3 * np.eye(n, dtype=d)]),
    Row("eigh", lambda a: (lambda w, v: (w, v.abs()))(*LA.eigh(a)),
        lambda a: _sym_parts(*np.linalg.eigh(a)), lambda r, b, n, d: [spd(r, b, n, d)]),
    Row("eigh_upper", lambda a: LA.eigh(a, UPLO="U")[0], lambda a: np.linalg.eigh(a, UPLO="U")[0],
        lambda r, b, n, d: [np.triu(spd(r, b, n, d))]),
    Row("eigvalsh", lambda a: LA.eigvalsh(a), np.linalg.eigvalsh, lambda r, b, n, d: [spd(r, b, n, d)]),
    Row("svd", lambda a: svd_check(*(t.numpy() for t in LA.svd(a))),
        lambda a: svd_check(*np.linalg.svd(a)), lambda r, b, n, d: [general(r, b, n, d, n + 2)]),
    Row("svd_reduced_shapes", lambda a: tuple(t.shape for t in LA.svd(a, full_matrices=False)),
        lambda a: tuple(x.shape for x in np.linalg.svd(a, full_matrices=False)),
        lambda r, b, n, d: [general(r, b, n + 2, d, n)]),
    Row("svdvals", lambda a: LA.svdvals(a), lambda a: np.linalg.svd(a, compute_uv=False),
        lambda r, b, n, d: [general(r, b, n, d, n + 1)]),
    Row("qr", lambda a: (lambda q, r: (np.abs(q.numpy()), np.abs(r.numpy())))(*LA.qr(a)),
        lambda a: tuple(np.abs(x) for x in np.linalg.qr(a)), lambda r, b, n, d: [general(r, b, n + 2, d, n)]),
    Row("qr_complete", lambda a: (lambda q, r: (np.abs(q.numpy()), np.abs(r.numpy())))(*LA.qr(a, "complete")),
        lambda a: tuple(np.abs(x) for x in np.linalg.qr(a, "complete")),
        lambda r, b, n, d: [general(r, b, n + 2, d, n)]),
    Row("qr_r", lambda a: LA.qr(a, mode="r").R.abs(), lambda a: np.abs(np.linalg.qr(a, mode="r")),
        lambda r, b, n, d: [general(r, b, n, d, n + 1)]),
    Row("pinv", lambda a: LA.pinv(a), np.linalg.pinv, lambda r, b, n, d: [general(r, b, n, d, n + 2)]),
    Row("pinv_hermitian", lambda a: LA.pinv(a, hermitian=True),
        lambda a: np.linalg.pinv(a, hermitian=True), lambda r, b, n, d: [spd(r, b, n, d)]),
    Row("matrix_rank", lambda a: LA.matrix_rank(a), np.linalg.matrix_rank,
        lambda r, b, n, d: [np.concatenate([general(r, b, n, d)[..., :2],
                                            general(r, b, n, d)[..., :1].repeat(n - 2, -1)], -1)]),
    Row("matrix_norm_nuc", lambda a: LA.matrix_norm(a, "nuc"),
        lambda a: np.linalg.norm(a, "nuc", axis=(-2, -1)), lambda r, b, n, d: [general(r, b, n, d)]),
    Row("matrix_norm_inf", lambda a: LA.matrix_norm(a, -math.inf),
        lambda a: np.linalg.norm(a, -np.inf, axis=(-2, -1)), lambda r, b, n, d: [general(r, b, n, d)]),
    Row("vector_norm_p", lambda a: LA.vector_norm(a, 3.5, dim=-1),
        lambda a: np.linalg.norm(a, 3.5, axis=-1), lambda r, b, n, d: [general(r, b, n, d)]),
    Row("vector_norm_0", lambda a: LA.vector_norm(a - a.round(), 0),
        lambda a: np.count_nonzero(a - np.round(a)).astype(a.dtype), lambda r, b, n, d: [general(r, b, n, d)],
        complex=False),   # (round takes real numbers)
    Row("norm_flat", lambda a: LA.norm(a), lambda a: np.linalg.norm(a.reshape(-1)),
        lambda r, b, n, d: [general(r, b, n, d)]),
    Row("matrix_power", lambda a: LA.matrix_power(a, 5), lambda a: np.linalg.matrix_power(a, 5),
        lambda r, b, n, d: [general(r, b, n, d) / 3]),
    Row("matrix_power_neg", lambda a: LA.matrix_power(a, -3), lambda a: np.linalg.matrix_power(a, -3),
        lambda r, b, n, d: [general(r, b, n, d)]),
    Row("diagonal", lambda a: LA.diagonal(a, offset=1), lambda a: np.diagonal(a, 1, -2, -1),
        lambda r, b, n, d: [general(r, b, n, d, n + 1)]),
    Row("cross", lambda a, b: LA.cross(a, b), lambda a, b: np.cross(a, b),
        lambda r, b, n, d: [general(r, b, n, d)[..., :3], general(r, b, n, d)[..., 1:4]]),
    Row("vecdot", lambda a, b: LA.vecdot(a, b), lambda a, b: (np.conj(a) * b).sum(-1),
        lambda r, b, n, d: [general(r, b, n, d), general(r, b, n, d)]),
    Row("einsum_bmm", lambda a, b: ember.einsum("...ij,...jk->...ik", a, b),
        lambda a, b: np.einsum("...ij,...jk->...ik", a, b),
        lambda r, b, n, d: [general(r, b, n, d), rhs(r, b, n, d)]),
    Row("einsum_trace", lambda a: ember.einsum("...ii", a), lambda a: np.einsum("...ii", a),
        lambda r, b, n, d: [general(r, b, n, d)]),
]


BATCH_IDS = {(): "single", (3,): "batch3", (2, 5): "batch2x5"}
TABLE = ([(row, d, b) for row in ROWS for d in ("float32", "float64") for b in BATCHES]
         + [(row, d, b) for row in ROWS if row.complex for d in ("complex64", "complex128")
            for b in BATCHES[:2]])   # (the small-batch kernels are real: (2, 5) goes to LAPACK too)


@pytest.mark.parametrize("row,dtype,batch", TABLE,
                         ids=[f"{r.name}-{d}-{BATCH_IDS[b]}" for r, d, b in TABLE])
def test_linalg_agrees_with_numpy(row, dtype, batch):
    rng = np.random.default_rng(abs(hash(row.name)) % 2 ** 32)
    if dtype.startswith("complex"):
        rng = ComplexRng(rng)
    for n in row.ns:
        arrays = row.make(rng, batch, n, np.dtype(dtype))
        got = row.ember_fn(*[ember.from_numpy(np.ascontiguousarray(a)) for a in arrays])
        want = row.ref(*arrays)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want):
            if isinstance(w, tuple):      # shapes
                assert g == w
                continue
            g = g.numpy() if isinstance(g, ember.Tensor) else g
            w = np.asarray(w)
            assert g.shape == w.shape, (row.name, g.shape, w.shape)
            if w.dtype.kind in "fc":
                # (eigen- and singular values, norms, log|det| of a complex matrix are real)
                assert g.dtype == (np.dtype(dtype) if w.dtype.kind == "c" else np.finfo(dtype).dtype), \
                    (row.name, g.dtype)
                scale = max(1.0, float(np.abs(w).max(initial=0)))
                np.testing.assert_allclose(g, w, rtol=RTOL[dtype], atol=RTOL[dtype] * scale,
                                           err_msg=f"{row.name} n={n}")
            else:
                np.testing.assert_array_equal(g, w)


def test_the_small_batch_kernels_serve_batches_of_small_matrices():
    # BATCHES' (2, 5) takes the Numba path for the rows above; make sure it is that path
    a = np.ones((2, 5, 4, 4))
    assert cpu_linalg._small(a) and not cpu_linalg._small(np.ones((3, 4, 4)))
    assert not cpu_linalg._small(np.ones((10, 20, 20)))


def test_the_parallel_small_batch_kernels_agree_with_numpy():
    rng = np.random.default_rng(6)
    a = spd(rng, (600,), 16, np.float64)           # 600 * 16^3 >= PARALLEL_MIN_WORK
    assert 600 * 16 ** 3 >= cpu_linalg.PARALLEL_MIN_WORK and cpu_linalg._small(a)
    b = rhs(rng, (600,), 16, np.float64)
    e = ember.from_numpy
    np.testing.assert_allclose(LA.cholesky(e(a)).numpy(), np.linalg.cholesky(a), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(LA.solve(e(a), e(b)).numpy(), np.linalg.solve(a, b), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(LA.inv(e(a)).numpy(), np.linalg.inv(a), rtol=1e-9, atol=1e-10)
    low = np.tril(a)
    np.testing.assert_allclose(LA.solve_triangular(e(low), e(b), upper=False).numpy(),
                               per_matrix(lambda x, y: sl.solve_triangular(x, y, lower=True), low, b),
                               rtol=1e-9, atol=1e-10)


def _layouts(m):
    """The matrix ``m`` C-ordered, Fortran-ordered and as a strided view (every other column
    of a wider array): what the BLAS/LAPACK calls take as they are, transposed, or copied."""
    wide = np.zeros(m.shape[:-1] + (2 * m.shape[-1],), m.dtype)
    wide[..., ::2] = m
    return {"C": np.ascontiguousarray(m), "F": np.asfortranarray(m), "strided": wide[..., ::2]}


PRODUCT_TOL = {np.float32: 1e-4, np.float64: 1e-12, np.complex64: 1e-4, np.complex128: 1e-12}


@pytest.mark.parametrize("scipy_serves", [False, True], ids=["numpy", "scipy"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
def test_a_tall_product_with_a_small_transposed_weight_copies_it(dtype, scipy_serves,
                                                                  monkeypatch):
    """``x @ w.T`` of many rows and a small ``w`` multiplies a C-ordered copy of ``w.T``
    (``skinny_weight``); other layouts and sizes go to BLAS as they are.  Both pools."""
    monkeypatch.setattr(cpu_linalg, "_scipy_in_use", scipy_serves)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2048, 64)).astype(dtype)
    tol = dict(rtol=PRODUCT_TOL[dtype], atol=PRODUCT_TOL[dtype] * 10)
    copied = []
    real = np.ascontiguousarray
    monkeypatch.setattr(cpu_linalg.np, "ascontiguousarray",
                        lambda a, *args, **kw: copied.append(a.shape) or real(a, *args, **kw))
    for n in (2, 16):   # 64 x 2 and 64 x 16 weights: copied
        w = rng.standard_normal((n, 64)).astype(dtype)
        np.testing.assert_allclose(cpu_linalg.matmul(x, w.T), x @ w.T, **tol)
    w = rng.standard_normal((64, 64)).astype(dtype)   # 4096 values: left as it is
    np.testing.assert_allclose(cpu_linalg.matmul(x, w.T), x @ w.T, **tol)
    np.testing.assert_allclose(cpu_linalg.matmul(x[:100], w[:2].T), x[:100] @ w[:2].T, **tol)
    assert copied == [(64, 2), (64, 16)]
    assert cpu_linalg.skinny_weight(2048, 64, 16) and not cpu_linalg.skinny_weight(2048, 64, 64)


@pytest.mark.parametrize("dtype", list(PRODUCT_TOL), ids=lambda d: d.__name__)
def test_large_products_run_in_scipys_gemm_once_scipy_served_ember(dtype, monkeypatch):
    # (144 x 160) @ (160 x 96): 2 211 840 multiply-adds, above GEMM_MIN_WORK
    rng = np.random.default_rng(9)
    a, b = (rng.standard_normal(s) * (1 + 1j if np.dtype(dtype).kind == "c" else 1)
            for s in [(144, 160), (160, 96)])
    a, b = a.astype(dtype), b.astype(dtype)
    assert 144 * 160 * 96 >= cpu_linalg.GEMM_MIN_WORK
    calls = []
    real = cpu_linalg._blas
    monkeypatch.setattr(cpu_linalg, "_blas", lambda name, x: calls.append(name) or real(name, x))
    want = a.astype(np.complex128) @ b.astype(np.complex128)
    tol = dict(rtol=PRODUCT_TOL[dtype], atol=PRODUCT_TOL[dtype] * 100)
    # until a SciPy routine has served Ember, numpy's matmul serves the product, SciPy loaded
    # or not (Numba loads it by the first kernel), in eager calls and in a compiled step's
    # bound replay (``bound``: the CPU's tape switched off) alike
    monkeypatch.setattr(cpu_linalg, "_scipy_in_use", False)
    assert "scipy.linalg.blas" in sys.modules          # (this module imports scipy.linalg)
    np.testing.assert_allclose(cpu_linalg.matmul(a, b), want, **tol)
    bound = ember.compile(lambda x, y: x @ y)
    with monkeypatch.context() as m:
        m.setattr(CpuBackend, "tape", lambda self, *args: None)
        for _ in range(2):
            np.testing.assert_allclose(bound(ember.from_numpy(a), ember.from_numpy(b)).numpy(), want, **tol)
    assert calls == [] and not cpu_linalg._scipy_in_use
    # a step on the tape calls SciPy's gemm (Numba's np.dot): its first compiled call turns
    # the large eager products to SciPy's pool too
    if np.dtype(dtype).kind == "f":
        # (operands past the tape's IO_MAX, which would send the step to the bound replay)
        monkeypatch.setattr(cpu_tape, "IO_MAX", a.size)
        taped = ember.compile(lambda x, y: x @ y)
        for _ in range(2):
            np.testing.assert_allclose(taped(ember.from_numpy(a), ember.from_numpy(b)).numpy(), want, **tol)
        assert next(iter(taped._programs.values())).instructions is not None
        assert cpu_linalg._scipy_in_use and calls == []
        cpu_linalg.matmul(a, b)
        assert calls == ["gemm"]
        calls.clear()
        monkeypatch.setattr(cpu_linalg, "_scipy_in_use", False)
    # a Cholesky factor through SciPy's potrf: from then on every large product runs in its pool
    ember.linalg.cholesky(ember.from_numpy(np.eye(3, dtype=dtype) * 2))
    assert cpu_linalg._scipy_in_use
    for (ka, xa), (kb, xb) in [(p, q) for p in _layouts(a).items() for q in _layouts(b).items()]:
        got = cpu_linalg.matmul(xa, xb)
        assert got.dtype == dtype and got.shape == (144, 96) and got.flags.c_contiguous, (ka, kb)
        np.testing.assert_allclose(got, want, rtol=PRODUCT_TOL[dtype], atol=PRODUCT_TOL[dtype] * 100,
                                   err_msg=f"{ka} @ {kb}")
    assert calls == ["gemm"] * 9
    # every product OpenBLAS multithreads (from 64^3 = 2^18) goes to the same pool: a limit
    # above it once left the 784-512-10 MLP's middle-sized products on numpy's pool
    calls.clear()
    small = np.ones((64, 64), dtype)
    np.testing.assert_allclose(cpu_linalg.matmul(small, small), small @ small)
    assert calls == ["gemm"]
    # the same product through the tensor, forward and backward (the gradients' operands
    # are transposed views)
    if np.dtype(dtype).kind == "f":
        ta, tb = (ember.from_numpy(x).autodiff().require_grad() for x in (a, b))
        out = ta @ tb
        back = out.sum().backward()
        np.testing.assert_allclose(out.numpy(), want.real, **tol)
        ones = np.ones((144, 96), dtype)
        np.testing.assert_allclose(ta.grad(back).numpy(), ones @ b.T, **tol)
        np.testing.assert_allclose(tb.grad(back).numpy(), a.T @ ones, **tol)
        assert calls.count("gemm") >= 1 + 3   # the 64^3 product, then forward and backward
    # and in a compiled step's bound replay (the one traced above)
    for _ in range(3):
        calls.clear()
        np.testing.assert_allclose(bound(ember.from_numpy(a), ember.from_numpy(b)).numpy(), want, **tol)
        assert calls == ["gemm"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128], ids=lambda d: d.__name__)
@pytest.mark.parametrize("batch,n", [((), 5), ((), 40), ((3,), 40)], ids=["small", "single", "batch3"])
def test_triangular_matmul_reads_one_triangle_in_any_layout(batch, n, dtype):
    # the IR op behind the Cholesky gradient's L^H gL: trmm past SMALL_N, np.matmul below
    from ember import dispatch
    from ember.ir import Op
    rng = np.random.default_rng(4)
    a = rng.standard_normal(batch + (n, n)).astype(dtype)
    b = rng.standard_normal(batch + (n, 3)).astype(dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    for upper in (False, True):
        want = (np.triu(a) if upper else np.tril(a)) @ b
        for x in _layouts(a).values():
            for y in _layouts(b).values():
                got = dispatch.apply(Op.TRIANGULAR_MATMUL, ember.from_numpy(x), ember.from_numpy(y),
                                     upper=upper).numpy()
                np.testing.assert_allclose(got, want, rtol=tol, atol=tol * n)


@pytest.mark.parametrize("batch", [(), (3,)], ids=["single", "batch3"])
def test_triangular_solves_take_any_layout(batch):
    rng = np.random.default_rng(10)
    for upper, unit in [(False, False), (True, False), (False, True), (True, True)]:
        a = tri(rng, batch, 40, np.float64, upper)
        b = rhs(rng, batch, 40, np.float64, k=7)
        want = per_matrix(lambda x, y: sl.solve_triangular(x, y, lower=not upper, unit_diagonal=unit),
                          a, b)
        for (ka, xa), (kb, xb) in [(p, q) for p in _layouts(a).items() for q in _layouts(b).items()]:
            if batch:   # a batch of transposed matrices: each one a Fortran array
                xa, xb = (np.swapaxes(np.ascontiguousarray(np.swapaxes(x, -1, -2)), -1, -2)
                          if k == "F" else x for k, x in [(ka, xa), (kb, xb)])
            got = cpu_linalg.triangular_solve(None, xa, xb, upper=upper, unitriangular=unit)
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10,
                                       err_msg=f"upper={upper} unit={unit} a {ka}, b {kb}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
def test_one_matrix_svd_and_qr_take_any_layout(dtype):
    # one matrix's QR goes to geqrf + orgqr directly: every layout, wide and tall, every
    # mode, against numpy; the SVD (gesdd) alongside
    rng = np.random.default_rng(11)
    tol = dict(atol=PRODUCT_TOL[dtype] * 100)
    for shape in [(7, 4), (4, 7), (5, 5), (1, 3), (3, 1)]:
        a = rng.standard_normal(shape).astype(dtype)
        for kind, x in _layouts(a).items():
            before = x.copy()
            t = ember.from_numpy(x)
            for mode in ("reduced", "complete"):
                q, r = LA.qr(t, mode=mode)
                nq, nr = np.linalg.qr(a, mode=mode)
                assert q.shape == nq.shape and r.shape == nr.shape, (shape, kind, mode)
                np.testing.assert_allclose((q @ r).numpy(), a, **tol, err_msg=f"{shape} {kind} {mode}")
                np.testing.assert_allclose(np.abs(q.numpy()), np.abs(nq), **tol)
                np.testing.assert_allclose(np.abs(r.numpy()), np.abs(nr), **tol)
            np.testing.assert_allclose(np.abs(LA.qr(t, mode="r")[1].numpy()), np.abs(np.linalg.qr(a, mode="r")), **tol)
            for full in (True, False):
                u, sv, vh = LA.svd(t, full_matrices=full)
                nu, ns, nvh = np.linalg.svd(a, full_matrices=full)
                assert u.shape == nu.shape and vh.shape == nvh.shape, (shape, kind, full)
                k = len(ns)
                np.testing.assert_allclose(sv.numpy(), ns, **tol)
                np.testing.assert_allclose(((u.numpy()[:, :k] * sv.numpy()) @ vh.numpy()[:k]), a, **tol,
                                           err_msg=f"{shape} {kind} full={full}")
                for w in (u.numpy(), vh.numpy().conj().T):   # orthonormal columns
                    np.testing.assert_allclose(w.conj().T @ w, np.eye(w.shape[1]), **tol)
                if np.dtype(dtype) in (np.float64, np.complex128):
                    # SciPy's gesdd on a Fortran copy, as numpy's gufunc: the same vectors,
                    # signs included (scikit-learn's LDA output follows them)
                    np.testing.assert_allclose(u.numpy(), nu, **tol)
                    np.testing.assert_allclose(vh.numpy(), nvh, **tol)
            np.testing.assert_allclose(LA.svdvals(t).numpy(), np.linalg.svd(a, compute_uv=False), **tol)
            np.testing.assert_array_equal(x, before)   # gesdd destroys its input: never the caller's


def test_decompositions_reconstruct_their_input():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 5, 3))
    t = ember.from_numpy(a)
    u, s, vh = LA.svd(t, full_matrices=False)
    np.testing.assert_allclose(((u * s.unsqueeze(-2)) @ vh).numpy(), a, atol=1e-12)
    q, r = LA.qr(t)
    np.testing.assert_allclose((q @ r).numpy(), a, atol=1e-12)
    assert np.allclose(np.triu(r.numpy()), r.numpy())
    sym = a @ np.swapaxes(a, -1, -2)
    w, v = LA.eigh(ember.from_numpy(sym))
    np.testing.assert_allclose(((v * w.unsqueeze(-2)) @ v.transpose(-2, -1)).numpy(), sym, atol=1e-12)
    assert isinstance(LA.svd(t), LA.SVDResult) and LA.svd(t).S is not None


def test_lstsq_agrees_with_numpy_and_reports_like_torch():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((6, 3)), rng.standard_normal((6, 2))
    res = LA.lstsq(ember.from_numpy(a), ember.from_numpy(b))
    x, resid, rank, sv = np.linalg.lstsq(a, b, rcond=None)
    np.testing.assert_allclose(res.solution.numpy(), x, rtol=1e-10)
    assert res.rank.item() == 3 and res.residuals.shape == (0,) and res.singular_values.shape == (0,)
    res = LA.lstsq(ember.from_numpy(a), ember.from_numpy(b), driver="gelsd")
    np.testing.assert_allclose(res.residuals.numpy(), resid, rtol=1e-10)
    np.testing.assert_allclose(res.singular_values.numpy(), sv, rtol=1e-10)
    low = a.copy()
    low[:, 2] = low[:, 1]                    # rank 2: the minimum-norm solution, no residuals
    res = LA.lstsq(ember.from_numpy(low), ember.from_numpy(b), driver="gelsd")
    np.testing.assert_allclose(res.solution.numpy(), np.linalg.lstsq(low, b, rcond=None)[0], rtol=1e-8)
    assert res.rank.item() == 2 and res.residuals.shape == (0,)
    wide = rng.standard_normal((2, 4))
    np.testing.assert_allclose(LA.lstsq(ember.from_numpy(wide), ember.from_numpy(b[:2, 0])).solution.numpy(),
                               np.linalg.lstsq(wide, b[:2, 0], rcond=None)[0], rtol=1e-10)


def test_contractions_against_numpy():
    rng = np.random.default_rng(4)
    a, b, c = rng.standard_normal((3, 4)), rng.standard_normal((4, 5)), rng.standard_normal((5, 2))
    e = ember.from_numpy
    for eq, ops in [("ij,jk,kl->il", (a, b, c)), ("ij,ij->", (a, a)), ("ij->ji", (a,)),
                    ("ij,kl->ijkl", (a, c)), ("ii->i", (a[:, :3],)), ("ij,jk", (a, b)),
                    ("i,i", (a[0], a[1])), ("bij,bjk->bik", (rng.standard_normal((2, 3, 4)),
                                                              rng.standard_normal((2, 4, 2)))),
                    ("...j,j->...", (rng.standard_normal((2, 3, 4)), a[0])),
                    ("ijk,jl->ikl", (rng.standard_normal((2, 3, 4)), rng.standard_normal((3, 2)))),
                    ("...ij,...jk->...ik", (rng.standard_normal((1, 3, 4)),
                                            rng.standard_normal((2, 4, 2)))),
                    ("iij,jk->ik", (rng.standard_normal((3, 3, 4)), b)),
                    ("ij,jk->i", (a, b)), ("ijk->", (rng.standard_normal((2, 3, 4)),)),
                    ("i,j,k->ijk", (a[0], c[0], b[0]))]:
        # twice, the second time on other values: each (equation, shapes) is planned once
        for scale in (1.0, -2.5):
            ops = tuple(o * scale for o in ops)
            np.testing.assert_allclose(ember.einsum(eq, *map(e, ops)).numpy(), np.einsum(eq, *ops),
                                       rtol=1e-12, atol=1e-12, err_msg=eq)
    assert ember.einsum("ij,jk->ik", [e(a), e(b)]).shape == (3, 5)
    np.testing.assert_allclose(ember.tensordot(e(a), e(b), dims=1).numpy(), np.tensordot(a, b, 1))
    np.testing.assert_allclose(ember.tensordot(e(a), e(a), dims=([0, 1], [0, 1])).numpy(),
                               np.tensordot(a, a, ([0, 1], [0, 1])))
    np.testing.assert_allclose(ember.outer(e(a[0]), e(c[0])).numpy(), np.outer(a[0], c[0]))
    assert ember.trace(e(np.arange(9).reshape(3, 3))).item() == 12
    assert ember.trace(e(np.arange(9).reshape(3, 3))).dtype == ember.int64
    ints = ember.einsum("ij,jk->ik", e(np.arange(6).reshape(2, 3)), e(np.arange(6).reshape(3, 2)))
    np.testing.assert_array_equal(ints.numpy(), np.arange(6).reshape(2, 3) @ np.arange(6).reshape(3, 2))


def test_empty_and_int_cases():
    z = ember.zeros((0, 0), dtype=ember.float64)
    assert LA.cholesky(z).shape == (0, 0) and LA.solve(z, ember.zeros((0, 2), dtype=ember.float64)).shape == (0, 2)
    assert LA.matrix_power(ember.tensor([[1, 1], [0, 1]]), 3).tolist() == [[1, 3], [0, 1]]
    assert LA.cross(ember.tensor([1, 0, 0]), ember.tensor([0, 1, 0])).tolist() == [0, 0, 1]


# --- errors ----------------------------------------------------------------------------------------
F = ember.float64
ERRORS = [
    (lambda: LA.cholesky(ember.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=F)), LA.LinAlgError,
     "linalg.cholesky: the input is not positive-definite .*order 2"),
    (lambda: LA.cholesky(ember.tensor(np.stack([np.eye(2)] * 9 + [-np.eye(2)]), dtype=F)),
     LA.LinAlgError, r"cholesky.*order 1.*\(9,\) of the batch"),
    (lambda: LA.cholesky(ember.tensor(np.stack([np.eye(20), np.diag([1.0] * 5 + [-1.0] * 15)]), dtype=F)),
     LA.LinAlgError, r"cholesky.*order 6.*\(1,\) of the batch"),
    (lambda: LA.inv(ember.tensor(np.stack([np.eye(20), np.zeros((20, 20))]), dtype=F)),
     LA.LinAlgError, r"linalg.inv: the input matrix is singular.*\(1,\) of the batch"),
    (lambda: LA.cholesky(ember.tensor([[1, 0], [0, 1]])), TypeError,
     "linalg.cholesky: expected a float32, float64, complex64 or complex128 tensor, got Int"),
    (lambda: LA.cholesky(ember.ones((2, 3), dtype=F)), ValueError, "linalg.cholesky: expected square"),
    (lambda: LA.cholesky(ember.ones((3,), dtype=F)), ValueError, "at least 2 dims"),
    (lambda: LA.solve(ember.ones((2, 2), dtype=F), ember.ones((3, 1), dtype=F)), ValueError,
     "linalg.solve: A of shape"),
    (lambda: LA.solve(ember.ones((2, 2), dtype=F), ember.ones((2, 1), dtype=F)), LA.LinAlgError,
     "linalg.solve: the input matrix is singular"),
    (lambda: LA.solve(ember.ones((10, 2, 2), dtype=F), ember.ones((10, 2, 1), dtype=F)), LA.LinAlgError,
     "linalg.solve: the input matrix is singular"),
    (lambda: LA.inv(ember.zeros((3, 3), dtype=F)), LA.LinAlgError, "linalg.inv: the input matrix is singular"),
    (lambda: LA.solve(ember.eye(2, dtype=F), ember.tensor([1, 2])), TypeError, "linalg.solve: expected a float"),
    (lambda: LA.solve_triangular(ember.eye(2, dtype=F), ember.ones(2, dtype=F), upper=True), ValueError,
     "B must be a matrix"),
    (lambda: LA.det(ember.tensor([[1, 2], [3, 4]])), TypeError, "linalg.det"),
    (lambda: LA.eigh(ember.eye(2, dtype=F), UPLO="X"), ValueError, "UPLO"),
    (lambda: LA.qr(ember.eye(2, dtype=F), mode="full"), ValueError, "mode"),
    (lambda: LA.svd(ember.eye(2, dtype=F), driver="gesvd"), ValueError, "driver"),
    (lambda: LA.matrix_norm(ember.eye(2, dtype=F), ord=3), ValueError, "ord"),
    (lambda: LA.vector_norm(ember.tensor([1, 2])), TypeError, "vector_norm"),
    (lambda: LA.matrix_power(ember.eye(2, dtype=F), 1.5), TypeError, "n must be an int"),
    (lambda: LA.cross(ember.ones(2, dtype=F), ember.ones(2, dtype=F)), ValueError, "size 3"),
    (lambda: LA.lstsq(ember.ones((3, 2), dtype=F), ember.ones((2, 1), dtype=F)), ValueError, "lstsq"),
    (lambda: ember.einsum("ij,jk->ik", ember.ones((2, 3)), ember.ones((4, 2))), ValueError, "einsum"),
    (lambda: ember.einsum("ij,jk->ik", ember.ones((2, 3))), ValueError, "2 operands"),
    (lambda: ember.einsum("ij->iz", ember.ones((2, 3))), ValueError, "output subscript"),
    (lambda: ember.tensordot(ember.ones((2, 3)), ember.ones((2, 3)), dims=1), ValueError, "tensordot"),
    (lambda: ember.outer(ember.ones((2, 3)), ember.ones(3)), ValueError, "outer: expected 1-D"),
    (lambda: ember.trace(ember.ones(3)), ValueError, "trace: expected a 2-D"),
]


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_errors_name_the_op(i):
    fn, exc, pattern = ERRORS[i]
    with pytest.raises(exc, match=pattern):
        fn()


def test_linalg_error_is_a_value_error_and_import_stays_light():
    assert issubclass(LA.LinAlgError, ValueError)
    import subprocess
    import sys
    code = "import sys, ember; ember.linalg; print('scipy' in sys.modules, 'opt_einsum' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("ord", [2, 3.0, 1])
def test_untracked_norms_take_the_root_alone(ord):
    """An untracked norm skips the masked root its gradient needs (``_safe_root``): the same
    values as a tracked one, zero rows included, and numpy's."""
    x = np.array([[3.0, -4.0, 0.0], [0.0, 0.0, 0.0], [1e-3, 2.0, -7.5]])
    plain = LA.vector_norm(ember.from_numpy(x), ord, dim=1).numpy()
    leaf = ember.from_numpy(x).autodiff().require_grad()
    tracked = LA.vector_norm(leaf, ord, dim=1).numpy()
    np.testing.assert_array_equal(plain, tracked)
    np.testing.assert_allclose(plain, np.linalg.norm(x, ord, axis=1), rtol=1e-14)
    assert plain[1] == 0.0
