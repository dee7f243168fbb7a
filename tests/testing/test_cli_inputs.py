"""The command-line and IR-parser campaign (`stageflow.testing.cli_inputs`): a slice of it
finds no crash, hang, memory blow-up, internal or unclear error, and its judge does detect
those, so that the slice cannot pass by seeing nothing."""

from __future__ import annotations

import signal

from stageflow.testing.cli_inputs import (
    OUTCOMES,
    Case,
    judge_command,
    main,
    run_campaign,
    run_case,
)


def test_a_slice_of_the_campaign_finds_no_defect():
    tally = run_campaign(60, 2026)
    assert sum(tally.total(o) for o in OUTCOMES) == 60
    assert tally.total("ok") > 0 and tally.total("clear error") > 0
    for outcome in OUTCOMES[2:]:
        assert tally.total(outcome) == 0, tally.examples


def test_the_summary_names_the_seed_and_tallies_by_family(capsys):
    assert main(["--count", "4", "--seed", "7"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("hostile inputs to the stageflow command and IR parser, seed 7,")
    assert "internal" in out and "hang" in out and "total" in out


def test_the_judge_tells_crashes_internal_errors_and_vague_messages_apart():
    names = ("<input>",)
    assert judge_command(-signal.SIGSEGV, "", names)[0] == "crash"
    assert judge_command(1, "stageflow opt: internal error: KeyError: 'x'", names)[0] == \
        "internal error"
    assert judge_command(1, "Traceback (most recent call last):\n  ...", names)[0] == \
        "internal error"
    assert judge_command(1, "stageflow opt: internal error: MemoryError: ", names)[0] == \
        "memory"
    assert judge_command(1, "stageflow opt: error: 'NoneType' object has no attribute 'x'",
                         names)[0] == "unclear error"
    assert judge_command(1, "stageflow opt: error: something is wrong", names)[0] == \
        "unclear error"
    assert judge_command(3, "stageflow opt: error: <input>:1:2: bad", names)[0] == \
        "unclear error"
    assert judge_command(1, "stageflow opt: error: <input>:3:4: unknown op", names)[0] == \
        "clear error"
    assert judge_command(0, "", names)[0] == "ok"


def test_a_huge_splat_is_refused_in_process_and_by_the_command():
    """`dense<1.0> : tensor<15000x15000xf32>` is refused before it is expanded."""
    text = (b"func.func @big() -> tensor<15000x15000xf32> {\n  %0 = sf.constant dense<1.0> : "
            b"tensor<15000x15000xf32>\n  func.return %0 : tensor<15000x15000xf32>\n}\n")
    outcome, detail = run_case(Case("huge splat", text, names=("<input>",), subprocess=True))
    assert outcome == "clear error" and "splat" in detail
