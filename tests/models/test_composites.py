"""Eager composites: batch norm runs eagerly as one compiled function (forward and backward)
once its signature is compiled, with the numbers of its ops run one by one; nested tapes
replay the ops; tracing inlines them."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf
from stageflow.core import config
from stageflow.models import composite as composite_module
from stageflow.models import composite_runner as composites
from stageflow.models.composite import Composite

L = sf.layers


def built_batch_norm(seed: int = 0, **kwargs) -> L.BatchNormalization:
    layer = L.BatchNormalization(**kwargs)
    layer.build((1, 2, 2, 3))
    layer.built = True
    r = np.random.default_rng(seed)
    if layer.gamma is not None:
        layer.gamma.assign(r.uniform(0.5, 2.0, 3).astype(np.float32))
    if layer.beta is not None:
        layer.beta.assign(r.standard_normal(3).astype(np.float32))
    return layer


def training_step(layer: L.BatchNormalization, x: sf.Tensor) -> list[np.ndarray]:
    """Outputs, the gradients of a loss w.r.t. x and the layer's variables, and the moving
    statistics after the step."""
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
        loss = sf.reduce_sum(y * y * sf.constant([1.0, 2.0, 3.0]))
    grads = tape.gradient(loss, [x, *layer.trainable_variables])
    return [y.numpy(), *[g.numpy() for g in grads], layer.moving_mean.numpy(),
            layer.moving_variance.numpy()]


@pytest.fixture
def counted(monkeypatch):
    """How many composite calls the runner answered compiled (its answers not None)."""
    counts = {"compiled": 0}
    runner = composites.RUNNER

    def counting(composite, arguments):
        result = runner(composite, arguments)
        counts["compiled"] += result is not None
        return result

    monkeypatch.setattr(composite_module, "RUNNER", counting)
    return counts


@pytest.mark.parametrize("kwargs", [{}, {"center": False}, {"scale": False, "momentum": 0.5}])
def test_eager_batch_norm_runs_compiled_with_the_numbers_of_its_ops(kwargs, counted,
                                                                     monkeypatch):
    x = sf.constant((np.random.default_rng(1).standard_normal((4, 5, 5, 3)) * 2 + 1)
                    .astype(np.float32))
    with monkeypatch.context() as patch:
        patch.setattr(config, "eager_compile", False)
        want = training_step(built_batch_norm(**kwargs), x)
    layer = built_batch_norm(**kwargs)
    training_step(layer, x)  # starts the compile
    composites.settle()
    assert counted["compiled"] == 0
    layer = built_batch_norm(**kwargs)
    got = training_step(layer, x)
    assert counted["compiled"] == 1
    # x's gradient cancels (a batch norm's output ignores x's shift and scale): its error is
    # that of sums of terms as large as y's, whichever order they are added in (measured
    # against float64: 1.1e-6 for the ops, 1.3e-6 compiled, on a gradient of 1.9e-3).
    scale = np.abs(want[0]).max()
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5 * max(np.abs(w).max(), scale))
    inference = layer(x).numpy()  # the inference composite compiles in turn
    composites.settle()
    np.testing.assert_allclose(layer(x).numpy(), inference, rtol=1e-6, atol=1e-6)
    assert counted["compiled"] == 2


def test_nested_tapes_replay_the_ops_for_second_order_gradients(counted):
    layer = built_batch_norm()
    x = sf.constant(np.random.default_rng(2).standard_normal((3, 2, 2, 3)).astype(np.float32))
    for _ in range(2):
        training_step(layer, x)
        composites.settle()

    def loss_of(v):
        return sf.reduce_sum(sf.sin(layer(v, training=True)) * sf.constant([1.0, 2.0, 3.0]))

    compiled_before = counted["compiled"]
    with sf.GradientTape() as outer:
        outer.watch(x)
        with sf.GradientTape() as inner:
            inner.watch(x)
            loss = loss_of(x)
        g = inner.gradient(loss, x)
        total = sf.reduce_sum(g * g)
    second = outer.gradient(total, x).numpy()
    assert counted["compiled"] == compiled_before  # the nested tapes compiled nothing

    # Central differences of the first-order gradient (computed the same way).
    def first(values):
        v = sf.constant(values)
        with sf.GradientTape() as tape:
            tape.watch(v)
            out = loss_of(v)
        return float(sf.reduce_sum(tape.gradient(out, v) ** 2))

    base = x.numpy().astype(np.float64)
    eps = 1e-3
    for index in [(0, 0, 0, 0), (1, 1, 0, 2), (2, 0, 1, 1)]:
        up, down = base.copy(), base.copy()
        up[index] += eps
        down[index] -= eps
        numeric = (first(up.astype(np.float32)) - first(down.astype(np.float32))) / (2 * eps)
        assert second[index] == pytest.approx(numeric, rel=2e-2, abs=2e-2)


def test_tracing_inlines_a_composite():
    layer = built_batch_norm()

    @sf.function
    def step(x):
        return layer(x, training=True)

    x = sf.ones((2, 2, 2, 3))
    step(x)
    text = step.get_concrete_function(x).ir()
    assert "call" not in text and "rsqrt" in text


def test_a_composite_that_fails_to_compile_runs_its_ops_and_settle_reports_it():
    traced = []

    def eager_only(x):
        if type(x) is not sf.Tensor:
            traced.append(x)
            raise RuntimeError("cannot trace this composite")
        return x * 2.0

    composite = Composite(eager_only, "eager_only")
    x = sf.constant([1.0, 2.0])
    np.testing.assert_array_equal(composite(x).numpy(), [2.0, 4.0])
    with pytest.raises(RuntimeError, match="cannot trace"):
        composites.settle()
    composites.settle()  # reported once
    np.testing.assert_array_equal(composite(x).numpy(), [2.0, 4.0])
    composites.settle()
    assert len(traced) == 1  # never tried again


def test_composites_on_a_logical_device_run_their_ops(monkeypatch):
    calls = []
    monkeypatch.setattr(composite_module, "RUNNER", lambda c, a: calls.append(c))
    composite = Composite(lambda x: x + 1.0, "plus_one")
    with sf.device("/device:CPU:0"):
        composite(sf.ones(2))
    assert len(calls) == 1
    with sf.device("cpu:1"):
        result = composite(sf.ones(2))
    assert len(calls) == 1
    np.testing.assert_array_equal(result.numpy(), [2.0, 2.0])


def test_a_compiled_composite_under_a_tape_is_one_taped_op_and_unwatched_runs_untaped(
        counted, monkeypatch):
    """The runner calls the staged forward/backward pair itself when a tape watches an
    operand (one record, the staged gradient); a tape watching none of the operands
    records nothing and the plain program runs."""
    from stageflow.staging.staged_grad import StagedVJP

    x = sf.constant(np.random.default_rng(2).standard_normal((2, 3, 3, 3)).astype(np.float32))
    layer = built_batch_norm()
    training_step(layer, x)  # starts the compiles: taped, then untaped
    composites.settle()
    with sf.GradientTape(watch_accessed_variables=False):
        layer(x, training=True)
    composites.settle()
    counted["compiled"] = 0
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
        total = sf.reduce_sum(y * y)
    owners = [r.primitive for r in tape._records]
    assert counted["compiled"] == 1 and len(owners) == 3
    assert isinstance(owners[0], StagedVJP)
    gx = tape.gradient(total, x).numpy()
    with monkeypatch.context() as patch:  # the ops one by one
        patch.setattr(config, "eager_compile", False)
        with sf.GradientTape() as tape:
            tape.watch(x)
            total = sf.reduce_sum(sf.square(layer(x, training=True)))
        want = tape.gradient(total, x).numpy()
    np.testing.assert_allclose(gx, want, rtol=1e-4, atol=1e-4 * np.abs(y.numpy()).max())
    with sf.GradientTape(watch_accessed_variables=False) as other:
        z = layer(x, training=True)
    assert counted["compiled"] == 2 and other._records == []
    np.testing.assert_allclose(z.numpy(), y.numpy(), rtol=1e-6, atol=1e-6)
