"""``t[key] = value`` (copy-on-write rebinding) against views, aliases, fusion and autodiff.

docs/decisions.md "__setitem__": the assignment computes a new value with recorded ops
(slice_assign / where / scatter) and rebinds ``t`` to it; no storage is ever written.  Each
test pins one consequence, under both checkpointing strategies where autodiff takes part.
"""
import numpy as np
import pytest

import ember
from ember import fusion

F64 = ember.float64


@pytest.fixture
def fused():
    previous = fusion.set_enabled(True)
    yield
    fusion.set_enabled(previous)


def test_views_taken_before_keep_the_old_value():
    x = ember.tensor([1.0, 2.0, 3.0, 4.0])
    view = x[1:]
    rows = x.reshape(2, 2)
    x[1] = 20.0
    np.testing.assert_array_equal(x.numpy(), [1, 20, 3, 4])
    np.testing.assert_array_equal(view.numpy(), [2, 3, 4])
    np.testing.assert_array_equal(rows.numpy(), [[1, 2], [3, 4]])


def test_assigning_into_a_view_leaves_its_base_alone():
    x = ember.tensor([1.0, 2.0, 3.0, 4.0])
    view = x[::2]
    view[0] = -1.0
    np.testing.assert_array_equal(view.numpy(), [-1, 3])
    np.testing.assert_array_equal(x.numpy(), [1, 2, 3, 4])


def test_aliases_of_the_same_object_see_the_assignment():
    x = ember.tensor([1, 2, 3])
    alias = x
    same_shape = x.reshape(3)     # a no-op reshape is the tensor itself
    x[0] = 9
    assert alias.tolist() == [9, 2, 3] and same_shape.tolist() == [9, 2, 3]


def test_positive_and_asarray_copy_are_new_objects():
    import ember.array_api as xp
    x = ember.tensor([1, 2, 3])
    copies = [+x, xp.asarray(x, copy=True), xp.astype(x, x.dtype)]
    shared = xp.asarray(x, copy=False)
    x[0] = 9
    for c in copies:
        assert c.tolist() == [1, 2, 3]
    assert shared is x and shared.tolist() == [9, 2, 3]


def test_a_deferred_reader_computes_from_the_old_value(fused):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(128)          # (tiny tensors run at once: fusion.MIN_SIZE)
    x = ember.tensor(a)
    y = x * 2.0 + 1.0                     # deferred: reads x's storage later
    assert isinstance(y._buf, fusion.Deferred)
    x[:10] = 0.0
    np.testing.assert_allclose(y.numpy(), a * 2 + 1)
    np.testing.assert_array_equal(x.numpy()[:10], 0.0)


def test_assigning_into_a_deferred_tensor(fused):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(128), rng.standard_normal(128)
    x = ember.tensor(a) * ember.tensor(b)     # x itself is pending
    z = x + 1.0                               # and so is a reader of it
    assert isinstance(x._buf, fusion.Deferred) and isinstance(z._buf, fusion.Deferred)
    x[x > 0] = 0.0
    np.testing.assert_allclose(x.numpy(), np.where(a * b > 0, 0.0, a * b))
    np.testing.assert_allclose(z.numpy(), a * b + 1)


def test_a_pending_backward_reads_the_recorded_values(leaf):
    """Steps save the values they were recorded with: a constant assigned into afterwards (a
    tensor without autodiff, saved by ``mul``) and the tracked tensor itself."""
    w = leaf([1.0, 2.0, 3.0])
    c = ember.tensor([4.0, 5.0, 6.0], dtype=F64)     # a constant of the graph
    y = (w * c).exp()                                # mul saves c; under BALANCED y is a recipe
    loss = (y * y).sum()
    c[0] = 100.0
    y_before = np.exp(np.array([1.0, 2.0, 3.0]) * [4, 5, 6])
    grad = w.grad(loss.backward()).numpy()
    np.testing.assert_allclose(grad, 2 * y_before ** 2 * [4, 5, 6], rtol=1e-12)


