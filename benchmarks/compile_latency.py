"""Compile latency: the first call of a freshly decorated MLP training step, in a fresh
process (the anchors' workload: 784-256-256-10, batch 64, SGD, gradients from a tape),
with a cold and with a warm on-disk compilation cache.

    python -m benchmarks.compile_latency

Each measurement runs in a new Python process that imports stageflow, builds the model and
times the first call of the `sf.function` training step (trace, passes, LLVM, run), then
the second call. Cold: each process gets an empty cache directory (``STAGEFLOW_CACHE_DIR``),
so it compiles every kernel. Warm: the processes share a directory a previous process
filled, so LLVM's optimisation and code generation are replaced by loading object code.
The median of 5 processes is printed with the time per stage from `cf.stats()`, and beside
it the same first call staged by each installed incumbent (`incumbents.first_call_ms`:
jax.jit, tf.function, torch.compile), measured in the same run.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

from benchmarks import incumbents

CHILD = r"""
import json, time
t0 = time.perf_counter()
import stageflow as sf
from stageflow.codegen.targets import cache
from benchmarks.mlp_train import init_params, make_data, make_train_step
t1 = time.perf_counter()
x, y = make_data(64)
step = make_train_step([sf.Variable(p) for p in init_params()], staged=True)
tx, ty = sf.constant(x), sf.constant(y)
t2 = time.perf_counter()
step(tx, ty)
t3 = time.perf_counter()
step(tx, ty)
t4 = time.perf_counter()
stats = step.get_concrete_function(tx, ty).stats()
print(json.dumps({"import": t1 - t0, "first": t3 - t2, "second": t4 - t3,
                  "stages": stats["compile_seconds"], "kernels": stats["kernels"],
                  "hits": cache.stats.hits, "misses": cache.stats.misses}))
"""

RUNS = 5


def measure(cache_dir: str) -> dict:
    """One fresh process's first and second call, compiling with `cache_dir` as its cache."""
    env = {**os.environ, "STAGEFLOW_CACHE_DIR": cache_dir, "STAGEFLOW_CACHE": "1"}
    result = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                            check=True, env=env)
    return json.loads(result.stdout.strip().splitlines()[-1])


def _report(label: str, runs: list[dict]) -> float:
    first = statistics.median(r["first"] for r in runs)
    print(f"  {label}: first call {first * 1e3:8.1f} ms   ({runs[0]['kernels']} kernels, "
          f"{runs[0]['hits']} cache hits, {runs[0]['misses']} misses); compile time went to:")
    for stage, seconds in sorted(runs[0]["stages"].items(), key=lambda kv: -kv[1])[:6]:
        print(f"    {stage:16s} {seconds * 1e3:8.1f} ms")
    return first


def main() -> dict[str, float]:
    cold_runs = []
    others: dict[str, list[float]] = {name: [] for name in incumbents.installed()}
    for _ in range(RUNS):  # each round: a cold stageflow process, then each incumbent's
        with tempfile.TemporaryDirectory() as empty:
            cold_runs.append(measure(empty))
        for name, times in others.items():
            times.append(incumbents.first_call_ms(name))
    with tempfile.TemporaryDirectory() as shared:
        measure(shared)  # fills the cache
        warm_runs = [measure(shared) for _ in range(RUNS)]
    second = statistics.median(r["second"] for r in cold_runs)
    imported = statistics.median(r["import"] for r in cold_runs)
    print(f"first call of a fresh MLP training step (batch 64), median of {RUNS} fresh "
          "processes; imports and inputs before the clock, as the anchors time it")
    cold = _report("cold cache", cold_runs)
    warm = _report("warm cache", warm_runs)
    print(f"  second call {second * 1e3:7.2f} ms   import stageflow {imported * 1e3:.0f} ms")
    medians = {name: statistics.median(times) for name, times in others.items()}
    ours = ", ".join(f"{r['first'] * 1e3:.0f}" for r in cold_runs)
    for framework, ms in medians.items():
        theirs = ", ".join(f"{t:.0f}" for t in others[framework])
        print(f"  {framework:10s} first call {ms:8.1f} ms   stageflow cold / {framework}: "
              f"{cold * 1e3 / ms:.2f}x   (round by round: {framework} {theirs}; "
              f"stageflow {ours})")
    return {"first_ms": cold * 1e3, "cold_ms": cold * 1e3, "warm_ms": warm * 1e3,
            "second_ms": second * 1e3, "import_ms": imported * 1e3,
            **{f"{framework}_first_ms": ms for framework, ms in medians.items()}}


if __name__ == "__main__":
    main()
