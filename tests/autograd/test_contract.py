"""One test (or a few) per rule of the autodiff contract, DESIGN §4 items 1-10."""
import gc
import tracemalloc

import numpy as np
import pytest

import ember


def values(t):
    return np.asarray(t)


# --- 1. association ------------------------------------------------------------------
def test_autodiff_association_is_idempotent_and_marks_nothing(device):
    t = ember.tensor([1.0, 2.0])
    assert not t.is_autodiff()
    a = t.autodiff()
    assert a.is_autodiff() and not t.is_autodiff()          # values: the original is unchanged
    assert a.autodiff() is a
    b = ember.Tensor.from_inner(t)
    assert b.is_autodiff() and ember.Tensor.from_inner(b) is b
    assert not a.is_require_grad() and not a.is_tracked()
    assert ember.tensor([1.0], device=device).is_autodiff()


def test_autodiff_uses_the_device_strategy(device):
    t = ember.tensor([1.0], device=device)
    assert t.device.checkpointing is device.checkpointing
    assert ember.tensor([1.0]).autodiff().device.checkpointing is ember.CheckpointingStrategy.NONE


# --- 2. without_autodiff / inner ---------------------------------------------------------
def test_without_autodiff_drops_association_and_graph(leaf):
    w = leaf([1.0, 2.0])
    y = w * 3
    for plain in (y.without_autodiff(), y.inner(), w.inner()):
        assert not plain.is_autodiff() and not plain.is_tracked()
    p = y.inner()
    assert p.inner() is p and p.without_autodiff() is p
    np.testing.assert_array_equal(values(p), [3.0, 6.0])
    assert y.is_tracked()                                   # unchanged


def test_non_autodiff_operand_is_a_constant(leaf):
    w = leaf([1.0, 2.0])
    c = ember.tensor([5.0, 7.0], dtype=ember.float64)
    out = w * c
    assert out.is_autodiff() and out.is_tracked()
    grads = out.sum().backward()
    np.testing.assert_array_equal(values(w.grad(grads)), [5.0, 7.0])
    assert c.grad(grads) is None


# --- 3. require_grad ---------------------------------------------------------------------
def test_require_grad_marks_a_float_leaf(device):
    t = ember.tensor([1.0], device=device)
    w = t.require_grad()
    assert w.is_require_grad() and w.is_tracked() and not t.is_require_grad()
    assert w.require_grad() is w
    assert t.set_require_grad(True).is_require_grad()


def test_require_grad_without_autodiff_does_nothing():
    t = ember.tensor([1.0])
    assert t.require_grad() is t and not t.is_require_grad()


def test_require_grad_on_op_output_raises(leaf):
    y = leaf([1.0]) + 1
    with pytest.raises(ValueError, match="only leaves"):
        y.require_grad()


@pytest.mark.parametrize("dtype", [ember.int32, ember.int64, ember.bool_])
def test_require_grad_on_int_or_bool_raises_type_error(device, dtype):
    with pytest.raises(TypeError):
        ember.tensor([1], dtype=dtype, device=device).require_grad()


def test_set_require_grad_false_gives_a_fresh_untracked_leaf(leaf):
    w = leaf([1.0])
    u = w.set_require_grad(False)
    assert not u.is_require_grad() and not u.is_tracked() and u.is_autodiff()
    assert w.is_require_grad()
    y = (w * 2 + 1) * 3
    assert not y.set_require_grad(False).is_tracked()


# --- 4. is_require_grad / is_tracked -------------------------------------------------------
def test_tracking_flags(leaf, device):
    w = leaf([1.0, 2.0])
    c = ember.tensor([1.0, 1.0], dtype=ember.float64, device=device)
    y = (w * c).exp()
    assert w.is_require_grad() and w.is_tracked()
    assert not y.is_require_grad() and y.is_tracked()
    assert not c.is_tracked() and not (c * 2).is_tracked() and (c * 2).is_autodiff()
    loss = y.sum()
    loss.backward()
    assert loss.is_tracked() and y.is_tracked()             # says nothing about consumption


def test_int_results_are_not_tracked(leaf):
    w = leaf([1.0, 3.0, 2.0])
    assert not (w > 1).is_tracked() and not w.argmax().is_tracked()
    assert w.sort_with_indices()[0].is_tracked() and not w.argsort().is_tracked()


