"""Quantized tensors on the CPU (DESIGN §5): schemes, exact numbers, packing, ops, matmul, errors.

The reference below is an independent numpy formulation of the contract:
``scale = 2 * max|x| / (b - a)`` per block (float32), ``q = clamp(round_half_away(x / scale))``.
"""

import numpy as np
import pytest

import ember
from checks import compiled_in_new_process
from ember import QuantScheme, QuantStore, QuantValue

Q = QuantValue
NATIVE, PACKED = QuantStore.NATIVE, QuantStore.PACKED_U32
FLT_MIN = np.finfo(np.float32).tiny


@pytest.fixture(autouse=True)
def default_propagation():
    yield
    ember.set_quant_propagation("dequantize")


# --- the reference ----------------------------------------------------------------------------
def block_extents(shape, block):
    block = tuple(block or ())
    return (1,) * (len(shape) - len(block)) + block


def expand_to(scales, shape, block):
    """Per-element scales: every block's scale repeated over its elements."""
    if block is None:
        return np.full(shape, scales, np.float32)
    full = scales
    for d, e in enumerate(block_extents(shape, block)):
        full = np.repeat(full, e, axis=d)
    return full[tuple(slice(0, n) for n in shape)]


def ref_scales(x, value, block):
    """Min-max scales of float32 ``x``: float32(max|x| of each block) / ((b - a) / 2)."""
    half = np.float32((value.hi - value.lo) / 2)
    if block is None:
        amax = np.abs(x).max(initial=0.0)
        s = np.float32(amax) / half
        return np.float32(max(s, FLT_MIN))
    ext = block_extents(x.shape, block)
    grid = tuple(-(-n // e) for n, e in zip(x.shape, ext))
    out = np.empty(grid, np.float32)
    for idx in np.ndindex(*grid):
        blk = x[tuple(slice(i * e, (i + 1) * e) for i, e in zip(idx, ext))]
        out[idx] = max(np.float32(np.abs(blk).max()) / half, FLT_MIN)
    return out


def ref_values(x, scales_full, value):
    v = (x.astype(np.float32) / scales_full).astype(np.float32)
    a = np.abs(v).astype(np.float64)
    r = np.sign(v) * np.floor(a + 0.5)           # half away from zero (exact in float64)
    return np.clip(r, value.lo, value.hi).astype(np.int8)


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def raw_words(q):
    """The packed uint32 storage of a PACKED_U32 tensor (the documented layout)."""
    return np.asarray(q._data.values)


# --- schemes -----------------------------------------------------------------------------------
def test_scheme_is_a_frozen_hashable_value():
    a = QuantScheme(Q.Q8S, [16])
    assert a == QuantScheme(Q.Q8S, (16,)) and hash(a) == hash(QuantScheme(Q.Q8S, [16]))
    assert a.block_size == (16,) and a.store is NATIVE
    assert a != QuantScheme(Q.Q8S, [16], PACKED)
    with pytest.raises(AttributeError):
        a.block_size = (32,)
    assert {a: 1}[QuantScheme(Q.Q8S, [16])] == 1
    assert (Q.Q8S.lo, Q.Q8S.hi, Q.Q8F.lo, Q.Q4S.lo, Q.Q4F.lo, Q.Q2S.hi, Q.Q2F.lo) == \
        (-127, 127, -128, -7, -8, 1, -2)


@pytest.mark.parametrize("block", [[0], [16, 0], [1, 2, 3], [], "16", 16, [2.0], [True], [-4]])
def test_bad_block_size_raises(block):
    with pytest.raises(ValueError, match="block_size"):
        QuantScheme(Q.Q8S, block)


@pytest.mark.parametrize("value", [Q.Q4S, Q.Q4F, Q.Q2S, Q.Q2F])
def test_sub_byte_values_need_packed_storage(value):
    with pytest.raises(ValueError, match="PACKED_U32"):
        QuantScheme(value)
    assert QuantScheme(value, store=PACKED).store is PACKED


def test_bad_value_or_store_raises():
    with pytest.raises(ValueError, match="QuantValue"):
        QuantScheme("Q8S")
    with pytest.raises(ValueError, match="store"):
        QuantScheme(Q.Q8S, None, "packed")


# --- exact numbers ------------------------------------------------------------------------------
def test_pinned_example():
    q = ember.tensor([-1.8, -1.0, 0.0, 0.5]).quantize(QuantScheme(Q.Q8S))
    assert q.is_quantized and q.kind is ember.Float and isinstance(q.dtype, ember.QFloat)
    assert q.dtype.scheme == QuantScheme(Q.Q8S)
    np.testing.assert_array_equal(q.quantized_values().numpy(), [-127, -71, 0, 35])
    assert q.quantized_values().dtype == ember.int8
    s = q.quantization_scales()
    assert s.shape == () and s.dtype == ember.float32
    assert s.item() == np.float32(1.8) / np.float32(127)
    expected = np.float32(s.item()) * np.array([-127, -71, 0, 35], np.float32)
    np.testing.assert_array_equal(q.dequantize().numpy(), expected)
    assert q.dequantize().dtype == ember.float32 and not q.dequantize().is_quantized


def test_rounding_is_half_away_from_zero_and_clamps():
    x = ember.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 0.49999997, 200.0, -300.0])
    q = x.quantize(QuantScheme(Q.Q8S), scales=1.0)
    np.testing.assert_array_equal(q.quantized_values().numpy(), [1, 2, 3, -1, -3, 0, 127, -127])
    q = x.quantize(QuantScheme(Q.Q8F), scales=1.0)
    assert q.quantized_values().numpy()[-1] == -128
    q = ember.tensor([7.5, -7.5, -9.0]).quantize(QuantScheme(Q.Q4F, store=PACKED), scales=1.0)
    np.testing.assert_array_equal(q.quantized_values().numpy(), [7, -8, -8])


