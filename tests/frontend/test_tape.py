"""GradientTape: the paper's listings 1-2, tape semantics, staged gradients."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf
from stageflow.core import context
from stageflow.runtime.eager import EagerTrace


def test_listing_1_nested_tapes():
    x = sf.constant(3.0)
    with sf.GradientTape() as t1:
        with sf.GradientTape() as t2:
            t1.watch(x)
            t2.watch(x)
            y = x * x
        dy_dx = t2.gradient(y, x)
    d2y_dx2 = t1.gradient(dy_dx, x)
    assert float(dy_dx) == 6.0 and float(d2y_dx2) == 2.0


def test_listing_2_variables_are_watched_automatically():
    x = sf.Variable(3.0)
    with sf.GradientTape() as t1:
        with sf.GradientTape() as t2:
            y = x * x
        dy_dx = t2.gradient(y, x)
    d2y_dx2 = t1.gradient(dy_dx, x)
    assert float(dy_dx) == 6.0 and float(d2y_dx2) == 2.0


def test_only_watched_values_are_recorded():
    x, z = sf.constant(2.0), sf.constant(5.0)
    with sf.GradientTape() as tape:
        tape.watch(x)
        unrelated = z * z
        y = x * z
    assert len(tape._records) == 1
    dx, dz = tape.gradient(y, [x, z])
    assert float(dx) == 5.0 and dz is None
    assert unrelated is not None


def test_non_persistent_tape_answers_once():
    x = sf.constant(2.0)
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    tape.gradient(y, x)
    with pytest.raises(RuntimeError, match="persistent"):
        tape.gradient(y, x)


def test_persistent_tape_answers_repeatedly():
    x = sf.constant(2.0)
    with sf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
        z = y * x
    assert float(tape.gradient(y, x)) == 4.0
    assert float(tape.gradient(z, x)) == 12.0


def test_watch_accessed_variables_off_and_untrainable_variables():
    v = sf.Variable(2.0)
    frozen = sf.Variable(3.0, trainable=False)
    with sf.GradientTape(watch_accessed_variables=False) as tape:
        y = v * v
    assert tape.gradient(y, v) is None
    with sf.GradientTape() as tape:
        y = v * frozen
    dv, dfrozen = tape.gradient(y, [v, frozen])
    assert float(dv) == 3.0 and dfrozen is None


def test_nested_sources_and_non_scalar_targets():
    a = sf.constant([1.0, 2.0])
    b = sf.constant([[3.0], [4.0]])
    with sf.GradientTape() as tape:
        tape.watch({"a": a, "b": b})
        y = a * b  # (2, 2): gradients of the sum
    grads = tape.gradient(y, {"a": a, "pair": (b, a)})
    np.testing.assert_allclose(grads["a"].numpy(), [7.0, 7.0])
    np.testing.assert_allclose(grads["pair"][0].numpy(), [[3.0], [3.0]])


def test_output_gradients_weight_the_targets():
    x = sf.constant([1.0, 2.0])
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    g = tape.gradient(y, x, output_gradients=sf.constant([10.0, 100.0]))
    np.testing.assert_allclose(g.numpy(), [20.0, 400.0])


def test_integer_sources_get_no_gradient():
    i = sf.constant(3)
    with sf.GradientTape() as tape:
        tape.watch(i)
        y = i * i
    assert tape.gradient(y, i) is None


def test_jacobian():
    x = sf.constant([1.0, 2.0, 3.0])
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    jac = tape.jacobian(y, x)
    np.testing.assert_allclose(jac.numpy(), np.diag([2.0, 4.0, 6.0]))


def test_grad_and_value_and_grad():
    def f(x, y):
        return sf.reduce_sum(x * x * y)

    x, y = sf.constant([1.0, 2.0]), sf.constant([3.0, 4.0])
    np.testing.assert_allclose(sf.grad(f)(x, y).numpy(), [6.0, 16.0])
    value, (gx, gy) = sf.value_and_grad(f, argnums=(0, 1))(x, y)
    assert float(value) == 19.0
    np.testing.assert_allclose(gy.numpy(), [1.0, 4.0])
    np.testing.assert_allclose(gx.numpy(), [6.0, 16.0])


def test_stop_gradient():
    x = sf.constant(2.0)
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = x * sf.stop_gradient(x)
    assert float(tape.gradient(y, x)) == 2.0


def test_custom_gradient():
    @sf.custom_gradient
    def clipped_identity(x):
        def grad(dy):
            return sf.clip_by_value(dy, -1.0, 1.0)
        return sf.identity(x), grad

    x = sf.constant([1.0, 2.0])
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = clipped_identity(x) * 5.0
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), [1.0, 1.0])


def test_tape_inside_staged_function_gives_one_graph():
    w = sf.Variable([[0.0], [0.0]])
    b = sf.Variable(0.0)

    @sf.function
    def train_step(x, y):
        with sf.GradientTape() as tape:
            loss = sf.reduce_mean(sf.square(sf.matmul(x, w) + b - y))
        dw, db = tape.gradient(loss, [w, b])
        w.assign_sub(0.1 * dw)
        b.assign_sub(0.1 * db)
        return loss

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 2)).astype(np.float32)
    y = (x @ np.array([[2.0], [-3.0]]) + 0.5).astype(np.float32)
    losses = [float(train_step(x, y)) for _ in range(200)]
    assert train_step.tracing_count == 1
    assert losses[-1] < 1e-4 < losses[0]
    np.testing.assert_allclose(w.numpy(), [[2.0], [-3.0]], atol=1e-2)
    np.testing.assert_allclose(float(b.read_value()), 0.5, atol=1e-2)
    names = [eq.primitive.name for eq in train_step.get_concrete_function(
        sf.TensorSpec([64, 2]), sf.TensorSpec([64, 1])).graph.equations]
    assert "matmul" in names and names.count("assign_variable") == 2


def test_staged_function_under_an_eager_tape_records_its_ops():
    @sf.function
    def f(x):
        return sf.reduce_sum(sf.tanh(x) * x)

    x = sf.constant([0.5, -1.0, 2.0])
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    with sf.GradientTape() as eager_tape:
        eager_tape.watch(x)
        y_eager = f.python_function(x)
    np.testing.assert_allclose(float(y), float(y_eager), rtol=1e-6)
    assert len(tape._records) == 1  # one op: the forward graph; its backward is staged too
    np.testing.assert_allclose(tape.gradient(y, x).numpy(),
                               eager_tape.gradient(y_eager, x).numpy(), rtol=1e-6)


def test_staged_backward_reuses_the_forward_randomness():
    @sf.function
    def f(x):
        return sf.nn.dropout(x, 0.5) * 3.0

    x = sf.ones((1000,))
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    g = tape.gradient(y, x).numpy()
    np.testing.assert_allclose(g, y.numpy())  # d(3 * mask * x / 0.5)/dx = y / x, x = 1
    assert 0.3 < (g == 0).mean() < 0.7


def test_higher_order_through_staged_functions():
    @sf.function
    def cube(x):
        return x * x * x

    x = sf.constant(2.0)
    with sf.GradientTape() as outer:
        outer.watch(x)
        with sf.GradientTape() as inner:
            inner.watch(x)
            y = cube(x)
        dy = inner.gradient(y, x)
    assert float(dy) == 12.0
    assert float(outer.gradient(dy, x)) == 12.0


def test_variables_read_inside_a_staged_function_get_gradients():
    v = sf.Variable(3.0)

    @sf.function
    def f(x):
        return v * x

    with sf.GradientTape() as tape:
        y = f(sf.constant(2.0))
    assert float(tape.gradient(y, v)) == 2.0


STAGED_CASES = {
    "softmax": lambda x: sf.nn.softmax(x * 2.0),
    "logsumexp": lambda x: sf.reduce_logsumexp(x, axis=1),
    "matmul": lambda x: sf.matmul(x, sf.transpose(x)) / 3.0,
    "gelu": lambda x: sf.nn.gelu(x, approximate=True),
    "slice_concat": lambda x: sf.concat([x[:, ::2], sf.tanh(x[:, 1:])], axis=1),
    "reduce_max": lambda x: sf.reduce_max(x, axis=0) * sf.reduce_mean(x),
    "pad_gather": lambda x: sf.gather(sf.pad(x, [(1, 0), (0, 2)]), [0, 2], axis=0),
    "conv": lambda x: sf.nn.conv2d(sf.reshape(x, (1, 3, 4, 1)),
                                   sf.constant(np.ones((2, 2, 1, 2)) * 0.5), 1, "SAME"),
}


@pytest.mark.parametrize("name", sorted(STAGED_CASES))
def test_gradients_through_a_staged_function_match_eager(name):
    """Eager gradients are checked against finite differences in test_gradients.py; the
    forward/backward graphs of a staged function under an eager tape must agree with them."""
    f = STAGED_CASES[name]
    staged = sf.function(f)
    x = sf.constant(np.random.default_rng(0).standard_normal((3, 4)))
    cotangent = sf.constant(np.random.default_rng(1).standard_normal(f(x).shape))
    grads = []
    for fn in (f, staged):
        with sf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        grads.append(tape.gradient(y, x, output_gradients=cotangent).numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-10, atol=1e-12)


def test_backward_computes_only_the_cotangents_that_reach_a_source(monkeypatch):
    """Eagerly, a constant operand's cotangent (its share of a product, summed back to its
    shape) is work thrown away: the rules are told which operands are watched."""
    bound = []
    process = EagerTrace.process

    def counting(self, primitive, args, params):
        bound.append(primitive.name)
        return process(self, primitive, args, params)

    x = sf.constant(np.arange(6.0).reshape(2, 3))
    scale = sf.constant(np.array([1.0, 2.0, 3.0]))
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = sf.reduce_sum(sf.nn.relu(x * scale - 1.0))
    monkeypatch.setattr(EagerTrace, "process", counting)
    with context.slow_path():  # every op through `bind`, where it is counted
        grad = tape.gradient(y, x)
    np.testing.assert_array_equal(grad.numpy(), np.where(x.numpy() * scale.numpy() > 1.0,
                                                         scale.numpy(), 0.0))
    assert "reduce_sum" not in bound  # the scale's and the 1.0's sums are not taken
    assert bound.count("multiply") == 1  # g * scale; not g * x


def test_wanted_answers_again_from_its_last_answer_only_for_the_same_operands_and_mask():
    from stageflow.primitives import autodiff

    x, i = sf.constant(1.0), sf.constant(1)
    inputs = [x, i, x]
    previous = autodiff.NEEDED.mask
    try:
        autodiff.NEEDED.mask = mask = [True, True, False]
        first = autodiff.wanted(inputs)
        assert first == [True, False, False]
        first[0] = False  # the caller's copy: the remembered answer is not changed
        assert autodiff.wanted(inputs) == [True, False, False]
        assert autodiff.wanted([x, i, x]) == [True, False, False]  # another list: computed
        autodiff.NEEDED.mask = [True, True, True]  # another mask: computed again
        assert autodiff.wanted(inputs) == [True, False, True]
        assert mask == [True, True, False]
        autodiff.NEEDED.mask = None
        assert autodiff.wanted(inputs) == [True, False, True]
    finally:
        autodiff.NEEDED.mask = previous
        autodiff.NEEDED.last = None


def test_a_backward_pass_keeps_no_operand_alive_and_nested_passes_keep_their_masks():
    """`wanted`'s memo is dropped when a backward pass ends (it would hold the last rule's
    operands), also one run inside a rule (a custom gradient differentiating again)."""
    import gc
    import weakref

    from stageflow.primitives import autodiff

    @sf.custom_gradient
    def double(v):
        def grad(dy):
            with sf.GradientTape() as inner:
                inner.watch(v)
                z = v * v
            return dy * inner.gradient(z, v) / v  # 2 dy, through a nested backward pass
        return v * 2.0, grad

    x = sf.constant(np.arange(1.0, 4.0, dtype=np.float32))
    with sf.GradientTape() as tape:
        tape.watch(x)
        h = sf.exp(x)
        y = sf.reduce_sum(double(h) * sf.constant(3.0) + h * h)
    ref = weakref.ref(h)
    g = tape.gradient(y, x)
    np.testing.assert_allclose(g.numpy(), (6.0 + 2.0 * np.exp(x.numpy())) * np.exp(x.numpy()),
                               rtol=1e-6)
    assert autodiff.NEEDED.last is None and autodiff.NEEDED.mask is None
    del tape, y, h
    gc.collect()
    assert ref() is None


def test_an_op_is_recorded_when_any_operand_is_watched_and_its_float_results_watched():
    a, b, n = sf.constant(2.0), sf.constant(3.0), sf.constant(4)
    with sf.GradientTape(persistent=True) as tape:
        tape.watch(b)
        unwatched = a * a  # no operand watched: not recorded
        y = a * b  # the second operand watched
        k = n * n  # integer results are never watched
        z = y * unwatched
    assert len(tape._records) == 2
    assert id(y) in tape._watched and id(z) in tape._watched
    assert id(unwatched) not in tape._watched and id(k) not in tape._watched
    assert float(tape.gradient(z, b)) == 8.0
    assert tape.gradient(z, a) is None  # a constant here


def test_the_gradient_of_a_variable_with_respect_to_itself_is_one():
    """TensorFlow reads a variable target as if on the tape: ``with tape: r = v`` gives 1
    (it was None)."""
    v, frozen = sf.Variable(3.0), sf.Variable(2.0, trainable=False)
    with sf.GradientTape(persistent=True) as tape:
        r = v
    assert float(tape.gradient(r, v)) == 1.0
    assert tape.gradient(frozen, frozen) is None  # not trainable, never watched

    @sf.function
    def staged():
        with sf.GradientTape() as inner:
            alias = v
        return inner.gradient(alias, v)

    assert float(staged()) == 1.0


def test_reset_forgets_what_was_recorded():
    x = sf.constant(3.0)
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = x * x
        tape.reset()
        tape.watch(x)
        total = y + x * 5.0
    assert tape.gradient(total, x).numpy() == 5.0  # y was recorded before the reset


@pytest.mark.parametrize("staged", [False, True])
def test_batch_jacobian_is_the_jacobian_s_diagonal_blocks(staged):
    rng = np.random.default_rng(0)
    x = sf.constant(rng.standard_normal((3, 2, 2)).astype(np.float32))
    w = sf.constant(rng.standard_normal((4, 5)).astype(np.float32))

    def both(x):
        with sf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = sf.tanh(sf.matmul(sf.reshape(x, (3, 4)), w))
        return tape.batch_jacobian(y, x), tape.jacobian(y, x)

    batch, full = (sf.function(both) if staged else both)(x)
    assert batch.shape == (3, 5, 2, 2)
    np.testing.assert_allclose(batch.numpy(), np.stack([full.numpy()[b, :, b] for b in range(3)]),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="same first"):
        with sf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = sf.reduce_sum(x)
        tape.batch_jacobian(y, x)
