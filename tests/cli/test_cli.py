"""The `stageflow` command: `dump`, `graph`, `devices` and `opt`, run in-process through
`stageflow.cli.main` (and once as the installed console script), with their error lines.

Every failure must be one line on stderr, ``stageflow <cmd>: error: ...``, exit status 1 and
no traceback: scripts and lit tests match on that line.
"""

from __future__ import annotations

import io
import os
import re
import resource
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stageflow.cli import main

MODEL = textwrap.dedent("""\
    import stageflow as sf


    def model(x, w):
        y = sf.matmul(x, w)
        return sf.nn.relu(y)


    def mismatch(x, w):
        return x + w


    def mean_over_batch(x):
        return sf.reduce_mean(x, axis=0)


    @sf.function
    def staged(x):
        return sf.exp(x) * 2.0


    class Holder:
        @staticmethod
        def double(x):
            return x + x


    not_callable = 3
    """)
MATMUL_LINE = 5  # `y = sf.matmul(x, w)` in MODEL
RELU_LINE = 6
MISMATCH_LINE = 10  # `return x + w`

SMALL_MODULE = textwrap.dedent("""\
    func.func @f(%x: tensor<?x4xf32>, %w: tensor<4x2xf32>) -> tensor<?x2xf32> {
      %0 = sf.matmul %x, %w {transpose_a = false, transpose_b = false} : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
      %1 = sf.exp %0 : (tensor<?x2xf32>) -> tensor<?x2xf32>
      func.return %1 : tensor<?x2xf32>
    }
    """)  # noqa: E501 - one op per line, as the IR prints it

ARGS = ["--arg", "f32[?,4]", "--arg", "f32[4,2]"]


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch):
    """Loading FILE.py puts its folder on sys.path; keep that out of the other tests."""
    monkeypatch.setattr(sys, "path", list(sys.path))


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "user_model.py"
    path.write_text(MODEL)
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """`stageflow ARGV...` in-process: (exit status, stdout, stderr)."""
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def assert_one_error_line(status: int, err: str, command: str) -> str:
    """Exit status 1 and exactly one stderr line ``stageflow CMD: error: ...``; its message."""
    assert status == 1
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    prefix = f"stageflow {command}: error: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0][len(prefix):]


# --------------------------------------------------------------------------- dump


def test_dump_prints_the_traced_module(capsys, model_file):
    status, out, err = run(capsys, "dump", f"{model_file}:model", *ARGS)
    assert (status, err) == (0, "")
    assert out.startswith("builtin.module {")
    assert re.search(r"func\.func @model\(%\d+: tensor<\?x4xf32> loc\(unknown\), "
                     r"%\d+: tensor<4x2xf32> loc\(unknown\)\) -> tensor<\?x2xf32> \{", out)
    assert "sf.matmul" in out and "sf.relu" in out
    # Every op names the user's line in the tmp file (the column is where the call starts).
    assert f'loc("{model_file}":{MATMUL_LINE}:9)' in out
    assert f'loc("{model_file}":{RELU_LINE}:12)' in out
    assert "stageflow/" not in out  # no location inside the library


def test_dump_default_stage_is_traced(capsys, model_file):
    _, default, _ = run(capsys, "dump", f"{model_file}:model", *ARGS)
    status, traced, _ = run(capsys, "dump", f"{model_file}:model", *ARGS, "--stage", "traced")
    assert status == 0
    assert default == traced


def test_dump_of_an_sf_function_and_a_dotted_name(capsys, model_file):
    status, out, _ = run(capsys, "dump", f"{model_file}:staged", "--arg", "f64[3]")
    assert status == 0
    assert "func.func @staged" in out
    assert "sf.constant dense<2.000000e+00> : tensor<f64>" in out
    status, out, _ = run(capsys, "dump", f"{model_file}:Holder.double", "--arg", "i32[?]")
    assert status == 0
    assert "sf.add" in out and "tensor<?xi32>" in out


def test_dump_timing_goes_to_stderr(capsys, model_file):
    status, out, err = run(capsys, "dump", f"{model_file}:model", *ARGS, "--timing")
    assert status == 0
    assert "func.func @model" in out
    assert " ms" not in out
    lines = err.splitlines()
    assert lines[0].split() == ["pass", "wall", "ms", "verify", "ms", "%"]
    assert lines[1].startswith("trace") and lines[-1].startswith("total")
    for line in lines[1:]:
        assert re.fullmatch(r"[A-Za-z ]+\s+\d+\.\d+(\s+\d+\.\d+)*", line), line


