"""Every example runs to completion (CI runs them as users would, from the README, with the
quick settings their own options offer), and the MLP example resumed from its checkpoints
trains exactly as an uninterrupted run."""

import os
import pathlib
import subprocess
import sys

import pytest

import stageflow as sf

pytestmark = pytest.mark.slow

# Each example runs on one core (see `run`) beside the suite's other process, but the
# data-parallel example's Ray workers, which must run at once, have the cores alone.
ALONE = {"data_parallel.py"}

EXAMPLES = sorted((pathlib.Path(__file__).resolve().parents[1] / "examples").glob("*.py"))

# Run three times, with its quick options, by the resumption test below.
RUN_ELSEWHERE = {"mlp_digits.py"}

# The options each example offers for a quick run; every code path runs, on fewer steps.
QUICK = {
    "bert.py": ["--small"],
    "data_parallel.py": ["--steps", "5"],
    "gpt2.py": ["--small"],
    "keras_fit.py": ["--small", "--logdir", "logs"],  # in the fresh folder, not /tmp
    "resnet.py": ["--steps", "1"],
    # In one process: the Ray workers' strategy is data_parallel.py's (and
    # tests/distribute's), whose cluster would keep the suite's other process waiting.
    "resnet_data_parallel.py": ["--steps", "1", "--batch", "4", "--strategy", "mirrored"],
    "transformer.py": ["--small", "--steps", "100"],
}


def run(script, *args, cwd, one_core=True):
    """Run `script`, on one core unless `one_core` is false: there its split ops take one
    task each, where a training loop of split ops beside another process's threads waits on
    its workers (conftest's `cores`), so an example either stops the suite's other process
    or keeps to one core of its own (the suite's process gwN picks the Nth, so that two
    examples do not share one). The child inherits the affinity of the thread that starts
    it (Linux), set only around its start."""
    saved = os.sched_getaffinity(0)
    if one_core:
        worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:])
        os.sched_setaffinity(0, {sorted(saved)[worker % len(saved)]})
    try:
        process = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, cwd=cwd)
    finally:
        os.sched_setaffinity(0, saved)
    try:
        out, err = process.communicate(timeout=300)
    finally:
        process.kill()
    assert process.returncode == 0, out[-2000:] + err[-4000:]
    return out


@pytest.mark.parametrize("script", [
    pytest.param(p, marks=pytest.mark.exclusive) if p.name in ALONE else p for p in EXAMPLES
    if p.name not in RUN_ELSEWHERE
], ids=lambda p: p.name)
def test_example_runs(script, tmp_path):
    run(script, *QUICK.get(script.name, []), one_core=script.name not in ALONE,
        cwd=tmp_path)  # files land in a fresh folder


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
