"""STAGEFLOW_DUMP_DIR / sf.config.dump_dir and STAGEFLOW_LOG / sf.config.log."""

from __future__ import annotations

import subprocess
import sys

import stageflow as sf
from stageflow.passes import DEFAULT_PIPELINE


def test_dump_dir_gets_one_file_per_stage_in_pipeline_order(tmp_path, monkeypatch):
    monkeypatch.setattr(sf.config, "dump_dir", str(tmp_path))

    @sf.function
    def scaled(x):
        return sf.tanh(x) * 2.0

    scaled(sf.ones((3,)))
    names = sorted(p.name for p in tmp_path.iterdir())
    stages = [name.split(".", 2)[2] for name in names]
    assert stages[0] == "traced.mlir"
    passes = [name.split("{")[0] for name in DEFAULT_PIPELINE.split(",")]
    assert stages[1:] == [f"after.{p}.mlir" for p in passes]
    assert all(name.split(".")[1] == "scaled" for name in names)
    assert "sf.tanh" in (tmp_path / names[0]).read_text()


def test_log_lines_for_traces_retraces_and_passes():
    code = (
        "import stageflow as sf\n"
        "f = sf.function(lambda x: x + 1.0)\n"
        "f(sf.ones((2,))); f(sf.ones((3,)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={"STAGEFLOW_LOG": "compiles,retraces,passes", "PATH": ""})
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert any(line.startswith("stageflow[compiles] <lambda>: traced") for line in lines)
    assert any("compiled" in line for line in lines)
    assert "stageflow[retraces] <lambda>: argument 'x': shape changed from (2,) to (3,)" in lines
    assert any(line.startswith("stageflow[passes] <lambda>: cse") for line in lines)
