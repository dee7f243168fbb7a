"""Keras-style training: a functional model, `compile` and `fit` with validation and
callbacks, killed in the middle of an epoch and resumed by `BackupAndRestore` with the same
final weights, bit for bit, as a run that was never interrupted.

    python examples/keras_fit.py                 # the demonstration (three processes)
    python examples/keras_fit.py --small         # fewer examples and epochs, for CI
    python examples/keras_fit.py --logdir DIR    # keep the logs (CSV, checkpoints, TensorBoard)

The data are ten Gaussian clusters in 32 dims (made here, nothing is downloaded); the
model is ``Input(32) -> Dense(64, relu) -> Dropout(0.2) -> Dense(10)``, trained by Adam on
the softmax cross-entropy with accuracy as its metric. `fit` runs with:

- `ModelCheckpoint`: the best epoch by validation loss, into ``LOGDIR/best``;
- `CSVLogger`: one row of logs per epoch, ``LOGDIR/log.csv``;
- `TensorBoard`: the epoch's scalars, ``tensorboard --logdir LOGDIR/tensorboard``;
- `BackupAndRestore`: everything training depends on, every few batches, in
  ``LOGDIR/backup`` (the variables, the optimizer's slots, the running metrics, the
  random streams dropout draws from, and fit's epoch, batch and shuffling seed).

The demonstration trains three times, each in a process of its own: once without
interruption; once killed (SIGKILL, nothing cleaned up) in the middle of the second epoch;
and once more, which finds the backup and finishes the killed run. The last prints whether
its weights equal the uninterrupted run's, exactly.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile

import numpy as np

import stageflow as sf

CLASSES, FEATURES = 10, 32


def make_data(examples: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((CLASSES, FEATURES)).astype(np.float32) * 2.0
    labels = rng.integers(0, CLASSES, examples).astype(np.int32)
    points = centers[labels] + rng.standard_normal((examples, FEATURES)).astype(np.float32)
    return points, labels


def make_model() -> sf.keras.Model:
    inputs = sf.keras.Input((FEATURES,), name="features")
    hidden = sf.keras.layers.Dense(64, activation="relu")(inputs)
    hidden = sf.keras.layers.Dropout(0.2)(hidden)
    outputs = sf.keras.layers.Dense(CLASSES)(hidden)
    return sf.keras.Model(inputs, outputs, name="classifier")


class KillAt(sf.keras.callbacks.Callback):
    """Kill this process, as an out-of-memory killer or a preempted machine would, once
    `fit` has trained `batch` batches of epoch `epoch` (both from 0)."""

    def __init__(self, epoch: int, batch: int) -> None:
        self.epoch, self.batch = epoch, batch

    def on_train_batch_end(self, batch, logs=None):
        if self.model.fit_progress.epoch == self.epoch and batch == self.batch:
            os.kill(os.getpid(), signal.SIGKILL)


def train(logdir: str, examples: int, epochs: int, kill: tuple[int, int] | None,
          weights: str) -> None:
    """One training run; the final weights go to `weights` (an .npz)."""
    sf.random.set_seed(0)  # the same initial weights in every run
    os.makedirs(logdir, exist_ok=True)
    x, y = make_data(examples)
    split = examples * 4 // 5
    model = make_model()
    model.compile(optimizer=sf.keras.optimizers.Adam(1e-3),
                  loss=sf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    callbacks = [
        sf.keras.callbacks.ModelCheckpoint(os.path.join(logdir, "best"),
                                           save_best_only=True, max_to_keep=1),
        sf.keras.callbacks.CSVLogger(os.path.join(logdir, "log.csv"), append=True),
        sf.keras.callbacks.TensorBoard(os.path.join(logdir, "tensorboard")),
        sf.keras.callbacks.BackupAndRestore(os.path.join(logdir, "backup"), save_freq=5),
    ]
    if kill is not None:
        callbacks.append(KillAt(*kill))
    model.fit(x[:split], y[:split], batch_size=32, epochs=epochs, seed=1,
              validation_data=(x[split:], y[split:]), callbacks=callbacks, verbose=2)
    np.savez(weights, *[v.numpy() for v in model.variables])


def child(*args: str) -> int:
    """Run this script with `args` in a new process; its exit status."""
    return subprocess.run([sys.executable, os.path.abspath(__file__), *args],
                          check=False).returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="a quick run, for CI")
    parser.add_argument("--logdir", help="where the logs go (default: a temporary folder)")
    parser.add_argument("--train", metavar="WEIGHTS", help=argparse.SUPPRESS)
    parser.add_argument("--kill", type=int, nargs=2, metavar=("EPOCH", "BATCH"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    examples, epochs = (640, 3) if args.small else (4000, 6)
    if args.train:
        train(args.logdir, examples, epochs, tuple(args.kill) if args.kill else None,
              args.train)
        return
    root = args.logdir or tempfile.mkdtemp(prefix="keras_fit_")
    small = ["--small"] if args.small else []
    straight, resumed = (os.path.join(root, name) for name in ("straight", "resumed"))
    print("1. an uninterrupted run")
    assert child(*small, "--logdir", straight, "--train", f"{straight}.npz") == 0
    print("2. the same run, killed in the middle of its second epoch")
    status = child(*small, "--logdir", resumed, "--train", f"{resumed}.npz",
                   "--kill", "1", "7")
    print(f"   the process ended with {status} (-9: SIGKILL)")
    assert status == -signal.SIGKILL
    print("3. started again: BackupAndRestore resumes where the backup was taken")
    assert child(*small, "--logdir", resumed, "--train", f"{resumed}.npz") == 0
    a, b = np.load(f"{straight}.npz"), np.load(f"{resumed}.npz")
    identical = all(np.array_equal(a[k], b[k]) for k in a.files)
    print(f"final weights identical to the uninterrupted run's: {identical}")
    print(f"logs in {root} (tensorboard --logdir {os.path.join(resumed, 'tensorboard')})")
    if not identical:
        sys.exit(1)


if __name__ == "__main__":
    main()
