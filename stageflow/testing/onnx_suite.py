"""ONNX's own conformance suite run on stageflow's backend, whole: every node, simple,
pytorch-converted, pytorch-operator and real (light) model case the installed `onnx` ships,
each imported, compiled and run, its outputs compared with the case's references at the
case's tolerances (ONNX's `Runner.assert_similar_outputs`).

    python -m stageflow.testing.onnx_suite [-k REGEX] [--kind node] [--verbose]
                                           [--reference] [--jobs N]
                                           [--interpreted | --gpu | --aot]
                                           [--target aarch64-linux-gnu | wasm32
                                            [--chromium]]

prints a row per kind (passed, failed, excluded) and names every failure with its first
error line (--verbose: every case). --reference runs onnxruntime's own backend
(`onnxruntime.backend`) on the same cases in the same run: two more columns, and each
failure says whether onnxruntime passes it. --interpreted runs the staged graphs through
the interpreter; --gpu runs them placed on the first GPU (ONNX's "CUDA" device): a real one
where the machine has one, else an emulated GPU (its kernels' LLVM IR run on the host,
which checks the numbers and that the ops run on a GPU's kernels, not a GPU's speed);
--aot compiles each case ahead of time (its inputs' shapes fixed) into a library a C
program calls (`stageflow.testing.c_program`), as a user of ``stageflow compile
model.onnx`` would: ``--kind real --aot`` is the light models from C, and with ``--target
aarch64-linux-gnu`` the same compiled for aarch64 and run under qemu, with ``--target
wasm32`` as WebAssembly under Node.js (`wasm_program`), or with ``--chromium`` in a page
of headless Chromium. The exclusions, each with its reason, are
`stageflow/onnx/exclusions.txt`: one ``REGEX  # reason`` a line, searched in the case's
name; only for types stageflow has no tensors of and ops out of its scope. Each case is
compiled, so the cases run in a pool of two processes unless --jobs says otherwise.

The real kind is ONNX's light models (``onnx/backend/test/data/light``): inputs drawn by
`Runner.generate_dummy_data` as ONNX's runner draws them, outputs compared with the
``*_output_0.pb`` files beside the model.
"""

from __future__ import annotations

import argparse
import glob
import multiprocessing
import os
import re
import shutil
import sys
import tempfile
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import onnx
from onnx import numpy_helper
from onnx.backend.test.case.test_case import TestCase
from onnx.backend.test.loader import load_model_tests
from onnx.backend.test.runner import Runner

from stageflow.aot.library import compile_function
from stageflow.core.devices import emulated_gpu_count, set_emulated_gpu_count
from stageflow.onnx.backend import StageflowBackend
from stageflow.onnx.importer import load
from stageflow.testing import c_program, wasm_program

KINDS = ("node", "simple", "pytorch-converted", "pytorch-operator", "real")
OUTCOMES = ("passed", "failed", "excluded")
REFERENCE_OUTCOMES = ("ort passed", "ort failed")
EXCLUSIONS = Path(__file__).resolve().parent.parent / "onnx" / "exclusions.txt"
# The folder holding the `onnx` package: a light model's url is relative to it.
_SITE = Path(onnx.__file__).resolve().parent.parent

DataSets = list[tuple[list[Any], list[Any]]]


@dataclass(frozen=True)
class Outcome:
    kind: str
    name: str
    outcome: str
    detail: str = ""
    reference: str = ""  # onnxruntime's outcome on the case, with --reference


@cache
def exclusions(path: Path = EXCLUSIONS) -> tuple[tuple[re.Pattern[str], str], ...]:
    """The excluded cases' patterns, each with its reason."""
    found = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        pattern, _, reason = line.partition("#")
        if not pattern.strip():
            continue
        if not reason.strip():
            raise ValueError(f"{path}:{number}: an exclusion without its '# reason'")
        found.append((re.compile(pattern.strip()), reason.strip()))
    return tuple(found)


def exclusion(name: str) -> str | None:
    """Why case `name` is excluded, or None when it runs."""
    return next((reason for pattern, reason in exclusions() if pattern.search(name)), None)


def cases(kinds: Iterable[str], pattern: str | None) -> list[TestCase]:
    """The suite's cases of `kinds` whose names match `pattern` (models not loaded yet for
    the kinds kept in files)."""
    with warnings.catch_warnings():  # the case generators' own overflow warnings
        warnings.simplefilter("ignore")
        found = [case for kind in kinds for case in load_model_tests(kind=kind)]
    regex = re.compile(pattern) if pattern else None
    return [case for case in found if regex is None or regex.search(case.name)]


def _read(path: str, type_proto: onnx.TypeProto) -> Any:
    """One input or output file of a data set, read as the graph declares its type."""
    data = Path(path).read_bytes()
    if type_proto.HasField("sequence_type"):
        sequence = onnx.SequenceProto()
        sequence.ParseFromString(data)
        return numpy_helper.to_list(sequence)
    if type_proto.HasField("optional_type"):
        optional = onnx.OptionalProto()
        optional.ParseFromString(data)
        return numpy_helper.to_optional(optional)
    tensor = onnx.TensorProto()
    tensor.ParseFromString(data)
    return numpy_helper.to_array(tensor)


