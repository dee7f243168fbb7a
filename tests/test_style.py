"""The code base stays `ruff` clean (the linter runs as part of the test suite)."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_ruff_clean():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "stageflow", "tests", "benchmarks", "examples",
         "lit_tests"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
