"""Train the small CIFAR ResNet of `resnet.py` data-parallel, with the distribution
strategies of `sf.distribute`.

    python examples/resnet_data_parallel.py                       # both strategies
    python examples/resnet_data_parallel.py --strategy mirrored --steps 10 --batch 32

`mirrored`: `sf.distribute.MirroredStrategy` over two logical CPUs of this process. The
whole training step (`strategy.run` of the replica's step, and the reduction of the losses)
is one `sf.function`: both replicas are staged into one graph, with an all-reduce per
gradient between them. `multiworker`: `sf.distribute.MultiWorkerMirroredStrategy` over two
Ray worker processes. There the replica's step itself is the `sf.function`: each worker runs
it compiled and all-reduces the gradients with the other worker, and the coordinator only
sends the shards and reads the losses.

The model is made in the strategy's scope, so each replica keeps a copy of every variable;
each step splits one fixed global batch of random images in two, and the loss is summed
over a replica's shard and divided by the global batch size (TensorFlow's custom-training-
loop recipe), so the summed gradients are the whole batch's. The batch norms normalise with
the statistics of a replica's shard, not the whole batch's, so the losses are not those of
one process on the whole batch: the example shows the loss going down as the batch is
memorised, and checks that every replica's copy of every trainable variable is the same
after training. Both strategies start from the same weights and split the batch alike, so
with ``--strategy both`` their losses must agree. The batch norms' moving statistics, which
each replica updates from its own shard, take the mean of the replicas' updates (their
`sf.VariableAggregation.MEAN`), so their copies agree too.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from resnet import cifar_resnet, synthetic_batch

import stageflow as sf

SIZE, CLASSES, REPLICAS = 32, 10, 2


def build(strategy: sf.distribute.Strategy, batch: int
          ) -> tuple[Callable[[sf.Tensor, sf.Tensor], sf.Tensor], sf.Module]:
    """The model and SGD made in `strategy`'s scope (from the same seed whatever the
    strategy), and the replica's training step on its shard."""
    sf.random.set_seed(0)
    with strategy.scope():
        model = cifar_resnet(CLASSES)
        model(sf.zeros((1, SIZE, SIZE, 3)))  # makes the variables, mirrored
        optimizer = sf.optimizers.SGD(0.01)

    def step(x: sf.Tensor, y: sf.Tensor) -> sf.Tensor:
        with sf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = sf.reduce_sum(
                sf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)) / batch
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
        return loss

    return step, model


def train(label: str, strategy: sf.distribute.Strategy,
          stage: Callable[[Callable], Callable[[tuple], sf.Tensor]], batch: int,
          steps: int) -> list[float]:
    """One untimed step (tracing, compiling), then `steps` timed ones of `stage(step)`, the
    global step (the summed loss of the replicas' steps on their shards); prints the losses
    and images per second, checks the replicas' copies and returns the losses."""
    step, model = build(strategy, batch)
    global_step = stage(step)
    dataset = sf.data.Dataset.from_tensor_slices(synthetic_batch(batch, SIZE, CLASSES)
                                                 ).batch(batch)
    [shards] = list(strategy.experimental_distribute_dataset(dataset))
    print(f"{label}: {strategy.num_replicas_in_sync} replicas on "
          f"{list(strategy.worker_devices)}, global batch {batch} of {SIZE}x{SIZE}x3")
    start = time.perf_counter()
    losses = [float(global_step(shards))]
    print(f"  step 0: loss {losses[0]:.4f}  (first call {time.perf_counter() - start:.2f} s)")
    start = time.perf_counter()
    for i in range(1, steps + 1):
        losses.append(float(global_step(shards)))
        print(f"  step {i}: loss {losses[-1]:.4f}")
    print(f"  {steps * batch / (time.perf_counter() - start):.1f} images/s")
    for variable in model.variables:
        copies = [copy.numpy() for copy in variable.values]
        for copy in copies[1:]:
            np.testing.assert_array_equal(copy, copies[0], err_msg=variable.name)
    print(f"  the replicas' copies of all {len(model.variables)} variables agree (moving "
          "statistics included)")
    if steps > 0 and not losses[-1] < losses[0]:
        raise AssertionError(f"the loss did not go down: {losses}")
    return losses


def mirrored(batch: int, steps: int) -> list[float]:
    strategy = sf.distribute.MirroredStrategy([f"CPU:{i}" for i in range(REPLICAS)])

    def stage(step: Callable) -> Callable[[tuple], sf.Tensor]:
        """The whole global step staged: both replicas in one graph."""
        return sf.function(lambda shards: strategy.reduce(
            "SUM", strategy.run(step, args=shards), axis=None))

    return train("MirroredStrategy", strategy, stage, batch, steps)


def multiworker(batch: int, steps: int) -> list[float]:
    strategy = sf.distribute.MultiWorkerMirroredStrategy(jobs={"worker": REPLICAS})

    def stage(step: Callable) -> Callable[[tuple], sf.Tensor]:
        """The replica's step staged, to run compiled in each worker; `run` from Python."""
        staged = sf.function(step)
        return lambda shards: strategy.reduce("SUM", strategy.run(staged, args=shards),
                                              axis=None)

    try:
        return train("MultiWorkerMirroredStrategy", strategy, stage, batch, steps)
    finally:
        sf.distribute.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per strategy")
    parser.add_argument("--batch", type=int, default=16, help="the global batch size")
    parser.add_argument("--strategy", choices=["mirrored", "multiworker", "both"],
                        default="both")
    args = parser.parse_args()
    if args.batch % REPLICAS:
        parser.error(f"--batch {args.batch} does not split evenly over {REPLICAS} replicas")
    sf.config.set_logical_device_count("CPU", REPLICAS)  # before any device is used
    losses = {}
    if args.strategy in ("mirrored", "both"):
        losses["mirrored"] = mirrored(args.batch, args.steps)
    if args.strategy in ("multiworker", "both"):
        losses["multiworker"] = multiworker(args.batch, args.steps)
    if len(losses) == 2:
        np.testing.assert_allclose(losses["multiworker"], losses["mirrored"], rtol=1e-4)
        print("the two strategies' losses agree: the same shards, the same summed gradients")


if __name__ == "__main__":
    main()
