"""Random, well-typed programs over the whole op set (`stageflow.testing.random_programs`)
give the same numbers eagerly, interpreted (`jit=False`), compiled, on a GPU and compiled
ahead of time into a library called through ctypes, or for aarch64 (under qemu) and
WebAssembly (under Node.js), with known and with unknown (None) input dims; a slice of what
the campaign runs at scale.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.codegen.targets.ptx import ARCHES, PTXTarget, ptxas_path
from stageflow.runtime.gpu import KernelStep
from stageflow.testing.aot_calls import Libraries, Unsupported
from stageflow.testing.random_ops import (
    F32,
    F64,
    Program,
    Value,
    eager,
    op_cast,
    programs,
    staged,
)
from stageflow.testing.random_programs import TARGET_WAYS, compare, execute, main, reason
from stageflow.testing.target_calls import TargetLibraries


def on_gpu(program: Program, variables: list[sf.Variable], generator: Any) -> Callable:
    """The program staged and called on the first GPU (the suite's emulated one where there
    is no real GPU): optimised by the PTX pipeline, its fused kernels launched on the
    GPU's memory, its other ops (reductions, data movement, random bits, variables) on the
    host; the PTX of its kernels must assemble for every architecture. A program without
    effects (variables, random state) is called twice more: the second call is recorded
    and the third replays the recording as a launch graph where it stays on the GPU; all
    three must agree."""
    staged_program = sf.function(eager(program, variables, generator))

    def run(*args: Any) -> Any:
        with sf.device("/gpu:0"):
            results = staged_program(*args)
            concrete = staged_program.get_concrete_function(*args)
            graphs, _ = concrete._gpu_programs["/device:GPU:0"]
            calls = [staged_program(*args) for _ in range(2 if graphs.replayable else 0)]
        assert all(r.device == "/device:GPU:0" for r in results)
        for later in calls:
            for a, b in zip(results, later, strict=True):
                np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert_ptxas_accepts([step.kernel.kernel for step in graphs.program.plan.steps
                              if isinstance(step.kernel, KernelStep)])
        return results

    return run


def assert_ptxas_accepts(kernels: list[Any]) -> None:
    """The PTX of `kernels`, one module per architecture, assembles with ptxas."""
    if not kernels:
        return
    ptxas = ptxas_path()
    assert ptxas is not None, "ptxas (pip nvidia-cuda-nvcc) is part of the test extra"
    with tempfile.TemporaryDirectory() as directory:
        for arch in ARCHES:
            source = Path(directory) / f"{arch}.ptx"
            source.write_text(PTXTarget(arch).compile_many(kernels))
            result = subprocess.run([str(ptxas), f"-arch={arch}", str(source), "-o",
                                     str(source.with_suffix(".cubin"))],
                                    capture_output=True, text=True)
            assert result.returncode == 0, result.stderr


@settings(max_examples=20)
@given(programs())
def test_random_programs_agree_three_ways(program: Program) -> None:
    args = [sf.constant(x) for x in program.inputs]
    reference = execute(program, eager, args)
    compare(program, staged(jit=False), reference, args)
    compiled = compare(program, staged(), reference, args)
    assert compiled.get_concrete_function(*args).program.program is not None


@settings(max_examples=20)
@given(programs())
def test_random_programs_agree_on_a_gpu(program: Program) -> None:
    args = [sf.constant(x) for x in program.inputs]
    compare(program, on_gpu, execute(program, eager, args), args)


@settings(max_examples=10)
@given(programs())
def test_random_programs_with_unknown_dims(program: Program) -> None:
    args = [sf.constant(x) for x in program.inputs]
    reference = execute(program, eager, args)
    compiled = compare(program, staged(input_signature=program.signature()), reference, args)
    assert compiled.get_concrete_function(*program.signature()).program.program is not None


@settings(max_examples=4, deadline=None)
@given(programs())
def test_random_programs_agree_compiled_ahead_of_time(program: Program) -> None:
    """Each program as a shared library called through ctypes, for its inputs' dims and for
    its unknown dims: results and variables as eager's (the AOT compiler refuses only
    region ops over unknown dims, which these straight-line programs do not have)."""
    args = [sf.constant(x) for x in program.inputs]
    reference = execute(program, eager, args)
    with tempfile.TemporaryDirectory() as directory:
        libraries = Libraries(directory)
        for unknown_dims in (False, True):
            compare(program, libraries.way(unknown_dims), reference, args)


TARGETS = sorted({target for target, _ in TARGET_WAYS.values()})


@pytest.mark.usefixtures("aarch64_tools", "wasm_tools")
@pytest.mark.parametrize("target", TARGETS)
@settings(max_examples=3, deadline=None)
@given(programs())
def test_random_programs_agree_compiled_for_other_machines(target: str,
                                                           program: Program) -> None:
    """Each program as a library for another machine, run there (under its emulator or
    runtime) for its inputs' dims and for its unknown dims: results and variables as
    eager's on this x86 machine."""
    args = [sf.constant(x) for x in program.inputs]
    reference = execute(program, eager, args)
    with tempfile.TemporaryDirectory() as directory:
        for unknown_dims in (False, True):
            compare(program, TargetLibraries(directory).way(target, unknown_dims), reference,
                    args)


