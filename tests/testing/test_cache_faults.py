"""The compilation-cache campaign (`stageflow.testing.cache_faults`): after every kind of
damage a fresh process still compiles and computes right, and the classifier does see a
crash, a hang, an error and a wrong result."""

from __future__ import annotations

import os
import random

import pytest

from stageflow.testing.cache_faults import FAULTS, Cache, main, run_campaign

# Hangs are told by timeouts, which other processes' tests must not eat into.
pytestmark = pytest.mark.exclusive


def test_every_fault_is_recovered_from():
    tallies = run_campaign(len(FAULTS), 2026, timeout=120.0)
    for kind, tally in tallies.items():
        assert tally.rounds >= 1, kind
        assert tally.outcomes["recovered"] == tally.rounds, (kind, tally.first)


def startup(code: str):
    """A fault that makes the child run `code` first (a `sitecustomize` on its path)."""
    def fault(cache: Cache, rng: random.Random) -> dict[str, str]:
        folder = os.path.join(os.path.dirname(cache.root), "site")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "sitecustomize.py"), "w", encoding="utf-8") as file:
            file.write(code)
        return {"PYTHONPATH": folder}
    return fault


def test_the_classifier_sees_crashes_hangs_errors_and_wrong_results():
    faults = {
        "truncated": startup("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"),
        "fifo": startup("import time\ntime.sleep(600)\n"),
        "directory": startup("raise SystemExit('refused')\n"),
        "swap two entries": startup("import numpy\nnumpy.allclose = lambda *a, **k: False\n"),
    }
    tallies = run_campaign(4, 1, list(faults), timeout=8.0, faults=faults)
    assert tallies["truncated"].outcomes["crash"] == 1
    assert "SIGSEGV" in tallies["truncated"].first[0]
    assert tallies["fifo"].outcomes["hang"] == 1
    assert tallies["directory"].outcomes["error"] == 1
    assert tallies["swap two entries"].outcomes["wrong result"] == 1


def test_the_command_prints_its_seed_and_table(capsys):
    assert main(["--count", "1", "--seed", "7", "--faults", "fifo"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("compilation cache faults, seed 7,")
    assert "recovered" in out and "hang" in out
