"""Compiled backward passes of recurring tapes: from the second gradient call of a tape's
structure on, a worker thread compiles its backward pass, and later calls run it with the
gradients of the rules run one by one (to rounding); what the trace cannot stand for
(custom gradients, higher orders, devices) keeps the rules."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.core import config
from stageflow.frontend import tape as tape_module
from stageflow.models import backward_runner
from stageflow.models import composite_runner as composites
from tests.strategies import broadcast_shapes

RUNNER = backward_runner.RUNNER


@pytest.fixture
def counted(monkeypatch):
    """How many gradient calls the runner answered compiled (its answers not None)."""
    counts = {"compiled": 0, "asked": 0}

    def counting(tape, targets, seeds, sources):
        result = RUNNER(tape, targets, seeds, sources)
        counts["asked"] += 1
        counts["compiled"] += result is not None
        return result

    monkeypatch.setattr(tape_module, "_backward_runner", counting)
    return counts


def rules_then_compiled(gradients) -> tuple[list, list]:
    """`gradients()` with the rules one by one (eager_compile off), then twice to start
    and finish its compile, then once more: (the rules' results, the last call's)."""
    config.eager_compile = False
    try:
        want = gradients()
    finally:
        config.eager_compile = True
    gradients()
    gradients()
    backward_runner.settle()
    return want, gradients()


def compiled_after_two(gradients, counted) -> tuple[list, list]:
    """`rules_then_compiled`, its last call answered by the compiled backward pass."""
    before = counted["compiled"]
    want, got = rules_then_compiled(gradients)
    assert counted["compiled"] == before + 1
    return want, got


def assert_same(got: list, want: list, rtol: float = 1e-5) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        if w is None:
            assert g is None
            continue
        w = np.asarray(w)
        np.testing.assert_allclose(np.asarray(g), w, rtol=rtol,
                                   atol=rtol * max(1.0, float(np.abs(w).max(initial=0.0))))


def raw_convnet():
    """A convolution, batch norm written with raw ops, relu, pooling and a dense layer:
    variables, a watched input and an integer label in one tape."""
    rng = np.random.default_rng(0)
    w = sf.Variable(rng.standard_normal((3, 3, 3, 8)).astype(np.float32) * 0.3)
    gamma = sf.Variable(np.ones(8, np.float32))
    beta = sf.Variable(np.zeros(8, np.float32))
    dense = sf.Variable(rng.standard_normal((8, 5)).astype(np.float32) * 0.3)
    x = sf.constant(rng.standard_normal((2, 6, 6, 3)).astype(np.float32))
    labels = sf.constant(np.array([1, 4], np.int32))

    def gradients():
        with sf.GradientTape() as tape:
            tape.watch(x)
            h = sf.nn.conv2d(x, w, 1, "SAME")
            mean = sf.reduce_mean(h, axis=[0, 1, 2])
            centered = h - mean
            variance = sf.reduce_mean(centered * centered, axis=[0, 1, 2])
            h = sf.nn.relu(centered * sf.math.rsqrt(variance + 1e-3) * gamma + beta)
            logits = sf.matmul(sf.reduce_mean(h, axis=[1, 2]), dense)
            loss = sf.reduce_mean(sf.nn.sparse_softmax_cross_entropy_with_logits(labels,
                                                                                 logits))
        return [g.numpy() for g in tape.gradient(loss, [x, w, gamma, beta, dense])]

    return gradients


def test_a_recurring_tape_runs_its_backward_pass_compiled_with_the_rules_numbers(counted):
    want, got = compiled_after_two(raw_convnet(), counted)
    assert_same(got, want)


def test_a_tape_compiles_once_per_structure_and_dtypes_and_shapes(counted):
    def tape_of(shape):
        x = sf.constant(np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32)
                        .reshape(shape))

        def gradients():
            with sf.GradientTape() as tape:
                tape.watch(x)
                y = sf.reduce_sum(sf.tanh(x) * x)
            return [tape.gradient(y, x).numpy()]

        return x, gradients

    x, gradients = tape_of((3, 4))
    want, got = compiled_after_two(gradients, counted)
    assert_same(got, want)
    np.testing.assert_allclose(got[0], np.tanh(x.numpy()) + x.numpy() / np.cosh(x.numpy())**2,
                               rtol=1e-5)
    x, gradients = tape_of((5,))  # another shape: its own sightings and compile
    first = counted["compiled"]
    gradients()
    assert counted["compiled"] == first


@settings(deadline=None)
@given(shapes=broadcast_shapes(2, max_side=4), seed=st.integers(0, 2**16))
def test_broadcasting_chains_get_the_rules_gradients(shapes, seed):
    rng = np.random.default_rng(seed)
    a = sf.constant(rng.uniform(0.5, 2.0, shapes[0]).astype(np.float32))
    b = sf.constant(rng.uniform(0.5, 2.0, shapes[1]).astype(np.float32))

    def gradients():
        with sf.GradientTape() as tape:
            tape.watch([a, b])
            y = sf.reduce_sum(sf.exp(a * b - b) / (a + b) + sf.sqrt(a) * b)
        return [g.numpy() for g in tape.gradient(y, [a, b])]

    want, got = rules_then_compiled(gradients)
    assert_same(got, want)


def test_seeds_unwatched_and_unconnected_sources_and_variables_read_twice(counted):
    v = sf.Variable([1.0, 2.0, 3.0])
    x = sf.constant([0.5, -1.0, 2.0])
    unwatched = sf.constant([1.0, 1.0, 1.0])
    seed = sf.constant([1.0, 10.0, 100.0])

    def gradients():
        with sf.GradientTape() as tape:
            tape.watch(x)
            y = v * x + v * v * unwatched
        g = tape.gradient(y, [v, x, unwatched, sf.constant(1.0)], output_gradients=seed)
        return [None if t is None else t.numpy() for t in g]

    want, got = compiled_after_two(gradients, counted)
    assert got[2] is None and got[3] is None
    np.testing.assert_allclose(got[0], seed.numpy() * (x.numpy() + 2 * v.numpy()), rtol=1e-6)
    np.testing.assert_allclose(got[1], seed.numpy() * v.numpy(), rtol=1e-6)
    assert_same(got, want)


def test_custom_gradients_keep_their_rules_and_their_own_steps_values(counted):
    """A custom gradient's rule closes over values of its own call: compiled once, a
    later step would reuse the first step's."""

    def gradients(scale: float):
        @sf.custom_gradient
        def scaled(t):
            factor = sf.constant(scale)
            return t * factor, lambda dy: dy * factor * 2.0

        x = sf.constant([1.0, 2.0])
        with sf.GradientTape() as tape:
            tape.watch(x)
            y = sf.reduce_sum(scaled(x) * x)
        return tape.gradient(y, x).numpy()

    for scale in (1.0, 2.0, 3.0, 4.0):
        backward_runner.settle()
        np.testing.assert_allclose(gradients(scale), [scale * 2 + scale, scale * 4 + 2 * scale])
    assert counted["compiled"] == 0


