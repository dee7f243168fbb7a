"""`sf.onnx.load`: an ONNX model as a staged function.

The model is read with the `onnx` package (never by hand), brought to opset 13 or newer by
ONNX's own version converter when it is older, and its graph becomes the body of an
`sf.function` whose input signature is the graph's inputs (a symbolic or missing dim is an
unknown one). Tracing it runs `evaluate.run_graph`, node by node, so the staged function's
IR carries each node's name as its location, and the passes, code generation, the AOT
library and the report treat it as any other staged function.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import onnx
from onnx import version_converter

from stageflow.core.dtypes import is_floating
from stageflow.frontend.ops.convert import constant
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.variables import Variable
from stageflow.models.module import Module
from stageflow.onnx import dtypes
from stageflow.onnx.converters import DEFAULT_DOMAIN, OnnxError, Value
from stageflow.onnx.evaluate import initializer_values, run_graph
from stageflow.staging.function import function

__all__ = ["MIN_OPSET", "Model", "load", "newest_opset", "read_model"]

# The oldest default-domain opset the converters are written for; older models are
# converted up to it first.
MIN_OPSET = 13


def newest_opset() -> int:
    """The newest default-domain opset imported: the installed onnx package's."""
    return onnx.defs.onnx_opset_version()


class Model(Module):
    """An imported ONNX model: call it as the staged function it is.

    `function` is the `sf.function` (its `input_signature` the graph's inputs); the model's
    initializers are `weights`, arrays folded into the compiled code (``weights=
    "constants"``) or `sf.Variable`s a tape can train and `sf.train.Checkpoint` saves
    (``weights="variables"``).
    """

    def __init__(self, proto: onnx.ModelProto, filename: str, weights: dict[str, Value],
                 signature: Sequence[TensorSpec], jit: bool) -> None:
        super().__init__(name=proto.graph.name or None)
        self.weights = weights
        self._proto = proto
        self._filename = filename
        self._opsets = {DEFAULT_DOMAIN if o.domain == "ai.onnx" else o.domain: o.version
                        for o in proto.opset_import}
        self.input_names = tuple(spec.name for spec in signature)
        self.output_names = tuple(o.name for o in proto.graph.output)
        self.function = function(_named(self._run, proto.graph.name),
                                 input_signature=list(signature), jit=jit)

    @property
    def proto(self) -> onnx.ModelProto:
        """The model as imported (after the opset conversion)."""
        return self._proto

    @property
    def input_signature(self) -> tuple[TensorSpec, ...]:
        return self.function.input_signature

    def __call__(self, *args: Any) -> Any:
        # A NumPy scalar is a 0-d input here, not a Python value the function is traced for.
        return self.function(*(np.asarray(a) if isinstance(a, np.generic) else a
                               for a in args))

    def get_concrete_function(self, *specs: Any) -> Any:
        return self.function.get_concrete_function(*specs)

    def _run(self, *args: Any) -> Any:
        outputs = run_graph(self._proto.graph, list(args), self._opsets, self._filename,
                            initializers=self.weights)
        outputs = [constant(o) if isinstance(o, np.ndarray) else o for o in outputs]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _named(run: Callable[..., Any], name: str) -> Callable[..., Any]:
    """`run` under the graph's name (a C identifier: the staged function's symbol)."""

    def graph(*args: Any) -> Any:
        return run(*args)

    symbol = re.sub(r"\W", "_", name) or "model"
    graph.__name__ = graph.__qualname__ = symbol if not symbol[0].isdigit() else f"_{symbol}"
    return graph


