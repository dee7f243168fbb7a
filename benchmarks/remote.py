"""Remote devices on Ray: the round trip of a cached remote graph-function call against a
bare Ray actor call, and the data-parallel example's throughput, in one run.

    python -m benchmarks.remote

Both round trips send a (4, 4) float32 array to one worker of a local cluster and wait for
the result: the bare call is a Ray actor method returning ``x + 1``; the graph function is
``f(x) = x + 1`` placed on the worker (compiled there once, then called by fingerprint).
Goal: at most 1.5x the bare round trip. Then `examples/data_parallel.py`'s training steps
per second over two workers, against the same step in this process.
"""

from __future__ import annotations

import numpy as np
import ray

import stageflow as sf
from benchmarks.timing import interleaved_medians
from examples import data_parallel


class Echo:
    """The bare actor: what a remote call costs without stageflow."""

    def add_one(self, x):
        return x + 1


def main() -> dict[str, float]:
    [device] = sf.distribute.connect(jobs={"worker": 1})
    echo = ray.remote(Echo).remote()
    x_np = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    x = sf.constant(x_np)
    staged = sf.function(lambda t: t + 1.0)

    def staged_call() -> None:
        with sf.device(device):
            staged(x).numpy()

    def bare_call() -> None:
        ray.get(echo.add_one.remote(x_np))

    def loop(work):
        def run(n: int) -> None:
            for _ in range(n):
                work()
        return run

    staged_call()
    medians = interleaved_medians({"staged": loop(staged_call), "bare": loop(bare_call)})
    us = {name: t * 1e6 for name, t in medians.items()}
    us["ratio"] = us["staged"] / us["bare"]
    print("round trip of f(x) = x + 1, (4, 4) float32, to one worker (median us)")
    print(f"  bare Ray actor call         {us['bare']:8.1f}")
    print(f"  cached remote sf.function   {us['staged']:8.1f}   {us['ratio']:.2f}x "
          "(goal <= 1.5x)")
    sf.distribute.shutdown()
    rates = data_parallel.main(["--steps", "20", "--quiet"])
    print(f"data-parallel MLP step over two workers: {rates['distributed']:.1f} steps/s, "
          f"in this process {rates['local']:.1f} steps/s")
    us.update(rates)
    return us


if __name__ == "__main__":
    main()
