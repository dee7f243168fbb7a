"""Primitive params <-> builtin attributes, and their compact printing.

Params are plain hashable Python values; each maps to one builtin attribute, chosen by the
value's Python type alone, so decoding needs no per-op schema and any new primitive's params
work without touching this file:

    ======================  =================================  ======================
    Python                  attribute                          printed
    ======================  =================================  ======================
    bool                    IntegerAttr : i1                   ``true``
    int                     IntegerAttr : i64                  ``3``
    float                   FloatAttr : f64                    ``5.000000e-01 : f64``
    str                     StringAttr                         ``"same"``
    None                    NoneType                           ``none``
    dtype                   element type                       ``f32``
    tuple (of the above)    ArrayAttr                          ``[0, 2]``, ``[[0, none, 1]]``
    numpy.ndarray           DenseIntOrFPElementsAttr           ``dense<[1, 2]> : tensor<2xi32>``
    function (has .name)    SymbolRefAttr                      ``@dense_relu``
    ======================  =================================  ======================

A function param (the callee of `call`) cannot be rebuilt from text; it decodes to a
`SymbolRef`, and ops holding one are checked against the referenced ``func.func``.

Arrays go through NumPy's buffer straight into the dense attribute's bytes, in xDSL's own
layout (little-endian, ``true`` as 0xFF), so a built constant compares equal to the same
constant parsed from text.

Integers are printed without their ``: i64`` suffix, as MLIR does for its default integer
type; the parser reads a bare integer as i64, so the text still round-trips exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    NoneAttr,
    NoneType,
    Signedness,
    StringAttr,
    SymbolRefAttr,
    TensorType,
    UnitAttr,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute
from xdsl.printer import Printer

from stageflow.core import dtypes
from stageflow.core.primitive import ShapedType
from stageflow.ir.types import dtype_of, element_type, is_element_type, tensor_type

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_UI64 = IntegerType(64, Signedness.UNSIGNED)


@dataclass(frozen=True)
class SymbolRef:
    """A decoded ``@name`` param: a reference to a function of the module, by name."""

    name: str


def encode(value: Any) -> Attribute:
    """The attribute for one param value; ``TypeError`` for values with no encoding."""
    if isinstance(value, bool | np.bool_):
        return IntegerAttr(int(bool(value)), i1)
    if isinstance(value, int | np.integer):
        number = int(value)
        if _I64_MIN <= number <= _I64_MAX:
            return IntegerAttr(number, i64)
        return IntegerAttr(number, _UI64)
    if isinstance(value, float | np.floating):
        return FloatAttr(float(value), f64)
    if isinstance(value, str):
        return StringAttr(value)
    if value is None:
        return NoneType()
    if isinstance(value, np.dtype) or (
        isinstance(value, type) and issubclass(value, np.generic)
    ):
        return element_type(value)
    if isinstance(value, tuple | list):
        return ArrayAttr([encode(item) for item in value])
    if isinstance(value, np.ndarray):
        return dense_attr(value)
    if isinstance(value, SymbolRef) or isinstance(getattr(value, "name", None), str):
        return SymbolRefAttr(value.name)
    raise TypeError(f"cannot encode param value {value!r} of type {type(value).__name__}")


def decode(attr: Attribute) -> Any:
    """The param value of an attribute (inverse of `encode`); ``TypeError`` otherwise."""
    if isinstance(attr, IntegerAttr):
        value = attr.value.data
        return bool(value) if attr.type == i1 else int(value)
    if isinstance(attr, FloatAttr):
        return float(attr.value.data)
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, BytesAttr):  # how xDSL parses back a string with non-ASCII text
        return attr.data.decode("utf-8")
    if isinstance(attr, NoneType | NoneAttr):
        return None
    if isinstance(attr, UnitAttr):
        return True  # MLIR's flag: present means true
    if isinstance(attr, ArrayAttr):
        return tuple(decode(item) for item in attr.data)
    if isinstance(attr, DenseIntOrFPElementsAttr):
        return dense_value(attr)
    if isinstance(attr, SymbolRefAttr) and not attr.nested_references.data:
        return SymbolRef(attr.root_reference.data)
    if is_element_type(attr):
        return dtype_of(attr)
    raise TypeError(f"attribute {attr} is not a stageflow param")


# How the narrow integers lie in a dense attribute's bytes: as the 8-bit integer of their
# value (ml_dtypes keeps only their low bits, which xDSL would print as unsigned).
_NARROW_BYTES = {dtypes.int4: np.dtype(np.int8), dtypes.int2: np.dtype(np.int8),
                 dtypes.uint4: np.dtype(np.uint8), dtypes.uint2: np.dtype(np.uint8)}


def _little_endian(dtype: np.dtype) -> np.dtype:
    return dtype.newbyteorder("<") if dtype.byteorder == ">" else dtype


def dense_attr(value: Any, dtype: object = None) -> DenseIntOrFPElementsAttr:
    """A dense elements attribute holding `value` (anything `np.asarray` accepts)."""
    array = np.asarray(value, dtype=None if dtype is None else dtypes.as_dtype(dtype))
    dtype = dtypes.as_dtype(array.dtype)
    if dtype == dtypes.bool_:
        data = np.where(array, np.uint8(0xFF), np.uint8(0)).tobytes()
    elif dtype in dtypes.NARROW_INTEGER:  # a byte each, sign-extended, as MLIR reads them
        data = array.astype(_NARROW_BYTES[dtype]).tobytes()
    else:
        data = np.ascontiguousarray(array, dtype=_little_endian(dtype)).tobytes()
    return DenseIntOrFPElementsAttr(tensor_type(ShapedType(array.shape, dtype)), BytesAttr(data))


def dense_value(attr: DenseIntOrFPElementsAttr) -> np.ndarray:
    """The (read-only) NumPy array a dense elements attribute holds."""
    ty = attr.type
    assert isinstance(ty, TensorType)
    dtype = dtype_of(ty.get_element_type())
    if dtype == dtypes.bool_:
        flat = np.frombuffer(attr.data.data, dtype=np.uint8) != 0
    elif dtype in dtypes.NARROW_INTEGER:
        flat = np.frombuffer(attr.data.data, dtype=_NARROW_BYTES[dtype]).astype(dtype)
    else:
        flat = np.frombuffer(attr.data.data, dtype=_little_endian(dtype))
    return flat.reshape(tuple(ty.get_shape()))


def encode_params(params: Mapping[str, Any]) -> dict[str, Attribute]:
    return {name: encode(value) for name, value in params.items()}


def decode_params(attributes: Mapping[str, Attribute]) -> dict[str, Any]:
    return {name: decode(attr) for name, attr in attributes.items()}


def print_attribute(printer: Printer, attr: Attribute) -> None:
    """Print like `Printer.print_attribute`, but i64 integers without their type suffix."""
    if isinstance(attr, IntegerAttr) and attr.type == i64:
        printer.print_int(attr.value.data)
    elif isinstance(attr, ArrayAttr):
        with printer.in_square_brackets():
            printer.print_list(attr.data, lambda item: print_attribute(printer, item))
    else:
        printer.print_attribute(attr)


def print_attr_dict(printer: Printer, attributes: Mapping[str, Attribute]) -> None:
    """``{axes = [0], keepdims = false}``; unit attributes print as their bare name."""

    def entry(item: tuple[str, Attribute]) -> None:
        name, attr = item
        printer.print_identifier_or_string_literal(name)
        if not isinstance(attr, UnitAttr):
            printer.print_string(" = ")
            print_attribute(printer, attr)

    with printer.in_braces():
        printer.print_list(attributes.items(), entry)
