"""Train a small MLP on scikit-learn's 8x8 digits, eagerly or staged, checkpointing every
epoch and resuming where it stopped when run again; plot its loss.

    python examples/mlp_digits.py                  # staged training step (sf.function)
    python examples/mlp_digits.py --mode eager     # the same model and step, op by op
    python examples/mlp_digits.py --small          # a few epochs, for CI
    python examples/mlp_digits.py --fresh          # forget the checkpoints, start over

The data set ships inside scikit-learn (`sklearn.datasets.load_digits`, 1797 images), so
nothing is downloaded; install the extra with ``pip install -e '.[examples]'``. The model is
`sf.layers.Sequential` of two `Dense` layers, trained with `sf.optimizers.Adam` on the
softmax cross-entropy; `sf.metrics` keep the running loss and accuracy. In staged mode the
training step is one `sf.function`: its first call builds the model and the optimizer's
slots (state creation), it is traced once more, and every later batch reuses that graph.

The batches come from an `sf.data.Dataset` (shuffled each epoch, prefetched by a background
thread). After each epoch an `sf.train.CheckpointManager` saves the model, the optimizer
(with its slots), the data iterator's position and the loss history; a later run restores
them and continues with exactly the batches the interrupted run would have used next.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

import stageflow as sf

BATCH = 64


def load_data(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError:
        sys.exit("mlp_digits needs scikit-learn: pip install -e '.[examples]' "
                 "(or pip install scikit-learn)")
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)  # pixel intensities 0..16 -> [0, 1]
    y = digits.target.astype(np.int32)
    return train_test_split(x, y, test_size=0.25, random_state=seed, stratify=y)


def progress(iterable, total: int, description: str):
    """tqdm's bar when it is installed, else a plain one that redraws one text line."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _TextBar(iterable, total, description)
    return tqdm(iterable, total=total, desc=description, unit="epoch", file=sys.stdout)


class _TextBar:
    def __init__(self, iterable, total: int, description: str) -> None:
        self.iterable, self.total, self.description = iterable, total, description
        self.postfix = ""

    def __iter__(self):
        for i, item in enumerate(self.iterable, 1):
            yield item
            filled = 30 * i // self.total
            print(f"\r{self.description} [{'#' * filled}{'.' * (30 - filled)}] {i}/"
                  f"{self.total} {self.postfix}", end="", flush=True)
        print()

    def set_postfix_str(self, text: str) -> None:
        self.postfix = text


def save_plot(losses: list[float], accuracy: float, mode: str, path: str) -> None:
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no loss curve saved")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    axes.plot(np.arange(1, len(losses) + 1), losses, marker="o")
    axes.set_xlabel("epoch")
    axes.set_ylabel("mean training loss")
    axes.set_yscale("log")
    axes.set_title(f"MLP on 8x8 digits ({mode}): test accuracy {accuracy:.1%}")
    axes.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    print(f"loss curve saved to {path}")


def train(mode: str, epochs: int, learning_rate: float, seed: int, directory: str
          ) -> tuple[list[float], float, float]:
    """Returns (mean loss per epoch, test accuracy, seconds spent training)."""
    x_train, x_test, y_train, y_test = load_data(seed)
    sf.random.set_seed(seed)
    model = sf.layers.Sequential([
        sf.layers.Dense(128, activation="relu"),
        sf.layers.Dense(10),
    ])
    optimizer = sf.optimizers.Adam(learning_rate)
    train_loss = sf.metrics.Mean()

    def train_step(images, labels):
        with sf.GradientTape() as tape:
            logits = model(images)
            loss = sf.reduce_mean(sf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
        train_loss.update_state(loss)

    accuracy = sf.metrics.SparseCategoricalAccuracy()  # state: created outside the step

    def test_accuracy(images, labels):
        accuracy.reset_state()
        accuracy.update_state(labels, model(images))
        return accuracy.result()

    if mode == "staged":
        # One graph for every batch size (the last batch of an epoch is smaller).
        train_step = sf.function(train_step, input_signature=[
            sf.TensorSpec([None, x_train.shape[1]], sf.float32),
            sf.TensorSpec([None], sf.int32),
        ])
        test_accuracy = sf.function(test_accuracy)

    # Endless shuffled batches; an epoch is a fixed number of them.
    dataset = (sf.data.Dataset.from_tensor_slices((x_train, y_train))
               .shuffle(len(x_train), seed=seed).batch(BATCH).repeat().prefetch(2))
    batches = iter(dataset)
    steps_per_epoch = -(-len(x_train) // BATCH)

    history = sf.train.NumpyState()
    history.losses = []
    checkpoint = sf.train.Checkpoint(model=model, optimizer=optimizer, data=batches,
                                     history=history)
    manager = sf.train.CheckpointManager(checkpoint, directory, max_to_keep=3)
    # The model and the optimizer's slots do not exist before the first step: their values
    # wait in the restore and are applied when the first step creates them.
    checkpoint.restore(manager.latest_checkpoint)
    done = len(history.losses)
    if done:
        print(f"resumed from {manager.latest_checkpoint} after epoch {done}")

    start = time.perf_counter()
    bar = progress(range(done, max(epochs, done)), max(epochs - done, 0), f"{mode:>6}")
    for _ in bar:
        train_loss.reset_state()
        for _ in range(steps_per_epoch):
            train_step(*next(batches))
        history.losses = [*history.losses, float(train_loss.result())]
        manager.save()
        bar.set_postfix_str(f"loss {history.losses[-1]:.4f}")
    seconds = time.perf_counter() - start
    losses = history.losses
    accuracy = float(test_accuracy(sf.constant(x_test), sf.constant(y_test)))
    if mode == "staged":
        print(f"training step traced {train_step.tracing_count} times "
              "(once to create the model and optimizer state, once to use it)")
    return losses, accuracy, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("eager", "staged"), default="staged")
    parser.add_argument("--epochs", type=int, default=None,
                        help="passes over the training set (default 20, 4 with --small)")
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--small", action="store_true",
                        help="a quick run for CI: few epochs, accuracy >= 90%%")
    parser.add_argument("--checkpoint-dir", default="mlp_digits_checkpoints",
                        help="where checkpoints go and are resumed from (default "
                        "./mlp_digits_checkpoints, a temp dir with --small)")
    parser.add_argument("--fresh", action="store_true", help="start over: ignore and "
                        "replace the checkpoints in --checkpoint-dir")
    parser.add_argument("--plot", default=None, help="where to save the loss curve (PNG; "
                        "default mlp_digits_loss.png here, or in a temp dir with --small)")
    args = parser.parse_args(argv)
    epochs = args.epochs if args.epochs is not None else (4 if args.small else 20)
    target = 0.90 if args.small else 0.95
    plot = args.plot
    if plot is None:
        folder = tempfile.mkdtemp(prefix="mlp_digits_") if args.small else os.getcwd()
        plot = os.path.join(folder, "mlp_digits_loss.png")

    directory = args.checkpoint_dir
    if args.small and directory == parser.get_default("checkpoint_dir"):
        directory = tempfile.mkdtemp(prefix="mlp_digits_ckpt_")
    if args.fresh:
        shutil.rmtree(directory, ignore_errors=True)
    losses, accuracy, seconds = train(args.mode, epochs, args.learning_rate, args.seed,
                                      directory)
    print(f"{args.mode}: {epochs} epochs in {seconds:.1f} s, final loss {losses[-1]:.4f}")
    print(f"test accuracy: {accuracy:.4f}")
    save_plot(losses, accuracy, args.mode, plot)
    if accuracy < target:
        print(f"test accuracy {accuracy:.4f} is below the expected {target:.2f}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