def read_model(model: str | os.PathLike | bytes | onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    """The model and the file name its locations will carry, from a path, the bytes of a
    file, or a ModelProto; external data files are read from beside the model."""
    if isinstance(model, onnx.ModelProto):
        return _checked(model, "the ModelProto"), f"{model.graph.name or 'model'}.onnx"
    if isinstance(model, bytes):
        try:
            proto = onnx.load_from_string(model)
        except Exception as error:  # protobuf's DecodeError and kin
            raise OnnxError(f"sf.onnx.load: the bytes are not an ONNX model, or are truncated "
                            f"({error})") from None
        return _checked(proto, "the bytes"), "model.onnx"
    path = os.fspath(model)
    if not os.path.exists(path):
        raise FileNotFoundError(f"sf.onnx.load: no file {path!r}")
    try:
        proto = onnx.load(path, load_external_data=False)
    except Exception as error:
        raise OnnxError(f"sf.onnx.load: {path!r} is not an ONNX model, or is truncated "
                        f"({type(error).__name__}: {error})") from None
    _checked(proto, repr(path))
    try:
        onnx.external_data_helper.load_external_data_for_model(proto, os.path.dirname(path))
    except Exception as error:  # OSError, or onnx's ValidationError for a missing file
        raise OnnxError(f"sf.onnx.load: {path!r} keeps weights in external data files that "
                        f"cannot be read ({error}); keep them beside the model, as the "
                        f"model names them") from None
    return proto, os.path.basename(path)


def _checked(proto: onnx.ModelProto, what: str) -> onnx.ModelProto:
    """`proto` if it holds a model: protobuf reads many other files (an empty one, a
    TensorProto) as a ModelProto without a graph."""
    if not proto.HasField("graph") or proto.ir_version == 0:
        raise OnnxError(f"sf.onnx.load: {what} is not an ONNX model (it has "
                        f"{'no graph' if not proto.HasField('graph') else 'no IR version'}); "
                        f"give a file written by onnx.save or an exporter")
    return proto


def _upgrade(proto: onnx.ModelProto, filename: str) -> onnx.ModelProto:
    """The model at opset MIN_OPSET or newer: ONNX's version converter lifts older ones."""
    versions = {o.domain: o.version for o in proto.opset_import}
    version = versions.get("", versions.get("ai.onnx", MIN_OPSET))
    newest = newest_opset()
    if version > newest:
        raise OnnxError(f"sf.onnx.load: {filename} uses opset {version}; stageflow imports "
                        f"opsets {MIN_OPSET} to {newest} (the installed onnx package's "
                        f"newest): export the model at opset {newest} or older, or upgrade "
                        f"the onnx package")
    if version >= MIN_OPSET:
        return proto
    if version < 9 and any(node.op_type == "Scan" and node.domain in ("", "ai.onnx")
                           for node in _nodes(proto.graph)):
        raise OnnxError(f"sf.onnx.load: {filename} uses opset {version}, whose Scan has a "
                        f"batch axis that ONNX's version converter drops from the graph's "
                        f"inputs; export the model at opset 9 or newer")
    try:
        return version_converter.convert_version(proto, MIN_OPSET)
    except Exception as error:
        raise OnnxError(f"sf.onnx.load: {filename} uses opset {version}; stageflow imports "
                        f"opset {MIN_OPSET} and newer, and ONNX's version converter could not "
                        f"lift it ({error}); convert it with onnx.version_converter first"
                        ) from None


def _nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """The graph's nodes and its subgraphs', at any depth."""
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            for subgraph in [attribute.g] if attribute.HasField("g") else attribute.graphs:
                yield from _nodes(subgraph)


def _signature(graph: onnx.GraphProto, initializers: Mapping[str, Any],
               input_shapes: Mapping[str, Sequence[int | None]], filename: str) -> list[TensorSpec]:
    specs = []
    for value in graph.input:
        if value.name in initializers:
            continue
        kind = value.type.WhichOneof("value")
        if kind != "tensor_type":
            raise OnnxError(f"sf.onnx.load: input {value.name!r} of {filename} is a {kind}; "
                            f"stageflow imports tensor inputs only")
        tensor = value.type.tensor_type
        dtype = dtypes.from_onnx(tensor.elem_type)
        if dtype is None:
            raise OnnxError(f"sf.onnx.load: input {value.name!r} of {filename} has element "
                            f"type {dtypes.type_name(tensor.elem_type)}, which stageflow has "
                            f"no tensors of")
        if value.name in input_shapes:
            shape = tuple(input_shapes[value.name])
        elif tensor.HasField("shape"):
            shape = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                          for d in tensor.shape.dim)
        else:
            raise OnnxError(f"sf.onnx.load: input {value.name!r} of {filename} has no shape, "
                            f"not even a rank; give one: input_shapes={{{value.name!r}: "
                            f"(...)}}")
        specs.append(TensorSpec(shape, dtype, name=value.name))
    unknown = set(input_shapes) - {spec.name for spec in specs}
    if unknown:
        raise OnnxError(f"sf.onnx.load: input_shapes names {sorted(unknown)}, which are not "
                        f"inputs of {filename} (its inputs: {[s.name for s in specs]})")
    return specs


def load(model: str | os.PathLike | bytes | onnx.ModelProto, *,
         weights: Literal["constants", "variables"] = "constants",
         input_shapes: Mapping[str, Sequence[int | None]] | None = None,
         jit: bool = True) -> Model:
    """Import an ONNX model as a staged function.

    model: a path (external data files beside it are read), the bytes of a file, or an
    `onnx.ModelProto`. weights: "constants" folds the initializers into the compiled code;
    "variables" makes the floating ones `sf.Variable`s (fine-tuning, checkpoints).
    input_shapes: static shapes for inputs whose dims the model leaves symbolic, by name.
    jit: False runs the staged graph through the interpreter.

    Returns a `Model`, called as the function: one output is returned as a tensor, several
    as a tuple in the graph's order.
    """
    if weights not in ("constants", "variables"):
        raise ValueError(f"sf.onnx.load: weights must be 'constants' or 'variables', "
                         f"got {weights!r}")
    proto, filename = read_model(model)
    proto = _upgrade(proto, filename)
    arrays = initializer_values(proto.graph)
    values: dict[str, Value] = dict(arrays)
    if weights == "variables":
        values.update({name: Variable(array, name=name) for name, array in arrays.items()
                       if is_floating(array.dtype)})
    signature = _signature(proto.graph, arrays, input_shapes or {}, filename)
    return Model(proto, filename, values, signature, jit)
