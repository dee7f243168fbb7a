"""Elementwise ONNX ops: arithmetic, comparisons, logic and unary math, broadcasting as
NumPy (ONNX's multidirectional broadcasting is NumPy's)."""

from __future__ import annotations

import stageflow as sf
from stageflow.onnx.converters import Node, Value, converts

_BINARY = {
    "Add": sf.add,
    "Sub": sf.subtract,
    "Mul": sf.multiply,
}
_UNARY = {
    "Relu": sf.nn.relu,
}


@converts(*_BINARY)
def binary(node: Node, a: Value, b: Value) -> Value:
    return _BINARY[node.op_type](a, b)


@converts(*_UNARY)
def unary(node: Node, x: Value) -> Value:
    return _UNARY[node.op_type](x)
