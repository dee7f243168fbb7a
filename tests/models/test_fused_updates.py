"""Eager optimizer steps run as one compiled call once their signature is compiled, with the
numbers of the updates run op by op (to rounding: Adam's bias correction takes powers, a
polynomial of its own compiled); under a tape, for a subclass's own rule, or with eager
compiling off they run op by op."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf
from stageflow.core import config
from stageflow.models import fused_updates, optimizers

opt = sf.optimizers

MAKERS = {
    "sgd": lambda: opt.SGD(0.1),
    "momentum": lambda: opt.SGD(0.1, momentum=0.9),
    "nesterov": lambda: opt.SGD(0.1, momentum=0.9, nesterov=True),
    "adam": lambda: opt.Adam(0.01),
    "adamw": lambda: opt.AdamW(0.01, weight_decay=0.1),
    "rmsprop": lambda: opt.RMSprop(0.01),
    "adagrad": lambda: opt.Adagrad(0.1),
    "lion": lambda: opt.Lion(0.01),
    "nadam": lambda: opt.Nadam(0.01),
    "adamax": lambda: opt.Adamax(0.01),
    "adadelta": lambda: opt.Adadelta(1.0),
    "schedule": lambda: opt.SGD(opt.schedules.ExponentialDecay(0.1, 2, 0.5)),
}


@pytest.fixture
def counted(monkeypatch):
    """How many steps the runner ran compiled (answered True)."""
    counts = {"fused": 0}
    runner = fused_updates.RUNNER

    def counting(optimizer, rate, pairs):
        fused = runner(optimizer, rate, pairs)
        counts["fused"] += fused
        return fused

    monkeypatch.setattr(optimizers, "RUNNER", counting)
    return counts


def problem(seed: int = 0, steps: int = 5) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """Initial values of a float32 and a float64 variable, and each step's gradients."""
    r = np.random.default_rng(seed)
    initial = [r.standard_normal((3, 4)).astype(np.float32), r.standard_normal(5)]
    return initial, [[r.standard_normal(a.shape).astype(a.dtype) for a in initial]
                     for _ in range(steps)]


def train(make, initial, gradients) -> tuple[list[np.ndarray], opt.Optimizer]:
    """The variables, the slots and the step count after the steps; the optimizer."""
    optimizer = make()
    variables = [sf.Variable(a) for a in initial]
    for step in gradients:
        optimizer.apply_gradients(zip([sf.constant(g) for g in step], variables, strict=True))
        fused_updates.settle()
    state = [v.numpy() for v in variables] + [s.numpy() for s in optimizer._slot_variables]
    return state + [optimizer.iterations.numpy(), optimizer.learning_rate.numpy()], optimizer


@pytest.mark.parametrize("name", MAKERS)
def test_fused_steps_give_the_numbers_of_the_ops(name, counted, monkeypatch):
    initial, gradients = problem()
    fused, optimizer = train(MAKERS[name], initial, gradients)
    # the first step compiles (running op by op meanwhile); the later ones run it
    assert counted["fused"] == len(gradients) - 1
    assert len(optimizer._fused_steps) == 1
    monkeypatch.setattr(config, "eager_compile", False)
    op_by_op, _ = train(MAKERS[name], initial, gradients)
    assert counted["fused"] == len(gradients) - 1
    for got, want in zip(fused, op_by_op, strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6 if "adam" in name else 0)


def test_a_new_set_of_variables_or_gradient_signature_compiles_again(counted):
    optimizer = opt.SGD(0.5)
    a, b = sf.Variable(np.ones(3, np.float32)), sf.Variable(np.ones((2, 2), np.float32))
    for pairs in ([(sf.ones(3), a)], [(sf.ones(3), a), (sf.ones((2, 2)), b)], [(sf.ones(3), a)]):
        optimizer.apply_gradients(pairs)
        fused_updates.settle()
        optimizer.apply_gradients(pairs)
    assert len(optimizer._fused_steps) == 2
    assert counted["fused"] == 4  # the second call of each set, both calls of the first again
    np.testing.assert_array_equal(a.numpy(), np.full(3, -2.0, np.float32))
    np.testing.assert_array_equal(b.numpy(), np.zeros((2, 2), np.float32))
    assert int(optimizer.iterations.numpy()) == 6


def test_steps_under_a_tape_run_op_by_op_and_are_recorded(counted):
    w = sf.Variable([1.0, 2.0])
    optimizer = opt.SGD(0.5)
    optimizer.apply_gradients([(sf.constant([1.0, 1.0]), w)])
    fused_updates.settle()
    g = sf.constant([2.0, 4.0])
    with sf.GradientTape() as tape:
        tape.watch(g)
        optimizer.apply_gradients([(g, w)])
        loss = sf.reduce_sum(w.read_value())
    assert counted["fused"] == 0
    np.testing.assert_array_equal(w.numpy(), [-0.5, -0.5])
    assert tape.gradient(loss, g) is None  # an assignment cuts the path, as op by op


class HalvingSGD(opt.SGD):
    """A user's rule with Python state: a trace would freeze its counter."""

    def __init__(self) -> None:
        super().__init__(1.0)
        self.calls = 0

    def _update(self, gradient, variable, coefficients) -> None:
        self.calls += 1
        variable.assign_sub(gradient * coefficients["lr"] / 2.0 ** self.calls)


def test_a_subclass_with_its_own_rule_runs_op_by_op(counted):
    optimizer = HalvingSGD()
    w = sf.Variable([8.0])
    for _ in range(3):
        optimizer.apply_gradients([(sf.constant([8.0]), w)])
        fused_updates.settle()
    assert not optimizer.fusable() and not optimizer._fused_steps
    assert counted["fused"] == 0
    np.testing.assert_array_equal(w.numpy(), [1.0])  # 8 - 4 - 2 - 1


def test_a_failed_compile_is_raised_by_settle_and_leaves_the_steps_op_by_op(counted,
                                                                             monkeypatch):
    def failing(*args, **kwargs):
        raise RuntimeError("no compiler today")

    monkeypatch.setattr(fused_updates, "trace_function", failing)
    w = sf.Variable([1.0])
    optimizer = opt.SGD(0.25)
    optimizer.apply_gradients([(sf.constant([1.0]), w)])
    with pytest.raises(RuntimeError, match="no compiler today"):
        fused_updates.settle()
    fused_updates.settle()  # reported once
    optimizer.apply_gradients([(sf.constant([1.0]), w)])
    assert counted["fused"] == 0
    np.testing.assert_array_equal(w.numpy(), [0.5])


def test_steps_inside_a_staged_function_are_traced_as_ops(counted):
    w = sf.Variable([1.0, 2.0])
    optimizer = opt.SGD(0.5)

    @sf.function
    def step(g):
        optimizer.apply_gradients([(g, w)])

    for _ in range(2):
        step(sf.constant([2.0, 2.0]))
    assert counted["fused"] == 0 and not optimizer._fused_steps
    np.testing.assert_array_equal(w.numpy(), [-1.0, 0.0])
