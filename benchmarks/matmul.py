"""Matmul float32, n = 256..2048: a staged `sf.matmul` against NumPy's, 1 and 2 threads.

    python -m benchmarks.matmul [N ...]

Each thread count runs in its own process (BLAS reads its thread count at import). Staged
matmul calls the same OpenBLAS sgemm NumPy does (see `primitives/linalg.py` for why), so
the ratio measures stageflow's call overhead; goal >= 0.9x NumPy's GFLOP/s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys
import numpy as np
import stageflow as sf
from benchmarks.timing import interleaved_medians
out = {}
for n in [int(a) for a in sys.argv[1:]]:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    ta, tb = sf.constant(a), sf.constant(b)
    staged = sf.function(sf.matmul)
    staged(ta, tb)
    def loop(f, *args):
        def run(k):
            for _ in range(k):
                f(*args)
        return run
    t = interleaved_medians({"numpy": loop(np.matmul, a, b), "staged": loop(staged, ta, tb)},
                            rounds=5, min_time=0.2)
    out[n] = {name: 2 * n**3 / s / 1e9 for name, s in t.items()}
print(json.dumps(out))
"""


def main(sizes: list[int]) -> dict:
    results = {}
    print("matmul float32 (GFLOP/s, medians; staged = sf.function(sf.matmul))")
    for threads in (1, 2):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
        run = subprocess.run([sys.executable, "-c", CHILD, *map(str, sizes)], env=env,
                             capture_output=True, text=True, check=True)
        results[threads] = json.loads(run.stdout.strip().splitlines()[-1])
        for n, rates in results[threads].items():
            print(f"  {threads} thread{'s' if threads > 1 else ' '} n={int(n):5d}  "
                  f"numpy {rates['numpy']:6.1f}  staged {rates['staged']:6.1f}  "
                  f"ratio {rates['staged'] / rates['numpy']:.2f} (goal >= 0.9)")
    return results


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [256, 512, 1024, 2048])
