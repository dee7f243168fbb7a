"""A GPT-2-small-shaped decoder (12 layers, width 768, 12 heads, vocabulary 50257, tied
embeddings): greedy generation with a key/value cache, the whole loop one staged function.

    python examples/gpt2.py                # 12 layers, batch 1 and 8, float32 and bfloat16
    python examples/gpt2.py --small        # 2 layers, a few steps, for CI

The model is GPT-2's (pre-norm blocks: ``x + attention(LayerNorm(x))``, then
``x + MLP(LayerNorm(x))`` with a tanh-approximated GELU; a final LayerNorm; logits against
the token embedding itself) with random weights: what it shows is the arithmetic and the
memory traffic of the real size, not a trained model's text. `generate` is ONE
`sf.function`: the prompt step runs causal attention over the prompt and fills a key/value
cache per layer, then an `sf.while_loop` decodes, each iteration one token for every
sequence: it writes the token's keys and values into the cache in place
(`sf.dynamic_update_index`, the cache carried by the loop) and attends over the cache with
the positions after its own masked. No Python runs per token.

The cache of each layer is ``(max_length, batch, heads, head_dim)``, the position first:
`sf.dynamic_update_index` writes a row along axis 0, and one step's attention is then a
broadcast product and a sum over the cache (no transpose, no copy of the cache per step).
In bfloat16 the weights are cast once, at the start of the call, outside the loop, and
the cache is bfloat16; the layer norms and the softmax compute in float32.

The check: the staged generation's tokens equal those of an eager reference without a
cache, which runs the prompt step again over the whole sequence so far for each token
(Python per token), for the same model, in float32, and the logits of the last step
agree (random weights repeat tokens often; the logits see every cache row).
`benchmarks/gpt2.py` times the staged generation against PyTorch.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

import stageflow as sf

VOCAB, POSITIONS, WIDTH, HEADS, LAYERS = 50257, 1024, 768, 12, 12
MLP = 4 * WIDTH


NORMS = ("ln1_scale", "ln1_offset", "ln2_scale", "ln2_offset")


def initial_weights(layers: int = LAYERS, seed: int = 0) -> dict[str, Any]:
    """GPT-2's weights as NumPy arrays, drawn as GPT-2 initialises them (normal, 0.02; the
    residual projections scaled by 1/sqrt(2 * layers); layer norms 1 and 0). Each
    projection's matrix is (out, in), as PyTorch's ``nn.Linear`` and the tied embedding
    keep theirs, applied as ``x @ w^T + b``; queries, keys and values are one projection.
    The benchmark gives PyTorch's model the same arrays."""
    rng = np.random.default_rng(seed)
    residual = 0.02 / math.sqrt(2 * layers)

    def normal(*shape: int, std: float = 0.02) -> np.ndarray:
        return rng.normal(0.0, std, shape).astype(np.float32)

    def block() -> dict[str, np.ndarray]:
        ones, zeros = np.ones(WIDTH, np.float32), np.zeros(WIDTH, np.float32)
        return {"ln1_scale": ones, "ln1_offset": zeros,
                "qkv": normal(3 * WIDTH, WIDTH), "qkv_bias": np.zeros(3 * WIDTH, np.float32),
                "proj": normal(WIDTH, WIDTH, std=residual), "proj_bias": zeros,
                "ln2_scale": ones, "ln2_offset": zeros,
                "fc": normal(MLP, WIDTH), "fc_bias": np.zeros(MLP, np.float32),
                "out": normal(WIDTH, MLP, std=residual), "out_bias": zeros}

    return {"wte": normal(VOCAB, WIDTH), "wpe": normal(POSITIONS, WIDTH, std=0.01),
            "blocks": [block() for _ in range(layers)],
            "lnf_scale": np.ones(WIDTH, np.float32), "lnf_offset": np.zeros(WIDTH, np.float32)}


class GPT2(sf.Module):
    """GPT-2's weights as variables: token and position embeddings, `layers` pre-norm
    blocks, a final LayerNorm; the logits are the output against the token embedding
    (tied), as in GPT-2."""

    def __init__(self, layers: int = LAYERS, seed: int = 0) -> None:
        super().__init__()
        arrays = initial_weights(layers, seed)
        self.heads = HEADS
        self.wte = sf.Variable(arrays["wte"])
        self.wpe = sf.Variable(arrays["wpe"])
        self.blocks = [{name: sf.Variable(a) for name, a in block.items()}
                       for block in arrays["blocks"]]
        self.lnf_scale = sf.Variable(arrays["lnf_scale"])
        self.lnf_offset = sf.Variable(arrays["lnf_offset"])

    def weights(self, dtype: Any) -> dict[str, Any]:
        """Every weight as a tensor of `dtype`, the layer norms' float32: read, and cast,
        once per call rather than once per token."""
        return {"wte": sf.cast(self.wte, dtype), "wpe": sf.cast(self.wpe, dtype),
                "blocks": [{name: sf.cast(v, sf.float32 if name in NORMS else dtype)
                            for name, v in block.items()} for block in self.blocks],
                "lnf_scale": sf.identity(self.lnf_scale),
                "lnf_offset": sf.identity(self.lnf_offset)}


