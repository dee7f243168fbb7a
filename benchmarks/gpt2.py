"""Greedy decoding of a GPT-2-small-shaped decoder (`examples/gpt2.py`: 12 layers, width 768,
vocabulary 50257, tied embeddings) with a key/value cache: tokens/s at batch 1 and 8, a
16-token prompt and 64 new tokens, float32 and bfloat16, stageflow (the whole generation
one staged function, its decoding one `sf.while_loop`) against PyTorch (the same
architecture in ``torch.nn``, the cache written in place, a Python loop per token; eager,
and its two steps under torch.compile), in one run.

    python -m benchmarks.gpt2 [--layers N] [--batches 1 8] [--rounds 2] [--no-compile]
                              [--threads N]

Each framework runs in fresh processes of its own, in alternating rounds (their thread
pools would spin against each other in one process); each process reports the median of
its timed calls after warm-up, and the best of the rounds is kept. Every configuration is
timed generating 64 tokens and generating 1 (the prompt step alone): the difference is the
decoding loop's, and the decoding rate is what the table shows, the prompt step's time
beside it. Both models have the same weights (drawn by `examples/gpt2.py`), so float32's
tokens are compared too. Decoding at batch 1 reads every weight once per token: beside the
batch-1 rates is the time that takes at this machine's memory bandwidth, measured with a
large NumPy copy in each process (its reads and writes counted, as STREAM's copy does).
PyTorch is optional.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys

PROMPT, STEPS = 16, 64

# What `--threads` sets in the children: OpenBLAS's pool, and the intra-op count of
# stageflow (`sf.config.threading`) and of PyTorch, both of which read OMP_NUM_THREADS.
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")

# Shared by both children: the prompts, the memory bandwidth, the timing of each run.
COMMON = r"""
import json, sys, time
sys.path.insert(0, "examples")
import numpy as np
import gpt2
from benchmarks.timing import interleaved_medians
layers, batches, kinds = int(sys.argv[1]), [int(b) for b in sys.argv[2].split(",")], sys.argv[3]

def bandwidth():
    # bytes moved per second copying 256 MiB, each byte read and written (STREAM's count)
    src = np.ones(1 << 26, np.float32)
    dst = np.empty_like(src)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - start)
    return 2 * src.nbytes / min(times)

def timed(generate, prompt):
    # generate(prompt, steps) -> tokens (batch, steps); a run of 64 tokens and one of 1
    for steps in (STEPS, 1, STEPS):  # warm-up (the first calls compile)
        generate(prompt, steps)
    return {steps: (lambda k, steps=steps: [generate(prompt, steps) for _ in range(k)])
            for steps in (STEPS, 1)}

arrays = gpt2.initial_weights(layers)
out = {"bandwidth": bandwidth(), "tokens": {}}
runs = {}
"""

STAGEFLOW = COMMON + r"""
import stageflow as sf
model = gpt2.GPT2(layers)
for dtype in ("float32", "bfloat16"):
    functions = {s: gpt2.make_generate(model, s, getattr(sf, dtype)) for s in (1, STEPS)}
    for batch in batches:
        prompt = gpt2.prompts(batch, PROMPT)
        generate = lambda p, steps, functions=functions: functions[steps](p)[0].numpy()
        if dtype == "float32":
            out["tokens"][f"stageflow {batch}"] = generate(prompt, STEPS).tolist()
        for steps, run in timed(generate, prompt).items():
            runs[f"stageflow staged {dtype} {batch} {steps}"] = run
out["seconds"] = interleaved_medians(runs, rounds=3, min_time=0.0)
print(json.dumps(out))
"""

TORCH = COMMON + r"""
import math
import torch
from torch import nn
import torch.nn.functional as F
torch.set_grad_enabled(False)
WIDTH, HEADS = gpt2.WIDTH, gpt2.HEADS
DEPTH = WIDTH // HEADS

def linear(w, b):  # w is (out, in), as nn.Linear keeps it
    layer = nn.Linear(w.shape[1], w.shape[0])
    layer.weight.data = torch.from_numpy(w)
    layer.bias.data = torch.from_numpy(b)
    return layer

def layer_norm(scale, offset):
    norm = nn.LayerNorm(WIDTH, eps=1e-5)
    norm.weight.data, norm.bias.data = torch.from_numpy(scale), torch.from_numpy(offset)
    return norm

