"""Every example runs to completion (CI runs them as users would, from the README, with the
quick settings their own options offer), and the MLP example resumed from its checkpoints
trains exactly as an uninterrupted run."""

import pathlib
import subprocess
import sys

import pytest

import stageflow as sf

# Training loops in child processes: their split ops need the cores (see conftest's `cores`).
pytestmark = pytest.mark.exclusive

EXAMPLES = sorted((pathlib.Path(__file__).resolve().parents[1] / "examples").glob("*.py"))

# The options each example offers for a quick run; every code path runs, on fewer steps.
QUICK = {
    "data_parallel.py": ["--steps", "5"],
    "mlp_digits.py": ["--small"],
    "resnet.py": ["--steps", "1"],
    "transformer.py": ["--small", "--steps", "100"],
}


def run(script, *args, cwd):
    result = subprocess.run([sys.executable, str(script), *args], capture_output=True,
                            text=True, timeout=300, cwd=cwd)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result.stdout


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(script, tmp_path):
    run(script, *QUICK.get(script.name, []), cwd=tmp_path)  # files land in a fresh folder


def saved_losses(directory):
    history = sf.train.NumpyState()
    sf.train.Checkpoint(history=history).restore(
        sf.train.latest_checkpoint(str(directory))).expect_partial()
    return history.losses


def test_mlp_digits_resumes_exactly_where_it_stopped(tmp_path):
    script = EXAMPLES[[p.name for p in EXAMPLES].index("mlp_digits.py")]
    common = ["--small", "--plot", str(tmp_path / "loss.png")]
    run(script, "--epochs", "3", "--checkpoint-dir", str(tmp_path / "a"), *common,
        cwd=tmp_path)
    resumed = run(script, "--epochs", "4", "--checkpoint-dir", str(tmp_path / "a"), *common,
                  cwd=tmp_path)
    assert "resumed from" in resumed and "after epoch 3" in resumed
    run(script, "--epochs", "4", "--checkpoint-dir", str(tmp_path / "b"), *common,
        cwd=tmp_path)
    losses = saved_losses(tmp_path / "a")
    assert len(losses) == 4
    assert losses == saved_losses(tmp_path / "b")