def _array(value: Any) -> Any:
    """A case's value as the backend takes it: a TensorProto as its array."""
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else value


def _graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    initialized = {t.name for t in model.graph.initializer}
    return [x for x in model.graph.input if x.name not in initialized]


def light_model_path(case: TestCase) -> Path:
    """The light model file of a real case."""
    return _SITE / case.url


def light_case(case: TestCase) -> tuple[onnx.ModelProto, DataSets]:
    """A real case's light model, with inputs as ONNX's runner makes them and the outputs
    kept beside the model."""
    path = light_model_path(case)
    model = onnx.load(path)
    inputs = [Runner.generate_dummy_data(x, seed=0, name=case.model_name, random=False)
              for x in _graph_inputs(model)]
    prefix = str(path.with_suffix(""))
    outputs = [_read(f"{prefix}_output_{i}.pb", x.type)
               for i, x in enumerate(model.graph.output)]
    return model, [(inputs, outputs)]


def materialise(case: TestCase) -> tuple[onnx.ModelProto, DataSets]:
    """The case's model and data sets, read from its folder where it keeps them there."""
    if case.model is not None:  # its values are arrays, or TensorProtos (Cast's cases)
        return case.model, [([_array(x) for x in i], [_array(x) for x in o])
                            for i, o in case.data_sets]
    if case.model_dir is None:
        return light_case(case)
    model = onnx.load(os.path.join(case.model_dir, "model.onnx"))
    data_sets = []
    for folder in sorted(glob.glob(os.path.join(case.model_dir, "test_data_set*"))):
        count = len(glob.glob(os.path.join(folder, "input_*.pb")))
        inputs = [_read(os.path.join(folder, f"input_{i}.pb"), model.graph.input[i].type)
                  for i in range(count)]
        count = len(glob.glob(os.path.join(folder, "output_*.pb")))
        outputs = [_read(os.path.join(folder, f"output_{i}.pb"), model.graph.output[i].type)
                   for i in range(count)]
        data_sets.append((inputs, outputs))
    return model, data_sets


def _first_line(error: BaseException) -> str:
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {first}"[:300]


def check(backend: Any, model: onnx.ModelProto, data_sets: DataSets, case: TestCase,
          device: str = "CPU", **kwargs: Any) -> str:
    """"" when `backend` reproduces every data set of the case on `device` (ONNX's name),
    else the first error line."""
    try:
        rep = backend.prepare(model, device, **kwargs)
        for inputs, references in data_sets:
            outputs = rep.run(list(inputs))
            Runner.assert_similar_outputs(list(references), list(outputs), case.rtol, case.atol)
    except Exception as error:  # the outcome is the report: any failure is counted
        return _first_line(error)
    return ""


def check_aot(model: onnx.ModelProto, data_sets: DataSets, case: TestCase,
              target: str = "cpu", browser: str | None = None) -> str:
    """"" when the case's model, compiled ahead of time for `target` for each data set's
    input shapes and called from C, reproduces every data set, else the first error line."""
    names = [x.name for x in _graph_inputs(model)]
    try:
        with tempfile.TemporaryDirectory(prefix="onnx_aot_") as folder:
            for index, (inputs, references) in enumerate(data_sets):
                arrays = [_array(x) for x in inputs]
                shapes = {name: x.shape for name, x in zip(names, arrays, strict=True)}
                imported = load(model, input_shapes=shapes)
                library = compile_function(imported.function, *imported.input_signature,
                                           name="model", target=target)
                data = Path(folder, str(index))
                data.mkdir()
                outputs = _call(data, library, arrays, browser)
                Runner.assert_similar_outputs(list(references), outputs, case.rtol, case.atol)
    except Exception as error:  # the outcome is the report: any failure is counted
        return _first_line(error)
    return ""


def _call(folder: Path, library: Any, arrays: list, browser: str | None) -> list:
    """The outputs of `library` called once on `arrays`: from C, or for a WebAssembly
    library from Node.js (in `browser`, where given)."""
    if library.target != "wasm32":
        return c_program.call(folder, library, arrays)
    result = wasm_program.run(folder, library, arrays, browser=browser)
    if result.code:
        raise RuntimeError(f"the Node.js call of {library.name} returned {result.code}")
    return result.outputs


