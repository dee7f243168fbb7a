"""BERT-base-shaped encoder inference (`examples/bert.py`: 12 layers, width 768, sequence
128), batch 1 and 8, float32 and mixed bfloat16: stageflow staged against PyTorch eager and
torch.compile, float32 and under ``torch.autocast("cpu", torch.bfloat16)``, in one run.

    python -m benchmarks.bert [--layers N] [--batches 1 8] [--rounds 2]

Each framework runs in fresh processes of its own, in alternating rounds (their thread
pools would spin against each other in one process); each process reports per
configuration the median of timed calls after warm-up, and the best of the rounds is kept.
stageflow runs the model's function as it reads its variables, and frozen ("stageflow
frozen": `Function.freeze`, its weights constants, the mixed bfloat16 casts of them folded).
PyTorch's model is the same architecture (`nn.TransformerEncoderLayer`, post-norm, GELU,
no dropout, in inference mode), so the arithmetic is the same. The goal (issue "real-size
models and bfloat16"): stageflow's mixed bfloat16 at least torch.compile under autocast;
float32 at least the best incumbent. Beside each figure, the GFLOP/s it amounts to (the
matmuls' multiply-adds, attention's included, times two). PyTorch is optional.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys

WIDTH, FEED_FORWARD, LENGTH = 768, 3072, 128

STAGEFLOW = r"""
import json, sys
sys.path.insert(0, "examples")
import numpy as np
import stageflow as sf
import bert
from benchmarks.timing import interleaved_medians
layers, batches = int(sys.argv[1]), [int(b) for b in sys.argv[2:]]
runs = {}
for policy in ("float32", "mixed_bfloat16"):
    model = bert.build(policy, layers)
    infer = sf.function(lambda t, model=model: model(t))
    for batch in batches:
        x = bert.tokens(batch)
        for _ in range(4):  # the first calls compile (and are served meanwhile)
            infer(x).numpy()
        def run(k, infer=infer, x=x):
            for _ in range(k):
                infer(x).numpy()
        runs[f"stageflow {policy} {batch}"] = run
        frozen = infer.freeze(x)
        for _ in range(4):
            frozen(x).numpy()
        def run_frozen(k, frozen=frozen, x=x):
            for _ in range(k):
                frozen(x).numpy()
        runs[f"stageflow frozen {policy} {batch}"] = run_frozen
seconds = interleaved_medians(runs, rounds=3, min_time=0.3)
print(json.dumps(seconds))
"""

TORCH = r"""
import json, sys
import torch
from torch import nn
from benchmarks.timing import interleaved_medians
layers, batches = int(sys.argv[1]), [int(b) for b in sys.argv[2:]]
torch.manual_seed(0)

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(30522, 768)
        self.positions = nn.Embedding(128, 768)
        self.norm = nn.LayerNorm(768, eps=1e-12)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu",
                                       layer_norm_eps=1e-12, batch_first=True)
            for _ in range(layers))

    def forward(self, tokens):
        x = self.norm(self.tokens(tokens) + self.positions(torch.arange(tokens.shape[1])))
        for block in self.blocks:
            x = block(x)
        return x

model = Encoder().eval()
compiled = torch.compile(model)
runs = {}
for batch in batches:
    x = torch.randint(0, 30522, (batch, 128))
    for name, f in (("eager", model), ("compile", compiled)):
        for autocast in (False, True):
            def call(f=f, x=x, autocast=autocast):
                with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16,
                                                            enabled=autocast):
                    return f(x)
            for _ in range(3):
                call()
            def run(k, call=call):
                for _ in range(k):
                    call()
            runs[f"torch {name} {'bfloat16' if autocast else 'float32'} {batch}"] = run
seconds = interleaved_medians(runs, rounds=3, min_time=0.3)
print(json.dumps(seconds))
"""


def _child(code: str, layers: int, batches: list[int]) -> dict[str, float]:
    run = subprocess.run([sys.executable, "-c", code, str(layers), *map(str, batches)],
                         capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def flops(layers: int, batch: int) -> float:
    """The encoder's matmul arithmetic per call: four width x width projections and the
    feed-forward pair per token and layer, and attention's two products per head."""
    tokens = batch * LENGTH
    dense = tokens * (4 * WIDTH * WIDTH + 2 * WIDTH * FEED_FORWARD)
    attention = 2 * batch * LENGTH * LENGTH * WIDTH
    return 2.0 * layers * (dense + attention)


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    has_torch = importlib.util.find_spec("torch") is not None
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for code in (STAGEFLOW, TORCH) if has_torch else (STAGEFLOW,):
            for name, seconds in _child(code, args.layers, args.batches).items():
                best[name] = min(best.get(name, float("inf")), seconds)
    print(f"BERT-base-shaped encoder, {args.layers} layers, sequence {LENGTH}: sequences/s "
          f"(GFLOP/s), best of {args.rounds} alternating rounds of medians")
    for batch in args.batches:
        work = flops(args.layers, batch)
        line = [f"  batch {batch}:"]
        for name in sorted(n for n in best if n.endswith(f" {batch}")):
            rate = batch / best[name]
            line.append(f"{name[:-len(str(batch)) - 1]} {rate:.2f} ({work / best[name] / 1e9:.0f})")
        print("\n    ".join(line))
        if has_torch:
            for precision, policy in (("float32", "float32"), ("bfloat16", "mixed_bfloat16")):
                theirs = min(best[f"torch {kind} {precision} {batch}"]
                             for kind in ("eager", "compile"))
                for variant in ("stageflow", "stageflow frozen"):
                    ours = best[f"{variant} {policy} {batch}"]
                    print(f"    {precision}: {variant} / best PyTorch {theirs / ours:.2f}x")
    return best


if __name__ == "__main__":
    main()
