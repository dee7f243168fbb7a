"""ONNX's element types and stageflow's dtypes, both ways.

ONNX names a tensor's element type by a `TensorProto.DataType` number; stageflow's dtypes
are NumPy dtypes (`core.dtypes`); ONNX's 8- and 4-bit floats and 4- and 2-bit integers are
stageflow's narrow dtypes, one element a byte (ONNX packs the sub-byte ones two or four to
a byte in a file; `onnx.numpy_helper` unpacks them). The types stageflow has no tensors of
(strings) map to nothing, and an import that meets one says so.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from stageflow.core import dtypes

__all__ = ["SATURATING", "from_onnx", "to_onnx", "type_name"]

_TO_SF: dict[int, np.dtype] = {
    TensorProto.FLOAT: dtypes.float32,
    TensorProto.DOUBLE: dtypes.float64,
    TensorProto.FLOAT16: dtypes.float16,
    TensorProto.BFLOAT16: dtypes.bfloat16,
    TensorProto.INT8: dtypes.int8,
    TensorProto.INT16: dtypes.int16,
    TensorProto.INT32: dtypes.int32,
    TensorProto.INT64: dtypes.int64,
    TensorProto.UINT8: dtypes.uint8,
    TensorProto.UINT16: dtypes.uint16,
    TensorProto.UINT32: dtypes.uint32,
    TensorProto.UINT64: dtypes.uint64,
    TensorProto.BOOL: dtypes.bool_,
    TensorProto.COMPLEX64: dtypes.complex64,
    TensorProto.COMPLEX128: dtypes.complex128,
    TensorProto.FLOAT8E4M3FN: dtypes.float8_e4m3fn,
    TensorProto.FLOAT8E4M3FNUZ: dtypes.float8_e4m3fnuz,
    TensorProto.FLOAT8E5M2: dtypes.float8_e5m2,
    TensorProto.FLOAT8E5M2FNUZ: dtypes.float8_e5m2fnuz,
    TensorProto.FLOAT8E8M0: dtypes.float8_e8m0fnu,
    TensorProto.FLOAT4E2M1: dtypes.float4_e2m1fn,
    TensorProto.INT4: dtypes.int4,
    TensorProto.UINT4: dtypes.uint4,
    TensorProto.INT2: dtypes.int2,
    TensorProto.UINT2: dtypes.uint2,
}
_TO_ONNX: dict[np.dtype, int] = {dtype: code for code, dtype in _TO_SF.items()}
# The float8 formats ONNX's Cast and QuantizeLinear saturate (`saturate`, on by default):
# those with a NaN, which an overflow would otherwise give.
SATURATING = (dtypes.float8_e4m3fn, dtypes.float8_e4m3fnuz, dtypes.float8_e5m2,
              dtypes.float8_e5m2fnuz)


def type_name(code: int) -> str:
    """ONNX's own name of an element type: ``1`` -> ``"FLOAT"``."""
    try:
        return TensorProto.DataType.Name(code)
    except ValueError:
        return f"element type {code}"


def from_onnx(code: int) -> np.dtype | None:
    """The stageflow dtype of ONNX element type `code`, or None where stageflow has none."""
    return _TO_SF.get(code)


def to_onnx(dtype: np.dtype) -> int:
    """The ONNX element type of a stageflow dtype."""
    return _TO_ONNX[np.dtype(dtype)]