@pytest.mark.parametrize("shape,block", [((3, 40), [16]), ((40,), [16]), ((5, 37), [2, 16]),
                                         ((2, 5, 37), [2, 16]), ((4, 6), [1, 4]), ((3, 5), [5])])
def test_per_block_scales_with_partial_blocks(shape, block):
    x = randn(*shape)
    q = ember.tensor(x).quantize(QuantScheme(Q.Q8S, block))
    want = ref_scales(x, Q.Q8S, block)
    s = q.quantization_scales()
    assert s.shape == want.shape
    np.testing.assert_array_equal(s.numpy(), want)
    np.testing.assert_array_equal(q.quantized_values().numpy(),
                                  ref_values(x, expand_to(want, shape, block), Q.Q8S))


def test_partial_block_gets_its_own_scale():
    x = np.zeros((1, 20), np.float32)
    x[0, :16] = 10.0
    x[0, 16:] = np.array([0.5, -1.0, 0.25, 0.0], np.float32)
    s = ember.tensor(x).quantize(QuantScheme(Q.Q8S, [16])).quantization_scales().numpy()
    assert s.shape == (1, 2)
    assert s[0, 0] == np.float32(10.0) / np.float32(127) and s[0, 1] == np.float32(1.0) / np.float32(127)
    x = np.ones((3, 3), np.float32) * np.arange(1, 4, dtype=np.float32)[:, None]   # rows 1, 2, 3
    s = ember.tensor(x).quantize(QuantScheme(Q.Q8S, [2, 2])).quantization_scales().numpy()
    np.testing.assert_array_equal(s, np.array([[2, 2], [3, 3]], np.float32) / np.float32(127))


STORES = [(v, NATIVE) for v in (Q.Q8S, Q.Q8F)] + [(v, PACKED) for v in Q]


