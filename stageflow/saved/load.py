"""`sf.saved.load`: a saved directory back as callable functions over live variables.

Nothing of the saving program is imported: the functions are the parsed `sf` IR, compiled
on first call through the same pipeline and `Executable` as a `ConcreteFunction` (run by
the planned interpreter when `jit=False` was saved or the compiler cannot handle a graph),
and the variables are new `sf.Variable`s holding the saved values, which callers may
assign. A call is matched against the saved signatures; arguments that fit none raise
TypeError (kind, dtype) or ValueError (rank, dims) naming the argument.
"""

from __future__ import annotations

import inspect
import json
import os
import warnings
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp

from stageflow.core import context
from stageflow.core.primitive import ResourceType
from stageflow.frontend.module import Module
from stageflow.frontend.tracer import GraphTrace
from stageflow.frontend.variables import Variable
from stageflow.ir.text import parse_module
from stageflow.ir.types import abstract_value
from stageflow.passes import DEFAULT_PIPELINE
from stageflow.runtime.executable import Plan
from stageflow.saved.save import FORMAT
from stageflow.saved.structure import Node, build, describe, match
from stageflow.staging.compiler import Compilation


class SavedConcrete:
    """One saved concrete function: its module, signature and captured state."""

    def __init__(self, name: str, module: ModuleOp, entry: dict, captures: list) -> None:
        self.name = name
        self.module = module
        self.entry = entry["entry"]
        self.jit = entry["jit"]
        self.arguments: Node = entry["arguments"]
        self.outputs: Node = entry["outputs"]
        self.captures = captures
        self._program: Any = None

    @property
    def program(self) -> Any:
        """The executable, built on first use (as `ConcreteFunction.program`)."""
        if self._program is None:
            self._program = self._build()
        return self._program

    def _build(self) -> Any:
        if self.jit:
            try:
                compilation = Compilation.of_module(self.entry, self.module)
                compilation.run_passes(DEFAULT_PIPELINE)
                return compilation.executables([self.entry])[0]
            except NotImplementedError as error:
                warnings.warn(f"saved function {self.name!r} runs interpreted: {error}",
                              stacklevel=5)
        functions = {op.sym_name.data: op for op in self.module.ops if isinstance(op, FuncOp)}
        return Plan(functions[self.entry], functions, {}, {})

    def run(self, inputs: list) -> Any:
        return build(self.outputs, self.program.run(inputs + self.captures))


class LoadedFunction:
    """A saved staged function: callable like the original with any saved signature."""

    def __init__(self, name: str, parameters: list[dict], concretes: list[SavedConcrete],
                 variables: list[Variable]) -> None:
        self.name = name
        self.concretes = concretes
        self.variables = variables
        self._signature = inspect.Signature([
            inspect.Parameter(p["name"], getattr(inspect.Parameter, p["kind"]),
                              default=p.get("default", inspect.Parameter.empty))
            for p in parameters
        ])

    @property
    def trainable_variables(self) -> list[Variable]:
        return [v for v in self.variables if v.trainable]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if isinstance(context.current_trace(), GraphTrace):
            raise NotImplementedError(f"loaded function {self.name!r} cannot be called inside "
                                      "sf.function yet; call it eagerly")
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{self.name}: {error}") from None
        bound.apply_defaults()
        arguments = tuple(bound.arguments.values())
        errors = []
        for concrete in self.concretes:
            inputs: list = []
            try:
                for name, node, value in zip(bound.arguments, concrete.arguments["tuple"],
                                             arguments, strict=True):
                    match(node, value, f"argument {name!r}", inputs, self.name)
            except (TypeError, ValueError) as error:
                errors.append((len(inputs), error))
                continue
            return concrete.run(inputs)
        # Report the signature that fitted the most arguments before one did not.
        error = max(errors, key=lambda pair: pair[0])[1]
        if len(errors) == 1:
            raise error
        saved = "; ".join(describe(c.arguments) for c in self.concretes)
        raise type(error)(f"{error} (saved signatures: {saved})")

    def __repr__(self) -> str:
        return f"<loaded function {self.name} ({len(self.concretes)} signatures)>"


