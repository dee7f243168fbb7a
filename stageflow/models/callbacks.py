"""Callbacks of `Model.fit` (Keras' names): hooks called at the start and end of training,
of each epoch and of each batch, with the logs (``loss`` and the metrics, ``val_``
prefixed for the validation data)."""

from __future__ import annotations

import csv
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

__all__ = ["CSVLogger", "Callback", "EarlyStopping", "History", "LambdaCallback",
           "LearningRateScheduler", "ProgbarLogger"]


class Callback:
    """A hook of `fit`: override the methods wanted; `model` is set before training, and
    `params` (``epochs``, ``steps`` per epoch where known, ``verbose``) too.

    >>> class Count(sf.keras.callbacks.Callback):
    ...     batches = 0
    ...     def on_train_batch_end(self, batch, logs=None):
    ...         self.batches += 1
    >>> model = sf.keras.Sequential([sf.keras.layers.Dense(1, input_shape=(2,))])
    >>> model.compile("sgd", "mse")
    >>> count = Count()
    >>> _ = model.fit(np.ones((10, 2)), np.ones((10, 1)), batch_size=4, epochs=2, verbose=0,
    ...               callbacks=[count])
    >>> count.batches, count.params["steps"]
    (6, 3)
    """

    model: Any = None
    params: dict[str, Any] = {}

    def set_model(self, model: Any) -> None:
        self.model = model

    def set_params(self, params: dict[str, Any]) -> None:
        self.params = params

    def on_train_begin(self, logs: dict[str, float] | None = None) -> None:
        """Before the first epoch."""

    def on_train_end(self, logs: dict[str, float] | None = None) -> None:
        """After the last epoch (or an early stop)."""

    def on_epoch_begin(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        """Before each epoch (numbered from 0)."""

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        """After each epoch, with its logs (and the validation's)."""

    def on_train_batch_end(self, batch: int, logs: Mapping[str, float] | None = None
                           ) -> None:
        """After each training step (each group of `steps_per_execution`), with the
        epoch's running logs: read lazily, so a callback that does not look costs nothing."""


class History(Callback):
    """Every epoch's logs: ``history.history["loss"]`` is the loss of each epoch. `fit`
    returns one.

    >>> model = sf.keras.Sequential([sf.keras.layers.Dense(1, input_shape=(2,))])
    >>> model.compile("sgd", "mse")
    >>> history = model.fit(np.ones((8, 2)), np.zeros((8, 1)), epochs=3, verbose=0)
    >>> history.epoch, len(history.history["loss"])
    ([0, 1, 2], 3)
    """

    def __init__(self) -> None:
        self.epoch: list[int] = []
        self.history: dict[str, list[float]] = {}

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        self.epoch.append(epoch)
        for key, value in (logs or {}).items():
            self.history.setdefault(key, []).append(value)


class EarlyStopping(Callback):
    """Stop training once `monitor` (``val_loss`` by default) has not improved by more
    than `min_delta` for `patience` epochs; with `restore_best_weights`, the variables of
    the best epoch are put back.

    >>> model = sf.keras.Sequential([sf.keras.layers.Dense(1, input_shape=(2,))])
    >>> model.compile("sgd", "mse")
    >>> stop = sf.keras.callbacks.EarlyStopping(monitor="loss", min_delta=100.0, patience=1)
    >>> history = model.fit(np.ones((8, 2)), np.ones((8, 1)), epochs=10, verbose=0,
    ...                     callbacks=[stop])
    >>> len(history.epoch), stop.stopped_epoch          # no epoch improved by 100
    (2, 1)
    """

    def __init__(self, monitor: str = "val_loss", min_delta: float = 0.0, patience: int = 0,
                 mode: str = "auto", restore_best_weights: bool = False) -> None:
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"EarlyStopping: mode must be 'auto', 'min' or 'max', got {mode!r}")
        self.monitor, self.min_delta, self.patience = monitor, abs(min_delta), patience
        larger = mode == "max" or (mode == "auto" and ("acc" in monitor or "auc" in monitor))
        self.sign = -1.0 if larger else 1.0  # compares sign * value: smaller is better
        self.restore_best_weights = restore_best_weights
        self.stopped_epoch = 0

    def on_train_begin(self, logs: dict[str, float] | None = None) -> None:
        self.best, self.wait, self.best_weights = math.inf, 0, None

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        value = (logs or {}).get(self.monitor)
        if value is None:
            raise KeyError(f"EarlyStopping: the logs have no {self.monitor!r} (they have "
                           f"{', '.join(logs or {})})")
        if self.sign * value < self.best - self.min_delta:
            self.best, self.wait = self.sign * value, 0
            if self.restore_best_weights:
                self.best_weights = [v.numpy() for v in self.model.variables]
            return
        self.wait += 1
        if self.wait >= self.patience and epoch > 0:  # Keras: patience epochs in a row
            self.stopped_epoch = epoch
            self.model.stop_training = True
            if self.best_weights is not None:
                for variable, value in zip(self.model.variables, self.best_weights,
                                           strict=True):
                    variable.assign(value)