def counting_program(unknown: tuple[bool, ...], region: bool) -> Program:
    """x -> x * 2 (in a cond with `region`), adding x's sum to a variable: a program
    written out by hand, for what the AOT way must do with state and refusals."""
    p = Program(inputs=[np.arange(3, dtype=np.float32)], unknown=[unknown],
                variables=[np.ones((), np.float32)], var_exact=[True])
    p.push("arg0", (), lambda run: run.args[0], Value((3,), F32, True))

    def doubled(run: Any, x: Any) -> Any:
        return sf.cond(sf.reduce_sum(x) > 0, lambda: x * 2.0, lambda: x) if region else x * 2.0

    p.push("doubled", (0,), doubled, Value((3,), F32, True))
    p.push("v0.assign_add", (0,),
           lambda run, x: run.variables[0].assign(run.variables[0] + sf.reduce_sum(x)), None)
    p.outputs = (1,)
    return p


def test_the_aot_way_compares_the_variables_the_library_updates(tmp_path: Path) -> None:
    program = counting_program((True,), region=False)
    args = [sf.constant(x) for x in program.inputs]
    reference = execute(program, eager, args)
    assert reference[1][0] == 4.0
    results, states, _ = execute(program, Libraries(str(tmp_path)).way(True), args)
    np.testing.assert_array_equal(results[0], [0.0, 2.0, 4.0])
    assert states[0] == 4.0
    with pytest.raises(AssertionError):
        compare(program, Libraries(str(tmp_path)).way(False),
                (reference[0], [np.float32(5.0)]), args)


@pytest.mark.usefixtures("aarch64_tools", "wasm_tools")
@pytest.mark.parametrize("target", TARGETS)
def test_a_target_way_compares_the_variables_the_library_updates(target: str,
                                                                  tmp_path: Path) -> None:
    """The variables a library for another machine updates come back from its run into the
    program's variables, so that a wrong update there is a mismatch."""
    program = counting_program((True,), region=False)
    args = [sf.constant(x) for x in program.inputs]
    reference = execute(program, eager, args)
    results, states, _ = execute(program, TargetLibraries(str(tmp_path)).way(target, True),
                                 args)
    np.testing.assert_array_equal(results[0], [0.0, 2.0, 4.0])
    assert states[0] == 4.0
    with pytest.raises(AssertionError):
        compare(program, TargetLibraries(str(tmp_path)).way(target, False),
                (reference[0], [np.float32(5.0)]), args)


def test_the_aot_way_reports_a_deliberate_refusal(tmp_path: Path) -> None:
    """A cond over a value of unknown dims cannot be part of a library's whole-function
    program: `Unsupported`, whose reason a campaign counts without the library's name
    and the source line; with known dims the same program compiles and agrees."""
    program = counting_program((True,), region=True)
    args = [sf.constant(x) for x in program.inputs]
    reference = execute(program, eager, args)
    with pytest.raises(Unsupported) as refusal:
        execute(program, Libraries(str(tmp_path)).way(True), args)
    assert reason(refusal.value) == ("sf.aot.compile: @program: sf.cond computes a value of "
                                     "unknown dims inside a region")
    known = counting_program((False,), region=True)
    compare(known, Libraries(str(tmp_path)).way(False), reference, args)


def ways(f: Callable[..., Any], **options: Any) -> list[Callable[..., Any]]:
    return [f, sf.function(f, jit=False, **options), sf.function(f, **options)]


INCONSISTENT = {
    "add": (lambda a, b: a + b, [(None, 3), (None, 3)], [(5, 3), (4, 3)]),
    "matmul": (lambda a, b: sf.matmul(a, b), [(2, None), (None, 2)], [(2, 3), (4, 2)]),
    "concat": (lambda a, b: sf.concat([a, b], 0), [(None, None), (None, 2)], [(1, 3), (1, 2)]),
    "reshape": (lambda a, b: sf.reshape(a, (2, -1)) + b, [(None,), (None,)], [(5,), (1,)]),
    "where": (lambda a, b: sf.where(a > 0, a, b), [(None,), (None,)], [(3,), (2,)]),
    "broadcast_to": (lambda a, b: sf.broadcast_to(a, (2, 3)) * b, [(None,), (3,)],
                     [(2,), (3,)]),
}


