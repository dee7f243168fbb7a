"""`Model`: a layer that trains itself, as Keras' models do: `compile` then `fit`,
`evaluate`, `predict` and `summary`.

`fit` stages one training step (forward, loss, gradients, the optimizer's update, the
metrics' updates) as an `sf.function` and calls it per batch: the first call traces it
(the layers build, the optimizer makes its slots), every later one runs the compiled step
(a last, smaller batch retraces once with an unknown batch dim). ``compile(run_eagerly=
True)`` runs the same step eagerly instead, to debug it. Data is NumPy arrays or tensors
(``x``, ``y``; cut into batches of `batch_size`, reshuffled each epoch when `shuffle`), or
an `sf.data.Dataset` of ``(x, y)`` batches.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stageflow.core import lazy
from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import zeros
from stageflow.frontend.ops.elementwise import cast
from stageflow.frontend.ops.shape_of import shape
from stageflow.frontend.tape import GradientTape
from stageflow.frontend.tensor import Tensor
from stageflow.models import losses as losses_module
from stageflow.models import metrics as metrics_module
from stageflow.models import optimizers as optimizers_module
from stageflow.models.callbacks import Callback, History
from stageflow.models.layers.base import Layer, takes_training

if TYPE_CHECKING:  # the model layer loads no compiler until a model trains
    from stageflow.staging import function as staging
else:
    staging = lazy.module("stageflow.staging.function")

__all__ = ["Model"]

_LOSSES: dict[str, Callable[[], losses_module.Loss]] = {
    "mse": losses_module.MeanSquaredError,
    "mean_squared_error": losses_module.MeanSquaredError,
    "mae": losses_module.MeanAbsoluteError,
    "mean_absolute_error": losses_module.MeanAbsoluteError,
    "huber": losses_module.Huber,
    "binary_crossentropy": losses_module.BinaryCrossentropy,
    "categorical_crossentropy": losses_module.CategoricalCrossentropy,
    "sparse_categorical_crossentropy": losses_module.SparseCategoricalCrossentropy,
}
_OPTIMIZERS: dict[str, Callable[[], optimizers_module.Optimizer]] = {
    "sgd": lambda: optimizers_module.SGD(0.01),
    "adam": lambda: optimizers_module.Adam(0.001),
    "adamw": lambda: optimizers_module.AdamW(0.001),
    "rmsprop": lambda: optimizers_module.RMSprop(0.001),
    "adagrad": lambda: optimizers_module.Adagrad(0.001),
}


class Model(Layer):
    """A layer with Keras' training loop. Subclass it and define `call` (its layers as
    attributes), or use `Sequential`, which is one.

    >>> model = sf.keras.Sequential([sf.layers.Dense(4, activation="relu"),
    ...                              sf.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(16, 2)
    >>> history = model.fit(x, x.sum(1, keepdims=True), epochs=3, batch_size=8, verbose=0)
    >>> len(history.history["loss"]), model.predict(x, verbose=0).shape
    (3, (16, 1))
    """

    # The optimizer and the metrics are trained beside the model, not part of it (Keras'
    # `variables` leave them out too; a checkpoint is given the optimizer itself).
    _TRACKING_IGNORED = Layer._TRACKING_IGNORED | {"optimizer", "compiled_loss",
                                                   "compiled_metrics", "_loss_mean", "_steps",
                                                   "history", "stop_training"}

    def __init__(self, trainable: bool = True, name: str | None = None) -> None:
        super().__init__(trainable=trainable, name=name)
        self.optimizer: optimizers_module.Optimizer | None = None
        self.compiled_loss: Callable[..., Tensor] | None = None
        self.compiled_metrics: list[metrics_module.Metric] = []
        self.stop_training = False
        self.history: History | None = None
        self._steps: dict[str, Callable[..., Any]] = {}

    # -- configuration --------------------------------------------------------------------

    def compile(self, optimizer: Any = "rmsprop", loss: Any = None,
                metrics: Sequence[Any] | None = None, run_eagerly: bool = False) -> None:
        """The optimizer, the loss and the metrics of `fit` and `evaluate`: objects, or
        Keras' names (``"adam"``, ``"sparse_categorical_crossentropy"``, ``"accuracy"``)."""
        self.optimizer = _optimizer(optimizer)
        self.compiled_loss = _loss(loss)
        self.compiled_metrics = [_metric(m, loss) for m in metrics or ()]
        self._loss_mean = metrics_module.Mean(name="loss")
        self._steps = self._make_steps(run_eagerly)

    def _make_steps(self, run_eagerly: bool) -> dict[str, Callable[..., Any]]:
        steps = {"train": self._train_step, "test": self._test_step,
                 "predict": self._predict_step}
        if run_eagerly:
            return steps
        return {name: staging.Function(step, reduce_retracing=True,
                                       name=f"{self.name}_{name}_step")
                for name, step in steps.items()}

    def _compiled(self, method: str) -> None:
        if self.compiled_loss is None:
            raise RuntimeError(f"{type(self).__name__}.{method}: call compile(optimizer, "
                               f"loss, metrics) first{describe_location()}")

    # -- steps ----------------------------------------------------------------------------

    def _train_step(self, x: Any, y: Any) -> Tensor:
        with GradientTape() as tape:
            predictions = self(x, training=True)
            loss = self.compiled_loss(y, predictions)
        variables = self.trainable_variables
        gradients = tape.gradient(loss, variables)
        self.optimizer.apply_gradients(zip(gradients, variables, strict=True))
        self._update_metrics(loss, y, predictions)
        return loss

    def _test_step(self, x: Any, y: Any) -> Tensor:
        predictions = self(x, training=False)
        loss = self.compiled_loss(y, predictions)
        self._update_metrics(loss, y, predictions)
        return loss

    def _predict_step(self, x: Any) -> Any:
        return self(x, training=False)

    def _update_metrics(self, loss: Tensor, y: Any, predictions: Any) -> None:
        # Weighted by the batch's size, as Keras does: a smaller last batch counts less,
        # and the epoch's loss is the mean over its examples.
        count = cast(shape(predictions)[0], loss.dtype)
        self._loss_mean.update_state(loss, sample_weight=count)
        for metric in self.compiled_metrics:
            metric.update_state(y, predictions)

    def _logs(self) -> dict[str, float]:
        logs = {"loss": float(self._loss_mean.result())}
        logs.update((m.name, float(m.result())) for m in self.compiled_metrics)
        return logs

    def _reset_metrics(self) -> None:
        for metric in (self._loss_mean, *self.compiled_metrics):
            metric.reset_state()

    # -- the loops ------------------------------------------------------------------------

    def fit(self, x: Any = None, y: Any = None, batch_size: int = 32, epochs: int = 1,
            verbose: int | str = "auto", callbacks: Sequence[Callback] | None = None,
            validation_data: tuple[Any, Any] | None = None, shuffle: bool = True,
            initial_epoch: int = 0, seed: int | None = None) -> History:
        """Train for `epochs` epochs (from `initial_epoch`); after each, evaluate on
        `validation_data` (``val_`` logs). Returns the `History` of the epochs' logs."""
        self._compiled("fit")
        history = History()
        hooks = [*(callbacks or ()), history]
        for hook in hooks:
            hook.set_model(self)
        self.stop_training = False
        for hook in hooks:
            hook.on_train_begin()
        rng = np.random.default_rng(seed)
        for epoch in range(initial_epoch, epochs):
            for hook in hooks:
                hook.on_epoch_begin(epoch)
            self._reset_metrics()
            steps = 0
            for steps, (xs, ys) in enumerate(_batches(x, y, batch_size, shuffle, rng), 1):
                self._steps["train"](xs, ys)
                for hook in hooks:
                    hook.on_train_batch_end(steps - 1, None)
            if steps == 0:
                raise ValueError(f"{type(self).__name__}.fit: the data has no batches"
                                 f"{describe_location()}")
            logs = self._logs()
            if validation_data is not None:
                values = self.evaluate(*validation_data, batch_size=batch_size, verbose=0,
                                       return_dict=True)
                logs.update((f"val_{k}", v) for k, v in values.items())
            if _shows(verbose):
                shown = " - ".join(f"{k}: {v:.4f}" for k, v in logs.items())
                print(f"Epoch {epoch + 1}/{epochs} - {steps} steps - {shown}", flush=True,
                      file=sys.stdout)
            for hook in hooks:
                hook.on_epoch_end(epoch, logs)
            if self.stop_training:
                break
        for hook in hooks:
            hook.on_train_end()
        self.history = history
        return history

    def evaluate(self, x: Any = None, y: Any = None, batch_size: int = 32,
                 verbose: int | str = "auto", return_dict: bool = False) -> Any:
        """The loss (and the metrics: a list, or a dict with `return_dict`) over the data."""
        self._compiled("evaluate")
        self._reset_metrics()
        for xs, ys in _batches(x, y, batch_size, False, None):
            self._steps["test"](xs, ys)
        logs = self._logs()
        if _shows(verbose):
            print(" - ".join(f"{k}: {v:.4f}" for k, v in logs.items()), flush=True)
        if return_dict:
            return logs
        return logs["loss"] if len(logs) == 1 else list(logs.values())

    def predict(self, x: Any, batch_size: int = 32, verbose: int | str = "auto"
                ) -> np.ndarray:
        """The model's outputs for `x`, batch by batch, as one NumPy array."""
        del verbose
        step = self._steps.get("predict") or self._make_steps(False)["predict"]
        outputs = [np.asarray(step(xs).numpy()) for xs, _ in _batches(x, None, batch_size,
                                                                         False, None)]
        return np.concatenate(outputs) if outputs else np.zeros((0,), np.float32)

    # -- description ----------------------------------------------------------------------

    def summary(self, print_fn: Callable[[str], None] = print) -> None:
        """Keras' table: each layer, its output shape (for inputs like the model's first
        call, the batch dim free) and its parameter count, then the totals."""
        spec = self.input_spec
        if spec is None:
            raise ValueError(f"{type(self).__name__}.summary: the model has not been called "
                             f"yet, so its layers' shapes are unknown: call it (or fit it) "
                             f"once{describe_location()}")
        rows = [("Layer (type)", "Output Shape", "Param #")]
        value: Any = zeros((1, *spec.shape[1:]), spec.dtype)
        for layer in _sublayers(self):
            value = layer(value, training=False) if takes_training(layer) else layer(value)
            shape = "(None, " + ", ".join(str(d) for d in value.shape[1:]) + ")"
            count = sum(int(np.prod(v.shape)) for v in getattr(layer, "variables", []))
            rows.append((f"{getattr(layer, 'name', type(layer).__name__)} "
                         f"({type(layer).__name__})", shape, f"{count:,}"))
        widths = [max(len(row[i]) for row in rows) + 2 for i in range(3)]
        rule = "=" * sum(widths)
        print_fn(f'Model: "{self.name}"')
        print_fn(rule)
        for index, row in enumerate(rows):
            print_fn("".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
            print_fn(rule if index == 0 else "-" * sum(widths))
        trainable = sum(int(np.prod(v.shape)) for v in self.trainable_variables)
        total = sum(int(np.prod(v.shape)) for v in self.variables)
        print_fn(f"Total params: {total:,}")
        print_fn(f"Trainable params: {trainable:,}")
        print_fn(f"Non-trainable params: {total - trainable:,}")


def _shows(verbose: int | str) -> bool:
    return verbose == "auto" or bool(verbose)


def _sublayers(model: Model) -> list[Any]:
    """The layers a summary lists: a Sequential's in order, else the model's own layers."""
    layers = getattr(model, "layers", None)
    if layers is not None:
        return list(layers)
    return [value for value in vars(model).values() if isinstance(value, Layer)]


def _batches(x: Any, y: Any, batch_size: int, shuffle: bool, rng: Any
             ) -> Iterator[tuple[Any, Any]]:
    """``(x, y)`` batches of arrays (shuffled by `rng` when `shuffle`), or the elements of
    an `sf.data.Dataset` (or any iterable of batches): ``(x, y)`` pairs, or ``x`` alone for
    `predict`."""
    if not isinstance(x, np.ndarray | Tensor | list | tuple) and hasattr(x, "__iter__"):
        for element in x:
            yield (element[0], element[1]) if isinstance(element, tuple) else (element, None)
        return
    xs = np.asarray(x.numpy() if isinstance(x, Tensor) else x)
    ys = None if y is None else np.asarray(y.numpy() if isinstance(y, Tensor) else y)
    if ys is not None and len(ys) != len(xs):
        raise ValueError(f"fit: x has {len(xs)} examples, y {len(ys)}{describe_location()}")
    order = rng.permutation(len(xs)) if shuffle else np.arange(len(xs))
    for start in range(0, len(xs), int(batch_size)):
        rows = order[start:start + int(batch_size)]
        yield (convert_to_tensor(xs[rows]),
               None if ys is None else convert_to_tensor(ys[rows]))


def _optimizer(optimizer: Any) -> optimizers_module.Optimizer:
    if isinstance(optimizer, str):
        try:
            return _OPTIMIZERS[optimizer.lower()]()
        except KeyError:
            raise ValueError(f"compile: unknown optimizer {optimizer!r} (one of "
                             f"{', '.join(_OPTIMIZERS)}, or an sf.optimizers object)") from None
    if not isinstance(optimizer, optimizers_module.Optimizer):
        raise TypeError(f"compile: optimizer must be a name or an sf.optimizers object, got "
                        f"{type(optimizer).__name__}")
    return optimizer


def _loss(loss: Any) -> Callable[..., Tensor]:
    if loss is None:
        raise ValueError("compile: give a loss (a name such as 'mse', an sf.losses object or "
                         "a function of (y_true, y_pred))")
    if isinstance(loss, str):
        try:
            return _LOSSES[loss.lower()]()
        except KeyError:
            raise ValueError(f"compile: unknown loss {loss!r} (one of {', '.join(_LOSSES)})"
                             ) from None
    if not callable(loss):
        raise TypeError(f"compile: a loss must be callable, got {type(loss).__name__}")
    return loss


def _metric(metric: Any, loss: Any) -> metrics_module.Metric:
    """A metric object, or one made from Keras' name (``"accuracy"`` after the loss)."""
    if isinstance(metric, metrics_module.Metric):
        return metric
    if metric in ("accuracy", "acc"):
        name = loss if isinstance(loss, str) else type(loss).__name__.lower()
        if "sparse" in name:
            return metrics_module.SparseCategoricalAccuracy(name="accuracy")
        if "categorical" in name:
            return metrics_module.CategoricalAccuracy(name="accuracy")
        raise ValueError(f"compile: 'accuracy' is known for categorical losses; for {loss!r} "
                         f"pass a metric object (sf.metrics.Accuracy compares values exactly)")
    if metric in ("mse", "mean_squared_error"):
        return metrics_module.MeanSquaredError(name="mse")
    raise ValueError(f"compile: unknown metric {metric!r} (an sf.metrics object, or "
                     f"'accuracy' or 'mse')")
