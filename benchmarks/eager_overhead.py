"""Eager dispatch cost: `x = x * a + b` on (4, 4) float32, stageflow against NumPy.

    python -m benchmarks.eager_overhead

Prints the median cost per op of each and their ratio (the goal: at most 2x NumPy, and
below PyTorch eager's 1.76 us/op on this machine).
"""

from __future__ import annotations

import numpy as np

import stageflow as sf
from benchmarks.timing import interleaved_medians

OPS_PER_LOOP = 1000  # 2 ops per iteration


def op_loop(x, a, b, n_ops: int = OPS_PER_LOOP):
    for _ in range(n_ops // 2):
        x = x * a + b
    return x


def main() -> dict[str, float]:
    rng = np.random.default_rng(0)
    x, a, b = (rng.standard_normal((4, 4)).astype(np.float32) * s for s in (1.0, 0.5, 0.1))
    tx, ta, tb = sf.constant(x), sf.constant(a), sf.constant(b)
    np.testing.assert_allclose(op_loop(tx, ta, tb, 10).numpy(), op_loop(x, a, b, 10), rtol=1e-6)

    def run_numpy(n: int) -> None:
        for _ in range(n):
            op_loop(x, a, b)

    def run_stageflow(n: int) -> None:
        for _ in range(n):
            op_loop(tx, ta, tb)

    medians = interleaved_medians({"numpy": run_numpy, "stageflow": run_stageflow})
    us = {name: t / OPS_PER_LOOP * 1e6 for name, t in medians.items()}
    ratio = us["stageflow"] / us["numpy"]
    print("eager dispatch, x = x * a + b on (4, 4) float32 (median us per op)")
    print(f"  numpy      {us['numpy']:.3f}")
    print(f"  stageflow  {us['stageflow']:.3f}   ratio to numpy {ratio:.2f}x (goal <= 2.0x)")
    return {"numpy_us": us["numpy"], "stageflow_us": us["stageflow"], "ratio": ratio}


if __name__ == "__main__":
    main()
