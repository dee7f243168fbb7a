"""`sf.saved.load`: a saved directory back as callable functions over live variables.

Nothing of the saving program is imported: the functions are the parsed `sf` IR, compiled
on first call through the same pipeline and `Executable` as a `ConcreteFunction` (run by
the planned interpreter when `jit=False` was saved or the compiler cannot handle a graph),
and the variables are new `sf.Variable`s holding the saved values, which callers may
assign. A call is matched against the saved signatures; arguments that fit none raise
TypeError (kind, dtype) or ValueError (rank, dims) naming the argument.

What is loaded is checked on its own, not only against the manifest's digests (whoever
edits a file can recompute them): the IR holds only the ops `sf.saved.save` writes, and
its calls reach functions of their module that have bodies, in no cycle (`_Loader._calls`;
a function calling itself once loaded and died in `RecursionError` on its first call).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import stat
import warnings
import zipfile
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, SymbolRefAttr
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Operation

from stageflow.core import context, dtypes
from stageflow.core.primitive import ResourceType, ShapedType
from stageflow.frontend.tracer import GraphTrace
from stageflow.frontend.variables import Variable
from stageflow.ir.control import ControlOp, YieldOp
from stageflow.ir.dialect import SfOp
from stageflow.ir.text import IRError, parse_module
from stageflow.ir.types import abstract_value
from stageflow.models.module import Module
from stageflow.passes import DEFAULT_PIPELINE
from stageflow.runtime.executable import Plan
from stageflow.saved import manifest as schema
from stageflow.saved.save import digest, file_digest
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
    """A saved staged function: callable like the original with any saved signature
    (`sf.saved.load` of a saved function returns one). Arguments that fit no saved
    signature are refused, naming the argument, as nothing can be traced anew: the
    Python source is not needed, nor kept.

    >>> import shutil, tempfile
    >>> @sf.function(input_signature=[sf.TensorSpec([None], sf.float32)])
    ... def double(x):
    ...     return x * 2.0
    >>> directory = tempfile.mkdtemp()
    >>> sf.saved.save(double, directory)
    >>> loaded = sf.saved.load(directory)
    >>> loaded
    <loaded function double (1 signatures)>
    >>> loaded(x=sf.constant([1.5]))
    sf.Tensor([3.], shape=(1,), dtype=float32)
    >>> loaded(sf.constant([[1.0]]))
    Traceback (most recent call last):
    ...
    ValueError: double: argument 'x' has shape (1, 1), the saved signature expects (?,)
    >>> shutil.rmtree(directory)
    """

    def __init__(self, name: str, signature: inspect.Signature,
                 concretes: list[SavedConcrete], variables: list[Variable]) -> None:
        self.name = name
        self.concretes = concretes
        self.variables = variables
        self._signature = signature

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
    callable when a `call` (or `__call__`) method was saved. The variables hold the saved
    values and are variables again, so the loaded object can be trained further and
    checkpointed.

    >>> import shutil, tempfile
    >>> class Affine(sf.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.w = sf.Variable([1.0, 2.0], name="w")
    ...         self.b = sf.Variable(0.5, name="b")
    ...     @sf.function(input_signature=[sf.TensorSpec([None, 2], sf.float32)])
    ...     def __call__(self, x):                      # [batch, 2] -> [batch]
    ...         return sf.reduce_sum(x * self.w, axis=1) + self.b
    >>> directory = tempfile.mkdtemp()
    >>> sf.saved.save(Affine(), directory)
    >>> model = sf.saved.load(directory)
    >>> type(model).__name__
    'LoadedModule'
    >>> model(sf.ones((3, 2)))
    sf.Tensor([3.5, 3.5, 3.5], shape=(3,), dtype=float32)
    >>> [(v.name, v.shape) for v in model.trainable_variables]   # tf.Module's order: by name
    [('b', ()), ('w', (2,))]
    >>> shutil.rmtree(directory)
    """

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
    raises ValueError naming the file and what in it is wrong (for the manifest, the path
    of the field), before anything is compiled or run.

    The defining code is not needed: the functions are compiled from the saved IR, with
    the saved dtypes and shapes.

    >>> import os, shutil, tempfile
    >>> scale = sf.Variable(3.0, name="scale")
    >>> @sf.function
    ... def scaled(x):
    ...     return x * scale
    >>> _ = scaled(sf.constant([1.0, 2.0]))            # traced for float32 [2]
    >>> _ = scaled(sf.ones((2, 2)))                     # and for float32 [2, 2]
    >>> directory = tempfile.mkdtemp()
    >>> sf.saved.save(scaled, directory)
    >>> loaded = sf.saved.load(directory)
    >>> loaded
    <loaded function scaled (2 signatures)>
    >>> loaded(sf.constant([2.0, 4.0]))
    sf.Tensor([ 6., 12.], shape=(2,), dtype=float32)
    >>> loaded(sf.ones((2, 2))).shape
    (2, 2)
    >>> shutil.rmtree(directory)
    """
    directory = os.fspath(directory)
    manifest_path = os.path.join(directory, "manifest.json")
    try:
        manifest = json.loads(_read(manifest_path))
    except (ValueError, RecursionError) as error:
        if str(error).startswith("sf.saved.load"):
            raise
        raise ValueError(f"sf.saved.load: cannot read {manifest_path}: {error}") from None
    found = manifest.get("format") if isinstance(manifest, dict) else None
    if not isinstance(found, str) or found not in schema.SCHEMAS:
        raise ValueError(f"sf.saved.load: {directory} has format {found!r}, this stageflow "
                         f"reads {' and '.join(map(repr, schema.SCHEMAS))}")
    try:
        schema.check(manifest)
    except schema.ManifestError as error:
        raise ValueError(f"sf.saved.load: {manifest_path}: {error}") from None
    return _Loader(directory, manifest).load()


def _read(path: str) -> bytes:
    """A file's bytes; only a regular file is read (a FIFO would block, a device never
    end)."""
    _regular(path)
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as error:
        raise ValueError(f"sf.saved.load: cannot read {path}: {error.strerror}") from None


def _regular(path: str) -> None:
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        raise ValueError(f"sf.saved.load: cannot read {path}: {error.strerror}") from None
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise ValueError(f"sf.saved.load: cannot read {path}: it is {kind}")


def _leaves(node: Node) -> list[Node]:
    """The tensor and variable nodes of an argument structure, in the graph's order."""
    if "tensor" in node or "variable" in node:
        return [node]
    if "value" in node:
        return []
    children = [child for _, child in node["dict"]] if "dict" in node else next(
        iter(node.values()))
    return [leaf for child in children for leaf in _leaves(child)]


