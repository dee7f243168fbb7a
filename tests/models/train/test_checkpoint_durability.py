"""A saving process killed (SIGKILL) at random moments, many times: the latest checkpoint
always restores to a complete, consistent state, and the one before stays loadable."""

import multiprocessing
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import stageflow as sf

# Not run with the cores to itself: a slower saver is killed at other moments of its saves,
# as random as any, and the directory keeps its checkpoints from one saver to the next, so
# that every round after the first save finished has a latest checkpoint to check.

SHAPES = [(256, 256), (64,), (512, 128), ()]


def objects():
    return {f"w{i}": sf.Variable(np.zeros(shape, np.float32)) for i, shape in enumerate(SHAPES)}


def keep_saving(directory: str) -> None:
    """Save forever: every variable holds the number of the save that writes it."""
    variables = objects()
    manager = sf.train.CheckpointManager(sf.train.Checkpoint(**variables), directory,
                                         max_to_keep=3)
    if manager.latest_checkpoint is not None:
        manager._checkpoint.restore(manager.latest_checkpoint)
    while True:
        step = float(manager._checkpoint.save_counter.numpy()) + 1
        for v in variables.values():
            v.assign(np.full(v.shape, step, np.float32))
        manager.save()


@pytest.mark.slow
def test_a_killed_saver_always_leaves_a_consistent_latest_checkpoint(tmp_path):
    directory = str(tmp_path / "run")
    context = multiprocessing.get_context("fork")
    rng = np.random.default_rng(0)
    seen = []
    for _ in range(40):
        saver = context.Process(target=keep_saving, args=(directory,), daemon=True)
        saver.start()
        time.sleep(float(rng.uniform(0.02, 0.25)))
        os.kill(saver.pid, signal.SIGKILL)
        saver.join()
        latest = sf.train.latest_checkpoint(directory)
        if latest is None:
            continue  # killed before its first save finished
        variables = objects()
        ckpt = sf.train.Checkpoint(**variables)
        ckpt.restore(latest).assert_consumed()
        step = int(ckpt.save_counter.numpy())
        assert latest.endswith(f"ckpt-{step}")
        for v in variables.values():
            np.testing.assert_array_equal(v.numpy(), np.full(v.shape, step, np.float32))
        for path in sf.train.CheckpointManager(ckpt, directory).checkpoints:
            sf.train.Checkpoint(**objects()).restore(path).assert_consumed()
        seen.append(step)
    assert len(seen) >= 30 and seen == sorted(seen) and seen[-1] > seen[0]


FIFO_PROBE = """
import os, sys
import stageflow as sf
directory, kind = sys.argv[1], sys.argv[2]
ckpt = sf.train.Checkpoint(step=sf.Variable(0))
try:
    if kind == "pointer":
        sf.train.latest_checkpoint(directory)
    elif kind == "manager":
        sf.train.CheckpointManager(ckpt, directory, max_to_keep=2).latest_checkpoint
    else:
        ckpt.restore(os.path.join(directory, "ckpt-1"))
except ValueError as error:
    print(error)
"""


@pytest.mark.parametrize("kind", ["pointer", "manager", "checkpoint"])
def test_a_fifo_in_place_of_a_file_is_refused_not_waited_on(tmp_path, kind):
    """A FIFO as the checkpoint pointer or as a checkpoint file: a ValueError naming it,
    at once (opening a FIFO to read waits for a writer; run in a child so that a wait is a
    timeout, not a hung suite)."""
    ckpt = sf.train.Checkpoint(step=sf.Variable(0))
    ckpt.save(os.path.join(tmp_path, "ckpt"))
    target = tmp_path / ("checkpoint" if kind != "checkpoint" else "ckpt-1.safetensors")
    target.unlink()
    os.mkfifo(target)
    result = subprocess.run([sys.executable, "-c", FIFO_PROBE, str(tmp_path), kind],
                            capture_output=True, text=True, timeout=60)
    assert f"{str(target)!r} is not a regular file" in result.stdout, result.stderr
