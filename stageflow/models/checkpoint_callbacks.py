"""The callbacks of `fit` that write checkpoints: `ModelCheckpoint` keeps the model (the
best, or every epoch's), `BackupAndRestore` makes a killed `fit` resume where it stopped.

Both write stageflow's checkpoint format (`sf.train.Checkpoint`, with its checksums and
atomic pointer), through a `CheckpointManager` where a directory holds numbered ones.
"""

from __future__ import annotations

import math
import os
import shutil
from typing import Any

from stageflow.frontend.ops.random import RandomStreams
from stageflow.models.callbacks import Callback
from stageflow.models.train.checkpoint import Checkpoint, CheckpointManager

__all__ = ["BackupAndRestore", "ModelCheckpoint"]


class ModelCheckpoint(Callback):
    """Save the model after each epoch (``save_freq="epoch"``) or every `save_freq`
    batches; with `save_best_only`, only when `monitor` improved (``mode``: ``"min"``,
    ``"max"``, or ``"auto"``: max for accuracies).

    `filepath` with format fields (``"ckpt/weights-{epoch:02d}-{val_loss:.2f}"``, Keras'
    form: ``epoch`` counts from 1, the other fields are the logs) names each checkpoint;
    without any it is a directory of numbered checkpoints kept by a `CheckpointManager`
    (``max_to_keep`` newest; ``manager.latest_checkpoint`` finds the last). The model's
    variables are saved, and the optimizer's too unless `save_weights_only`; restore with
    ``sf.train.Checkpoint(model=model).restore(path)`` (``optimizer=`` beside it).

    >>> import os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> model = sf.keras.Sequential([sf.keras.layers.Dense(1, input_shape=(2,))])
    >>> model.compile("sgd", "mse")
    >>> save = sf.keras.callbacks.ModelCheckpoint(
    ...     os.path.join(directory, "model-{epoch:02d}"), save_weights_only=True)
    >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=2, verbose=0, callbacks=[save])
    >>> sorted(os.listdir(directory))
    ['model-01.safetensors', 'model-02.safetensors']
    """

    def __init__(self, filepath: str, monitor: str = "val_loss", verbose: int = 0,
                 save_best_only: bool = False, save_weights_only: bool = False,
                 mode: str = "auto", save_freq: str | int = "epoch",
                 initial_value_threshold: float | None = None,
                 max_to_keep: int | None = None) -> None:
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"ModelCheckpoint: mode must be 'auto', 'min' or 'max', got "
                             f"{mode!r}")
        if save_freq != "epoch" and (not isinstance(save_freq, int) or save_freq < 1):
            raise ValueError(f"ModelCheckpoint: save_freq must be 'epoch' or a positive "
                             f"number of batches, got {save_freq!r}")
        self.filepath, self.monitor, self.verbose = os.fspath(filepath), monitor, verbose
        self.save_best_only, self.save_weights_only = save_best_only, save_weights_only
        self.save_freq, self.max_to_keep = save_freq, max_to_keep
        larger = mode == "max" or (mode == "auto" and ("acc" in monitor or "auc" in monitor))
        self._sign = -1.0 if larger else 1.0  # compares sign * value: smaller is better
        self.best = math.inf if initial_value_threshold is None else (
            self._sign * initial_value_threshold)
        self._manager: CheckpointManager | None = None
        self._epoch = 0
        self._batches = 0

    def on_train_begin(self, logs: dict[str, float] | None = None) -> None:
        objects = {"model": self.model}
        if not self.save_weights_only:
            objects["optimizer"] = self.model.optimizer
        self._checkpoint = Checkpoint(**objects)
        if "{" not in self.filepath:
            self._manager = CheckpointManager(self._checkpoint, self.filepath,
                                              max_to_keep=self.max_to_keep)

    def on_epoch_begin(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        self._epoch = epoch

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if self.save_freq == "epoch":
            return
        self._batches += 1
        if self._batches % self.save_freq == 0:
            self._save(self._epoch, dict(logs or {}))

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        if self.save_freq == "epoch":
            self._save(epoch, dict(logs or {}))

    def _save(self, epoch: int, logs: dict[str, float]) -> None:
        if self.save_best_only:
            value = logs.get(self.monitor)
            if value is None:
                raise KeyError(f"ModelCheckpoint: the logs have no {self.monitor!r} to pick "
                               f"the best by (they have {', '.join(logs) or 'nothing'})")
            if not self._sign * value < self.best:
                return
            self.best = self._sign * value
        if self._manager is not None:
            path = self._manager.save()
        else:
            try:
                path = self.filepath.format(epoch=epoch + 1, **logs)
            except KeyError as missing:
                raise KeyError(f"ModelCheckpoint: filepath {self.filepath!r} names "
                               f"{missing}, which the logs do not have (they have "
                               f"{', '.join(logs) or 'nothing'})") from None
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            path = self._checkpoint.write(path)
        if self.verbose:
            print(f"Epoch {epoch + 1}: saved the model to {path}")


class BackupAndRestore(Callback):
    """Make `fit` resumable: back up everything training depends on in `backup_dir` at
    each epoch's end (``save_freq="epoch"``) or every `save_freq` batches, and on the next
    `fit` with the same callback restore it and continue at the epoch and batch after the
    backup, so that a run killed and started again ends with the same weights, bit for
    bit, as one that was not.

    Backed up: the model's variables, the optimizer (its slots and step count), the
    metrics' running totals, the random streams (dropout draws the same masks), and `fit`'s
    place: its epoch, its batch, and the seed that orders each epoch's batches. The backup
    is deleted when `fit` completes (unless ``delete_checkpoint=False``), so the next run
    starts afresh.

    >>> import os, tempfile
    >>> backup = os.path.join(tempfile.mkdtemp(), "backup")
    >>> class Crash(sf.keras.callbacks.Callback):
    ...     def on_epoch_end(self, epoch, logs=None):
    ...         if epoch == 1:
    ...             raise RuntimeError("the machine went away")
    >>> model = sf.keras.Sequential([sf.keras.layers.Dense(1, input_shape=(2,))])
    >>> model.compile("sgd", "mse")
    >>> x, y = np.ones((4, 2)), np.ones((4, 1))
    >>> try:
    ...     model.fit(x, y, epochs=4, verbose=0,
    ...               callbacks=[sf.keras.callbacks.BackupAndRestore(backup), Crash()])
    ... except RuntimeError:
    ...     pass
    >>> history = model.fit(x, y, epochs=4, verbose=0,
    ...                     callbacks=[sf.keras.callbacks.BackupAndRestore(backup)])
    >>> history.epoch                        # the epochs after the last backup
    [2, 3]
    """

    def __init__(self, backup_dir: str, save_freq: str | int = "epoch",
                 delete_checkpoint: bool = True) -> None:
        if save_freq != "epoch" and (not isinstance(save_freq, int) or save_freq < 1):
            raise ValueError(f"BackupAndRestore: save_freq must be 'epoch' or a positive "
                             f"number of batches, got {save_freq!r}")
        self.backup_dir = os.fspath(backup_dir)
        self.save_freq, self.delete_checkpoint = save_freq, delete_checkpoint
        self._manager: CheckpointManager | None = None
        self._saved_step = 0

    def on_train_begin(self, logs: dict[str, float] | None = None) -> None:
        model = self.model
        checkpoint = Checkpoint(model=model, optimizer=model.optimizer,
                                metrics=model.metrics_state, progress=model.fit_progress,
                                random=RandomStreams())
        self._manager = CheckpointManager(checkpoint, self.backup_dir, max_to_keep=1)
        if self._manager.latest_checkpoint is not None:
            checkpoint.restore(self._manager.latest_checkpoint).assert_existing_objects_matched()

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        if self.save_freq == "epoch":
            return
        progress = self.model.fit_progress
        if progress.step - self._saved_step >= self.save_freq:
            self._saved_step = progress.step
            self._manager.save()

    def on_epoch_begin(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        self._saved_step = self.model.fit_progress.step

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        if self.save_freq == "epoch":
            self._manager.save()

    def on_train_end(self, logs: dict[str, float] | None = None) -> None:
        if self.delete_checkpoint:
            shutil.rmtree(self.backup_dir, ignore_errors=True)