# --- 5. backward ---------------------------------------------------------------------------
def test_backward_returns_gradients(leaf):
    w = leaf([1.0, 2.0])
    grads = (w * w).sum().backward()
    assert isinstance(grads, ember.Gradients)
    np.testing.assert_array_equal(values(w.grad(grads)), [2.0, 4.0])


def test_backward_on_untracked_tensor_says_how_to_fix(device):
    for t in (ember.tensor([1.0]), ember.tensor([1.0], device=device) * 2):
        with pytest.raises(RuntimeError, match=r"\.autodiff\(\)\.require_grad\(\)"):
            t.backward()
    with pytest.raises(ember.NotTrackedError):
        ember.tensor([1.0]).backward()


def test_non_scalar_root_is_seeded_with_ones(leaf):
    w = leaf([[1.0, 2.0], [3.0, 4.0]])
    grads = (w * 3).backward()
    np.testing.assert_array_equal(values(w.grad(grads)), np.full((2, 2), 3.0))


def test_backward_of_a_leaf_itself(leaf):
    w = leaf([1.0, 2.0])
    np.testing.assert_array_equal(values(w.grad(w.backward())), [1.0, 1.0])


# --- 6. one-shot consumption, clones ------------------------------------------------------------
def test_second_backward_through_consumed_steps_raises(leaf):
    w = leaf([1.0, 2.0])
    loss = (w * w).sum()
    loss.backward()
    with pytest.raises(ember.GraphConsumedError, match="already consumed"):
        loss.backward()


def test_two_losses_sharing_an_intermediate(leaf):
    w = leaf([1.0, 2.0])
    h = (w * 3).exp()
    a, b = h.sum(), (h * h).sum()
    a.backward()
    with pytest.raises(ember.GraphConsumedError):
        b.backward()                                         # h's steps were consumed by a
    h = (w * 3).exp()
    grads = (h.sum() + (h * h).sum()).backward()             # add the losses first: works
    e = np.exp(3 * np.array([1.0, 2.0]))
    np.testing.assert_allclose(values(w.grad(grads)), 3 * e + 6 * e * e)


def test_clones_share_steps(leaf):
    w = leaf([1.0, 2.0])
    y = w * 2
    z = y.clone()
    assert z.is_tracked()
    (z * 1).sum().backward()
    with pytest.raises(ember.GraphConsumedError):
        y.sum().backward()
    c = w.clone()
    assert c.is_require_grad()
    grads = (c * 5).sum().backward()
    np.testing.assert_array_equal(values(w.grad(grads)), [5.0, 5.0])   # same identity


# --- 7. pre-check: a rejected backward consumes nothing ---------------------------------------------
def test_rejected_backward_leaves_fresh_branches_usable(leaf):
    w = leaf([1.0, 2.0])
    used = w * 2
    used.sum().backward()                                    # consumes `used`'s step
    fresh = w.exp()                                          # a branch nobody consumed
    with pytest.raises(ember.GraphConsumedError):
        (fresh.sum() + used.sum()).backward()                # reaches a consumed step: refused
    grads = fresh.sum().backward()                           # the fresh branch still works
    np.testing.assert_allclose(values(w.grad(grads)), np.exp([1.0, 2.0]))


def test_leaves_are_reused_by_fresh_forwards(leaf):
    w = leaf([1.0, 2.0])
    for k in range(1, 4):
        grads = (w * k).sum().backward()
        np.testing.assert_array_equal(values(w.grad(grads)), [k, k])


# --- 8. grad lookup --------------------------------------------------------------------------------
def test_grad_is_none_for_each_listed_case(leaf, device):
    w = leaf([1.0, 2.0])
    other = leaf([3.0])
    h = w * 2
    i = ember.tensor([1, 2], device=device)
    grads = (h * 3).sum().backward()
    assert ember.tensor([1.0]).grad(grads) is None           # not autodiff-enabled
    assert w.inner().grad(grads) is None
    assert h.grad(grads) is None                             # not a marked leaf
    assert other.grad(grads) is None                         # not in grads
    assert i.grad(grads) is None                             # not a float tensor
    assert w.grad(grads) is not None