def layer_norm(x: sf.Tensor, scale: sf.Tensor, offset: sf.Tensor) -> sf.Tensor:
    """GPT-2's LayerNorm (epsilon 1e-5), its statistics in float32 whatever x's dtype."""
    y = sf.nn.layer_normalization(sf.cast(x, sf.float32), epsilon=1e-5, scale=scale,
                                  offset=offset)
    return sf.cast(y, x.dtype)


def linear(x: sf.Tensor, w: dict[str, sf.Tensor], name: str) -> sf.Tensor:
    """``x @ w[name]^T + w[name + "_bias"]``: a decoding step's x is a row per sequence, and
    the matrix's rows are then read whole, one dot product each."""
    return sf.matmul(x, w[name], transpose_b=True) + w[f"{name}_bias"]


def mlp(x: sf.Tensor, w: dict[str, sf.Tensor]) -> sf.Tensor:
    h = sf.nn.gelu(linear(x, w, "fc"), approximate=True)
    return linear(h, w, "out")


def logits_of(x: sf.Tensor, weights: dict[str, Any]) -> sf.Tensor:
    """The final LayerNorm, then the product with the token embedding transposed."""
    x = layer_norm(x, weights["lnf_scale"], weights["lnf_offset"])
    return sf.matmul(x, weights["wte"], transpose_b=True)


def prompt_step(tokens: sf.Tensor, weights: dict[str, Any], heads: int,
                max_length: int) -> tuple[sf.Tensor, list[tuple[sf.Tensor, sf.Tensor]]]:
    """The logits of the prompt's last position, (batch, vocab), and each layer's key and
    value cache, (max_length, batch, heads, head_dim), the prompt's rows filled."""
    batch, length = tokens.shape
    wte = weights["wte"]
    x = sf.gather(wte, tokens) + weights["wpe"][:length]
    width = x.shape[-1]
    depth = width // heads
    causal = np.triu(np.full((length, length), -np.inf, np.float32), 1)
    caches = []
    for w in weights["blocks"]:
        h = layer_norm(x, w["ln1_scale"], w["ln1_offset"])
        qkv = sf.reshape(linear(h, w, "qkv"), (batch, length, 3, heads, depth))
        q, k, v = (sf.transpose(qkv[:, :, i], (0, 2, 1, 3)) for i in range(3))  # b h t d
        scores = sf.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(depth))
        attention = sf.nn.softmax(sf.cast(scores, sf.float32) + causal)
        mixed = sf.matmul(sf.cast(attention, x.dtype), v)
        mixed = sf.reshape(sf.transpose(mixed, (0, 2, 1, 3)), (batch, length, width))
        x = x + linear(mixed, w, "proj")
        x = x + mlp(layer_norm(x, w["ln2_scale"], w["ln2_offset"]), w)
        rows = [[0, max_length - length], [0, 0], [0, 0], [0, 0]]
        caches.append((sf.pad(sf.transpose(k, (2, 0, 1, 3)), rows),
                       sf.pad(sf.transpose(v, (2, 0, 1, 3)), rows)))
    return logits_of(x[:, -1], weights), caches


