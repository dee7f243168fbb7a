"""The table of ONNX ops stageflow imports, and what a converter is given.

A converter turns one ONNX node into sf ops. It is a function of the node (`Node`: its
attributes, opset, name) and of the values of the node's inputs, registered for one or more
op types with `@converts`:

    @converts("Relu")
    def relu(node: Node, x: Value) -> Value:
        return sf.nn.relu(x)

A value is an `np.ndarray` when the import knows it (an initializer, a constant, what was
computed from those alone: shapes and indices, mostly) and an `sf.Tensor` of the trace
otherwise. Converters compute with sf ops, which take either; one that needs a number to
decide a shape (Reshape's shape, Slice's starts) asks `node.const`. A node whose inputs are
all known is evaluated at import (`evaluate.run_graph`): ONNX's shape arithmetic folds away
before stageflow's passes see the graph. An omitted optional input is `None`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper

from stageflow.core.source import SourceLocation
from stageflow.frontend.tensor import Tensor

__all__ = ["Converter", "Node", "OnnxError", "UnknownAtImport", "Value", "converts", "lookup",
           "supported_ops"]

Value = np.ndarray | Tensor

DEFAULT_DOMAIN = ""


class OnnxError(ValueError):
    """A model stageflow cannot import as it stands: the message names the node, its op and
    opset, and what to do."""


class UnknownAtImport(OnnxError):
    """A value the import must know (a shape, an axis, a count) is computed at run time
    (`Node.const`); ONNX's backend suite, which feeds such values as graph inputs, folds the
    run's inputs in and imports again."""


@dataclass(frozen=True)
class Converter:
    """How nodes of one op type become sf ops; `fold` is False for the ops a known input
    does not make known (random draws)."""

    op_type: str
    domain: str
    function: Callable[..., Any]
    fold: bool = True


_TABLE: dict[tuple[str, str], Converter] = {}


def converts(*op_types: str, domain: str = DEFAULT_DOMAIN,
             fold: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as the converter of `op_types` in `domain`."""

    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        for op_type in op_types:
            if (op_type, domain) in _TABLE:
                raise ValueError(f"ONNX op {op_type} has two converters")
            _TABLE[op_type, domain] = Converter(op_type, domain, function, fold)
        return function

    return register


def lookup(op_type: str, domain: str) -> Converter | None:
    """The converter of `op_type` in `domain` ("" and "ai.onnx" are the default domain)."""
    return _TABLE.get((op_type, DEFAULT_DOMAIN if domain == "ai.onnx" else domain))


def supported_ops() -> list[tuple[str, str]]:
    """(domain, op type) of every ONNX op stageflow imports, sorted."""
    return sorted((domain, op_type) for op_type, domain in _TABLE)


_REQUIRED = object()


@dataclass
class Node:
    """One ONNX node as a converter sees it."""

    proto: onnx.NodeProto
    opset: int
    location: SourceLocation
    attributes: dict[str, Any] = field(default_factory=dict)
    # Runs a subgraph attribute (If's branches, Loop's body) on values: set by the graph
    # evaluator, which knows the enclosing scope.
    run_subgraph: Callable[[onnx.GraphProto, list[Value]], list[Value]] | None = None

    @classmethod
    def of(cls, proto: onnx.NodeProto, opset: int, location: SourceLocation,
           run_subgraph: Callable[..., list[Value]] | None = None) -> Node:
        attributes = {a.name: helper.get_attribute_value(a) for a in proto.attribute}
        for name, value in attributes.items():
            if isinstance(value, bytes):
                attributes[name] = value.decode()
            elif isinstance(value, list) and value and isinstance(value[0], bytes):
                attributes[name] = [v.decode() for v in value]
        return cls(proto, opset, location, attributes, run_subgraph)

    @property
    def op_type(self) -> str:
        return self.proto.op_type

    @property
    def name(self) -> str:
        return self.proto.name

    @property
    def output_count(self) -> int:
        """How many outputs the model asks of the node (an omitted trailing one not)."""
        return len(self.proto.output)

    def wants(self, index: int) -> bool:
        """Whether the model uses output `index` (an optional output may be left out)."""
        return index < len(self.proto.output) and self.proto.output[index] != ""

    def attr(self, name: str, default: Any = _REQUIRED) -> Any:
        """Attribute `name` (a TensorProto as an np.ndarray), or `default` when absent."""
        if name in self.attributes:
            value = self.attributes[name]
            return onnx.numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) \
                else value
        if default is _REQUIRED:
            raise self.error(f"the required attribute {name!r} is missing")
        return default

    def const(self, value: Value | None, what: str) -> np.ndarray:
        """`value` as an array known at import; an error when it is computed at run time
        (`what` names the input: "the shape input")."""
        if isinstance(value, np.ndarray):
            return value
        raise self.error(
            f"{what} must be known when the model is imported (an initializer, a Constant, "
            f"or computed from those and from static shapes), but it is computed at run "
            f"time; give the model's inputs static shapes (sf.onnx.load(..., "
            f"input_shapes={{name: shape}}))", UnknownAtImport)

    def error(self, message: str, kind: type[OnnxError] = OnnxError) -> OnnxError:
        """An error naming this node, its op and opset."""
        return kind(f"ONNX node {self.location.name!r} ({self.op_type}, opset "
                    f"{self.opset}): {message}\n  at {self.location.filename}, node "
                    f"{self.location.line}")
