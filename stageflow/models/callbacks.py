"""Callbacks of `Model.fit` (Keras' names): hooks called at the start and end of training,
of each epoch and of each batch, with the logs (``loss`` and the metrics, ``val_``
prefixed for the validation data)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = ["Callback", "EarlyStopping", "History", "LambdaCallback", "LearningRateScheduler"]


class Callback:
    """A hook of `fit`: override the methods wanted; `model` is set before training."""

    model: Any = None

    def set_model(self, model: Any) -> None:
        self.model = model

    def on_train_begin(self, logs: dict[str, float] | None = None) -> None:
        """Before the first epoch."""

    def on_train_end(self, logs: dict[str, float] | None = None) -> None:
        """After the last epoch (or an early stop)."""

    def on_epoch_begin(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        """Before each epoch (numbered from 0)."""

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        """After each epoch, with its logs (and the validation's)."""

    def on_train_batch_end(self, batch: int, logs: dict[str, float] | None = None) -> None:
        """After each training step, with the running logs."""


class History(Callback):
    """Every epoch's logs: ``history.history["loss"]`` is the loss of each epoch. `fit`
    returns one."""

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
    the best epoch are put back."""

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
        if self.wait > self.patience:
            self.stopped_epoch = epoch
            self.model.stop_training = True
            if self.best_weights is not None:
                for variable, value in zip(self.model.variables, self.best_weights,
                                           strict=True):
                    variable.assign(value)


class LearningRateScheduler(Callback):
    """Set the optimizer's learning rate before each epoch to ``schedule(epoch, rate)``."""

    def __init__(self, schedule: Callable[[int, float], float]) -> None:
        self.schedule = schedule

    def on_epoch_begin(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        optimizer = self.model.optimizer
        optimizer.learning_rate = self.schedule(epoch, float(optimizer.learning_rate))


class LambdaCallback(Callback):
    """A callback of functions: ``LambdaCallback(on_epoch_end=lambda epoch, logs: ...)``."""

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
