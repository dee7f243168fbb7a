"""`LossScaleOptimizer`: dynamic loss scaling for float16 training (Keras' optimizer).

float16 keeps five exponent bits: gradients below about 6e-8 flush to zero in a float16
backward pass. Multiplying the loss by a large scale lifts them into range; the optimizer
divides the gradients by it again before the update. The scale adapts, as Keras' does: a
step whose gradients hold an inf or a NaN is skipped (no variable, slot or step count
changes) and halves the scale; every `dynamic_growth_steps` finite steps in a row double
it. bfloat16 has float32's exponent range and needs none of this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from stageflow.core import dtypes
from stageflow.frontend import replica
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.control import cond
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.math_ops import is_finite, reduce_all
from stageflow.frontend.tape import GradientTape
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.variables import Variable
from stageflow.models.module import Module
from stageflow.models.optimizers import Optimizer

__all__ = ["LossScaleOptimizer"]


class LossScaleOptimizer(Optimizer):
    """`inner_optimizer` with dynamic loss scaling (Keras'
    ``keras.mixed_precision.LossScaleOptimizer``): `scale_loss` multiplies the loss by
    `dynamic_scale` (`initial_scale` to start), `apply_gradients` takes the gradients of
    that scaled loss, divides them by the scale and applies them with the inner optimizer
    when they are all finite; otherwise it skips the step and halves the scale, and after
    `dynamic_growth_steps` finite steps it doubles the scale. `Model.fit` scales the loss
    itself; `minimize` does too.

    >>> w = sf.Variable(1.0)
    >>> opt = sf.keras.mixed_precision.LossScaleOptimizer(sf.optimizers.SGD(0.5),
    ...                                                   initial_scale=8.0)
    >>> _ = opt.minimize(lambda: w * w, [w])    # gradient 8 * 2, unscaled to 2
    >>> float(w), float(opt.dynamic_scale)
    (0.0, 8.0)
    >>> _ = opt.apply_gradients([(sf.constant(float("inf")), w)])    # skipped
    >>> float(w), float(opt.dynamic_scale), int(opt.iterations)
    (0.0, 4.0, 1)
    """

    def __init__(self, inner_optimizer: Optimizer, initial_scale: float = 2.0 ** 15,
                 dynamic_growth_steps: int = 2000, name: str | None = None) -> None:
        if not isinstance(inner_optimizer, Optimizer) or isinstance(inner_optimizer,
                                                                    LossScaleOptimizer):
            raise TypeError(f"LossScaleOptimizer: expected an sf.optimizers object to wrap, "
                            f"got {type(inner_optimizer).__name__}")
        if float(initial_scale) <= 0 or int(dynamic_growth_steps) < 1:
            raise ValueError(f"LossScaleOptimizer: initial_scale must be positive and "
                             f"dynamic_growth_steps at least 1, got {initial_scale!r} and "
                             f"{dynamic_growth_steps!r}")
        # Its state is the inner optimizer's (rate, step count, slots) and the scale's: none
        # of the base class's own, whose constructor is not run.
        Module.__init__(self, name)
        self.inner_optimizer = inner_optimizer
        self.dynamic_growth_steps = int(dynamic_growth_steps)
        self.dynamic_scale = Variable(float(initial_scale), trainable=False,
                                      dtype=dtypes.float32, name=f"{self.name}/dynamic_scale")
        self.step_counter = Variable(0, trainable=False, dtype=dtypes.int64,
                                     name=f"{self.name}/step_counter")

    @property
    def iterations(self) -> Variable:
        """The inner optimizer's step count (skipped steps do not count)."""
        return self.inner_optimizer.iterations

    @property
    def learning_rate(self) -> Variable | Tensor:
        return self.inner_optimizer.learning_rate

    @learning_rate.setter
    def learning_rate(self, value: Any) -> None:
        self.inner_optimizer.learning_rate = value

    def scale_loss(self, loss: Any) -> Tensor:
        """``loss * dynamic_scale``, in the loss's dtype: differentiate this one."""
        loss = convert_to_tensor(loss)
        return loss * ew.cast(self.dynamic_scale.read_value(), loss.dtype)

    def build(self, var_list: Iterable[Variable]) -> None:
        self.inner_optimizer.build(var_list)

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Any, Variable]]) -> Variable:
        """Unscale the gradients (of `scale_loss`'s loss) and apply them with the inner
        optimizer if all are finite, else skip the step; then adapt the scale. In a
        replica's step the replicas agree on finiteness, so all skip or none."""
        pairs = [(None if g is None else convert_to_tensor(g), v) for g, v in grads_and_vars]
        scale = self.dynamic_scale.read_value()
        unscaled = [(None if g is None else g * ew.cast(1.0 / scale, g.dtype), v)
                    for g, v in pairs]
        finite = _all_finite([g for g, _ in pairs if g is not None])
        # Slots exist before the branch: state is created outside a traced `cond`.
        self.inner_optimizer.build([v for g, v in pairs if g is not None])

        def apply() -> Tensor:
            self.inner_optimizer.apply_gradients(unscaled)
            return convert_to_tensor(True)

        def skip() -> Tensor:
            return convert_to_tensor(False)

        cond(finite, apply, skip)
        good = ew.where(finite, self.step_counter.read_value() + 1, 0)
        grow = ew.greater_equal(good, self.dynamic_growth_steps)
        self.dynamic_scale.assign(ew.where(finite, ew.where(grow, scale * 2.0, scale),
                                           scale * 0.5))
        self.step_counter.assign(ew.where(grow, 0, good))
        return self.iterations

    def minimize(self, loss: Callable[[], Any], var_list: Any, tape: Any = None) -> Any:
        """Differentiate ``scale_loss(loss())`` and apply it; returns the unscaled loss.
        The loss must be a callable: a loss already computed under a closed tape cannot be
        scaled before it is differentiated."""
        if not callable(loss):
            raise TypeError(f"{self.name}.minimize: pass the loss as a callable, so that its "
                            f"scaled value is differentiated")
        with GradientTape() as tape:
            value = loss()
            scaled = self.scale_loss(value)
        super().minimize(scaled, var_list, tape=tape)
        return value

    def __repr__(self) -> str:
        return (f"<sf.keras.mixed_precision.LossScaleOptimizer {self.name!r} over "
                f"{self.inner_optimizer!r}>")


def _all_finite(gradients: list[Tensor]) -> Tensor:
    """Whether every gradient is finite, on every replica of a distribution strategy."""
    finite = convert_to_tensor(True)
    for gradient in gradients:
        finite = ew.logical_and(finite, reduce_all(is_finite(gradient)))
    current = replica.current()
    if current is not None:
        bad = current.all_reduce("SUM", [ew.cast(ew.logical_not(finite), dtypes.float32)])[0]
        finite = ew.equal(bad, 0.0)
    return finite
