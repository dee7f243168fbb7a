"""`Model.fit` against the hand-written staged training step it replaces, in examples/s.

    python -m benchmarks.fit [--mlp-examples N] [--resnet-examples N]

Two workloads: the MLP 784-256-256-10 of `benchmarks.mlp_train` (a `Sequential`, SGD,
softmax cross-entropy, batch 64) and the small CIFAR ResNet of `benchmarks.resnet` (batch
16). For each, one contender runs ``model.fit(x, y, batch_size, epochs=1, shuffle=False,
verbose=0)`` over N examples; the other is the loop a user writes without `fit`: the
`sf.function` training step (tape, gradients, the optimizer's update) called on each
slice of the same arrays. Both start from the same weights and see the same batches; the
first epoch's losses must agree. `fit` does more per step (its loss mean and metrics) and
the goal is that it costs at most a tenth more: the ratio fit/hand-written is printed.
``steps_per_execution=4`` (several steps per staged call) is timed too.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np

import stageflow as sf
from benchmarks.timing import interleaved_medians
from examples.resnet import cifar_resnet

LR = 0.01


class Classifier(sf.keras.Model):
    """A `Model` around a network module, so that `fit` can train it."""

    def __init__(self, network: Any) -> None:
        super().__init__()
        self.network = network

    def call(self, x: Any, training: bool = False) -> Any:
        return self.network(x, training=training)


def mlp() -> sf.keras.Model:
    return sf.keras.Sequential([sf.layers.Dense(256, activation="relu"),
                                sf.layers.Dense(256, activation="relu"),
                                sf.layers.Dense(10)])


def resnet() -> sf.keras.Model:
    return Classifier(cifar_resnet(10))


def data(kind: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    shape = (n, 784) if kind == "mlp" else (n, 32, 32, 3)
    return (rng.standard_normal(shape).astype(np.float32),
            rng.integers(0, 10, n).astype(np.int32))


def twin_models(make: Callable[[], sf.keras.Model], x: np.ndarray
                ) -> tuple[sf.keras.Model, sf.keras.Model]:
    """Two models of the same architecture holding the same initial values."""
    first, second = make(), make()
    first(sf.constant(x[:1])), second(sf.constant(x[:1]))
    for target, source in zip(second.variables, first.variables, strict=True):
        target.assign(source.numpy())
    return first, second


def hand_written(model: sf.keras.Model, x: np.ndarray, y: np.ndarray,
                 batch: int) -> Callable[[], float]:
    """An epoch of the staged step a user writes without `fit`; returns its mean loss."""
    optimizer = sf.optimizers.SGD(LR)
    loss_fn = sf.losses.SparseCategoricalCrossentropy(from_logits=True)

    @sf.function
    def step(xs: sf.Tensor, ys: sf.Tensor) -> sf.Tensor:
        with sf.GradientTape() as tape:
            loss = loss_fn(ys, model(xs, training=True))
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
        return loss

    def epoch() -> float:
        losses = [step(sf.constant(x[s:s + batch]), sf.constant(y[s:s + batch]))
                  for s in range(0, len(x), batch)]
        return float(np.mean([float(v) for v in losses]))
    return epoch


def fitted(model: sf.keras.Model, x: np.ndarray, y: np.ndarray, batch: int,
           steps_per_execution: int = 1) -> Callable[[], float]:
    model.compile(sf.optimizers.SGD(LR),
                  sf.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=steps_per_execution)

    def epoch() -> float:
        history = model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)
        return history.history["loss"][-1]
    return epoch


def measure(kind: str, n: int, batch: int) -> dict[str, float]:
    make = mlp if kind == "mlp" else resnet
    x, y = data(kind, n)
    by_hand, by_fit = twin_models(make, x)
    _, by_fit4 = twin_models(make, x)
    for target, source in zip(by_fit4.variables, by_hand.variables, strict=True):
        target.assign(source.numpy())
    runs = {"hand-written": hand_written(by_hand, x, y, batch),
            "fit": fitted(by_fit, x, y, batch),
            "fit, 4 steps/call": fitted(by_fit4, x, y, batch, steps_per_execution=4)}
    first = {name: run() for name, run in runs.items()}
    np.testing.assert_allclose(list(first.values()), first["hand-written"], rtol=2e-3)

    def loop(run: Callable[[], float]) -> Callable[[int], None]:
        def repeat(count: int) -> None:
            for _ in range(count):
                run()
        return repeat

    medians = interleaved_medians({name: loop(run) for name, run in runs.items()},
                                  rounds=5, min_time=0.5)
    rates = {name: n / seconds for name, seconds in medians.items()}
    base = rates["hand-written"]
    print(f"{kind}, {n} examples, batch {batch} (examples/s, medians of 5 rounds)")
    for name, rate in rates.items():
        print(f"  {name:18s} {rate:10.0f}   /hand-written {rate / base:.3f}"
              f"{'   (goal >= 0.90)' if name == 'fit' else ''}")
    return rates


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mlp-examples", type=int, default=2048)
    parser.add_argument("--resnet-examples", type=int, default=256)
    args = parser.parse_args(argv)
    return {"mlp": measure("mlp", args.mlp_examples, 64),
            "resnet": measure("resnet", args.resnet_examples, 16)}


if __name__ == "__main__":
    main()
