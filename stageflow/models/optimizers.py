"""`sf.optimizers`: SGD (with momentum, Nesterov), Adam, AdamW, Nadam, Adamax, RMSprop,
Adagrad, Adadelta and Lion, with Keras' update rules; learning-rate schedules in
`sf.optimizers.schedules`.

An optimizer is an `sf.Module` whose state is variables: the step counter `iterations`,
the learning rate (a float64 variable, cast to each model variable's dtype, so assigning a
new one reaches functions already traced), and one slot variable per model variable and
slot name (momentum, Adam's ``m`` and ``v``), created the first time `apply_gradients` sees
the variable. Slots are created with eager initial
values, so a training step under `sf.function` creates them on its first call only and is
then traced once more (the paper's state-creation rule); later calls neither create state
nor retrace.

Eagerly, a step of the built-in optimizers runs as one compiled call (`fused_updates`):
every variable's update and the step count,
traced once per set of variables and gradient signature and compiled in the background,
the updates running op by op meanwhile (as PyTorch's optimizers apply one "foreach" kernel
per step rather than ops per parameter): op by op, a small ResNet's SGD step is a
noticeable share of its training step at batch 1.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Any

from stageflow.core import dtypes
from stageflow.frontend import replica
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.convert import convert_to_tensor, is_tensor
from stageflow.frontend.ops.creation import zeros
from stageflow.frontend.tape import GradientTape
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.variables import Variable
from stageflow.models.fused_updates import RUNNER
from stageflow.models.module import Module
from stageflow.models.train import deferred

__all__ = ["SGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "Lion", "Nadam", "Optimizer",
           "RMSprop"]

class Optimizer(Module):
    """The base class: `apply_gradients` over ``(gradient, variable)`` pairs, per-variable
    slots, and `minimize`. Subclasses define `_create_slots(variable)` and
    `_update(gradient, variable, lr)`.

    Use a subclass; they share `apply_gradients` and `minimize`.

    >>> w = sf.Variable(3.0, name="w")
    >>> opt = sf.optimizers.SGD(learning_rate=0.25)
    >>> _ = opt.minimize(lambda: w * w, [w])
    >>> w
    sf.Variable(1.5, name='w', shape=(), dtype=float32)
    >>> isinstance(opt, sf.optimizers.Optimizer)
    True
    """

    _WALK_SORTED = False  # Keras' objects: their state in the order it was created

    # Slots are tracked through `_slot_variables`; `_slots` maps model variables to them.
    # `_fused_steps` is the update runner's, by variables and gradient signature.
    _TRACKING_IGNORED = Module._TRACKING_IGNORED | {"_slots", "_schedule", "_fused_steps"}

    def __init__(self, learning_rate: float | Callable | Variable, name: str | None = None
                 ) -> None:
        super().__init__(name)
        self._schedule: Callable | None = None
        if isinstance(learning_rate, Variable):
            rate = learning_rate
        elif callable(learning_rate) and not is_tensor(learning_rate):
            self._schedule = learning_rate  # called with `iterations` on every step
            rate = Variable(0.0, trainable=False, dtype=dtypes.float64,
                            name=f"{self.name}/learning_rate")
        else:
            rate = Variable(float(learning_rate), trainable=False, dtype=dtypes.float64,
                            name=f"{self.name}/learning_rate")
        self._learning_rate = rate
        self.iterations = Variable(0, trainable=False, dtype=dtypes.int64,
                                   name=f"{self.name}/iterations")
        # id(model variable) -> (weak reference to it, {slot name: slot variable})
        self._slots: dict[int, tuple[weakref.ref, dict[str, Variable]]] = {}
        self._slot_variables: list[Variable] = []
        self._fused_steps: dict[tuple, Any] = {}

    # -- hyper-parameters ---------------------------------------------------------------

    @property
    def learning_rate(self) -> Variable | Tensor:
        """The rate the next step uses: a variable (``opt.learning_rate = 0.01`` assigns
        it), or, given a schedule, the schedule at `iterations`, as Keras shows it."""
        if self._schedule is not None:
            return self._scheduled_rate()
        return self._learning_rate

    @learning_rate.setter
    def learning_rate(self, value: Any) -> None:
        if self._schedule is not None:
            raise TypeError(f"{self.name}: the learning rate is the schedule "
                            f"{self._schedule!r}, given to the optimizer: it cannot be set")
        self._learning_rate.assign(ew.cast(convert_to_tensor(value), self._learning_rate.dtype))

    def _scheduled_rate(self) -> Tensor:
        return ew.cast(convert_to_tensor(self._schedule(self.iterations.read_value())),
                       dtypes.float64)

    def _current_learning_rate(self) -> Tensor:
        """This step's rate; a schedule's is kept in the rate variable too, which
        checkpoints save."""
        if self._schedule is not None:
            rate = self._scheduled_rate()
            self._learning_rate.assign(rate)
            return rate
        return self._learning_rate.read_value()

    # -- slots --------------------------------------------------------------------------

    def add_slot(self, variable: Variable, slot_name: str, initial_value: Any = None
                 ) -> Variable:
        """The slot `slot_name` of `variable`, created (zeros by default) if new."""
        entry = self._slots.get(id(variable))
        if entry is not None and entry[0]() is not variable:  # a dead variable's id reused
            entry = None
        if entry is None:
            entry = self._slots[id(variable)] = (weakref.ref(variable), {})
        slots = entry[1]
        if slot_name not in slots:
            shape, dtype = variable.shape, variable.dtype
            value = (lambda: zeros(shape, dtype)) if initial_value is None else initial_value
            base = variable.name.replace(":", "_")
            slot = Variable(value, trainable=False, dtype=dtype, name=f"{base}/{slot_name}")
            slots[slot_name] = slot
            self._slot_variables.append(slot)
            deferred.slot_created(self, variable, slot_name, slot)  # a restored value
        return slots[slot_name]

    def get_slot(self, variable: Variable, slot_name: str) -> Variable:
        entry = self._slots.get(id(variable))
        if entry is None or entry[0]() is not variable or slot_name not in entry[1]:
            raise KeyError(f"{self.name}: no slot {slot_name!r} for variable {variable.name!r}")
        return entry[1][slot_name]

    def _create_slots(self, variable: Variable) -> None:
        """Create the slots `_update` uses for `variable` (none by default)."""

    def build(self, var_list: Iterable[Variable]) -> None:
        """Create the slots of `var_list` now rather than at their first update (Keras'
        ``optimizer.build``): a wrapper that applies the update under a `cond` makes them
        outside it."""
        for variable in var_list:
            self._create_slots(variable)

    def scale_loss(self, loss: Any) -> Any:
        """The loss whose gradients `apply_gradients` takes: the loss itself here; a
        `LossScaleOptimizer` scales it (Keras' ``optimizer.scale_loss``)."""
        return loss

    # -- updates ------------------------------------------------------------------------

    def apply_gradients(self, grads_and_vars: Iterable[tuple[Any, Variable]]) -> Variable:
        """One optimisation step: update each variable from its gradient (pairs whose
        gradient is None are skipped), then increment `iterations`. In a replica's step of
        a distribution strategy the gradients are first summed over the replicas, so every
        replica's copy of a variable takes the same update."""
        pairs = []
        for gradient, variable in grads_and_vars:
            if not isinstance(variable, Variable):
                raise TypeError(f"{self.name}.apply_gradients: expected (gradient, variable) "
                                f"pairs, got a {type(variable).__name__} where a variable "
                                "belongs")
            if gradient is None:
                continue
            gradient = convert_to_tensor(gradient)
            if gradient.dtype != variable.dtype or tuple(gradient.shape) != variable.shape:
                raise ValueError(
                    f"{self.name}.apply_gradients: the gradient for {variable.name!r} is "
                    f"{gradient.dtype.name}{list(gradient.shape)}, the variable is "
                    f"{variable.dtype.name}{list(variable.shape)}")
            pairs.append((gradient, variable))
        if not pairs:
            raise ValueError(f"{self.name}.apply_gradients: no gradients provided for any "
                             "variable (every gradient is None)")
        current = replica.current()
        if current is not None:  # a replica's step: every replica applies the gradients' sum
            summed = current.all_reduce("SUM", [gradient for gradient, _ in pairs])
            pairs = [(gradient, variable) for gradient, (_, variable)
                     in zip(summed, pairs, strict=True)]
        for _, variable in pairs:
            self._create_slots(variable)
        rate = self._current_learning_rate()
        if not (current is None and self.fusable() and RUNNER(self, rate, pairs)):
            self.apply_updates(rate, pairs)
        return self.iterations

    def fusable(self) -> bool:
        """Whether an eager step may run as one compiled call: the update rules are this
        module's, which compute from tensors only (a subclass's rule may keep Python state
        that a trace would freeze)."""
        cls = type(self)
        return cls._update.__module__ == __name__ and cls._coefficients.__module__ == __name__

    def apply_updates(self, rate: Tensor, pairs: list[tuple[Tensor, Variable]]) -> None:
        """Every variable's update at learning rate `rate` (float64), then the step count:
        a step once the gradients are checked and the slots made (what a fused call runs)."""
        coefficients: dict[Any, dict[str, Tensor]] = {}
        for gradient, variable in pairs:
            if variable.dtype not in coefficients:
                lr = ew.cast(rate, variable.dtype)
                coefficients[variable.dtype] = self._coefficients(lr, variable.dtype)
            self._update(gradient, variable, coefficients[variable.dtype])
        self.iterations.assign_add(1)

    def _coefficients(self, lr: Tensor, dtype: Any) -> dict[str, Tensor]:
        """Per-step values shared by all variables of one dtype (computed once a step)."""
        return {"lr": lr}

    def _update(self, gradient: Tensor, variable: Variable, coefficients: dict) -> None:
        raise NotImplementedError

    def _local_step(self, dtype: Any) -> Tensor:
        """The number of this step, counting from 1, as a float (Adam's `t`)."""
        return ew.cast(self.iterations.read_value() + 1, dtype)

    def minimize(self, loss: Callable[[], Any], var_list: Any, tape: Any = None) -> Any:
        """Compute `loss()` under a tape, then apply its gradients to `var_list` (a list of
        variables, a module (its trainable variables), or a callable returning either,
        called after `loss`, so models that build on first call work). Returns the loss."""
        if tape is not None and not callable(loss):
            value = loss
        else:
            if not callable(loss):
                raise TypeError(f"{self.name}.minimize: loss must be a callable (or pass the "
                                "tape it was computed under)")
            with GradientTape() as tape:
                value = loss()
        variables = var_list() if callable(var_list) and not isinstance(var_list, Module) \
            else var_list
        if isinstance(variables, Module):
            variables = variables.trainable_variables
        variables = list(variables)
        gradients = tape.gradient(value, variables)
        self.apply_gradients(zip(gradients, variables, strict=True))
        return value

    def __repr__(self) -> str:
        return f"<sf.optimizers.{type(self).__name__} {self.name!r}>"


class SGD(Optimizer):
    """Stochastic gradient descent, Keras' rule.

    Without momentum ``w -= lr * g``. With momentum ``m = momentum * m - lr * g`` and
    ``w += m``, or with Nesterov ``w += momentum * m - lr * g`` (the new `m`).

    Variables: float tensors of any shape; each gradient has its variable's shape and dtype, and
    `apply_gradients` updates the variables in place.

    >>> w = sf.Variable([1.0, -2.0], name="w")
    >>> opt = sf.optimizers.SGD(learning_rate=0.1)
    >>> _ = opt.apply_gradients([(sf.constant([0.5, -0.5]), w)])
    >>> w
    sf.Variable([ 0.95, -1.95], name='w', shape=(2,), dtype=float32)
    """

    def __init__(self, learning_rate: float | Callable | Variable = 0.01,
                 momentum: float = 0.0, nesterov: bool = False, name: str | None = None
                 ) -> None:
        if not 0.0 <= float(momentum) <= 1.0:
            raise ValueError(f"SGD: momentum must be in [0, 1], got {momentum!r}")
        super().__init__(learning_rate, name)
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)

    def _create_slots(self, variable: Variable) -> None:
        if self.momentum:
            self.add_slot(variable, "momentum")

    def _update(self, gradient: Tensor, variable: Variable, coefficients: dict) -> None:
        lr = coefficients["lr"]
        if not self.momentum:
            variable.assign_sub(gradient * lr)
            return
        m = self.get_slot(variable, "momentum")
        new_m = m.read_value() * self.momentum - gradient * lr
        m.assign(new_m)
        if self.nesterov:
            variable.assign_add(new_m * self.momentum - gradient * lr)
        else:
            variable.assign_add(new_m)


