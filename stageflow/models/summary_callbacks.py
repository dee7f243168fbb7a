"""`TensorBoard`: `fit`'s logs as TensorBoard's event files, through `sf.summary`.

Keras' layout, so that TensorBoard shows a run as it shows a Keras one: ``LOG_DIR/train``
and ``LOG_DIR/validation`` hold ``epoch_loss``, ``epoch_<metric>`` (the validation's
without its ``val_`` prefix) and ``epoch_learning_rate`` at each epoch; with
``update_freq=N``, ``batch_<name>`` every N batches at the optimizer's step; with
``histogram_freq``, every variable's histogram; with ``write_graph``, the staged training
step's graph (the Graphs tab).
"""

from __future__ import annotations

import os
import time
from typing import Any

from stageflow.frontend.summary import ops as summary
from stageflow.frontend.summary import trace
from stageflow.frontend.summary.writers import SummaryWriter, create_file_writer
from stageflow.models.callbacks import Callback

__all__ = ["TensorBoard"]


class TensorBoard(Callback):
    """Write `fit`'s logs for TensorBoard (``tensorboard --logdir LOG_DIR``); Keras'
    arguments. Needs the `tensorboard` package (``pip install 'stageflow[summary]'``).

    >>> import os, tempfile
    >>> logs = tempfile.mkdtemp()
    >>> model = sf.keras.Sequential([sf.keras.layers.Dense(1, input_shape=(2,))])
    >>> model.compile("sgd", "mse")
    >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=2, verbose=0,
    ...               callbacks=[sf.keras.callbacks.TensorBoard(logs)])
    >>> sorted(os.listdir(logs))                     # tensorboard --logdir LOGS
    ['train']
    """

    def __init__(self, log_dir: str = "logs", histogram_freq: int = 0,
                 write_graph: bool = True, write_steps_per_second: bool = False,
                 update_freq: str | int = "epoch") -> None:
        if update_freq != "epoch" and (not isinstance(update_freq, int) or update_freq < 1):
            raise ValueError(f"TensorBoard: update_freq must be 'epoch' or a positive number "
                             f"of batches, got {update_freq!r}")
        self.log_dir = os.fspath(log_dir)
        self.histogram_freq, self.write_graph = int(histogram_freq), write_graph
        self.write_steps_per_second, self.update_freq = write_steps_per_second, update_freq
        self._writers: dict[str, SummaryWriter] = {}

    def _writer(self, run: str) -> SummaryWriter:
        if run not in self._writers:
            self._writers[run] = create_file_writer(os.path.join(self.log_dir, run))
        return self._writers[run]

    def on_train_begin(self, logs: dict[str, float] | None = None) -> None:
        self._graph_pending = self.write_graph
        if self.write_graph:
            trace.trace_on(graph=True)

    def on_epoch_begin(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        self._epoch_start = time.perf_counter()
        self._epoch_batches = 0
        self._since_write = 0

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self._epoch_batches = batch + 1
        if self._graph_pending:  # the step has been traced by its first call
            self._graph_pending = False
            with self._writer("train").as_default():
                trace.trace_export("keras", step=0)
        if self.update_freq == "epoch":
            return
        self._since_write += 1
        if self._since_write >= self.update_freq:
            self._since_write = 0
            step = int(self.model.optimizer.iterations.numpy())
            with self._writer("train").as_default():
                for name, value in dict(logs or {}).items():
                    summary.scalar(f"batch_{name}", float(value), step=step)

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        logs = dict(logs or {})
        runs: dict[str, dict[str, float]] = {"train": {}, "validation": {}}
        for name, value in logs.items():
            run, tag = (("validation", name[4:]) if name.startswith("val_")
                        else ("train", name))
            runs[run][f"epoch_{tag}"] = float(value)
        rate = getattr(self.model.optimizer, "learning_rate", None)
        if rate is not None:
            runs["train"]["epoch_learning_rate"] = float(rate)
        if self.write_steps_per_second:
            seconds = time.perf_counter() - self._epoch_start
            runs["train"]["epoch_steps_per_second"] = self._epoch_batches / max(seconds, 1e-9)
        for run, scalars in runs.items():
            if not scalars:
                continue
            with self._writer(run).as_default():
                for tag, value in scalars.items():
                    summary.scalar(tag, value, step=epoch)
                if run == "train" and self.histogram_freq and epoch % self.histogram_freq == 0:
                    for variable in self.model.variables:
                        summary.histogram(variable.name, variable.read_value(), step=epoch)

    def on_train_end(self, logs: dict[str, float] | None = None) -> None:
        if self._graph_pending:
            trace.trace_off()
        for writer in self._writers.values():
            writer.close()
        self._writers = {}