class LearningRateScheduler(Callback):
    """Set the optimizer's learning rate before each epoch to ``schedule(epoch, rate)``.

    >>> model = sf.keras.Sequential([sf.keras.layers.Dense(1, input_shape=(2,))])
    >>> model.compile(sf.keras.optimizers.SGD(0.1), "mse")
    >>> halve = sf.keras.callbacks.LearningRateScheduler(lambda epoch, rate: rate / 2)
    >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=3, verbose=0,
    ...               callbacks=[halve])
    >>> round(float(model.optimizer.learning_rate), 4)
    0.0125
    """

    def __init__(self, schedule: Callable[[int, float], float]) -> None:
        self.schedule = schedule

    def on_epoch_begin(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        optimizer = self.model.optimizer
        optimizer.learning_rate = self.schedule(epoch, float(optimizer.learning_rate))


class LambdaCallback(Callback):
    """A callback of functions: ``LambdaCallback(on_epoch_end=lambda epoch, logs: ...)``.

    >>> model = sf.keras.Sequential([sf.keras.layers.Dense(1, input_shape=(2,))])
    >>> model.compile("sgd", "mse")
    >>> show = sf.keras.callbacks.LambdaCallback(
    ...     on_epoch_end=lambda epoch, logs: print("epoch", epoch, sorted(logs)))
    >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=2, verbose=0, callbacks=[show])
    epoch 0 ['loss']
    epoch 1 ['loss']
    """

    def __init__(self, on_epoch_begin: Callable | None = None,
                 on_epoch_end: Callable | None = None, on_train_begin: Callable | None = None,
                 on_train_end: Callable | None = None,
                 on_train_batch_end: Callable | None = None) -> None:
        for name, function in (("on_epoch_begin", on_epoch_begin),
                               ("on_epoch_end", on_epoch_end),
                               ("on_train_begin", on_train_begin),
                               ("on_train_end", on_train_end),
                               ("on_train_batch_end", on_train_batch_end)):
            if function is not None:
                setattr(self, name, function)


class CSVLogger(Callback):
    """Each epoch's logs as a row of a CSV file: ``epoch`` then the logs' keys, sorted,
    with a header row (Keras' format). ``append=True`` continues an existing file (a
    resumed run) without a second header.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "log.csv")
    >>> model = sf.keras.Sequential([sf.keras.layers.Dense(1, input_shape=(2,))])
    >>> model.compile("sgd", "mse")
    >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=2, verbose=0,
    ...               callbacks=[sf.keras.callbacks.CSVLogger(path)])
    >>> [line.split(",")[0] for line in open(path).read().splitlines()]
    ['epoch', '0', '1']
    """

    def __init__(self, filename: str, separator: str = ",", append: bool = False) -> None:
        self.filename, self.separator, self.append = os.fspath(filename), separator, append
        self._file: TextIO | None = None
        self._writer: Any = None
        self._keys: list[str] | None = None

    def on_train_begin(self, logs: dict[str, float] | None = None) -> None:
        continuing = self.append and os.path.exists(self.filename)
        if continuing:
            with open(self.filename, newline="") as existing:
                header = next(csv.reader(existing, delimiter=self.separator), None)
            self._keys = header[1:] if header else None
        else:
            self._keys = None
        self._file = open(self.filename, "a" if continuing else "w", newline="")
        self._writer = csv.writer(self._file, delimiter=self.separator)

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        logs = dict(logs or {})
        if self._keys is None:
            self._keys = sorted(logs)
            self._writer.writerow(["epoch", *self._keys])
        self._writer.writerow([epoch, *(logs.get(key, "NA") for key in self._keys)])
        self._file.flush()

    def on_train_end(self, logs: dict[str, float] | None = None) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class ProgbarLogger(Callback):
    """Keras' progress output, which `fit` adds by itself: with ``verbose=1`` a bar
    redrawn in place (``12/50 [=====>....] - ETA: 3s - loss: 0.4301``) where the output
    is a terminal or a notebook, and the epoch's line alone where it is a file or a pipe
    (a bar redrawn there would fill it); with ``verbose=2`` one line per epoch.

    >>> model = sf.keras.Sequential([sf.keras.layers.Dense(1, input_shape=(2,))])
    >>> model.compile("sgd", "mse")
    >>> _ = model.fit(np.ones((64, 2)), np.ones((64, 1)), epochs=1)   # doctest: +ELLIPSIS
    Epoch 1/1
    2/2 [==============================] - ...s ...step - loss: ...
    """

    WIDTH = 30
    INTERVAL = 0.05  # seconds between redraws: reading the logs costs a synchronisation

    def __init__(self, verbose: int = 1, stream: TextIO | None = None) -> None:
        self.verbose = verbose
        self.stream = stream

    def _out(self) -> TextIO:
        return self.stream or sys.stdout

    def on_epoch_begin(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        self._start = self._drawn = time.perf_counter()
        self._done = 0
        out = self._out()
        self._dynamic = self.verbose == 1 and (_is_terminal(out) or "ipykernel" in sys.modules)
        out.write(f"Epoch {epoch + 1}/{self.params.get('epochs', '?')}\n")
        out.flush()

    def on_train_batch_end(self, batch: int, logs: Mapping[str, float] | None = None
                           ) -> None:
        self._done = batch + 1
        now = time.perf_counter()
        if self._dynamic and now - self._drawn >= self.INTERVAL:
            self._drawn = now
            self._out().write("\r" + self._line(dict(logs or {}), final=False))
            self._out().flush()

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        line = self._line(dict(logs or {}), final=True)
        self._out().write(("\r" if self._dynamic else "") + line + "\n")
        self._out().flush()

    def _line(self, logs: dict[str, float], final: bool) -> str:
        elapsed = time.perf_counter() - self._start
        steps = self.params.get("steps")
        done = self._done
        shown = " - ".join(f"{key}: {value:.4f}" for key, value in logs.items())
        per_step = f"{_duration(elapsed / max(done, 1))}/step"
        if self.verbose == 2:
            return f"{done}/{steps or done} - {elapsed:.0f}s - {per_step} - {shown}"
        if steps:
            filled = int(self.WIDTH * min(done, steps) / steps)
            arrow = ">" if filled < self.WIDTH else ""
            bar = ("=" * max(filled - len(arrow), 0) + arrow).ljust(self.WIDTH, ".")
            head = f"{done}/{steps} [{bar}]"
        else:
            head = f"{done}/Unknown"
        if final:
            return f"{head} - {elapsed:.0f}s {per_step} - {shown}"
        eta = elapsed / max(done, 1) * (steps - done) if steps else 0.0
        return f"{head} - ETA: {eta:.0f}s - {shown}"


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _duration(seconds: float) -> str:
    """Keras' per-step time, in the largest unit (s, ms, us) that keeps it at least 1."""
    if seconds >= 1.0:
        return f"{seconds:.0f}s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.0f}ms"
    return f"{seconds * 1e6:.0f}us"
