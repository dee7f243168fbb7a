"""ResNet-50 at its real size (224x224x3): inference at batch 1 and 8, and the SGD training
step at batch 8 (batch norm in training mode), stageflow staged against PyTorch eager,
torch.compile and, for inference, onnxruntime, in one run.

    python -m benchmarks.resnet50 [--rounds 2] [--batches 1 8] [--train-batch 8]
                                  [--precision float32|mixed_bfloat16]

stageflow runs `examples/resnet.py`'s model (NHWC, weights as variables): inference is
``sf.function`` of its call, and the same function frozen ("stageflow frozen":
`Function.freeze`, the weights constants as onnxruntime's are), the step that example's
`train_step` staged. PyTorch runs the
same architecture (`torch_models.resnet50`, torchvision's v1.5 layout) in channels-last
memory, as the anchors' `realsize_h2h.py` does; onnxruntime (2 intra-op threads, default
optimisations) runs that model exported by ``torch.onnx.export``, its weights constants.
Each framework runs in fresh processes of its own, in alternating rounds (their thread
pools would spin against each other in one process); each reports per configuration the
median of its timed calls after warm-up and its first call (tracing and compiling
included), and the best of the rounds is kept. Beside each figure, the GFLOP/s it amounts
to (the convolutions' and the classifier's multiply-adds times two; a training step
counted as three forward passes). The goal (issue "real-size models and bfloat16"): every
row at least the best incumbent. PyTorch and onnxruntime are optional.

``--precision mixed_bfloat16``: stageflow builds the model under Keras's mixed policy
(layers compute in bfloat16, variables stay float32), PyTorch runs under
``torch.autocast("cpu", torch.bfloat16)``; onnxruntime, whose CPU provider has no bfloat16
convolutions, sits it out. The goal there: at least torch.compile under autocast.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys

# Multiply-adds of one 224x224 image's forward pass: the convolutions and the classifier.
FORWARD_MACS = 4.09e9

STAGEFLOW = r"""
import json, sys, time
sys.path.insert(0, "examples")
import stageflow as sf
import resnet
from benchmarks.timing import interleaved_medians
batches, train_batch, precision = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
sf.keras.mixed_precision.set_global_policy(precision)
sf.random.set_seed(0)
model = resnet.resnet50()
infer = sf.function(lambda x: model(x, training=False))
runs, first = {}, {}

def timed_first(name, call):
    start = time.perf_counter()
    call()
    first[name] = time.perf_counter() - start

frozen = {}
for batch in batches:
    x = resnet.synthetic_batch(batch, 224, 1000)[0]
    timed_first(f"infer {batch}", lambda: infer(x).numpy())
    def run(k, x=x):
        for _ in range(k):
            infer(x).numpy()
    runs[f"infer {batch}"] = run
    def freeze(x=x, batch=batch):
        frozen[batch] = infer.freeze(x)
        frozen[batch](x).numpy()
    timed_first(f"frozen infer {batch}", freeze)
    def run_frozen(k, x=x, batch=batch):
        for _ in range(k):
            frozen[batch](x).numpy()
    runs[f"frozen infer {batch}"] = run_frozen
if train_batch:
    optimizer = sf.optimizers.SGD(0.01)
    step = sf.function(resnet.train_step)
    x, y = resnet.synthetic_batch(train_batch, 224, 1000)
    timed_first(f"train {train_batch}", lambda: float(step(model, optimizer, x, y)))
    def train(k):
        for _ in range(k):
            float(step(model, optimizer, x, y))
    runs[f"train {train_batch}"] = train
print(json.dumps({"seconds": interleaved_medians(runs, rounds=3, min_time=0.3),
                  "first": first}))
"""

TORCH = r"""
import json, sys, time
import torch
from benchmarks import torch_models
from benchmarks.timing import interleaved_medians
batches, train_batch, precision = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
autocast = precision == "mixed_bfloat16"
torch.set_num_threads(2)
torch.manual_seed(0)
runs, first = {}, {}

def timed_first(name, call):
    start = time.perf_counter()
    call()
    first[name] = time.perf_counter() - start

model = torch_models.resnet50().to(memory_format=torch.channels_last)
for kind in ("eager", "compile"):
    f = model if kind == "eager" else torch.compile(model)
    for batch in batches:
        x = torch.randn(batch, 3, 224, 224).to(memory_format=torch.channels_last)
        def call(f=f, x=x):
            with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16,
                                                        enabled=autocast):
                return f(x)
        timed_first(f"{kind} infer {batch}", call)
        def run(k, call=call):
            for _ in range(k):
                call()
        runs[f"{kind} infer {batch}"] = run