def test_dump_optimized_runs_the_pipeline_with_timings(capsys, model_file):
    status, out, err = run(capsys, "dump", f"{model_file}:model", *ARGS, "--stage",
                           "optimized", "--timing")
    assert status == 0 and "func.func @model" in out
    passes = [line.split()[0] for line in err.splitlines()[2:-1]]
    assert passes == ["inline", "fold", "simplify", "cse", "prepack", "hoist-invariant",
                      "fuse-conv", "prune", "fuse", "schedule", "plan-buffers"]


def test_dump_print_ir_after_all_heads_each_dump(capsys, model_file):
    status, out, _ = run(capsys, "dump", f"{model_file}:model", *ARGS, "--print-ir-after-all")
    assert status == 0
    headers = re.findall(r"^// -----// IR Dump After (\S+) //----- //$", out, re.MULTILINE)
    assert headers, out
    first = out.splitlines()[0]
    assert first.startswith("// -----// IR Dump After ")
    assert out.index("builtin.module") > out.index(first)


def test_dump_output_file(capsys, model_file, tmp_path):
    target = tmp_path / "model.mlir"
    status, out, err = run(capsys, "dump", f"{model_file}:model", *ARGS, "-o", target)
    assert (status, out, err) == (0, "", "")
    text = target.read_text()
    assert "func.func @model" in text
    # The dump is valid input for `stageflow opt`, locations included.
    status, again, _ = run(capsys, "opt", "--print-debuginfo", target)
    assert status == 0
    assert again == text


def test_dump_reduce_mean_over_unknown_batch(capsys, model_file):
    status, out, err = run(capsys, "dump", f"{model_file}:mean_over_batch", "--arg", "f32[?,4]")
    assert (status, err) == (0, "")
    assert "-> tensor<4xf32>" in out


# --------------------------------------------------------------------------- graph


def test_graph_writes_dot(capsys, model_file, tmp_path):
    target = tmp_path / "model.dot"
    status, out, err = run(capsys, "graph", f"{model_file}:model", *ARGS, "-o", target)
    assert (status, out, err) == (0, "", "")
    dot = target.read_text()
    assert dot.startswith('digraph "model" {')
    assert dot.rstrip().endswith("}")
    assert 'arg0 [shape=ellipse, label="arg 0: float32[?, 4]"];' in dot
    assert re.search(r'op\d+ \[shape=box, .*label="matmul', dot)
    assert re.search(r'op\d+ \[shape=box, .*label="relu"', dot)
    assert re.search(r'arg1 -> op\d+ \[label="float32\[4, 2\]"\];', dot)
    assert re.search(r'op\d+ -> out0 \[label="float32\[\?, 2\]"\];', dot)


def test_graph_of_casts_and_one_hot_names_their_dtypes():
    """A dtype parameter (a cast's, a one_hot's) has a `shape` attribute but no `dtype`:
    the graph once failed on it with AttributeError."""
    import stageflow as sf

    def f(x, i):
        return sf.cast(x, sf.float64) + sf.cast(sf.one_hot(i, 3), sf.float64)

    concrete = sf.function(f).get_concrete_function(sf.TensorSpec([3]),
                                                     sf.TensorSpec([], sf.int32))
    dot = concrete.graph_dot()
    assert dot.count('label="cast\\ndtype=float64"') == 2, dot
    assert 'label="constant\\nvalue=1.0"' in dot, dot


def test_graph_svg_needs_graphviz(capsys, model_file, tmp_path):
    target = tmp_path / "model.svg"
    status, _, err = run(capsys, "graph", f"{model_file}:model", *ARGS, "-o", target)
    if shutil.which("dot") is None:
        message = assert_one_error_line(status, err, "graph")
        assert "dot" in message and ".svg" in message
        assert not target.exists()
    else:
        assert (status, err) == (0, "")
        assert "<svg" in target.read_text()


def _fake_dot(folder: Path, body: str) -> None:
    """A `dot` program on PATH that runs `body` (a shell script) instead of Graphviz."""
    folder.mkdir()
    script = folder / "dot"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX shell script stands in for dot")
