"""``stageflow export FILE.py:FUNC --arg ... -o OUT.onnx``, run in-process: the model it
writes runs in ONNX Runtime to the function's numbers; each failure is one error line."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest

import stageflow as sf
from stageflow.cli import main

MODEL = textwrap.dedent("""\
    import stageflow as sf

    counter = sf.Variable(0.0)


    def model(x, w):
        return sf.nn.relu(sf.matmul(x, w))


    def counts(x):
        counter.assign_add(1.0)
        return x


    @sf.function(input_signature=[sf.TensorSpec([None, 2], sf.float32)])
    def doubled(x):
        return x * 2.0
""")


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
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def error_line(capsys, *argv: str) -> str:
    """The one stderr line of a failing `stageflow ARGV...`, which exits with status 1."""
    status, _, err = run(capsys, *argv)
    assert status == 1 and "Traceback" not in err
    (line,) = err.splitlines()
    assert line.startswith("stageflow export: error: "), line
    return line


def test_export_writes_a_model_onnx_runtime_runs(capsys, model_file, tmp_path):
    out = tmp_path / "model.onnx"
    status, _, err = run(capsys, "export", f"{model_file}:model", "--arg", "f32[?,4]",
                         "--arg", "f32[4,2]", "-o", out, "--opset", "21")
    assert (status, err) == (0, "")
    model = onnx.load(out)
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 21
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    w = np.ones((4, 2), np.float32)
    session = onnxruntime.InferenceSession(out, providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"x": x, "w": w})
    np.testing.assert_allclose(got, sf.nn.relu(sf.matmul(x, w)).numpy())


def test_export_errors_are_one_line(capsys, model_file, tmp_path):
    refused = error_line(capsys, "export", f"{model_file}:counts", "--arg", "f32[]",
                         "-o", tmp_path / "c.onnx")
    assert "cannot export assign_variable" in refused
    assert "user_model.py:11: counter.assign_add(1.0)" in refused
    assert not (tmp_path / "c.onnx").exists()
    specs = ["--arg", "f32[2,4]", "--arg", "f32[4,2]"]
    wrong = error_line(capsys, "export", f"{model_file}:model", *specs, "-o", tmp_path / "m.so")
    assert "write OUT.onnx" in wrong
    opset = error_line(capsys, "export", f"{model_file}:model", *specs, "-o",
                       tmp_path / "m.onnx", "--opset", "9")
    assert "opsets 18 to" in opset
    unsigned = error_line(capsys, "export", f"{model_file}:model", "-o", tmp_path / "m.onnx")
    assert "--arg" in unsigned


def test_export_takes_the_functions_own_signature(capsys, model_file, tmp_path):
    status, _, err = run(capsys, "export", f"{model_file}:doubled", "-o", tmp_path / "d.onnx")
    assert (status, err) == (0, "")
    (x,) = onnx.load(tmp_path / "d.onnx").graph.input
    assert x.name == "x" and x.type.tensor_type.shape.dim[1].dim_value == 2
