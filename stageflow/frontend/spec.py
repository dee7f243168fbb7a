"""`sf.TensorSpec`: the shape (with `None` for unknown dims) and dtype of a tensor argument."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.primitive import ShapedType
from stageflow.core.shapes import format_shape
from stageflow.core.tensor_shape import TensorShape


@dataclass(frozen=True, init=False)
class TensorSpec:
    """Describes tensors an `sf.function` accepts; `None` dims accept any size, and
    ``shape=None`` (TensorFlow's unknown rank) any rank.

    >>> sf.TensorSpec([None, 3])
    TensorSpec(shape=(?, 3), dtype=float32)
    >>> sf.TensorSpec([2], sf.int32)
    TensorSpec(shape=(2,), dtype=int32)
    >>> spec = sf.TensorSpec(None)
    >>> spec, spec.shape.rank, spec.is_compatible_with(sf.ones((2, 3)))
    (TensorSpec(shape=<unknown>, dtype=float32), None, True)

    A function's IR has ranked types, so an `sf.function` whose ``input_signature`` holds
    a spec of unknown rank is traced once per rank it is called with (its dims all
    unknown), where TensorFlow traces one graph for every rank.
    """

    shape: TensorShape
    dtype: np.dtype
    name: str | None

    def __init__(self, shape: Any, dtype: Any = dtypes.float32, name: str | None = None):
        object.__setattr__(self, "shape", TensorShape(shape))
        object.__setattr__(self, "dtype", dtypes.as_dtype(dtype))
        object.__setattr__(self, "name", name)

    @classmethod
    def from_tensor(cls, tensor: Any, name: str | None = None) -> TensorSpec:
        """The spec of `tensor` (anything with a shape and a dtype).

        >>> sf.TensorSpec.from_tensor(sf.ones((2, 3)))
        TensorSpec(shape=(2, 3), dtype=float32)
        """
        return cls(tensor.shape, tensor.dtype, name)

    @property
    def shaped_type(self) -> ShapedType:
        if self.shape.rank is None:
            raise ValueError(f"{self} has unknown rank, and a traced value needs one: give "
                             f"the rank, None for dims of any size (sf.TensorSpec([None, "
                             f"None]))")
        return ShapedType(tuple(self.shape), self.dtype)

    def is_compatible_with(self, spec_or_value: Any) -> bool:
        """Whether `spec_or_value` (a spec, a tensor, an array) has this dtype and a shape
        compatible with this one: where both know a dim, they agree (TensorFlow's rule).

        >>> spec = sf.TensorSpec([None, 3])
        >>> spec.is_compatible_with(sf.ones((5, 3))), spec.is_compatible_with(sf.ones((5, 4)))
        (True, False)
        """
        dtype = getattr(spec_or_value, "dtype", None)
        return (dtype is not None and dtypes.as_dtype(dtype) == self.dtype
                and self.shape.is_compatible_with(TensorShape(spec_or_value.shape)))

    def __repr__(self) -> str:
        name = f", name={self.name!r}" if self.name else ""
        return f"TensorSpec(shape={format_shape(self.shape)}, dtype={self.dtype.name}{name})"