class LoadedModule(Module):
    """A saved object: its staged methods as attributes, its variables in `.variables`;
    callable when a `call` (or `__call__`) method was saved."""

    def __init__(self, functions: dict[str, LoadedFunction], variables: list[Variable]) -> None:
        super().__init__("loaded")
        self.saved_variables = variables
        self.functions = functions
        for name, function in functions.items():
            if name != "__call__":
                setattr(self, name, function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        function = self.functions.get("__call__") or self.functions.get("call")
        if function is None:
            raise TypeError("this loaded object had no staged `call` or `__call__` method")
        return function(*args, **kwargs)


def load(directory: str | os.PathLike) -> LoadedFunction | LoadedModule:
    """Load what `sf.saved.save` wrote: a `LoadedFunction` for a saved function, else a
    `LoadedModule` with the saved staged methods. A missing, malformed or inconsistent file
    raises ValueError naming the file and what in it is wrong."""
    directory = os.fspath(directory)
    manifest_path = os.path.join(directory, "manifest.json")
    try:
        with open(manifest_path, encoding="utf-8") as file:
            manifest = json.load(file)
    except (OSError, ValueError) as error:
        raise ValueError(f"sf.saved.load: cannot read {manifest_path}: {error}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise ValueError(f"sf.saved.load: {directory} has format {found!r}, this stageflow "
                         f"reads {FORMAT!r}")
    try:
        return _load(directory, manifest)
    except (KeyError, IndexError, TypeError) as error:
        raise ValueError(f"sf.saved.load: {manifest_path} is inconsistent with the files "
                         f"beside it ({type(error).__name__}: {error})") from None


def _load(directory: str, manifest: dict) -> LoadedFunction | LoadedModule:
    arrays_path = os.path.join(directory, "variables.npz")
    try:
        with np.load(arrays_path) as arrays:
            values = dict(arrays)
    except (OSError, ValueError) as error:
        raise ValueError(f"sf.saved.load: cannot read {arrays_path}: {error}") from None
    entries = manifest["variables"]
    missing = [f"v{i}" for i in range(len(entries)) if f"v{i}" not in values]
    if missing:
        raise ValueError(f"sf.saved.load: {arrays_path} lacks the variables {missing}")
    variables = [Variable(values[f"v{i}"], trainable=bool(v["trainable"]), name=str(v["name"]))
                 for i, v in enumerate(entries)]
    path = os.path.join(directory, "module.mlir")
    with open(path, encoding="utf-8") as file:
        outer = parse_module(file.read(), path)
    modules = {}
    for op in list(outer.ops):
        op.detach()
        modules[op.sym_name.data] = op

    def capture(node: Node) -> Any:
        return variables[node["variable"]] if "variable" in node else values[
            f"c{node['constant']}"]

    functions = {}
    for name, saved in manifest["functions"].items():
        concretes = []
        for entry in saved["concrete"]:
            if entry["module"] not in modules:
                raise ValueError(f"sf.saved.load: {path} has no module @{entry['module']} "
                                 f"(the manifest's function {name!r} names it)")
            captures = [capture(c) for c in entry["captures"]]
            _check_captures(modules[entry["module"]], entry["entry"], captures, arrays_path)
            concretes.append(SavedConcrete(name, modules[entry["module"]], entry, captures))
        functions[name] = LoadedFunction(name, saved["parameters"], concretes, variables)
    if manifest["kind"] == "function":
        (function,) = functions.values()
        return function
    return LoadedModule(functions, variables)


def _check_captures(module: ModuleOp, entry: str, captures: list, arrays_path: str) -> None:
    """The saved values a function captures have the types its IR declares (else a saved
    variable of another shape or dtype would load silently and fail, or worse, later)."""
    function = next((op for op in module.ops if isinstance(op, FuncOp)
                     and op.sym_name.data == entry), None)
    if function is None:
        raise ValueError(f"sf.saved.load: the saved module has no function @{entry}")
    declared = [abstract_value(t) for t in function.function_type.inputs.data]
    for position, (value, want) in enumerate(
            zip(captures, declared[len(declared) - len(captures):], strict=True)):
        array = value.numpy() if isinstance(value, Variable) else np.asarray(value)
        expected = want.value if isinstance(want, ResourceType) else want
        if array.dtype != expected.dtype or tuple(array.shape) != tuple(expected.shape):
            raise ValueError(f"sf.saved.load: {arrays_path}: captured value {position} of "
                             f"@{entry} is {array.dtype.name}{list(array.shape)}, the function "
                             f"takes {expected}")
