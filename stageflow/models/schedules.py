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
from stageflow.core.exports import public_dir
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor

__all__ = ["CosineDecay", "CosineDecayRestarts", "ExponentialDecay", "InverseTimeDecay",
           "LearningRateSchedule", "PiecewiseConstantDecay", "PolynomialDecay"]
__dir__ = public_dir(globals())  # `sf.optimizers.schedules` is this module: not its imports


def _step(step: Any) -> Any:
    return ew.cast(convert_to_tensor(step), dtypes.float64)


class LearningRateSchedule:
    """The base class: ``schedule(step)`` gives the rate at that step.

    A subclass defines `__call__` with sf ops on the step (an int64 scalar tensor, symbolic
    in a staged step), so the rate changes without retracing; it returns a float scalar.
    An optimizer given a schedule calls it with its step counter on every step:

    >>> class InverseTime(sf.optimizers.schedules.LearningRateSchedule):
    ...     def __call__(self, step):
    ...         return 1.0 / (1.0 + sf.cast(step, sf.float64))
    >>> w = sf.Variable(0.0)
    >>> opt = sf.optimizers.SGD(learning_rate=InverseTime())
    >>> for _ in range(2):                  # steps 0 and 1: rates 1 and 1/2
    ...     _ = opt.apply_gradients([(sf.constant(1.0), w)])
    >>> float(w), round(float(opt.learning_rate), 4)     # the next step's: 1/3
    (-1.5, 0.3333)
    """

    def __call__(self, step: Any) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"

    def get_config(self) -> dict[str, Any]:
        """Keras' config: the constructor's arguments, by name."""
        return dict(vars(self))

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> LearningRateSchedule:
        """A schedule of this class from `get_config`'s config."""
        return cls(**config)


