"""ONNX's own conformance suite run on stageflow's backend, whole: every node, simple,
pytorch-converted, pytorch-operator and real (light) model case the installed `onnx` ships,
each imported, compiled and run, its outputs compared with the case's references at the
case's tolerances (ONNX's `Runner.assert_similar_outputs`).

    python -m stageflow.testing.onnx_suite [-k REGEX] [--kind node] [--verbose]

prints a row per kind (passed, failed, excluded) and, with --verbose or for failures, the
test and its first error line. The exclusions, each with its reason, are
`stageflow/onnx/exclusions.txt`.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from onnx.backend.test.loader import load_model_tests
from onnx.backend.test.runner import Runner

from stageflow.onnx.backend import StageflowBackend
from stageflow.testing.campaign import print_counts, progress

KINDS = ("node", "simple", "pytorch-converted", "pytorch-operator", "real")
OUTCOMES = ("passed", "failed", "excluded")


@dataclass(frozen=True)
class Outcome:
    kind: str
    name: str
    outcome: str
    detail: str = ""


def cases(kinds: Iterable[str], pattern: str | None) -> list:
    """The suite's cases of `kinds` whose names match `pattern`."""
    with warnings.catch_warnings():  # the case generators' own overflow warnings
        warnings.simplefilter("ignore")
        found = [case for kind in kinds for case in load_model_tests(kind=kind)]
    regex = re.compile(pattern) if pattern else None
    return [case for case in found if regex is None or regex.search(case.name)]


def run_case(case, backend=StageflowBackend, **kwargs) -> Outcome:
    """One case: imported, run on each data set and compared."""
    try:
        rep = backend.prepare(case.model, "CPU", **kwargs)
        for inputs, references in case.data_sets:
            outputs = rep.run([np.asarray(x) for x in inputs])
            Runner.assert_similar_outputs(list(references), list(outputs), case.rtol, case.atol)
    except Exception as error:  # the outcome is the report: any failure is counted
        first = (str(error).strip().splitlines() or [""])[0]
        return Outcome(case.kind, case.name, "failed", f"{type(error).__name__}: {first}"[:300])
    return Outcome(case.kind, case.name, "passed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stageflow.testing.onnx_suite",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", dest="pattern", default=None, help="a regex on test names")
    parser.add_argument("--kind", action="append", choices=KINDS, help="(repeatable)")
    parser.add_argument("--verbose", action="store_true", help="name every case")
    args = parser.parse_args(argv)
    selected = [c for c in cases(args.kind or KINDS, args.pattern) if c.model is not None]
    counts: dict[str, Counter] = defaultdict(Counter)
    report = progress("cases", every=100)
    for done, case in enumerate(selected, 1):
        outcome = run_case(case)
        counts[outcome.kind][outcome.outcome] += 1
        if args.verbose or outcome.outcome == "failed":
            print(f"{outcome.outcome:8} {outcome.name}  {outcome.detail}", file=sys.stderr)
        report(done)
    print_counts("kind", KINDS, counts, OUTCOMES, {}, width=18, column=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
