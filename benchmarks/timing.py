"""Timing helpers shared by the benchmarks: medians of repeated, self-calibrating loops.

The machine is noisy, so every figure is a median over rounds and every comparison is a
ratio measured in the same process, interleaving the contenders round by round.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

# How long the cores are left alone before each timed round: longer than the threads of
# the contender before it keep spinning once its round is over.
SETTLE_SECONDS = 0.1


def calibrate(run: Callable[[int], object], min_time: float = 0.05) -> int:
    """The iteration count for which `run(n)` takes at least `min_time` seconds."""
    n = 1
    while True:
        start = time.perf_counter()
        run(n)
        if time.perf_counter() - start >= min_time:
            return n
        n *= 2


def interleaved_samples(
    runs: dict[str, Callable[[int], object]], rounds: int, min_time: float
) -> dict[str, list[float]]:
    """Seconds per iteration of each contender in each of `rounds` alternating rounds, after
    one untimed call each (a staged contender traces and compiles there, which would
    otherwise make the calibration settle on one iteration per round).

    What is alive by then (the setup's objects, and in ``python -m benchmarks`` those the
    earlier benchmarks left) is frozen out of the garbage collector while the rounds run:
    in that long run a full collection of the heap took 0.44 s, a whole round of whichever
    contender's allocations triggered it (`timeit` turns the collector off instead).

    Each round starts after `SETTLE_SECONDS` of sleep and one untimed call: the contender
    before it may leave threads spinning on the cores for a while after its last call
    (onnxruntime's pool does by default, OpenBLAS's after a threaded gemm), which would be
    charged to whichever contender's round came next. onnxruntime's spin for tens of
    milliseconds: with only the untimed call between the rounds, ONNX's light SqueezeNet
    ran its first ten calls after an onnxruntime round at half its speed."""
    for run in runs.values():
        run(1)
    gc.collect()
    gc.freeze()
    try:
        counts = {name: calibrate(run, min_time) for name, run in runs.items()}
        samples: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(rounds):
            for name, run in runs.items():
                time.sleep(SETTLE_SECONDS)
                run(1)
                start = time.perf_counter()
                run(counts[name])
                samples[name].append((time.perf_counter() - start) / counts[name])
    finally:
        gc.unfreeze()
    return samples


def interleaved_medians(
    runs: dict[str, Callable[[int], object]], rounds: int = 15, min_time: float = 0.05
) -> dict[str, float]:
    """Median seconds per iteration of each contender, timed in alternating rounds."""
    samples = interleaved_samples(runs, rounds, min_time)
    return {name: statistics.median(values) for name, values in samples.items()}


def interleaved_best(
    runs: dict[str, Callable[[int], object]], rounds: int = 5, min_time: float = 0.2
) -> dict[str, float]:
    """The fastest round's seconds per iteration of each contender, timed in alternating
    rounds: where other work shares the cores, interference only ever slows a round down,
    so the best round is the least disturbed one."""
    samples = interleaved_samples(runs, rounds, min_time)
    return {name: min(values) for name, values in samples.items()}


def named_runs(prog: str, doc: str, names: list[str], run: Callable[[str, int], dict],
               argv: list[str] | None) -> list[dict]:
    """A benchmark's command line: ``prog [NAME ...] [--rounds N] [--json PATH]``, running
    `run(name, rounds)` for each name asked (all by default); the rows, also written to
    PATH as JSON."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{prog}",
                                     description=doc.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"of: {', '.join(names)}")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in names]
    if unknown:
        parser.error(f"unknown {unknown}; choose from {', '.join(names)}")
    rows = [run(name, args.rounds) for name in args.names or names]
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return rows