def _outputs(node: Node) -> list[int]:
    """The graph result indices of a result structure, in order."""
    if "output" in node:
        return [node["output"]]
    if "value" in node:
        return []
    children = [child for _, child in node["dict"]] if "dict" in node else next(
        iter(node.values()))
    return [index for child in children for index in _outputs(child)]


def _same_type(value: ShapedType, dtype: np.dtype, shape: tuple) -> bool:
    return value.dtype == dtype and tuple(value.shape) == tuple(shape)


# The ops a saved function's body holds: `sf` ops (calls are ``sf.call``), the regions of
# ``sf.cond``/``sf.while`` with their yields, and the function's return.
_WRITTEN = (SfOp, ControlOp, YieldOp, ReturnOp)


def _symbols(attribute: Attribute) -> list[str]:
    """The functions an attribute of an op refers to (a callee, or a list of them)."""
    if isinstance(attribute, SymbolRefAttr):  # nested (@a::@b): no function of the module
        return ["::@".join([attribute.root_reference.data,
                            *(n.data for n in attribute.nested_references.data)])]
    if isinstance(attribute, ArrayAttr):
        return [name for item in attribute.data for name in _symbols(item)]
    return []


def _cycle(callees: dict[str, list[str]]) -> list[str] | None:
    """A cycle of the call graph `callees` as the path around it (``[f, g, f]``), or None;
    depth-first without recursion, so that no chain of calls is too long to walk."""
    done: set[str] = set()
    for root in callees:
        if root in done:
            continue
        path, on_path = [root], {root}
        work = [iter(callees[root])]
        while work:
            callee = next(work[-1], None)
            if callee is None:
                done.add(path[-1])
                on_path.discard(path.pop())
                work.pop()
            elif callee in on_path:
                return [*path[path.index(callee):], callee]
            elif callee not in done:
                path.append(callee)
                on_path.add(callee)
                work.append(iter(callees[callee]))
    return None


