"""Peak memory of the MLP training step of `benchmarks.mlp_train` (784-256-256-10, SGD):
the compiled function's temporaries against its buffer plan's lower bound and against
running the same step eagerly; and of the small ResNet's staged training step
(`benchmarks.resnet`) against its lower bound.

    python -m benchmarks.memory [BATCH ...]        (default 64 512; the ResNet: 1 8 32)

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

The convolutions' lowered code also holds scratch of its own, outside the plan
(`codegen.lowered.conv.im2col`: at most `SCRATCH_BYTES` of windows per task, one task per core,
and a pixel's channels of zeros per task): the ResNet's figures add that bound to the runtime peak.
"""

from __future__ import annotations

import os
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

import stageflow as sf
from benchmarks.mlp_train import init_params, make_data, make_train_step
from benchmarks.resnet import built_model, make_batch
from examples.resnet import train_step
from stageflow.codegen.lowered.conv.im2col import SCRATCH_BYTES

RESNET_BATCHES = [1, 8, 32]
ZEROS_BYTES = 64 * 4  # the direct loops' zeros per task: a pixel of the widest input


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


def plan_figures(concrete: Any, call: Callable[[], object],
                 extra: int = 0) -> dict[str, float]:
    """The plan's bytes of temporaries, their lower bound and the peak measured over one
    `call()` of the compiled function (plus `extra` bytes held outside the plan)."""
    concrete.program.track_memory()
    call()
    stats = concrete.stats()
    concrete.program.track_memory(False)
    runtime = stats["measured_peak_temporary_bytes"] + extra
    lower = stats["lower_bound_bytes"]
    return {"plan": stats["peak_temporary_bytes"], "lower_bound": lower, "runtime": runtime,
            "ratio": runtime / lower}


def measure(batch: int) -> dict[str, float]:
    """The figures of one batch size."""
    x, y = (sf.constant(a) for a in make_data(batch))
    staged = make_train_step([sf.Variable(p) for p in init_params()], staged=True)
    eager = make_train_step([sf.Variable(p) for p in init_params()], staged=False)
    concrete = staged.get_concrete_function(x, y)
    compiled = traced_peak(lambda: staged(x, y))
    eager_peak = traced_peak(lambda: eager(x, y))
    return {**plan_figures(concrete, lambda: staged(x, y)), "compiled": compiled,
            "eager": eager_peak}


def measure_resnet(batch: int) -> dict[str, float]:
    """The staged small-ResNet step's plan, lower bound and measured peak of temporaries,
    the last with the convolutions' scratch bound added."""
    model = built_model()
    model.call = sf.function(model.call)
    step = sf.function(train_step)
    optimizer = sf.optimizers.SGD(0.01)
    x, y = (sf.constant(a) for a in make_batch(batch))
    concrete = step.get_concrete_function(model, optimizer, x, y)
    step(model, optimizer, x, y)
    scratch = len(os.sched_getaffinity(0)) * (SCRATCH_BYTES + ZEROS_BYTES)
    return {**plan_figures(concrete, lambda: step(model, optimizer, x, y), scratch),
            "scratch": scratch}


_HEADER = (f"  {'batch':>5}  {'plan':>8}  {'lower':>8}  {'plan/lower':>10}  {'runtime':>8}  "
           f"{'runtime/lower':>13}")


def _row(batch: int, r: dict[str, float]) -> str:
    """The columns both tables print, in KiB and ratios."""
    return (f"  {batch:5d}  {r['plan'] / 1024:8.1f}  {r['lower_bound'] / 1024:8.1f}  "
            f"{r['plan'] / r['lower_bound']:10.2f}  {r['runtime'] / 1024:8.1f}  "
            f"{r['ratio']:13.2f}")


def main(batches: list[int]) -> dict[int, dict[str, float]]:
    results = {}
    print("MLP 784-256-256-10 SGD step: peak temporary bytes (KiB)")
    print(f"{_HEADER}  {'compiled':>9}  {'eager':>9}  (last two: tracemalloc)")
    for batch in batches:
        r = results[batch] = measure(batch)
        print(f"{_row(batch, r)}  {r['compiled'] / 1024:9.1f}  {r['eager'] / 1024:9.1f}   "
              "(goal: runtime/lower <= 1.25, compiled < eager)")
    return results


def main_resnet(batches: list[int]) -> dict[int, dict[str, float]]:
    results = {}
    print("small ResNet staged training step: peak temporary bytes (KiB)")
    print(f"{_HEADER}  (runtime: measured + conv scratch bound)")
    for batch in batches:
        r = results[batch] = measure_resnet(batch)
        print(f"{_row(batch, r)}   (goal: runtime/lower <= 1.25)")
    return results


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [64, 512])
    main_resnet(RESNET_BATCHES)
