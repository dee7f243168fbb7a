"""Building `sf` ops and functions from frontend values: what the tracer's lowering calls.

The tracer has already run the shape rule (to give the user an early error at their own
line), so `build_op` only encodes: params to attributes, abstract values to IR types, the
user's source line to a ``loc("file.py":12:5)``. `build_function` wraps a block of ops
into a ``func.func`` ending in ``func.return``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FileLineColLoc,
    IntAttr,
    LocationAttr,
    NameLoc,
    StringAttr,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from stageflow.core.primitive import Primitive, ResourceType, ShapedType
from stageflow.core.source import SourceLocation
from stageflow.ir.attributes import dense_attr, dense_value, encode
from stageflow.ir.dialect import ConstantOp, SfOp, op_class
from stageflow.ir.types import AbstractValue, ir_type

Location = SourceLocation | LocationAttr | None


def location_attr(location: Location) -> LocationAttr | None:
    """``SourceLocation("m.py", 12, 5)`` -> ``loc("m.py":12:5)``, a named one ->
    ``loc("name"("m.onnx":12:0))`` (MLIR's NameLoc); attributes pass through."""
    if location is None or isinstance(location, LocationAttr):
        return location
    where = FileLineColLoc(
        StringAttr(location.filename), IntAttr(location.line), IntAttr(location.column)
    )
    return NameLoc(StringAttr(location.name), where) if location.name else where


def source_location(op: Operation) -> SourceLocation | None:
    """The user's line `op` was traced from, as its ``loc(...)`` says (the inverse of
    `location_attr`)."""
    location = getattr(op, "location", None)
    name = ""
    if isinstance(location, NameLoc):
        name, location = location.desc.data, location.location
    if isinstance(location, FileLineColLoc):
        return SourceLocation(location.filename.data, location.line.data, location.column.data,
                              name)
    return None


def build_op(
    primitive: Primitive | str,
    operands: Sequence[SSAValue],
    params: Mapping[str, Any],
    result_types: AbstractValue | Attribute | Sequence[AbstractValue | Attribute],
    location: Location = None,
) -> SfOp:
    """The `sf` op applying `primitive` to `operands` (not inserted anywhere, not verified).

    Attributes are stored in the order of the shape rule's keyword params, so equal ops
    print equal whatever order the caller passed the params in.
    """
    cls = op_class(primitive)
    order = {name: index for index, name in enumerate(cls.PARAMS)}
    names = sorted(params, key=lambda name: order.get(name, len(order)))
    try:
        attributes = {name: encode(params[name]) for name in names}
    except TypeError as error:
        raise TypeError(f"{cls.name}: {error}") from None
    if isinstance(result_types, ShapedType | ResourceType | Attribute):
        result_types = [result_types]
    op = cls.create(
        operands=list(operands),
        result_types=[ir_type(ty) for ty in result_types],
        attributes=attributes,
    )
    if (attr := location_attr(location)) is not None:
        op.location = attr
    return op


def build_constant(value: Any, dtype: object = None, location: Location = None) -> ConstantOp:
    """``sf.constant`` holding `value`, e.g. ``build_constant([1.0, 2.0], "f32")``."""
    op = ConstantOp(dense_attr(value, dtype))
    if (attr := location_attr(location)) is not None:
        op.location = attr
    return op


def constant_value(constant: ConstantOp | DenseIntOrFPElementsAttr) -> np.ndarray:
    """The NumPy array (read-only) held by an ``sf.constant`` or a dense attribute."""
    return dense_value(constant.value if isinstance(constant, ConstantOp) else constant)


def build_function(
    name: str,
    arg_types: Sequence[AbstractValue | Attribute],
    body: Callable[[Sequence[SSAValue]], tuple[Sequence[Operation], Sequence[SSAValue]]],
    location: Location = None,
) -> FuncOp:
    """``func.func @name``: `body(args)` returns the ops to append and the values to return.

    The identity on ``f32[2]``: ``build_function("id", [ShapedType((2,), f32)],
    lambda args: ([], args))``.
    """
    block = Block(arg_types=[ir_type(ty) for ty in arg_types])
    ops, results = body(block.args)
    block.add_ops(ops)
    block.add_op(ReturnOp(*results))
    signature = ([arg.type for arg in block.args], [value.type for value in results])
    function = FuncOp(name, signature, Region(block))
    if (attr := location_attr(location)) is not None:
        function.location = attr
    return function
