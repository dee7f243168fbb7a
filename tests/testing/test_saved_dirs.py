"""The tampered-saved-directories campaign (`stageflow.testing.saved_dirs`): a slice of it
finds no crash, hang, wrong result or unclear error, and its judge does see a crash, an
unclear error and a wrong result, so that the slice cannot pass by seeing nothing."""

from __future__ import annotations

import os
import pickle
import random
import re
import shutil

import pytest

from stageflow.testing.campaign import read_counts
from stageflow.testing.saved_dirs import (
    OBJECTS,
    OUTCOMES,
    TAMPERINGS,
    judge,
    main,
    run_campaign,
    save_originals,
    unclear_because,
)


@pytest.mark.slow
def test_a_slice_of_the_campaign_finds_no_defect_and_its_summary_names_the_seed(capsys):
    """Through the campaign's command: the first 90 cases of seed 2026 draw every tampering
    (all of them by the 60th)."""
    status = main(["--count", "90", "--seed", "2026"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("tampered saved directories, seed 2026, 90 loads")
    assert lines[1].split() == ["tampering", "correct", "clear", "unclear", "wrong", "crash",
                                "hang"]
    rows = read_counts(lines[1:], len(OUTCOMES))
    total = rows.pop("total")
    assert list(rows) == list(TAMPERINGS), out
    assert sum(total) == 90 and total[0] > 0 and total[1] > 0
    assert total[2:] == [0] * (len(OUTCOMES) - 2), out
    assert status == 0, out


@pytest.fixture(scope="module")
def originals(tmp_path_factory) -> str:
    """The campaign's saved objects and their calls' results, saved once."""
    root = str(tmp_path_factory.mktemp("saved-originals"))
    save_originals(root)
    return root


CALL_TAMPERINGS = [name for name in TAMPERINGS if name.startswith("mlir call")]


@pytest.mark.parametrize("obj", sorted(OBJECTS))
@pytest.mark.parametrize("tampering", CALL_TAMPERINGS)
def test_calls_edited_into_cycles_or_to_missing_functions_are_clear_errors(
        originals, tmp_path, obj, tampering):
    """Every branch (a cycle of one to three functions, a callee absent or without a body,
    by sf.call or func.call; the digests as they were or recomputed) on every saved object:
    each once loaded, and its first call died in RecursionError, AttributeError or
    IndexError."""
    with open(os.path.join(originals, f"{obj}.pkl"), "rb") as file:
        calls, want = pickle.load(file)  # noqa: S301 - written by the fixture
    for seed in range(6):
        directory = str(tmp_path / f"case{seed}")
        shutil.copytree(os.path.join(originals, obj), directory)
        how = TAMPERINGS[tampering](directory, random.Random(seed))
        outcome, detail = judge(directory, calls, want)
        assert outcome == "clear error", (how, detail)
        # the file (at the op's line, where the verifier finds a callee missing) and the
        # function
        assert re.search(r"module\.mlir(:\d+:\d+)?: .*@\w+", detail), (how, detail)


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
    # the verifier at an op whose location is the saving program's line, not the file's
    assert unclear_because(ValueError(f"sf.saved.load: {where}/module.mlir: model.py:32:14: "
                                      "'sf.call' op results (tensor<?x3xf32>) do not match "
                                      "@call's (tensor<?x4xf32>)"), where, None) is None
    assert unclear_because(TypeError("f: argument 'x' has dtype float64"), where, "f") is None
    assert unclear_because(TypeError("f: argument 'x' has dtype float64"), where, None) \
        == "raw builtins.TypeError"
