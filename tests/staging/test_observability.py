"""STAGEFLOW_DUMP_DIR / sf.config.dump_dir and STAGEFLOW_LOG / sf.config.log."""

from __future__ import annotations

import subprocess
import sys

import pytest

import stageflow as sf
from stageflow.codegen.targets import platform
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


# One program per compile path, each compiling a function named `scaled` (the staged
# gradient's forward/backward pair is `scaled_vjp`; AOT names its library symbol).
_PATHS = {
    "function": ("scaled", "f(x)\n"),
    "staged gradient": ("scaled_vjp", "with sf.GradientTape() as tape:\n"
                                      "    tape.watch(x)\n"
                                      "    y = f(x)\n"
                                      "tape.gradient(y, x)\n"),
    "saved": ("scaled", "f(x)\n"
                        "sf.saved.save(f, {out!r})\n"
                        "sf.saved.load({out!r})(x)\n"),
    "aot": ("scaled", "sf.aot.compile(f, sf.TensorSpec([3], sf.float32))\n"),
}
_PREAMBLE = (
    "import stageflow as sf\n"
    "@sf.function\n"
    "def scaled(x):\n"
    "    return sf.tanh(x) * 2.0\n"
    "f = scaled\n"
    "x = sf.ones((3,))\n"
)


@pytest.mark.parametrize("path", sorted(_PATHS))
def test_every_compile_path_dumps_and_logs_the_same_way(path, tmp_path):
    name, body = _PATHS[path]
    dumps = tmp_path / "dumps"
    code = _PREAMBLE + body.format(out=str(tmp_path / "saved"))
    env = {"STAGEFLOW_LOG": "compiles,passes", "STAGEFLOW_DUMP_DIR": str(dumps),
           "STAGEFLOW_CACHE": "0", "PATH": ""}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    compiled = [line for line in lines if line.startswith(f"stageflow[compiles] {name}: "
                                                          "compiled ")]
    assert compiled, result.stderr
    assert any(line.startswith(f"stageflow[passes] {name}: fuse ") for line in lines)
    prefix = f"{name}."
    files = sorted(p.name.split(".", 1)[1].removeprefix(prefix) for p in dumps.iterdir()
                   if p.name.split(".", 1)[1].startswith(prefix))
    first = "loaded.mlir" if path == "saved" else "traced.mlir"
    assert first in files, files
    assert "after.fuse.mlir" in files and "after.plan-buffers.mlir" in files, files
    if path == "staged gradient":
        assert "remat.mlir" in files and "after.remat.mlir" in files, files


def test_the_compile_command_dumps_and_logs(tmp_path):
    source = tmp_path / "model.py"
    source.write_text("import stageflow as sf\n\ndef scaled(x):\n    return sf.tanh(x) * 2.0\n")
    dumps = tmp_path / "dumps"
    env = {"STAGEFLOW_LOG": "compiles,passes", "STAGEFLOW_DUMP_DIR": str(dumps),
           "STAGEFLOW_CACHE": "0", "PATH": ""}
    result = subprocess.run(
        [sys.executable, "-m", "stageflow.cli", "compile", f"{source}:scaled", "--arg",
         "f32[3]", "-o", str(tmp_path / "scaled.o")],
        capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert (f"stageflow[compiles] scaled: compiled 1 kernels into a {platform.host_target()} "
            "library") in result.stderr
    assert any(p.name.endswith(".scaled.after.fuse.mlir") for p in dumps.iterdir())


def test_unknown_log_categories_warn_naming_the_known_ones():
    code = "import stageflow as sf\nsf.function(lambda x: x + 1.0)(sf.ones((2,)))\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={"STAGEFLOW_LOG": "compile", "PATH": ""})
    assert result.returncode == 0, result.stderr
    assert "unknown categories ['compile']" in result.stderr
    assert "known: all, compiles, passes, retraces" in result.stderr
