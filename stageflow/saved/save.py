"""`sf.saved.save`: write a staged function, or an object's staged methods, to a directory.

What is saved is what has been traced: every concrete function in a staged function's
trace cache (its `input_signature` function included, traced now if need be). The
directory holds

- ``module.mlir``: one nested ``builtin.module @NAME`` per concrete function, holding its
  ``func.func`` (and callees) in the `sf` dialect, with ``loc(...)`` source lines; its
  arguments are the tensor arguments, then the captured variables (``!sf.resource``) and
  captured constants;
- ``variables.npz``: the values of the variables (``v0``, ``v1``...) and captured
  constants (``c0``...);
- ``manifest.json``: the format, each function's parameters and concrete functions (module
  name, entry symbol, argument and result structures, captures), each variable's name and
  trainable flag, the SHA-256 of each other file (``files``, `file_digest`), and the digest
  of all that (`digest`): an edit of any file the loader reads is refused, naming the file.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import os
import re
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr

from stageflow.core import nest
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.variables import Variable
from stageflow.ir.from_graph import graph_module
from stageflow.ir.text import module_to_text
from stageflow.models.module import Module
from stageflow.saved.manifest import FORMAT
from stageflow.saved.structure import JSON_SCALARS, Node, encode, value_node
from stageflow.staging.concrete import ConcreteFunction
from stageflow.staging.function import Function


class _State:
    """The variables and captured constants of everything saved, numbered once each."""

    def __init__(self) -> None:
        self.variables: list[Variable] = []
        self.constants: list[np.ndarray] = []
        self._index: dict[int, Node] = {}

    def variable(self, variable: Variable) -> Node:
        if id(variable) not in self._index:
            self._index[id(variable)] = {"variable": len(self.variables)}
            self.variables.append(variable)
        return self._index[id(variable)]

    def capture(self, source: Any, function: str) -> Node:
        if isinstance(source, Variable):
            return self.variable(source)
        if type(source) is not Tensor:
            raise ValueError(f"sf.saved: {function} captures a traced tensor of an enclosing "
                             "function; save the enclosing function instead")
        if id(source) not in self._index:
            self._index[id(source)] = {"constant": len(self.constants)}
            self.constants.append(source._value)
        return self._index[id(source)]


def _staged_functions(obj: Any) -> dict[str, Function]:
    """The staged functions of `obj`: itself, or its staged methods and attributes; for a
    layer without any that was called (eagerly, a Keras model's usual life), its call
    staged for the inputs of its first call, the batch dim free, as Keras saves one."""
    if isinstance(obj, Function):
        return {obj.name: obj}
    names = [n for klass in type(obj).__mro__ for n, v in vars(klass).items()
             if isinstance(v, Function)]
    names += [n for n, v in vars(obj).items() if isinstance(v, Function)]
    functions = {name: getattr(obj, name) for name in dict.fromkeys(names)}
    spec = getattr(obj, "input_spec", None)
    if not functions and isinstance(spec, TensorSpec):
        functions["__call__"] = Function(lambda inputs: obj(inputs, training=False), [spec],
                                         name="__call__")
    return functions


def _traced(function: Function) -> list[tuple[Any, ConcreteFunction]]:
    """Each concrete function in the trace cache with its canonical arguments (tensor
    specs, variables and Python values in the nest they were passed in), without `self`."""
    if function.input_signature is not None:
        function.get_concrete_function()
    found: dict[int, tuple[Any, ConcreteFunction]] = {}
    for key, concrete in function._cache.items():
        if key[0] == "signature":  # ("signature", device)
            _, treedef = nest.flatten(function._canonical(function.input_signature, {}))
        else:
            treedef = key[0]
        arguments = nest.unflatten(treedef, concrete._input_leaves)
        if function._instance is not None:
            arguments = arguments[1:]
        found.setdefault(id(concrete), (arguments, concrete))
    return list(found.values())


def _parameters(function: Function) -> list[dict]:
    parameters = list(function._signature.parameters.values())
    if function._instance is not None:
        parameters = parameters[1:]
    described = []
    for p in parameters:
        entry: dict[str, Any] = {"name": p.name, "kind": p.kind.name}
        if p.default is not inspect.Parameter.empty and isinstance(p.default, JSON_SCALARS):
            entry["default"] = p.default
        described.append(entry)
    return described


def _argument_node(leaf: Any, state: _State, what: str) -> Node:
    if isinstance(leaf, TensorSpec):
        return {"tensor": {"shape": list(leaf.shape), "dtype": leaf.dtype.name}}
    if isinstance(leaf, Variable):
        return state.variable(leaf)
    return value_node(leaf, what)


class _Output:
    def __init__(self, index: int) -> None:
        self.index = index


def _result_node(leaf: Any, what: str) -> Node:
    if isinstance(leaf, _Output):
        return {"output": leaf.index}
    return value_node(leaf, what)


def _saved_concrete(name: str, index: int, arguments: Any, concrete: ConcreteFunction,
                    state: _State) -> tuple[dict, ModuleOp]:
    """The manifest entry of one concrete function and its nested module."""
    callback = concrete.graph.python_callback()
    if callback is not None:
        raise ValueError(f"sf.saved.save: {name} holds a py_func (at {callback.location}), "
                         "which calls a Python function of this process and cannot be saved;"
                         " compute it with sf ops, or call it outside the staged function")
    symbol = re.sub(r"[^A-Za-z0-9_]", "_", f"{name}_{index}")
    outputs = concrete.structure_outputs([_Output(i) for i in range(len(concrete.outputs))])
    entry = {
        "module": symbol,
        "entry": concrete.name,
        "jit": concrete.jit,
        "arguments": encode(arguments,
                            lambda leaf: _argument_node(leaf, state, f"{name}: an argument")),
        "captures": [state.capture(c.source, name) for c in concrete.graph.captures],
        "outputs": encode(outputs, lambda leaf: _result_node(leaf, f"{name}: a result")),
    }
    ops = list(graph_module(concrete.graph, concrete.name).ops)
    for op in ops:
        op.detach()
    return entry, ModuleOp(ops, sym_name=StringAttr(symbol))


def digest(manifest: dict) -> str:
    """The SHA-256 of the manifest's content (its JSON with sorted keys and no whitespace,
    its own ``digest`` left out, the other files' digests in): a loader refuses an edit that
    keeps the files consistent with each other but changes what a call returns (a Python
    value among the results). It guards against accidents, not against whoever recomputes
    it: the loader checks what it reads on its own as well."""
    content = {key: value for key, value in manifest.items() if key != "digest"}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def file_digest(data: bytes) -> str:
    """The SHA-256 of a file's bytes, as ``files`` of the manifest records it."""
    return hashlib.sha256(data).hexdigest()


def save(obj: Any, directory: str | os.PathLike) -> None:
    """Save `obj` (an `sf.function`, or an object such as an `sf.Module` with staged
    methods) with every signature it has been traced with, and its variables, into
    `directory` (created if need be). A signature is the arguments' dtypes and shapes,
    None dims included: an `input_signature` with a None batch dim saves one function
    for every batch size.

    >>> import os, shutil, tempfile
    >>> @sf.function(input_signature=[sf.TensorSpec([None], sf.float32)])
    ... def double(x):
    ...     return x * 2.0
    >>> directory = tempfile.mkdtemp()
    >>> sf.saved.save(double, directory)
    >>> sorted(os.listdir(directory))        # IR text, variable values, the manifest
    ['manifest.json', 'module.mlir', 'variables.npz']
    >>> sf.saved.load(directory)(sf.constant([1.0, 2.0, 3.0]))
    sf.Tensor([2., 4., 6.], shape=(3,), dtype=float32)
    >>> shutil.rmtree(directory)
    """
    functions = _staged_functions(obj)
    state = _State()
    if isinstance(obj, Module):
        for variable in obj.variables:  # all of them, used by a function or not
            state.variable(variable)
    modules: list[ModuleOp] = []
    manifest_functions: dict[str, Any] = {}
    for name, function in functions.items():
        concretes = []
        for arguments, concrete in _traced(function):
            entry, module = _saved_concrete(name, len(concretes), arguments, concrete, state)
            concretes.append(entry)
            modules.append(module)
        if concretes:
            manifest_functions[name] = {"parameters": _parameters(function),
                                        "concrete": concretes}
    if not manifest_functions:
        raise ValueError(f"sf.saved.save: {type(obj).__name__} has no staged function to "
                         "save: call a layer once (it is then saved for inputs like that "
                         "call's), trace an @sf.function method, or give it "
                         "input_signature=[...]")
    arrays = {f"v{i}": v.numpy() for i, v in enumerate(state.variables)}
    arrays.update({f"c{i}": c for i, c in enumerate(state.constants)})
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    files = {"module.mlir": module_to_text(ModuleOp(modules), debuginfo=True).encode(),
             "variables.npz": buffer.getvalue()}
    manifest = {
        "format": FORMAT,
        "kind": "function" if isinstance(obj, Function) else "object",
        "functions": manifest_functions,
        "variables": [{"name": v.name, "trainable": v.trainable} for v in state.variables],
        "files": {name: file_digest(data) for name, data in files.items()},
    }
    manifest["digest"] = digest(manifest)
    os.makedirs(directory, exist_ok=True)
    for name, data in files.items():
        _write(os.path.join(directory, name), data)
    _write(os.path.join(directory, "manifest.json"), json.dumps(manifest, indent=1).encode())


def _write(path: str, data: bytes) -> None:
    """Write through a temporary file and a rename: a reader never sees half a file."""
    with open(path + ".tmp", "wb") as file:
        file.write(data)
    os.replace(path + ".tmp", path)
