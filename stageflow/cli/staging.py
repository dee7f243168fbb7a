"""The sub-commands that stage a user's Python function: ``dump``, ``graph``, ``compile``,
``report`` (an HTML page explaining the compile, `stageflow.staging.report`).

``FILE.py:FUNC`` names a function in a Python file (a plain function is wrapped in
`sf.function`); ``--arg f32[?,784]`` gives one argument's dtype and dims (``?`` unknown).
A model file (``model.onnx``) is a target too: its loader (`MODEL_LOADERS`, by suffix) makes
it a staged function with its own input signature, which ``--arg`` may replace.
``dump --device NAME`` traces the call placed on that device (``--logical-cpus N`` first
splits the CPU into N devices), so the IR shows the placement.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from stageflow.aot.library import compile_function
from stageflow.cli.io import CommandError, write_output
from stageflow.core import devices, dtypes
from stageflow.core.source import PACKAGE_DIR
from stageflow.frontend.spec import TensorSpec
from stageflow.passes import IR_DUMP_HEADER, format_timings, ir_printer
from stageflow.staging.concrete import IR_STAGES
from stageflow.staging.function import Function, function

_ARG = re.compile(r"^\s*([a-z0-9]+)\s*\[\s*([0-9?,\s]*)\]\s*$")


def parse_arg_spec(text: str) -> Any:
    """``f32[8,?]`` -> ``TensorSpec((8, None), float32)``."""

    match = _ARG.match(text)
    if match is None:
        raise CommandError(f"bad --arg {text!r}: expected DTYPE[DIMS] such as f32[8,784] "
                           "or i32[?] (use ? for an unknown dim)")
    short, dims = match.groups()
    dtype = dtypes.BY_SHORT_NAME.get("i1" if short == "bool" else short)
    if dtype is None:
        known = ", ".join(sorted(dtypes.BY_SHORT_NAME))
        raise CommandError(f"bad --arg {text!r}: unknown dtype {short!r} (one of {known})")
    parts = [d.strip() for d in dims.split(",")] if dims.strip() else []
    if any(not d or (d != "?" and not d.isdigit()) for d in parts):
        raise CommandError(f"bad --arg {text!r}: each dim is a number or ?, separated by "
                           "single commas")
    shape = [None if d == "?" else int(d) for d in parts]
    if any(d is not None and d >= 2**63 for d in shape):
        raise CommandError(f"bad --arg {text!r}: a dim must be below 2**63")
    return TensorSpec(shape, dtype)


# Model files a target may name, by suffix: the module whose `load(path)` imports one as a
# model whose `.function` is staged. Imported on first use: onnx is an optional dependency.
MODEL_LOADERS: dict[str, str] = {".onnx": "stageflow.onnx"}


def model_module(module: str) -> Any:
    """The module `module`, or the error saying which package to install."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise CommandError(f"this needs the {error.name} package (pip install "
                           f"stageflow[onnx])") from None


def _load_model(module: str, path: str, specs: list[TensorSpec]) -> Function:
    """The model's staged function; given `specs`, the inputs take their shapes."""
    if not Path(path).is_file():
        raise CommandError(f"cannot read {path}: no such file")
    loader = model_module(module)
    try:
        model = loader.load(path)
        if specs:
            names = model.input_names
            if len(specs) != len(names):
                raise CommandError(f"{path} takes {len(names)} inputs ({', '.join(names)}); "
                                   f"--arg gives {len(specs)}")
            for name, spec, own in zip(names, specs, model.input_signature, strict=True):
                if spec.dtype != own.dtype:
                    raise CommandError(f"input {name!r} of {path} is {own.dtype.name}; "
                                       f"--arg gives {spec.dtype.name}")
            model = loader.load(path, input_shapes={name: spec.shape for name, spec
                                                    in zip(names, specs, strict=True)})
        return model.function
    except (ValueError, OSError) as error:  # the loaders' errors (OnnxError is a ValueError)
        raise CommandError(" ".join(str(error).split())) from None


def load_function(target: str, specs: list[TensorSpec] | None = None) -> Any:
    """The `sf.function` named by ``FILE.py:FUNC`` (``FUNC`` may be a dotted path), or the
    staged function of a model file (``model.onnx``, its inputs shaped by `specs`)."""

    module = MODEL_LOADERS.get(Path(target).suffix.lower())
    if module is not None:
        return _load_model(module, target, specs or [])
    path, _, name = target.rpartition(":")
    if not path or not name:
        raise CommandError(f"bad target {target!r}: expected FILE.py:FUNC")
    file = Path(path)
    if not file.is_file():
        raise CommandError(f"cannot read {path}: no such file")
    spec = importlib.util.spec_from_file_location(f"_stageflow_user_{file.stem}", file)
    if spec is None:  # a suffix no importer reads, e.g. .mlir
        raise CommandError(f"cannot import {path}: not a Python file (expected FILE.py:FUNC)")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(file.resolve().parent))
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # the user's module failed to import: say where
        raise CommandError(f"importing {path} failed: {type(error).__name__}: {error}") from None
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise CommandError(f"{path} has no attribute {name!r}")
        obj = getattr(obj, part)
    if isinstance(obj, Function):
        return obj
    if not callable(obj):
        raise CommandError(f"{name!r} in {path} is not callable")
    return function(obj)


