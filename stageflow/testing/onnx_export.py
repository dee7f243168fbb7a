"""The export campaign: random programs (`stageflow.testing.random_ops`, with branches and
loops from `stageflow.testing.control_programs`) exported with `sf.onnx.export`, checked
by ONNX's checker (``full_check``), run by ONNX Runtime and compared with stageflow's
eager results, within the campaign's tolerances (exact values bit for bit).

Each program ends in one outcome: *passed*; *refused* (the exporter said why it cannot
write an op: a variable assigned, random draws, an op without a rule); *runtime* (a
valid model ONNX Runtime cannot run, e.g. no kernel for an op and type); *mismatch*; or
*error* (anything else: a bug of the exporter). The reasons of the refusals and runtime
failures are counted, so the summary says which primitives cannot be exported yet and why::

    python -m stageflow.testing.onnx_export --count 500 [--seed N] [--control 0.25]

Needs the test extra (hypothesis) and onnxruntime.
"""

from __future__ import annotations

import argparse
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnxruntime
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.errors import UnsatisfiedAssumption

import stageflow as sf
from stageflow.core.primitive import REGISTRY
from stageflow.onnx import OnnxError
from stageflow.onnx.exporter import refusal
from stageflow.testing.campaign import add_seed, progress, seed_of
from stageflow.testing.random_ops import Program, eager, staged
from stageflow.testing.random_programs import assert_same, campaign_programs, execute

OUTCOMES = ("passed", "refused", "runtime", "mismatch", "error")


@dataclass
class Outcome:
    """How one program fared: one of `OUTCOMES`, and the reason (the first line of the
    message, without what differs from program to program) or what disagreed."""

    kind: str
    reason: str = ""


def session(model: Any) -> onnxruntime.InferenceSession:
    return onnxruntime.InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"])


def _first_line(error: BaseException) -> str:
    """A message's first line with node names and numbers of values left out, so that
    failures of one kind are counted together."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    text = re.sub(r"'[A-Za-z]+_\d+'", "'NODE'", text)
    text = re.sub(r"/onnxruntime_src/\S+ ", "", text)
    return text[:240]


def check_program(program: Program, unknown_dims: bool) -> Outcome:
    """Export `program` (for its inputs' shapes, or with its unknown dims None), run the
    model with ONNX Runtime and compare with eager stageflow, from fresh variables."""
    args = [sf.constant(x) for x in program.inputs]
    want, _, _ = execute(program, eager, args)
    variables = [sf.Variable(v) for v in program.variables]
    generator = sf.random.Generator.from_seed(program.seed)
    function = staged()(program, variables, generator)
    signature = program.signature() if unknown_dims else [
        sf.TensorSpec(x.shape, x.dtype) for x in program.inputs]
    try:
        model = sf.onnx.export(function, signature)
    except OnnxError as error:
        if "cannot export" not in str(error):
            return Outcome("error", _first_line(error))
        return Outcome("refused", _first_line(error).removeprefix("sf.onnx.export: "))
    try:
        runner = session(model)
    except Exception as error:  # noqa: BLE001 - ONNX Runtime's own errors, counted
        return Outcome("runtime", _first_line(error))
    feeds = {i.name: np.asarray(x) for i, x in zip(runner.get_inputs(), program.inputs,
                                                  strict=True)}
    try:
        got = runner.run(None, feeds)
    except Exception as error:  # noqa: BLE001
        return Outcome("runtime", _first_line(error))
    exact = [program.pool[i].exact for i in program.outputs]
    try:
        assert_same(program, [np.asarray(g) for g in got], want, exact)
    except AssertionError as error:
        return Outcome("mismatch", f"{program!r}\n  {str(error).strip()[:400]}")
    return Outcome("passed")


@dataclass
class Tally:
    counts: Counter[str] = field(default_factory=Counter)
    reasons: dict[str, Counter[str]] = field(default_factory=dict)
    first: dict[str, list[str]] = field(default_factory=dict)


def unexported() -> list[tuple[str, str]]:
    """(name, reason) of every registered primitive the exporter refuses, by name."""
    return sorted((p.name, why) for p in REGISTRY.values() if (why := refusal(p)) is not None)


def run_campaign(count: int, campaign_seed: int, control: float = 0.25,
                 report: Any = None) -> Tally:
    """`count` programs from `campaign_seed`, a share `control` with region ops, every
    other one exported with unknown input dims; their outcomes."""
    tally = Tally()
    done = [0]

    @seed(campaign_seed)
    @settings(max_examples=count, database=None, deadline=None, derandomize=False,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(campaign_programs(control))
    def one(program: Program) -> None:
        try:
            outcome = check_program(program, unknown_dims=bool(done[0] % 2))
        except Exception as error:  # noqa: BLE001 - eager itself failed: not the export's
            outcome = Outcome("error", f"{program!r}\n  {type(error).__name__}: "
                                       f"{_first_line(error)}")
        tally.counts[outcome.kind] += 1
        if outcome.kind in ("refused", "runtime"):
            tally.reasons.setdefault(outcome.kind, Counter())[outcome.reason] += 1
        elif outcome.kind != "passed":
            tally.first.setdefault(outcome.kind, [])
            if len(tally.first[outcome.kind]) < 3:
                tally.first[outcome.kind].append(outcome.reason)
        done[0] += 1
        if report is not None:
            report(done[0])

    try:
        one()
    except UnsatisfiedAssumption:
        pass
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stageflow.testing.onnx_export",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=300)
    add_seed(parser)
    parser.add_argument("--control", type=float, default=0.25,
                        help="the share of programs with branches and loops (default 0.25)")
    args = parser.parse_args(argv)
    if not 0 <= args.control <= 1:
        parser.error("--control is a share, between 0 and 1")
    campaign_seed = seed_of(args)
    onnxruntime.set_default_logger_severity(3)  # its warnings about subgraph names
    start = time.perf_counter()
    tally = run_campaign(args.count, campaign_seed, args.control, progress("programs", 50))
    print(f"random programs exported to ONNX and run by ONNX Runtime {onnxruntime.__version__}"
          f", seed {campaign_seed}, {time.perf_counter() - start:.0f} s "
          f"({args.control:.0%} with control flow)")
    print("  " + "".join(f"{kind:>10}" for kind in OUTCOMES))
    print("  " + "".join(f"{tally.counts[kind]:10d}" for kind in OUTCOMES))
    for kind, reasons in tally.reasons.items():
        for reason, times in reasons.most_common():
            print(f"\n{kind} ({times}): {reason}")
    for kind, texts in tally.first.items():
        for text in texts:
            print(f"\n{kind}: {text}")
    print("\nprimitives the exporter refuses:")
    for name, why in unexported():
        print(f"  {name}: {why}")
    return 0 if tally.counts["mismatch"] == tally.counts["error"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
