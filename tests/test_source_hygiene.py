"""The package's docstrings and comments say what and why, not what a run measured.

A figure measured on one machine at one commit (microseconds, GFLOP/s, examples per second,
"2x faster") goes stale as the code and the machines change, and buries the reasoning it
once backed. Figures belong in a benchmark's output or the README's performance section;
the code keeps the decision and its reason ("O2: O1 leaves row reductions unvectorised").
This test reads every module of `stageflow` and fails on a docstring or comment that
carries a time, a rate or a speed-up next to a number.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "stageflow"

_NUMBER = r"(?<![\w.])\d+(?:[.,]\d+)*"
# A time: a number and a unit, "us"/"ms"/"ns" also written against it ("35us"); a bare "s"
# only after a space, so that plurals of digits ("trailing 1s") stay out.
_TIME = rf"{_NUMBER}(?:\s?(?:ns|us|µs|ms)|\s(?:s|seconds?|milliseconds?|microseconds?))\b"
_RATE = rf"{_NUMBER}\s?(?:[GMT]FLOP/?s|[GMT]FLOPS|[KMGT]i?B/s|[a-z]+/s)(?![\w/])"
_SPEEDUP = rf"{_NUMBER}\s?(?:x|%)\s(?:faster|slower|as (?:fast|slow|long)|the time)\b"
MEASUREMENT = re.compile("|".join((_TIME, _RATE, _SPEEDUP)))


def prose(source: str) -> Iterator[tuple[int, str]]:
    """Each comment and docstring of a module as (first line, text): the comments from its
    tokens, and every string that stands alone as a statement (a module's, class's or
    function's docstring, or one documenting an attribute)."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            yield node.lineno, node.value.value


def measurements(source: str) -> list[tuple[int, str]]:
    """Where `source`'s prose carries a measured figure: (line, the figure)."""
    found = []
    for line, text in prose(source):
        for match in MEASUREMENT.finditer(text):
            found.append((line + text.count("\n", 0, match.start()), match.group()))
    return sorted(found)


@pytest.mark.parametrize("text", [
    "took 35 us here", "a step of 3.8 ms", "1.07 against 0.70 s", "2.3-2.9 s cold",
    "ran at 101 GFLOP/s", "1,180 examples/s at batch 8", "1.4 -> 2.9 GB/s",
    "ran 20x slower", "1.25x faster", "15% slower", "12us per call",
])
def test_the_rule_finds_measured_figures(text):
    assert MEASUREMENT.search(text), text


@pytest.mark.parametrize("text", [
    "trailing 1s added", "tensor<4x?xf32>", "a 784x256 update", "2s (1 + s^2/3)",
    "MIN_TASK_MACS = 1 << 18", "one AVX-512 register (64 bytes)", "2^24 elements",
    "the last 12 rows", "the caller's 0x7f mask", "3x3 filters of 16 channels",
])
def test_the_rule_leaves_other_numbers_alone(text):
    assert not MEASUREMENT.search(text), text


def _modules() -> list[tuple[str, Path]]:
    return [(path.relative_to(PACKAGE.parent).as_posix(), path)
            for path in sorted(PACKAGE.rglob("*.py"))]


def test_no_module_carries_measured_figures_in_its_prose():
    offending = [f"{name}:{line}: {figure}" for name, path in _modules()
                 for line, figure in measurements(path.read_text())]
    assert not offending, ("measured figures belong in a benchmark's output or the README's "
                           "performance section:\n" + "\n".join(offending))