def test_assignment_into_a_tracked_tensor_is_recorded(leaf, device):
    w = leaf([1.0, 2.0, 3.0, 4.0])
    v = leaf([10.0, 20.0])
    x = w * 2.0
    first = (x * x).sum()           # uses x before the assignment
    x[1:3] = v * 3.0                # x is now slice_assign(old x, 3v)
    assert x.is_tracked()
    second = (x * w).sum()
    grads = (first + second).backward()
    wv = np.array([1.0, 2.0, 3.0, 4.0])
    kept = np.array([1.0, 0.0, 0.0, 1.0])            # entries of old x that survive
    new_x = np.array([2.0, 30.0, 60.0, 8.0])
    want_w = 8 * wv + new_x + 2 * wv * kept          # d first + d (x * w) through x and w
    np.testing.assert_allclose(w.grad(grads).numpy(), want_w, rtol=1e-12)
    np.testing.assert_allclose(v.grad(grads).numpy(), 3 * wv[1:3], rtol=1e-12)


@pytest.mark.parametrize("key", ["mask", "int_array", "leading_mask"])
def test_masked_and_integer_array_assignment_gradients(leaf, key):
    w = leaf([[1.0, -2.0], [3.0, -4.0], [5.0, 6.0]])
    x = w.sin()                     # memory-bound: a recipe under BALANCED
    if key == "mask":
        x[w < 0] = 0.5
        keep = np.array([[1, 0], [1, 0], [1, 1]])
    elif key == "int_array":
        x[ember.tensor([0, 2]), ember.tensor([1, 0])] = ember.tensor([7.0, 8.0], dtype=F64)
        keep = np.array([[1, 0], [1, 1], [0, 1]])
    else:
        x[ember.tensor([True, False, True])] = 0.0
        keep = np.array([[0, 0], [1, 1], [0, 0]])
    loss = (x * x).sum()
    wv = np.array([[1.0, -2.0], [3.0, -4.0], [5.0, 6.0]])
    grad = w.grad(loss.backward()).numpy()
    np.testing.assert_allclose(grad, keep * 2 * np.sin(wv) * np.cos(wv), rtol=1e-12)


def test_balanced_recompute_of_a_tensor_assigned_into_later(leaf, device):
    """Under BALANCED, ``x = w.sin()`` is kept as a recipe; backward recomputes it from ``w``
    after ``x`` was rebound, and must get the values of before the assignment."""
    w = leaf([0.5, 1.0, 1.5])
    x = w.sin()
    y = x * x                       # needs x in backward (a recipe under BALANCED)
    x[0] = 10.0
    loss = y.sum() + x.sum()
    wv = np.array([0.5, 1.0, 1.5])
    grad = w.grad(loss.backward()).numpy()
    np.testing.assert_allclose(grad, 2 * np.sin(wv) * np.cos(wv) + np.cos(wv) * [0, 1, 1],
                               rtol=1e-12)
    np.testing.assert_allclose(x.numpy(), [10.0, np.sin(1.0), np.sin(1.5)])


def test_a_marked_leaf_refuses_assignment(leaf):
    w = leaf([1.0, 2.0])
    with pytest.raises(ValueError, match="marked leaf"):
        w[0] = 0.0
    d = w.detach().set_require_grad(False)     # an untracked copy takes it
    d[0] = 0.0
    assert d.tolist() == [0.0, 2.0] and w.tolist() == [1.0, 2.0]


def test_an_autodiff_value_makes_the_target_autodiff(device):
    v = ember.tensor([5.0], dtype=F64, device=device).require_grad()
    x = ember.zeros(3, dtype=F64)
    x[1:2] = v
    assert x.is_autodiff() and x.is_tracked()
    grad = v.grad((x * 2.0).sum().backward())
    np.testing.assert_allclose(grad.numpy(), [2.0])
