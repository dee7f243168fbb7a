"""Examples/s of a small ResNet's training step against the batch size (the paper's Figure 3,
on the CIFAR-sized ResNet of the anchors' ``resnet_h2h.py``).

    python -m benchmarks.resnet [BATCH ...] [--json PATH] [--plot PNG]   (default 1 2 4 8 16 32)

The model is `examples/resnet.py`'s `cifar_resnet` (the paper: "the code used to generate
these benchmarks all rely on the same Model class"): 32x32x3 images; conv3x3(16)-BN-relu;
basic blocks of 16, 32/2 and 64/2 filters with 1x1 projection shortcuts; global average
pooling; dense(10); mean softmax cross-entropy; SGD(0.01); batch norm training (batch
statistics, moving statistics updated). stageflow runs it eagerly and staged (the model's
call and the training step decorated with `sf.function`). Where installed, PyTorch eager,
torch.compile and jax.jit run the same model, defined once per framework as the anchors
define it (gradients by `torch.autograd.grad` and `jax.value_and_grad`, SGD in place or as
new arrays), from the same initial weights (stageflow's, copied) and on the same batch; each
one's first loss must agree with stageflow's. PyTorch pads its stride-2 convolutions as
TensorFlow's "SAME" does (one row and column more at the end) so that all compute the same
function, and its moving variance is the unbiased one (its rule; the work is the same).

The machine is noisy (two cores, shared): the contenders run in alternating rounds and each
figure is its best round (`timing.interleaved_best`), the least disturbed one. Each batch
also prints the first call of each step that stages (trace and compile): stageflow's with
an empty compilation cache of its own, after its eager step's background compiles.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import stageflow as sf
from benchmarks.timing import interleaved_best
from examples.resnet import ResNet, cifar_resnet, train_step
from stageflow.models import composite_runner as composites
from stageflow.models import fused_updates
from stageflow.runtime import eager_kernels

BATCHES = [1, 2, 4, 8, 16, 32]
SIZE, CLASSES, LR, MOMENTUM, EPSILON = 32, 10, 0.01, 0.99, 1e-3
Weights = dict[str, np.ndarray]
Step = Callable[[], float]  # one training step on the fixed batch; returns its loss


def make_batch(batch: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    images = rng.standard_normal((batch, SIZE, SIZE, 3)).astype(np.float32)
    return images, rng.integers(0, CLASSES, batch).astype(np.int32)


def built_model() -> ResNet:
    """A CIFAR ResNet with its variables created (by one inference call)."""
    model = cifar_resnet(CLASSES)
    model(sf.zeros((1, SIZE, SIZE, 3)))
    return model


def weights(model: ResNet) -> Weights:
    """The model's variables by name: what the other frameworks start from."""
    conv, bn, _ = model.stem
    named = {"stem": conv.kernel, "stem_g": bn.gamma, "stem_b": bn.beta}
    for i, block in enumerate(model.blocks):
        for j, (c, n) in enumerate([(block.conv1, block.bn1), (block.conv2, block.bn2)], 1):
            named.update({f"b{i}c{j}": c.kernel, f"b{i}g{j}": n.gamma, f"b{i}b{j}": n.beta})
        if block.shortcut is not None:
            named[f"b{i}sc"] = block.shortcut.kernel
    named.update({"dense": model.head.kernel, "dense_b": model.head.bias})
    return {name: variable.numpy() for name, variable in named.items()}


def block_strides(model: ResNet) -> list[int]:
    """Each basic block's stride (the other frameworks' loops over blocks)."""
    return [block.conv1.strides[0] for block in model.blocks]


def bn_channels(start: Weights) -> list[int]:
    """The channels of each batch norm, in the order of the forward pass (of the gammas)."""
    return [v.shape[0] for k, v in start.items() if k == "stem_g" or k[2] == "g"]


# --------------------------------------------------------------------------- stageflow


def stageflow_step(initial: ResNet, x: np.ndarray, y: np.ndarray, staged: bool) -> Step:
    """`train_step` of `examples/resnet.py` on a fresh model holding `initial`'s values."""
    model = built_model()
    for variable, value in zip(model.variables, initial.variables, strict=True):
        variable.assign(value.numpy())
    optimizer = sf.optimizers.SGD(LR)
    step = train_step
    if staged:
        model.call = sf.function(model.call)
        step = sf.function(train_step)
    tx, ty = sf.constant(x), sf.constant(y)
    return lambda: float(step(model, optimizer, tx, ty))


