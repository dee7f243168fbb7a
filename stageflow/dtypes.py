"""`sf.dtypes`: the element types, `as_dtype`, `cast`, `saturate_cast` and `complex`
(TensorFlow's ``tf.dtypes``).

A stageflow dtype *is* a NumPy dtype object (`stageflow.core.dtypes`), so `DType` is
``np.dtype`` and a dtype compares equal to ``np.float32`` and to ``"float32"``. TensorFlow's
``DType`` properties have NumPy's spellings: ``.name`` is the same, ``.itemsize`` is
``.size``, ``.type`` is ``.as_numpy_dtype``, ``np.finfo(d).max`` / ``np.iinfo(d).max`` are
``.max`` (``ml_dtypes.finfo`` for bfloat16 and the narrow floats), ``d.kind == "f"`` or
``sf.dtypes.float32 in (...)`` where TensorFlow asks ``.is_floating``.
"""

from numpy import dtype as DType  # noqa: N812 - TensorFlow's name for the dtype class

from stageflow.core.dtypes import (
    as_dtype,
    bfloat16,
    complex64,
    complex128,
    float4_e2m1fn,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    float8_e8m0fnu,
    float16,
    float32,
    float64,
    int2,
    int4,
    int8,
    int16,
    int32,
    int64,
    string,
    uint2,
    uint4,
    uint8,
    uint16,
    uint32,
    uint64,
)
from stageflow.core.dtypes import bool_ as bool  # noqa: A004 - tf.dtypes.bool
from stageflow.core.exports import public_dir as _public_dir
from stageflow.frontend.ops.casting import saturate_cast
from stageflow.frontend.ops.complex_numbers import complex  # noqa: A004 - tf.dtypes.complex
from stageflow.frontend.ops.elementwise import cast

double = float64
half = float16

__all__ = ["DType", "as_dtype", "bfloat16", "bool", "cast", "complex", "complex64",
           "complex128", "double", "float4_e2m1fn", "float8_e4m3fn", "float8_e4m3fnuz",
           "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float16", "float32",
           "float64", "half", "int2", "int4", "int8", "int16", "int32", "int64",
           "saturate_cast", "string", "uint2", "uint4", "uint8", "uint16", "uint32", "uint64"]
__dir__ = _public_dir(globals())
