"""Data-parallel training over two worker processes with
`sf.distribute.MultiWorkerMirroredStrategy` (the paper, section 4.5).

    python examples/data_parallel.py [--steps N] [--quiet]

An MLP (64-128-10 on synthetic data) trains with SGD. The strategy starts a local Ray
cluster of two workers and mirrors the parameters made in its scope: each worker keeps its
own copy. Each step splits the global batch in two, one shard per worker; the step is an
`sf.function`, traced once per worker, sent there and run compiled. Inside it the
optimizer's `apply_gradients` all-reduces the gradients worker to worker (Ray's
collectives), so each worker applies the same summed gradient to its copy. The coordinator
only sends the shards and reads the losses: no gradient passes through it, and nobody
averages them there. The loss is divided by the global batch size, as in TensorFlow's
custom-training-loop guide, so the sum of the shards' gradients is the whole batch's.

The same steps then run in this process on the whole batch (a plain staged step, no
strategy), from the same initial parameters, and the two trainings must end with the same
parameters within float rounding.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable

import numpy as np

import stageflow as sf

SIZES = (64, 128, 10)
BATCH = 256
LEARNING_RATE = 0.1


def init(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:], strict=True):
        params += [(rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32),
                   np.zeros(fan_out, np.float32)]
    return params


def data(batch: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, SIZES[0])).astype(np.float32)
    y = (x[:, :SIZES[-1]].argmax(axis=1)).astype(np.int32)
    return x, y


def make_step(strategy: sf.distribute.Strategy | None
              ) -> tuple[Callable[[sf.Tensor, sf.Tensor], sf.Tensor], list[sf.Variable]]:
    """The parameters and SGD, made in `strategy`'s scope (mirrored) if there is one, and
    the staged step that trains them on one batch (a replica's shard, or the whole)."""
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        params = [sf.Variable(p) for p in init()]
        optimizer = sf.optimizers.SGD(LEARNING_RATE)

    @sf.function
    def step(x: sf.Tensor, y: sf.Tensor) -> sf.Tensor:
        w1, b1, w2, b2 = params
        with sf.GradientTape() as tape:
            logits = sf.matmul(sf.nn.relu(sf.matmul(x, w1) + b1), w2) + b2
            loss = sf.reduce_sum(
                sf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)) / BATCH
        optimizer.apply_gradients(zip(tape.gradient(loss, params), params, strict=True))
        return loss

    return step, params


def timed(train_step: Callable[[], sf.Tensor], steps: int) -> tuple[float, float]:
    """One untimed step (tracing, compiling, sending), then `steps` timed ones; (the last
    loss, steps per second)."""
    loss = float(train_step())
    start = time.perf_counter()
    for _ in range(steps):
        loss = float(train_step())
    return loss, steps / (time.perf_counter() - start)


def distributed(steps: int) -> tuple[list[np.ndarray], float, float, tuple[str, ...]]:
    """Train over two workers; (parameters, last loss, steps per second, the workers)."""
    strategy = sf.distribute.MultiWorkerMirroredStrategy(jobs={"worker": 2})
    try:
        step, params = make_step(strategy)
        dataset = sf.data.Dataset.from_tensor_slices(data(BATCH)).batch(BATCH)
        [shards] = list(strategy.experimental_distribute_dataset(dataset))  # sent once
        loss, rate = timed(lambda: strategy.reduce(
            "SUM", strategy.run(step, args=shards), axis=None), steps)
        for param in params:  # every worker's copy was updated alike
            copies = [copy.numpy() for copy in param.values]
            np.testing.assert_array_equal(copies[1], copies[0])
        return [p.numpy() for p in params], loss, rate, strategy.worker_devices
    finally:
        sf.distribute.shutdown()


def local(steps: int) -> tuple[list[np.ndarray], float, float]:
    """Train in this process on the whole batch; (parameters, last loss, steps per second)."""
    step, params = make_step(None)
    x, y = (sf.constant(a) for a in data(BATCH))
    loss, rate = timed(lambda: step(x, y), steps)
    return [p.numpy() for p in params], loss, rate


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per training")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    remote, remote_loss, remote_rate, workers = distributed(args.steps)
    whole, local_loss, local_rate = local(args.steps)
    for a, b in zip(remote, whole, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    if not args.quiet:
        print(f"{args.steps + 1} steps over {list(workers)}: loss {remote_loss:.4f} "
              f"({remote_rate:.1f} steps/s); in this process: loss {local_loss:.4f} "
              f"({local_rate:.1f} steps/s); the parameters agree")
    return {"distributed": remote_rate, "local": local_rate}


if __name__ == "__main__":
    main()