@pytest.mark.parametrize("value,store", STORES, ids=lambda p: getattr(p, "name", p))
@pytest.mark.parametrize("block", [None, [8], [2, 8]])
def test_round_trip_error_is_at_most_half_a_scale(value, store, block):
    x = randn(6, 21, seed=3) * np.float32(5)
    q = ember.tensor(x).quantize(QuantScheme(value, block, store))
    scales = q.quantization_scales().numpy()
    err = np.abs(q.dequantize().numpy() - x)
    full = expand_to(scales, x.shape, block)
    # |x - scale * q| <= scale / 2, up to the float32 rounding of the scale and of scale * q
    assert (err <= full * np.float32(0.5) * (1 + 1e-6) + 1e-7 * np.abs(x)).all()
    np.testing.assert_array_equal(q.quantized_values().numpy(), ref_values(x, full, value))
    vals = q.quantized_values().numpy()
    assert vals.min() >= value.lo and vals.max() <= value.hi


def test_zero_range_gets_a_tiny_positive_scale():
    q = ember.zeros((2, 8)).quantize(QuantScheme(Q.Q8S))
    assert q.quantization_scales().item() == FLT_MIN
    np.testing.assert_array_equal(q.quantized_values().numpy(), np.zeros((2, 8)))
    np.testing.assert_array_equal(q.dequantize().numpy(), np.zeros((2, 8)))
    x = np.zeros((2, 8), np.float32)
    x[1] = 3.0
    s = ember.tensor(x).quantize(QuantScheme(Q.Q4S, [8], PACKED)).quantization_scales().numpy()
    assert s[0, 0] == FLT_MIN and s[1, 0] == np.float32(3) / np.float32(7)


def test_float64_input():
    x = randn(4, 16).astype(np.float64)
    q = ember.tensor(x).quantize(QuantScheme(Q.Q8S, [8]))
    assert q.dequantize().dtype == ember.float32
    scales = q.quantization_scales().numpy()
    assert (np.abs(q.dequantize().numpy() - x) <= expand_to(scales, x.shape, [8]) * 0.5001).all()


def test_given_scales():
    x = randn(3, 8)
    s = np.array([[0.1], [0.2], [0.05]], np.float32)
    q = ember.tensor(x).quantize(QuantScheme(Q.Q8S, [8]), scales=ember.tensor(s))
    np.testing.assert_array_equal(q.quantization_scales().numpy(), s)
    np.testing.assert_array_equal(q.quantized_values().numpy(),
                                  ref_values(x, expand_to(s, x.shape, [8]), Q.Q8S))
    q = ember.tensor(x).quantize(QuantScheme(Q.Q8S), scales=np.float32(0.25))
    np.testing.assert_array_equal(q.quantized_values().numpy(),
                                  ref_values(x, np.full(x.shape, 0.25, np.float32), Q.Q8S))


def test_quantizing_a_quantized_tensor_requantizes_its_values():
    x = randn(4, 8)
    q = ember.tensor(x).quantize(QuantScheme(Q.Q8S))
    q4 = q.quantize(QuantScheme(Q.Q4S, [4], PACKED))
    d = q.dequantize().numpy()
    want = ref_scales(d, Q.Q4S, [4])
    np.testing.assert_array_equal(q4.quantization_scales().numpy(), want)