# --------------------------------------------------------------------------- PyTorch


def torch_step(start: Weights, strides: list[int], x: np.ndarray, y: np.ndarray,
               compiled: bool) -> Step:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(2)
    params = {k: torch.tensor(v.transpose(3, 2, 0, 1).copy() if v.ndim == 4 else v)
              .requires_grad_() for k, v in start.items()}
    stats = [(torch.zeros(c), torch.ones(c)) for c in bn_channels(start)]

    def conv(h: Any, w: Any, stride: int) -> Any:
        if w.shape[-1] == 3 and stride == 2:  # TensorFlow's SAME: the odd pad at the end
            return F.conv2d(F.pad(h, (0, 1, 0, 1)), w, stride=2)
        return F.conv2d(h, w, stride=stride, padding=w.shape[-1] // 2)

    def bn(h: Any, i: int, gamma: Any, beta: Any) -> Any:
        mean, var = stats[i]
        return F.batch_norm(h, mean, var, gamma, beta, training=True,
                            momentum=1 - MOMENTUM, eps=EPSILON)

    def forward(h: Any) -> Any:
        p = params
        h = F.relu(bn(conv(h, p["stem"], 1), 0, p["stem_g"], p["stem_b"]))
        for i, s in enumerate(strides):
            r = F.relu(bn(conv(h, p[f"b{i}c1"], s), 2 * i + 1, p[f"b{i}g1"], p[f"b{i}b1"]))
            r = bn(conv(r, p[f"b{i}c2"], 1), 2 * i + 2, p[f"b{i}g2"], p[f"b{i}b2"])
            h = F.relu(r + (conv(h, p[f"b{i}sc"], s) if f"b{i}sc" in p else h))
        return h.mean(dim=(2, 3)) @ p["dense"] + p["dense_b"]

    def step(x: Any, y: Any) -> Any:
        loss = F.cross_entropy(forward(x), y)
        names = list(params)
        grads = torch.autograd.grad(loss, [params[k] for k in names])
        with torch.no_grad():
            for k, g in zip(names, grads, strict=True):
                params[k].sub_(LR * g)
        return loss.detach()

    fn = torch.compile(step) if compiled else step
    xt = torch.tensor(x).permute(0, 3, 1, 2).contiguous()
    yt = torch.tensor(y).long()
    return lambda: fn(xt, yt).item()


# --------------------------------------------------------------------------- JAX


def jax_step(start: Weights, strides: list[int], x: np.ndarray, y: np.ndarray) -> Step:
    import jax
    import jax.numpy as jnp

    def conv(h: Any, w: Any, s: int) -> Any:
        return jax.lax.conv_general_dilated(h, w, (s, s), "SAME",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def bn(h: Any, gamma: Any, beta: Any, moving: list) -> Any:
        mean = h.mean(axis=(0, 1, 2))
        var = jnp.square(h - jax.lax.stop_gradient(mean)).mean(axis=(0, 1, 2))
        moving.append((mean, var))
        return (h - mean) * jax.lax.rsqrt(var + EPSILON) * gamma + beta

    def loss_fn(p: dict, x: Any, y: Any) -> tuple[Any, list]:
        moving: list = []
        h = jax.nn.relu(bn(conv(x, p["stem"], 1), p["stem_g"], p["stem_b"], moving))
        for i, s in enumerate(strides):
            r = jax.nn.relu(bn(conv(h, p[f"b{i}c1"], s), p[f"b{i}g1"], p[f"b{i}b1"], moving))
            r = bn(conv(r, p[f"b{i}c2"], 1), p[f"b{i}g2"], p[f"b{i}b2"], moving)
            h = jax.nn.relu(r + (conv(h, p[f"b{i}sc"], s) if f"b{i}sc" in p else h))
        logits = h.mean(axis=(1, 2)) @ p["dense"] + p["dense_b"]
        loss = -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(y.shape[0]), y])
        return loss, moving

    @jax.jit
    def step(p: dict, stats: list, x: Any, y: Any) -> tuple[dict, list, Any]:
        (loss, batch), g = jax.value_and_grad(loss_fn, has_aux=True)(p, x, y)
        stats = [(m * MOMENTUM + jax.lax.stop_gradient(bm) * (1 - MOMENTUM),
                  v * MOMENTUM + jax.lax.stop_gradient(bv) * (1 - MOMENTUM))
                 for (m, v), (bm, bv) in zip(stats, batch, strict=True)]
        return jax.tree_util.tree_map(lambda a, b: a - LR * b, p, g), stats, loss

    state = {"p": {k: jnp.asarray(v) for k, v in start.items()},
             "stats": [(jnp.zeros(c), jnp.ones(c)) for c in bn_channels(start)]}
    xj, yj = jnp.asarray(x), jnp.asarray(y)

    def run() -> float:
        state["p"], state["stats"], loss = step(state["p"], state["stats"], xj, yj)
        return float(loss)
    return run


