"""Memory over long runs: where nothing new is kept the process must not grow, and where
caches are bounded (the trace cache's 64 functions, the engines holding their machine
code) it must grow by no more than they hold.

Each scenario repeats one unit of work (a call, a retrace, a function created, called and
deleted, ...) in a fresh Python process with a fresh compilation-cache directory (so that
every new module is compiled, the costly path), and reads the process's resident set
after its warm-up, halfway through the rest and at the end, each reading after a garbage collection
and ``malloc_trim`` (memory freed but kept by the allocator is not counted). A warm-up
fills what is bounded (allocator arenas, the trace cache, the engines of the last
generations); the growth per unit is measured after it, and must stay within the
scenario's bound::

    python -m stageflow.testing.memory [--count N] [--seed S] [--scenarios a,b]

`--count` 1000 runs 10^5 cache-hit calls, 1,000 retraces and 1,000 functions after their
warm-ups; the test
suite runs a slice (``tests/testing/test_memory.py``). The seed sets the constants the
staged functions bake in, so that no campaign finds another's modules.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import stageflow as sf
from stageflow.models import backward_runner
from stageflow.runtime import eager_kernels
from stageflow.testing.campaign import add_seed, seed_of

Step = Callable[[int], None]


@dataclass(frozen=True)
class Scenario:
    """`warmup` units of `unit`, then `units_per_count` per ``--count``; `make(seed)`
    returns the step doing unit i; `bound`: the bytes per unit the process may grow after
    the warm-up."""

    name: str
    unit: str
    warmup: int
    units_per_count: float
    bound: float
    make: Callable[[int], Step]


def _values(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _offset(seed: int) -> float:
    """A constant of this campaign's own, in (0, 1): its modules are new to the cache."""
    return random.Random(seed).random()


def _calls(seed: int) -> Step:
    staged = sf.function(lambda x: sf.tanh(x * 2.0 + _offset(seed)))
    x = sf.constant(_values(seed, (8, 8)))

    def step(i: int) -> None:
        staged(x)

    return step


def _retraces(seed: int) -> Step:
    offset = _offset(seed)

    @sf.function
    def f(x: sf.Tensor, k: int) -> sf.Tensor:
        return sf.tanh(x * (float(k) + offset) + 1.0)

    x = sf.constant(_values(seed, (4, 4)))

    def step(i: int) -> None:
        f(x, i)

    return step


def _functions(seed: int) -> Step:
    x = sf.constant(_values(seed, (4, 4)))
    offset = _offset(seed)

    def step(i: int) -> None:
        scale = float(i) + offset

        @sf.function
        def g(x: sf.Tensor) -> sf.Tensor:
            return sf.reduce_sum(sf.exp(-x * scale), axis=1)

        g(x)

    return step


def _eager(seed: int) -> Step:
    x = sf.constant(_values(seed, (8, 8)))

    def step(i: int) -> None:
        sf.reduce_sum(sf.tanh(sf.matmul(x, x) + 1.0))

    return step


def _tapes(seed: int) -> Step:
    x = sf.constant(_values(seed, (8, 4)))
    w = sf.Variable(_values(seed + 1, (4, 2)))

    def step(i: int) -> None:
        with sf.GradientTape() as tape:
            loss = sf.reduce_sum(sf.tanh(sf.matmul(x, w)))
        w.assign_sub(0.001 * tape.gradient(loss, w))

    return step


def _train_steps(seed: int) -> Step:
    x = sf.constant(_values(seed, (8, 4)))
    w = sf.Variable(_values(seed + 1, (4, 2)))

    @sf.function
    def train(x: sf.Tensor) -> sf.Tensor:
        with sf.GradientTape() as tape:
            loss = sf.reduce_sum(sf.tanh(sf.matmul(x, w)))
        w.assign_sub(0.001 * tape.gradient(loss, w))
        return loss

    def step(i: int) -> None:
        train(x)

    return step


def _saved_loads(seed: int) -> Step:
    x = sf.constant(_values(seed, (4, 4)))
    f = sf.function(lambda x: sf.tanh(x * _offset(seed)) + 1.0)
    f(x)
    directory = tempfile.mkdtemp(prefix="stageflow-memory-")
    sf.saved.save(f, directory)

    def step(i: int) -> None:
        sf.saved.load(directory)(x)

    return step


