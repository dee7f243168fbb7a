"""Eager speed beyond the layers: the small CIFAR ResNet's training step written with raw ops
against the same model built from `sf.layers`, both eager, beside PyTorch eager.

    python -m benchmarks.eager_raw_ops [BATCH ...]   (default 1 8 32)

The layer version is `benchmarks.resnet`'s eager step (`examples/resnet.py`: batch norm a
composite, compiled forward and backward; the SGD step one compiled call). The raw version
computes the same function from the same weights with the ops a user would type: batch
norm from `reduce_mean` (its moving statistics updated by `assign`), the updates by
`assign_sub`, one per variable. Its eager speed comes from the op path alone: the
convolutions' compiled kernels and, from a tape's second gradient call, its backward pass
compiled as one program (`models.backward_runner`). Goal: the raw step within 1.2x of the
layer step's time (a ratio of at least 0.83). PyTorch eager runs the model as
`benchmarks.resnet` defines it. Figures are examples/s, best of alternating rounds after
every background compile has settled; the first losses must agree.
"""

from __future__ import annotations

import importlib.util
import sys

import numpy as np

import stageflow as sf
from benchmarks.resnet import (
    EPSILON,
    LR,
    MOMENTUM,
    Step,
    Weights,
    block_strides,
    built_model,
    loop,
    make_batch,
    stageflow_step,
    torch_step,
    weights,
)
from benchmarks.timing import interleaved_best
from stageflow.models import backward_runner, fused_updates
from stageflow.models import composite_runner as composites
from stageflow.runtime import eager_kernels

BATCHES = [1, 8, 32]


def raw_step(start: Weights, strides: list[int], x: np.ndarray, y: np.ndarray) -> Step:
    """The model's training step in raw ops on variables holding `start`."""
    params = {name: sf.Variable(value) for name, value in start.items()}
    moving = {name: (sf.Variable(np.zeros_like(value)), sf.Variable(np.ones_like(value)))
              for name, value in start.items() if name == "stem_g" or name[2] == "g"}

    def conv(h: sf.Tensor, name: str, stride: int) -> sf.Tensor:
        return sf.nn.conv2d(h, params[name], stride, "SAME")

    def batch_norm(h: sf.Tensor, gamma: str, beta: str) -> sf.Tensor:
        mean = sf.reduce_mean(h, axis=[0, 1, 2])
        centered = h - mean
        variance = sf.reduce_mean(centered * centered, axis=[0, 1, 2])
        moving_mean, moving_variance = moving[gamma]
        moving_mean.assign(moving_mean * MOMENTUM + sf.stop_gradient(mean) * (1 - MOMENTUM))
        moving_variance.assign(moving_variance * MOMENTUM
                               + sf.stop_gradient(variance) * (1 - MOMENTUM))
        return centered * sf.math.rsqrt(variance + EPSILON) * params[gamma] + params[beta]

    def forward(h: sf.Tensor) -> sf.Tensor:
        h = sf.nn.relu(batch_norm(conv(h, "stem", 1), "stem_g", "stem_b"))
        for i, s in enumerate(strides):
            r = sf.nn.relu(batch_norm(conv(h, f"b{i}c1", s), f"b{i}g1", f"b{i}b1"))
            r = batch_norm(conv(r, f"b{i}c2", 1), f"b{i}g2", f"b{i}b2")
            h = sf.nn.relu(r + (conv(h, f"b{i}sc", s) if f"b{i}sc" in params else h))
        return sf.matmul(sf.reduce_mean(h, axis=[1, 2]), params["dense"]) + params["dense_b"]

    tx, ty = sf.constant(x), sf.constant(y)

    def step() -> float:
        with sf.GradientTape() as tape:
            loss = sf.reduce_mean(sf.nn.sparse_softmax_cross_entropy_with_logits(
                ty, forward(tx)))
        names = list(params)
        for name, g in zip(names, tape.gradient(loss, [params[n] for n in names]),
                           strict=True):
            params[name].assign_sub(LR * g)
        return float(loss)

    return step


def settle() -> None:
    """Wait for every background compile of the eager steps."""
    eager_kernels.settle()
    composites.settle()
    fused_updates.settle()
    backward_runner.settle()


def main(batches: list[int]) -> dict[int, dict[str, float]]:
    print("small CIFAR ResNet eager training step: raw ops against layers (examples/s, "
          "best of alternating rounds)")
    sf.random.set_seed(0)
    initial = built_model()
    start, strides = weights(initial), block_strides(initial)
    results = {}
    for batch in batches:
        x, y = make_batch(batch)
        steps = {"stageflow layers": stageflow_step(initial, x, y, staged=False),
                 "stageflow raw ops": raw_step(start, strides, x, y)}
        if importlib.util.find_spec("torch"):
            steps["PyTorch eager"] = torch_step(start, strides, x, y, compiled=False)
        first = {name: step() for name, step in steps.items()}
        for name, loss in first.items():
            np.testing.assert_allclose(loss, first["stageflow layers"], rtol=2e-3,
                                       err_msg=f"{name}'s first loss")
        for _ in range(3):  # the raw tape's second gradient call starts its compile
            for step in steps.values():
                step()
            settle()
        seconds = interleaved_best({name: loop(step) for name, step in steps.items()},
                                   rounds=5, min_time=0.3)
        rates = results[batch] = {name: batch / t for name, t in seconds.items()}
        ratio = rates["stageflow raw ops"] / rates["stageflow layers"]
        print(f"  batch {batch:3d}  " + "  ".join(f"{name} {rate:7.1f}"
                                                   for name, rate in rates.items())
              + f"  raw / layers {ratio:.2f} (goal >= 0.83)")
    return results


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or BATCHES)
