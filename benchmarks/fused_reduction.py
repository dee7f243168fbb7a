"""Reductions fused into their elementwise producers: ``reduce_sum(x * x, axis=-1)`` and a
softmax over a [4096, 1024] float32 matrix, staged with the default pipeline, staged with
reductions left out of the kernels (``fuse{reductions=false}``, as before they fused) and
in NumPy, timed round by round in one run.

    python -m benchmarks.fused_reduction
"""

from __future__ import annotations

import sys

import numpy as np

import stageflow as sf
from benchmarks.timing import interleaved_medians
from stageflow.passes import DEFAULT_PIPELINE
from stageflow.runtime.executable import Executable
from stageflow.staging.compiler import Compilation

SHAPE = (4096, 1024)
UNFUSED_PIPELINE = DEFAULT_PIPELINE.replace("fuse", "fuse{reductions=false}")


def sum_of_squares(x):
    return sf.reduce_sum(x * x, axis=-1)


def softmax(x):
    e = sf.exp(x - sf.reduce_max(x, axis=-1, keepdims=True))
    return e / sf.reduce_sum(e, axis=-1, keepdims=True)


def numpy_sum_of_squares(x: np.ndarray) -> np.ndarray:
    return np.square(x).sum(axis=-1)


def numpy_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def executable(function, x: np.ndarray, pipeline: str) -> Executable:
    """`function` staged for `x` and compiled after `pipeline` (both contenders are called
    the same way, on the array, without `sf.function`'s argument handling)."""
    concrete = sf.function(function).get_concrete_function(x)
    compilation = Compilation.of_graphs(concrete.name, [(concrete.graph, concrete.name)])
    compilation.run_passes(pipeline)
    return compilation.executables([concrete.name])[0]


def repeat(call, *args):
    def run(n: int) -> None:
        for _ in range(n):
            call(*args)

    return run


def measure(function, reference, x: np.ndarray) -> dict[str, float]:
    fused, plain = (executable(function, x, p) for p in (DEFAULT_PIPELINE, UNFUSED_PIPELINE))
    for compiled in (fused, plain):
        np.testing.assert_allclose(compiled.run([x])[0], reference(x), rtol=1e-5, atol=1e-6)
    return interleaved_medians({
        "fused": repeat(fused.run, [x]),
        "unfused": repeat(plain.run, [x]),
        "numpy": repeat(reference, x),
    }, rounds=11)


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    del argv
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    results = {}
    for name, function, reference in (("reduce_sum(x * x, axis=-1)", sum_of_squares,
                                       numpy_sum_of_squares),
                                      ("softmax(x, axis=-1)", softmax, numpy_softmax)):
        times = measure(function, reference, x)
        results[name] = times
        print(f"{name} over {SHAPE[0]}x{SHAPE[1]} f32: fused {times['fused'] * 1e3:.2f} ms, "
              f"unfused {times['unfused'] * 1e3:.2f} ms, NumPy {times['numpy'] * 1e3:.2f} ms; "
              f"fused is {times['unfused'] / times['fused']:.2f}x unfused, "
              f"{times['numpy'] / times['fused']:.2f}x NumPy")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
