"""`fit`'s callbacks and options: `steps_per_execution`, the progress output, `CSVLogger`,
`ModelCheckpoint` and `BackupAndRestore` (a crashed run resumed ends with the weights of a
run that was not, bit for bit; examples/keras_fit.py does it across a SIGKILL)."""

from __future__ import annotations

import csv
import io
import os

import numpy as np
import pytest

import stageflow as sf

keras = sf.keras
callbacks = sf.keras.callbacks


def data(n=96, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 6)).astype(np.float32)
    return x, (x[:, 0] + x[:, 1] > 0).astype(np.int32)


def model(dropout=0.0):
    sf.random.set_seed(11)
    x = keras.Input((6,))
    h = keras.layers.Dense(16, activation="relu")(x)
    if dropout:
        h = keras.layers.Dropout(dropout)(h)
    m = keras.Model(x, keras.layers.Dense(2)(h))
    m.compile(keras.optimizers.Adam(0.01),
              keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    return m


def weights(m):
    return [v.numpy() for v in m.variables]


def test_steps_per_execution_trains_the_same_steps():
    x, y = data(100)  # 13 batches of 8: groups of 3, the last of one
    results = []
    for steps in (1, 3):
        m = model()
        m.compile(keras.optimizers.SGD(0.1),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=steps)
        seen = []
        history = m.fit(x, y, batch_size=8, epochs=2, verbose=0, seed=5,
                        callbacks=[callbacks.LambdaCallback(
                            on_train_batch_end=lambda batch, logs, seen=seen: seen.append(
                                batch))])
        results.append((weights(m), history.history["loss"], seen))
    (w1, loss1, seen1), (w3, loss3, seen3) = results
    for a, b in zip(w1, w3, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss1, loss3, rtol=1e-5)
    assert seen1 == [*range(13)] * 2
    assert seen3 == [2, 5, 8, 11, 12] * 2  # a callback sees each group's last batch
    with pytest.raises(ValueError, match="steps_per_execution must be >= 1"):
        m.compile("sgd", "mse", steps_per_execution=0)


def test_batch_logs_are_the_running_means_read_when_asked():
    x, y = data(64)
    m = model()
    running = []
    m.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False, callbacks=[
        callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: running.append(
            dict(logs)))])
    assert [sorted(logs) for logs in running] == [["accuracy", "loss"]] * 4
    assert running[-1]["loss"] == pytest.approx(m.history.history["loss"][0])


@pytest.mark.parametrize("verbose", [0, 1, 2])
def test_progress_output(verbose, capsys):
    x, y = data(40)
    m = model()
    m.fit(x, y, batch_size=16, epochs=2, verbose=verbose, validation_data=(x, y))
    out = capsys.readouterr().out
    if verbose == 0:
        assert out == ""
        return
    lines = out.splitlines()
    assert lines[0] == "Epoch 1/2" and lines[2] == "Epoch 2/2" and len(lines) == 4
    if verbose == 1:  # not a terminal: the epoch's bar, drawn once
        assert lines[1].startswith("3/3 [==============================] - ")
    else:
        assert lines[1].startswith("3/3 - ")
    assert "/step - loss: " in lines[1] and " - val_accuracy: " in lines[1]


def test_progress_bar_redraws_in_place_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    bar = callbacks.ProgbarLogger(1, stream=Terminal())
    bar.INTERVAL = 0.0
    x, y = data(64)
    m = model()
    m.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[bar])
    text = bar.stream.getvalue()
    assert text.count("\r") == 5  # four batches and the epoch's end, one line
    assert "1/4 [======>.......................] - ETA: " in text
    assert text.endswith("\n") and text.count("\n") == 2


def test_csv_logger_writes_a_row_per_epoch_and_appends(tmp_path):
    x, y = data(48)
    path = tmp_path / "log.csv"
    m = model()
    m.fit(x, y, epochs=2, verbose=0, validation_data=(x, y),
          callbacks=[callbacks.CSVLogger(path)])
    m.fit(x, y, epochs=1, verbose=0, validation_data=(x, y),
          callbacks=[callbacks.CSVLogger(path, append=True)])
    rows = list(csv.reader(path.read_text().splitlines()))
    assert rows[0] == ["epoch", "accuracy", "loss", "val_accuracy", "val_loss"]
    assert [row[0] for row in rows[1:]] == ["0", "1", "0"]
    assert float(rows[3][2]) == pytest.approx(m.history.history["loss"][0])


