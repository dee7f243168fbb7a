"""The command-line and IR-parser campaign (`stageflow.testing.cli_inputs`): a slice of it
finds no crash, hang, memory blow-up, internal or unclear error, and its judge does detect
those, so that the slice cannot pass by seeing nothing."""

from __future__ import annotations

import signal

import pytest

from stageflow.testing.campaign import read_counts
from stageflow.testing.cli_inputs import FAMILIES, OUTCOMES, Case, judge_command, main, run_case


@pytest.mark.slow
def test_a_slice_of_the_campaign_finds_no_defect_and_its_summary_names_the_seed(capsys):
    """Through the campaign's command: seed 18185 draws every family in its first 16
    cases."""
    status = main(["--count", "16", "--seed", "18185"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("hostile inputs to the stageflow command and IR parser, "
                               "seed 18185, 16 inputs,")
    assert lines[1].split() == ["family", "ok", "clear", "unclear", "internal", "injection",
                                "memory", "crash", "hang"]
    rows = read_counts(lines[1:], len(OUTCOMES))
    total = rows.pop("total")
    assert list(rows) == FAMILIES, out
    assert sum(total) == 16 and total[0] > 0 and total[1] > 0
    assert total[2:] == [0] * (len(OUTCOMES) - 2), out
    assert status == 0, out


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


def test_report_names_are_judged_by_the_markup_they_add(monkeypatch):
    """A hostile name whose report has the plain name's markup is fine; a page where the
    name became an attribute or a tag is an injection."""
    from stageflow.testing import cli_inputs

    assert run_case(Case("report names", b'f" onclick="alert(1) <script>'))[0] == "ok"
    plain = cli_inputs.report_of("f")
    monkeypatch.setattr(cli_inputs, "report_of", lambda name: plain if name == "f" else
                        plain.replace("<h2", f"<h2 {name}", 1))
    outcome, detail = run_case(Case("report names", b"onmouseover=alert(1)"))
    assert outcome == "injection" and "onmouseover" in detail
