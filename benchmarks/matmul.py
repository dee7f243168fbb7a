"""Matmul float32, n = 256..2048: a staged `sf.matmul` against NumPy's, 1 and 2 threads.

    python -m benchmarks.matmul [N ...]

Each contender runs in processes of its own for each thread count (BLAS reads its thread
count at import), alternating, two each, the best process's medians kept: OpenBLAS's
threads spin for a while after each of NumPy's calls, which in one process would take the
cores from the staged matmul's tasks (it splits the product over stageflow's own pool,
each part an OpenBLAS sgemm on one thread: `codegen.lowered.gemm_split`). So the ratio
measures stageflow's call and its splitting against OpenBLAS's own threading; goal >=
0.9x NumPy's GFLOP/s.
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
contender, out = sys.argv[1], {}
for n in [int(a) for a in sys.argv[2:]]:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    if contender == "staged":
        f, args = sf.function(sf.matmul), (sf.constant(a), sf.constant(b))
    else:
        f, args = np.matmul, (a, b)
    f(*args)
    def run(k):
        for _ in range(k):
            f(*args)
    seconds = interleaved_medians({contender: run}, rounds=5, min_time=0.2)[contender]
    out[n] = 2 * n**3 / seconds / 1e9
print(json.dumps(out))
"""
CONTENDERS = ("numpy", "staged")
PROCESSES = 2  # per contender and thread count, alternating


def main(sizes: list[int]) -> dict:
    results = {}
    print("matmul float32 (GFLOP/s, the best process's medians; staged = "
          "sf.function(sf.matmul))")
    for threads in (1, 2):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
        best: dict[str, dict[str, float]] = {str(n): {} for n in sizes}
        for _ in range(PROCESSES):
            for contender in CONTENDERS:
                run = subprocess.run([sys.executable, "-c", CHILD, contender, *map(str, sizes)],
                                     env=env, capture_output=True, text=True, check=True)
                for n, rate in json.loads(run.stdout.strip().splitlines()[-1]).items():
                    best[n][contender] = max(rate, best[n].get(contender, 0.0))
        results[threads] = best
        for n, rates in results[threads].items():
            print(f"  {threads} thread{'s' if threads > 1 else ' '} n={int(n):5d}  "
                  f"numpy {rates['numpy']:6.1f}  staged {rates['staged']:6.1f}  "
                  f"ratio {rates['staged'] / rates['numpy']:.2f} (goal >= 0.9)")
    return results


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [256, 512, 1024, 2048])