def test_model_checkpoint_keeps_the_best_epoch(tmp_path):
    x, y = data(64)
    m = model()
    best_values = {}
    record = callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: best_values.update(
        {epoch: (logs["val_loss"], weights(m))}))
    m.fit(x, y, batch_size=16, epochs=4, verbose=0, validation_data=(x[:32], y[:32]),
          callbacks=[callbacks.ModelCheckpoint(tmp_path / "best", save_best_only=True,
                                               max_to_keep=1), record,
                     callbacks.ModelCheckpoint(str(tmp_path / "e{epoch:02d}-{loss:.3f}"),
                                               save_weights_only=True)])
    best_epoch = min(best_values, key=lambda e: best_values[e][0])
    restored = model()
    manager = sf.train.CheckpointManager(sf.train.Checkpoint(model=restored),
                                         tmp_path / "best")
    sf.train.Checkpoint(model=restored, optimizer=restored.optimizer).restore(
        manager.latest_checkpoint)
    for got, want in zip(weights(restored), best_values[best_epoch][1], strict=True):
        np.testing.assert_array_equal(got, want)
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("e0"))
    assert [n.split("-")[0] for n in names if n.endswith(".safetensors")] == [
        "e01", "e02", "e03", "e04"]
    with pytest.raises(KeyError, match="names 'nothing'"):
        model().fit(x, y, epochs=1, verbose=0,
                    callbacks=[callbacks.ModelCheckpoint(str(tmp_path / "{nothing}"))])


class Crash(callbacks.Callback):
    """Raise once `fit` has trained `batch` batches of `epoch`."""

    def __init__(self, epoch, batch):
        self.epoch, self.batch = epoch, batch

    def on_train_batch_end(self, batch, logs=None):
        if self.model.fit_progress.epoch == self.epoch and batch == self.batch:
            raise RuntimeError("crash")


@pytest.mark.parametrize("save_freq", ["epoch", 3])
def test_backup_and_restore_resumes_bit_for_bit(tmp_path, save_freq):
    x, y = data(120)
    run = {"batch_size": 16, "epochs": 3, "verbose": 0, "validation_data": (x[:24], y[:24])}
    straight = model(dropout=0.3)
    history = straight.fit(x, y, seed=9, **run)

    backup = tmp_path / "backup"
    crashed = model(dropout=0.3)
    with pytest.raises(RuntimeError, match="crash"):
        crashed.fit(x, y, seed=9, callbacks=[
            callbacks.BackupAndRestore(backup, save_freq=save_freq), Crash(1, 4)], **run)
    assert os.listdir(backup)
    sf.random.set_seed(123)  # the streams are restored from the backup, not from here
    resumed = model(dropout=0.3)
    again = resumed.fit(x, y, seed=9, callbacks=[
        callbacks.BackupAndRestore(backup, save_freq=save_freq)], **run)
    for got, want in zip(weights(resumed), weights(straight), strict=True):
        np.testing.assert_array_equal(got, want)
    assert again.epoch[0] == 1  # it started in the second epoch
    assert again.history["loss"] == history.history["loss"][1:]
    assert not backup.exists()  # deleted once fit completed


def tensorboard_tags(logdir):
    """Each tag's (step, value) pairs as TensorBoard's reader sees the run in `logdir`."""
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.util import tensor_util

    accumulator = event_accumulator.EventAccumulator(str(logdir), size_guidance={"tensors": 0})
    accumulator.Reload()
    tags = {tag: [(e.step, tensor_util.make_ndarray(e.tensor_proto)) for e in
                  accumulator.Tensors(tag)] for tag in accumulator.Tags()["tensors"]}
    return tags, accumulator.Tags()


def test_tensorboard_writes_keras_layout(tmp_path):
    x, y = data(64)
    m = model()
    history = m.fit(x, y, batch_size=16, epochs=3, verbose=0, validation_data=(x, y),
                    callbacks=[callbacks.TensorBoard(tmp_path, histogram_freq=2,
                                                     update_freq=2)])
    train, _ = tensorboard_tags(tmp_path / "train")
    validation, _ = tensorboard_tags(tmp_path / "validation")
    for name in ("loss", "accuracy"):
        assert [step for step, _ in train[f"epoch_{name}"]] == [0, 1, 2]
        np.testing.assert_allclose([float(v) for _, v in train[f"epoch_{name}"]],
                                   history.history[name], rtol=1e-6)
        np.testing.assert_allclose([float(v) for _, v in validation[f"epoch_{name}"]],
                                   history.history[f"val_{name}"], rtol=1e-6)
    assert [step for step, _ in train["batch_loss"]] == [2, 4, 6, 8, 10, 12]
    assert float(train["epoch_learning_rate"][0][1]) == pytest.approx(0.01)
    kernel = m.variables[0]
    assert [step for step, _ in train[kernel.name]] == [0, 2]  # every second epoch
    [(step, graph)] = train["keras"]  # the staged step's graph, for the Graphs tab
    assert step == 0 and f"{m.name}_train_step/".encode() in graph.item()
    assert b"matmul" in graph.item()

