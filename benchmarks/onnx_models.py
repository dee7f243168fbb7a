"""ONNX models from elsewhere, stageflow against onnxruntime: inference per second at batch 1
and 8, and the first call (import and compile; onnxruntime's session creation and first run).

    python -m benchmarks.onnx_models [MODEL ...] [--rounds N] [--json PATH]

MODEL: the light models the `onnx` wheel ships (`light_resnet50`, `light_densenet121`, ...,
each at its own input shape), and two models exported from PyTorch here with
`torch.onnx.export` where torch is installed: `resnet50` (torchvision's v1.5 layout, 224x224x3)
and `bert` (a BERT-base-shaped encoder: 12 layers, width 768, 12 heads, FFN 3072, sequence
128, fed hidden states), both with a symbolic batch dim, as the anchors' `realsize_h2h.py`
exports them. Weights are random; shapes and FLOPs are the real models'.

onnxruntime runs with its CPU provider, ``intra_op_num_threads=2`` and its default graph
optimisations; stageflow imports with ``sf.onnx.load`` (weights as constants) and runs the
compiled function. The contenders alternate round by round and each figure is its best
round (`timing.interleaved_best`): other work on the two cores only slows a round down.
Both outputs must agree before anything is timed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx

import stageflow as sf
from benchmarks import torch_models
from benchmarks.timing import interleaved_best

LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
BATCHES = (1, 8)


def light_models() -> dict[str, Path]:
    return {path.stem: path for path in sorted(LIGHT_DIR.glob("light_*.onnx"))}


EXPORTED: dict[str, tuple[Callable[[], Any], tuple[int, ...]]] = {
    "resnet50": (torch_models.resnet50, (3, 224, 224)),
    "bert": (torch_models.bert_encoder, (128, 768)),
}


def export_from_torch(name: str, directory: Path) -> Path:
    """`name` exported by torch.onnx.export (TorchScript exporter, opset 17), batch dim
    symbolic."""
    import torch

    build, shape = EXPORTED[name]
    torch.manual_seed(0)
    torch.backends.mha.set_fastpath_enabled(False)  # the encoder's fused kernel has no ONNX
    path = directory / f"{name}.onnx"
    with torch.no_grad():
        torch.onnx.export(build(), (torch.randn(1, *shape),), str(path), input_names=["x"],
                          dynamic_axes={"x": {0: "batch"}}, opset_version=17, dynamo=False)
    return path


def input_shapes(path: Path, batch: int) -> list[tuple[str, tuple[int, ...], np.dtype]] | None:
    """The model's inputs at `batch` (the first dim), None when its batch dim is fixed to
    another size."""
    model = onnx.load(str(path), load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    inputs = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else None
                for d in value.type.tensor_type.shape.dim]
        if dims and dims[0] not in (None, batch):
            return None
        shape = (batch, *dims[1:]) if dims else ()
        dtype = onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        inputs.append((value.name, tuple(d or 1 for d in shape), dtype))
    return inputs


def run_model(name: str, path: Path, rounds: int) -> list[dict[str, Any]]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    rows = []
    for batch in BATCHES:
        inputs = input_shapes(path, batch)
        if inputs is None:
            continue
        rng = np.random.default_rng(0)
        feeds = {n: rng.standard_normal(shape).astype(dtype) for n, shape, dtype in inputs}
        start = time.perf_counter()
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        expected = session.run(None, feeds)
        ort_first = time.perf_counter() - start
        # a compilation cache of its own, empty: the first call compiles as cold as
        # onnxruntime's session is created
        kept, sf.config.cache_dir = sf.config.cache_dir, tempfile.mkdtemp(prefix="stageflow-")
        try:
            start = time.perf_counter()
            model = sf.onnx.load(path, input_shapes={n: s for n, s, _ in inputs})
            args = [sf.constant(feeds[n]) for n in model.input_names]
            got = model(*args)
            sf_first = time.perf_counter() - start
        finally:
            shutil.rmtree(sf.config.cache_dir, ignore_errors=True)
            sf.config.cache_dir = kept
        got = got if isinstance(got, tuple) else (got,)
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(np.asarray(g), e, rtol=1e-3, atol=1e-3)

        def stageflow(n: int, model: Any = model, args: list = args) -> None:
            for _ in range(n):
                model(*args)

        def onnxruntime(n: int, session: Any = session, feeds: dict = feeds) -> None:
            for _ in range(n):
                session.run(None, feeds)

        best = interleaved_best({"stageflow": stageflow, "onnxruntime": onnxruntime},
                                rounds=rounds)
        row = {"model": name, "batch": batch,
               "stageflow_per_s": batch / best["stageflow"],
               "onnxruntime_per_s": batch / best["onnxruntime"],
               "stageflow_first_s": sf_first, "onnxruntime_first_s": ort_first}
        row["ratio"] = row["stageflow_per_s"] / row["onnxruntime_per_s"]
        print(f"{name:22} batch {batch}: stageflow {row['stageflow_per_s']:8.2f}/s  "
              f"onnxruntime {row['onnxruntime_per_s']:8.2f}/s  ratio {row['ratio']:.2f}x  "
              f"first call {sf_first:6.2f} s (onnxruntime session {ort_first:.2f} s)",
              flush=True)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.onnx_models",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", help="default: every light model, resnet50, bert")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    light = light_models()
    has_torch = importlib.util.find_spec("torch") is not None
    names = args.models or [*light, *(EXPORTED if has_torch else ())]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as directory:
        for name in names:
            if name in light:
                path = light[name]
            elif name in EXPORTED:
                if not has_torch:
                    print(f"{name}: skipped (exporting it needs torch)")
                    continue
                path = export_from_torch(name, Path(directory))
            else:
                parser.error(f"unknown model {name!r}; known: {[*light, *EXPORTED]}")
            rows += run_model(name, path, args.rounds)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    main()