def decode_step(tokens: sf.Tensor, position: sf.Tensor, caches: Sequence[tuple],
                weights: dict[str, Any],
                heads: int) -> tuple[sf.Tensor, list[tuple[sf.Tensor, sf.Tensor]]]:
    """One token per sequence, (batch,), at `position`: its logits, (batch, vocab), and the
    caches with its keys and values written at row `position`."""
    x = sf.gather(weights["wte"], tokens) + sf.gather(weights["wpe"], position)
    batch, width = x.shape
    depth = width // heads
    max_length = caches[0][0].shape[0]
    # (max_length, 1, 1): the rows after `position` hold nothing yet (zeros), masked out.
    beyond = sf.reshape(sf.range(max_length) > position, (max_length, 1, 1))
    hidden = sf.fill((max_length, 1, 1), -np.inf)
    updated = []
    for w, (keys, values) in zip(weights["blocks"], caches, strict=True):
        h = layer_norm(x, w["ln1_scale"], w["ln1_offset"])
        qkv = sf.reshape(linear(h, w, "qkv"), (batch, 3, heads, depth))
        q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]  # each (batch, heads, depth)
        keys = sf.dynamic_update_index(keys, k, position)
        values = sf.dynamic_update_index(values, v, position)
        # (max_length, batch, heads): one pass over the cache, position-major as it is.
        scores = sf.reduce_sum(sf.cast(keys * q, sf.float32), -1) * (1.0 / math.sqrt(depth))
        attention = sf.nn.softmax(sf.where(beyond, hidden, scores), axis=0)
        mixed = sf.reduce_sum(sf.cast(attention[..., None], x.dtype) * values, 0)
        x = x + linear(sf.reshape(mixed, (batch, width)), w, "proj")
        x = x + mlp(layer_norm(x, w["ln2_scale"], w["ln2_offset"]), w)
        updated.append((keys, values))
    return logits_of(x, weights), updated


def greedy(logits: sf.Tensor) -> sf.Tensor:
    return sf.argmax(logits, axis=-1, output_type=sf.int32)


def make_generate(model: GPT2, steps: int, dtype: Any = sf.float32) -> sf.Function:
    """`generate(prompt)`: the `steps` greedy tokens after each prompt of a (batch, length)
    int32 array, (batch, steps), and the logits the last of them was chosen from,
    (batch, vocab), as one staged function."""

    @sf.function
    def generate(prompt: sf.Tensor) -> tuple[sf.Tensor, sf.Tensor]:
        weights = model.weights(dtype)  # cast once, outside the loop
        length = prompt.shape[1]
        logits, caches = prompt_step(prompt, weights, model.heads, length + steps)
        token = greedy(logits)
        out = sf.dynamic_update_index(sf.zeros((steps, prompt.shape[0]), sf.int32), token, 0)

        def body(i, token, out, logits, caches):
            logits, caches = decode_step(token, length + i - 1, caches, weights, model.heads)
            token = greedy(logits)
            return i + 1, token, sf.dynamic_update_index(out, token, i), logits, caches

        _, _, out, logits, _ = sf.while_loop(lambda i, *_: i < steps, body,
                                             (sf.constant(1), token, out, logits, caches))
        return sf.transpose(out), logits

    return generate


def generate_eagerly(model: GPT2, prompt: np.ndarray,
                     steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference: eager, one Python iteration per token, and no cache: each token
    from the prompt step run again over the whole sequence so far."""
    weights = model.weights(sf.float32)
    sequence = sf.constant(prompt)
    for _ in range(steps):
        logits, _ = prompt_step(sequence, weights, model.heads, sequence.shape[1])
        sequence = sf.concat([sequence, greedy(logits)[:, None]], 1)
    return sequence.numpy()[:, prompt.shape[1]:], logits.numpy()


def prompts(batch: int, length: int = 16, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VOCAB, (batch, length)).astype(np.int32)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="2 layers, 8 steps (for CI)")
    args = parser.parse_args(argv)
    layers, steps, batches = (2, 8, [2]) if args.small else (LAYERS, 64, [1, 8])
    model = GPT2(layers)
    failures = 0
    for batch in batches:
        prompt = prompts(batch)
        for dtype in (sf.float32, sf.bfloat16):
            generate = make_generate(model, steps, dtype)
            start = time.perf_counter()
            tokens, logits = (t.numpy() for t in generate(prompt))
            first = time.perf_counter() - start
            start = time.perf_counter()
            generate(prompt)[0].numpy()
            took = time.perf_counter() - start
            print(f"batch {batch} {dtype.name:8s}: first call {first:.1f} s, then {took:.2f} s "
                  f"for {steps} tokens ({batch * steps / took:.1f} tokens/s)")
            if dtype == sf.float32:
                reference, last = generate_eagerly(model, prompt, steps)
                same = np.array_equal(tokens, reference)
                gap = np.abs(logits - last).max() / np.abs(last).max()
                print(f"  staged tokens {'equal' if same else 'DIFFER FROM'} the eager "
                      f"reference's: {tokens[:, :8].tolist()}...; last logits within "
                      f"{gap:.1e} of its (relative to the largest)")
                failures += not same or gap > 1e-4
            else:
                agree = np.mean(tokens == reference)
                print(f"  bfloat16 tokens agree with float32's at {agree:.0%} of positions")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