class _Loader:
    """One load: the files of `directory` read and checked against each other."""

    def __init__(self, directory: str, manifest: dict) -> None:
        self.manifest = manifest
        self.manifest_path = os.path.join(directory, "manifest.json")
        self.mlir_path = os.path.join(directory, "module.mlir")
        self.arrays_path = os.path.join(directory, "variables.npz")
        self.mlir_data = b""
        # The type each saved array must have: what the functions taking it declare.
        self.declared: dict[str, list[tuple[str, ShapedType]]] = {
            f"v{i}": [] for i in range(len(manifest["variables"]))}

    def fail(self, where: str, what: str) -> ValueError:
        return ValueError(f"sf.saved.load: {self.manifest_path}: field {where} {what}")

    def load(self) -> LoadedFunction | LoadedModule:
        modules = self._modules()
        plans = []
        for name, saved in self.manifest["functions"].items():
            where = schema.field_path("functions", name)
            parameters = self._signature(saved["parameters"], where)
            if not saved["concrete"]:
                raise self.fail(f"{where}.concrete", "is empty: nothing was saved to call")
            for index, entry in enumerate(saved["concrete"]):
                at = f"{where}.concrete[{index}]"
                self._check_concrete(entry, modules, len(parameters.parameters), at)
            plans.append((name, saved, parameters))
        if self.manifest["kind"] == "function" and len(plans) != 1:
            raise self.fail("functions", f"holds {len(plans)} functions, a saved function "
                                         "(kind 'function') has one")
        # The digests last: the checks above say more about what is wrong, these refuse
        # the edits that leave the files consistent with each other.
        if "digest" in self.manifest and self.manifest["digest"] != digest(self.manifest):
            raise self.fail("digest", "does not match the manifest's content: the file was "
                                      "edited after it was saved")
        self._check_digest(self.mlir_path, file_digest(self.mlir_data))
        values = self._arrays()
        variables = [Variable(values[f"v{i}"], trainable=v["trainable"], name=v["name"])
                     for i, v in enumerate(self.manifest["variables"])]

        def capture(node: Node) -> Any:
            if "variable" in node:
                return variables[node["variable"]]
            return values[f"c{node['constant']}"]

        functions = {}
        for name, saved, parameters in plans:
            concretes = [SavedConcrete(name, modules[entry["module"]], entry,
                                       [capture(c) for c in entry["captures"]])
                         for entry in saved["concrete"]]
            functions[name] = LoadedFunction(name, parameters, concretes, variables)
        if self.manifest["kind"] == "function":
            (function,) = functions.values()
            return function
        return LoadedModule(functions, variables)

    def _modules(self) -> dict[str, ModuleOp]:
        """The nested modules of module.mlir by name."""
        try:
            self.mlir_data = _read(self.mlir_path)
            outer = parse_module(self.mlir_data.decode("utf-8"), self.mlir_path)
        except UnicodeDecodeError as error:
            raise ValueError(f"sf.saved.load: cannot read {self.mlir_path}: not UTF-8 text "
                             f"({error.reason} at byte {error.start})") from None
        except IRError as error:
            where = "" if str(error).startswith(self.mlir_path) else f"{self.mlir_path}: "
            raise ValueError(f"sf.saved.load: {where}{error}") from None
        modules = {}
        for op in list(outer.ops):
            if not isinstance(op, ModuleOp) or op.sym_name is None:
                raise ValueError(f"sf.saved.load: {self.mlir_path}: expected only named "
                                 f"builtin.module ops at the top level, found {op.name}")
            op.detach()
            modules[op.sym_name.data] = op
            self._calls(op.sym_name.data, op)
        return modules

    def _calls(self, name: str, module: ModuleOp) -> None:
        """Module @`name` holds functions with bodies, their bodies only ops `save` writes,
        and every call reaches a function of the module, in no cycle: the runtime builds
        a callee's plan inside its caller's, so a cycle recursed until `RecursionError`
        (the xDSL verifier checks a callee's signature, not where calls lead)."""
        where = f"sf.saved.load: {self.mlir_path}: module @{name}"
        functions: dict[str, FuncOp] = {}
        for op in module.ops:
            if not isinstance(op, FuncOp):
                raise ValueError(f"{where} holds a {op.name} op: a saved module must hold "
                                 "only func.func ops")
            if not op.body.blocks:
                raise ValueError(f"{where} declares @{op.sym_name.data} without a body: "
                                 "every function of a saved module must have one")
            functions[op.sym_name.data] = op
        callees: dict[str, list[str]] = {}
        for caller, function in functions.items():
            callees[caller] = []
            for op in function.walk():
                if op is function:
                    continue
                if not isinstance(op, _WRITTEN):
                    raise ValueError(f"{where}: @{caller} holds a {op.name} op, which "
                                     "sf.saved does not write: a saved function must hold "
                                     "only sf ops (its calls sf.call ops)")
                for callee in self._callees(op):
                    if callee not in functions:
                        raise ValueError(f"{where}: @{caller} calls @{callee}, which the "
                                         "module lacks")
                    callees[caller].append(callee)
        cycle = _cycle(callees)
        if cycle is not None:
            path = " -> ".join(f"@{f}" for f in cycle)
            what = (f"@{cycle[0]} calls itself" if len(cycle) == 2
                    else f"the calls {path} form a cycle")
            raise ValueError(f"{where}: {what}: a saved function cannot be recursive")

    @staticmethod
    def _callees(op: Operation) -> list[str]:
        """The functions `op` refers to in its attributes and properties."""
        return [name for attribute in (*op.attributes.values(), *op.properties.values())
                for name in _symbols(attribute)]

    def _check_digest(self, path: str, found: str) -> None:
        """`found`, the SHA-256 of the file at `path`, is the one the manifest records (a
        directory of format ``stageflow-saved-1`` records none)."""
        if "files" not in self.manifest:
            return
        name = os.path.basename(path)
        field = schema.field_path("files", name)
        if found != self.manifest["files"][name]:
            raise ValueError(f"sf.saved.load: {path}: differs from the SHA-256 that field "
                             f"{field} of {self.manifest_path} records: the file was edited "
                             "after it was saved")

    def _signature(self, parameters: list[dict], where: str) -> inspect.Signature:
        try:
            return inspect.Signature([
                inspect.Parameter(p["name"], getattr(inspect.Parameter, p["kind"]),
                                  default=p.get("default", inspect.Parameter.empty))
                for p in parameters])
        except ValueError as error:
            raise self.fail(f"{where}.parameters", f"are not a Python signature: "
                                                   f"{error}") from None

    def _check_concrete(self, entry: dict, modules: dict[str, ModuleOp], parameters: int,
                        at: str) -> None:
        """The entry's module and function exist, and its arguments, captures and results
        agree with the function's type in the IR; note the types of the arrays it takes."""
        module = modules.get(entry["module"])
        if module is None:
            raise self.fail(f"{at}.module", f"names @{entry['module']}, which "
                                            f"{self.mlir_path} does not hold")
        function = next((op for op in module.ops if isinstance(op, FuncOp)
                         and op.sym_name.data == entry["entry"]), None)
        if function is None:
            raise self.fail(f"{at}.entry", f"names @{entry['entry']}, which module "
                                           f"@{entry['module']} of {self.mlir_path} does "
                                           "not hold")
        arguments = entry["arguments"]["tuple"]
        if len(arguments) != parameters:
            raise self.fail(f"{at}.arguments", f"has {len(arguments)} items for "
                                               f"{parameters} parameters")
        leaves = _leaves(entry["arguments"]) + entry["captures"]
        inputs = [abstract_value(t) for t in function.function_type.inputs.data]
        if len(leaves) != len(inputs):
            raise self.fail(at, f"passes {len(leaves)} arguments and captures, @"
                                f"{entry['entry']} in {self.mlir_path} takes {len(inputs)}")
        for position, (leaf, want) in enumerate(zip(leaves, inputs, strict=True)):
            self._check_input(leaf, want, f"{at} input {position}", entry["entry"])
        results = _outputs(entry["outputs"])
        count = len(function.function_type.outputs.data)
        if results != list(range(count)):
            raise self.fail(f"{at}.outputs", f"uses the results {results}, @{entry['entry']} "
                                             f"in {self.mlir_path} returns {count}, each "
                                             "used once in order")

    def _check_input(self, leaf: Node, want: Any, at: str, entry: str) -> None:
        if "tensor" in leaf:
            spec = leaf["tensor"]
            if isinstance(want, ResourceType) or not _same_type(
                    want, dtypes.as_dtype(spec["dtype"]), tuple(spec["shape"])):
                raise self.fail(at, f"is a tensor {spec['dtype']}{spec['shape']}, @{entry} in "
                                    f"{self.mlir_path} takes {want}")
            return
        key, count = (f"v{leaf['variable']}", len(self.manifest["variables"])) \
            if "variable" in leaf else (f"c{leaf['constant']}", None)
        if count is not None and leaf["variable"] >= count:
            raise self.fail(at, f"is variable {leaf['variable']}, the manifest lists {count}")
        if ("variable" in leaf) != isinstance(want, ResourceType):
            raise self.fail(at, f"is a {'variable' if 'variable' in leaf else 'constant'}, "
                                f"@{entry} in {self.mlir_path} takes {want}")
        self.declared.setdefault(key, []).append(
            (f"@{entry}", want.value if isinstance(want, ResourceType) else want))

    def _arrays(self) -> dict[str, np.ndarray]:
        """The saved arrays, each checked against the types declared for it before its
        data is read (a header may claim terabytes), then the file against its digest
        (after those checks, which say more about what is wrong)."""
        _regular(self.arrays_path)
        try:
            with open(self.arrays_path, "rb") as file, zipfile.ZipFile(file) as archive:
                members = {n.removesuffix(".npy"): n for n in archive.namelist()}
                missing = [k for k in self.declared if k not in members]
                if missing:
                    raise ValueError(f"sf.saved.load: {self.arrays_path} lacks the "
                                     f"variables {missing}")
                arrays = {key: self._array(archive, members[key], key) for key in self.declared}
                file.seek(0)
                self._check_digest(self.arrays_path, hashlib.file_digest(file, "sha256")
                                   .hexdigest())
                return arrays
        except (OSError, EOFError, zipfile.BadZipFile, RuntimeError, NotImplementedError,
                ValueError) as error:
            if str(error).startswith("sf.saved.load"):
                raise
            raise ValueError(f"sf.saved.load: cannot read {self.arrays_path}: "
                             f"{type(error).__name__}: {error}") from None

    def _array(self, archive: zipfile.ZipFile, member: str, key: str) -> np.ndarray:
        with archive.open(member) as file:
            version = np.lib.format.read_magic(file)
            if version not in ((1, 0), (2, 0)):
                raise ValueError(f"sf.saved.load: {self.arrays_path}: {key} is in .npy "
                                 f"format {version}, which sf.saved does not write")
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read_header(file)
            what = f"{key} is {dtype}{list(shape)}"
            if dtype.hasobject or dtype not in dtypes.ALL:
                raise ValueError(f"sf.saved.load: {self.arrays_path}: {what}, not an array of "
                                 "a dtype stageflow knows")
            for user, want in self.declared[key]:
                if not _same_type(want, dtype, shape):
                    raise ValueError(f"sf.saved.load: {self.arrays_path}: {what}, {user} in "
                                     f"{self.mlir_path} takes {want}")
            if int(np.prod(shape, dtype=object)) * dtype.itemsize > archive.getinfo(
                    member).file_size:
                raise ValueError(f"sf.saved.load: {self.arrays_path}: {what}, more than the "
                                 "entry holds")
        with archive.open(member) as file:
            return np.lib.format.read_array(file, allow_pickle=False)