class Adam(Optimizer):
    """Adam (Kingma & Ba), Keras' form with the bias correction folded into the step:

    ``m += (g - m) * (1 - beta_1)``, ``v += (g*g - v) * (1 - beta_2)``,
    ``alpha = lr * sqrt(1 - beta_2**t) / (1 - beta_1**t)``,
    ``w -= alpha * m / (sqrt(v) + epsilon)``, with ``t`` the step number from 1.

    Variables: float tensors of any shape; each gradient has its variable's shape and dtype, and
    `apply_gradients` updates the variables in place.

    >>> w = sf.Variable([1.0, -2.0], name="w")
    >>> opt = sf.optimizers.Adam(learning_rate=0.1)
    >>> _ = opt.apply_gradients([(sf.constant([0.5, -0.5]), w)])
    >>> w
    sf.Variable([ 0.9000013, -1.9000013], name='w', shape=(2,), dtype=float32)
    """

    def __init__(self, learning_rate: float | Callable | Variable = 0.001, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-7, name: str | None = None
                 ) -> None:
        super().__init__(learning_rate, name)
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)

    def _create_slots(self, variable: Variable) -> None:
        self.add_slot(variable, "m")
        self.add_slot(variable, "v")

    def _coefficients(self, lr: Tensor, dtype: Any) -> dict[str, Tensor]:
        t = self._local_step(dtype)
        beta_1_power = ew.pow(self.beta_1, t)
        beta_2_power = ew.pow(self.beta_2, t)
        return {"alpha": lr * ew.sqrt(1.0 - beta_2_power) / (1.0 - beta_1_power)}

    def _update(self, gradient: Tensor, variable: Variable, coefficients: dict) -> None:
        m, v = self.get_slot(variable, "m"), self.get_slot(variable, "v")
        alpha = coefficients["alpha"]
        new_m = m.read_value() + (gradient - m.read_value()) * (1.0 - self.beta_1)
        new_v = v.read_value() + (ew.square(gradient) - v.read_value()) * (1.0 - self.beta_2)
        m.assign(new_m)
        v.assign(new_v)
        variable.assign_sub(new_m * alpha / (ew.sqrt(new_v) + self.epsilon))


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter), Keras' rule: before the Adam
    step, ``w -= lr * weight_decay * w``.

    Variables: float tensors of any shape; each gradient has its variable's shape and dtype, and
    `apply_gradients` updates the variables in place.

    >>> w = sf.Variable([1.0, -2.0], name="w")
    >>> opt = sf.optimizers.AdamW(learning_rate=0.1, weight_decay=0.5)
    >>> _ = opt.apply_gradients([(sf.constant([0.5, -0.5]), w)])
    >>> w
    sf.Variable([ 0.8500013, -1.8000013], name='w', shape=(2,), dtype=float32)
    """

    def __init__(self, learning_rate: float | Callable | Variable = 0.001,
                 weight_decay: float = 0.004, beta_1: float = 0.9, beta_2: float = 0.999,
                 epsilon: float = 1e-7, name: str | None = None) -> None:
        super().__init__(learning_rate, beta_1, beta_2, epsilon, name)
        self.weight_decay = float(weight_decay)

    def _coefficients(self, lr: Tensor, dtype: Any) -> dict[str, Tensor]:
        return {**super()._coefficients(lr, dtype), "decay": lr * self.weight_decay}

    def _update(self, gradient: Tensor, variable: Variable, coefficients: dict) -> None:
        variable.assign_sub(variable.read_value() * coefficients["decay"])
        super()._update(gradient, variable, coefficients)


class Nadam(Adam):
    """Adam with Nesterov momentum (Dozat), Keras' rule: the momentum's weight follows the
    schedule ``u_t = beta_1 * (1 - 0.5 * 0.96**t)``, with ``P_t`` the product of the
    ``u`` so far (kept in the variable `u_product`):

    ``m += (g - m) * (1 - beta_1)``, ``v += (g*g - v) * (1 - beta_2)``,
    ``m_hat = u_{t+1} * m / (1 - P_{t+1}) + (1 - u_t) * g / (1 - P_t)``,
    ``w -= lr * m_hat / (sqrt(v / (1 - beta_2**t)) + epsilon)``.

    Variables: float tensors of any shape; each gradient has its variable's shape and dtype, and
    `apply_gradients` updates the variables in place.

    >>> w = sf.Variable([1.0, -2.0], name="w")
    >>> opt = sf.optimizers.Nadam(learning_rate=0.1)
    >>> _ = opt.apply_gradients([(sf.constant([0.5, -0.5]), w)])
    >>> w
    sf.Variable([ 0.89372194, -1.8937219 ], name='w', shape=(2,), dtype=float32)
    """

    def __init__(self, learning_rate: float | Callable | Variable = 0.001, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-7, name: str | None = None
                 ) -> None:
        super().__init__(learning_rate, beta_1, beta_2, epsilon, name)
        # The product of the momentum schedule over the steps taken, one per optimizer (it
        # has no closed form); float64, cast to each variable's dtype.
        self.u_product = Variable(1.0, trainable=False, dtype=dtypes.float64,
                                  name=f"{self.name}/u_product")

    def _momentum_weight(self, t: Tensor) -> Tensor:
        return (1.0 - ew.pow(_NADAM_DECAY, t) * 0.5) * self.beta_1

    def apply_updates(self, rate: Tensor, pairs: list[tuple[Tensor, Variable]]) -> None:
        u_product = self.u_product.read_value() * self._momentum_weight(
            self._local_step(dtypes.float64))
        super().apply_updates(rate, pairs)
        self.u_product.assign(u_product)

    def _coefficients(self, lr: Tensor, dtype: Any) -> dict[str, Tensor]:
        t = self._local_step(dtype)
        u_t, u_next = self._momentum_weight(t), self._momentum_weight(t + 1.0)
        u_product = ew.cast(self.u_product.read_value(), dtype) * u_t
        return {"lr": lr, "u_t": u_t, "u_next": u_next, "u_product": u_product,
                "u_product_next": u_product * u_next,
                "beta_2_power": ew.pow(self.beta_2, t)}

    def _update(self, gradient: Tensor, variable: Variable, coefficients: dict) -> None:
        c = coefficients
        m, v = self.get_slot(variable, "m"), self.get_slot(variable, "v")
        new_m = m.read_value() + (gradient - m.read_value()) * (1.0 - self.beta_1)
        new_v = v.read_value() + (ew.square(gradient) - v.read_value()) * (1.0 - self.beta_2)
        m.assign(new_m)
        v.assign(new_v)
        m_hat = (new_m * c["u_next"] / (1.0 - c["u_product_next"])
                 + gradient * (1.0 - c["u_t"]) / (1.0 - c["u_product"]))
        v_hat = new_v / (1.0 - c["beta_2_power"])
        variable.assign_sub(m_hat * c["lr"] / (ew.sqrt(v_hat) + self.epsilon))


_NADAM_DECAY = 0.96  # Keras' momentum schedule's base


class Adamax(Optimizer):
    """Adamax (Kingma & Ba's infinity-norm Adam), Keras' rule:
    ``m += (g - m) * (1 - beta_1)``, ``u = max(beta_2 * u, |g|)``,
    ``w -= lr * m / ((1 - beta_1**t) * (u + epsilon))``.

    Variables: float tensors of any shape; each gradient has its variable's shape and dtype, and
    `apply_gradients` updates the variables in place.

    >>> w = sf.Variable([1.0, -2.0], name="w")
    >>> opt = sf.optimizers.Adamax(learning_rate=0.1)
    >>> _ = opt.apply_gradients([(sf.constant([0.5, -0.5]), w)])
    >>> w
    sf.Variable([ 0.90000004, -1.9000001 ], name='w', shape=(2,), dtype=float32)
    """

    def __init__(self, learning_rate: float | Callable | Variable = 0.001, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-7, name: str | None = None
                 ) -> None:
        super().__init__(learning_rate, name)
        self.beta_1, self.beta_2 = float(beta_1), float(beta_2)
        self.epsilon = float(epsilon)

    def _create_slots(self, variable: Variable) -> None:
        self.add_slot(variable, "m")
        self.add_slot(variable, "u")

    def _coefficients(self, lr: Tensor, dtype: Any) -> dict[str, Tensor]:
        return {"alpha": lr / (1.0 - ew.pow(self.beta_1, self._local_step(dtype)))}

    def _update(self, gradient: Tensor, variable: Variable, coefficients: dict) -> None:
        m, u = self.get_slot(variable, "m"), self.get_slot(variable, "u")
        new_m = m.read_value() + (gradient - m.read_value()) * (1.0 - self.beta_1)
        new_u = ew.maximum(u.read_value() * self.beta_2, ew.abs(gradient))
        m.assign(new_m)
        u.assign(new_u)
        variable.assign_sub(new_m * coefficients["alpha"] / (new_u + self.epsilon))


class Adadelta(Optimizer):
    """Adadelta (Zeiler), Keras' rule, with running averages of squared gradients and of
    squared updates: ``a = rho * a + (1 - rho) * g*g``,
    ``d = -sqrt(s + epsilon) * g / sqrt(a + epsilon)``, ``s = rho * s + (1 - rho) * d*d``,
    ``w += lr * d``.

    Variables: float tensors of any shape; each gradient has its variable's shape and dtype, and
    `apply_gradients` updates the variables in place.

    >>> w = sf.Variable([1.0, -2.0], name="w")
    >>> opt = sf.optimizers.Adadelta(learning_rate=1.0)
    >>> _ = opt.apply_gradients([(sf.constant([0.5, -0.5]), w)])
    >>> w
    sf.Variable([ 0.9985858, -1.9985858], name='w', shape=(2,), dtype=float32)
    """

    def __init__(self, learning_rate: float | Callable | Variable = 0.001, rho: float = 0.95,
                 epsilon: float = 1e-7, name: str | None = None) -> None:
        super().__init__(learning_rate, name)
        self.rho, self.epsilon = float(rho), float(epsilon)

    def _create_slots(self, variable: Variable) -> None:
        self.add_slot(variable, "accumulated_grad")
        self.add_slot(variable, "accumulated_delta_var")

    def _update(self, gradient: Tensor, variable: Variable, coefficients: dict) -> None:
        grads = self.get_slot(variable, "accumulated_grad")
        deltas = self.get_slot(variable, "accumulated_delta_var")
        a = grads.read_value() * self.rho + ew.square(gradient) * (1.0 - self.rho)
        grads.assign(a)
        s = deltas.read_value()
        delta = ew.negative(ew.sqrt(s + self.epsilon) * gradient / ew.sqrt(a + self.epsilon))
        deltas.assign(s * self.rho + ew.square(delta) * (1.0 - self.rho))
        variable.assign_add(delta * coefficients["lr"])


class RMSprop(Optimizer):
    """RMSprop, Keras' rule: ``v = rho * v + (1 - rho) * g*g``; with momentum
    ``m = momentum * m + lr * g / sqrt(v + epsilon)``, ``w -= m``, else
    ``w -= lr * g / sqrt(v + epsilon)``; `centered` divides by the variance instead
    (``v - mg**2`` with ``mg`` the mean gradient).

    Variables: float tensors of any shape; each gradient has its variable's shape and dtype, and
    `apply_gradients` updates the variables in place.

    >>> w = sf.Variable([1.0, -2.0], name="w")
    >>> opt = sf.optimizers.RMSprop(learning_rate=0.1)
    >>> _ = opt.apply_gradients([(sf.constant([0.5, -0.5]), w)])
    >>> w
    sf.Variable([ 0.68377286, -1.6837728 ], name='w', shape=(2,), dtype=float32)
    """

    def __init__(self, learning_rate: float | Callable | Variable = 0.001, rho: float = 0.9,
                 momentum: float = 0.0, epsilon: float = 1e-7, centered: bool = False,
                 name: str | None = None) -> None:
        super().__init__(learning_rate, name)
        self.rho, self.momentum, self.epsilon = float(rho), float(momentum), float(epsilon)
        self.centered = bool(centered)

    def _create_slots(self, variable: Variable) -> None:
        self.add_slot(variable, "velocity")
        if self.momentum:
            self.add_slot(variable, "momentum")
        if self.centered:
            self.add_slot(variable, "average_gradient")

    def _update(self, gradient: Tensor, variable: Variable, coefficients: dict) -> None:
        lr = coefficients["lr"]
        velocity = self.get_slot(variable, "velocity")
        v = velocity.read_value() * self.rho + ew.square(gradient) * (1.0 - self.rho)
        velocity.assign(v)
        if self.centered:
            average = self.get_slot(variable, "average_gradient")
            mean = average.read_value() * self.rho + gradient * (1.0 - self.rho)
            average.assign(mean)
            v = v - ew.square(mean)
        step = gradient * lr / ew.sqrt(v + self.epsilon)
        if self.momentum:
            momentum = self.get_slot(variable, "momentum")
            step = momentum.read_value() * self.momentum + step
            momentum.assign(step)
        variable.assign_sub(step)


class Adagrad(Optimizer):
    """Adagrad, Keras' rule: ``a += g*g``, ``w -= lr * g / sqrt(a + epsilon)``, the
    accumulator starting at `initial_accumulator_value`.

    Variables: float tensors of any shape; each gradient has its variable's shape and dtype, and
    `apply_gradients` updates the variables in place.

    >>> w = sf.Variable([1.0, -2.0], name="w")
    >>> opt = sf.optimizers.Adagrad(learning_rate=0.1)
    >>> _ = opt.apply_gradients([(sf.constant([0.5, -0.5]), w)])
    >>> w
    sf.Variable([ 0.9154846, -1.9154845], name='w', shape=(2,), dtype=float32)
    """

    def __init__(self, learning_rate: float | Callable | Variable = 0.001,
                 initial_accumulator_value: float = 0.1, epsilon: float = 1e-7,
                 name: str | None = None) -> None:
        super().__init__(learning_rate, name)
        self.initial_accumulator_value = float(initial_accumulator_value)
        self.epsilon = float(epsilon)

    def _create_slots(self, variable: Variable) -> None:
        start, shape, dtype = self.initial_accumulator_value, variable.shape, variable.dtype
        self.add_slot(variable, "accumulator", lambda: zeros(shape, dtype) + start)

    def _update(self, gradient: Tensor, variable: Variable, coefficients: dict) -> None:
        accumulator = self.get_slot(variable, "accumulator")
        a = accumulator.read_value() + ew.square(gradient)
        accumulator.assign(a)
        variable.assign_sub(gradient * coefficients["lr"] / ew.sqrt(a + self.epsilon))


class Lion(Optimizer):
    """Lion (Chen et al., 2023): ``w -= lr * sign(beta_1 * m + (1 - beta_1) * g)``, then
    ``m = beta_2 * m + (1 - beta_2) * g``.

    Variables: float tensors of any shape; each gradient has its variable's shape and dtype, and
    `apply_gradients` updates the variables in place.

    >>> w = sf.Variable([1.0, -2.0], name="w")
    >>> opt = sf.optimizers.Lion(learning_rate=0.1)
    >>> _ = opt.apply_gradients([(sf.constant([0.5, -0.5]), w)])
    >>> w
    sf.Variable([ 0.9, -1.9], name='w', shape=(2,), dtype=float32)
    """

    def __init__(self, learning_rate: float | Callable | Variable = 0.001, beta_1: float = 0.9,
                 beta_2: float = 0.99, name: str | None = None) -> None:
        super().__init__(learning_rate, name)
        self.beta_1, self.beta_2 = float(beta_1), float(beta_2)

    def _create_slots(self, variable: Variable) -> None:
        self.add_slot(variable, "momentum")

    def _update(self, gradient: Tensor, variable: Variable, coefficients: dict) -> None:
        momentum = self.get_slot(variable, "momentum")
        m = momentum.read_value()
        direction = ew.sign(m * self.beta_1 + gradient * (1.0 - self.beta_1))
        variable.assign_sub(direction * coefficients["lr"])
        momentum.assign(m * self.beta_2 + gradient * (1.0 - self.beta_2))