@pytest.mark.parametrize("name", sorted(INCONSISTENT))
def test_inconsistent_unknown_dims_raise_the_same_error_three_ways(name: str) -> None:
    f, spec_shapes, shapes = INCONSISTENT[name]
    signature = [sf.TensorSpec(s) for s in spec_shapes]
    args = [sf.constant(np.ones(s, np.float32)) for s in shapes]
    errors = []
    for way in ways(f, input_signature=signature):
        with pytest.raises(Exception) as caught:  # noqa: PT011 - the types are compared
            way(*args)
        errors.append(caught.type)
    assert errors[0] is errors[1] is errors[2], errors


# Bugs the random programs found, each the smallest program that showed it.

def test_pad_of_a_scalar_is_the_scalar() -> None:
    for way in ways(lambda x: sf.pad(x, [], constant_values=1.0)):
        assert way(sf.constant(np.float32(2.0))).numpy() == 2.0


def test_an_unknown_dim_broadcasts_to_a_known_one() -> None:
    for way in ways(lambda x: sf.broadcast_to(x, (3, 1)), input_signature=[sf.TensorSpec([None])]):
        assert way(sf.ones((1,))).shape == (3, 1)
        with pytest.raises(ValueError):
            way(sf.ones((2,)))


def test_indexing_with_ellipsis_keeps_several_unknown_dims() -> None:
    signature = [sf.TensorSpec([None, None])]
    for way in ways(lambda x: x[...] * 2.0, input_signature=signature):
        assert way(sf.ones((2, 3))).shape == (2, 3)


@pytest.mark.parametrize("softmax", [sf.nn.softmax, sf.nn.log_softmax])
def test_softmax_over_an_empty_axis_is_empty(softmax: Callable[..., Any]) -> None:
    for way in ways(lambda x: softmax(x, axis=1)):
        assert way(sf.ones((2, 0))).shape == (2, 0)


def test_a_campaign_counts_what_each_way_did(capsys):
    """The campaign's command (`python -m stageflow.testing.random_programs`) over a few
    programs: every way runs every program and agrees with eager; the summary names the
    seed."""
    status = main(["--count", "4", "--seed", "2026", "--ways", "interpreted,compiled,aot",
                   "--control", "0.5", "--aot-every", "2"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("random programs against eager, seed 2026,")
    assert lines[1].split() == ["way", "programs", "mismatches", "errors", "unsupported",
                                "seconds"]
    rows = {line[2:22].strip(): line[22:].split()[:4] for line in lines[2:5]}
    assert rows == {"interpreted": ["4", "0", "0", "0"], "compiled": ["4", "0", "0", "0"],
                    "aot": ["2", "0", "0", "0"]}, out
    assert status == 0, out


@pytest.mark.usefixtures("aarch64_tools", "wasm_tools")
def test_a_campaign_on_other_machines_agrees_with_eager(capsys):
    """A fixed slice of the campaign on the other machines' ways: every program, with and
    without control flow, runs there (or is refused on purpose, counted apart) and agrees
    with eager; the same seed, the same programs every time."""
    status = main(["--count", "6", "--seed", "2027", "--ways", ",".join(TARGET_WAYS),
                   "--control", "0.5", "--aot-every", "1"])
    out = capsys.readouterr().out
    rows = {line[2:22].strip(): line[22:].split()[:4]
            for line in out.splitlines()[2:2 + len(TARGET_WAYS)]}
    assert sorted(rows) == sorted(TARGET_WAYS), out
    assert all(row[:3] == ["6", "0", "0"] for row in rows.values()), out
    assert status == 0, out


@given(st.data())
def test_a_float32_value_known_within_a_tolerance_is_never_widened(data: st.DataObject) -> None:
    """Found by a campaign: a float32 result of a branch, one ulp apart compiled and eager
    (within float32's tolerance), was cast to float64 and compared within float64's. Such
    a value is cast only to a float type no wider; an exact one, to any type."""
    def cast(value: Value) -> list[Value]:
        p = Program()
        p.push("x", (), lambda run: None, value)
        op_cast(data.draw, p)
        return p.pool[1:]

    assert cast(Value((2,), F32, False)) == []
    assert cast(Value((2,), F64, False)) == [Value((2,), F32, False)]
    (exact,) = cast(Value((2,), F32, True))
    assert exact.exact and exact.dtype != F32


def test_a_value_returned_and_broadcast_into_an_empty_result_is_computed() -> None:
    """Found by a campaign: log_softmax's result, returned and broadcast into a `where`
    over an empty shape, was an output of that kernel, whose empty iteration space never
    wrote it (the compiled call returned garbage)."""
    def f(x, e):
        y = sf.nn.log_softmax(x, axis=0)
        return y, sf.where(e < 0.0, y, e)

    x = sf.constant(np.array([[[0.5]], [[1.32]]]))
    e = sf.constant(np.zeros((0, 2, 2, 0, 3)))
    want = f(x, e)[0].numpy()
    for way in ways(f):
        np.testing.assert_allclose(way(x, e)[0].numpy(), want, rtol=1e-12)
