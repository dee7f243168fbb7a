"""The real-size models of the CPU benchmarks on one GPU: ResNet-50 inference and its SGD
training step (224x224x3), BERT-base-shaped encoder inference (sequence 128) and GPT-2-small
greedy decoding (prompt 16, 32 new tokens), each at batch 1 and 8, stageflow staged against
PyTorch eager, torch.compile and jax.jit on the same GPU, in one run.

    python -m benchmarks.gpu_models [--models resnet50 resnet50_train bert bert_bf16 gpt2
                                              gpt2_bf16] [--batches 1 8]
                                    [--steps 32] [--timeout 170] [--budget 540] [--json PATH]
    python -m benchmarks.gpu_models --emulated     (stageflow alone, on an emulated GPU)

stageflow runs the examples' models: `examples/resnet.py`'s ResNet-50 (NHWC) as
``sf.function(lambda x: model(x, training=False))``, `examples/bert.py`'s float32 encoder
from token ids, `examples/gpt2.py`'s `make_generate` (the whole generation one staged
function, its decoding an ``sf.while_loop``), and `examples/resnet.py`'s `train_step`
staged for the training step (SGD, learning rate 0.01, batch norm on the batch's
statistics; PyTorch's and jax's steps are the same). Its variables and functions are created, its
inputs copied and its calls made inside ``sf.device("/device:GPU:0")``. PyTorch runs
`torch_models.resnet50` in channels-last memory, `torch_models.bert_encoder` fed hidden
states (so without the embedding lookup and its layer norm, which are a small part of
stageflow's work), and for GPT-2 the loop of `benchmarks/gpt2.py` (a Python iteration per
token over a preallocated cache written in place), eager and with each step under
``torch.compile(dynamic=False)``. jax.jit runs compact functional versions written here: an
NHWC ResNet-50 (``lax.conv_general_dilated``, batch norm in inference form as a scale and a
shift, max pool by ``lax.reduce_window``), a 12-layer post-norm encoder fed hidden states,
and GPT-2 with the decoding one ``lax.while_loop``. ResNet and BERT weights are random and
differ between frameworks (same shapes, same arithmetic); GPT-2's are `gpt2.initial_weights`
in all three, so their float32 tokens are compared with stageflow's.

Everything but ``bert_bf16`` and ``gpt2_bf16`` is float32 with plain FP32 products, as
stageflow's cuBLAS gemms are: PyTorch's TF32 is off for matmuls and cuDNN, jax computes
under ``default_matmul_precision("highest")`` (its convolutions also ask
``Precision.HIGHEST``). ``bert_bf16`` is the encoder in mixed bfloat16: stageflow's
``mixed_bfloat16`` policy, PyTorch under ``torch.autocast("cuda", torch.bfloat16)``, jax
with its products' operands cast to bfloat16. ``gpt2_bf16`` is the generation with
bfloat16 weights, caches and products (each framework's products summing in float32 on the
tensor cores), its layer norms in float32 for stageflow and jax, in bfloat16 for PyTorch
(``model.to(torch.bfloat16)``, as `benchmarks/gpt2.py` runs it); its tokens are not
compared, as bfloat16 rounding sends greedy choices apart.

Each framework runs in a process of its own (torch.compile apart from PyTorch eager), one
after another so that they never share the GPU, each within ``--timeout`` seconds and all
within ``--budget``: a framework that fails prints its error's tail and its cells read
"failed", one that runs out of time "timed out" (what it measured before is kept), one not
installed or without a CUDA GPU is skipped with a note. Per model and batch a process times
one first call (for stageflow and the compilers: tracing and compiling; for stageflow also
the wait for the host kernels it compiles in the background for the ops that still run on
the host, which NumPy's kernels stand in for meanwhile), two warm-up calls (stageflow
records its launch graph in the first of them), then up to ``--iterations`` calls, at
least three, fewer once the timed calls add up to ``--box`` seconds; the figure is their
median. Every call ends by waiting for the GPU (stageflow's device ``synchronize``,
``torch.cuda.synchronize``, ``block_until_ready``). The figures are images/s, sequences/s
and tokens/s (a whole generation, the prompt step included: batch x new tokens over its
time), and beside them stageflow's rate over the best incumbent's, stageflow's first call in
seconds, its copies between host and GPU per call and its ops run on the host per call
(`sf.config.statistics`'s ``device_copies`` and ``host_fallbacks``).

``--emulated`` runs stageflow alone on an emulated GPU (every GPU thread in turn on the
host) at small sizes (``--small``: ResNet-50 at 32x32, one encoder layer at sequence 16,
one GPT-2 layer with a 4-token prompt and 4 new tokens), which checks the path end to end;
its figures measure the emulation, not a GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
GPU = "/device:GPU:0"

MODELS = ("resnet50", "resnet50_train", "bert", "bert_bf16", "gpt2", "gpt2_bf16")
TITLES = {"resnet50": "ResNet-50 inference", "resnet50_train": "ResNet-50 SGD training step",
          "bert": "BERT-base-shaped encoder inference",
          "bert_bf16": "BERT-base-shaped encoder inference",
          "gpt2": "GPT-2-small greedy decoding", "gpt2_bf16": "GPT-2-small greedy decoding"}
UNITS = {"resnet50": "images/s", "resnet50_train": "images/s", "bert": "sequences/s",
         "bert_bf16": "sequences/s",
         "gpt2": "tokens/s", "gpt2_bf16": "tokens/s"}
# The dtype of each model's weights and arithmetic (float32 where not named).
DTYPES = {"bert_bf16": "mixed bfloat16", "gpt2_bf16": "bfloat16"}
# The frameworks in the order they run (the likeliest to run out of time last), and their
# names in the table.
FRAMEWORKS = {"stageflow": "stageflow", "torch-eager": "PyTorch eager", "jax": "jax.jit",
              "torch-compile": "torch.compile"}
MODULES = {"torch-eager": "torch", "torch-compile": "torch", "jax": "jax"}

FULL = {"size": 224, "bert_layers": 12, "length": 128, "gpt2_layers": 12, "prompt": 16,
        "steps": 32}
SMALL = {"size": 32, "bert_layers": 1, "length": 16, "gpt2_layers": 1, "prompt": 4,
         "steps": 4}

WIDTH, HEADS, FEED_FORWARD = 768, 12, 3072
WARMUPS, MIN_CALLS = 2, 3


# -- the children: one framework each, a line of JSON per model and batch ---------------------

@dataclass
class Workload:
    """One model at one batch: `call` starts a call and returns its result, `wait(result)`
    waits for the GPU; `tokens(result)`, for a generation, its tokens as lists."""

    call: Callable[[], Any]
    wait: Callable[[Any], Any]
    tokens: Callable[[Any], list] | None = None


def _emit(kind: str, payload: dict[str, Any]) -> None:
    print(f"{kind} {json.dumps(payload)}", flush=True)


def _time_calls(work: Workload, iterations: int, box: float,
                settle: Callable[[], object] | None) -> dict[str, Any]:
    """The first call's seconds (with `settle`'s, where given), then after `WARMUPS`
    calls the median seconds of up to `iterations` timed calls (at least `MIN_CALLS`, fewer
    once they add up to `box`)."""
    start = time.perf_counter()
    work.wait(work.call())
    if settle is not None:
        settle()
    first = time.perf_counter() - start
    for _ in range(WARMUPS):
        work.wait(work.call())
    times: list[float] = []
    while len(times) < max(iterations, MIN_CALLS) and (len(times) < MIN_CALLS
                                                       or sum(times) < box):
        start = time.perf_counter()
        work.wait(work.call())
        times.append(time.perf_counter() - start)
    return {"first": first, "seconds": statistics.median(times), "best": min(times),
            "calls": len(times)}


def _run_models(spec: dict[str, Any],
                models: dict[str, Callable[[], Callable[[int], Workload]]],
                probe: Callable[[Workload], dict[str, Any]] | None = None,
                settle: Callable[[], object] | None = None) -> None:
    """Time every model and batch of `spec`: `models[name]()` builds a model once and
    returns its workload per batch, `probe(workload)` adds figures of one more call, and
    `settle()` waits after the first call for what it started compiling in the
    background; a failure costs that model (or batch) alone."""
    for name in spec["models"]:
        try:
            for_batch = models[name]()
        except Exception:  # noqa: BLE001 - reported, and the other models still run
            error = traceback.format_exc()[-3000:]
            for batch in spec["batches"]:
                _emit("FAILED", {"model": name, "batch": batch, "error": error})
            continue
        for batch in spec["batches"]:
            try:
                work = for_batch(batch)
                result = {"model": name, "batch": batch,
                          **_time_calls(work, spec["iterations"], spec["box"], settle)}
                if probe is not None:
                    result.update(probe(work))
                if work.tokens is not None:
                    result["tokens"] = work.tokens(work.call())
                _emit("RESULT", result)
            except Exception:  # noqa: BLE001 - as above
                _emit("FAILED", {"model": name, "batch": batch,
                                 "error": traceback.format_exc()[-3000:]})


def _stageflow_child(spec: dict[str, Any]) -> None:
    sys.path.insert(0, str(EXAMPLES))
    import bert
    import gpt2
    import resnet

    import stageflow as sf
    from stageflow.models import composite_runner
    from stageflow.runtime import devices, eager_kernels

    if spec["emulated"] and sf.config.emulated_gpu_count() == 0:
        sf.config.set_emulated_gpu_count(1)
    if GPU not in sf.list_devices():
        _emit("SKIP", {"reason": f"no GPU: {devices.gpu_unavailable_reason()}"})
        return
    gpu = devices.get(GPU)

    def wait(_: Any) -> None:
        gpu.synchronize()

    def resnet50() -> Callable[[int], Workload]:
        sf.random.set_seed(0)
        model = resnet.resnet50()
        infer = sf.function(lambda x: model(x, training=False))

        def for_batch(batch: int) -> Workload:
            x = resnet.synthetic_batch(batch, spec["size"], 1000)[0].gpu()
            return Workload(lambda: infer(x), wait)
        return for_batch

    def resnet50_train() -> Callable[[int], Workload]:
        sf.random.set_seed(0)
        model, optimizer = resnet.resnet50(), sf.optimizers.SGD(0.01)
        step = sf.function(resnet.train_step)

        def for_batch(batch: int) -> Workload:
            x, y = (t.gpu() for t in resnet.synthetic_batch(batch, spec["size"], 1000))
            return Workload(lambda: step(model, optimizer, x, y), wait)
        return for_batch

    def encoder(policy: str = "float32") -> Callable[[int], Workload]:
        model = bert.build(policy, spec["bert_layers"])
        infer = sf.function(lambda t: model(t))

        def for_batch(batch: int) -> Workload:
            x = sf.constant(bert.tokens(batch)[:, :spec["length"]]).gpu()
            return Workload(lambda: infer(x), wait)
        return for_batch

    def decoder(dtype: Any = sf.float32) -> Callable[[int], Workload]:
        generate = gpt2.make_generate(gpt2.GPT2(spec["gpt2_layers"]), spec["steps"], dtype)

        def for_batch(batch: int) -> Workload:
            prompt = sf.constant(gpt2.prompts(batch, spec["prompt"])).gpu()
            return Workload(lambda: generate(prompt), wait,
                            lambda out: out[0].numpy().tolist())
        return for_batch

    def settle() -> None:
        eager_kernels.settle()  # host kernels of the ops still run on the host
        composite_runner.settle()  # the eager layers' of `bert.build`'s first call

    def copies(work: Workload) -> dict[str, Any]:
        sf.config.reset_statistics()
        work.wait(work.call())
        counted = sf.config.statistics()
        return {"copies": counted["device_copies"], "copy_bytes": counted["device_copy_bytes"],
                "host_ops": counted["host_fallbacks"]}

    with sf.device(GPU):
        _run_models(spec, {"resnet50": resnet50, "resnet50_train": resnet50_train,
                           "bert": encoder, "bert_bf16": lambda: encoder("mixed_bfloat16"),
                           "gpt2": decoder, "gpt2_bf16": lambda: decoder(sf.bfloat16)},
                    copies, settle)


def _torch_gpt2(torch: Any, arrays: dict[str, Any], device: str, dtype: Any
                ) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """`benchmarks/gpt2.py`'s PyTorch GPT-2 on `device` with weights of `dtype` (every one,
    as ``model.to(dtype)`` makes them there), functional: ``prompt(tokens, cache)`` (the
    last position's logits, the cache's prompt rows written) and ``decode(token, position,
    cache)`` (one token per sequence, its cache row written in place); the cache is
    (layers, 2, batch, heads, max_length, head_dim)."""
    functional = torch.nn.functional
    depth = WIDTH // HEADS

    def tensor(array: np.ndarray) -> Any:
        return torch.from_numpy(array).to(device=device, dtype=dtype)

    wte, wpe = tensor(arrays["wte"]), tensor(arrays["wpe"])
    blocks = [{name: tensor(a) for name, a in block.items()} for block in arrays["blocks"]]
    final = tensor(arrays["lnf_scale"]), tensor(arrays["lnf_offset"])

    def norm(x: Any, w: dict[str, Any], name: str) -> Any:
        return functional.layer_norm(x, (WIDTH,), w[f"{name}_scale"], w[f"{name}_offset"],
                                     1e-5)

    def linear(x: Any, w: dict[str, Any], name: str) -> Any:
        return functional.linear(x, w[name], w[f"{name}_bias"])

    def mlp(x: Any, w: dict[str, Any]) -> Any:
        hidden = functional.gelu(linear(norm(x, w, "ln2"), w, "fc"), approximate="tanh")
        return linear(hidden, w, "out")

    def logits(x: Any) -> Any:
        return functional.layer_norm(x, (WIDTH,), *final, 1e-5) @ wte.T  # tied

    def prompt(tokens: Any, cache: Any) -> Any:
        batch, length = tokens.shape
        x = wte[tokens] + wpe[:length]
        for i, w in enumerate(blocks):
            q, k, v = linear(norm(x, w, "ln1"), w, "qkv").view(
                batch, length, 3, HEADS, depth).permute(2, 0, 3, 1, 4)
            cache[i, 0, :, :, :length] = k
            cache[i, 1, :, :, :length] = v
            mixed = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + linear(mixed.transpose(1, 2).reshape(batch, length, WIDTH), w, "proj")
            x = x + mlp(x, w)
        return logits(x[:, -1])

    def decode(token: Any, position: Any, cache: Any) -> Any:
        x = wte[token] + wpe[position]
        batch = x.shape[0]
        seen = (torch.arange(cache.shape[4], device=device) <= position).view(1, -1)
        for i, w in enumerate(blocks):
            q, k, v = linear(norm(x, w, "ln1"), w, "qkv").view(
                batch, 3, HEADS, 1, depth).unbind(1)
            cache[i, 0].index_copy_(2, position.view(1), k)
            cache[i, 1].index_copy_(2, position.view(1), v)
            mixed = functional.scaled_dot_product_attention(q, cache[i, 0], cache[i, 1],
                                                            attn_mask=seen)
            x = x + linear(mixed.reshape(batch, WIDTH), w, "proj")
            x = x + mlp(x, w)
        return logits(x)

    return prompt, decode


def _torch_child(spec: dict[str, Any], compiled: bool) -> None:
    sys.path.insert(0, str(EXAMPLES))
    import gpt2
    import torch

    from benchmarks import torch_models

    device = "cpu" if spec["incumbents_on_cpu"] else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        _emit("SKIP", {"reason": "torch sees no CUDA GPU"})
        return
    torch.backends.cuda.matmul.allow_tf32 = False  # plain FP32, as stageflow's cuBLAS gemms
    torch.backends.cudnn.allow_tf32 = False
    torch.set_grad_enabled(False)
    torch.manual_seed(0)

    def wait(_: Any) -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    def wrap(f: Any) -> Any:
        # static shapes: a compile per batch size, not one generic over the batch
        return torch.compile(f, dynamic=False) if compiled else f

    def resnet50() -> Callable[[int], Workload]:
        model = wrap(torch_models.resnet50().to(device=device,
                                                memory_format=torch.channels_last))

        def for_batch(batch: int) -> Workload:
            x = torch.randn(batch, 3, spec["size"], spec["size"], device=device).to(
                memory_format=torch.channels_last)
            return Workload(lambda: model(x), wait)
        return for_batch

    def resnet50_train() -> Callable[[int], Workload]:
        model = torch_models.resnet50().to(device=device,
                                           memory_format=torch.channels_last).train()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

        def step(x: Any, y: Any) -> Any:
            with torch.enable_grad():
                optimizer.zero_grad(set_to_none=True)
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
            return loss

        step = wrap(step)

        def for_batch(batch: int) -> Workload:
            x = torch.randn(batch, 3, spec["size"], spec["size"], device=device).to(
                memory_format=torch.channels_last)
            y = torch.randint(0, 1000, (batch,), device=device)
            return Workload(lambda: step(x, y), wait)
        return for_batch

    def encoder(autocast: bool = False) -> Callable[[int], Workload]:
        model = torch_models.bert_encoder()
        model.layers = model.layers[:spec["bert_layers"]]  # all 12 but with --small
        model.num_layers = len(model.layers)
        model = wrap(model.to(device))

        def call(x: Any) -> Any:
            with torch.autocast(device, torch.bfloat16, enabled=autocast):
                return model(x)

        def for_batch(batch: int) -> Workload:
            x = torch.randn(batch, spec["length"], WIDTH, device=device)
            return Workload(lambda: call(x), wait)
        return for_batch

    def decoder(dtype: Any = torch.float32) -> Callable[[int], Workload]:
        layers, length, steps = spec["gpt2_layers"], spec["prompt"], spec["steps"]
        prompt_step, decode_step = map(wrap, _torch_gpt2(torch, gpt2.initial_weights(layers),
                                                         device, dtype))
        # each position its own 0-d tensor, made once: no copy to the GPU per token
        positions = [torch.tensor(i, device=device) for i in range(length + steps)]

        def for_batch(batch: int) -> Workload:
            prompt = torch.from_numpy(gpt2.prompts(batch, length)).long().to(device)
            cache = torch.zeros(layers, 2, batch, HEADS, length + steps, WIDTH // HEADS,
                                device=device, dtype=dtype)  # written before it is read

            def generate() -> Any:
                token = prompt_step(prompt, cache).argmax(-1)
                tokens = [token]
                for i in range(1, steps):
                    token = decode_step(token, positions[length + i - 1], cache).argmax(-1)
                    tokens.append(token)
                return torch.stack(tokens, 1)
            return Workload(generate, wait, lambda out: out.cpu().tolist())
        return for_batch

    _run_models(spec, {"resnet50": resnet50, "resnet50_train": resnet50_train,
                       "bert": encoder, "bert_bf16": lambda: encoder(autocast=True),
                       "gpt2": decoder, "gpt2_bf16": lambda: decoder(torch.bfloat16)})


def _jax_child(spec: dict[str, Any]) -> None:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # share the GPU
    sys.path.insert(0, str(EXAMPLES))
    import gpt2
    import jax

    platform = "cpu" if spec["incumbents_on_cpu"] else "gpu"
    try:
        device = jax.devices(platform)[0]
    except RuntimeError as error:
        _emit("SKIP", {"reason": f"jax sees no {platform}: {error}"})
        return
    with jax.default_device(device), jax.default_matmul_precision("highest"):
        _run_models(spec, {"resnet50": lambda: _jax_resnet50(jax, spec["size"]),
                           "resnet50_train": lambda: _jax_resnet50(jax, spec["size"], True),
                           "bert": lambda: _jax_encoder(jax, spec["bert_layers"],
                                                        spec["length"]),
                           "bert_bf16": lambda: _jax_encoder(jax, spec["bert_layers"],
                                                             spec["length"], "bfloat16"),
                           "gpt2": lambda: _jax_decoder(jax, gpt2, spec),
                           "gpt2_bf16": lambda: _jax_decoder(jax, gpt2, spec, "bfloat16")})


def _jax_wait(out: Any) -> Any:
    return out.block_until_ready()


def _jax_resnet50(jax: Any, size: int, training: bool = False) -> Callable[[int], Workload]:
    """ResNet-50 in NHWC as `examples/resnet.py` lays it out ("same" padding, the stride on
    each stage's first 3x3 convolution), random weights, batch norm a scale and a shift per
    channel; with `training`, the SGD step (learning rate 0.01) on the mean softmax
    cross-entropy, batch norm normalising by the batch's statistics (its moving statistics,
    which stageflow and PyTorch also update, are left out)."""
    jnp, lax = jax.numpy, jax.lax
    rng = np.random.default_rng(0)

    def conv_bn(kernel: int, cin: int, cout: int) -> dict[str, Any]:
        std = math.sqrt(2.0 / (kernel * kernel * cin))
        return {"w": rng.standard_normal((kernel, kernel, cin, cout), np.float32) * std,
                "scale": np.ones(cout, np.float32), "shift": np.zeros(cout, np.float32)}

    params: dict[str, Any] = {"stem": conv_bn(7, 3, 64), "blocks": []}
    strides = []
    cin = 64
    for stage, (width, count) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        for i in range(count):
            block = {"c1": conv_bn(1, cin, width), "c2": conv_bn(3, width, width),
                     "c3": conv_bn(1, width, 4 * width)}
            if i == 0:
                block["proj"] = conv_bn(1, cin, 4 * width)
            params["blocks"].append(block)
            strides.append(2 if stage > 0 and i == 0 else 1)
            cin = 4 * width
    params["fc_w"] = rng.standard_normal((2048, 1000), np.float32) * 0.02
    params["fc_b"] = np.zeros(1000, np.float32)
    params = jax.tree.map(jnp.asarray, params)

    def conv(x: Any, p: dict[str, Any], stride: int = 1) -> Any:
        y = lax.conv_general_dilated(x, p["w"], (stride, stride), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                     precision=lax.Precision.HIGHEST)
        if training:
            mean = y.mean((0, 1, 2))
            y = (y - mean) * lax.rsqrt(((y - mean) ** 2).mean((0, 1, 2)) + 1e-5)
        return y * p["scale"] + p["shift"]

    def forward(params: dict[str, Any], x: Any) -> Any:
        relu = jax.nn.relu
        h = relu(conv(x, params["stem"], 2))
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
        for p, stride in zip(params["blocks"], strides, strict=True):
            y = relu(conv(h, p["c1"]))
            y = relu(conv(y, p["c2"], stride))
            y = conv(y, p["c3"])
            h = relu(y + (conv(h, p["proj"], stride) if "proj" in p else h))
        return h.mean((1, 2)) @ params["fc_w"] + params["fc_b"]

    def loss(params: dict[str, Any], x: Any, y: Any) -> Any:
        logits = forward(params, x)
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1).mean()

    @jax.jit
    def step(params: dict[str, Any], x: Any, y: Any) -> tuple[Any, Any]:
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads), value

    infer = jax.jit(forward)
    state = {"params": params}

    def train(x: Any, y: Any) -> Any:
        state["params"], value = step(state["params"], x, y)
        return value

    def for_batch(batch: int) -> Workload:
        x = jnp.asarray(rng.standard_normal((batch, size, size, 3), np.float32))
        if training:
            y = jnp.asarray(rng.integers(0, 1000, batch).astype(np.int32))
            return Workload(lambda: train(x, y), _jax_wait)
        return Workload(lambda: infer(params, x), _jax_wait)
    return for_batch


def _jax_layer_norm(jnp: Any, x: Any, scale: Any, offset: Any, epsilon: float) -> Any:
    mean = x.mean(-1, keepdims=True)
    variance = jnp.square(x - mean).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(variance + epsilon) * scale + offset


def _jax_encoder(jax: Any, layers: int, length: int, dtype: str = "float32"
                 ) -> Callable[[int], Workload]:
    """`layers` post-norm encoder layers of BERT-base's shape (exact GELU), random weights,
    fed hidden states; with `dtype` bfloat16, the products take the weights and their
    inputs in bfloat16 and the rest stays float32, as a mixed policy has it."""
    jnp = jax.numpy
    rng = np.random.default_rng(0)
    depth = WIDTH // HEADS

    def dense(cin: int, cout: int) -> dict[str, Any]:
        return {"w": rng.standard_normal((cin, cout), np.float32) * 0.02,
                "b": np.zeros(cout, np.float32)}

    def norm() -> dict[str, Any]:
        return {"scale": np.ones(WIDTH, np.float32), "offset": np.zeros(WIDTH, np.float32)}

    params = jax.tree.map(jnp.asarray, [
        {"q": dense(WIDTH, WIDTH), "k": dense(WIDTH, WIDTH), "v": dense(WIDTH, WIDTH),
         "o": dense(WIDTH, WIDTH), "ln1": norm(), "up": dense(WIDTH, FEED_FORWARD),
         "down": dense(FEED_FORWARD, WIDTH), "ln2": norm()} for _ in range(layers)])

    def apply(x: Any, p: dict[str, Any]) -> Any:
        product = x.astype(dtype) @ p["w"].astype(dtype)
        return product.astype(jnp.float32) + p["b"]

    @jax.jit
    def forward(params: list[dict[str, Any]], x: Any) -> Any:
        batch = x.shape[0]
        for p in params:
            q, k, v = (apply(x, p[name]).reshape(batch, length, HEADS, depth)
                       for name in "qkv")
            scores = jnp.einsum("bqhd,bkhd->bhqk", q.astype(dtype), k.astype(dtype))
            attention = jax.nn.softmax(scores.astype(jnp.float32) / math.sqrt(depth), -1)
            mixed = jnp.einsum("bhqk,bkhd->bqhd", attention.astype(dtype),
                               v.astype(dtype)).astype(jnp.float32)
            x = _jax_layer_norm(jnp, x + apply(mixed.reshape(batch, length, WIDTH), p["o"]),
                                **p["ln1"], epsilon=1e-12)
            hidden = jax.nn.gelu(apply(x, p["up"]), approximate=False)
            x = _jax_layer_norm(jnp, x + apply(hidden, p["down"]), **p["ln2"], epsilon=1e-12)
        return x

    def for_batch(batch: int) -> Workload:
        x = jnp.asarray(rng.standard_normal((batch, length, WIDTH), np.float32))
        return Workload(lambda: forward(params, x), _jax_wait)
    return for_batch


def _jax_decoder(jax: Any, gpt2: Any, spec: dict[str, Any], dtype: str = "float32"
                 ) -> Callable[[int], Workload]:
    """GPT-2 greedy generation as one jitted function on `gpt2.initial_weights` of `dtype`
    (the layer norms computed in float32, as `examples/gpt2.py` computes them): the prompt
    step fills a (batch, max_length, heads, head_dim) cache per layer, then a
    ``lax.while_loop`` decodes a token per sequence and iteration, writing the cache with
    ``dynamic_update_slice``."""
    jnp, lax = jax.numpy, jax.lax
    layers, length, steps = spec["gpt2_layers"], spec["prompt"], spec["steps"]
    depth, max_length = WIDTH // HEADS, spec["prompt"] + spec["steps"]
    params = jax.tree.map(lambda a: jnp.asarray(a, dtype), gpt2.initial_weights(layers))

    def linear(x: Any, w: dict[str, Any], name: str) -> Any:
        return x @ w[name].T + w[f"{name}_bias"]  # (out, in), as nn.Linear keeps it

    def norm(x: Any, w: dict[str, Any], name: str) -> Any:
        wide = [a.astype(jnp.float32) for a in (x, w[f"{name}_scale"], w[f"{name}_offset"])]
        return _jax_layer_norm(jnp, *wide, 1e-5).astype(x.dtype)

    def mlp(x: Any, w: dict[str, Any]) -> Any:
        return linear(jax.nn.gelu(linear(norm(x, w, "ln2"), w, "fc"), approximate=True),
                      w, "out")

    def greedy(x: Any, params: dict[str, Any]) -> Any:
        return jnp.argmax(norm(x, params, "lnf") @ params["wte"].T, -1).astype(jnp.int32)

    @jax.jit
    def generate(params: dict[str, Any], prompt: Any) -> Any:
        batch = prompt.shape[0]
        x = params["wte"][prompt] + params["wpe"][:length]
        causal = jnp.tril(jnp.ones((length, length), bool))
        caches = []
        for w in params["blocks"]:
            qkv = linear(norm(x, w, "ln1"), w, "qkv").reshape(batch, length, 3, HEADS, depth)
            q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
            scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(depth)
            attention = jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), -1)
            mixed = jnp.einsum("bhqk,bkhd->bqhd", attention, v).reshape(batch, length, WIDTH)
            x = x + linear(mixed, w, "proj")
            x = x + mlp(x, w)
            empty = jnp.zeros((batch, max_length, HEADS, depth), x.dtype)
            caches.append((empty.at[:, :length].set(k), empty.at[:, :length].set(v)))
        token = greedy(x[:, -1], params)
        out = jnp.zeros((batch, steps), jnp.int32).at[:, 0].set(token)

        def body(carry: tuple) -> tuple:
            i, token, out, caches = carry
            position = length + i - 1
            x = params["wte"][token] + params["wpe"][position]
            seen = jnp.arange(max_length) <= position
            updated = []
            for w, (keys, values) in zip(params["blocks"], caches, strict=True):
                qkv = linear(norm(x, w, "ln1"), w, "qkv").reshape(batch, 3, HEADS, depth)
                q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
                keys = lax.dynamic_update_slice(keys, k[:, None], (0, position, 0, 0))
                values = lax.dynamic_update_slice(values, v[:, None], (0, position, 0, 0))
                scores = jnp.einsum("bhd,bkhd->bhk", q, keys) / math.sqrt(depth)
                attention = jax.nn.softmax(jnp.where(seen, scores, -jnp.inf), -1)
                mixed = jnp.einsum("bhk,bkhd->bhd", attention, values).reshape(batch, WIDTH)
                x = x + linear(mixed, w, "proj")
                x = x + mlp(x, w)
                updated.append((keys, values))
            token = greedy(x, params)
            out = lax.dynamic_update_slice(out, token[:, None], (0, i))
            return i + 1, token, out, updated

        _, _, out, _ = lax.while_loop(lambda carry: carry[0] < steps, body,
                                      (jnp.int32(1), token, out, caches))
        return out

    def for_batch(batch: int) -> Workload:
        prompt = jnp.asarray(gpt2.prompts(batch, length))
        return Workload(lambda: generate(params, prompt), _jax_wait,
                        lambda out: np.asarray(out).tolist())
    return for_batch


CHILDREN: dict[str, Callable[[dict[str, Any]], None]] = {
    "stageflow": _stageflow_child,
    "torch-eager": lambda spec: _torch_child(spec, compiled=False),
    "torch-compile": lambda spec: _torch_child(spec, compiled=True),
    "jax": _jax_child,
}


# -- the parent: the children in turn, the table ------------------------------------------------

def _run_child(framework: str, spec: dict[str, Any], timeout: float
               ) -> tuple[str, dict[tuple[str, int], Any], str]:
    """Run one framework's process: its status ("ok", "failed", "timed out", "skipped"),
    its results by (model, batch) (a dict of figures, or "failed"), and a note (an error's
    tail, a reason for skipping)."""
    command = [sys.executable, "-m", "benchmarks.gpu_models", "--child", framework,
               json.dumps(spec)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    # A session of its own: a timeout ends the process and whatever it started (compile
    # workers) together.
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    status = "ok"
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:  # it ended meanwhile
            pass
        out, err = process.communicate()
        status = "timed out"
    results: dict[tuple[str, int], Any] = {}
    notes = []
    for line in out.splitlines():
        kind, _, payload = line.partition(" ")
        if kind not in ("RESULT", "FAILED", "SKIP"):
            continue
        found = json.loads(payload)
        if kind == "SKIP":
            return "skipped", {}, found["reason"]
        key = (found.pop("model"), found.pop("batch"))
        if kind == "RESULT":
            results[key] = found
        else:
            results[key] = "failed"
            notes.append(f"{key[0]} batch {key[1]}:\n{found['error']}")
    if status == "ok" and process.returncode != 0:
        status = "failed"
    if status != "ok":
        notes.append(f"stderr tail:\n{err[-3000:]}")
    return status, results, "\n".join(notes)


def _rate(model: str, batch: int, seconds: float, steps: int) -> float:
    return batch * (steps if model.startswith("gpt2") else 1) / seconds


def _table(spec: dict[str, Any], frameworks: list[str],
           cells: dict[tuple[str, str, int], Any]) -> None:
    """Print, per model, a row per batch: each framework's rate (or why none), stageflow's
    over the best incumbent's, stageflow's first call and copies per call; for GPT-2, how
    many of each incumbent's tokens equal stageflow's."""
    shapes = {"resnet50": f"{spec['size']}x{spec['size']}x3",
              "resnet50_train": f"{spec['size']}x{spec['size']}x3",
              "bert": f"{spec['bert_layers']} layers, sequence {spec['length']}",
              "bert_bf16": f"{spec['bert_layers']} layers, sequence {spec['length']}",
              "gpt2_bf16": f"{spec['gpt2_layers']} layers, prompt {spec['prompt']}, "
                           f"{spec['steps']} new tokens",
              "gpt2": f"{spec['gpt2_layers']} layers, prompt {spec['prompt']}, "
                      f"{spec['steps']} new tokens"}
    names = [FRAMEWORKS[f] for f in frameworks]
    for model in spec["models"]:
        print(f"\n{TITLES[model]}, {shapes[model]}: {UNITS[model]}, "
              f"{DTYPES.get(model, 'float32')}")
        header = (f"  {'batch':>5}" + "".join(f" {name:>14}" for name in names)
                  + f" {'sf/best':>8} {'sf first s':>10} {'sf copies':>9} {'host ops':>8}")
        print(header)
        for batch in spec["batches"]:
            rates: dict[str, float] = {}
            row = f"  {batch:>5}"
            for framework in frameworks:
                cell = cells[framework, model, batch]
                if isinstance(cell, dict):
                    rates[framework] = _rate(model, batch, cell["seconds"], spec["steps"])
                    row += f" {rates[framework]:>14.2f}"
                else:
                    row += f" {cell:>14}"
            others = [rate for name, rate in rates.items() if name != "stageflow"]
            ours = cells["stageflow", model, batch]
            ratio = (f"{rates['stageflow'] / max(others):.2f}x"
                     if others and "stageflow" in rates else "-")
            first = f"{ours['first']:.1f}" if isinstance(ours, dict) else "-"
            copies = str(ours["copies"]) if isinstance(ours, dict) else "-"
            host = str(ours["host_ops"]) if isinstance(ours, dict) else "-"
            print(row + f" {ratio:>8} {first:>10} {copies:>9} {host:>8}")
        firsts = [f"{FRAMEWORKS[f]} " + "/".join(
            f"{cells[f, model, b]['first']:.1f}" if isinstance(cells[f, model, b], dict)
            else "-" for b in spec["batches"]) for f in frameworks]
        print(f"  first calls, s (batch {'/'.join(map(str, spec['batches']))}): "
              + ", ".join(firsts))
        if model == "gpt2":
            _compare_tokens(spec, frameworks, cells)


def _compare_tokens(spec: dict[str, Any], frameworks: list[str],
                    cells: dict[tuple[str, str, int], Any]) -> None:
    for batch in spec["batches"]:
        ours = cells["stageflow", "gpt2", batch]
        if not isinstance(ours, dict):
            continue
        same = []
        for framework in (f for f in frameworks if f != "stageflow"):
            theirs = cells[framework, "gpt2", batch]
            if isinstance(theirs, dict):
                equal = int(np.sum(np.array(ours["tokens"]) == np.array(theirs["tokens"])))
                same.append(f"{FRAMEWORKS[framework]} {equal}")
        if same:
            print(f"  batch {batch}: tokens equal to stageflow's, of "
                  f"{batch * spec['steps']}: " + ", ".join(same))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_models",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--steps", type=int, help="new tokens of GPT-2 (default 32; small 4)")
    parser.add_argument("--timeout", type=float, default=170.0,
                        help="seconds for each framework's process")
    parser.add_argument("--budget", type=float, default=540.0,
                        help="seconds for all of them together")
    parser.add_argument("--iterations", type=int, default=7, help="timed calls at most")
    parser.add_argument("--box", type=float, default=4.0,
                        help="seconds of timed calls after which no more are made")
    parser.add_argument("--emulated", action="store_true",
                        help="stageflow alone, on an emulated GPU (implies --small)")
    parser.add_argument("--small", action="store_true", help="the small shapes")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    # Checks of this script without a GPU: the incumbents on the CPU, and a child's entry.
    parser.add_argument("--incumbents-on-cpu", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", nargs=2, metavar=("FRAMEWORK", "SPEC"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        CHILDREN[args.child[0]](json.loads(args.child[1]))
        return {}
    spec: dict[str, Any] = dict(SMALL if args.small or args.emulated else FULL)
    spec.update(models=args.models, batches=args.batches, iterations=args.iterations,
                box=args.box, emulated=args.emulated,
                incumbents_on_cpu=args.incumbents_on_cpu)
    if args.steps:
        spec["steps"] = args.steps
    frameworks = list(FRAMEWORKS)
    if args.emulated and not args.incumbents_on_cpu:
        frameworks = ["stageflow"]
    cells: dict[tuple[str, str, int], Any] = {}
    report: dict[str, Any] = {"spec": spec, "frameworks": {}, "results": []}
    start = time.perf_counter()
    for framework in frameworks:
        left = args.budget - (time.perf_counter() - start)
        module = MODULES.get(framework)
        if module is not None and importlib.util.find_spec(module) is None:
            status, results, note = "skipped", {}, f"{module} is not installed"
        elif left < 10:
            status, results, note = "timed out", {}, "no time left of --budget"
        else:
            began = time.perf_counter()
            status, results, note = _run_child(framework, spec, min(args.timeout, left))
            print(f"{FRAMEWORKS[framework]}: {status} in {time.perf_counter() - began:.0f} s",
                  flush=True)
        if note:
            print(f"{FRAMEWORKS[framework]} ({status}): {note}", flush=True)
        report["frameworks"][FRAMEWORKS[framework]] = {"status": status, "note": note}
        fallback = "failed" if status == "ok" else status
        for model in spec["models"]:
            for batch in spec["batches"]:
                cell = cells[framework, model, batch] = results.get((model, batch), fallback)
                row = {"framework": FRAMEWORKS[framework], "model": model, "batch": batch}
                if isinstance(cell, dict):
                    row.update(cell, unit=UNITS[model],
                               rate=_rate(model, batch, cell["seconds"], spec["steps"]))
                else:
                    row["status"] = cell
                report["results"].append(row)
    where = "an emulated GPU" if args.emulated else "one GPU"
    print(f"\nOn {where}, median of timed calls after warm-up, each ending by waiting for "
          f"the GPU; sf/best: stageflow's rate over the best incumbent's; sf copies: "
          f"stageflow's copies between host and GPU per call; host ops: stageflow's ops "
          f"run on the host per call")
    _table(spec, frameworks, cells)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
