"""A slice of the memory campaign (`stageflow.testing.memory`): the process stays flat over
cache-hit calls, eager ops and gradient steps, and grows within the bounds over retraces,
functions made and dropped and saved functions loaded; and the campaign's command runs."""

from __future__ import annotations

import pytest

from stageflow.testing.memory import SCENARIOS, Result, main, run_campaign, table

pytestmark = pytest.mark.slow

COMPILING = ["retraces", "functions"]


@pytest.mark.parametrize("name", COMPILING)
def test_a_compiling_scenario_stays_within_its_bound(name):
    """Over 200 units (RSS moves by up to ~2 MB from run to run: over 100 units, functions
    made and dropped once grew past their bound); a test each, so that neither holds the
    suite's exclusive tests waiting for both (`tests/conftest.py`'s `cores`)."""
    [result] = run_campaign(200, 20240611, [name])
    assert result.passed, "\n".join(table([result]))
    assert result.units == [SCENARIOS[name].warmup + u for u in (0, 100, 200)]


def test_the_other_scenarios_stay_within_their_bounds_and_the_command_prints_them(capsys):
    """The scenarios that compile nothing new, over 100 units, through the campaign's
    command, whose table names them."""
    rest = [n for n in SCENARIOS if n not in COMPILING]
    status = main(["--count", "100", "--seed", "20240611", "--scenarios", ",".join(rest)])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("memory over long runs, count 100, seed 20240611")
    rows = [line.split() for line in lines[2:]]
    assert [row[0] for row in rows] == rest, out
    assert all("pass" in row for row in rows), out
    assert status == 0, out


def test_a_scenario_over_its_bound_fails() -> None:
    scenario = SCENARIOS["calls"]
    grown = Result(scenario, [100, 200], [1 << 20, (1 << 20) + 100 * 64], 0.0)
    assert grown.growth == 64 and not grown.passed
    assert "FAIL" in table([grown])[1]
