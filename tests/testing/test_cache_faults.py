"""The compilation-cache campaign (`stageflow.testing.cache_faults`): after every kind of
damage a fresh process still compiles and computes right, on a read-only cache it also
hits, and the classifier does see a crash, a hang, an error, a wrong result and a miss.

No test here needs the cores to itself: a child of the campaign counts as hung only after
120 s, and the one hang told apart here comes from a child that sleeps, which no load on
the cores can make finish in time."""

from __future__ import annotations

import os
import random
import shutil

import pytest

from stageflow.testing import cache_faults
from stageflow.testing.cache_faults import FAULTS, Cache, main, run_campaign


@pytest.mark.slow
def test_every_fault_is_recovered_from_and_the_command_prints_its_seed_and_table(
        capsys, monkeypatch):
    """One round of each fault, through the campaign's command: the table it prints (after
    its seed) has a row per fault, every child of it recovered. Two concurrent writers
    race as four do (the command's number) at half the children."""
    monkeypatch.setattr(cache_faults, "CONCURRENT", 2)
    status = main(["--count", str(len(FAULTS)), "--seed", "2026"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("compilation cache faults, seed 2026,")
    assert lines[1].split()[:3] == ["fault", "children", "recovered"] and "hang" in lines[1]
    rows = {line[2:26].strip(): line[26:].split() for line in lines[2:2 + len(FAULTS)]}
    assert list(rows) == list(FAULTS), out
    for kind, (children, recovered, *_) in rows.items():
        assert int(children) >= 1 and recovered == children, (kind, out)
    assert status == 0, out


def startup(code: str):
    """A fault that makes the child run `code` first (a `sitecustomize` on its path)."""
    def fault(cache: Cache, rng: random.Random) -> dict[str, str]:
        return {"PYTHONPATH": site(os.path.dirname(cache.root), code)}
    return fault


def site(parent: str, code: str) -> str:
    """A folder beside the cache whose `sitecustomize` runs `code`."""
    folder = os.path.join(parent, "site")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "sitecustomize.py"), "w", encoding="utf-8") as file:
        file.write(code)
    return folder


def test_the_classifier_sees_crashes_errors_and_wrong_results():
    faults = {
        "truncated": startup("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"),
        "directory": startup("raise SystemExit('refused')\n"),
        "swap two entries": startup("import numpy\nnumpy.allclose = lambda *a, **k: False\n"),
    }
    tallies = run_campaign(3, 1, list(faults), faults=faults)
    assert tallies["truncated"].outcomes["crash"] == 1
    assert "SIGSEGV" in tallies["truncated"].first[0]
    assert tallies["directory"].outcomes["error"] == 1
    assert tallies["swap two entries"].outcomes["wrong result"] == 1


def test_a_read_only_cache_hits():
    """Once every entry of a read-only cache was marked corrupt and none hit (the process
    could not write a new key's temporary file, and fell back to a key of its own)."""
    tally = run_campaign(1, 1, ["read-only cache"])["read-only cache"]
    assert tally.outcomes["recovered"] == tally.rounds == 1, tally.first


def test_the_classifier_sees_a_miss_where_every_entry_must_hit():
    """A child that computes right but misses counts as "missed" after a fault of
    `MUST_HIT` (here: the cache emptied under that fault's name)."""
    def emptied(cache: Cache, rng: random.Random) -> dict[str, str]:
        shutil.rmtree(cache.objects)
        return {}

    tally = run_campaign(1, 1, ["read-only cache"],
                         faults={"read-only cache": emptied})["read-only cache"]
    assert tally.outcomes["missed"] == 1, tally.first
    assert tally.first[0].startswith("missed: 0 hits, ")


def test_the_classifier_sees_a_hang_and_ends_it(tmp_path):
    """A child still running at the timeout is a hang, and its process group is killed."""
    cache = Cache(str(tmp_path / "cache"), timeout=2.0)
    folder = site(str(tmp_path), "import time\ntime.sleep(600)\n")
    child = cache.child({"PYTHONPATH": folder})
    outcome, detail = cache.finish(child)
    assert (outcome, detail) == ("hang", "no result after 2.0 s")
    assert child.returncode is not None  # killed and reaped
