"""`saturate_cast`: a cast that clamps to the target dtype's range first, built of
`maximum`, `minimum` and `cast`, so that it stages and differentiates as they do."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from stageflow.core import dtypes
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.elementwise import cast, maximum, minimum
from stageflow.frontend.tensor import Tensor


def _range(dtype: np.dtype) -> tuple[Any, Any]:
    """The least and greatest value of a real dtype, as Python numbers."""
    if dtype == dtypes.bool_:
        return 0, 1
    info = ml_dtypes.finfo(dtype) if dtype.kind == "f" or dtype in dtypes.FLOATING else (
        ml_dtypes.iinfo(dtype))
    return info.min.item() if hasattr(info.min, "item") else info.min, (
        info.max.item() if hasattr(info.max, "item") else info.max)


def _bound(limit: Any, dtype: np.dtype, toward: float) -> np.ndarray:
    """`limit` as a value of `dtype`, rounded toward `toward` where it is not one exactly
    (int32's greatest value, 2**31 - 1, is 2**31 in float32, which casts back out of range)."""
    value = np.asarray(limit).astype(dtype)
    if dtype.kind == "f" and (value.item() > limit if toward < 0 else value.item() < limit):
        value = np.nextafter(value, np.asarray(toward, dtype))
    return value


def saturate_cast(value: Any, dtype: Any, name: str | None = None) -> Tensor:
    """`value` cast to `dtype` without overflow: values beyond the range of `dtype` become
    its least or greatest value (TensorFlow's ``tf.dtypes.saturate_cast``), where `cast`
    would wrap integers around or make floats out of range undefined; floats to integers
    truncate toward zero as `cast` does, complex to real keeps the real part.

    >>> sf.saturate_cast([-300.0, 1.5, 300.0], sf.uint8)
    sf.Tensor([  0,   1, 255], shape=(3,), dtype=uint8)
    >>> sf.saturate_cast(sf.constant([70000, -5], sf.int32), sf.int16)
    sf.Tensor([32767,    -5], shape=(2,), dtype=int16)
    """
    del name
    x = convert_to_tensor(value)
    dtype = dtypes.as_dtype(dtype)
    if dtypes.is_complex(x.dtype):
        if dtypes.is_complex(dtype):
            return cast(x, dtype)
        x = cast(x, dtypes.float64 if x.dtype == dtypes.complex128 else dtypes.float32)
    if dtypes.is_complex(dtype):
        return cast(x, dtype)
    (low_in, high_in), (low, high) = _range(x.dtype), _range(dtype)
    if low_in < low:
        x = maximum(x, _bound(low, x.dtype, np.inf))
    if high_in > high:
        x = minimum(x, _bound(high, x.dtype, -np.inf))
    return cast(x, dtype)
