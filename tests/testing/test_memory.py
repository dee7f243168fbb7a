"""A slice of the memory campaign (`stageflow.testing.memory`): the process stays flat over
cache-hit calls, eager ops and gradient steps, and grows within the bounds over retraces,
functions made and dropped and saved functions loaded; and the campaign's command runs."""

from __future__ import annotations

from stageflow.testing.memory import SCENARIOS, Result, main, table


def test_every_scenario_stays_within_its_bound_and_the_command_prints_the_table(capsys):
    """Every scenario at count 100, through the campaign's command: 100 retraces and 100
    functions after their warm-ups (their growth per unit measured 5-11 KB against bounds
    of 16 and 20 KB; RSS moves by up to ~0.7 MB from run to run, 7 KB a unit)."""
    status = main(["--count", "100", "--seed", "20240611"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("memory over long runs, count 100, seed 20240611")
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert list(rows) == list(SCENARIOS), out
    assert rows["retraces"][1] == "300"  # the warm-up, then 100 retraces
    assert all("pass" in row for row in rows.values()), out
    assert status == 0, out


def test_a_scenario_over_its_bound_fails() -> None:
    scenario = SCENARIOS["calls"]
    grown = Result(scenario, [100, 200], [1 << 20, (1 << 20) + 100 * 64], 0.0)
    assert grown.growth == 64 and not grown.passed
    assert "FAIL" in table([grown])[1]
