"""The gradient campaign (`stageflow.testing.random_gradients`): a slice of it agrees with
finite differences every way, and its checks do see a wrong gradient rule, eager or
staged, first or second order, and tell a kink from a mismatch."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf
from stageflow.primitives import elementwise, reduction
from stageflow.testing.random_gradients import (
    WAYS,
    Case,
    Mismatch,
    check_direction,
    check_gradients,
    check_second_order,
    run_campaign,
)
from stageflow.testing.random_ops import F64, Program, Value


@pytest.mark.slow
def test_a_slice_of_the_campaign_agrees_with_finite_differences():
    """(Refusals of a staged gradient with unknown dims are counted apart, as unsupported.)"""
    tallies = run_campaign(60, 2026, list(WAYS))
    for way, tally in tallies.items():
        assert tally.programs == 60, way
        assert tally.mismatches == tally.errors == 0, (way, tally.first)
    assert tallies["eager"].skipped < 10


def test_a_doubled_gradient_rule_is_caught_every_first_order_way(monkeypatch):
    """reduce_sum's rule returning twice the gradient: the loss sums every output, so every
    program whose gradient is not zero disagrees. (The second order way checks H v against
    the gradient, doubled alike.)"""
    rule = reduction.reduce_sum_p.vjp

    def doubled(cotangents, inputs, outputs, **params):
        return [None if g is None else g * 2.0 for g in rule(cotangents, inputs, outputs,
                                                            **params)]

    monkeypatch.setattr(reduction.reduce_sum_p, "vjp", doubled)
    ways = [way for way in WAYS if way != "second order"]
    tallies = run_campaign(6, 7, ways)
    for way, tally in tallies.items():
        assert tally.mismatches + tally.unsupported >= 5 and tally.errors == 0, (way, tally)


def tanh_program() -> Program:
    """tanh of one float64 input."""
    p = Program(inputs=[np.array([0.3, -1.2, 0.7])], unknown=[(False,)], seed=5)
    p.push("arg0", (), lambda run: run.args[0], Value((3,), F64, True))
    p.push("tanh", (0,), lambda run, x: sf.tanh(x), Value((3,), F64, False))
    p.outputs = (1,)
    return p


def test_a_wrong_second_derivative_is_caught(monkeypatch):
    """tanh's rule with its output held constant: right at first order, but the Hessian-
    vector product misses the output's own derivative."""
    case = Case.of(tanh_program())
    assert check_second_order(case) == 0

    def frozen(cotangents, inputs, outputs):
        out = sf.stop_gradient(outputs[0])
        return [cotangents[0] * (1.0 - out * out)]

    monkeypatch.setattr(elementwise.tanh_p, "vjp", frozen)
    assert check_gradients(case, [g.numpy() for g in case.gradients(case.arguments())],
                           None) == 0
    with pytest.raises(Mismatch, match="H v of argument 0"):
        check_second_order(case)


def test_a_kink_at_or_near_the_point_is_skipped_and_a_wrong_slope_is_not():
    v = np.ones(())

    def relu(shifts):
        return max(float(shifts.get(0, 0.0)), 0.0)

    assert not check_direction(relu, 0.0, 0, v, 0.0, "gradient")  # at the kink
    near = 1.5e-5  # the kink between the steps
    assert not check_direction(lambda s: relu({0: s[0] + near}), near, 0, v, 1.0, "gradient")

    def floor(shifts):  # jumps between the steps 1e-5 and 2e-5
        return float(np.floor(3.0 + float(shifts.get(0, 0.0)) - 1.5e-5))

    assert not check_direction(floor, 2.0, 0, v, 0.0, "gradient")

    def sin(shifts):
        return float(np.sin(1.0 + shifts.get(0, 0.0)))

    assert check_direction(sin, sin({}), 0, v, float(np.cos(1.0)), "gradient")
    with pytest.raises(Mismatch, match="finite differences"):
        check_direction(sin, sin({}), 0, v, 1.0001 * float(np.cos(1.0)), "gradient")