def test_graph_svg_pipes_the_dot_text_to_graphviz(capsys, model_file, tmp_path, monkeypatch):
    # The stand-in writes its arguments and its stdin (the DOT text) into the -o file.
    _fake_dot(tmp_path / "bin", 'out=$3\necho "$@" > "$out"\ncat >> "$out"\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    target = tmp_path / "model.svg"
    status, out, err = run(capsys, "graph", f"{model_file}:model", *ARGS, "-o", target)
    assert (status, out, err) == (0, "", "")
    args, _, dot = target.read_text().partition("\n")
    assert args == f"-Tsvg -o {target}"
    assert dot.startswith('digraph "model" {')


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX shell script stands in for dot")
def test_graph_svg_reports_a_failing_dot(capsys, model_file, tmp_path, monkeypatch):
    _fake_dot(tmp_path / "bin", 'cat > /dev/null\necho "syntax error in line 1" >&2\nexit 3\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    status, _, err = run(capsys, "graph", f"{model_file}:model", *ARGS,
                         "-o", tmp_path / "model.svg")
    message = assert_one_error_line(status, err, "graph")
    assert message == "dot failed: syntax error in line 1"


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX shell script stands in for dot")
def test_graph_svg_failing_dot_with_several_lines_is_one_line(capsys, model_file, tmp_path,
                                                              monkeypatch):
    _fake_dot(tmp_path / "bin", 'cat > /dev/null\nprintf "Error: bad\\nin line 1\\n" >&2\nexit 1\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    status, _, err = run(capsys, "graph", f"{model_file}:model", *ARGS,
                         "-o", tmp_path / "model.svg")
    message = assert_one_error_line(status, err, "graph")
    assert message == "dot failed: Error: bad in line 1"


def test_graph_reports_errors_like_dump(capsys, model_file, tmp_path):
    target = tmp_path / "bad.dot"
    status, _, err = run(capsys, "graph", f"{model_file}:mismatch",
                         "--arg", "f32[3,4]", "--arg", "f32[4,2]", "-o", target)
    message = assert_one_error_line(status, err, "graph")
    assert "add" in message
    assert not target.exists()


# --------------------------------------------------------------------------- devices


def test_devices_lists_the_cpus_with_their_memory(capsys):
    status, out, err = run(capsys, "devices")
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[:4]] == [f"/device:CPU:{i}" for i in range(4)]
    assert all(" CPU  host memory " in line for line in lines[:4])
    assert lines[-1].startswith("/device:GPU:") and "memory" in lines[-1]  # the suite's


def test_dump_shows_the_placement_of_a_device(capsys, tmp_path):
    source = tmp_path / "placed.py"
    source.write_text("import stageflow as sf\n\ndef f(x):\n    return sf.exp(x)\n")
    status, out, err = run(capsys, "dump", f"{source}:f", "--arg", "f32[3]", "--device", "cpu:2")
    assert (status, err) == (0, "")
    assert 'attributes {device = "/device:CPU:2"}' in out
    status, out, err = run(capsys, "dump", f"{source}:f", "--arg", "f32[3]", "--device", "gpu:7")
    message = assert_one_error_line(status, err, "dump")
    assert "no device /device:GPU:7: there are" in message


# --------------------------------------------------------------------------- errors


def test_shape_mismatch_names_the_op_the_shapes_and_the_line(capsys, model_file):
    status, out, err = run(capsys, "dump", f"{model_file}:mismatch",
                           "--arg", "f32[3,4]", "--arg", "f32[4,2]")
    message = assert_one_error_line(status, err, "dump")
    assert out == ""
    assert re.search(r"\badd\b", message)
    assert "(3, 4)" in message and "(4, 2)" in message
    assert f"{model_file}:{MISMATCH_LINE}" in message
    assert "return x + w" in message


def test_shape_mismatch_with_an_unknown_dim(capsys, model_file):
    status, _, err = run(capsys, "dump", f"{model_file}:mismatch", *ARGS)
    message = assert_one_error_line(status, err, "dump")
    assert "(?, 4)" in message and "(4, 2)" in message


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("f32[3,4", "bad --arg 'f32[3,4'"),
        ("f32", "bad --arg 'f32'"),
        ("f32[3,x]", "bad --arg 'f32[3,x]'"),
        ("q7[4]", "unknown dtype 'q7'"),
        ("float[4]", "unknown dtype 'float'"),
        ("f32[1,,4]", "separated by single commas"),  # once read as [1, 4]
        ("f32[4,]", "separated by single commas"),
        ("f32[99999999999999999999]", "below 2**63"),
    ],
)
def test_bad_arg_specs(capsys, model_file, spec, expected):
    status, _, err = run(capsys, "dump", f"{model_file}:staged", "--arg", spec)
    message = assert_one_error_line(status, err, "dump")
    assert expected in message