def _concrete(args: argparse.Namespace) -> tuple[Any, float]:
    specs = [parse_arg_spec(text) for text in args.arg]
    staged = load_function(args.target, specs)
    if staged.input_signature is not None:  # a model's, shaped by the --arg given
        specs = list(staged.input_signature)
    start = time.perf_counter()
    try:
        with placement(args):
            concrete = staged.get_concrete_function(*specs)
    except (ValueError, TypeError, IndexError) as error:
        raise CommandError(" ".join(str(error).split())) from None
    except Exception as error:  # the user's function raised while it was traced
        where = _user_frame(error.__traceback__)
        message = " ".join(f"{type(error).__name__}: {error}".split())
        raise CommandError(f"{message}{where}") from None
    return concrete, time.perf_counter() - start


def set_logical_cpus(args: argparse.Namespace) -> None:
    """Apply ``--logical-cpus N`` (before anything uses the devices)."""
    count = getattr(args, "logical_cpus", None)
    if count is not None:
        try:
            devices.set_logical_device_count("CPU", count)
        except ValueError as error:
            raise CommandError(str(error)) from None


def placement(args: argparse.Namespace) -> Any:
    """The ``--device`` scope to trace in (none when not given)."""
    set_logical_cpus(args)
    name = getattr(args, "device", None)
    if name is None:
        return nullcontext()
    try:  # a flag names a device that exists: soft placement is for scopes in code
        devices.resolve(name)
    except ValueError as error:
        raise CommandError(str(error)) from None
    return devices.device(name)


def _user_frame(traceback: Any) -> str:
    """' at FILE:LINE' for the innermost frame of the traceback outside stageflow."""

    where = ""
    while traceback is not None:
        filename = traceback.tb_frame.f_code.co_filename
        if not filename.startswith(PACKAGE_DIR):
            where = f" at {filename}:{traceback.tb_lineno}"
        traceback = traceback.tb_next
    return where


def run_dump(args: argparse.Namespace) -> int:
    """Print the IR of the staged function at the requested stage (``converted``: the
    Python source AutoGraph generated from it)."""

    if args.stage == "converted":
        try:
            write_output(args.output, load_function(args.target).converted_source() + "\n")
        except ValueError as error:
            raise CommandError(str(error)) from None
        return 0
    if args.stage not in IR_STAGES:
        raise CommandError(f"stage {args.stage!r} is not available yet (have: converted, "
                           f"{', '.join(IR_STAGES)})")
    concrete, trace_seconds = _concrete(args)
    if args.print_ir_after_all:
        print(IR_DUMP_HEADER.format(name="trace"))
        print(concrete.ir("traced"), end="")
    start = time.perf_counter()
    after_pass = ir_printer(sys.stdout, debuginfo=True) if args.print_ir_after_all else None
    text = concrete.ir(args.stage, after_pass=after_pass)
    ir_seconds = time.perf_counter() - start
    if not args.print_ir_after_all or args.output:
        write_output(args.output, text)
    if args.timing:
        stages = [("trace", trace_seconds)]
        if args.stage == "traced":
            stages.append(("build IR", ir_seconds))
        print(format_timings(concrete.pass_timings, stages), file=sys.stderr, end="")
    return 0


def run_graph(args: argparse.Namespace) -> int:
    """Write the dataflow graph as Graphviz DOT, or SVG when `dot` is installed."""
    concrete, _ = _concrete(args)
    dot_text = concrete.graph_dot()
    if args.output.endswith(".svg"):
        dot = shutil.which("dot")
        if dot is None:
            raise CommandError("writing .svg needs Graphviz's `dot` program; write .dot instead")
        result = subprocess.run([dot, "-Tsvg", "-o", args.output], input=dot_text, text=True,
                                capture_output=True)
        if result.returncode:
            raise CommandError(f"dot failed: {' '.join(result.stderr.split())}")
        return 0
    write_output(args.output, dot_text)
    return 0


def run_compile(args: argparse.Namespace) -> int:
    """Compile the staged function ahead of time: ``.so``/``.o`` (and a header) for this
    machine or ``--target``'s, ``.wasm`` (and its ES module) or ``.ptx`` (and its JSON
    manifest)."""

    output = args.output
    if not output.endswith((".so", ".o", ".wasm", ".ptx")):
        raise CommandError(f"-o {output!r}: write OUT.so, OUT.o, OUT.wasm or OUT.ptx")
    target = ("ptx" if output.endswith(".ptx") else "wasm32" if output.endswith(".wasm")
              else "cpu")
    if args.machine is not None and target != "cpu" and args.machine != target:
        raise CommandError(f"-o {output!r} is a {target} output; --target {args.machine} "
                           "writes .so or .o")
    target = args.machine or target
    if args.header and target == "ptx":
        raise CommandError("--header is for .so and .o outputs; PTX comes with a .json manifest")
    concrete, _ = _concrete(args)
    try:
        artefact = compile_function(concrete, target=target, name=args.name,
                                    freeze=not args.no_freeze, arch=args.arch, cpu=args.cpu,
                                    self_contained=args.self_contained)
        if target == "ptx":
            artefact.save(output)
        else:
            artefact.save(output, header=args.header)
    except (ValueError, NotImplementedError, RuntimeError) as error:
        raise CommandError(" ".join(str(error).split())) from None
    except OSError as error:  # an unwritable or missing folder: the user's to fix
        raise CommandError(f"cannot write {error.filename or output}: "
                           f"{error.strerror or error}") from None
    return 0


def run_report(args: argparse.Namespace) -> int:
    """Write the HTML page explaining the staged function's compile."""
    concrete, _ = _concrete(args)
    try:
        concrete.report(args.output)
    except OSError as error:  # an unwritable or missing folder: the user's to fix
        raise CommandError(f"cannot write {error.filename or args.output}: "
                           f"{error.strerror or error}") from None
    return 0