# Bounds: nothing kept per call, tape or eager op (a few bytes of allocator noise); per
# compile what LLVM leaks, ~4 KB per module optimised (llvmlite's pass instrumentation
# callbacks, never freed): two modules per retrace, three per function here. Warm-ups:
# the trace cache's 64 functions and the engines of the last generations filled.
SCENARIOS = {s.name: s for s in [
    Scenario("calls", "cache-hit call", 1000, 100, 20, _calls),
    Scenario("retraces", "retrace", 200, 1, 16 << 10, _retraces),
    Scenario("functions", "function made and dropped", 150, 1, 20 << 10, _functions),
    Scenario("eager", "3 eager ops", 1000, 100, 20, _eager),
    Scenario("tapes", "eager gradient step", 200, 10, 100, _tapes),
    Scenario("train_steps", "staged gradient step", 200, 10, 50, _train_steps),
    Scenario("saved_loads", "saved function loaded and called", 10, 0.2, 16 << 10,
             _saved_loads),
]}


def resident_bytes() -> int:
    """This process's resident set after a collection, freed memory returned to the OS
    (``malloc_trim``, where the C library has it)."""
    gc.collect()
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    if hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run_scenario(scenario: Scenario, units: int, seed: int) -> dict[str, list[int]]:
    """Run the warm-up and `units` units in this process; the units done and RSS at each
    checkpoint: after the warm-up, halfway, at the end."""
    warnings.simplefilter("ignore", sf.RetracingWarning)
    step = scenario.make(seed)
    start = scenario.warmup
    marks = sorted({start, start + units // 2, start + units})
    units += start
    rss: list[int] = []
    for i in range(units):
        step(i)
        if i + 1 == start:  # the compiles the warm-up started in the background are in it
            backward_runner.settle()
            eager_kernels.settle()
        if i + 1 in marks:
            rss.append(resident_bytes())
    return {"units": marks, "rss": rss}


@dataclass(frozen=True)
class Result:
    """A scenario's checkpoints and its growth per unit after the first one."""

    scenario: Scenario
    units: list[int]
    rss: list[int]
    seconds: float

    @property
    def growth(self) -> float:
        done = self.units[-1] - self.units[0]
        return (self.rss[-1] - self.rss[0]) / done if done else 0.0

    @property
    def passed(self) -> bool:
        return self.growth <= self.scenario.bound


def run_campaign(count: int, seed: int, names: list[str],
                 progress: Callable[[Result], None] | None = None) -> list[Result]:
    """Each scenario of `names` in its own process, `count` scaled by its units."""
    results = []
    with tempfile.TemporaryDirectory(prefix="stageflow-memory-cache-") as cache:
        environment = {**os.environ, "STAGEFLOW_CACHE_DIR": cache}
        for name in names:
            scenario = SCENARIOS[name]
            units = max(2, round(count * scenario.units_per_count))
            start = time.perf_counter()
            child = subprocess.run(
                [sys.executable, "-m", "stageflow.testing.memory", "--child", name,
                 "--count", str(units), "--seed", str(seed)],
                env=environment, capture_output=True, text=True, check=False)
            if child.returncode != 0:
                raise RuntimeError(f"memory scenario {name} failed:\n{child.stderr}")
            measured = json.loads(child.stdout.strip().splitlines()[-1])
            result = Result(scenario, measured["units"], measured["rss"],
                            time.perf_counter() - start)
            results.append(result)
            if progress is not None:
                progress(result)
    return results


def table(results: list[Result]) -> list[str]:
    """The summary: RSS at the checkpoints, growth per unit against the bound."""
    lines = [f"  {'scenario':12} {'units':>7}  {'RSS MB: warm, half, end':>23}  "
             f"{'growth/unit':>12} {'bound':>10} {'result':>6} {'s':>5}  unit"]
    for r in results:
        rss = ", ".join(f"{b / 2**20:.1f}" for b in r.rss)
        lines.append(f"  {r.scenario.name:12} {r.units[-1]:7d}  {rss:>23}  "
                     f"{_bytes(r.growth):>12} {_bytes(r.scenario.bound):>10} "
                     f"{'pass' if r.passed else 'FAIL':>6} {r.seconds:5.0f}  {r.scenario.unit}")
    return lines


def _bytes(value: float) -> str:
    return f"{value / 1024:.2f} KB" if abs(value) >= 1024 else f"{value:.0f} B"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stageflow.testing.memory",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000)
    add_seed(parser)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS),
                        help=f"comma-separated, of: {', '.join(SCENARIOS)}")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # one scenario, in this process
    args = parser.parse_args(argv)
    seed = seed_of(args)
    if args.child is not None:
        print(json.dumps(run_scenario(SCENARIOS[args.child], args.count, seed)))
        return 0
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenarios {unknown} (have: {', '.join(SCENARIOS)})")
    start = time.perf_counter()

    def progress(result: Result) -> None:
        print(f"  {result.scenario.name}: {result.seconds:.0f} s", file=sys.stderr, flush=True)

    results = run_campaign(args.count, seed, names, progress)
    print(f"memory over long runs, count {args.count}, seed {seed}, "
          f"{time.perf_counter() - start:.0f} s")
    print("\n".join(table(results)))
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
