"""Ahead-of-time libraries for other machines, timed here: a WebAssembly module under Node.js
against the same function compiled for this machine, and against onnxruntime-web (its
WebAssembly backend) running the same model; and this machine's self-contained library
(stageflow's own gemm) against its usual one.

    python -m benchmarks.targets [MODEL ...] [--rounds N] [--json PATH]

MODEL: ``matmul`` (512 x 512 by a constant 512 x 512, float32: the gemm alone), ``mlp``
(784-64-10, batch 64, the README's MLP), ``light_squeezenet`` and
``light_resnet50`` (ONNX's light models, batch 1, imported with ``sf.onnx.load``). The
matmul and the MLP go to onnxruntime-web as ``sf.onnx.export`` writes them, the light models
as their files: the same model for every contender.

Contenders (inputs fixed, outputs checked against each other before timing):

- ``host``: the library for this machine (``sf.aot.compile``: OpenBLAS linked, whose
  gemms it calls unless the CPU has AVX-512, where it takes our own too, `matmul.own_gemm`;
  the worker pool on every core), called through ctypes;
- ``own gemm``: the same, ``self_contained=True``: stageflow's gemm for every product
  (one-row ones included), no OpenBLAS linked;
- ``wasm``: the ``wasm32`` library under Node.js through its ES module (one thread: a
  plain WebAssembly module has none);
- ``onnxruntime-web``: its WebAssembly backend under the same Node.js, one thread
  (``env.wasm.numThreads = 1``), installed with npm into a cache folder on first use
  (``~/.cache/stageflow/npm``); where npm cannot install it the row says so.

Node's contenders are long-lived processes that run N calls per request read on stdin, so
all four alternate round by round in one process (`timing.interleaved_best`). aarch64
libraries run under qemu here: their times are an emulator's, not the target's, and are not
reported.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

import stageflow as sf
from benchmarks.timing import interleaved_best, named_runs

LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
NPM_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "stageflow" / "npm"
ORT_WEB = "onnxruntime-web@1.30.0"

# A Node contender: reads "N" lines on stdin, answers "ok" after N calls (the first line
# it prints, "ready OUTPUTS", carries the first output's values for the check).
_SERVE = """
import readline from 'node:readline';
const lines = readline.createInterface({input: process.stdin});
const inputs = INPUTS.map(([kind, path, shape]) => {
  const bytes = fs.readFileSync(path);
  const data = new globalThis[kind](bytes.buffer, bytes.byteOffset, bytes.byteLength /
                                    globalThis[kind].BYTES_PER_ELEMENT);
  return {data, shape};
});
const first = await run(inputs);
console.log('ready ' + JSON.stringify(Array.from(first)));
for await (const line of lines) {
  const n = Number(line);
  for (let i = 0; i < n; i++) await run(inputs);
  console.log('ok');
}
"""
_STAGEFLOW = """
import fs from 'node:fs';
import { Model } from 'MODULE';
const model = await Model.load('WASM');
async function run(inputs) { return model.call(...inputs.map(x => x.data))[0]; }
"""
_ORT = """
import fs from 'node:fs';
import * as ort from 'ORT';
ort.env.wasm.numThreads = 1;
ort.env.logLevel = 'error';  // not its notes on unused initializers
const session = await ort.InferenceSession.create(fs.readFileSync('MODEL').buffer,
                                                 {executionProviders: ['wasm']});
