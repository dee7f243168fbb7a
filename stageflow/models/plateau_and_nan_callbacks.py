"""Keras' `ReduceLROnPlateau` (a lower learning rate once a metric stops improving) and
`TerminateOnNaN` (training stopped at a loss that is not finite)."""

from __future__ import annotations

import math
from typing import Any

from stageflow.models.callbacks import Callback

__all__ = ["ReduceLROnPlateau", "TerminateOnNaN"]


class ReduceLROnPlateau(Callback):
    """Multiply the learning rate by `factor` once `monitor` has not improved by more than
    `min_delta` for `patience` epochs, not below `min_lr`; after a reduction, wait
    `cooldown` epochs before counting again. Each epoch's logs get its ``learning_rate``.

    >>> model = sf.keras.Sequential([sf.keras.layers.Dense(1, input_shape=(2,))])
    >>> model.compile(sf.keras.optimizers.SGD(0.1), "mse")
    >>> reduce = sf.keras.callbacks.ReduceLROnPlateau("loss", factor=0.5, patience=1,
    ...                                              min_delta=100.0)
    >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=3, verbose=0,
    ...               callbacks=[reduce])
    >>> round(float(model.optimizer.learning_rate), 4)  # halved after epochs 1 and 2
    0.025
    """

    def __init__(self, monitor: str = "val_loss", factor: float = 0.1, patience: int = 10,
                 verbose: int = 0, mode: str = "auto", min_delta: float = 1e-4,
                 cooldown: int = 0, min_lr: float = 0.0, **kwargs: Any) -> None:
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be below 1, got {factor!r}")
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'auto', 'min' or 'max', got "
                             f"{mode!r}")
        self.monitor, self.factor, self.patience = monitor, float(factor), int(patience)
        self.verbose, self.mode, self.min_delta = verbose, mode, float(min_delta)
        self.cooldown, self.min_lr = int(cooldown), float(min_lr)
        smaller = mode == "min" or (mode == "auto" and "acc" not in monitor)
        self.sign = 1.0 if smaller else -1.0  # compares sign * value: smaller is better
        self._reset()

    def _reset(self) -> None:
        self.best, self.wait, self.cooldown_counter = math.inf, 0, 0

    def on_train_begin(self, logs: dict[str, float] | None = None) -> None:
        self._reset()

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        logs = logs if logs is not None else {}
        optimizer = self.model.optimizer
        rate = float(optimizer.learning_rate)
        logs["learning_rate"] = rate
        current = logs.get(self.monitor)
        if current is None:
            return
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        if self.sign * current < self.best - self.min_delta:
            self.best, self.wait = self.sign * current, 0
        elif self.cooldown_counter <= 0:
            self.wait += 1
            if self.wait >= self.patience and rate > self.min_lr:
                new_rate = max(rate * self.factor, self.min_lr)
                optimizer.learning_rate = new_rate
                if self.verbose:
                    print(f"\nEpoch {epoch + 1}: ReduceLROnPlateau reducing learning rate to "
                          f"{new_rate}.", flush=True)
                self.cooldown_counter, self.wait = self.cooldown, 0


class TerminateOnNaN(Callback):
    """Stop training at the first batch whose loss is NaN or infinite.

    >>> model = sf.keras.Sequential([sf.keras.layers.Dense(1, input_shape=(1,))])
    >>> model.compile("sgd", "mse")
    >>> x = np.array([[1.0], [np.nan], [1.0]], np.float32)
    >>> history = model.fit(x, np.ones((3, 1)), batch_size=1, epochs=5, shuffle=False,
    ...                     verbose=0, callbacks=[sf.keras.callbacks.TerminateOnNaN()])
    Batch 1: Invalid loss, terminating training
    >>> len(history.epoch)
    1
    """

    def on_train_batch_end(self, batch: int, logs: dict[str, float] | None = None) -> None:
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            print(f"Batch {batch}: Invalid loss, terminating training", flush=True)
            self.model.stop_training = True