def test_unknown_dtype_lists_the_known_ones(capsys, model_file):
    status, _, err = run(capsys, "dump", f"{model_file}:staged", "--arg", "q7[4]")
    message = assert_one_error_line(status, err, "dump")
    assert "f32" in message and "i32" in message


def test_missing_file(capsys, tmp_path):
    missing = tmp_path / "nowhere.py"
    status, _, err = run(capsys, "dump", f"{missing}:model", "--arg", "f32[4]")
    message = assert_one_error_line(status, err, "dump")
    assert str(missing) in message and "no such file" in message


def test_missing_function(capsys, model_file):
    status, _, err = run(capsys, "dump", f"{model_file}:nofunc", "--arg", "f32[4]")
    message = assert_one_error_line(status, err, "dump")
    assert "'nofunc'" in message and str(model_file) in message


def test_target_without_a_function_name(capsys, model_file):
    status, _, err = run(capsys, "dump", str(model_file), "--arg", "f32[4]")
    message = assert_one_error_line(status, err, "dump")
    assert "FILE.py:FUNC" in message


def test_target_that_is_not_callable(capsys, model_file):
    status, _, err = run(capsys, "dump", f"{model_file}:not_callable", "--arg", "f32[4]")
    message = assert_one_error_line(status, err, "dump")
    assert "'not_callable'" in message and "not callable" in message


