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
    ======================  =================================  ======================

Integers are printed without their ``: i64`` suffix, as MLIR does for its default integer
type; the parser reads a bare integer as i64, so the text still round-trips exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    NoneAttr,
    NoneType,
    Signedness,
    StringAttr,
    UnitAttr,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute
from xdsl.printer import Printer

from stageflow.ir.types import dtype_of, element_type, is_element_type

_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_UI64 = IntegerType(64, Signedness.UNSIGNED)


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
    if isinstance(attr, NoneType | NoneAttr):
        return None
    if isinstance(attr, UnitAttr):
        return True  # MLIR's flag: present means true
    if isinstance(attr, ArrayAttr):
        return tuple(decode(item) for item in attr.data)
    if is_element_type(attr):
        return dtype_of(attr)
    raise TypeError(f"attribute {attr} is not a stageflow param")


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