if train_batch:
    x = torch.randn(train_batch, 3, 224, 224).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (train_batch,))
    for kind in ("eager", "compile"):
        net = torch_models.resnet50().to(memory_format=torch.channels_last).train()
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
        def step(net=net, optimizer=optimizer):
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", torch.bfloat16, enabled=autocast):
                loss = torch.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            optimizer.step()
            return loss
        f = step if kind == "eager" else torch.compile(step)
        timed_first(f"{kind} train {train_batch}", lambda f=f: float(f()))
        def train(k, f=f):
            for _ in range(k):
                float(f())
        runs[f"{kind} train {train_batch}"] = train
print(json.dumps({"seconds": interleaved_medians(runs, rounds=3, min_time=0.3),
                  "first": first}))
"""

ONNXRUNTIME = r"""
import io, json, sys, time
import numpy as np
import onnxruntime as ort
import torch
from benchmarks import torch_models
from benchmarks.timing import interleaved_medians
batches = json.loads(sys.argv[1])
torch.manual_seed(0)
buffer = io.BytesIO()
with torch.no_grad():
    torch.onnx.export(torch_models.resnet50(), (torch.randn(1, 3, 224, 224),), buffer,
                      input_names=["x"], dynamic_axes={"x": {0: "batch"}}, opset_version=17,
                      dynamo=False)
options = ort.SessionOptions()
options.intra_op_num_threads = 2
runs, first = {}, {}
for batch in batches:
    x = np.random.default_rng(0).standard_normal((batch, 3, 224, 224)).astype(np.float32)
    start = time.perf_counter()
    session = ort.InferenceSession(buffer.getvalue(), options,
                                   providers=["CPUExecutionProvider"])
    session.run(None, {"x": x})
    first[f"infer {batch}"] = time.perf_counter() - start
    def run(k, session=session, x=x):
        for _ in range(k):
            session.run(None, {"x": x})
    runs[f"infer {batch}"] = run
print(json.dumps({"seconds": interleaved_medians(runs, rounds=3, min_time=0.3),
                  "first": first}))
"""


def _child(code: str, *args: str) -> dict[str, dict[str, float]]:
    run = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.resnet50",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batches", type=int, nargs="*", default=[1, 8])
    parser.add_argument("--train-batch", type=int, default=8, help="0: no training step")
    parser.add_argument("--precision", choices=["float32", "mixed_bfloat16"],
                        default="float32")
    args = parser.parse_args(argv)
    batches = json.dumps(args.batches)
    children = {"stageflow": (STAGEFLOW, batches, str(args.train_batch), args.precision)}
    if importlib.util.find_spec("torch") is not None:
        children["torch"] = (TORCH, batches, str(args.train_batch), args.precision)
        if (importlib.util.find_spec("onnxruntime") is not None
                and args.precision == "float32"):
            children["onnxruntime"] = (ONNXRUNTIME, batches)
    best: dict[str, float] = {}
    first: dict[str, float] = {}
    for _ in range(args.rounds):
        for framework, (code, *child_args) in children.items():
            result = _child(code, *child_args)
            for name, seconds in result["seconds"].items():
                key = f"{framework} {name}"
                best[key] = min(best.get(key, float("inf")), seconds)
            for name, seconds in result["first"].items():  # the coldest round's
                key = f"{framework} {name}"
                first[key] = max(first.get(key, 0.0), seconds)
    print(f"ResNet-50, 224x224x3, {args.precision}: images/s (GFLOP/s) [first call, s], "
          f"best of {args.rounds} alternating rounds of medians")
    workloads = [f"infer {b}" for b in args.batches]
    workloads += [f"train {args.train_batch}"] if args.train_batch else []
    for workload in workloads:
        batch = int(workload.split()[1])
        work = 2 * FORWARD_MACS * batch * (3 if workload.startswith("train") else 1)
        rows = {key[:-len(workload) - 1]: seconds for key, seconds in best.items()
                if key.endswith(f" {workload}")}
        print(f"  {workload}:")
        for name, seconds in sorted(rows.items(), key=lambda item: item[1]):
            print(f"    {name:20s} {batch / seconds:8.2f} ({work / seconds / 1e9:4.0f}) "
                  f"[{first[f'{name} {workload}']:.1f}]")
        others = [seconds for name, seconds in rows.items()
                  if not name.startswith("stageflow")]
        for ours in (name for name in rows if name.startswith("stageflow") and others):
            print(f"    {ours} / best incumbent {min(others) / rows[ours]:.2f}x")
    return best


if __name__ == "__main__":
    main()
