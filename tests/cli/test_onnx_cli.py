"""The `stageflow` command on ONNX files: ``dump``, ``report`` and ``compile`` take
``model.onnx`` as they take ``FILE.py:FUNC`` (the model's own input signature, ``--arg`` to
shape it), ``onnx-ops`` lists the ops imported, bad files are one error line. (ONNX models
compiled ahead of time and called from C: the ONNX campaign's ``--aot`` mode, a slice of which
is in tests/onnx/test_backend_suite.py.)"""

from __future__ import annotations

import re
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import stageflow as sf
from stageflow.cli import main

CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """`stageflow ARGV...` in-process: (exit status, stdout, stderr)."""
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def error_line(status: int, err: str, command: str) -> str:
    """Exit status 1 and one stderr line ``stageflow CMD: error: ...``; its message."""
    assert status == 1 and "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"stageflow {command}: error: "), lines[0]
    return lines[0].split(": error: ", 1)[1]


@pytest.fixture
def model_file(tmp_path):
    """y = relu(x @ w) with x [batch, 4], nodes named "dense" and "act"."""
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="dense"),
         helper.make_node("Relu", ["h"], ["y"], name="act")], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])], [w])
    path = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_onnx_ops_lists_the_ops_with_their_domains(capsys):
    status, out, _ = run(capsys, "onnx-ops")
    lines = out.splitlines()
    assert status == 0 and lines[0].startswith("# ai.onnx opsets 13 to ")
    assert {"ai.onnx Add", "ai.onnx If", "ai.onnx Loop", "ai.onnx Scan"} <= set(lines[1:])
    assert len(lines) - 1 == len(sf.onnx.supported_ops())


def test_dump_takes_the_models_signature_and_node_names(capsys, model_file):
    status, out, _ = run(capsys, "dump", model_file)
    assert status == 0
    assert "func.func @tiny(%0: tensor<?x4xf32>" in out
    assert 'loc("dense"("tiny.onnx":1:0))' in out and 'loc("act"("tiny.onnx":2:0))' in out


def test_dump_arg_shapes_the_inputs_and_stage_is_honoured(capsys, model_file):
    status, out, _ = run(capsys, "dump", model_file, "--arg", "f32[2,4]", "--stage", "optimized")
    assert status == 0 and "tensor<2x4xf32>" in out and "tensor<?x4xf32>" not in out


@pytest.mark.parametrize(("args", "message"), [
    (["--arg", "f32[2,4]", "--arg", "f32[3]"], r"takes 1 inputs \(x\); --arg gives 2"),
    (["--arg", "i32[2,4]"], "input 'x' of .* is float32; --arg gives int32"),
    (["--arg", "f32[2,5]"], r"'dense' \(MatMul, opset 17\)"),
])
def test_dump_errors_are_one_line(capsys, model_file, args, message):
    status, _, err = run(capsys, "dump", model_file, *args)
    assert re.search(message, error_line(status, err, "dump"))


def test_bad_files_are_one_error_line(capsys, tmp_path):
    status, _, err = run(capsys, "dump", tmp_path / "missing.onnx")
    assert "no such file" in error_line(status, err, "dump")
    (tmp_path / "foreign.onnx").write_bytes(b"not a model")
    status, _, err = run(capsys, "compile", tmp_path / "foreign.onnx", "-o", tmp_path / "x.so")
    assert "is not an ONNX model" in error_line(status, err, "compile")


def test_report_writes_the_page(capsys, model_file, tmp_path):
    status, _, _ = run(capsys, "report", model_file, "-o", tmp_path / "page.html")
    page = (tmp_path / "page.html").read_text()
    assert status == 0 and "<html" in page and "dense" in page


def test_compile_writes_the_library_and_its_header(capsys, model_file, tmp_path):
    status, _, err = run(capsys, "compile", model_file, "-o", tmp_path / "libtiny.so",
                         "--header", tmp_path / "tiny.h")
    assert status == 0, err
    assert (tmp_path / "libtiny.so").stat().st_size > 0
    assert "int32_t tiny(" in (tmp_path / "tiny.h").read_text()
