"""The threads campaign (`stageflow.testing.threads`): a slice of it loses no update and
never hangs, and its classifier does see a lost update, an error and a deadlock."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest

import stageflow as sf
from stageflow.testing.threads import KINDS, Scenario, Work, main, run_campaign

# Deadlocks are told by timeouts, which other processes' tests must not eat into.
pytestmark = pytest.mark.exclusive


def test_a_slice_of_the_campaign_is_exact():
    tallies = run_campaign(len(KINDS) * 2, 2026, timeout=60.0)
    for kind, tally in tallies.items():
        assert tally.scenarios == 2, kind
        assert tally.outcomes["exact"] == 2, (kind, tally.first)


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
    builders = {"assign_add": racy, "assign": raises, "sgd": hangs}
    tallies = run_campaign(3, 5, ["assign_add", "assign", "sgd"], timeout=2.0,
                           builders=builders)
    assert tallies["assign_add"].outcomes["lost update"] == 1
    assert tallies["assign"].outcomes["error"] == 1
    assert "ValueError" in tallies["assign"].first[0]
    assert tallies["sgd"].outcomes["deadlock"] == 1


def test_the_command_prints_its_seed_and_table(capsys):
    assert main(["--count", "2", "--seed", "7", "--kinds", "assign_add,tapes"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("threads against shared state, seed 7,")
    assert "lost update" in out and "deadlock" in out
    assert np.array_equal([line.split()[1] for line in out.splitlines()[2:4]], ["1", "1"])