async function run(inputs) {
  const feeds = {};
  session.inputNames.forEach((name, i) => {
    feeds[name] = new ort.Tensor(TYPES[i], inputs[i].data, inputs[i].shape);
  });
  const result = await session.run(feeds);
  return result[session.outputNames[0]].data;
}
"""
_ARRAYS = {np.dtype(np.float32): ("Float32Array", "float32"),
           np.dtype(np.int32): ("Int32Array", "int32"),
           np.dtype(np.int64): ("BigInt64Array", "int64")}


class NodeContender:
    """A Node.js process running one model: `__call__(n)` runs it n times; `first` is the
    first output of its first call."""

    def __init__(self, script: str, folder: Path, inputs: Sequence[np.ndarray]) -> None:
        specs = []
        for index, array in enumerate(inputs):
            path = folder / f"input{index}.bin"
            np.ascontiguousarray(array).tofile(path)
            specs.append([_ARRAYS[array.dtype][0], str(path), list(array.shape)])
        source = folder / f"serve{len(list(folder.glob('serve*.mjs')))}.mjs"
        source.write_text(script + _SERVE.replace("INPUTS", json.dumps(specs)))
        self.process = subprocess.Popen(["node", str(source)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, cwd=folder)
        line = self.process.stdout.readline()
        if not line.startswith("ready "):
            self.process.kill()
            raise RuntimeError(f"node {source.name} did not start: {line!r}")
        self.first = np.array(json.loads(line[6:]), np.float64)

    def __call__(self, n: int) -> None:
        self.process.stdin.write(f"{n}\n")
        self.process.stdin.flush()
        if self.process.stdout.readline().strip() != "ok":
            raise RuntimeError("a Node contender stopped")

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


class CtypesContender:
    """A saved library of fixed shapes called through ctypes: `__call__(n)` calls it n
    times; `first` is its first output."""

    def __init__(self, library: Any, folder: Path, inputs: Sequence[np.ndarray]) -> None:
        path = library.save(folder / f"lib{library.name}.so")
        self.handle = ctypes.CDLL(path)
        self.entry = getattr(self.handle, library.name)
        self.inputs = [np.ascontiguousarray(x) for x in inputs]
        self.outputs = [np.empty(ty.shape, ty.dtype) for ty in library.signature.outputs]
        pointers = ctypes.c_void_p * max(len(self.inputs), len(self.outputs), 1)
        self.in_pointers = pointers(*(x.ctypes.data for x in self.inputs))
        self.out_pointers = pointers(*(y.ctypes.data for y in self.outputs))
        self(1)
        self.first = self.outputs[0].astype(np.float64).ravel()

    def __call__(self, n: int) -> None:
        for _ in range(n):
            code = self.entry(self.in_pointers, None, self.out_pointers)
            if code:
                raise RuntimeError(f"the library returned {code}")


def _mlp() -> tuple[Any, list[np.ndarray], onnx.ModelProto]:
    rng = np.random.default_rng(0)
    w1 = sf.constant(rng.standard_normal((784, 64)).astype(np.float32) * 0.05)
    b1 = sf.constant(np.zeros(64, np.float32))
    w2 = sf.constant(rng.standard_normal((64, 10)).astype(np.float32) * 0.1)

    @sf.function
    def predict(x):
        return sf.nn.softmax(sf.matmul(sf.nn.relu(sf.matmul(x, w1) + b1), w2))

    spec = sf.TensorSpec([64, 784], sf.float32, name="x")
    # opset 21: onnxruntime-web 1.30 reads ONNX files up to IR version 13 (opset 28 is 14)
    return (predict.get_concrete_function(spec), [rng.standard_normal((64, 784)).astype(
        np.float32)], sf.onnx.export(predict, [spec], opset=21))


def _matmul() -> tuple[Any, list[np.ndarray], onnx.ModelProto]:
    rng = np.random.default_rng(0)
    w = sf.constant(rng.standard_normal((512, 512)).astype(np.float32))

    @sf.function
    def product(x):
        return sf.matmul(x, w)

    spec = sf.TensorSpec([512, 512], sf.float32, name="x")
    return (product.get_concrete_function(spec), [rng.standard_normal((512, 512)).astype(
        np.float32)], sf.onnx.export(product, [spec], opset=21))


def _light(name: str) -> tuple[Any, list[np.ndarray], onnx.ModelProto]:
    path = LIGHT_DIR / f"{name}.onnx"
    model = onnx.load(str(path))
    initializers = {t.name for t in model.graph.initializer}
    shapes = {v.name: [d.dim_value or 1 for d in v.type.tensor_type.shape.dim]
              for v in model.graph.input if v.name not in initializers}
    imported = sf.onnx.load(model, input_shapes=shapes)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape).astype(np.float32) for shape in shapes.values()]
    return imported.function.get_concrete_function(*imported.input_signature), inputs, model


MODELS: dict[str, Callable[[], tuple[Any, list[np.ndarray], onnx.ModelProto]]] = {
    "matmul": _matmul,
    "mlp": _mlp,
    "light_squeezenet": lambda: _light("light_squeezenet"),
    "light_resnet50": lambda: _light("light_resnet50"),
}


def onnxruntime_web() -> Path | None:
    """The installed onnxruntime-web's module file, installing it with npm on first use;
    None where that cannot be done."""
    module = NPM_DIR / "node_modules" / "onnxruntime-web" / "dist" / "ort.node.min.mjs"
    if not module.exists() and shutil.which("npm"):
        NPM_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--prefix", str(NPM_DIR), ORT_WEB],
                       capture_output=True, timeout=600)
    return module if module.exists() else None


def run_model(name: str, rounds: int) -> dict[str, Any]:
    concrete, inputs, model = MODELS[name]()
    with tempfile.TemporaryDirectory(prefix="stageflow-targets-") as scratch:
        folder = Path(scratch)
        contenders: dict[str, Any] = {
            "host": CtypesContender(sf.aot.compile(concrete, name="host"), folder, inputs),
            "own gemm": CtypesContender(sf.aot.compile(concrete, name="own",
                                                       self_contained=True), folder, inputs),
        }
        wasm = sf.aot.compile(concrete, name="model", target="wasm32")
        wasm_path = wasm.save(folder / "model.wasm")
        contenders["wasm"] = NodeContender(
            _STAGEFLOW.replace("MODULE", str(folder / "model.mjs")).replace("WASM", wasm_path),
            folder, inputs)
        ort_module = onnxruntime_web()
        if ort_module is not None:
            onnx.save(model, str(folder / "model.onnx"))
            types = json.dumps([_ARRAYS[x.dtype][1] for x in inputs])
            contenders["onnxruntime-web"] = NodeContender(
                _ORT.replace("ORT", str(ort_module)).replace("MODEL", str(folder / "model.onnx"))
                .replace("TYPES", types), folder, inputs)
        reference = contenders["host"].first
        for label, contender in contenders.items():
            np.testing.assert_allclose(contender.first, reference, rtol=2e-3, atol=1e-4,
                                       err_msg=f"{name}: {label} disagrees with the host")
        best = interleaved_best(contenders, rounds=rounds)
        for contender in contenders.values():
            if isinstance(contender, NodeContender):
                contender.close()
    row: dict[str, Any] = {"model": name, **{f"{k} ms": v * 1e3 for k, v in best.items()}}
    row["own gemm / host"] = best["host"] / best["own gemm"]
    row["wasm / host"] = best["host"] / best["wasm"]
    if "onnxruntime-web" in best:
        row["wasm / onnxruntime-web"] = best["onnxruntime-web"] / best["wasm"]
    times = "  ".join(f"{k} {v * 1e3:8.2f} ms" for k, v in best.items())
    ratios = "  ".join(f"{k} {v:.2f}x" for k, v in row.items() if k.count("/"))
    print(f"{name:18} {times}\n{'':18} speed ratios: {ratios}"
          + ("" if ort_module else "  (onnxruntime-web: npm could not install it)"), flush=True)
    return row


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    return named_runs("targets", __doc__, list(MODELS), run_model, argv)


if __name__ == "__main__":
    main()
