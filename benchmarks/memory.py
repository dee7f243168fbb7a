"""Peak memory of the MLP training step of `benchmarks.mlp_train` (784-256-256-10, SGD):
the compiled function's temporaries against its buffer plan's lower bound and against
running the same step eagerly.

    python -m benchmarks.memory [BATCH ...]        (default 64 512)

Figures per batch size, all in bytes:

- plan: ``sf.peak_bytes`` of ``plan-buffers``, the buffers of the plan (an arena's size);
- lower bound: the most bytes of temporaries live at any one op of the compiled function;
- runtime: the peak the executable measured (`Executable.track_memory`): after every step,
  the arrays held for temporaries, each memory block once;
- compiled / eager (tracemalloc): everything allocated during one call above what was
  allocated before it, as `tracemalloc` sees it (NumPy reports its array memory to it):
  temporaries, results and new variable values alike, and for eager the tape's saved
  intermediates. The one measure taken the same way for both.

The goal: runtime <= 1.25x the lower bound, and compiled below eager.
"""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Callable

import stageflow as sf
from benchmarks.mlp_train import init_params, make_data, make_train_step


def traced_peak(step: Callable[[], object]) -> int:
    """Peak bytes `tracemalloc` sees allocated during `step()`, above those before it."""
    step()  # warm: caches, compilation
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        step()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def measure(batch: int) -> dict[str, float]:
    """The figures of one batch size."""
    x, y = (sf.constant(a) for a in make_data(batch))
    staged = make_train_step([sf.Variable(p) for p in init_params()], staged=True)
    eager = make_train_step([sf.Variable(p) for p in init_params()], staged=False)
    concrete = staged.get_concrete_function(x, y)
    compiled = traced_peak(lambda: staged(x, y))
    eager_peak = traced_peak(lambda: eager(x, y))
    concrete.program.track_memory()
    staged(x, y)
    stats = concrete.stats()
    concrete.program.track_memory(False)
    runtime, lower = stats["measured_peak_temporary_bytes"], stats["lower_bound_bytes"]
    return {"plan": stats["peak_temporary_bytes"], "lower_bound": lower,
            "runtime": runtime, "ratio": runtime / lower, "compiled": compiled,
            "eager": eager_peak}


def main(batches: list[int]) -> dict[int, dict[str, float]]:
    results = {}
    print("MLP 784-256-256-10 SGD step: peak temporary bytes (KiB)")
    print(f"  {'batch':>5}  {'plan':>8}  {'lower':>8}  {'plan/lower':>10}  {'runtime':>8}  "
          f"{'runtime/lower':>13}  {'compiled':>9}  {'eager':>9}  (last two: tracemalloc)")
    for batch in batches:
        r = results[batch] = measure(batch)
        print(f"  {batch:5d}  {r['plan'] / 1024:8.1f}  {r['lower_bound'] / 1024:8.1f}  "
              f"{r['plan'] / r['lower_bound']:10.2f}  {r['runtime'] / 1024:8.1f}  "
              f"{r['ratio']:13.2f}  {r['compiled'] / 1024:9.1f}  {r['eager'] / 1024:9.1f}   "
              "(goal: runtime/lower <= 1.25, compiled < eager)")
    return results


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [64, 512])
