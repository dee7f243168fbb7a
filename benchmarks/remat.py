"""Rematerialisation: the activation memory and step time of a deep, elementwise-heavy
network's training step, with and without the `remat` pass.

    python -m benchmarks.remat [--depth 16] [--width 512] [--batch 256]

The network is a residual stack of `depth` layers, each a matmul and a gated GELU
(``h + gelu(z) * sigmoid(z) - 0.1 * tanh(z)``, float32). The loss is a staged function
differentiated under an eager tape, so its forward saves residuals for the staged backward
(the paper's section 4.2); the SGD update runs eagerly. "Saved" is the bytes of those
residuals beyond the inputs and variables (held anyway) after one call: the activation
memory held between the forward and the backward. Step times are interleaved medians.
"""

from __future__ import annotations

import argparse

import numpy as np

import stageflow as sf
from benchmarks.timing import interleaved_medians
from stageflow.core import config

LR = 1e-3


def make_model(depth: int, width: int, seed: int = 0):
    """The variables and the loss function of the residual gated-GELU stack."""
    rng = np.random.default_rng(seed)
    weights = [sf.Variable((rng.standard_normal((width, width)) / width**0.5)
                           .astype(np.float32)) for _ in range(depth)]
    biases = [sf.Variable(np.zeros(width, np.float32)) for _ in range(depth)]

    def loss(x):
        h = x
        for w, b in zip(weights, biases, strict=True):
            z = sf.matmul(h, w) + b
            h = h + sf.nn.gelu(z, approximate=True) * sf.sigmoid(z) - 0.1 * sf.tanh(z)
        return sf.reduce_mean(h * h)

    return weights + biases, loss


def make_step(variables: list, loss, remat: bool):
    """A training step whose staged loss was first differentiated with `remat` on or off;
    the step and the forward/backward pair it built."""
    config.remat = remat
    staged = sf.function(loss)

    def step(x):
        with sf.GradientTape() as tape:
            value = staged(x)
        for v, g in zip(variables, tape.gradient(value, variables), strict=True):
            v.assign_sub(LR * g)
        return value

    return step, staged


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=16)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch", type=int, default=256)
    args = parser.parse_args(argv)
    x = sf.constant(np.random.default_rng(1).standard_normal((args.batch, args.width))
                    .astype(np.float32))
    variables, loss = make_model(args.depth, args.width)
    saved: dict[str, int] = {}
    runs = {}
    try:
        for name, remat in (("remat", True), ("no remat", False)):
            step, staged = make_step(variables, loss, remat)
            step(x)
            saved[name] = staged.get_concrete_function(x)._forward_backward.residual_bytes
            runs[name] = lambda n, step=step: [step(x) for _ in range(n)]
    finally:
        config.remat = True
    seconds = interleaved_medians(runs, rounds=9, min_time=0.2)
    memory_saving = 1 - saved["remat"] / saved["no remat"]
    slowdown = seconds["remat"] / seconds["no remat"] - 1
    print(f"remat: {args.depth} layers of width {args.width}, batch {args.batch}, float32")
    for name in runs:
        print(f"  {name:9}  saved activations {saved[name] / 2**20:8.2f} MiB"
              f"  step {seconds[name] * 1e3:7.2f} ms")
    print(f"  saved activation memory {memory_saving:+.0%} less (goal >= 40%), "
          f"step time {slowdown:+.1%} (goal <= +10%)")
    return {"saving": memory_saving, "slowdown": slowdown,
            "remat_mib": saved["remat"] / 2**20, "plain_mib": saved["no remat"] / 2**20}


if __name__ == "__main__":
    main()
