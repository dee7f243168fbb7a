"""The bad-inputs campaign (`stageflow.testing.bad_inputs`): a slice of it finds no crash,
no wrong result and no unclear error, and its judge and its child processes do detect
those, so that the slice cannot pass by seeing nothing."""

from __future__ import annotations

import os
import time

import pytest

from stageflow.testing.bad_inputs import FAMILIES, OUTCOMES, main, unclear_because
from stageflow.testing.campaign import read_counts
from stageflow.testing.isolated import Died, Hung, run_isolated


def test_a_slice_of_the_campaign_finds_no_defect_and_its_summary_names_the_seed(capsys):
    """Through the campaign's command: the first 200 cases of seed 2026 draw every family,
    target and way."""
    status = main(["--count", "200", "--seed", "2026"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("bad inputs to staged functions, seed 2026, 200 calls")
    assert lines[1].split() == ["family", "ok", "clear", "unclear", "wrong", "crash", "hang"]
    rows = read_counts(lines[1:], len(OUTCOMES))
    total = rows.pop("total")
    assert list(rows) == FAMILIES, out
    assert sum(total) == 200 and total[0] > 0 and total[1] > 0
    assert total[2:] == [0] * (len(OUTCOMES) - 2), out
    assert status == 0, out


def _abort_on_two(item: int) -> int:
    if item == 2:
        os.abort()
    return item


def _hang_on_one(item: int) -> int:
    if item == 1:
        time.sleep(60)
    return item


def test_a_child_that_aborts_is_counted_as_a_crash_and_the_rest_still_run():
    results = run_isolated(_abort_on_two, [0, 1, 2, 3], batch=4)
    assert results[:2] == [0, 1] and results[3] == 3
    assert isinstance(results[2], Died) and results[2].how == "signal 6" and results[2].alone


@pytest.mark.exclusive  # a child slower than the timeout would count as hung
def test_a_child_that_gives_no_result_in_time_is_counted_as_a_hang():
    results = run_isolated(_hang_on_one, [0, 1, 2], timeout=3)
    assert results[0] == 0 and isinstance(results[1], Hung) and results[2] == 2


def test_internal_exceptions_and_vague_messages_are_unclear():
    parameters = ["features", "weights"]
    assert unclear_because(KeyError("features"), "project", parameters, None) == "raw KeyError"
    assert unclear_because(AttributeError("x"), "project", parameters, None) is not None
    assert unclear_because(ValueError("project: internal error"), "project", parameters,
                           None) == "says internal error"
    assert unclear_because(TypeError("too many positional arguments"), "project", parameters,
                           None) is not None
    assert unclear_because(TypeError("cannot make a tensor of dtype uint8"), "project",
                           parameters, None) is not None
    assert unclear_because(TypeError("project: argument 'weights': cannot make a tensor of "
                                     "dtype uint8"), "project", parameters, None) is None
