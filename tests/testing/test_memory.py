"""A slice of the memory campaign (`stageflow.testing.memory`): the process stays flat over
cache-hit calls, eager ops and gradient steps, and grows within the bounds over retraces,
functions made and dropped and saved functions loaded; and the campaign's command runs."""

from __future__ import annotations

from stageflow.testing.memory import SCENARIOS, Result, main, run_campaign, table


def test_memory_stays_within_the_bounds_of_every_scenario() -> None:
    # compiles over 200 units (RSS moves by up to ~0.7 MB from run to run), the rest over 100
    compiling = ["retraces", "functions"]
    results = run_campaign(200, 20240611, compiling)
    results += run_campaign(100, 20240611, [n for n in SCENARIOS if n not in compiling])
    failed = [r for r in results if not r.passed]
    assert not failed, "\n".join(table(results))
    assert sorted(r.scenario.name for r in results) == sorted(SCENARIOS)
    assert results[0].units == [200, 300, 400]  # the warm-up, then 200 retraces


def test_a_scenario_over_its_bound_fails() -> None:
    scenario = SCENARIOS["calls"]
    grown = Result(scenario, [100, 200], [1 << 20, (1 << 20) + 100 * 64], 0.0)
    assert grown.growth == 64 and not grown.passed
    assert "FAIL" in table([grown])[1]


def test_the_command_prints_the_table(capsys) -> None:
    assert main(["--count", "3", "--seed", "7", "--scenarios", "calls,eager"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("memory over long runs, count 3, seed 7")
    assert [line.split()[0] for line in lines[2:]] == ["calls", "eager"]
