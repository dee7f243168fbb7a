"""`sf.optimizers.schedules`: learning rates as functions of the step, Keras' classes.

A schedule is called with the optimizer's step counter (an int64 tensor, traced inside a
staged training step) and returns the rate, so one trace serves every step; an optimizer
given one stores each step's rate in its `learning_rate` variable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from stageflow.core import dtypes
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor

__all__ = ["CosineDecay", "ExponentialDecay", "LearningRateSchedule",
           "PiecewiseConstantDecay"]


def _step(step: Any) -> Any:
    return ew.cast(convert_to_tensor(step), dtypes.float64)


class LearningRateSchedule:
    """The base class: ``schedule(step)`` gives the rate at that step."""

    def __call__(self, step: Any) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class ExponentialDecay(LearningRateSchedule):
    """``initial * decay_rate ** (step / decay_steps)`` (the exponent floored if
    `staircase`)."""

    def __init__(self, initial_learning_rate: float, decay_steps: int, decay_rate: float,
                 staircase: bool = False) -> None:
        if int(decay_steps) <= 0:
            raise ValueError(f"ExponentialDecay: decay_steps must be positive, got "
                             f"{decay_steps!r}")
        self.initial_learning_rate = float(initial_learning_rate)
        self.decay_steps = int(decay_steps)
        self.decay_rate = float(decay_rate)
        self.staircase = bool(staircase)

    def __call__(self, step: Any) -> Any:
        exponent = _step(step) / float(self.decay_steps)
        if self.staircase:
            exponent = ew.floor(exponent)
        return ew.pow(self.decay_rate, exponent) * self.initial_learning_rate


class CosineDecay(LearningRateSchedule):
    """A linear warm-up from `initial_learning_rate` to `warmup_target` over
    `warmup_steps` (none when `warmup_target` is None), then a cosine from there down to
    ``alpha`` times it over `decay_steps`, constant after."""

    def __init__(self, initial_learning_rate: float, decay_steps: int, alpha: float = 0.0,
                 warmup_target: float | None = None, warmup_steps: int = 0) -> None:
        if int(decay_steps) <= 0 or int(warmup_steps) < 0:
            raise ValueError("CosineDecay: decay_steps must be positive and warmup_steps "
                             f"non-negative, got {decay_steps!r} and {warmup_steps!r}")
        self.initial_learning_rate = float(initial_learning_rate)
        self.decay_steps = int(decay_steps)
        self.alpha = float(alpha)
        self.warmup_target = None if warmup_target is None else float(warmup_target)
        self.warmup_steps = int(warmup_steps)

    def __call__(self, step: Any) -> Any:
        step = _step(step)
        peak = self.initial_learning_rate if self.warmup_target is None else self.warmup_target
        warmup = float(self.warmup_steps) if self.warmup_target is not None else 0.0
        into = ew.clip_by_value(step - warmup, 0.0, float(self.decay_steps))
        cosine = (ew.cos(into * (math.pi / self.decay_steps)) + 1.0) * 0.5
        decayed = ((1.0 - self.alpha) * cosine + self.alpha) * peak
        if not warmup:
            return decayed
        ramp = self.initial_learning_rate + (peak - self.initial_learning_rate) * (
            step / warmup)
        return ew.where(ew.less(step, warmup), ramp, decayed)


class PiecewiseConstantDecay(LearningRateSchedule):
    """``values[i]`` while ``boundaries[i-1] < step <= boundaries[i]`` (Keras' rule)."""

    def __init__(self, boundaries: Sequence[int], values: Sequence[float]) -> None:
        if len(values) != len(boundaries) + 1:
            raise ValueError(f"PiecewiseConstantDecay: {len(boundaries)} boundaries need "
                             f"{len(boundaries) + 1} values, got {len(values)}")
        self.boundaries = [int(b) for b in boundaries]
        self.values = [float(v) for v in values]

    def __call__(self, step: Any) -> Any:
        step = _step(step)
        rate = convert_to_tensor(self.values[-1], dtypes.float64)
        for boundary, value in reversed(list(zip(self.boundaries, self.values,
                                                 strict=False))):
            rate = ew.where(ew.less_equal(step, float(boundary)), value, rate)
        return rate