def run_case(case: TestCase, reference: bool = False, mode: str = "compiled",
             target: str = "cpu", browser: str | None = None) -> Outcome:
    """One case: imported, run on each data set in `mode` ("compiled", "interpreted",
    "gpu" or "aot", for `target`) and compared (and by onnxruntime too)."""
    try:
        model, data_sets = materialise(case)
    except Exception as error:  # a case whose files cannot be read is a failure too
        return Outcome(case.kind, case.name, "failed", f"reading the case: {_first_line(error)}")
    ort = ""
    if reference:
        ort = "failed" if check(_onnxruntime(), model, data_sets, case) else "passed"
    reason = exclusion(case.name)
    if reason is not None:
        return Outcome(case.kind, case.name, "excluded", reason, ort)
    if mode == "aot":
        detail = check_aot(model, data_sets, case, target, browser)
    elif mode == "gpu":
        if not emulated_gpu_count():  # after any real GPU: the first GPU is a real one
            set_emulated_gpu_count(1)
        detail = check(StageflowBackend, model, data_sets, case, "CUDA")
    else:
        detail = check(StageflowBackend, model, data_sets, case, jit=mode == "compiled")
    return Outcome(case.kind, case.name, "failed" if detail else "passed", detail, ort)


def _onnxruntime() -> Any:
    """onnxruntime's backend module (imported only with --reference)."""
    import onnxruntime  # noqa: PLC0415 - an optional reference, loaded on demand
    import onnxruntime.backend  # noqa: PLC0415

    onnxruntime.set_default_logger_severity(4)  # fatal only: its notes on old opsets are noise here
    return onnxruntime.backend


def _run_all(selected: list[TestCase], jobs: int, reference: bool,
             mode: str, target: str, browser: str | None) -> Iterator[Outcome]:
    if jobs <= 1:
        for case in selected:
            yield run_case(case, reference, mode, target, browser)
        return
    context = multiprocessing.get_context("spawn")  # no forked compiler threads
    with ProcessPoolExecutor(jobs, mp_context=context) as pool:
        yield from pool.map(run_case, selected, [reference] * len(selected),
                            [mode] * len(selected), [target] * len(selected),
                            [browser] * len(selected), chunksize=4)


def print_table(counts: dict[str, Counter], reference: bool) -> None:
    """A row per kind: passed, failed, excluded (and onnxruntime's passed and failed)."""
    columns = OUTCOMES + (REFERENCE_OUTCOMES if reference else ())
    print(f"  {'kind':18}" + "".join(f"{c:>12}" for c in columns))
    rows = [(kind, counts[kind]) for kind in KINDS if kind in counts]
    for kind, row in [*rows, ("total", sum(counts.values(), Counter()))]:
        print(f"  {kind:18}" + "".join(f"{row[c]:12d}" for c in columns))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stageflow.testing.onnx_suite",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", dest="pattern", default=None, help="a regex on test names")
    parser.add_argument("--kind", action="append", choices=KINDS, help="(repeatable)")
    parser.add_argument("--verbose", action="store_true", help="name every case")
    parser.add_argument("--reference", action="store_true",
                        help="run onnxruntime's backend on the same cases, for comparison")
    parser.add_argument("--jobs", type=int, default=2, metavar="N",
                        help="run the cases in N processes (default 2; 1: in this one)")
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--interpreted", dest="mode", action="store_const", const="interpreted",
                       default="compiled",
                       help="run the staged graphs through the interpreter (jit=False)")
    modes.add_argument("--gpu", dest="mode", action="store_const", const="gpu",
                       help="run the staged graphs on the first GPU (an emulated one where "
                            "there is none)")
    modes.add_argument("--aot", dest="mode", action="store_const", const="aot",
                       help="compile each case into an AOT library and call it from C")
    parser.add_argument("--target", default="cpu", metavar="MACHINE",
                        help="with --aot: the machine to compile for (aarch64-linux-gnu runs "
                             "under qemu, wasm32 under Node.js)")
    parser.add_argument("--chromium", action="store_true",
                        help="with --target wasm32: run the cases in headless Chromium")
    args = parser.parse_args(argv)
    if args.target != "cpu" and args.mode != "aot":
        parser.error("--target is for --aot")
    browser = shutil.which("chromium") if args.chromium else None
    if args.chromium and (args.target != "wasm32" or browser is None):
        parser.error("--chromium is for --target wasm32, with chromium on PATH")
    selected = cases(args.kind or KINDS, args.pattern)
    counts: dict[str, Counter] = defaultdict(Counter)
    for done, outcome in enumerate(_run_all(selected, args.jobs, args.reference, args.mode,
                                            args.target, browser), 1):
        counts[outcome.kind][outcome.outcome] += 1
        if outcome.reference:
            counts[outcome.kind][f"ort {outcome.reference}"] += 1
        if args.verbose or outcome.outcome == "failed":
            ort = f"  [ort {outcome.reference}]" if outcome.reference else ""
            print(f"{outcome.outcome:8} {outcome.kind:17} {outcome.name}{ort}  "
                  f"{outcome.detail}", file=sys.stderr, flush=True)
        if done % 100 == 0:
            print(f"  {done}/{len(selected)} cases", file=sys.stderr, flush=True)
    print_table(counts, args.reference)
    return 0


if __name__ == "__main__":
    sys.exit(main())
