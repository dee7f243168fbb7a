"""`sf.TensorShape`: what ``x.shape`` returns, a tuple of dims with TensorFlow's methods.

A tuple, so that everything written for tuples (``x.shape == (2, 3)``, unpacking,
``x.shape[-1]``, NumPy's shape arguments) keeps working, and TensorFlow's `TensorShape`
methods, which TensorFlow code calls daily (``x.shape.as_list()``, ``x.shape.rank``). Its
repr is the tuple's (TensorFlow's ``str``); a dim is an int, or None where it is known only
when the function runs. The rank is always known: stageflow has no unknown-rank values.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable
from typing import Any

__all__ = ["TensorShape"]


class TensorShape(tuple):
    """A shape: ``sf.TensorShape([None, 3])``, or a tensor's ``x.shape``.

    >>> shape = sf.TensorShape([None, 3])
    >>> shape.as_list(), shape.rank, shape.is_fully_defined()
    ([None, 3], 2, False)
    >>> shape.merge_with([8, None])
    (8, 3)
    >>> sf.ones((2, 3)).shape.num_elements()
    6
    >>> sf.ones((2, 3, 4)).shape[1:].as_list()
    [3, 4]
    """

    __slots__ = ()

    def __new__(cls, dims: Iterable[Any] = ()) -> TensorShape:
        if dims is None:
            raise ValueError("sf.TensorShape(None): a shape of unknown rank; stageflow's "
                             "values always have a known rank: give the dims, None where a "
                             "dim is unknown")
        if isinstance(dims, int):
            dims = (dims,)
        return super().__new__(cls, (None if d is None else operator.index(d) for d in dims))

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return TensorShape(tuple.__getitem__(self, key))
        return tuple.__getitem__(self, key)

    @property
    def rank(self) -> int:
        """The number of dims."""
        return len(self)

    ndims = rank

    @property
    def dims(self) -> list[int | None]:
        return list(self)

    def as_list(self) -> list[int | None]:
        """The dims as a list (None for unknown ones)."""
        return list(self)

    def is_fully_defined(self) -> bool:
        """Whether every dim is known."""
        return all(d is not None for d in self)

    def num_elements(self) -> int | None:
        """The number of elements, None when a dim is unknown."""
        return math.prod(self) if self.is_fully_defined() else None

    def is_compatible_with(self, other: Iterable[Any]) -> bool:
        """Whether the shapes have the same rank and agree wherever both dims are known."""
        other = TensorShape(other)
        return len(self) == len(other) and all(
            a is None or b is None or a == b for a, b in zip(self, other, strict=True))

    def merge_with(self, other: Iterable[Any]) -> TensorShape:
        """The shape both describe (a dim known in either is known); ValueError if they
        are not compatible."""
        other = TensorShape(other)
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        return TensorShape(a if a is not None else b for a, b in zip(self, other, strict=True))

    def concatenate(self, other: Iterable[Any]) -> TensorShape:
        """The dims of this shape, then those of `other`."""
        return TensorShape((*self, *TensorShape(other)))

    def with_rank(self, rank: int) -> TensorShape:
        """This shape, after checking that it has `rank` dims (ValueError otherwise)."""
        if len(self) != rank:
            raise ValueError(f"Shape {self} must have rank {rank}")
        return self

    def assert_has_rank(self, rank: int) -> None:
        self.with_rank(rank)

    def assert_is_compatible_with(self, other: Iterable[Any]) -> None:
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {TensorShape(other)} are incompatible")

    def assert_is_fully_defined(self) -> None:
        if not self.is_fully_defined():
            raise ValueError(f"Shape {self} is not fully defined")
