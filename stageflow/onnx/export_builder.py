"""What the export's rules write with: the `Builder` (unique names, initializers, the node
lists of the graph and its subgraphs, integer widening where ONNX Runtime has no kernel)
and `OnnxMath`, the arithmetic `primitives.special`'s algorithms run on, writing float64
nodes.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from stageflow.core import dtypes
from stageflow.onnx.dtypes import to_onnx

__all__ = ["NO_WHERE", "WIDER", "Builder", "OnnxMath", "Term", "element_type"]

# The integer types ONNX Runtime computes in: narrower ones (and bools) widen to int32,
# uint32 to int64; the result cast back to its type is NumPy's, wrapped.
WIDER = {np.dtype(t): dtypes.int32 for t in (np.int8, np.uint8, np.int16, np.uint16,
                                             np.bool_)}
WIDER[dtypes.uint32] = dtypes.int64
NO_WHERE = frozenset(np.dtype(t) for t in (np.bool_, np.int16, np.uint16))  # no kernels
_BOOL_RESULTS = frozenset({"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"})


class Builder:
    """Names, initializers and the node lists of the graph and subgraphs being written."""

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self.initializers: list[onnx.TensorProto] = []
        self.scopes: list[list[onnx.NodeProto]] = [[]]
        self._constants: dict[tuple[str, tuple[int, ...], bytes], str] = {}
        self._ids = itertools.count()
        self.location = ""  # the user's source line of the op being written: each node's doc

    def fresh(self, hint: str = "v") -> str:
        """A name no other value of the model has (subgraphs included)."""
        return f"{hint}_{next(self._ids)}"

    def node(self, op_type: str, inputs: Sequence[str], outputs: int = 1,
             **attributes: Any) -> list[str]:
        """Append one node to the innermost graph; the names of its `outputs` results."""
        names = [self.fresh(op_type.lower()) for _ in range(outputs)]
        self.scopes[-1].append(helper.make_node(op_type, list(inputs), names,
                                                name=self.fresh(op_type),
                                                doc_string=self.location, **attributes))
        return names

    def op(self, op_type: str, *inputs: str, **attributes: Any) -> str:
        """A node of one result: its name."""
        return self.node(op_type, inputs, **attributes)[0]

    def const(self, value: Any, dtype: Any = None) -> str:
        """An initializer holding `value` (one per distinct value), visible in subgraphs;
        a complex one as its parts, ``[..., 2]`` (`onnx.export_complex`)."""
        array = np.array(value, dtype=dtype, order="C")
        if dtypes.is_complex(array.dtype):
            array = np.stack([array.real, array.imag], axis=-1)
        key = (array.dtype.str, array.shape, hashlib.blake2b(array.tobytes()).digest())
        if key not in self._constants:
            name = self.fresh("const")
            self.initializers.append(numpy_helper.from_array(array, name))
            self._constants[key] = name
        return self._constants[key]

    def cast(self, x: str, source: np.dtype, target: np.dtype) -> str:
        return x if source == target else self.op("Cast", x, to=element_type(target))

    def arithmetic(self, op_type: str, xs: Sequence[str], dtype: np.dtype,
                   result: np.dtype | None = None, *, keep: Sequence[int] = (),
                   **attributes: Any) -> str:
        """`op_type` of operands of `dtype`, computed in a wider integer type where ONNX
        Runtime has no kernel for `dtype`, the result cast back (to `result` if given);
        the operands at the positions `keep` (axes, indices) are not values of `dtype`."""
        wide = WIDER.get(np.dtype(dtype))
        if wide is None:
            return self.op(op_type, *xs, **attributes)
        operands = [x if i in keep else self.cast(x, dtype, wide) for i, x in enumerate(xs)]
        y = self.op(op_type, *operands, **attributes)
        return y if op_type in _BOOL_RESULTS else self.cast(y, wide, result or dtype)

    def ints(self, values: Sequence[int]) -> str:
        """A 1-D int64 initializer (shapes, axes, pads)."""
        return self.const(np.asarray(list(values), np.int64).reshape(-1))

    def scalar(self, value: Any, dtype: np.dtype) -> str:
        return self.const(np.asarray(value, dtype))

    def dim(self, x: str, axis: int) -> str:
        """Dim `axis` of `x` at run time (negative: from the end), a 1-D int64 of one
        element."""
        if axis == -1:
            return self.op("Shape", x, start=-1)
        return self.op("Shape", x, start=axis, end=axis + 1)


def element_type(dtype: np.dtype) -> int:
    """ONNX's element type of a NumPy dtype (stageflow's, or one a rule computes in)."""
    try:
        return to_onnx(dtype)
    except KeyError:
        return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


class Term:
    """A float64 value (or mask) of the graph being written whose Python operators write
    nodes: what `primitives.special`'s algorithms compute on."""

    __hash__ = None  # type: ignore[assignment]  # == writes a node

    def __init__(self, b: Builder, name: str) -> None:
        self.b, self.name = b, name

    def _node(self, op_type: str, *others: Term) -> Term:
        return Term(self.b, self.b.op(op_type, self.name, *(o.name for o in others)))

    def __add__(self, other: Term) -> Term:
        return self._node("Add", other)

    def __sub__(self, other: Term) -> Term:
        return self._node("Sub", other)

    def __mul__(self, other: Term) -> Term:
        return self._node("Mul", other)

    def __truediv__(self, other: Term) -> Term:
        return self._node("Div", other)

    def __neg__(self) -> Term:
        return self._node("Neg")

    def __lt__(self, other: Term) -> Term:
        return self._node("Less", other)

    def __le__(self, other: Term) -> Term:
        return self._node("LessOrEqual", other)

    def __gt__(self, other: Term) -> Term:
        return self._node("Greater", other)

    def __ge__(self, other: Term) -> Term:
        return self._node("GreaterOrEqual", other)

    def __eq__(self, other: Term) -> Term:  # type: ignore[override]
        return self._node("Equal", other)

    def __and__(self, other: Term) -> Term:
        return self._node("And", other)

    def __or__(self, other: Term) -> Term:
        return self._node("Or", other)

    def __invert__(self) -> Term:
        return self._node("Not")


