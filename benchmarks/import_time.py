"""Import cost: `import stageflow` in a fresh process, against NumPy's import and the
incumbents' (jax, torch, tensorflow where importable), in turns, in one run.

    python -m benchmarks.import_time [--rounds N]

Each figure is the median over N fresh interpreters of the wall time of the import alone
(measured inside the process, interpreter start-up excluded), with Python's bytecode cache
on (as an installed package has it, whatever ``PYTHONDONTWRITEBYTECODE`` says here) and
warm: one untimed import of each module comes first. The goal: `import stageflow`
at most 0.3 s, and no compiler loaded by it (the last line says which heavy modules an
import and an eager op loaded: none is the goal).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys

GOAL_SECONDS = 0.3
COMPILER = ("xdsl", "llvmlite", "stageflow.codegen", "stageflow.passes", "stageflow.staging")

_TIMED = """
import json, sys, time
start = time.perf_counter()
import {module}
seconds = time.perf_counter() - start
{after}
print(json.dumps({{"seconds": seconds, "loaded": [m for m in {compiler!r} if m in sys.modules]}}))
"""

_EAGER_OPS = """
import numpy as np
x = stageflow.constant(np.ones((8, 8), np.float32))
with stageflow.GradientTape() as tape:
    tape.watch(x)
    y = stageflow.reduce_sum(stageflow.nn.relu(stageflow.matmul(x, x)))
tape.gradient(y, x)
"""


def measure(module: str, after: str = "") -> dict:
    """One fresh interpreter's import of `module` (then `after`, untimed)."""
    code = _TIMED.format(module=module, after=after, compiler=COMPILER)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, env=env).stdout
    return json.loads(output.splitlines()[-1])


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.import_time",
                                     description=__doc__)
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args(argv)
    modules = ["stageflow", "numpy"] + [name for name in ("jax", "torch", "tensorflow")
                                         if importlib.util.find_spec(name) is not None]
    samples: dict[str, list[float]] = {module: [] for module in modules}
    for module in modules:
        measure(module)  # writes the bytecode cache
    for _ in range(args.rounds):
        for module in modules:
            samples[module].append(measure(module)["seconds"])
    medians = {module: statistics.median(values) for module, values in samples.items()}
    for module, seconds in medians.items():
        print(f"import {module:<11} {seconds * 1e3:7.1f} ms (median of {args.rounds})")
    print(f"import stageflow: {medians['stageflow'] / medians['numpy']:.2f}x NumPy's import; "
          f"goal <= {GOAL_SECONDS * 1e3:.0f} ms: "
          f"{'met' if medians['stageflow'] <= GOAL_SECONDS else 'NOT met'}")
    loaded = measure("stageflow", _EAGER_OPS)["loaded"]
    print(f"compiler modules loaded by the import and eager ops: {', '.join(loaded) or 'none'}")
    return medians


if __name__ == "__main__":
    main()
