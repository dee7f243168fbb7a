"""Fused elementwise chain: ``y = gelu_tanh(x * w + b) * 0.5 + x`` on float32 vectors.

    python -m benchmarks.fused_elementwise [LOG2_N ...]     (default: 22 24)

The workload of ``shared/anchors/fused_elementwise.py`` (x, w, b, y: same-shape float32
arrays, 16 bytes moved per element): the function is staged with `sf.function` (one fused
kernel, run on blocks of rows by every core) and, for reference, its kernel compiled alone
and called on one thread; timed against NumPy evaluating the same expression (a temporary
per op) and against NumPy's copy bandwidth (``np.copyto``, 8 bytes per element: read +
write), all in one run, interleaved round by round, medians; then jax.jit, torch.compile and
tf.function where installed (`benchmarks.incumbents`). GB is 1e9 bytes. Targets:
>= 24.5 GB/s at 2**22 (jax.jit here) and at least the copy bandwidth.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import stageflow as sf
from benchmarks import incumbents
from benchmarks.timing import interleaved_medians
from stageflow.codegen import compile_kernel
from stageflow.ir import parse_module
from stageflow.runtime.row_parallel import workers

C = float(np.sqrt(2.0 / np.pi))


def fused(x, w, b):
    """The anchor's expression, written once for stageflow tensors and NumPy arrays."""
    tanh = sf.tanh if isinstance(x, sf.Tensor) else np.tanh

    def gelu_tanh(z):
        return 0.5 * z * (1.0 + tanh(C * (z + 0.044715 * z * z * z)))

    return gelu_tanh(x * w + b) * 0.5 + x


def compiled_kernel():
    """Trace `fused` on float32[?] and compile its IR: (kernel, seconds to compile)."""
    spec = sf.TensorSpec([None], sf.float32)
    text = sf.function(fused).get_concrete_function(spec, spec, spec).ir("traced")
    start = time.perf_counter()
    kernel = compile_kernel(parse_module(text).ops.first)
    return kernel, time.perf_counter() - start


def repeat(function, *args):
    def run(n: int) -> None:
        for _ in range(n):
            function(*args)
    return run


def measure(kernel, staged, log2: int) -> dict[str, float]:
    n = 1 << log2
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    z = x.astype(np.float64) * w + b
    reference = 0.5 * z * (1 + np.tanh(C * (z + 0.044715 * z**3))) * 0.5 + x
    error = float(np.abs(kernel(x, w, b)[0] - reference).max())
    assert error < 1e-3, error
    destination = np.empty_like(x)
    destination[:] = 0  # fault the pages in before timing
    tx, tw, tb = (sf.constant(a) for a in (x, w, b))
    np.testing.assert_allclose(staged(tx, tw, tb).numpy(), reference, atol=1e-3)
    seconds = interleaved_medians({
        "stageflow kernel": repeat(kernel, x, w, b),
        "sf.function": repeat(staged, tx, tw, tb),
        "numpy expression": repeat(fused, x, w, b),
        "numpy copyto": repeat(np.copyto, destination, x),
    }, rounds=9, min_time=0.2)
    gbs = {name: (8 if name == "numpy copyto" else 16) * n / t / 1e9
           for name, t in seconds.items()}
    print(f"n = 2^{log2} float32 (max error vs float64 {error:.1e})")
    for name, t in seconds.items():
        moved = "8 B/elem" if name == "numpy copyto" else "16 B/elem"
        print(f"  {name:18s} {t * 1e3:8.3f} ms  {gbs[name]:6.2f} GB/s  ({moved})")
    staged_gbs = gbs["sf.function"]
    print(f"  sf.function / numpy expression: {staged_gbs / gbs['numpy expression']:5.2f}x   "
          f"sf.function / copy bandwidth: {staged_gbs / gbs['numpy copyto']:4.2f}   "
          f"(goal: >= 1, and jax.jit's 24.5 GB/s at 2^22)")
    for name, figure in incumbents.fused_elementwise(log2).items():
        gbs[name] = figure
        print(f"  {name:18s} {'':11s} {figure:6.2f} GB/s  (16 B/elem, timed after the above)")
    return {"log2n": log2, **{f"{name} GB/s": v for name, v in gbs.items()}}


def main(argv: list[str] | None = None) -> list[dict[str, float]]:
    log2s = [int(a) for a in (sys.argv[1:] if argv is None else argv)] or [22, 24]
    kernel, compile_seconds = compiled_kernel()
    spec = sf.TensorSpec([None], sf.float32)
    staged = sf.function(fused, input_signature=[spec, spec, spec])
    print(f"fused gelu_tanh chain: 'stageflow kernel' is the compiled kernel alone on one "
          f"thread (compiled in {compile_seconds * 1e3:.0f} ms); 'sf.function' runs the whole "
          f"pipeline ({staged.get_concrete_function().stats()['kernels']} kernel, blocks of "
          f"rows on {workers()} threads)")
    return [measure(kernel, staged, log2) for log2 in log2s]


if __name__ == "__main__":
    main()