class Block(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.ln1 = layer_norm(w["ln1_scale"], w["ln1_offset"])
        self.qkv = linear(w["qkv"], w["qkv_bias"])
        self.proj = linear(w["proj"], w["proj_bias"])
        self.ln2 = layer_norm(w["ln2_scale"], w["ln2_offset"])
        self.fc = linear(w["fc"], w["fc_bias"])
        self.out = linear(w["out"], w["out_bias"])

    def mlp(self, x):
        return self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

class GPT2(nn.Module):
    def __init__(self, arrays):
        super().__init__()
        self.wte = nn.Embedding.from_pretrained(torch.from_numpy(arrays["wte"]))
        self.wpe = nn.Embedding.from_pretrained(torch.from_numpy(arrays["wpe"]))
        self.blocks = nn.ModuleList(Block(w) for w in arrays["blocks"])
        self.ln_f = layer_norm(arrays["lnf_scale"], arrays["lnf_offset"])

    def logits(self, x):
        return self.ln_f(x) @ self.wte.weight.T  # tied

    def prompt(self, tokens, cache):
        # cache: (layers, 2, batch, heads, max_length, depth), rows [0, length) written
        batch, length = tokens.shape
        x = self.wte(tokens) + self.wpe.weight[:length]
        for i, block in enumerate(self.blocks):
            q, k, v = block.qkv(block.ln1(x)).view(batch, length, 3, HEADS, DEPTH).permute(
                2, 0, 3, 1, 4)
            cache[i, 0, :, :, :length] = k
            cache[i, 1, :, :, :length] = v
            mixed = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + block.proj(mixed.transpose(1, 2).reshape(batch, length, WIDTH))
            x = x + block.mlp(x)
        return self.logits(x[:, -1])

    def decode(self, token, position, cache):
        # token (batch,), position a 0-d int64 tensor; the cache written at that row
        x = self.wte(token) + self.wpe(position)
        batch = x.shape[0]
        seen = (torch.arange(cache.shape[4]) <= position).view(1, -1)  # rows up to position
        for i, block in enumerate(self.blocks):
            q, k, v = block.qkv(block.ln1(x)).view(batch, 3, HEADS, 1, DEPTH).unbind(1)
            cache[i, 0].index_copy_(2, position.view(1), k)
            cache[i, 1].index_copy_(2, position.view(1), v)
            mixed = F.scaled_dot_product_attention(q, cache[i, 0], cache[i, 1], attn_mask=seen)
            x = x + block.proj(mixed.reshape(batch, WIDTH))
            x = x + block.mlp(x)
        return self.logits(x)

def generator(model, dtype, prompt_step, decode_step, caches):
    def generate(prompt, steps):
        batch, length = prompt.shape
        key = (batch, length + STEPS)
        if key not in caches:  # one cache per shape, reused: written before it is read
            caches[key] = torch.zeros(len(model.blocks), 2, batch, HEADS, key[1], DEPTH,
                                      dtype=dtype)
        cache = caches[key]
        token = prompt_step(torch.from_numpy(prompt).long(), cache).argmax(-1)
        tokens = [token]
        for i in range(1, steps):
            token = decode_step(token, torch.tensor(length + i - 1), cache).argmax(-1)
            tokens.append(token)
        return torch.stack(tokens, 1).numpy()
    return generate

for dtype in ("float32", "bfloat16"):
    model = GPT2(arrays).eval().to(getattr(torch, dtype))
    variants = {"eager": (model.prompt, model.decode)}
    if "compile" in kinds:
        # static shapes: a compile per batch size, not one generic over the batch
        variants["compile"] = (torch.compile(model.prompt, dynamic=False),
                               torch.compile(model.decode, dynamic=False))
    for name, (prompt_step, decode_step) in variants.items():
        generate = generator(model, getattr(torch, dtype), prompt_step, decode_step, {})
        for batch in batches:
            prompt = gpt2.prompts(batch, PROMPT)
            start = time.perf_counter()
            tokens = generate(prompt, STEPS)
            out.setdefault("first", {})[f"torch {name} {dtype} {batch}"] = (
                time.perf_counter() - start)
            if dtype == "float32":
                out["tokens"][f"torch {name} {batch}"] = tokens.tolist()
            for steps, run in timed(generate, prompt).items():
                runs[f"torch {name} {dtype} {batch} {steps}"] = run
out["seconds"] = interleaved_medians(runs, rounds=3, min_time=0.0)
print(json.dumps(out))
"""
STAGEFLOW, TORCH = (code.replace("STEPS", str(STEPS)).replace("PROMPT", str(PROMPT))
                    for code in (STAGEFLOW, TORCH))


def _child(code: str, layers: int, batches: list[int], kinds: str,
           threads: int | None) -> dict:
    env = dict(os.environ)
    if threads:
        env.update({name: str(threads) for name in THREAD_VARIABLES})
    run = subprocess.run([sys.executable, "-c", code, str(layers),
                          ",".join(map(str, batches)), kinds], capture_output=True, text=True,
                         env=env)
    if run.returncode:
        raise RuntimeError(f"a benchmark process failed:\n{run.stderr[-4000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def weight_bytes(layers: int, itemsize: int) -> int:
    """The bytes one decoding step reads: every block's weights and the token embedding
    (the logits' matrix); one row of the position embedding."""
    width, vocab = 768, 50257
    block = 12 * width * width + 13 * width
    return itemsize * (layers * block + vocab * width + 2 * width)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-compile", action="store_true", help="PyTorch eager only")
    parser.add_argument("--threads", type=int, help="threads per framework (default: all "
                        "cores; 1 where other work shares the cores, whose spinning thread "
                        "pools stall at every barrier)")
    args = parser.parse_args(argv)
    has_torch = importlib.util.find_spec("torch") is not None
    kinds = "eager" if args.no_compile else "eager,compile"
    best: dict[str, float] = {}
    tokens: dict[str, list] = {}
    bandwidth = 0.0
    first: dict[str, float] = {}
    for _ in range(args.rounds):
        for code in (STAGEFLOW, TORCH) if has_torch else (STAGEFLOW,):
            result = _child(code, args.layers, args.batches, kinds, args.threads)
            bandwidth = max(bandwidth, result["bandwidth"])
            tokens.update(result["tokens"])
            first.update(result.get("first", {}))
            for name, seconds in result["seconds"].items():
                best[name] = min(best.get(name, float("inf")), seconds)
    print(f"GPT-2-small-shaped greedy decoding, {args.layers} layers, prompt {PROMPT}, "
          f"{STEPS} new tokens: decoding tokens/s (the prompt step's ms), best of "
          f"{args.rounds} alternating rounds of medians, {args.threads or 'all'} thread(s); "
          f"memory bandwidth "
          f"{bandwidth / 1e9:.1f} GB/s (a NumPy copy, reads and writes counted)")
    for batch in args.batches:
        print(f"  batch {batch}:")
        for precision, itemsize in (("float32", 4), ("bfloat16", 2)):
            line = []
            for name in sorted({n.rsplit(" ", 2)[0] for n in best}):
                if precision not in name:
                    continue
                full, prompt = (best.get(f"{name} {batch} {s}") for s in (STEPS, 1))
                if full is None:
                    continue
                rate = batch * (STEPS - 1) / (full - prompt)
                line.append(f"{name.replace(' ' + precision, '')} {rate:.1f} "
                            f"({prompt * 1e3:.0f} ms)")
            read = weight_bytes(args.layers, itemsize) / bandwidth
            floor = f"; reading the weights once: {read * 1e3:.0f} ms" if batch == 1 else ""
            print(f"    {precision}: " + ", ".join(line) + floor)
        reference = tokens.get(f"stageflow {batch}")
        for name, other in sorted(tokens.items()):
            if name.startswith("torch") and name.endswith(f" {batch}") and reference:
                same = sum(a == b for r, o in zip(reference, other, strict=True)
                           for a, b in zip(r, o, strict=True))
                print(f"    float32 tokens, stageflow against {name[:-len(str(batch)) - 1]}: "
                      f"{same} of {batch * STEPS} equal")
    if first:
        print("  PyTorch's first generation (compiling, for torch.compile): " + ", ".join(
            f"{name} {seconds:.1f} s" for name, seconds in sorted(first.items())))
    return best


if __name__ == "__main__":
    main()