def test_repeated_grad_calls_share_storage_and_remove_replace(leaf, device):
    w = leaf([1.0, 2.0])
    grads = (w * w).sum().backward()
    g1, g2 = w.grad(grads), w.grad(grads)
    assert not g1.is_autodiff()
    assert np.shares_memory(values(g1), values(g2))
    removed = w.grad_remove(grads)
    assert np.shares_memory(values(removed), values(g1))
    assert w.grad(grads) is None and len(grads) == 0
    new = ember.tensor([9.0, 9.0], dtype=ember.float64)
    w.grad_replace(grads, new)
    np.testing.assert_array_equal(values(w.grad(grads)), [9.0, 9.0])
    w.grad_replace(grads, new * 2)                           # replaces, never accumulates
    np.testing.assert_array_equal(values(w.grad(grads)), [18.0, 18.0])


def test_grad_replace_errors(leaf):
    w = leaf([1.0, 2.0])
    grads = (w * w).sum().backward()
    with pytest.raises(ValueError, match="not autodiff"):
        w.inner().grad_replace(grads, ember.tensor([1.0, 1.0]))
    with pytest.raises(ValueError, match="without autodiff"):
        w.grad_replace(grads, ember.tensor([1.0, 1.0]).autodiff())
    with pytest.raises(ValueError, match="shape"):
        w.grad_replace(grads, ember.tensor([1.0, 1.0, 1.0]))


# --- 9. detach ------------------------------------------------------------------------------------
def test_detach_starts_a_new_lineage(leaf):
    w = leaf([1.0, 2.0])
    h = w * 2
    d = h.detach()
    assert d.is_autodiff() and not d.is_tracked()
    np.testing.assert_array_equal(values(d), [2.0, 4.0])
    with pytest.raises(RuntimeError):
        (d * 3).sum().backward()                             # untracked: no graph restored


def test_detached_marked_leaf_is_a_new_marked_leaf(leaf):
    w = leaf([1.0, 2.0])
    v = w.detach()
    assert v.is_require_grad()
    grads = (w * 2 + v * 3).sum().backward()
    np.testing.assert_array_equal(values(w.grad(grads)), [2.0, 2.0])
    np.testing.assert_array_equal(values(v.grad(grads)), [3.0, 3.0])


# --- 10. accumulation, first order -----------------------------------------------------------------
def test_leaf_used_several_times_accumulates(leaf):
    w = leaf([1.0, 2.0])
    grads = (w * w * w + w + w.exp()).sum().backward()
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(values(w.grad(grads)), 3 * x * x + 1 + np.exp(x))


def test_gradients_are_first_order(leaf):
    w = leaf([3.0])
    g = w.grad((w * w).sum().backward())
    assert not g.is_autodiff() and not g.is_tracked()


# --- graph walk: deep chains, memory -----------------------------------------------------------------
def test_twenty_thousand_node_chain(leaf):
    w = leaf([1.0])
    y = w
    for _ in range(20_000):
        y = y * 1.0001
    grads = y.sum().backward()
    np.testing.assert_allclose(values(w.grad(grads)), [1.0001 ** 20_000], rtol=1e-9)


def _live_counts():
    gc.collect()
    counts = {}
    for o in gc.get_objects():
        name = type(o).__name__
        if name in ("Tensor", "Node", "Recipe", "ndarray", "Gradients"):
            counts[name] = counts.get(name, 0) + 1
    return counts


def test_training_loop_holds_constant_memory(leaf):
    w = leaf(np.ones((16, 16)))
    x = ember.tensor(np.ones((8, 16)), dtype=ember.float64)

    def step(w):
        loss = ((x @ w).tanh() * 0.5).exp().sum()
        g = w.grad(loss.backward())
        return (w.inner() - g * 1e-3).autodiff().require_grad()

    for _ in range(1000):
        w = step(w)
    before = _live_counts()
    for _ in range(9000):
        w = step(w)
    assert _live_counts() == before            # no graph object or buffer survives its iteration
    tracemalloc.start()
    for _ in range(200):
        w = step(w)
    gc.collect()
    grown, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes still allocated after 200 more steps"


def test_backward_releases_saved_tensors(leaf):
    import weakref
    w = leaf(np.ones(4))
    h = (w * 2).exp()
    loss = (h * h).sum()
    saved = loss._node.parents[0].x                     # what mul's step keeps
    refs = [weakref.ref(t) for t in saved if t is not None]
    assert refs
    del saved, h
    loss.backward()
    gc.collect()
    assert all(r() is None for r in refs)
