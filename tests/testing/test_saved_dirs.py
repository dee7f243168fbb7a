"""The tampered-saved-directories campaign (`stageflow.testing.saved_dirs`): a slice of it
finds no crash, hang, wrong result or unclear error, and its judge does see a crash, an
unclear error and a wrong result, so that the slice cannot pass by seeing nothing."""

from __future__ import annotations

import os

from stageflow.testing.saved_dirs import (
    OUTCOMES,
    TAMPERINGS,
    main,
    run_campaign,
    unclear_because,
)


def test_a_slice_of_the_campaign_finds_no_defect():
    tally = run_campaign(120, 2026)
    assert sum(tally.total(o) for o in OUTCOMES) == 120
    assert tally.total("loaded and correct") > 0 and tally.total("clear error") > 0
    assert len(tally.counts) > len(TAMPERINGS) // 2
    for outcome in ("unclear error", "wrong result", "crash", "hang"):
        assert tally.total(outcome) == 0, tally.examples


def test_the_summary_names_the_seed_and_tallies_by_tampering(capsys):
    assert main(["--count", "4", "--seed", "7"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tampered saved directories, seed 7, 4 loads")
    assert "unclear" in out and "crash" in out and "total" in out


def _dies_or_lies(item: tuple[str, str]) -> tuple[str, str]:
    """A worker that crashes on the fourth case and judges the second one wrong."""
    directory, _ = item
    if directory.endswith("case3"):
        os.abort()
    if directory.endswith("case1"):
        return "wrong result", "made up"
    return "loaded and correct", ""


def test_the_campaign_counts_a_crash_and_a_wrong_result():
    tally = run_campaign(6, 5, worker=_dies_or_lies, timeout=60)
    assert tally.total("crash") == 1 and tally.total("wrong result") == 1
    assert tally.total("loaded and correct") == 4
    assert any(text.startswith("crash: ") and "signal 6" in text for text in tally.examples)


def test_the_judge_calls_raw_and_unnamed_errors_unclear():
    where = "/saved/model"
    assert unclear_because(KeyError("dtype"), where, None) == "raw builtins.KeyError"
    assert unclear_because(AttributeError("'int' object has no attribute 'items'"), where,
                           None) == "raw builtins.AttributeError"
    assert unclear_because(FileNotFoundError(f"{where}/module.mlir"), where, None) \
        == "raw builtins.FileNotFoundError"
    assert unclear_because(ValueError("bad shape"), where, None) \
        == "does not name the saved directory"
    assert unclear_because(ValueError(f"{where}/module.mlir: oops"), where, None) \
        == "does not say what is wrong"
    assert unclear_because(ValueError(f"sf.saved.load: {where}/manifest.json: field jit "
                                      "must be a bool"), where, None) is None
    assert unclear_because(TypeError("f: argument 'x' has dtype float64"), where, "f") is None
    assert unclear_because(TypeError("f: argument 'x' has dtype float64"), where, None) \
        == "raw builtins.TypeError"