class ExponentialDecay(LearningRateSchedule):
    """``initial * decay_rate ** (step / decay_steps)`` (the exponent floored if
    `staircase`): the rate is multiplied by `decay_rate` every `decay_steps` steps. The
    rate is a float64 scalar tensor (the optimizer casts it to each variable's dtype).

    >>> schedule = sf.optimizers.schedules.ExponentialDecay(0.1, decay_steps=10,
    ...                                                     decay_rate=0.5)
    >>> schedule(0)
    sf.Tensor(0.1, shape=(), dtype=float64)
    >>> [round(float(schedule(step)), 4) for step in (5, 10, 20)]
    [0.0707, 0.05, 0.025]
    >>> stairs = sf.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5, staircase=True)
    >>> [float(stairs(step)) for step in (5, 10, 15)]
    [0.1, 0.05, 0.05]
    """

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
    ``alpha`` times it over `decay_steps`, constant after. The rate is a float64 scalar
    tensor.

    >>> cosine = sf.optimizers.schedules.CosineDecay(0.1, decay_steps=100, alpha=0.1)
    >>> [round(float(cosine(step)), 4) for step in (0, 50, 100, 200)]
    [0.1, 0.055, 0.01, 0.01]
    >>> warm = sf.optimizers.schedules.CosineDecay(0.0, decay_steps=100, warmup_target=0.1,
    ...                                            warmup_steps=10)
    >>> [round(float(warm(step)), 4) for step in (0, 5, 10, 60, 110)]
    [0.0, 0.05, 0.1, 0.05, 0.0]
    """

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
    """``values[i]`` while ``boundaries[i-1] < step <= boundaries[i]`` (Keras' rule):
    `values` has one more entry than `boundaries`. The rate is a float64 scalar tensor.

    >>> steps = sf.optimizers.schedules.PiecewiseConstantDecay([100, 200], [1.0, 0.5, 0.1])
    >>> [float(steps(step)) for step in (50, 100, 101, 200, 250)]
    [1.0, 1.0, 0.5, 0.5, 0.1]
    """

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


class PolynomialDecay(LearningRateSchedule):
    """From `initial_learning_rate` to `end_learning_rate` over `decay_steps` along
    ``(1 - step / decay_steps) ** power``, constant after; with `cycle`, `decay_steps` grows
    to the next multiple of itself past the step, so the decay starts again.

    >>> poly = sf.optimizers.schedules.PolynomialDecay(0.1, 100, 0.01, power=2.0)
    >>> [round(float(poly(step)), 6) for step in (0, 50, 100, 150)]
    [0.1, 0.0325, 0.01, 0.01]
    """

    def __init__(self, initial_learning_rate: float, decay_steps: int,
                 end_learning_rate: float = 0.0001, power: float = 1.0, cycle: bool = False,
                 name: str = "PolynomialDecay") -> None:
        if int(decay_steps) <= 0:
            raise ValueError(f"PolynomialDecay: decay_steps must be positive, got "
                             f"{decay_steps!r}")
        self.initial_learning_rate = float(initial_learning_rate)
        self.decay_steps = int(decay_steps)
        self.end_learning_rate = float(end_learning_rate)
        self.power = float(power)
        self.cycle = bool(cycle)
        self.name = name

    def __call__(self, step: Any) -> Any:
        step = _step(step)
        steps = float(self.decay_steps)
        if self.cycle:
            multiple = ew.where(ew.equal(step, 0.0), 1.0, ew.ceil(step / steps))
            steps = steps * multiple
        else:
            step = ew.minimum(step, steps)
        fraction = ew.pow(1.0 - step / steps, self.power)
        span = self.initial_learning_rate - self.end_learning_rate
        return fraction * span + self.end_learning_rate


class InverseTimeDecay(LearningRateSchedule):
    """``initial / (1 + decay_rate * step / decay_steps)`` (the quotient floored if
    `staircase`).

    >>> inverse = sf.optimizers.schedules.InverseTimeDecay(0.1, 10, 0.5)
    >>> [round(float(inverse(step)), 6) for step in (0, 5, 10, 25)]
    [0.1, 0.08, 0.066667, 0.044444]
    """

    def __init__(self, initial_learning_rate: float, decay_steps: int, decay_rate: float,
                 staircase: bool = False, name: str = "InverseTimeDecay") -> None:
        if int(decay_steps) <= 0:
            raise ValueError(f"InverseTimeDecay: decay_steps must be positive, got "
                             f"{decay_steps!r}")
        self.initial_learning_rate = float(initial_learning_rate)
        self.decay_steps = int(decay_steps)
        self.decay_rate = float(decay_rate)
        self.staircase = bool(staircase)
        self.name = name

    def __call__(self, step: Any) -> Any:
        quotient = _step(step) / float(self.decay_steps)
        if self.staircase:
            quotient = ew.floor(quotient)
        return self.initial_learning_rate / (1.0 + self.decay_rate * quotient)


class CosineDecayRestarts(LearningRateSchedule):
    """A cosine decay to ``alpha`` times the rate over `first_decay_steps`, then restarted:
    each period `t_mul` times longer than the last, its peak `m_mul` times lower
    (Loshchilov and Hutter's SGDR).

    >>> sgdr = sf.optimizers.schedules.CosineDecayRestarts(0.1, 10)
    >>> [round(float(sgdr(step)), 6) for step in (0, 5, 10, 15, 30)]
    [0.1, 0.05, 0.1, 0.085355, 0.1]
    """

    def __init__(self, initial_learning_rate: float, first_decay_steps: int,
                 t_mul: float = 2.0, m_mul: float = 1.0, alpha: float = 0.0,
                 name: str = "SGDRDecay") -> None:
        if int(first_decay_steps) <= 0:
            raise ValueError(f"CosineDecayRestarts: first_decay_steps must be positive, got "
                             f"{first_decay_steps!r}")
        self.initial_learning_rate = float(initial_learning_rate)
        self.first_decay_steps = int(first_decay_steps)
        self.t_mul = float(t_mul)
        self.m_mul = float(m_mul)
        self.alpha = float(alpha)
        self.name = name

    def __call__(self, step: Any) -> Any:
        fraction = _step(step) / float(self.first_decay_steps)
        if self.t_mul == 1.0:
            restart = ew.floor(fraction)
            fraction = fraction - restart
        else:
            restart = ew.floor(ew.log(1.0 - fraction * (1.0 - self.t_mul))
                               / math.log(self.t_mul))
            done = (1.0 - ew.pow(self.t_mul, restart)) / (1.0 - self.t_mul)
            fraction = (fraction - done) / ew.pow(self.t_mul, restart)
        peak = ew.pow(self.m_mul, restart)
        cosine = 0.5 * peak * (1.0 + ew.cos(math.pi * fraction))
        return ((1.0 - self.alpha) * cosine + self.alpha) * self.initial_learning_rate
