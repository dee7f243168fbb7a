"""Random programs with nested `cond`, `switch_case` and `while_loop`
(`stageflow.testing.control_programs`) give the same numbers eagerly, interpreted, compiled
and compiled ahead of time into a library called through ctypes, with known and unknown
input dims; a slice of what the random-program campaign draws among its programs.
"""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import given, settings

import stageflow as sf
from stageflow.testing.aot_calls import Libraries
from stageflow.testing.control_programs import control_programs
from stageflow.testing.random_ops import Program, eager, staged
from stageflow.testing.random_programs import compare, execute


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(control_programs())
def test_random_control_programs_agree_three_ways(program: Program) -> None:
    args = [sf.constant(x) for x in program.inputs]
    reference = execute(program, eager, args)
    compare(program, staged(jit=False), reference, args)
    compiled = compare(program, staged(), reference, args)
    concrete = compiled.get_concrete_function(*args)
    assert concrete.program.program is not None, concrete.stats()["steps_reasons"]


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(control_programs())
def test_random_control_programs_with_unknown_dims(program: Program) -> None:
    args = [sf.constant(x) for x in program.inputs]
    reference = execute(program, eager, args)
    compare(program, staged(input_signature=program.signature()), reference, args)


@settings(max_examples=4, deadline=None)
@given(control_programs())
def test_random_control_programs_agree_compiled_ahead_of_time(program: Program) -> None:
    """With known dims every region op is part of the library's program (regions over
    unknown dims are refused, as `test_random_programs` shows)."""
    args = [sf.constant(x) for x in program.inputs]
    reference = execute(program, eager, args)
    with tempfile.TemporaryDirectory() as directory:
        compare(program, Libraries(directory).way(unknown_dims=False), reference, args)


def test_the_generator_makes_loops_and_nested_regions() -> None:
    """The strategy is not vacuous: over a fixed draw of programs, loops, branches and
    nested region ops all occur (checked on the traced IR)."""
    texts = []

    @settings(max_examples=15, deadline=None, database=None)
    @given(control_programs())
    def collect(program: Program) -> None:
        args = [sf.constant(x) for x in program.inputs]
        function = sf.function(eager(program, [sf.Variable(v) for v in program.variables],
                                     sf.random.Generator.from_seed(0)))
        texts.append(function.get_concrete_function(*args).ir())

    collect()
    joined = "\n".join(texts)
    assert "sf.while" in joined and "sf.cond" in joined
    assert any(t.count("sf.while") + t.count("sf.cond") >= 2 for t in texts)