def test_second_order_gradients_run_the_rules_under_the_outer_tape(counted):
    x = sf.constant([0.5, 1.5])

    def second():
        with sf.GradientTape() as outer:
            outer.watch(x)
            with sf.GradientTape() as inner:
                inner.watch(x)
                y = sf.reduce_sum(x * x * x)
            dy = inner.gradient(y, x)
        return outer.gradient(dy, x).numpy()

    for _ in range(3):
        backward_runner.settle()
        np.testing.assert_allclose(second(), 6 * x.numpy(), rtol=1e-6)
    # the inner gradient runs under the recording outer tape: never compiled; the outer one
    # records the inner rules' ops, which it may compile
    assert counted["asked"] >= 3


def test_a_persistent_tape_answers_each_gradient_call(counted):
    x = sf.constant([1.0, 2.0, 3.0])
    results = []
    for _ in range(3):
        with sf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = sf.reduce_sum(x * x)
            z = sf.reduce_sum(sf.sin(x))
        backward_runner.settle()
        results.append((tape.gradient(y, x).numpy(), tape.gradient(z, x).numpy()))
    for dy, dz in results:
        np.testing.assert_allclose(dy, 2 * x.numpy(), rtol=1e-6)
        np.testing.assert_allclose(dz, np.cos(x.numpy()), rtol=1e-6)
    assert counted["compiled"] >= 1


def test_eager_compile_off_keeps_the_rules(counted, monkeypatch):
    monkeypatch.setattr(config, "eager_compile", False)
    gradients = raw_convnet()
    for _ in range(3):
        gradients()
    backward_runner.settle()
    gradients()
    assert counted["asked"] == 0


def test_a_build_that_fails_leaves_the_rules_and_settle_reports_it(counted, monkeypatch):
    class Failing:
        @staticmethod
        def trace_function(*args, **kwargs):
            raise RuntimeError("no trace here")

    monkeypatch.setattr(backward_runner, "concrete", Failing)
    x = sf.constant([3.0, 4.0])

    def gradients():
        with sf.GradientTape() as tape:
            tape.watch(x)
            y = sf.reduce_sum(x * x * x * 7.0)
        return tape.gradient(y, x).numpy()

    gradients()
    gradients()
    with pytest.raises(RuntimeError, match="no trace here"):
        backward_runner.settle()
    np.testing.assert_allclose(gradients(), 21 * x.numpy() ** 2, rtol=1e-6)
    assert counted["compiled"] == 0


