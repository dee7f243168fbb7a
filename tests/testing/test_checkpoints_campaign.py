"""The checkpoints campaign (`stageflow.testing.checkpoints`): a slice of it, a case of each
kind, finds no crash, hang, wrong restore, leftover file or unclear error, and its classifier
does see a crash, a hang and an unclear error, so that the slice cannot pass by seeing
nothing."""

from __future__ import annotations

import pytest
from checkpoint_campaign_workers import dies_hangs_or_is_unclear

from stageflow.models.train.storage import CheckpointError
from stageflow.testing.campaign import read_counts
from stageflow.testing.checkpoints import (
    KINDS,
    OUTCOMES,
    judge_error,
    main,
    run_campaign,
    unclear_because,
)


@pytest.mark.slow
@pytest.mark.exclusive  # racing savers and readers, unslowed by the other process's tests
def test_a_slice_of_the_campaign_finds_no_defect_and_its_summary_names_the_seed(capsys):
    """Through the campaign's command: one case of each kind (the kinds come in turn)."""
    status = main(["--count", str(len(KINDS)), "--seed", "2026"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith(f"checkpoints under damage and races, seed 2026, {len(KINDS)} "
                               f"cases")
    assert lines[1].split() == ["kind", "correct", "clear", "unclear", "wrong", "leftover",
                                "crash", "hang"]
    rows = read_counts(lines[1:], len(OUTCOMES))
    total = rows.pop("total")
    assert list(rows) == list(KINDS) and all(sum(row) == 1 for row in rows.values()), out
    assert total[0] > 0 and total[1] > 0 and total[2:] == [0] * (len(OUTCOMES) - 2), out
    assert status == 0, out


@pytest.mark.slow
def test_the_campaign_counts_a_crash_a_hang_and_an_unclear_error():
    """The crash first in its child and the hang last, so that no child runs after either
    and only the hang waits out the timeout (which covers a child's start too)."""
    tally = run_campaign(4, 5, worker=dies_hangs_or_is_unclear, timeout=5)
    assert tally.total("crash") == 1 and tally.total("hang") == 1
    assert tally.total("unclear error") == 1 and tally.total("restored correctly") == 1
    assert any(text.startswith("crash: ") and "signal 6" in text for text in tally.examples)
    assert any(text.startswith("hang: ") for text in tally.examples)


def test_the_judge_calls_raw_and_unnamed_errors_unclear():
    where = "/run/case3"
    assert unclear_because(KeyError("dtype"), where) == "raw builtins.KeyError"
    assert unclear_because(RecursionError("maximum recursion depth"), where) \
        == "raw builtins.RecursionError"
    assert unclear_because(FileNotFoundError(f"{where}/ckpt-2.safetensors"), where) \
        == "raw builtins.FileNotFoundError"
    assert unclear_because(ValueError("bad shape"), where) \
        == "does not name the checkpoint's directory"
    assert unclear_because(ValueError(f"{where}/ckpt-2: oops"), where) \
        == "does not say what is wrong"
    error = CheckpointError(f"{where}/ckpt-2.safetensors", "is not a valid checkpoint: field "
                            "header.w.dtype is missing", "header.w.dtype")
    assert unclear_because(error, where) is None
    assert judge_error(error, where)[0] == "clear error"