# --- packing layout -----------------------------------------------------------------------------
def test_q4_packing_layout_is_little_end_first():
    vals = [1, -1, 2, -2, 3, -3, 4, -4, 5, -8, 7]
    q = ember.tensor(np.array(vals, np.float32)).quantize(QuantScheme(Q.Q4F, store=PACKED), scales=1.0)
    words = raw_words(q)
    assert words.dtype == np.uint32 and words.shape == (2,)
    want = [0, 0]
    for c, v in enumerate(vals):
        want[c // 8] |= (v & 0xF) << (4 * (c % 8))     # value c: bits 4*(c%8).. of word c//8
    np.testing.assert_array_equal(words, np.array(want, np.uint32))
    assert words[1] >> 12 == 0                           # padding bits are zero
    np.testing.assert_array_equal(q.quantized_values().numpy(), vals)


def test_q2_and_q8_packing_layouts():
    vals = np.array([[1, -1, 0, -2, 1, 1, -2, 0, 0, 0, 0, 0, 0, 0, 0, 1, -1]], np.float32)
    q = ember.tensor(vals).quantize(QuantScheme(Q.Q2F, store=PACKED), scales=1.0)
    words = raw_words(q)
    assert words.shape == (1, 2)
    want = [0, 0]
    for c, v in enumerate(vals[0].astype(int)):
        want[c // 16] |= (v & 0x3) << (2 * (c % 16))
    np.testing.assert_array_equal(words[0], want)
    q8 = ember.tensor(np.array([1, -2, 127, -127, 5], np.float32)).quantize(
        QuantScheme(Q.Q8S, store=PACKED), scales=1.0)
    w = raw_words(q8)
    assert w.shape == (2,)
    assert w[0] == (1 | (0xFE << 8) | (0x7F << 16) | (0x81 << 24)) and w[1] == 5


def test_packing_pads_each_row():
    x = randn(3, 9)
    q = ember.tensor(x).quantize(QuantScheme(Q.Q4S, [4], PACKED))
    assert raw_words(q).shape == (3, 2)
    np.testing.assert_array_equal(q.quantized_values().numpy(),
                                  ref_values(x, expand_to(ref_scales(x, Q.Q4S, [4]), x.shape, [4]), Q.Q4S))


def test_nbytes():
    x = ember.tensor(randn(64, 64))
    assert x.nbytes == 64 * 64 * 4 and ember.zeros(3, dtype=ember.int64).nbytes == 24
    q4 = x.quantize(QuantScheme(Q.Q4S, [32], PACKED))
    assert q4.nbytes * 8 == x.nbytes                     # values only; scales apart
    assert q4.quantization_scales().nbytes == 64 * 2 * 4
    assert x.quantize(QuantScheme(Q.Q8S)).nbytes * 4 == x.nbytes
    assert x.quantize(QuantScheme(Q.Q2S, store=PACKED)).nbytes * 16 == x.nbytes
    assert ember.tensor(randn(2, 9)).quantize(QuantScheme(Q.Q4S, store=PACKED)).nbytes == 2 * 2 * 4


# --- movement keeps tensors quantized ----------------------------------------------------------
SCHEMES = [QuantScheme(Q.Q8S), QuantScheme(Q.Q4S, store=PACKED), QuantScheme(Q.Q8S, [4]),
           QuantScheme(Q.Q4F, [4], PACKED), QuantScheme(Q.Q8F, [2, 4]), QuantScheme(Q.Q2S, [2, 4], PACKED)]
MOVES = [
    ("reshape", lambda t: t.reshape(2, 3, 8), lambda a: a.reshape(2, 3, 8)),
    ("unsqueeze", lambda t: t.unsqueeze(0), lambda a: a[None]),
    ("transpose", lambda t: t.T, lambda a: a.T),
    ("permute", lambda t: t.unsqueeze(0).permute(1, 0, 2), lambda a: a[None].transpose(1, 0, 2)),
    ("rows", lambda t: t[2:6], lambda a: a[2:6]),
    ("row", lambda t: t[3], lambda a: a[3]),
    ("columns", lambda t: t[:, 4:8], lambda a: a[:, 4:8]),
    ("step", lambda t: t[::2], lambda a: a[::2]),
    ("flip", lambda t: t.flip(0), lambda a: a[::-1]),
    ("flip last", lambda t: t.flip(1), lambda a: a[:, ::-1]),
    ("expand", lambda t: t.unsqueeze(0).expand(3, 6, 8), lambda a: np.broadcast_to(a, (3, 6, 8))),
    ("contiguous", lambda t: t.T.contiguous(), lambda a: a.T),
    ("index_select", lambda t: t.index_select(0, ember.tensor([5, 0, 0, 2])), lambda a: a[[5, 0, 0, 2]]),
    ("cat", lambda t: ember.cat([t, t], 0), lambda a: np.concatenate([a, a], 0)),
    ("stack", lambda t: ember.stack([t, t], 0), lambda a: np.stack([a, a])),
    ("split", lambda t: t.split(4, dim=1)[1], lambda a: a[:, 4:]),
]


# moves that cut or mix the 2 x 4 tiles of a 6 x 8 tensor: re-quantized
SPLITS_TILES = {"reshape", "permute", "step", "index_select"}


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.describe())
@pytest.mark.parametrize("name,fn,ref", MOVES, ids=[m[0] for m in MOVES])
def test_movement_keeps_tensors_quantized(scheme, name, fn, ref):
    x = randn(6, 8, seed=1)
    q = ember.tensor(x).quantize(scheme)
    d = q.dequantize().numpy()
    out = fn(q)
    assert out.is_quantized, name
    got = out.dtype.scheme
    assert got.value is scheme.value and got.store is scheme.store
    grid = () if got.block_size is None else tuple(
        -(-n // e) for n, e in zip(out.shape, block_extents(out.shape, got.block_size)))
    assert out.quantization_scales().shape == grid
    want = np.ascontiguousarray(ref(d))
    if scheme.block_size is not None and len(scheme.block_size) == 2 and name in SPLITS_TILES:
        assert got == scheme                           # re-quantized with the same scheme
        scales = ref_scales(want, scheme.value, scheme.block_size)
        np.testing.assert_array_equal(out.quantization_scales().numpy(), scales)
        want = ref_values(want, expand_to(scales, want.shape, scheme.block_size), scheme.value)
        np.testing.assert_array_equal(out.quantized_values().numpy(), want)
    else:                                              # whole blocks moved: exact
        np.testing.assert_array_equal(out.dequantize().numpy(), want)


def test_transpose_turns_row_blocks_into_column_blocks():
    q = ember.tensor(randn(4, 32)).quantize(QuantScheme(Q.Q4S, [16], PACKED))
    t = q.T
    assert t.dtype.scheme == QuantScheme(Q.Q4S, [16, 1], PACKED) and t.shape == (32, 4)
    np.testing.assert_array_equal(t.quantization_scales().numpy(), q.quantization_scales().numpy().T)
    assert t.T.dtype.scheme == QuantScheme(Q.Q4S, [1, 16], PACKED)
    q = ember.tensor(randn(4, 32)).quantize(QuantScheme(Q.Q8S, [2, 16]))
    assert q.T.dtype.scheme.block_size == (16, 2)


def test_gather_keeps_per_tensor_values():
    x = randn(3, 5)
    idx = ember.tensor([[0, 4, 4], [1, 1, 0], [2, 3, 2]])
    for scheme in (QuantScheme(Q.Q8S), QuantScheme(Q.Q2S, store=PACKED)):
        q = ember.tensor(x).quantize(scheme)
        g = q.gather(1, idx)
        assert g.is_quantized and g.dtype.scheme == scheme
        np.testing.assert_array_equal(g.dequantize().numpy(),
                                      np.take_along_axis(q.dequantize().numpy(), np.asarray(idx), 1))


def test_movement_that_splits_blocks_requantizes_with_the_same_scheme():
    x = randn(6, 8)
    scheme = QuantScheme(Q.Q8S, [4])
    q = ember.tensor(x).quantize(scheme)
    part = q[:, 1:7]                                     # blocks of 4 columns cut at 1 and 7
    assert part.is_quantized and part.dtype.scheme == scheme
    d = q.dequantize().numpy()[:, 1:7]
    want = ref_scales(d, Q.Q8S, [4])
    np.testing.assert_array_equal(part.quantization_scales().numpy(), want)
    np.testing.assert_array_equal(part.quantized_values().numpy(),
                                  ref_values(d, expand_to(want, d.shape, [4]), Q.Q8S))
    g = q.gather(1, ember.tensor([[1, 0]] * 6))          # values from different blocks
    assert g.is_quantized and g.dtype.scheme == scheme
    one = q[0, 0]                                        # one value: one (per-tensor) scale
    assert one.dtype.scheme.block_size is None and isinstance(one.quantization_scales().numpy(), np.ndarray)
    assert one.item() == q.dequantize().numpy()[0, 0]


def test_cat_of_different_per_tensor_scales_requantizes():
    a = ember.tensor([1.0, -2.0]).quantize(QuantScheme(Q.Q8S))
    b = ember.tensor([4.0, 0.5]).quantize(QuantScheme(Q.Q8S))
    c = ember.cat([a, b], 0)
    assert c.is_quantized and c.quantization_scales().item() == np.float32(4) / np.float32(127)
    np.testing.assert_array_equal(c.quantized_values().numpy(), [32, -64, 127, 16])
    same = ember.cat([a, a], 0)
    assert same.quantization_scales().item() == a.quantization_scales().item()


def test_layout_ops_do_not_copy_native_values_needlessly():
    q = ember.tensor(randn(4, 6)).quantize(QuantScheme(Q.Q8S))
    assert np.shares_memory(np.asarray(q.T._data.values), np.asarray(q._data.values))


# --- math ops -----------------------------------------------------------------------------------
def test_math_ops_dequantize_and_return_float():
    x = randn(4, 8)
    q = ember.tensor(x).quantize(QuantScheme(Q.Q8S, [4]))
    d = q.dequantize().numpy()
    other = ember.tensor(randn(4, 8, seed=5))
    cases = [(q.exp(), np.exp(d)), (q + 1, d + 1), (2.0 * q, 2 * d), (q * other, d * other.numpy()),
             (q - q, d - d), (q.sum(dim=1), d.sum(axis=1)), (q.max(), d.max()),
             (q.softmax(-1), None), (q.clamp(-0.5, 0.5), np.clip(d, -0.5, 0.5)),
             (q.sort(dim=1), np.sort(d, axis=1)), (q.cumsum(1), np.cumsum(d, 1)),
             (q.mask_fill(ember.tensor(d > 0), 0.0), np.where(d > 0, 0, d)),
             (q.cast(ember.float64), d.astype(np.float64)), (ember.zeros_like(q), np.zeros_like(d)),
             (q.slice_assign((0, slice(None)), 0.0), np.concatenate([np.zeros((1, 8), np.float32), d[1:]])),
             (q.scatter(1, ember.tensor([[0]] * 4), 1.0), np.concatenate([np.ones((4, 1)), d[:, 1:]], 1)),
             (ember.where(ember.tensor(d > 0), q, -q), np.abs(d))]
    for got, want in cases:
        assert not got.is_quantized and got.kind is ember.Float
        if want is not None:
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)
    assert (q > 0).dtype == ember.bool_
    np.testing.assert_array_equal((q > 0).numpy(), d > 0)
    assert q.argmax().item() == d.argmax()
    assert q.cast(ember.float64).dtype == ember.float64 and q.cast(q.dtype).dtype == ember.float32
    assert q.sum().dtype == ember.float32


def test_propagate_requantizes_results_with_the_input_scheme():
    x = randn(4, 8)
    scheme = QuantScheme(Q.Q4S, [4], PACKED)
    q = ember.tensor(x).quantize(scheme)
    d = q.dequantize().numpy()
    assert ember.get_quant_propagation() == "dequantize"
    ember.set_quant_propagation("propagate")
    assert ember.get_quant_propagation() == "propagate"
    e = q.exp()
    assert e.is_quantized and e.dtype.scheme == scheme
    want = ember.tensor(d).exp().numpy()             # Ember's exp (numpy's may differ by an ulp)
    np.testing.assert_array_equal(e.quantization_scales().numpy(), ref_scales(want, Q.Q4S, [4]))
    s = (q + 1.0) * 2.0
    assert s.is_quantized and s.dtype.scheme == scheme
    w = ember.tensor(randn(8, 3, seed=2))
    assert (q @ w).is_quantized
    assert q.sum().dtype == ember.float32               # a 0-d result cannot hold blocks of 4
    assert (q > 0).dtype == ember.bool_
    ember.set_quant_propagation("dequantize")
    assert not q.exp().is_quantized
    with pytest.raises(ValueError, match="propagate"):
        ember.set_quant_propagation("sometimes")


# --- matmul -------------------------------------------------------------------------------------
MM_SCHEMES = [QuantScheme(Q.Q8S), QuantScheme(Q.Q8F, [8]), QuantScheme(Q.Q4S, [16], PACKED),
              QuantScheme(Q.Q2F, [2, 8], PACKED), QuantScheme(Q.Q4F, [3, 5], PACKED)]


@pytest.fixture(params=[None, 40], ids=["default tiles", "many tiles"])
def tiles(request, monkeypatch):
    """The CPU kernel's tile size: the default, and a tiny one (many partial tiles)."""
    from ember.backends.cpu import quant
    if request.param is not None:
        monkeypatch.setattr(quant, "TILE_ELEMENTS", request.param)


@pytest.mark.parametrize("scheme", MM_SCHEMES, ids=lambda s: s.describe())
def test_quantized_matmul_on_either_side(scheme, tiles):
    w = randn(20, 37, seed=1)
    q = ember.tensor(w).quantize(scheme)
    d = q.dequantize().numpy().astype(np.float64)
    x = randn(5, 20, seed=2)
    y = randn(37, 6, seed=3)
    right = ember.tensor(x) @ q
    left = q @ ember.tensor(y)
    assert right.dtype == ember.float32 and not right.is_quantized
    np.testing.assert_allclose(right.numpy(), x @ d, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(left.numpy(), d @ y, rtol=1e-5, atol=1e-5)
    # transposed (strided) operands and a transposed quantized matrix
    np.testing.assert_allclose((ember.tensor(y.T) @ q.T).numpy(), y.T @ d.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose((q.T @ ember.tensor(x.T)).numpy(), d.T @ x.T, rtol=1e-5, atol=1e-5)


def test_quantized_matmul_shapes_and_dtypes(tiles):
    w = randn(12, 7)
    q = ember.tensor(w).quantize(QuantScheme(Q.Q8S, [4]))
    d = q.dequantize().numpy().astype(np.float64)
    v = randn(12, seed=4)
    xb = randn(3, 2, 12, seed=5)
    yb = randn(2, 7, 5, seed=6)
    cases = [(ember.tensor(v) @ q, v @ d), (q @ ember.tensor(randn(7, seed=7)), d @ randn(7, seed=7)),
             (ember.tensor(xb) @ q, xb @ d), (q @ ember.tensor(yb), d @ yb),
             (ember.tensor(v.astype(np.float64)) @ q, v @ d)]
    for got, want in cases:
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    assert cases[-1][0].dtype == ember.float64
    # a batch of quantized matrices, broadcast against the other operand
    wb = randn(2, 1, 6, 4, seed=8)
    qb = ember.tensor(wb).quantize(QuantScheme(Q.Q4S, [2, 2], PACKED))
    db = qb.dequantize().numpy().astype(np.float64)
    x3 = randn(3, 5, 6, seed=9)
    np.testing.assert_allclose((ember.tensor(x3) @ qb).numpy(), x3 @ db, rtol=1e-5, atol=1e-5)
    # both operands quantized
    q2 = ember.tensor(randn(5, 12, seed=10)).quantize(QuantScheme(Q.Q8S))
    np.testing.assert_allclose((q2 @ q).numpy(), q2.dequantize().numpy() @ d, rtol=1e-5, atol=1e-5)


def test_matmul_does_not_dequantize_the_whole_matrix(monkeypatch, tiles):
    from ember.quant import storage as quant
    q = ember.tensor(randn(16, 8)).quantize(QuantScheme(Q.Q4S, [8], PACKED))
    x, y = ember.tensor(randn(3, 16)), ember.tensor(randn(16, 2))

    def refuse(*args, **kwargs):
        raise AssertionError("matmul dequantized a whole operand")

    monkeypatch.setattr(quant, "dequantize", refuse)
    assert (x @ q).shape == (3, 8) and (q.T @ y).shape == (8, 2)


# --- errors and plumbing ------------------------------------------------------------------------
def test_errors():
    with pytest.raises(TypeError, match="quantize: expected a Float tensor"):
        ember.tensor([1, 2]).quantize(QuantScheme(Q.Q8S))
    with pytest.raises(TypeError, match="QuantScheme"):
        ember.tensor([1.0]).quantize("Q8S")
    for bad in (np.nan, np.inf, -np.inf):
        x = ember.tensor([1.0, bad, 2.0])
        with pytest.raises(ValueError, match="quantize.*NaN or infinite"):
            x.quantize(QuantScheme(Q.Q8S))
        with pytest.raises(ValueError, match="quantize.*NaN or infinite"):
            x.quantize(QuantScheme(Q.Q8S, [2]))
        with pytest.raises(ValueError, match="quantize.*NaN or infinite"):
            x.quantize(QuantScheme(Q.Q8S), scales=1.0)
    x = ember.tensor(randn(4, 8))
    with pytest.raises(ValueError, match=r"scales of shape \(4,\) do not match the scale grid \(4, 2\)"):
        x.quantize(QuantScheme(Q.Q8S, [4]), scales=np.ones(4))
    with pytest.raises(ValueError, match="scales of shape"):
        x.quantize(QuantScheme(Q.Q8S), scales=[1.0])
    for bad in (0.0, -1.0, np.nan, 1e-50):
        with pytest.raises(ValueError, match="positive and finite"):
            x.quantize(QuantScheme(Q.Q8S), scales=bad)
    with pytest.raises(ValueError, match=r"block_size \[2, 4\] needs a tensor with at least 2 dims"):
        ember.tensor([1.0, 2.0]).quantize(QuantScheme(Q.Q8S, [2, 4]))
    with pytest.raises(TypeError, match="quantization_scales: the tensor is not quantized"):
        x.quantization_scales()
    with pytest.raises(TypeError, match="quantized_values"):
        x.quantized_values()


def test_interop_and_copies():
    x = randn(3, 8)
    q = ember.tensor(x).quantize(QuantScheme(Q.Q4S, [4], PACKED))
    d = q.dequantize().numpy()
    np.testing.assert_array_equal(q.numpy(), d)
    np.testing.assert_array_equal(np.asarray(q), d)
    assert "qfloat[Q4S, block=[4], PACKED_U32]" in repr(q)
    assert q[0, 0].item() == d[0, 0]
    c = q.clone()
    assert c.is_quantized and c.dtype == q.dtype
    assert not np.shares_memory(raw_words(c), raw_words(q))
    np.testing.assert_array_equal(c.numpy(), d)
    assert q.to("cpu") is q
    assert q.dequantize().dequantize().dtype == ember.float32
    assert ember.tensor(x).dequantize().dtype == ember.float32   # not quantized: unchanged


def test_empty_tensors():
    q = ember.zeros((0, 8)).quantize(QuantScheme(Q.Q8S, [4]))
    assert q.shape == (0, 8) and q.quantization_scales().shape == (0, 2)
    assert q.dequantize().shape == (0, 8)
    assert (ember.zeros((3, 0)) @ ember.zeros((0, 5)).quantize(QuantScheme(Q.Q8S))).shape == (3, 5)


def test_quant_kernels_hit_the_disk_cache(tmp_path):
    """A second process loads every quantization kernel from the disk cache."""
    code = """
        import numpy as np
        import ember
        from ember import QuantScheme, QuantStore, QuantValue
        x = ember.tensor(np.arange(48.0, dtype=np.float32).reshape(6, 8))
        for s in (QuantScheme(QuantValue.Q8S), QuantScheme(QuantValue.Q4S, [4], QuantStore.PACKED_U32)):
            q = x.quantize(s)
            (q.dequantize(), x @ q.T, q.quantized_values(), q.T.contiguous())
    """

    def run():
        return compiled_in_new_process(code, tmp_path / "cache", timeout=900)

    assert any("quantize_blocks" in name for name in run())
    assert run() == []