# --------------------------------------------------------------------------- the run


def stageflow_steps(batch: int, initial: ResNet) -> dict[str, Step]:
    x, y = make_batch(batch)
    return {"stageflow eager": stageflow_step(initial, x, y, staged=False),
            "stageflow staged": stageflow_step(initial, x, y, staged=True)}


def incumbent_steps(batch: int, initial: ResNet) -> dict[str, Step]:
    """Every installed incumbent's step for `batch`, from the same weights and data."""
    x, y = make_batch(batch)
    start, strides = weights(initial), block_strides(initial)
    steps = {}
    if importlib.util.find_spec("torch"):
        steps["PyTorch eager"] = torch_step(start, strides, x, y, compiled=False)
        steps["torch.compile"] = torch_step(start, strides, x, y, compiled=True)
    if importlib.util.find_spec("jax"):
        steps["jax.jit"] = jax_step(start, strides, x, y)
    return steps


def first_calls(steps: dict[str, Step], losses: dict[str, float]) -> dict[str, float]:
    """Each step's first call (tracing and compiling where it stages): its loss goes in
    `losses`, its seconds are returned."""
    seconds = {}
    for name, step in steps.items():
        start = time.perf_counter()
        losses[name] = step()
        seconds[name] = time.perf_counter() - start
    return seconds


def loop(step: Step) -> Callable[[int], None]:
    def run(n: int) -> None:
        for _ in range(n):
            step()
    return run


def main(batches: list[int]) -> dict[int, dict[str, float]]:
    print("small CIFAR ResNet training step (examples/s, best of alternating rounds)")
    # A cache of its own, empty: stageflow's first calls compile as cold as the incumbents'.
    kept, sf.config.cache_dir = sf.config.cache_dir, tempfile.mkdtemp(prefix="stageflow-")
    sf.random.set_seed(0)
    initial = built_model()
    results = {}
    for batch in batches:
        steps = stageflow_steps(batch, initial)
        first: dict[str, float] = {}
        first_calls({"stageflow eager": steps["stageflow eager"]}, first)
        eager_kernels.settle()  # the eager step's convolutions, compiled in the background
        composites.settle()  # and its batch norms: not while the staged step compiles
        fused_updates.settle()  # and its SGD step
        compiles = first_calls({"stageflow staged": steps["stageflow staged"]}, first)
        incumbents = incumbent_steps(batch, initial)
        compiles.update(first_calls(incumbents, first))
        steps.update(incumbents)
        print(f"  batch {batch:3d}  first call (s): " + "  ".join(
            f"{name} {compiles[name]:.2f}" for name in compiles if name != "PyTorch eager"))
        for name, loss in first.items():
            np.testing.assert_allclose(loss, first["stageflow eager"], rtol=2e-3,
                                       err_msg=f"{name}'s first loss")
        seconds = interleaved_best({name: loop(step) for name, step in steps.items()},
                                   rounds=5, min_time=0.3)
        rates = {name: batch / t for name, t in seconds.items()}
        results[batch] = rates
        print(f"  batch {batch:3d}  " + "  ".join(f"{name} {rate:7.1f}"
                                                   for name, rate in rates.items()))
    shutil.rmtree(sf.config.cache_dir, ignore_errors=True)
    sf.config.cache_dir = kept
    return results


def cli(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.resnet", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("batches", nargs="*", type=int, default=BATCHES)
    parser.add_argument("--plot", type=Path, help="also draw the figure (needs matplotlib)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    results = main(args.batches)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    if args.plot:
        from benchmarks import plot  # here: it needs matplotlib, which the run does not

        plot.draw_resnet(results, args.plot)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    cli()
