"""A small transformer learns to reverse sequences: embeddings, multi-head attention,
LayerNorm, AdamW with warm-up and cosine decay; trained eagerly, then staged.

    python examples/transformer.py            # 20 eager steps, then staged training
    python examples/transformer.py --small    # fewer steps, for CI

The task: a sequence of `LENGTH` random tokens in, the same tokens reversed out. Position t
of the output must attend to position LENGTH - 1 - t of the input, so the model only gets
it right by learning to attend (token embeddings alone cannot). The encoder is post-norm
(`x = LayerNorm(x + attention(x))`, then the same around a feed-forward block), as in the
original transformer; `benchmarks/transformer.py` times its training step against
torch.compile on the same model.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import stageflow as sf

VOCAB, LENGTH, WIDTH, HEADS, FEED_FORWARD, LAYERS, BATCH = 16, 16, 64, 4, 128, 2, 32


class EncoderBlock(sf.Module):
    def __init__(self, width: int, heads: int, feed_forward: int) -> None:
        super().__init__()
        self.attention = sf.layers.MultiHeadAttention(heads, width // heads)
        self.norm1 = sf.layers.LayerNormalization()
        self.hidden = sf.layers.Dense(feed_forward, activation="relu")
        self.out = sf.layers.Dense(width)
        self.norm2 = sf.layers.LayerNormalization()

    def call(self, x: sf.Tensor) -> sf.Tensor:
        x = self.norm1(x + self.attention(x, x))
        return self.norm2(x + self.out(self.hidden(x)))


class Transformer(sf.Module):
    """Token and position embeddings, `layers` encoder blocks, logits over the vocabulary."""

    def __init__(self, vocab: int = VOCAB, length: int = LENGTH, width: int = WIDTH,
                 heads: int = HEADS, feed_forward: int = FEED_FORWARD,
                 layers: int = LAYERS) -> None:
        super().__init__()
        self.tokens = sf.layers.Embedding(vocab, width)
        self.positions = sf.layers.Embedding(length, width)
        self.blocks = [EncoderBlock(width, heads, feed_forward) for _ in range(layers)]
        self.logits = sf.layers.Dense(vocab)
        self.length = length

    def call(self, tokens: sf.Tensor) -> sf.Tensor:
        x = self.tokens(tokens) + self.positions(sf.range(self.length))
        for block in self.blocks:
            x = block(x)
        return self.logits(x)


def make_optimizer(steps: int) -> sf.optimizers.AdamW:
    schedule = sf.optimizers.schedules.CosineDecay(
        1e-4, decay_steps=steps, alpha=0.05, warmup_target=3e-3, warmup_steps=steps // 10)
    return sf.optimizers.AdamW(schedule, weight_decay=1e-4)


def make_train_step(model: Transformer, optimizer: sf.optimizers.Optimizer):
    def train_step(tokens: sf.Tensor, targets: sf.Tensor) -> sf.Tensor:
        with sf.GradientTape() as tape:
            logits = model(tokens)
            loss = sf.reduce_mean(sf.nn.sparse_softmax_cross_entropy_with_logits(targets,
                                                                                 logits))
        variables = model.trainable_variables
        gradients, _ = sf.clip_by_global_norm(tape.gradient(loss, variables), 1.0)
        optimizer.apply_gradients(zip(gradients, variables, strict=True))
        return loss
    return train_step


def batch(rng: np.random.Generator, size: int = BATCH) -> tuple[np.ndarray, np.ndarray]:
    tokens = rng.integers(0, VOCAB, (size, LENGTH)).astype(np.int32)
    return tokens, tokens[:, ::-1].copy()


def accuracy(model: Transformer, rng: np.random.Generator) -> float:
    tokens, targets = batch(rng, 256)
    predicted = sf.argmax(model(sf.constant(tokens)), axis=-1).numpy()
    return float(np.mean(predicted == targets))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None,
                        help="staged training steps (default 1500, 400 with --small)")
    parser.add_argument("--small", action="store_true", help="a quick run for CI")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    steps = args.steps if args.steps is not None else (400 if args.small else 1500)
    target = 0.5 if args.small else 0.95
    sf.random.set_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    model = Transformer()
    optimizer = make_optimizer(steps)
    train_step = make_train_step(model, optimizer)

    start = time.perf_counter()
    for _ in range(20):  # eagerly: op by op, as one would debug it
        loss = train_step(*(sf.constant(a) for a in batch(rng)))
    print(f"eager: 20 steps in {time.perf_counter() - start:.1f} s, loss {float(loss):.3f}")

    staged = sf.function(train_step)
    start = time.perf_counter()
    for step in range(steps - 20):
        loss = staged(*(sf.constant(a) for a in batch(rng)))
        if (step + 1) % 200 == 0:
            print(f"staged step {step + 21}: loss {float(loss):.4f}, learning rate "
                  f"{float(optimizer.learning_rate.numpy()):.2e}")
    seconds = time.perf_counter() - start
    print(f"staged: {steps - 20} steps in {seconds:.1f} s "
          f"({(steps - 20) / seconds:.0f} steps/s), traced {staged.tracing_count} times")
    score = accuracy(model, rng)
    print(f"reversal accuracy per token: {score:.3f}")
    if score < target:
        print(f"below the expected {target}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
