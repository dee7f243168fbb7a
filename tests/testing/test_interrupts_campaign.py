"""The Ctrl-C campaign (`stageflow.testing.interrupts`): a slice of it is clean, and its
classifier does see a hang, a crash, a changed state and a lost signal, so that the slice
cannot pass by seeing nothing."""

from __future__ import annotations

import signal

import numpy as np
import pytest

from stageflow.runtime import executable
from stageflow.testing.campaign import read_counts
from stageflow.testing.interrupts import (
    KINDS,
    OUTCOMES,
    ROWS,
    Case,
    Interrupted,
    judge,
    main,
    run_campaign,
    run_case,
)


@pytest.mark.exclusive  # child processes timed against signals
def test_a_slice_of_the_campaign_is_clean_and_the_command_prints_its_seed_and_table(capsys):
    """Through the campaign's command: the first cases are every kind's endless loop."""
    status = main(["--count", str(len(KINDS)), "--seed", "2026"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith(f"Ctrl-C against compiled loops, seed 2026, {len(KINDS)} cases")
    assert lines[1].split()[:2] == ["kind,", "loop"], out
    rows = read_counts(lines[1:], len(OUTCOMES))
    assert rows.pop("total") == [len(KINDS)] + [0] * (len(OUTCOMES) - 1), out
    assert list(rows) == [row for row in ROWS if row.endswith("endless")], out
    assert status == 0, out


def _sabotaged(item: tuple[int, int]) -> tuple[str, str]:
    """The campaign's case, in a child made to fail as a defect would: (endless loops all)
    SIGINT ignored, so the loop never stops; SIGINT's default action, so the child dies of
    it; the step plan's rollback undone, so the interrupted call leaves what it assigned."""
    _, index = item
    if index == 0:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    elif index == 1:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    else:
        executable.run_or_roll_back = lambda run, values, variables: run(values)
    return run_case(Case.draw(*item))


@pytest.mark.exclusive  # a child slower than the timeout would count as hung
def test_the_classifier_sees_a_hang_a_crash_and_a_changed_state():
    tally = run_campaign(3, 2026, timeout=8.0, worker=_sabotaged)
    assert [Case.draw(2026, i).row for i in range(3)] == ["program, endless",
                                                          "callback, endless", "steps, endless"]
    assert tally.counts["program, endless"]["hang"] == 1, tally.examples
    assert tally.counts["callback, endless"]["crash"] == 1, tally.examples
    assert "signal 2" in tally.examples[1]
    assert tally.counts["steps, endless"]["state changed"] == 1, tally.examples


def test_the_judge_sees_a_lost_signal_and_wrong_results():
    before = [np.zeros(2), np.int64(-1)]
    after = [np.ones(2), np.int64(5)]
    result = np.arange(2.0)
    reference = [result, *after]
    finished = Interrupted(returned=True, raised=False, sent=True, result=result)
    assert judge(finished, after, before, reference)[0] == "lost"
    assert judge(Interrupted(True, False, False, result), after, before, reference)[0] == \
        "finished"
    assert judge(Interrupted(True, False, False, result + 1), after, before, reference)[0] == \
        "wrong result"
    assert judge(Interrupted(False, True, True, None), before, before, None)[0] == \
        "interrupted"
    assert judge(Interrupted(True, True, True, result), after, before, reference)[0] == \
        "finished"  # the signal was handled just after the call committed
    assert judge(Interrupted(False, True, True, None), after, before, None)[0] == \
        "state changed"
