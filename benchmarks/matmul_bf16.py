"""Matmul in bfloat16 (float32 beside it), n = 512, 1024, 2048: stageflow staged and eager
against PyTorch's bfloat16 matmul (oneDNN), in one run.

    python -m benchmarks.matmul_bf16 [N ...]

Each framework runs in a fresh process of its own, in alternating rounds (stageflow,
PyTorch, stageflow, PyTorch): their thread pools would otherwise spin against each other.
A process reports each size's median of several timed calls; the best of the rounds is
kept. The goal (issue "real-size models and bfloat16"): bfloat16 at least 0.8x PyTorch's
at every size. Where the CPU has no AVX-512 BF16 stageflow's bfloat16 matmul is NumPy's
float32 route, and the line says so. PyTorch is optional: without it, only stageflow's
figures print.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

ROUNDS = 2
GOAL = 0.8

STAGEFLOW = r"""
import json, sys
import numpy as np
import stageflow as sf
from benchmarks.timing import interleaved_medians
from stageflow.codegen.lowered import gemm_bf16
from stageflow.runtime.eager_kernels import KERNELS
out = {"kernel": gemm_bf16.host_available()}
for n in [int(a) for a in sys.argv[1:]]:
    rng = np.random.default_rng(0)
    runs = {}
    for dtype in ("bfloat16", "float32"):
        a, b = (sf.constant(rng.standard_normal((n, n)).astype(getattr(sf, dtype)))
                for _ in range(2))
        staged = sf.function(sf.matmul)
        staged(a, b).numpy()
        sf.matmul(a, b).numpy()
        KERNELS.settle()
        def loop(f, a=a, b=b):
            def run(k):
                for _ in range(k):
                    f(a, b).numpy()
            return run
        runs[f"staged {dtype}"] = loop(staged)
        runs[f"eager {dtype}"] = loop(sf.matmul)
    t = interleaved_medians(runs, rounds=5, min_time=0.2)
    out[n] = {name: 2 * n**3 / s / 1e9 for name, s in t.items()}
print(json.dumps(out))
"""

TORCH = r"""
import json, sys
import torch
from benchmarks.timing import interleaved_medians
out = {}
for n in [int(a) for a in sys.argv[1:]]:
    runs = {}
    for dtype in ("bfloat16", "float32"):
        a, b = (torch.randn(n, n, dtype=getattr(torch, dtype)) for _ in range(2))
        torch.matmul(a, b)
        def loop(a=a, b=b):
            def run(k):
                for _ in range(k):
                    torch.matmul(a, b)
            return run
        runs[f"torch {dtype}"] = loop()
    t = interleaved_medians(runs, rounds=5, min_time=0.2)
    out[n] = {name: 2 * n**3 / s / 1e9 for name, s in t.items()}
print(json.dumps(out))
"""


def _child(code: str, sizes: list[int]) -> dict:
    run = subprocess.run([sys.executable, "-c", code, *map(str, sizes)], capture_output=True,
                         text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def _best(rounds: list[dict], sizes: list[int]) -> dict[int, dict[str, float]]:
    best: dict[int, dict[str, float]] = {}
    for result in rounds:
        for n in sizes:
            for name, rate in result[str(n)].items():
                best.setdefault(n, {})[name] = max(best.get(n, {}).get(name, 0.0), rate)
    return best


def main(sizes: list[int]) -> dict:
    has_torch = importlib.util.find_spec("torch") is not None
    ours, theirs = [], []
    for _ in range(ROUNDS):
        ours.append(_child(STAGEFLOW, sizes))
        if has_torch:
            theirs.append(_child(TORCH, sizes))
    rates = _best(ours, sizes)
    if has_torch:
        for n, figures in _best(theirs, sizes).items():
            rates[n].update(figures)
    route = ("the CPU's bfloat16 dot products" if ours[0]["kernel"]
             else "no AVX-512 BF16 here: NumPy's float32 route")
    print(f"matmul GFLOP/s, best of {ROUNDS} alternating rounds (medians), n x n x n; "
          f"stageflow's bfloat16: {route}")
    print("      n  staged bf16  eager bf16  torch bf16  ratio    staged f32  torch f32")
    for n in sizes:
        r = rates[n]
        torch_bf16 = r.get("torch bfloat16")
        ratio = (f"{r['staged bfloat16'] / torch_bf16:4.2f}x" if torch_bf16 else "   -  ")
        print(f"  {n:5d}  {r['staged bfloat16']:11.0f}  {r['eager bfloat16']:10.0f}  "
              f"{torch_bf16 or float('nan'):10.0f}  {ratio}  {r['staged float32']:10.0f}  "
              f"{r.get('torch float32', float('nan')):9.0f}")
    if has_torch:
        least = min(rates[n]["staged bfloat16"] / rates[n]["torch bfloat16"] for n in sizes)
        print(f"  least bfloat16 ratio {least:.2f}x (goal >= {GOAL}: "
              f"{'met' if least >= GOAL else 'not met'})")
    return rates


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [512, 1024, 2048])
