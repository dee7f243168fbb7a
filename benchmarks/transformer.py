"""Training steps per second of `examples/transformer.py`'s model, staged by stageflow and by
torch.compile, in one run.

    python -m benchmarks.transformer [--batch 32]

The model: token and position embeddings (vocabulary 16, length 16, width 64), two post-norm
encoder blocks (4-head attention, LayerNorm with epsilon 1e-3, a 128-wide ReLU feed-forward),
logits; mean sparse softmax cross-entropy; gradients clipped to global norm 1; AdamW
(learning rate 1e-3, weight decay 1e-4, Keras' update with epsilon 1e-7). stageflow runs the
example's own training step under `sf.function`; PyTorch runs the same model from the same
initial weights on the same batch, written with `torch.nn.functional`, gradients from
`torch.func.grad_and_value` and the AdamW update as tensor ops, the whole step under
``torch.compile(fullgraph=True, dynamic=False)`` (the anchors' staging choices), and also
eagerly. The first losses must agree. The machine is noisy: alternating rounds, each figure
its best round (`timing.interleaved_best`).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
from collections.abc import Callable
from typing import Any

import numpy as np

import stageflow as sf
from benchmarks.timing import interleaved_best
from examples.transformer import HEADS, LENGTH, Transformer, batch, make_train_step

LR, DECAY, BETA_1, BETA_2, EPSILON, CLIP = 1e-3, 1e-4, 0.9, 0.999, 1e-7, 1.0
Step = Callable[[], float]


def stageflow_step(tokens: np.ndarray, targets: np.ndarray) -> tuple[Step, Transformer]:
    model = Transformer()
    model(sf.constant(tokens))  # build
    optimizer = sf.optimizers.AdamW(LR, weight_decay=DECAY)
    step = sf.function(make_train_step(model, optimizer))
    x, y = sf.constant(tokens), sf.constant(targets)
    weights = {f"w{i}": v.numpy().copy() for i, v in enumerate(model.trainable_variables)}
    return (lambda: float(step(x, y))), model, weights


def torch_step(model: Transformer, weights: dict[str, np.ndarray], tokens: np.ndarray,
               targets: np.ndarray, compiled: bool) -> Step:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(2)
    names = list(weights)
    order = {id(v): name for v, name in zip(model.trainable_variables, names, strict=True)}

    def name(variable: Any) -> str:
        return order[id(variable)]

    params = {k: torch.tensor(v) for k, v in weights.items()}
    heads, key_dim = HEADS, model.blocks[0].attention.key_dim

    def dense(p: dict, layer: Any, x: Any) -> Any:
        return x @ p[name(layer.kernel)] + p[name(layer.bias)]

    def norm(p: dict, layer: Any, x: Any) -> Any:
        return F.layer_norm(x, x.shape[-1:], p[name(layer.gamma)], p[name(layer.beta)],
                            eps=layer.epsilon)

    def attention(p: dict, layer: Any, x: Any) -> Any:
        b, t, _ = x.shape

        def project(pair: tuple) -> Any:
            kernel, bias = pair
            y = x @ p[name(kernel)] + p[name(bias)]
            return y.reshape(b, t, heads, key_dim).transpose(1, 2)

        q, k, v = (project(pair) for pair in (layer.query_dense, layer.key_dense,
                                               layer.value_dense))
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(key_dim))
        attended = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(b, t, -1)
        kernel, bias = layer.output_dense
        return attended @ p[name(kernel)] + p[name(bias)]

    def loss_fn(p: dict, x: Any, y: Any) -> Any:
        h = p[name(model.tokens.embeddings)][x] + p[name(model.positions.embeddings)]
        for block in model.blocks:
            h = norm(p, block.norm1, h + attention(p, block.attention, h))
            h = norm(p, block.norm2, h + dense(p, block.out,
                                                torch.relu(dense(p, block.hidden, h))))
        logits = dense(p, model.logits, h)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    grad_and_value = torch.func.grad_and_value(loss_fn)

    def step(p: dict, m: dict, v: dict, t: Any, x: Any, y: Any) -> tuple:
        grads, loss = grad_and_value(p, x, y)
        total = torch.sqrt(sum((g * g).sum() for g in grads.values()))
        scale = CLIP / torch.maximum(total, torch.tensor(CLIP))
        t = t + 1
        alpha = LR * torch.sqrt(1 - BETA_2 ** t) / (1 - BETA_1 ** t)
        new_p, new_m, new_v = {}, {}, {}
        for k in p:
            g = grads[k] * scale
            new_m[k] = m[k] + (g - m[k]) * (1 - BETA_1)
            new_v[k] = v[k] + (g * g - v[k]) * (1 - BETA_2)
            decayed = p[k] - LR * DECAY * p[k]
            new_p[k] = decayed - new_m[k] * alpha / (torch.sqrt(new_v[k]) + EPSILON)
        return new_p, new_m, new_v, t, loss

    fn = torch.compile(step, fullgraph=True, dynamic=False) if compiled else step
    state = {"p": params, "m": {k: torch.zeros_like(v) for k, v in params.items()},
             "v": {k: torch.zeros_like(v) for k, v in params.items()},
             "t": torch.tensor(0.0, dtype=torch.float64)}
    x, y = torch.tensor(tokens).long(), torch.tensor(targets).long()

    def run() -> float:
        state["p"], state["m"], state["v"], state["t"], loss = fn(
            state["p"], state["m"], state["v"], state["t"], x, y)
        return float(loss)
    return run


def loop(step: Step) -> Callable[[int], None]:
    def run(n: int) -> None:
        for _ in range(n):
            step()
    return run


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.transformer",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args(argv)
    sf.random.set_seed(0)
    tokens, targets = batch(np.random.default_rng(0), args.batch)
    first, model, weights = stageflow_step(tokens, targets)
    steps: dict[str, Step] = {"stageflow staged": first}
    if importlib.util.find_spec("torch") is not None:
        steps["torch.compile"] = torch_step(model, weights, tokens, targets, compiled=True)
        steps["PyTorch eager"] = torch_step(model, weights, tokens, targets, compiled=False)
    losses = {name: step() for name, step in steps.items()}
    for name, loss in losses.items():
        np.testing.assert_allclose(loss, losses["stageflow staged"], rtol=1e-4,
                                   err_msg=f"{name}'s first loss")
    seconds = interleaved_best({name: loop(step) for name, step in steps.items()}, rounds=5,
                               min_time=0.3)
    rates = {name: 1.0 / t for name, t in seconds.items()}
    print(f"transformer training step, batch {args.batch} x {LENGTH} tokens "
          "(steps/s, best of alternating rounds)")
    for name, rate in rates.items():
        print(f"  {name:<18} {rate:8.1f}")
    if "torch.compile" in rates:
        ratio = rates["stageflow staged"] / rates["torch.compile"]
        print(f"stageflow / torch.compile: {ratio:.2f}x (goal >= 1)")
    return rates


if __name__ == "__main__":
    main()
