"""`sf.TensorSpec`: the shape (with `None` for unknown dims) and dtype of a tensor argument."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.primitive import ShapedType
from stageflow.core.shapes import format_shape


@dataclass(frozen=True, init=False)
class TensorSpec:
    """Describes tensors an `sf.function` accepts; `None` dims accept any size.

    >>> sf.TensorSpec([None, 3])
    TensorSpec(shape=(?, 3), dtype=float32)
    >>> sf.TensorSpec([2], sf.int32)
    TensorSpec(shape=(2,), dtype=int32)
    """

    shape: tuple[int | None, ...]
    dtype: np.dtype
    name: str | None

    def __init__(self, shape: Any, dtype: Any = dtypes.float32, name: str | None = None):
        if shape is None:  # TensorFlow's unknown rank: a function's IR has ranked types
            raise ValueError("TensorSpec: shape=None (a tensor of any rank) is not supported: "
                             "give the rank, with None for dims of any size, e.g. "
                             "TensorSpec([None, None])")
        dims = tuple(None if d is None else int(d) for d in shape)
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "dtype", dtypes.as_dtype(dtype))
        object.__setattr__(self, "name", name)

    @classmethod
    def from_tensor(cls, tensor: Any, name: str | None = None) -> TensorSpec:
        return cls(tensor.shape, tensor.dtype, name)

    @property
    def shaped_type(self) -> ShapedType:
        return ShapedType(self.shape, self.dtype)

    def is_compatible_with(self, shape: tuple, dtype: np.dtype) -> bool:
        return dtype == self.dtype and len(shape) == len(self.shape) and all(
            want is None or want == got for want, got in zip(self.shape, shape, strict=True)
        )

    def __repr__(self) -> str:
        name = f", name={self.name!r}" if self.name else ""
        return f"TensorSpec(shape={format_shape(self.shape)}, dtype={self.dtype.name}{name})"
