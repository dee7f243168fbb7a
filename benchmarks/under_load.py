"""Training steps beside other work: how much of its quiet speed each framework keeps while
one and two busy processes share the two cores (a data loader, a second job).

    python -m benchmarks.under_load [--rounds N] [--json PATH]

Workloads: the MLP's SGD step (784-256-256-10, batch 64: `mlp_train`) and the small CIFAR
ResNet's step (batch 8: `resnet`), each staged by stageflow (`sf.function`) and by the
installed incumbents (torch.compile and PyTorch eager, jax.jit), from the same weights
and data. Each condition (quiet, beside one busy process, beside two) times every
contender in alternating rounds and keeps its best round (`timing.interleaved_best`); a
busy process is a Python loop that never sleeps, started before the condition's rounds
and killed after them. The figures are steps/s and, per contender, the share of its quiet
speed it keeps: the issue's goal is a share at least the best incumbent's, and at least
0.3 beside one busy process.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import stageflow as sf
from benchmarks import incumbents, mlp_train, resnet
from benchmarks.timing import interleaved_best, named_runs

CONDITIONS = (0, 1, 2)  # busy processes beside the steps
_SPIN = "while True:\n    pass\n"


@contextmanager
def busy(count: int) -> Iterator[None]:
    """`count` processes spinning on the cores for the duration of the block."""
    spinners = [subprocess.Popen([sys.executable, "-c", _SPIN]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def mlp_steps() -> dict[str, Callable[[int], None]]:
    """The MLP's step: stageflow's (`mlp_train.make_train_step`) and every incumbent's
    (`incumbents._mlp_step`), each a function of a step count."""
    x, y = mlp_train.make_data(64)
    params = [sf.Variable(p) for p in mlp_train.init_params()]
    step = mlp_train.make_train_step(params, staged=True)
    xs, ys = sf.constant(x), sf.constant(y)

    def stageflow(n: int) -> None:
        for _ in range(n):
            loss = step(xs, ys)
        np.asarray(loss)

    runs = {"stageflow": stageflow}
    for backend in incumbents.backends():
        runs[backend.name] = incumbents.mlp_steps(backend, x, y)[0]
    return runs


def resnet_steps() -> dict[str, Callable[[int], None]]:
    """The small ResNet's step at batch 8, staged by each framework (PyTorch also eager)."""
    initial = resnet.built_model()
    steps = {"stageflow": resnet.stageflow_steps(8, initial)["stageflow staged"],
             **resnet.incumbent_steps(8, initial)}
    return {name: resnet.loop(step) for name, step in steps.items()}


WORKLOADS: dict[str, Callable[[], dict[str, Callable[[int], None]]]] = {
    "mlp step": mlp_steps,
    "small ResNet step": resnet_steps,
}


def run_workload(name: str, rounds: int) -> dict[str, Any]:
    runs = WORKLOADS[name]()
    for run in runs.values():  # trace and compile outside the timed rounds
        run(2)
    speeds: dict[int, dict[str, float]] = {}
    for count in CONDITIONS:
        with busy(count):
            best = interleaved_best(runs, rounds=rounds, min_time=0.2)
        speeds[count] = {contender: 1.0 / seconds for contender, seconds in best.items()}
    print(f"{name}: steps/s quiet, beside 1 and 2 busy processes (share of quiet)")
    for contender in runs:
        quiet = speeds[0][contender]
        shares = "  ".join(f"{speeds[c][contender]:9.1f} ({speeds[c][contender] / quiet:.2f})"
                           for c in CONDITIONS[1:])
        print(f"  {contender:16} {quiet:9.1f}  {shares}", flush=True)
    return {"workload": name, "steps_per_s": {str(c): s for c, s in speeds.items()}}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    return named_runs("under_load", __doc__, list(WORKLOADS), run_workload, argv)


if __name__ == "__main__":
    main()
