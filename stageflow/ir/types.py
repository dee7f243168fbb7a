"""The IR's value types and their conversions from and to the frontend's abstract values.

The frontend describes a tensor by shape (``None`` for an unknown dim) and NumPy dtype; the
IR uses MLIR's builtin ranked tensor type with ``?`` for dynamic dims (``tensor<4x?xf32>``).
A variable handle (`ResourceType`, captured by reference) becomes the one type `sf` adds,
``!sf.resource<tensor<4xf32>>``. This module is the only place that maps one side onto the
other, so the dtype table (`stageflow.core.dtypes.SHORT_NAMES`) and the IR element
types can never drift apart.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    BFloat16Type,
    ComplexType,
    Float4E2M1FNType,
    Float8E4M3FNType,
    Float8E4M3FNUZType,
    Float8E5M2FNUZType,
    Float8E5M2Type,
    Float8E8M0FNUType,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition

from stageflow.core import dtypes
from stageflow.core.primitive import ResourceType, ShapedType

AbstractValue = ShapedType | ResourceType


@irdl_attr_definition
class ResourceTensorType(ParametrizedAttribute, TypeAttribute):
    """``!sf.resource<tensor<4xf32>>``: a handle to a variable holding a tensor of that type.

    Handles flow into `sf.read_variable` and `sf.assign_variable`; the value they refer to
    lives outside the function (the variable is captured by reference).
    """

    name = "sf.resource"
    value: TensorType

ELEMENT_TYPES: dict[np.dtype, Attribute] = {
    dtypes.float16: Float16Type(),
    dtypes.bfloat16: BFloat16Type(),
    dtypes.float32: Float32Type(),
    dtypes.float64: Float64Type(),
    dtypes.int8: IntegerType(8),
    dtypes.int16: IntegerType(16),
    dtypes.int32: IntegerType(32),
    dtypes.int64: IntegerType(64),
    dtypes.uint8: IntegerType(8, Signedness.UNSIGNED),
    dtypes.uint16: IntegerType(16, Signedness.UNSIGNED),
    dtypes.uint32: IntegerType(32, Signedness.UNSIGNED),
    dtypes.uint64: IntegerType(64, Signedness.UNSIGNED),
    dtypes.bool_: IntegerType(1),
    dtypes.complex64: ComplexType(Float32Type()),
    dtypes.complex128: ComplexType(Float64Type()),
    dtypes.float8_e4m3fn: Float8E4M3FNType(),
    dtypes.float8_e4m3fnuz: Float8E4M3FNUZType(),
    dtypes.float8_e5m2: Float8E5M2Type(),
    dtypes.float8_e5m2fnuz: Float8E5M2FNUZType(),
    dtypes.float8_e8m0fnu: Float8E8M0FNUType(),
    dtypes.float4_e2m1fn: Float4E2M1FNType(),
    dtypes.int4: IntegerType(4),
    dtypes.uint4: IntegerType(4, Signedness.UNSIGNED),
    dtypes.int2: IntegerType(2),
    dtypes.uint2: IntegerType(2, Signedness.UNSIGNED),
}
DTYPES: dict[Attribute, np.dtype] = {ty: dtype for dtype, ty in ELEMENT_TYPES.items()}


def element_type(dtype: object) -> Attribute:
    """The IR element type of a dtype-like value (``f32`` for ``np.float32``)."""
    return ELEMENT_TYPES[dtypes.as_dtype(dtype)]


def is_element_type(attr: Attribute) -> bool:
    return attr in DTYPES


def dtype_of(attr: Attribute) -> np.dtype:
    """The NumPy dtype of an IR element type; ``TypeError`` for types stageflow lacks."""
    try:
        return DTYPES[attr]
    except KeyError:
        raise TypeError(f"element type {attr} is not supported by stageflow") from None


def tensor_type(aval: ShapedType) -> TensorType:
    """``ShapedType((4, None), float32)`` -> ``tensor<4x?xf32>``."""
    shape = [DYNAMIC_INDEX if d is None else int(d) for d in aval.shape]
    return TensorType(element_type(aval.dtype), shape)


def shaped_type(ty: Attribute) -> ShapedType:
    """``tensor<4x?xf32>`` -> ``ShapedType((4, None), float32)``; ``TypeError`` otherwise."""
    if not isinstance(ty, TensorType):
        raise TypeError(f"expected a ranked tensor type, got {ty}")
    shape = tuple(None if d == DYNAMIC_INDEX else d for d in ty.get_shape())
    return ShapedType(shape, dtype_of(ty.get_element_type()))


def ir_type(value: AbstractValue | Attribute) -> Attribute:
    """The IR type of an abstract value (IR types pass through unchanged)."""
    if isinstance(value, ShapedType):
        return tensor_type(value)
    if isinstance(value, ResourceType):
        return ResourceTensorType(tensor_type(value.value))
    return value


def abstract_value(ty: Attribute) -> AbstractValue:
    """The abstract value the shape rules take for an IR type (inverse of `ir_type`)."""
    if isinstance(ty, ResourceTensorType):
        return ResourceType(shaped_type(ty.value))
    return shaped_type(ty)


def compatible(declared: AbstractValue, inferred: AbstractValue) -> bool:
    """Same dtype and rank, and every dim equal or unknown on either side."""
    if isinstance(declared, ResourceType) or isinstance(inferred, ResourceType):
        if not (isinstance(declared, ResourceType) and isinstance(inferred, ResourceType)):
            return False
        return compatible(declared.value, inferred.value)
    return (
        declared.dtype == inferred.dtype
        and declared.ndim == inferred.ndim
        and all(
            a is None or b is None or a == b
            for a, b in zip(declared.shape, inferred.shape, strict=True)
        )
    )
