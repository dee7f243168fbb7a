"""conv2d bfloat16 on ResNet-50's shapes: stageflow's compiled convolutions (the CPU's
bfloat16 dot products, `codegen.lowered.conv.bfloat16`) against PyTorch's bfloat16
convolutions (oneDNN), NHWC (channels-last) on both sides.

    python -m benchmarks.conv_bf16 [ROUNDS]

For each layer (batch 8, "SAME"): GFLOP/s of the forward conv, of its input gradient and
of its filter gradient, each its own op (stageflow: the primitive alone in a staged
function; PyTorch: ``conv2d`` and ``aten.convolution_backward`` asking for one gradient).
Each side runs in a fresh process of its own, the two alternating (which goes first
changes every round), so that neither's threads, caches or allocator state weigh on the
other; a process times each op as the best of several calibrated loops, and the figures
are medians over the rounds, with the best round beside them (on a shared machine either
side's threads wait on a busy core now and then: both sides' rounds scatter widely).
Where the CPU lacks AVX-512 BF16, stageflow's side is NumPy's kernel (float32 copies) and
the script says so.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

# (input height and width, input channels, output channels, filter size, stride)
LAYERS = [(224, 3, 64, 7, 2), (56, 64, 64, 3, 1), (56, 64, 256, 1, 1), (56, 128, 128, 3, 2),
          (28, 128, 128, 3, 1), (14, 256, 256, 3, 1)]
BATCH = 8
OPS = ("forward", "input gradient", "filter gradient")

CHILD = r"""
import json, sys, time
import numpy as np
from benchmarks.conv_bf16 import BATCH, LAYERS, padding

def best(call):
    call()
    n = 1
    while True:
        start = time.perf_counter()
        for _ in range(n):
            call()
        if time.perf_counter() - start >= 0.05:
            break
        n *= 2
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            call()
        times.append((time.perf_counter() - start) / n)
    return min(times)

def stageflow_ops(x, w, g, k, stride):
    import ml_dtypes
    import stageflow as sf
    from stageflow.primitives.conv import (conv2d_filter_gradient_p, conv2d_input_gradient_p,
                                           conv2d_p)
    bf16 = np.dtype(ml_dtypes.bfloat16)
    x, w, g = (sf.constant(a.astype(bf16)) for a in (x, w, g))
    geometry = {"strides": (stride, stride), "padding": padding(x.shape[1], k, stride),
                "dilations": (1, 1)}
    forward = sf.function(lambda x, w: conv2d_p.bind(x, w, **geometry))
    inputs = sf.function(lambda g, w: conv2d_input_gradient_p.bind(
        g, w, input_size=tuple(x.shape[1:3]), **geometry))
    filters = sf.function(lambda x, g: conv2d_filter_gradient_p.bind(
        x, g, filter_size=(k, k), **geometry))
    return (lambda: forward(x, w), lambda: inputs(g, w), lambda: filters(x, g))

def torch_ops(x, w, g, k, stride):
    import torch
    torch.set_grad_enabled(False)
    last = torch.channels_last
    x = torch.from_numpy(x).permute(0, 3, 1, 2).to(torch.bfloat16).contiguous(memory_format=last)
    w = torch.from_numpy(w).permute(3, 2, 0, 1).to(torch.bfloat16).contiguous(memory_format=last)
    g = torch.from_numpy(g).permute(0, 3, 1, 2).to(torch.bfloat16).contiguous(memory_format=last)
    # PyTorch pads both sides alike: "SAME"'s odd pad at the end, given to both sides,
    # leaves the same positions (the extra row at the start is never reached).
    pad = -(-sum(padding(x.shape[2], k, stride)[0]) // 2)
    def backward(mask):
        return lambda: torch.ops.aten.convolution_backward(
            g, x, w, None, (stride, stride), (pad, pad), (1, 1), False, (0, 0), 1, mask)
    return (lambda: torch.nn.functional.conv2d(x, w, stride=stride, padding=pad),
            backward((True, False, False)), backward((False, True, False)))

side = sys.argv[1]
out = {}
for size, cin, cout, k, stride in LAYERS:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, size, size, cin)).astype(np.float32)
    w = rng.standard_normal((k, k, cin, cout)).astype(np.float32)
    o = -(-size // stride)
    g = rng.standard_normal((BATCH, o, o, cout)).astype(np.float32)
    ops = (stageflow_ops if side == "stageflow" else torch_ops)(x, w, g, k, stride)
    out[repr((size, cin, cout, k, stride))] = [best(op) for op in ops]
print(json.dumps(out))
"""


def padding(size: int, k: int, stride: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """TensorFlow's "SAME" pads of a square input and filter, ((top, bottom), (left,
    right)), the odd one at the end."""
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return (total // 2, total - total // 2), (total // 2, total - total // 2)


def flops(size: int, cin: int, cout: int, k: int, stride: int) -> int:
    """Multiply-adds times 2 of the forward conv (each gradient does as many)."""
    out = -(-size // stride)
    return 2 * BATCH * out * out * cout * k * k * cin


def child(side: str) -> dict[str, list[float]]:
    run = subprocess.run([sys.executable, "-c", CHILD, side], capture_output=True, text=True,
                         check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def main(rounds: int = 3) -> dict:
    from stageflow.codegen.lowered import gemm_bf16

    own = ("bfloat16 dot products" if gemm_bf16.host_available()
           else "no AVX-512 BF16 here: NumPy's kernel")
    print(f"conv2d bfloat16, batch {BATCH}, NHWC: stageflow / PyTorch GFLOP/s, medians of "
          f"{rounds} rounds of fresh processes (and the best round); stageflow: {own}")
    seconds: dict[str, dict[str, list[list[float]]]] = {"stageflow": {}, "torch": {}}
    for r in range(rounds):
        for side in (("stageflow", "torch") if r % 2 == 0 else ("torch", "stageflow")):
            for layer, times in child(side).items():
                seconds[side].setdefault(layer, []).append(times)
    results = {}
    for layer in LAYERS:
        size, cin, cout, k, stride = layer
        key = repr(layer)
        rates = {side: {summary: [flops(*layer) / summarize(t[i] for t in seconds[side][key])
                                  / 1e9 for i in range(len(OPS))]
                        for summary, summarize in (("median", statistics.median), ("best", min))}
                 for side in seconds}
        results[f"{size}x{size}x{cin} {k}x{k}/{stride} -> {cout}"] = rates
        line = "  ".join(
            f"{op} {ours:4.0f} / {theirs:4.0f} ({ours / theirs:.2f}x, best {best:4.0f} / "
            f"{their_best:4.0f})"
            for op, ours, theirs, best, their_best in zip(
                OPS, rates["stageflow"]["median"], rates["torch"]["median"],
                rates["stageflow"]["best"], rates["torch"]["best"], strict=True))
        print(f"  {size:3d}x{size:<3d}x{cin:<3d} {k}x{k}/{stride} -> {cout:3d}  {line}")
    return results


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
