"""The sf.data pipelines campaign (`stageflow.testing.pipelines`): a slice of it finds no
wrong result, unclear error, crash or hang, and its classifier does see a wrong result, a
crash, a hang and an unclear refusal, so that the slice cannot pass by seeing nothing."""

from __future__ import annotations

import os
import time

import pytest

from stageflow.testing.campaign import read_counts
from stageflow.testing.pipelines import (
    CHECKS,
    OUTCOMES,
    Case,
    main,
    refusal_unclear,
    run_campaign,
)

SEED = 2026


@pytest.mark.slow
def test_a_slice_of_the_campaign_finds_no_defect_and_its_summary_names_the_seed(capsys):
    """Through the campaign's command: three pipelines of seed 2026 (parallel maps,
    prefetches, a map that cannot be staged, failing elements), each checked three ways."""
    status = main(["--count", "3", "--seed", str(SEED)])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith(f"sf.data pipelines, seed {SEED}, 3 pipelines, 9 checks")
    assert lines[1].split() == ["check", "same", "refused", "wrong", "unclear", "crash",
                                "hang"]
    rows = read_counts(lines[1:], len(OUTCOMES))
    total = rows.pop("total")
    assert list(rows) == CHECKS, out
    assert rows["prefetched and parallel"][0] == rows["save and restore"][0] == 3, out
    assert rows["restore into another pipeline"][1] == 3, out
    assert total[2:] == [0] * (len(OUTCOMES) - 2), out
    assert status == 0, out
    drawn = [Case.draw(SEED, i) for i in range(3)]
    stages = {stage[0] for case in drawn for stage in case.stages}
    assert {"map", "prefetch"} <= stages and max(p for c in drawn for p in c.parallel) > 1
    assert any(s[0] == "map" and s[1] for c in drawn for s in c.stages)  # unstageable


def _breaks(item: tuple[Case, str]) -> tuple[str, str]:
    """A worker judging the first pipeline's first check wrong, crashing on its second and
    hanging on the second pipeline's last one."""
    case, name = item
    first = case == Case.draw(SEED, 0)
    if first and name == CHECKS[0]:
        return "wrong", "made up"
    if first and name == CHECKS[1]:
        os.abort()
    if not first and name == CHECKS[2]:
        time.sleep(60)
    return ("clear refusal", "") if name == CHECKS[2] else ("same", "")


@pytest.mark.slow
def test_the_campaign_counts_a_wrong_result_a_crash_and_a_hang():
    tally = run_campaign(2, SEED, worker=_breaks, timeout=4)
    assert tally.total("wrong") == 1 and tally.total("crash") == 1
    assert tally.total("hang") == 1
    assert tally.total("same") == 2 and tally.total("clear refusal") == 1
    assert any(text.startswith("crash: save and restore") and "signal 6" in text
               for text in tally.examples)


def test_the_judge_calls_a_refusal_clear_only_when_it_names_what_differs():
    named = ("sf.train.Checkpoint.restore('/ckpt'): it: the saved dataset position does not "
             "fit this dataset's pipeline, it was saved by another one: stage 2 is "
             "`map -> float32[]` in the checkpoint, `map -> int64[]` here")
    assert refusal_unclear(ValueError(named)) is None
    assert refusal_unclear(ValueError(named.replace(
        "stage 2 is `map -> float32[]` in the checkpoint, `map -> int64[]` here",
        "it has 3 stages, this one 2"))) is None
    assert refusal_unclear(StopIteration()) == "a StopIteration, not a ValueError"
    assert refusal_unclear(KeyError("index")) == "a KeyError, not a ValueError"
    assert refusal_unclear(ValueError("the saved dataset position does not fit this "
                                      "dataset's pipeline (KeyError: 'index')")) \
        == "does not name the stage that differs"
    assert refusal_unclear(ValueError("bad")) \
        == "does not say the position does not fit the pipeline"