def test_module_that_raises_on_import(capsys, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text('raise RuntimeError("boom at import")\n')
    status, _, err = run(capsys, "dump", f"{broken}:model", "--arg", "f32[4]")
    message = assert_one_error_line(status, err, "dump")
    assert str(broken) in message
    assert "RuntimeError: boom at import" in message


def test_wrong_number_of_args(capsys, model_file):
    status, _, err = run(capsys, "dump", f"{model_file}:model", "--arg", "f32[?,4]")
    message = assert_one_error_line(status, err, "dump")
    assert "'w'" in message


def test_unknown_stage(capsys, model_file):
    status, out, err = run(capsys, "dump", f"{model_file}:model", *ARGS, "--stage", "mlir")
    message = assert_one_error_line(status, err, "dump")
    assert out == ""
    assert "stage 'mlir' is not available yet" in message
    assert "traced" in message and "lowered" in message and "ptx" in message


def test_dump_lowered(capsys, model_file):
    status, out, _ = run(capsys, "dump", f"{model_file}:model", *ARGS, "--stage", "lowered")
    assert status == 0 and 'define i32 @"model.program"' in out


# --------------------------------------------------------------------------- opt


def test_opt_round_trip_from_stdin(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(SMALL_MODULE))
    status, out, err = run(capsys, "opt", "-")
    assert (status, err) == (0, "")
    assert out.startswith("builtin.module {")
    assert "func.func @f(%x: tensor<?x4xf32>, %w: tensor<4x2xf32>) -> tensor<?x2xf32> {" in out
    assert "%1 = sf.exp %0 : (tensor<?x2xf32>) -> tensor<?x2xf32>" in out
    # Printing is a fixed point: the output parses back to the same text.
    monkeypatch.setattr(sys, "stdin", io.StringIO(out))
    status, again, _ = run(capsys, "opt", "-")
    assert status == 0
    assert again == out


def test_opt_round_trip_through_files(capsys, tmp_path):
    source = tmp_path / "small.mlir"
    source.write_text(SMALL_MODULE)
    first = tmp_path / "first.mlir"
    second = tmp_path / "second.mlir"
    assert run(capsys, "opt", source, "-o", first) == (0, "", "")
    assert run(capsys, "opt", first, "-o", second) == (0, "", "")
    assert first.read_text() == second.read_text()
    assert "sf.matmul %x, %w" in first.read_text()


def test_opt_parse_error_names_the_position(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("func.func @g(\n"))
    status, _, err = run(capsys, "opt", "-")
    message = assert_one_error_line(status, err, "opt")
    assert re.match(r"<stdin>:\d+:\d+: ", message)


def test_opt_missing_file(capsys, tmp_path):
    status, _, err = run(capsys, "opt", tmp_path / "none.mlir")
    message = assert_one_error_line(status, err, "opt")
    assert "none.mlir" in message


# --------------------------------------------------------------------------- console script


def _console_script() -> Path:
    script = Path(sys.executable).parent / "stageflow"
    if not script.exists():
        pytest.skip("the stageflow console script is not installed beside the interpreter")
    return script


def test_console_script_dump_and_error(model_file):
    script = _console_script()
    result = subprocess.run([script, "dump", f"{model_file}:model", *ARGS],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "func.func @model" in result.stdout
    assert f'loc("{model_file}":{MATMUL_LINE}:9)' in result.stdout

    result = subprocess.run([script, "dump", f"{model_file}:mismatch",
                             "--arg", "f32[3,4]", "--arg", "f32[4,2]"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stdout == ""
    message = assert_one_error_line(1, result.stderr, "dump")
    assert "add" in message and f"{model_file}:{MISMATCH_LINE}" in message


def test_console_script_devices():
    result = subprocess.run([_console_script(), "devices"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("/device:CPU:0  CPU  host memory ")


def test_an_unwritable_output_is_a_user_error(capsys, model_file, tmp_path):
    """Once 'internal error: FileNotFoundError'."""
    target = tmp_path / "missing" / "model.so"
    status, _, err = run(capsys, "compile", f"{model_file}:staged", "--arg", "f32[2,4]",
                         "-o", target)
    message = assert_one_error_line(status, err, "compile")
    assert message.startswith("cannot write") and "missing" in message


def test_report_to_an_unwritable_output_is_a_user_error(capsys, model_file, tmp_path):
    """Found by the command-line campaign: 'internal error: FileNotFoundError'."""
    target = tmp_path / "missing" / "report.html"
    status, _, err = run(capsys, "report", f"{model_file}:staged", "--arg", "f32[2,4]",
                         "-o", target)
    message = assert_one_error_line(status, err, "report")
    assert message.startswith("cannot write") and "missing" in message


def test_a_target_in_a_file_that_is_not_python_is_a_user_error(capsys, tmp_path):
    """Found by the command-line campaign: 'internal error: AttributeError: 'NoneType'
    object has no attribute 'loader''."""
    source = tmp_path / "model.mlir"
    source.write_text("func.func @f() {\n}\n")
    status, _, err = run(capsys, "dump", f"{source}:f", "--arg", "f32[2]")
    message = assert_one_error_line(status, err, "dump")
    assert message == f"cannot import {source}: not a Python file (expected FILE.py:FUNC)"


def test_more_logical_cpus_than_threads_is_a_user_error():
    """Found by the command-line campaign (memory capped at 2 GB): ``--logical-cpus 100000``
    ran out of threads, 'internal error: RuntimeError: can't start new thread'."""
    def cap_memory():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    result = subprocess.run([sys.executable, "-m", "stageflow.cli", "devices",
                             "--logical-cpus", "100000"], capture_output=True, text=True,
                            timeout=120, preexec_fn=cap_memory)
    assert result.returncode == 1
    assert result.stderr.startswith("stageflow devices: error: cannot start the devices: ")


def test_opt_loads_neither_the_code_generators_nor_optional_packages(tmp_path):
    """Each command imports what it uses when it runs: `opt` (every lit test's) the IR and
    the passes, not llvmlite, Ray's worker or onnx (an optional dependency)."""
    source = tmp_path / "small.mlir"
    source.write_text(SMALL_MODULE)
    probe = ("import sys\nfrom stageflow.cli import main\n"
             f"assert main(['opt', {str(source)!r}, '-o', {str(tmp_path / 'out.mlir')!r}]) == 0\n"
             "print(sorted(m for m in ('llvmlite', 'onnx', 'stageflow.distribute.worker') "
             "if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    assert "func.func @f" in (tmp_path / "out.mlir").read_text()


def test_a_command_missing_its_optional_package_says_so(capsys, monkeypatch, tmp_path):
    for name in [m for m in sys.modules if m.startswith(("stageflow.onnx", "onnx"))
                 or m == "stageflow.cli.export"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` raises ImportError
    status, _, err = run(capsys, "export", f"{tmp_path / 'm.py'}:f", "-o", tmp_path / "f.onnx")
    message = assert_one_error_line(status, err, "export")
    assert message == "this command needs the onnx package, which is not installed"


def test_dump_of_a_recursive_function(capsys, tmp_path):
    path = tmp_path / "recursive.py"
    path.write_text(textwrap.dedent("""\
        import stageflow as sf


        @sf.function
        def power(x, n=2):
            if n == 0:
                return sf.ones_like(x)
            return x * power(x, n - 1)
        """))
    status, out, err = run(capsys, "dump", f"{path}:power", "--arg", "f32[2]")
    assert status == 0, err
    assert "@power_1" in out and "sf.multiply" in out