def test_check_numerics_sees_every_op_of_a_recurring_tapes_gradient(counted):
    def gradients(x):
        with sf.GradientTape() as tape:
            tape.watch(x)
            y = sf.reduce_sum(sf.sqrt(x))
        return tape.gradient(y, x)

    x = sf.constant([1.0, 4.0])
    for _ in range(2):
        gradients(x)
    backward_runner.settle()
    np.testing.assert_allclose(gradients(x).numpy(), [0.5, 0.25])
    assert counted["compiled"] == 1
    sf.debugging.enable_check_numerics()
    try:
        with np.errstate(divide="ignore"), pytest.raises(sf.errors.InvalidArgumentError,
                                                         match="made Inf"):
            gradients(sf.constant([0.0, 4.0]))  # d sqrt(x)/dx at 0, op by op
    finally:
        sf.debugging.disable_check_numerics()
    assert counted["compiled"] == 1


def test_the_profiler_shows_a_compiled_gradient_as_one_program(counted, tmp_path):
    x = sf.constant([0.5, 1.0, 2.0])

    def gradients():
        with sf.GradientTape() as tape:
            tape.watch(x)
            y = sf.reduce_sum(sf.exp(x) * x)
        return tape.gradient(y, x)

    for _ in range(2):
        gradients()
    backward_runner.settle()
    with sf.profiler.trace(str(tmp_path)):
        got = gradients()
    assert counted["compiled"] == 1
    np.testing.assert_allclose(got.numpy(), np.exp(x.numpy()) * (1 + x.numpy()), rtol=1e-6)
    (path,) = tmp_path.rglob("*.trace.json")
    names = [e["name"] for e in json.loads(path.read_text())["traceEvents"]
             if e["ph"] == "X"]
    assert "@tape_gradient" in names


def test_staged_calls_and_composites_replay_their_graphs_in_the_compiled_pass(counted):
    """A composite (batch norm) and an `sf.function` of its arguments are one record each;
    the compiled pass recomputes their forward graphs' residuals and replays their backward
    graphs, with the gradients of their own compiled backward programs."""
    rng = np.random.default_rng(4)
    norm = sf.layers.BatchNormalization()
    dense = sf.Variable(rng.standard_normal((6, 3)).astype(np.float32))
    x = sf.constant(rng.standard_normal((5, 6)).astype(np.float32) * 2 + 1)

    @sf.function
    def squash(h):
        return sf.tanh(h) * sf.sigmoid(h)

    def gradients():
        with sf.GradientTape() as tape:
            tape.watch(x)
            h = squash(norm(x, training=True))
            loss = sf.reduce_sum(sf.matmul(h, dense) ** 2)
        return [g.numpy() for g in tape.gradient(loss, [x, dense, *norm.trainable_variables])]

    for _ in range(2):  # the composite's and the function's own pairs, compiled
        gradients()
        composites.settle()
    want, got = compiled_after_two(gradients, counted)
    assert_same(got, want, rtol=2e-5)


def test_a_staged_call_reading_a_variable_keeps_its_rule(counted):
    v = sf.Variable([1.0, 2.0])

    @sf.function
    def scaled(h):
        return h * v * v

    x = sf.constant([3.0, 4.0])

    def gradients():
        with sf.GradientTape() as tape:
            tape.watch(x)
            y = sf.reduce_sum(scaled(x) * x)
        return [g.numpy() for g in tape.gradient(y, [x, v])]

    for _ in range(3):
        backward_runner.settle()
        got = gradients()
        np.testing.assert_allclose(got[0], 2 * x.numpy() * v.numpy() ** 2, rtol=1e-6)
        np.testing.assert_allclose(got[1], 2 * x.numpy() ** 2 * v.numpy(), rtol=1e-6)
    assert counted["compiled"] == 0


def test_an_eager_tape_the_trace_cannot_stand_for_loads_no_compiler():
    """A custom gradient's tape is never compiled: asking so must not import staging (half a
    second of the compiler's import in a program that never stages)."""
    script = (
        "import sys, stageflow as sf\n"
        "@sf.custom_gradient\n"
        "def f(t):\n"
        "    return t * 2.0, lambda dy: dy * 3.0\n"
        "x = sf.constant([1.0])\n"
        "for _ in range(3):\n"
        "    with sf.GradientTape() as tape:\n"
        "        tape.watch(x)\n"
        "        y = f(x)\n"
        "    assert tape.gradient(y, x).numpy().tolist() == [3.0]\n"
        "assert 'stageflow.staging.staged_grad' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
