"""Checkpoint bandwidth: `sf.train.Checkpoint.write` and `restore` against `numpy.save` and
`numpy.load` of the same arrays to the same disk.

    python -m benchmarks.checkpoint [--megabytes 256]

The state is a model-like set of float32 variables (a few large matrices and many small
vectors, `--megabytes` in all). Each round writes the checkpoint (a safetensors file written
under a temporary name, fsynced, renamed, the directory fsynced: durable) and the same
arrays with ``numpy.save`` into one file, twice: as NumPy users usually do (no fsync: the
data may still be in the page cache when it returns) and fsynced (the same durability as
the checkpoint); then reads each back (`restore` into the live variables; ``numpy.load``
of every array). Printed: the median bandwidth of each, and the ratios. Goal: saving at
least 0.8x ``numpy.save``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

import numpy as np

import stageflow as sf

ROUNDS = 7


def make_state(megabytes: int) -> dict[str, sf.Variable]:
    """Large matrices (90%) and small vectors (10%) of float32, `megabytes` in all."""
    rng = np.random.default_rng(0)
    total = megabytes * 2**20 // 4
    large = [rng.standard_normal((1024, (total * 9 // 10) // 1024 // 8)).astype(np.float32)
             for _ in range(8)]
    small = [rng.standard_normal((total // 10 // 200,)).astype(np.float32) for _ in range(200)]
    return {f"v{i}": sf.Variable(a) for i, a in enumerate(large + small)}


def _numpy_save(path: str, arrays: list[np.ndarray], fsync: bool) -> None:
    with open(path, "wb") as f:
        for array in arrays:
            np.save(f, array)
        if fsync:
            f.flush()
            os.fsync(f.fileno())


def _numpy_load(path: str, count: int) -> list[np.ndarray]:
    with open(path, "rb") as f:
        return [np.load(f) for _ in range(count)]


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.checkpoint",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=256)
    args = parser.parse_args(argv)
    state = make_state(args.megabytes)
    arrays = [v.numpy() for v in state.values()]
    size = sum(a.nbytes for a in arrays)
    checkpoint = sf.train.Checkpoint(**state)
    directory = tempfile.mkdtemp(prefix="sf_ckpt_bench_")
    samples: dict[str, list[float]] = {k: [] for k in (
        "checkpoint write", "numpy.save", "numpy.save + fsync", "checkpoint restore",
        "numpy.load")}
    try:
        ckpt_path = os.path.join(directory, "ckpt")
        npy_path = os.path.join(directory, "arrays.npy")
        runs = {
            "checkpoint write": lambda: checkpoint.write(ckpt_path),
            "numpy.save": lambda: _numpy_save(npy_path, arrays, fsync=False),
            "numpy.save + fsync": lambda: _numpy_save(npy_path, arrays, fsync=True),
            "checkpoint restore": lambda: checkpoint.restore(ckpt_path),
            "numpy.load": lambda: _numpy_load(npy_path, len(arrays)),
        }
        for run in runs.values():  # warm: files exist, pages allocated
            run()
        for _ in range(ROUNDS):
            for name, run in runs.items():
                start = time.perf_counter()
                run()
                samples[name].append(time.perf_counter() - start)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    gbs = {name: size / statistics.median(times) / 1e9 for name, times in samples.items()}
    print(f"checkpoint of {len(arrays)} float32 arrays, {size / 2**20:.0f} MiB, median of "
          f"{ROUNDS} alternating rounds")
    for name, value in gbs.items():
        print(f"  {name:<20} {value:6.2f} GB/s")
    result = {
        **{f"{name} GB/s": value for name, value in gbs.items()},
        "save ratio": gbs["checkpoint write"] / gbs["numpy.save"],
        "save ratio fsync": gbs["checkpoint write"] / gbs["numpy.save + fsync"],
        "restore ratio": gbs["checkpoint restore"] / gbs["numpy.load"],
    }
    print(f"write: {result['save ratio']:.2f}x numpy.save (goal >= 0.8), "
          f"{result['save ratio fsync']:.2f}x numpy.save + fsync; "
          f"restore: {result['restore ratio']:.2f}x numpy.load")
    return result


if __name__ == "__main__":
    main()
