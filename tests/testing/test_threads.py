"""The threads campaign (`stageflow.testing.threads`): a slice of it loses no update and
never hangs, and its classifier does see a lost update, an error and a deadlock."""

from __future__ import annotations

import random
import threading

import pytest

import stageflow as sf
from stageflow.testing.threads import KINDS, Scenario, Work, main, run_campaign


@pytest.mark.exclusive  # threads racing on the cores, unslowed by the other process's tests
def test_a_slice_of_the_campaign_is_exact_and_the_command_prints_its_seed_and_table(capsys):
    """One scenario of every kind, through the campaign's command."""
    status = main(["--count", str(len(KINDS)), "--seed", "2026"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("threads against shared state, seed 2026,")
    assert "lost update" in lines[1] and "deadlock" in lines[1]
    rows = {line[2:22].strip(): line[22:].split() for line in lines[2:2 + len(KINDS)]}
    assert list(rows) == list(KINDS), out
    for kind, (scenarios, exact, *_) in rows.items():
        assert scenarios == exact == "1", (kind, out)
    assert status == 0, out


def racy(s: Scenario, rng: random.Random) -> Work:
    """A read-modify-write in Python with a pause between the read and the write: loses
    updates whenever two threads interleave."""
    v = sf.Variable(0.0)
    pause = threading.Event()

    def work(_: int) -> None:
        for _ in range(s.calls):
            seen = v.numpy()
            pause.wait(0.001)
            v.assign(seen + 1.0)

    return work, lambda: None if float(v.numpy()) == s.threads * s.calls else "lost"


def raises(s: Scenario, rng: random.Random) -> Work:
    return lambda _: sf.reshape(sf.ones((3,)), (2, 2)), lambda: None


def hangs(s: Scenario, rng: random.Random) -> Work:
    never = threading.Event()
    return lambda _: never.wait(), lambda: None


def test_the_classifier_sees_lost_updates_errors_and_deadlocks():
    """(Each outcome is certain: the racy threads pause between a read and its write, the
    hanging ones never return.)"""
    builders = {"assign_add": racy, "assign": raises, "sgd": hangs}
    tallies = run_campaign(3, 5, ["assign_add", "assign", "sgd"], timeout=2.0,
                           builders=builders)
    assert tallies["assign_add"].outcomes["lost update"] == 1
    assert tallies["assign"].outcomes["error"] == 1
    assert "ValueError" in tallies["assign"].first[0]
    assert tallies["sgd"].outcomes["deadlock"] == 1
