"""`Model`: a layer that trains itself, as Keras' models do: `compile` then `fit`,
`evaluate`, `predict` and `summary`.

`fit` stages one training step (forward, loss, gradients, the optimizer's update, the
metrics' updates) as an `sf.function` and calls it per batch: the first call traces it
(the layers build, the optimizer makes its slots), every later one runs the compiled step
(a last, smaller batch is traced once more, for its shape). ``compile(run_eagerly=
True)`` runs the same step eagerly instead, to debug it. Data is NumPy arrays or tensors
(``x``, ``y``; cut into batches of `batch_size`, reshuffled each epoch when `shuffle`), or
an `sf.data.Dataset` of ``(x, y)`` batches.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stageflow.core import dtypes, lazy, nest
from stageflow.core.source import describe_location
from stageflow.frontend import replica
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.elementwise import cast
from stageflow.frontend.ops.nn import scale_regularization_loss
from stageflow.frontend.ops.shape_of import shape
from stageflow.frontend.sparse_tensor import SparseTensor
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tape import GradientTape
from stageflow.frontend.tensor import Tensor
from stageflow.models import functional_config, keras_archive
from stageflow.models import losses as losses_module
from stageflow.models import metrics as metrics_module
from stageflow.models import optimizers as optimizers_module
from stageflow.models.callbacks import Callback, History, ProgbarLogger
from stageflow.models.layers import symbolic
from stageflow.models.layers.base import Layer, takes_training
from stageflow.models.naming import auto_name
from stageflow.models.train.checkpoint import Checkpoint, CheckpointLoadStatus, PythonState

if TYPE_CHECKING:  # the model layer loads no compiler until a model trains
    from stageflow.staging import function as staging
else:
    staging = lazy.module("stageflow.staging.function")
# The saved format sits above the model layer (it saves any object's staged functions):
# `Model.save` reaches it when called, as Keras' `Model.save` reaches its saving API.
saving = lazy.module("stageflow.saved.save")

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
    "mape": losses_module.MeanAbsolutePercentageError,
    "mean_absolute_percentage_error": losses_module.MeanAbsolutePercentageError,
    "msle": losses_module.MeanSquaredLogarithmicError,
    "mean_squared_logarithmic_error": losses_module.MeanSquaredLogarithmicError,
    "kld": losses_module.KLDivergence,
    "kl_divergence": losses_module.KLDivergence,
    "kullback_leibler_divergence": losses_module.KLDivergence,
    "logcosh": losses_module.LogCosh,
    "log_cosh": losses_module.LogCosh,
    "poisson": losses_module.Poisson,
    "cosine_similarity": losses_module.CosineSimilarity,
    "hinge": losses_module.Hinge,
}
_OPTIMIZERS: dict[str, Callable[[], optimizers_module.Optimizer]] = {
    "sgd": lambda: optimizers_module.SGD(0.01),
    "adam": lambda: optimizers_module.Adam(0.001),
    "adamw": lambda: optimizers_module.AdamW(0.001),
    "rmsprop": lambda: optimizers_module.RMSprop(0.001),
    "adagrad": lambda: optimizers_module.Adagrad(0.001),
    "nadam": lambda: optimizers_module.Nadam(0.001),
    "adamax": lambda: optimizers_module.Adamax(0.001),
    "adadelta": lambda: optimizers_module.Adadelta(0.001),
    "lion": lambda: optimizers_module.Lion(0.001),
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
                                                   "history", "stop_training", "_graph", "inputs",
                                                   "outputs", "steps_per_execution",
                                                   "fit_progress", "_strategy",
                                                   "_replica_steps"}

    def __init__(self, inputs: Any = None, outputs: Any = None, trainable: bool = True,
                 name: str | None = None) -> None:
        if name is None and inputs is not None and type(self) is Model:
            name = auto_name("Functional")  # Keras 3: `Model(inputs, outputs)` is a Functional
        super().__init__(trainable=trainable, name=name)
        self._graph: symbolic.Graph | None = None
        if inputs is not None or outputs is not None:
            self._connect(inputs, outputs)
        self.optimizer: optimizers_module.Optimizer | None = None
        self.compiled_loss: Callable[..., Tensor] | None = None
        self.compiled_metrics: list[metrics_module.Metric] = []
        self.stop_training = False
        self.history: History | None = None
        self.fit_progress: FitProgress | None = None
        self._steps: dict[str, Callable[..., Any]] = {}
        self._strategy: Any = None  # the distribution strategy `compile` found in scope

    def __getattr__(self, name: str) -> Any:
        """`layers` of a subclassed model (Keras' ``Model.layers``): the layers it holds as
        attributes, in the order they were assigned; a functional model and a `Sequential`
        hold theirs as an attribute, which is found before this is asked."""
        if name == "layers":
            return [value for value in vars(self).values() if isinstance(value, Layer)]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _connect(self, inputs: Any, outputs: Any) -> None:
        """The functional API: this model runs the layer calls from `inputs` (`Input`
        values) to `outputs`; its layers, and so its variables, are those calls' layers."""
        if inputs is None or outputs is None:
            raise ValueError(f"Model: the functional API takes both inputs and outputs "
                             f"(sf.keras.Model(inputs, outputs)){describe_location()}")
        self._graph = symbolic.Graph(inputs, outputs)
        self.inputs, self.outputs = inputs, outputs
        self.layers = self._graph.layers()
        self.built = True
        first = self._graph.input_leaves[0]
        if len(self._graph.input_leaves) == 1 and first.ndim:
            self.input_spec = TensorSpec(first.shape, first.dtype)

    def call(self, inputs: Any, training: bool = False) -> Any:
        """The functional graph's layers on `inputs` (a subclass defines its own `call`)."""
        del training  # the layers inside take this call's mode (see `Layer.__call__`)
        if self._graph is None:
            raise NotImplementedError(
                f"{type(self).__name__}: define `call` in a subclass of sf.keras.Model, or "
                f"build the model from its inputs and outputs: sf.keras.Model(inputs, "
                f"outputs){describe_location()}")
        return self._graph(inputs)

    # -- configuration --------------------------------------------------------------------

    def compile(self, optimizer: Any = "rmsprop", loss: Any = None,
                metrics: Sequence[Any] | None = None, run_eagerly: bool = False,
                steps_per_execution: int = 1) -> None:
        """The optimizer, the loss and the metrics of `fit` and `evaluate`: objects, or
        Keras' names (``"adam"``, ``"sparse_categorical_crossentropy"``, ``"accuracy"``).

        `steps_per_execution` training steps run in one call of the staged step (Keras'
        argument): the Python between steps (batching, the call, the callbacks, which then
        see every `steps_per_execution`-th batch) is paid once per group. The steps are
        unrolled in the staged program, so a large value costs compile time.

        Compiled in a distribution strategy's scope (`sf.distribute.MirroredStrategy`),
        `fit` trains data-parallel: each batch split over the replicas, their gradients
        summed (each replica's loss weighted by its share of the batch), as Keras does."""
        if int(steps_per_execution) < 1:
            raise ValueError(f"compile: steps_per_execution must be >= 1, got "
                             f"{steps_per_execution!r}{describe_location()}")
        self.optimizer = _optimizer(optimizer)
        self.compiled_loss = _loss(loss)
        self.compiled_metrics = [_metric(m, loss) for m in metrics or ()]
        self._loss_mean = metrics_module.Mean(name="loss")
        self.steps_per_execution = int(steps_per_execution)
        self._strategy = replica.scoped_strategy()
        self._steps = self._make_steps(run_eagerly)

    def _make_steps(self, run_eagerly: bool) -> dict[str, Callable[..., Any]]:
        steps = {"train": self._train_steps, "test": self._test_step,
                 "predict": self._predict_step}
        if self._strategy is not None and self._strategy.stages_each_replica:
            # Replicas in other processes: each runs its own staged steps (a group of
            # `steps_per_execution`), called from here once per group.
            self._replica_steps = staging.Function(self._replica_train_steps,
                                                   name=f"{self.name}_replica_steps")
            return steps
        if run_eagerly:
            return steps
        # Each batch shape gets its own trace (two with a smaller last batch), not one with
        # an unknown batch dim: static shapes compile to faster code, and random draws
        # (dropout) need them.
        return {name: staging.Function(step, name=f"{self.name}_{name}_step")
                for name, step in steps.items()}

    def _compiled(self, method: str) -> None:
        if self.compiled_loss is None:
            raise RuntimeError(f"{type(self).__name__}.{method}: call compile(optimizer, "
                               f"loss, metrics) first{describe_location()}")

    # -- steps ----------------------------------------------------------------------------

    def _train_step(self, x: Any, y: Any) -> Tensor:
        strategy = self._strategy
        if strategy is None or strategy.num_replicas_in_sync == 1:
            return self._replica_train_step(x, y, None)
        rows = cast(shape(nest.flatten(x)[0][0])[0], dtypes.float32)
        shards = strategy.experimental_split_batch((x, y))
        losses = strategy.run(self._replica_train_step, args=(*shards, rows))
        return strategy.reduce("SUM", losses, axis=None)

    def _replica_train_steps(self, shards: tuple, rows: tuple) -> Tensor:
        """A replica's steps on its shards of a group of batches (each weighted by its
        global batch's rows); the last one's loss share."""
        for (x, y), global_rows in zip(shards, rows, strict=True):
            share = self._replica_train_step(x, y, global_rows)
        return share

    def _replica_train_step(self, x: Any, y: Any, global_rows: Tensor | None) -> Tensor:
        """One replica's step on its shard (the whole batch without a strategy): its loss,
        weighted by its share of the global batch of `global_rows`, gives the gradients the
        optimizer sums over the replicas, and the sum is the batch's mean loss."""
        with GradientTape() as tape:
            predictions = losses_module.full_precision(self(x, training=True))
            loss = self.compiled_loss(y, predictions)
            penalty = self._penalty(loss.dtype)
            if global_rows is None:
                share = loss if penalty is None else loss + penalty
            else:  # the penalty once over the replicas, as the loss over the global batch
                share = loss * cast(shape(predictions)[0], loss.dtype) / cast(
                    global_rows, loss.dtype)
                if penalty is not None:
                    share = share + scale_regularization_loss(penalty)
            if penalty is not None:
                loss = loss + penalty  # what Keras reports: the regularized loss
            scaled = self.optimizer.scale_loss(share)  # a loss-scaling optimizer's
        variables = self.trainable_variables
        gradients = tape.gradient(scaled, variables)
        self.optimizer.apply_gradients(zip(gradients, variables, strict=True))
        self._update_metrics(loss, y, predictions)
        return share

    def _train_steps(self, batches: tuple[tuple[Any, Any], ...]) -> Tensor:
        """`_train_step` on each ``(x, y)`` of `batches` in turn; the last loss. Replicas
        in other processes take the whole group in one call each."""
        strategy = self._strategy
        if strategy is not None and strategy.stages_each_replica:
            shards = tuple(strategy.experimental_split_batch((x, y)) for x, y in batches)
            rows = tuple(float(nest.flatten(x)[0][0].shape[0]) for x, _ in batches)
            losses = strategy.run(self._replica_steps, args=(shards, rows))
            return strategy.reduce("SUM", losses, axis=None)
        for x, y in batches:
            loss = self._train_step(x, y)
        return loss

    def _penalty(self, dtype: Any) -> Tensor | None:
        """The sum of the model's regularization losses (`Layer.losses`), if it has any."""
        penalties = self.losses
        if not penalties:
            return None
        total = cast(penalties[0], dtype)
        for penalty in penalties[1:]:
            total = total + cast(penalty, dtype)
        return total

    def _test_step(self, x: Any, y: Any) -> Tensor:
        predictions = losses_module.full_precision(self(x, training=False))
        loss = self.compiled_loss(y, predictions)
        penalty = self._penalty(loss.dtype)
        if penalty is not None:
            loss = loss + penalty
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
        for metric in self.metrics_state:
            metric.reset_state()

    # -- the loops ------------------------------------------------------------------------

    def fit(self, x: Any = None, y: Any = None, batch_size: int = 32, epochs: int = 1,
            verbose: int | str = "auto", callbacks: Sequence[Callback] | None = None,
            validation_data: tuple[Any, Any] | None = None, shuffle: bool = True,
            initial_epoch: int = 0, seed: int | None = None) -> History:
        """Train for `epochs` epochs (from `initial_epoch`); after each, evaluate on
        `validation_data` (``val_`` logs). Returns the `History` of the epochs' logs.

        ``verbose``: 1 (``"auto"``) a progress bar, 2 a line per epoch, 0 nothing. Each
        epoch's batches are ordered by `seed` and the epoch's number (a fresh seed when
        None), so a run resumed by `BackupAndRestore` sees the batches the original did."""
        self._compiled("fit")
        history = History()
        # The history after the caller's callbacks, as Keras orders them: it records what
        # they add to an epoch's logs (`ReduceLROnPlateau`'s learning rate).
        hooks: list[Callback] = [*(callbacks or ()), history]
        shown = 1 if verbose == "auto" else int(verbose)
        if shown and not any(isinstance(hook, ProgbarLogger) for hook in hooks):
            hooks.append(ProgbarLogger(shown))
        params = {"epochs": epochs, "steps": _steps_per_epoch(x, batch_size),
                  "verbose": shown}
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> 1)
        self.fit_progress = progress = FitProgress(initial_epoch, 0, seed)
        for hook in hooks:
            hook.set_model(self)
            hook.set_params(params)
        self.stop_training = False
        for hook in hooks:
            hook.on_train_begin()
        batch_logs = _BatchLogs(self)
        while progress.epoch < epochs and not self.stop_training:
            epoch = progress.epoch
            for hook in hooks:
                hook.on_epoch_begin(epoch)
            if progress.step == 0:  # else resumed mid-epoch: the running totals restored
                self._reset_metrics()
            rng = np.random.default_rng([progress.seed, epoch])
            batches = itertools.islice(_batches(x, y, batch_size, shuffle, rng),
                                       progress.step, None)
            for group in _groups(batches, self.steps_per_execution):
                self._steps["train"](group)
                progress.step += len(group)
                batch_logs.stale()
                for hook in hooks:
                    hook.on_train_batch_end(progress.step - 1, batch_logs)
                if self.stop_training:
                    break
            if progress.step == 0:
                raise ValueError(f"{type(self).__name__}.fit: the data has no batches"
                                 f"{describe_location()}")
            logs = self._logs()
            if validation_data is not None:
                values = self.evaluate(*validation_data, batch_size=batch_size, verbose=0,
                                       return_dict=True)
                logs.update((f"val_{k}", v) for k, v in values.items())
            progress.epoch, progress.step = epoch + 1, 0
            for hook in hooks:
                hook.on_epoch_end(epoch, logs)
        for hook in hooks:
            hook.on_train_end()
        self.history = history
        return history

    @property
    def metrics_state(self) -> list[metrics_module.Metric]:
        """The running metrics of `fit` and `evaluate`: the loss's mean, then the compiled
        metrics (what `BackupAndRestore` saves mid-epoch)."""
        return [self._loss_mean, *self.compiled_metrics]

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
        """The model's outputs for `x`, batch by batch, as one NumPy array. Sparse inputs
        (an `sf.SparseTensor` of examples) run eagerly: a traced sparse product needs its
        rows' count, which a staged step taking batches of any size does not know."""
        del verbose
        if "predict" not in self._steps:  # not compiled: staged once, kept for later calls
            self._steps["predict"] = self._make_steps(False)["predict"]
        step = self._steps["predict"]
        if isinstance(x, SparseTensor):
            step = functools.partial(self, training=False)
        outputs = [np.asarray(step(xs).numpy()) for xs, _ in _batches(x, None, batch_size,
                                                                         False, None)]
        return np.concatenate(outputs) if outputs else np.zeros((0,), np.float32)

    # -- saving ---------------------------------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        """Keras' ``get_config``: a functional model's inputs, layers and layer calls; a
        subclass's constructor arguments (as `Layer.get_config`)."""
        if self._graph is not None and type(self).__init__ is Model.__init__:
            return functional_config.get_config(self)
        return super().get_config()

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Model:
        """A new model from a `get_config` config."""
        if functional_config.is_functional(config):
            return functional_config.from_config(cls, config)
        return cls(**config)

    def save(self, filepath: str | os.PathLike, overwrite: bool = True) -> None:
        """Save the model for inference in stageflow's saved-function format (`sf.saved`):
        its call staged for inputs like its first call's, the batch dim free, and all its
        variables; ``sf.keras.models.load_model(filepath)`` loads it back, callable, its
        variables trainable. (The optimizer's state is a checkpoint's business:
        ``sf.train.Checkpoint(model=model, optimizer=model.optimizer)``.) A path ending in
        ``.keras`` is a Keras archive instead: the model's config and its weights, loaded
        back as a model of its class (`sf.keras.saving.load_model`)."""
        if os.fspath(filepath).endswith(".keras"):
            keras_archive.save(self, filepath, overwrite)
            return
        if not overwrite and os.path.exists(filepath):
            raise FileExistsError(f"{type(self).__name__}.save: {os.fspath(filepath)!r} "
                                  f"exists and overwrite=False{describe_location()}")
        if self.input_spec is None:
            raise ValueError(f"{type(self).__name__}.save: the model has not been called, so "
                             f"the shape of its inputs is unknown: call it (or fit it) once, "
                             f"or build it from sf.keras.Input{describe_location()}")
        saving.save(self, filepath)

    def save_weights(self, filepath: str | os.PathLike) -> str:
        """Write the model's variables as a checkpoint (`sf.train.Checkpoint`) at the
        prefix `filepath`; the path written is returned."""
        return Checkpoint(model=self).write(os.fspath(filepath))

    def load_weights(self, filepath: str | os.PathLike) -> CheckpointLoadStatus:
        """Restore variables written by `save_weights` (those of layers not built yet are
        restored when they are created)."""
        return Checkpoint(model=self).restore(os.fspath(filepath))

    # -- description ----------------------------------------------------------------------

    def summary(self, print_fn: Callable[[str], None] = print) -> None:
        """Keras' table: each layer, its output shape and its parameter count, then the
        totals with their bytes. The shapes are those of the inputs the model was built
        for, as Keras 3 shows them: its declared input's (`Input`, ``input_shape=``; the
        batch dim None), else its first call's, batch dim included."""
        rows = [("Layer (type)", "Output Shape", "Param #"),
                *(self._graph_rows() if self._graph is not None else self._layer_rows())]
        widths = [max(len(row[i]) for row in rows) + 2 for i in range(3)]
        rule = "=" * sum(widths)
        print_fn(f'Model: "{self.name}"')
        print_fn(rule)
        for index, row in enumerate(rows):
            print_fn("".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
            print_fn(rule if index == 0 else "-" * sum(widths))
        trainable = _parameters(self.trainable_variables)
        total = _parameters(self.variables)
        frozen = (total[0] - trainable[0], total[1] - trainable[1])
        for label, (count, size) in (("Total", total), ("Trainable", trainable),
                                     ("Non-trainable", frozen)):
            print_fn(f"{label} params: {count:,} ({_readable_bytes(size)})")


    def _layer_rows(self) -> list[tuple[str, str, str]]:
        """The summary's rows of a `Sequential` or subclassed model: its layers in order,
        run on zeros shaped like its first call's inputs (twice where their dims are not
        all known: see `symbolic.examples`)."""
        spec = self.input_spec
        if spec is None:
            raise ValueError(f"{type(self).__name__}.summary: the model has not been called "
                             f"yet, so its layers' shapes are unknown: call it (or fit it) "
                             f"once, or give its first layer input_shape={describe_location()}")
        rows = []
        batch = self._first_batch
        values: list[Any] = list(symbolic.examples(spec.shape[1:], spec.dtype,
                                                   batch=batch or 1))
        for layer in self.layers:
            values = [None if value is None else layer(value, training=False)
                      if takes_training(layer) else layer(value) for value in values]
            rows.append(_row(layer, (batch, *symbolic.known_dims(*values))))
        return rows

    def _graph_rows(self) -> list[tuple[str, str, str]]:
        """The summary's rows of a functional model: its inputs, then each layer call (a
        layer's parameters counted at its first call) with the shape it returns."""
        rows = [(f"{t.name} (InputLayer)", str(t.shape), "0")
                for t in self._graph.input_leaves]
        counted: set[int] = set()
        for node in self._graph.nodes:
            shapes = [t.shape for t in nest.flatten(node.outputs)[0]
                      if isinstance(t, symbolic.KerasTensor)]
            shape = shapes[0] if len(shapes) == 1 else shapes
            rows.append(_row(node.fn, shape, counted))
        return rows


def _parameters(variables: list[Any]) -> tuple[int, int]:
    """The number of values in `variables` and their bytes."""
    counts = [(int(np.prod(v.shape)), int(np.prod(v.shape)) * v.dtype.itemsize)
              for v in variables]
    return sum(c for c, _ in counts), sum(b for _, b in counts)


def _readable_bytes(size: float) -> str:
    """Bytes as Keras' summary writes them: two decimals of the largest unit of 1024 that
    leaves at least one (``164.00 B``, ``1.50 KB``)."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1024:
            return f"{size:.2f} {unit}"
        size /= 1024
    return f"{size:.2f} PB"


def _row(layer: Any, shape: Any, counted: set[int] | None = None) -> tuple[str, str, str]:
    """A summary row: the layer's name and type, its output shape, its parameter count
    (zero for a layer already in `counted`, whose parameters an earlier row holds)."""
    count = 0
    if counted is None or id(layer) not in counted:
        count = sum(int(np.prod(v.shape)) for v in getattr(layer, "variables", []))
    if counted is not None:
        counted.add(id(layer))
    name = getattr(layer, "name", None)
    if not isinstance(name, str):
        name = getattr(layer, "__name__", type(layer).__name__)
    kind = type(layer).__name__ if isinstance(layer, Layer) else "operator"
    text = str(shape) if isinstance(shape, tuple) else ", ".join(str(s) for s in shape)
    return f"{name} ({kind})", text, f"{count:,}"


class FitProgress(PythonState):
    """Where `fit` is: the epoch it is in (or starts next), the batches of it already
    trained, and the seed its batch orders derive from. A `BackupAndRestore` checkpoint
    holds it; a restore moves `fit` to where the backup was taken."""

    def __init__(self, epoch: int, step: int, seed: int) -> None:
        self.epoch, self.step, self.seed = epoch, step, seed

    def serialize(self) -> dict[str, int]:
        return {"epoch": self.epoch, "step": self.step, "seed": self.seed}

    def deserialize(self, value: dict[str, int]) -> None:
        self.epoch, self.step, self.seed = (int(value["epoch"]), int(value["step"]),
                                            int(value["seed"]))


class _BatchLogs(Mapping):
    """The logs a batch's callbacks get: the epoch's running loss and metrics, read from
    the model only when a callback looks (a read waits for the step to finish)."""

    def __init__(self, model: Model) -> None:
        self._model = model
        self._values: dict[str, float] | None = None

    def stale(self) -> None:
        self._values = None

    def _read(self) -> dict[str, float]:
        if self._values is None:
            self._values = self._model._logs()
        return self._values

    def __getitem__(self, key: str) -> float:
        return self._read()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())


def _steps_per_epoch(x: Any, batch_size: int) -> int | None:
    """The batches in an epoch of arrays; None for a dataset (not known before its end)."""
    if isinstance(x, np.ndarray | Tensor | list | tuple):
        return -(-len(x) // int(batch_size))
    return None


def _shows(verbose: int | str) -> bool:
    return verbose == "auto" or bool(verbose)




def _groups(batches: Iterator[tuple[Any, Any]], size: int
            ) -> Iterator[tuple[tuple[Any, Any], ...]]:
    """`batches` in tuples of `size` (the last may be shorter): one staged call each."""
    group: list[tuple[Any, Any]] = []
    for batch in batches:
        group.append(batch)
        if len(group) == size:
            yield tuple(group)
            group = []
    if group:
        yield tuple(group)


def _batches(x: Any, y: Any, batch_size: int, shuffle: bool, rng: Any
             ) -> Iterator[tuple[Any, Any]]:
    """``(x, y)`` batches of arrays (shuffled by `rng` when `shuffle`), or the elements of
    an `sf.data.Dataset` (or any iterable of batches): ``(x, y)`` pairs, or ``x`` alone for
    `predict`."""
    if not isinstance(x, np.ndarray | Tensor | list | tuple | SparseTensor) and hasattr(
            x, "__iter__"):
        for element in x:
            yield (element[0], element[1]) if isinstance(element, tuple) else (element, None)
        return
    xs = x if isinstance(x, SparseTensor) else _floatx(x)
    count = int(xs.shape[0]) if isinstance(xs, SparseTensor) else len(xs)
    ys = None if y is None else _floatx(y)
    if ys is not None and len(ys) != count:
        raise ValueError(f"fit: x has {count} examples, y {len(ys)}{describe_location()}")
    order = rng.permutation(count) if shuffle else None
    for start in range(0, count, int(batch_size)):
        # Unshuffled, a batch is a slice (one copy, into the tensor), not a gather.
        rows = slice(start, start + int(batch_size)) if order is None else (
            order[start:start + int(batch_size)])
        yield (_sparse_rows(xs, rows) if isinstance(xs, SparseTensor)
               else convert_to_tensor(xs[rows]),
               None if ys is None else convert_to_tensor(ys[rows]))


def _sparse_rows(x: SparseTensor, rows: slice | np.ndarray) -> SparseTensor:
    """The rows `rows` (a slice or the indices of a shuffled batch) of a sparse batch of
    examples, in that order: a batch of Keras' sparse inputs."""
    indices, values = np.asarray(x.indices.numpy()), np.asarray(x.values.numpy())
    taken = np.arange(int(x.shape[0]))[rows]
    position = np.full(int(x.shape[0]), -1)
    position[taken] = np.arange(len(taken))
    kept = position[indices[:, 0]] >= 0
    moved = indices[kept].copy()
    moved[:, 0] = position[moved[:, 0]]
    order = np.lexsort(moved.T[::-1])
    return SparseTensor(moved[order], values[kept][order],
                        [len(taken), *(int(d) for d in x.shape[1:])])


def _floatx(data: Any) -> np.ndarray:
    """Data as an array; float64 arrays (NumPy's default) become float32, Keras' floatx,
    as Keras' data adapters convert them (a tensor keeps its dtype)."""
    if isinstance(data, Tensor):
        return np.asarray(data.numpy())
    array = np.asarray(data)
    return array.astype(np.float32) if array.dtype == np.float64 else array


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
    """A metric object, or one made from Keras' name for it (`sf.metrics.get`);
    ``"accuracy"`` picks its kind from the loss, as Keras' compile does (a name, a loss
    object's class, or a function's name)."""
    if metric not in ("accuracy", "acc"):
        return metrics_module.get(metric)
    name = (loss if isinstance(loss, str) else type(loss).__name__
            if isinstance(loss, losses_module.Loss) else getattr(loss, "__name__", ""))
    for word, kind in (("sparse", metrics_module.SparseCategoricalAccuracy),
                       ("categorical", metrics_module.CategoricalAccuracy),
                       ("binary", metrics_module.BinaryAccuracy)):
        if word in name.lower():
            return kind(name="accuracy")
    raise ValueError(f"compile: {metric!r} follows the loss (binary, categorical or sparse "
                     f"categorical crossentropy), which {loss!r} is not: pass "
                     f"'binary_accuracy', 'categorical_accuracy' or "
                     f"'sparse_categorical_accuracy', or a metric object")
