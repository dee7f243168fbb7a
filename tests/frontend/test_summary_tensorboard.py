"""What `sf.summary` writes, as the real TensorBoard serves it: a server started on the log
directory gives back, through its HTTP API, the losses a compiled training step wrote at
the optimizer's step, the histogram's buckets and the graph; headless Chromium draws its
scalars page. The server is stopped whatever happens."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from PIL import Image  # tensorboard's dependency

import stageflow as sf

pytestmark = pytest.mark.slow

STARTUP_SECONDS = 180  # the server imports its plugins and reads the directory on a busy machine


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()


@contextmanager
def tensorboard(logdir: Path, log: Path) -> Iterator[str]:
    """A TensorBoard server on `logdir` (its output in `log`), once it serves the run's
    scalars; killed on leaving, whatever happened. Python's loader, not the data server
    binary: one process, which killing stops."""
    port = free_port()
    with open(log, "wb") as output:
        server = subprocess.Popen(
            [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir),
             "--host", "127.0.0.1", "--port", str(port), "--load_fast=false"],
            stdout=output, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            assert server.poll() is None, f"TensorBoard exited:\n{log.read_text()[-3000:]}"
            try:
                if json.loads(get(f"{url}/data/plugin/scalars/tags")).get("train"):
                    break
            except (urllib.error.URLError, ConnectionError, json.JSONDecodeError):
                pass
            assert time.monotonic() < deadline, f"no TensorBoard:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        yield url
    finally:
        server.kill()
        server.wait(timeout=60)


def write_run(logdir: Path) -> tuple[list[float], np.ndarray]:
    """A compiled training step of linear regression writing its loss at the optimizer's
    step, the weights' histogram, and its graph. The losses it returned, the last data."""
    rng = np.random.default_rng(5)
    x = sf.constant(rng.normal(size=(32, 4)).astype(np.float32))
    y = sf.constant(rng.normal(size=(32, 1)).astype(np.float32))
    w = sf.Variable(np.zeros((4, 1), np.float32), name="w")
    optimizer = sf.optimizers.SGD(0.05)

    @sf.function(jit=True)
    def train_step(x, y):
        with sf.GradientTape() as tape:
            loss = sf.reduce_mean(sf.square(sf.matmul(x, w) - y))
        optimizer.apply_gradients([(tape.gradient(loss, w), w)])
        sf.summary.scalar("loss", loss, step=optimizer.iterations)
        sf.summary.histogram("w", w, step=optimizer.iterations, buckets=4)
        return loss

    writer = sf.summary.create_file_writer(logdir / "train")
    sf.summary.trace_on()
    with writer.as_default():
        losses = [float(train_step(x, y).numpy()) for _ in range(8)]
        sf.summary.trace_export("train_step", step=0)
    writer.close()
    return losses, w.numpy()


def test_tensorboard_serves_and_draws_what_was_written(tmp_path, chromium):
    losses, weights = write_run(tmp_path / "logs")
    with tensorboard(tmp_path / "logs", tmp_path / "tensorboard.log") as url:
        points = json.loads(get(f"{url}/data/plugin/scalars/scalars?run=train&tag=loss"))
        assert [step for _, step, _ in points] == list(range(1, 9))
        assert [value for _, _, value in points] == losses  # float32, as returned

        histograms = json.loads(get(f"{url}/data/plugin/histograms/histograms?run=train&tag=w"))
        _, step, buckets = histograms[-1]
        counts, edges = np.histogram(weights.astype(np.float64), bins=4)
        assert step == 8
        np.testing.assert_allclose([b[0] for b in buckets], edges[:-1], rtol=1e-6)
        np.testing.assert_array_equal([b[2] for b in buckets], counts)

        graphs = json.loads(get(f"{url}/data/plugin/graphs/info"))
        assert graphs["train"]["tags"]["train_step"]["op_graph"] is True
        graph = get(f"{url}/data/plugin/graphs/graph?run=train&tag=train_step").decode()
        assert 'op: "matmul"' in graph and 'name: "train_step/op' in graph

        shot = tmp_path / "scalars.png"
        flags = ["--headless", "--no-sandbox", "--disable-gpu",
                 f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,900",
                 "--virtual-time-budget=20000", f"--screenshot={shot}"]
        subprocess.run([chromium, *flags, f"{url}/#scalars"], capture_output=True, timeout=180,
                       check=True, env={**os.environ, "HOME": str(tmp_path)})
    pixels = np.asarray(Image.open(shot).convert("RGB"))
    assert pixels.shape == (900, 1280, 3)
    colours, counts = np.unique(pixels.reshape(-1, 3), axis=0, return_counts=True)
    assert len(colours) > 100 and counts.max() < 0.9 * counts.sum()  # drawn, not blank
    header = pixels[:60].reshape(-1, 3)  # TensorBoard's orange bar: the app rendered
    assert np.mean((header[:, 0] > 200) & (header[:, 2] < 80)) > 0.5
