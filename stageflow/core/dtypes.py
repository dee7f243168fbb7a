"""The element types of stageflow tensors.

A stageflow dtype *is* a NumPy dtype object: eager tensors wrap NumPy arrays, so reading
``t.dtype`` costs nothing and compares equal to ``np.float32`` and to ``"float32"``.
bfloat16 comes from ml_dtypes, the NumPy extension JAX and TensorFlow share.

complex64 and complex128 are pairs of float32 and float64 (real part first), NumPy's
layout; the IR spells them ``complex<f32>`` and ``complex<f64>``, as MLIR does.

The *narrow* dtypes, ml_dtypes' 8- and 4-bit floats and 4- and 2-bit integers (one element
a byte, as ml_dtypes stores them), are storage types, as PyTorch's float8 tensors are: a
tensor of them can be made, moved (reshaped, sliced, gathered, concatenated), compared for
equality and cast to and from every other dtype, and its arithmetic happens after a cast to
a wider type. They are neither `FLOATING` nor `INTEGER`, so an op that computes refuses
them by name rather than rounding every intermediate to three bits.

`string` is TensorFlow's: a tensor of byte strings, held as a NumPy object array of
`bytes` (what TensorFlow's ``.numpy()`` returns). String tensors are host-only values: made,
printed, compared with ``==``, indexed, reshaped and worked on by `sf.strings` eagerly, never
staged into a graph nor compiled, so `string` is not in `ALL` (the dtypes of the op set).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

DType = np.dtype

float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
uint16 = np.dtype(np.uint16)
uint32 = np.dtype(np.uint32)
uint64 = np.dtype(np.uint64)
bool_ = np.dtype(np.bool_)
complex64 = np.dtype(np.complex64)
complex128 = np.dtype(np.complex128)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e4m3fnuz = np.dtype(ml_dtypes.float8_e4m3fnuz)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float8_e5m2fnuz = np.dtype(ml_dtypes.float8_e5m2fnuz)
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)
float4_e2m1fn = np.dtype(ml_dtypes.float4_e2m1fn)
int4 = np.dtype(ml_dtypes.int4)
uint4 = np.dtype(ml_dtypes.uint4)
int2 = np.dtype(ml_dtypes.int2)
uint2 = np.dtype(ml_dtypes.uint2)

string = np.dtype(object)

NARROW_FLOATING = (float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz,
                   float8_e8m0fnu, float4_e2m1fn)
NARROW_INTEGER = (int4, uint4, int2, uint2)
NARROW = NARROW_FLOATING + NARROW_INTEGER
# Sets for the tests on eager paths (a dtype's hash beats comparing it with each of a tuple).
_NARROW_SET = frozenset(NARROW)
_NARROW_FLOATING_SET = frozenset(NARROW_FLOATING)
ALL = (float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32,
       uint64, bool_, complex64, complex128, *NARROW)
FLOATING = (float16, bfloat16, float32, float64)
COMPLEX = (complex64, complex128)
# The dtypes that carry gradients, one set: the tape and the gradient rules test every
# operand of every recorded op, where one membership test beats a call and two.
INEXACT = frozenset(FLOATING + COMPLEX)
INTEGER = (int8, int16, int32, int64, uint8, uint16, uint32, uint64)
UNSIGNED = (uint8, uint16, uint32, uint64)
SIGNED = (int8, int16, int32, int64)

# Short names used by the IR (`tensor<4x?xf32>`) and by the command line (`f32[8,784]`).
SHORT_NAMES = {
    float16: "f16",
    bfloat16: "bf16",
    float32: "f32",
    float64: "f64",
    int8: "i8",
    int16: "i16",
    int32: "i32",
    int64: "i64",
    uint8: "ui8",
    uint16: "ui16",
    uint32: "ui32",
    uint64: "ui64",
    bool_: "i1",
    complex64: "c64",
    complex128: "c128",
    float8_e4m3fn: "f8E4M3FN",
    float8_e4m3fnuz: "f8E4M3FNUZ",
    float8_e5m2: "f8E5M2",
    float8_e5m2fnuz: "f8E5M2FNUZ",
    float8_e8m0fnu: "f8E8M0FNU",
    float4_e2m1fn: "f4E2M1FN",
    int4: "i4",
    uint4: "ui4",
    int2: "i2",
    uint2: "ui2",
}
BY_SHORT_NAME = {short: dtype for dtype, short in SHORT_NAMES.items()}


def as_dtype(value: object) -> np.dtype:
    """The stageflow dtype for a dtype-like value (a dtype, its name or IR short name, a
    NumPy scalar type), or ``TypeError`` (TensorFlow's ``tf.as_dtype``).

    >>> sf.as_dtype("float32") == sf.float32, sf.as_dtype(np.int64) == sf.int64
    (True, True)
    >>> sf.as_dtype("bf16").name
    'bfloat16'
    """
    if isinstance(value, str) and value in BY_SHORT_NAME:
        return BY_SHORT_NAME[value]
    if (isinstance(value, str) and value == "string") or value is bytes or value is str:
        return string
    try:
        dtype = np.dtype(value)
    except TypeError:
        raise TypeError(f"{value!r} is not a dtype stageflow knows") from None
    if dtype not in ALL and dtype != string:
        names = ", ".join(d.name for d in ALL)
        raise TypeError(f"dtype {dtype.name} is not supported; use one of {names}, string")
    return dtype


def is_string(dtype: np.dtype) -> bool:
    """The dtype of string tensors (`string`)."""
    return dtype.kind == "O"


def dtype_name(dtype: np.dtype) -> str:
    """The dtype's name as stageflow and TensorFlow spell it (``string``, not NumPy's
    ``object``)."""
    return "string" if dtype.kind == "O" else dtype.name


def is_floating(dtype: np.dtype) -> bool:
    return dtype in FLOATING


def is_integer(dtype: np.dtype) -> bool:
    return dtype in INTEGER


def is_complex(dtype: np.dtype) -> bool:
    return dtype in COMPLEX


def is_narrow(dtype: np.dtype) -> bool:
    """One of the storage-only 8-, 4- and 2-bit dtypes (`NARROW`)."""
    return dtype in _NARROW_SET


def is_narrow_floating(dtype: np.dtype) -> bool:
    """One of the 8- and 4-bit floats (`NARROW_FLOATING`)."""
    return dtype in _NARROW_FLOATING_SET


def refusal(dtype: np.dtype, allowed: tuple[np.dtype, ...]) -> str:
    """Why an op that takes only `allowed` refuses `dtype`, and, for a narrow dtype, what to
    do instead."""
    names = ", ".join(d.name for d in allowed)
    message = f"dtype {dtype.name} is not supported (expected one of {names})"
    if dtype in NARROW:
        message += (f"; {dtype.name} is a storage type: compute in a wider one, "
                    f"sf.cast(x, sf.float32)")
    return message


def is_inexact(dtype: np.dtype) -> bool:
    """Floating or complex: the dtypes that carry gradients (as in TensorFlow and JAX)."""
    return dtype in INEXACT


# complex64 is made of float32s, complex128 of float64s.
_PARTS = {complex64: float32, complex128: float64}
_COMPLEX_OF = {float32: complex64, float64: complex128}


def real_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype of a complex dtype's parts (float32 for complex64); others unchanged."""
    return _PARTS.get(dtype, dtype)


def complex_dtype(dtype: np.dtype) -> np.dtype:
    """The complex dtype whose parts are `dtype` (float32 or float64), else ``TypeError``."""
    try:
        return _COMPLEX_OF[dtype]
    except KeyError:
        raise TypeError(f"there is no complex dtype made of {dtype.name} "
                        "(use float32 or float64)") from None
