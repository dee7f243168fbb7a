"""One SGD training step of an MLP 784-256-256-10 (ReLU, softmax cross-entropy, float32,
synthetic data), ported from the anchors' `mlp_train.py`; gradients from a GradientTape.

    python -m benchmarks.mlp_train [BATCH ...]        (default 64 512)

Prints steps/s of stageflow eager (after its background compiles: the matmuls' split and
the tape's backward pass, `models.backward_runner`), stageflow staged (`sf.function`) and
NumPy with a hand-written backward, measured in one run, and the ratios to NumPy; then jax.jit,
torch.compile and tf.function where installed (`benchmarks.incumbents`).
"""

from __future__ import annotations

import sys

import numpy as np

import stageflow as sf
from benchmarks import incumbents
from benchmarks.timing import interleaved_medians
from stageflow.models import backward_runner
from stageflow.runtime import eager_kernels

SIZES = [784, 256, 256, 10]
LR = 0.01


def init_params(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    params = []
    for n_in, n_out in zip(SIZES[:-1], SIZES[1:], strict=True):
        params.append(rng.standard_normal((n_in, n_out)) * np.sqrt(2.0 / n_in))
        params.append(np.zeros(n_out))
    return [p.astype(np.float32) for p in params]


def make_data(batch: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, SIZES[0])).astype(np.float32)
    y = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], batch)]
    return x, y


def loss_fn(params, x, y):
    h = x
    for i in range(0, len(params) - 2, 2):
        h = sf.nn.relu(h @ params[i] + params[i + 1])
    logits = h @ params[-2] + params[-1]
    return sf.reduce_mean(sf.nn.softmax_cross_entropy_with_logits(y, logits))


def make_train_step(params: list[sf.Variable], staged: bool):
    def train_step(x, y):
        with sf.GradientTape() as tape:
            loss = loss_fn(params, x, y)
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads, strict=True):
            p.assign_sub(LR * g)
        return loss

    return sf.function(train_step) if staged else train_step


def numpy_train_step(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    """Forward and hand-written backward, then SGD in place (numpy has no autodiff)."""
    w1, b1, w2, b2, w3, b3 = params
    z1 = x @ w1 + b1
    h1 = np.maximum(z1, 0)
    z2 = h1 @ w2 + b2
    h2 = np.maximum(z2, 0)
    logits = h2 @ w3 + b3
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    s = e.sum(axis=1, keepdims=True)
    loss = np.mean(np.sum((np.log(s) - shifted) * y, axis=1))
    d3 = (e / s - y) / x.shape[0]
    d2 = (d3 @ w3.T) * (z2 > 0)
    d1 = (d2 @ w2.T) * (z1 > 0)
    grads = [x.T @ d1, d1.sum(0), h1.T @ d2, d2.sum(0), h2.T @ d3, d3.sum(0)]
    for p, g in zip(params, grads, strict=True):
        p -= LR * g
    return float(loss)


def main(batches: list[int]) -> dict[int, dict[str, float]]:
    results = {}
    print("MLP 784-256-256-10 SGD training step (steps/s, medians)")
    for batch in batches:
        x, y = make_data(batch)
        tx, ty = sf.constant(x), sf.constant(y)
        eager = make_train_step([sf.Variable(p) for p in init_params()], staged=False)
        staged = make_train_step([sf.Variable(p) for p in init_params()], staged=True)
        numpy_params = init_params()
        first = (float(eager(tx, ty)), float(staged(tx, ty)), numpy_train_step(numpy_params, x, y))
        np.testing.assert_allclose(first, first[2], rtol=1e-4)
        eager(tx, ty)  # the tape's second gradient call: its backward pass compiles
        backward_runner.settle()
        eager_kernels.settle()

        def loop(step, *args):
            def run(n: int) -> None:
                for _ in range(n):
                    step(*args)
            return run

        medians = interleaved_medians({"eager": loop(eager, tx, ty),
                                       "staged": loop(staged, tx, ty),
                                       "numpy": loop(numpy_train_step, numpy_params, x, y)},
                                      rounds=7, min_time=0.2)
        rates = {name: 1.0 / t for name, t in medians.items()}
        results[batch] = rates
        print(f"  batch {batch:4d}  eager {rates['eager']:8.1f}  staged {rates['staged']:8.1f}  "
              f"numpy {rates['numpy']:8.1f}   staged/numpy {rates['staged'] / rates['numpy']:.2f}"
              f"  (goal >= 1.41 at 64, 1.22 at 512: torch.compile's ratio)")
        for name, rate in incumbents.mlp_train(batch).items():
            rates[name] = rate
            print(f"  batch {batch:4d}  {name:13s} {rate:8.1f}   {name}/numpy "
                  f"{rate / rates['numpy']:.2f}  (timed after the above)")
    return results


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [64, 512])
