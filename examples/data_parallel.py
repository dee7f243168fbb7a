"""Data-parallel training over two workers with one coordinator (the paper, section 4.5).

    python examples/data_parallel.py [--steps N]

An MLP (64-128-10 on synthetic data) trains with SGD. Each step splits the batch in two,
sends each half to a worker (`sf.distribute.connect` starts a local Ray cluster), where a
staged function computes the loss and gradients of its half; the coordinator averages the
gradients and updates the parameters. The same steps run in this process on the whole
batch, and the two trainings must end with the same parameters (within float rounding):
the mean of two half-batch means is the whole batch's mean.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import stageflow as sf

SIZES = (64, 128, 10)


def init(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:], strict=True):
        params += [(rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32),
                   np.zeros(fan_out, np.float32)]
    return params


@sf.function
def loss_and_grads(w1, b1, w2, b2, x, y):
    """The loss of a batch and its gradients with respect to the four parameters."""
    params = [w1, b1, w2, b2]
    with sf.GradientTape() as tape:
        tape.watch(params)
        logits = sf.matmul(sf.nn.relu(sf.matmul(x, w1) + b1), w2) + b2
        loss = sf.reduce_mean(sf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
    return loss, tape.gradient(loss, params)


def data(batch: int, seed: int = 1) -> tuple[sf.Tensor, sf.Tensor]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, SIZES[0])).astype(np.float32)
    y = (x[:, :SIZES[-1]].argmax(axis=1)).astype(np.int32)
    return sf.constant(x), sf.constant(y)


def train(steps: int, devices: list[str] | None, lr: float = 0.1,
          batch: int = 256) -> tuple[list[np.ndarray], float, float]:
    """Train from the same start; (parameters, last loss, steps per second)."""
    params = [sf.constant(p) for p in init()]
    x, y = data(batch)
    halves = [(x[:batch // 2], y[:batch // 2]), (x[batch // 2:], y[batch // 2:])]
    start = time.perf_counter()
    for _ in range(steps):
        if devices is None:
            loss, grads = loss_and_grads(*params, x, y)
        else:
            results = []
            for device, (xs, ys) in zip(devices, halves, strict=True):
                with sf.device(device):  # both submitted before either is waited for
                    results.append(loss_and_grads(*params, xs, ys))
            loss = sf.reduce_mean(sf.stack([r[0].cpu() for r in results]))
            grads = [(a.cpu() + b.cpu()) * 0.5 for a, b in
                     zip(results[0][1], results[1][1], strict=True)]
        params = [p - lr * g for p, g in zip(params, grads, strict=True)]
    rate = steps / (time.perf_counter() - start)
    return [p.numpy() for p in params], float(loss), rate


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    workers = sf.distribute.connect(jobs={"worker": 2})
    try:
        remote, remote_loss, remote_rate = train(args.steps, workers)
    finally:
        sf.distribute.shutdown()
    local, local_loss, local_rate = train(args.steps, None)
    for a, b in zip(remote, local, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    if not args.quiet:
        print(f"{args.steps} steps over {workers}: loss {remote_loss:.4f} "
              f"({remote_rate:.1f} steps/s); in this process: loss {local_loss:.4f} "
              f"({local_rate:.1f} steps/s); the parameters agree")
    return {"distributed": remote_rate, "local": local_rate}


if __name__ == "__main__":
    main()
