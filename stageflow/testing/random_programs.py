"""The random-program campaign: random, well-typed programs (`stageflow.testing.random_ops`,
and with nested branches and loops, `stageflow.testing.control_programs`) run eagerly and
five other ways (nine with other machines'), every result and variable compared with eager's.

The ways: interpreted (``jit=False``), compiled, compiled for unknown input dims, and
compiled ahead of time into a shared library called through ctypes, for known and for
unknown dims (`stageflow.testing.aot_calls`). On request (``--ways``), also ahead of time
for other machines, for known and for unknown dims (`stageflow.testing.target_calls`):
``aarch64`` (a C program under qemu) and ``wasm`` (Node.js). Building a library costs a
link, so the AOT ways run on every K-th program only (``--aot-every K``). A program the AOT
compiler refuses on purpose is counted as *unsupported*, with its reason, not as an error.

The test suite runs a slice (``tests/test_random_programs.py``); a campaign runs many, with
a seed never used before, and prints what disagreed::

    python -m stageflow.testing.random_programs --count 10000 [--seed N] [--control 0.25]
                                                [--aot-every 10] [--ways aarch64,wasm]

Needs the test extra (hypothesis).
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import UnsatisfiedAssumption

import stageflow as sf
from stageflow.testing.aot_calls import Libraries, Unsupported
from stageflow.testing.campaign import add_seed, seed_of
from stageflow.testing.campaign import progress as report_progress
from stageflow.testing.control_programs import control_programs
from stageflow.testing.random_ops import TOLERANCES, Program, eager, programs, staged
from stageflow.testing.target_calls import TargetLibraries


def execute(program: Program, make: Callable[..., Callable], args: list[Any]
            ) -> tuple[list[np.ndarray], list[np.ndarray], Callable]:
    """Results and final variable values of one way of running `program`, from fresh
    variables and generators seeded by the program, and the function that ran it."""
    variables = [sf.Variable(v) for v in program.variables]
    generator = sf.random.Generator.from_seed(program.seed)
    sf.random.set_seed(program.seed)
    function = make(program, variables, generator)
    results = function(*args)
    return [r.numpy() for r in results], [v.numpy() for v in variables], function


def assert_same(program: Program, got: list[np.ndarray], want: list[np.ndarray],
                exact: list[bool]) -> None:
    for g, w, e in zip(got, want, exact, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if w.dtype.kind == "f" and not e:
            tol = TOLERANCES[w.dtype]
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)


def compare(program: Program, make: Callable[..., Callable], reference: Any,
            args: list[Any]) -> Callable:
    results, states, function = execute(program, make, args)
    outputs = [program.pool[i].exact for i in program.outputs]
    assert_same(program, results, reference[0], outputs)
    assert_same(program, states, reference[1], program.var_exact)
    return function


# The ways run unless others are asked for: those needing nothing but this machine.
HOST_WAYS = ("interpreted", "compiled", "unknown dims", "aot", "aot unknown dims")
# The ways through libraries for other machines: their target, and whether unknown dims.
TARGET_WAYS = {"aarch64": ("aarch64-linux-gnu", False),
               "aarch64 unknown dims": ("aarch64-linux-gnu", True),
               "wasm": ("wasm32", False), "wasm unknown dims": ("wasm32", True)}
WAYS = (*HOST_WAYS, *TARGET_WAYS)
AOT_WAYS = ("aot", "aot unknown dims", *TARGET_WAYS)


def way(name: str, program: Program, libraries: Libraries,
        targets: TargetLibraries) -> Callable[..., Callable]:
    """How `program` is run the way called `name` (one of `WAYS`)."""
    if name == "interpreted":
        return staged(jit=False)
    if name == "compiled":
        return staged()
    if name == "unknown dims":
        return staged(input_signature=program.signature())
    if name in TARGET_WAYS:
        return targets.way(*TARGET_WAYS[name])
    return libraries.way(unknown_dims=name == "aot unknown dims")


def reason(refusal: Unsupported) -> str:
    """A refusal's message without what differs from program to program (the library's
    name, the source line), so that refusals of one kind are counted together."""
    text = re.sub(r"@program\d+", "@program", str(refusal))
    return re.sub(r" \(at [^:]*:\d+:.*\)$", "", text)[:200]


@st.composite
def campaign_programs(draw: Any, control: float) -> Program:
    """A straight-line program, or with probability `control` one with region ops."""
    if draw(st.integers(0, 999)) < round(control * 1000):
        return draw(control_programs())
    return draw(programs())


@dataclass
class Tally:
    """What one way of running did over a campaign."""

    programs: int = 0
    mismatches: int = 0
    errors: int = 0
    unsupported: int = 0
    seconds: float = 0.0
    first: list[str] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)


def run_campaign(count: int, campaign_seed: int, ways: list[str], control: float = 0.25,
                 aot_every: int = 10, progress: Callable[[int], None] | None = None
                 ) -> dict[str, Tally]:
    """`count` random programs from `campaign_seed` (a share `control` of them with
    branches and loops), each run eagerly and every way of `ways` (the AOT ways on every
    `aot_every`-th program); per way, how many ran, disagreed with eager, raised, or were
    refused by the AOT compiler on purpose. `progress(n)` is called after each program."""
    tallies = {name: Tally() for name in ways}
    done = [0]

    @seed(campaign_seed)
    @settings(max_examples=count, database=None, deadline=None, derandomize=False,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(campaign_programs(control))
    def one(program: Program) -> None:
        args = [sf.constant(x) for x in program.inputs]
        reference = execute(program, eager, args)
        for name in ways:
            if name in AOT_WAYS and done[0] % aot_every:
                continue
            tally = tallies[name]
            start = time.perf_counter()
            tally.programs += 1
            try:
                compare(program, way(name, program, libraries, targets), reference, args)
            except Unsupported as refusal:
                tally.unsupported += 1
                tally.reasons[reason(refusal)] += 1
            except AssertionError as error:
                tally.mismatches += 1
                if len(tally.first) < 3:
                    tally.first.append(f"{program!r}\n  {str(error)[:400]}")
            except Exception as error:  # noqa: BLE001 - counted and shown, not fatal
                tally.errors += 1
                if len(tally.first) < 3:
                    tally.first.append(f"{program!r}\n  {type(error).__name__}: "
                                       f"{str(error)[:400]}")
            tally.seconds += time.perf_counter() - start
        done[0] += 1
        if progress is not None:
            progress(done[0])

    with tempfile.TemporaryDirectory(prefix="sf-random-programs-") as directory:
        libraries, targets = Libraries(directory), TargetLibraries(directory)
        try:
            one()
        except UnsatisfiedAssumption:
            pass
    return tallies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stageflow.testing.random_programs",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000)
    add_seed(parser)
    parser.add_argument("--ways", default=",".join(HOST_WAYS),
                        help=f"comma-separated, of: {', '.join(WAYS)} (default: all but "
                             "the other machines', which need their cross tools)")
    parser.add_argument("--control", type=float, default=0.25,
                        help="the share of programs with branches and loops (default 0.25)")
    parser.add_argument("--aot-every", type=int, default=10, metavar="K",
                        help="run the AOT ways on every K-th program only: each builds a "
                             "shared library (default 10)")
    args = parser.parse_args(argv)
    campaign_seed = seed_of(args)
    ways = [w.strip() for w in args.ways.split(",") if w.strip()]
    unknown = [w for w in ways if w not in WAYS]
    if unknown:
        parser.error(f"unknown ways {unknown} (have: {', '.join(WAYS)})")
    if not 0 <= args.control <= 1:
        parser.error("--control is a share, between 0 and 1")
    if args.aot_every < 1:
        parser.error("--aot-every is at least 1")
    start = time.perf_counter()

    progress = report_progress("programs", 100)

    tallies = run_campaign(args.count, campaign_seed, ways, args.control, args.aot_every,
                           progress)
    print(f"random programs against eager, seed {campaign_seed}, "
          f"{time.perf_counter() - start:.0f} s ({args.control:.0%} with control flow, AOT "
          f"on every {args.aot_every})")
    print(f"  {'way':20} {'programs':>9} {'mismatches':>11} {'errors':>7} {'unsupported':>12} "
          f"{'seconds':>8}")
    for name, tally in tallies.items():
        print(f"  {name:20} {tally.programs:9d} {tally.mismatches:11d} {tally.errors:7d} "
              f"{tally.unsupported:12d} {tally.seconds:8.1f}")
    for name, tally in tallies.items():
        for reason, times in tally.reasons.most_common():
            print(f"\n{name}: unsupported ({times}): {reason}")
        for text in tally.first:
            print(f"\n{name}: {text}")
    return 0 if all(t.mismatches == t.errors == 0 for t in tallies.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