class OnnxMath:
    """`primitives.special.Math` writing ONNX nodes, in float64 as the eager kernels."""

    def __init__(self, b: Builder) -> None:
        self.b = b

    def const(self, like: Term, value: float) -> Term:
        return Term(self.b, self.b.scalar(value, dtypes.float64))

    def select(self, mask: Term, a: Term, b: Term) -> Term:
        return mask._node("Where", a, b)

    def floor(self, x: Term) -> Term:
        return x._node("Floor")

    def fabs(self, x: Term) -> Term:
        return x._node("Abs")

    def copysign(self, x: Term, sign: Term) -> Term:
        """|x| with the sign of `sign`, -0 included (1 / -0 is -inf)."""
        one, zero = self.const(x, 1.0), self.const(x, 0.0)
        magnitude = x._node("Abs")
        return self.select(one / sign < zero, -magnitude, magnitude)

    def sqrt(self, x: Term) -> Term:
        return x._node("Sqrt")

    def log(self, x: Term) -> Term:
        return x._node("Log")

    def exp(self, x: Term) -> Term:
        return x._node("Exp")

    def sin(self, x: Term) -> Term:
        return x._node("Sin")

    def cos(self, x: Term) -> Term:
        return x._node("Cos")

    def isnan(self, x: Term) -> Term:
        return x._node("IsNaN")

    def poly(self, x: Term, coefficients: tuple[float, ...]) -> Term:
        result = self.const(x, coefficients[0])
        for c in coefficients[1:]:
            result = result * x + self.const(x, c)
        return result
