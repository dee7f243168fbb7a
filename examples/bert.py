"""A BERT-base-shaped encoder (12 layers, width 768, 12 heads, feed-forward 3072, vocabulary
30522, sequence 128): inference in float32 and in mixed bfloat16, eager and staged.

    python examples/bert.py                    # batch 8, float32 then mixed bfloat16
    python examples/bert.py --small            # 2 layers, batch 1, for CI

The model is BERT's encoder (post-norm: ``x = LayerNorm(x + attention(x))``, then the same
around a GELU feed-forward block) with random weights: what it measures is the arithmetic
of the real size, not a trained model's answers. Under the ``mixed_bfloat16`` policy the
layers compute in bfloat16 (the matmuls on the CPU's bfloat16 dot products where it has
them) and keep float32 variables; the layer norms compute their statistics in float32.
`benchmarks/bert.py` times it against PyTorch, eager and compiled, with and without
``torch.autocast``.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import stageflow as sf

VOCAB, LENGTH, WIDTH, HEADS, FEED_FORWARD, LAYERS = 30522, 128, 768, 12, 3072, 12


class EncoderLayer(sf.keras.layers.Layer):
    """Self-attention and a GELU feed-forward block, each added back and layer-normed."""

    def __init__(self, width: int, heads: int, feed_forward: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.attention = sf.keras.layers.MultiHeadAttention(heads, width // heads)
        self.norm1 = sf.keras.layers.LayerNormalization(epsilon=1e-12)
        self.hidden = sf.keras.layers.Dense(feed_forward, activation="gelu")
        self.out = sf.keras.layers.Dense(width)
        self.norm2 = sf.keras.layers.LayerNormalization(epsilon=1e-12)

    def call(self, x: sf.Tensor) -> sf.Tensor:
        x = self.norm1(x + self.attention(x, x))
        return self.norm2(x + self.out(self.hidden(x)))


class Encoder(sf.keras.Model):
    """Token and position embeddings, their layer norm, then `layers` encoder layers."""

    def __init__(self, vocab: int = VOCAB, length: int = LENGTH, width: int = WIDTH,
                 heads: int = HEADS, feed_forward: int = FEED_FORWARD,
                 layers: int = LAYERS) -> None:
        super().__init__()
        self.tokens = sf.keras.layers.Embedding(vocab, width)
        self.positions = sf.keras.layers.Embedding(length, width)
        self.norm = sf.keras.layers.LayerNormalization(epsilon=1e-12)
        self.blocks = [EncoderLayer(width, heads, feed_forward) for _ in range(layers)]

    def call(self, tokens: sf.Tensor) -> sf.Tensor:
        positions = sf.range(sf.shape(tokens)[1])
        x = self.norm(self.tokens(tokens) + self.positions(positions))
        for block in self.blocks:
            x = block(x)
        return x


def build(policy: str, layers: int = LAYERS, seed: int = 0) -> Encoder:
    """The encoder under `policy` ("float32" or "mixed_bfloat16"), its weights drawn from
    `seed` (the same float32 values under either policy)."""
    sf.keras.mixed_precision.set_global_policy(policy)
    try:
        sf.random.set_seed(seed)
        model = Encoder(layers=layers)
        model(np.zeros((1, LENGTH), np.int32))
    finally:
        sf.keras.mixed_precision.set_global_policy(None)
    return model


def tokens(batch: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VOCAB, (batch, LENGTH)).astype(np.int32)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="2 layers, batch 1 (for CI)")
    args = parser.parse_args(argv)
    layers, batch = (2, 1) if args.small else (LAYERS, 8)
    x = tokens(batch)
    results = {}
    for policy in ("float32", "mixed_bfloat16"):
        model = build(policy, layers)
        infer = sf.function(lambda t, model=model: model(t))
        start = time.perf_counter()
        out = infer(x).numpy()
        first = time.perf_counter() - start
        start = time.perf_counter()
        infer(x).numpy()
        results[policy] = out.astype(np.float32)
        print(f"{policy:15s} output {out.dtype}, first call {first:.1f} s, "
              f"then {time.perf_counter() - start:.3f} s for {batch} x {LENGTH} tokens")
    gap = np.abs(results["mixed_bfloat16"] - results["float32"])
    print(f"mixed bfloat16 against float32: mean |difference| {gap.mean():.4f} "
          f"(outputs are layer-normed: unit scale)")
    return 0 if gap.mean() < 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())
