"""Cache-hit cost of calling a staged `f(x) = x + 1` on a (4, 4) float32 input.

    python -m benchmarks.call_overhead

Prints the median microseconds per call of the staged function compiled (`jit=True`, the
default) and interpreted (`jit=False`), of the same function called eagerly, and of NumPy's
`x + 1`, measured in one run, then of jax.jit, torch.compile and tf.function where installed
(`benchmarks.incumbents`). Goal compiled: at most 5 us (jax.jit: 8.9 us, torch.compile:
46 us, tf.function: 295 us on this machine).
"""

from __future__ import annotations

import numpy as np

import stageflow as sf
from benchmarks import incumbents
from benchmarks.timing import interleaved_medians


def add_one(x):
    return x + 1.0


def main() -> dict[str, float]:
    x_np = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    x = sf.constant(x_np)
    staged = sf.function(add_one)
    interpreted = sf.function(add_one, jit=False)
    for f in (staged, interpreted):
        np.testing.assert_allclose(f(x).numpy(), x_np + 1.0)

    def run(f, arg):
        def loop(n: int) -> None:
            for _ in range(n):
                f(arg)
        return loop

    medians = interleaved_medians({
        "numpy": run(add_one, x_np),
        "eager": run(add_one, x),
        "staged": run(staged, x),
        "interpreted": run(interpreted, x),
    })
    us = {name: t * 1e6 for name, t in medians.items()}
    assert staged.tracing_count == interpreted.tracing_count == 1
    print("cache-hit call of f(x) = x + 1, (4, 4) float32 (median us per call)")
    print(f"  numpy x + 1                   {us['numpy']:7.2f}")
    print(f"  stageflow eager               {us['eager']:7.2f}")
    print(f"  stageflow staged, compiled    {us['staged']:7.2f}   goal <= 5 us "
          f"(jax.jit 8.9 us here)")
    print(f"  stageflow staged, interpreted {us['interpreted']:7.2f}")
    for name, figure in incumbents.call_overhead().items():
        us[name] = figure
        print(f"  {name:29s} {figure:7.2f}   (waiting for each result)")
    return us


if __name__ == "__main__":
    main()
