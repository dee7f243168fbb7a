"""`sf.TensorShape`: what ``x.shape`` returns, a tuple of dims with TensorFlow's methods.

A tuple, so that everything written for tuples (``x.shape == (2, 3)``, unpacking,
``x.shape[-1]``, NumPy's shape arguments) keeps working, and TensorFlow's `TensorShape`
methods, which TensorFlow code calls daily (``x.shape.as_list()``, ``x.shape.rank``). Its
repr is the tuple's (TensorFlow's ``str``); a dim is an int, or None where it is known only
when the function runs.

A tensor's rank is always known: stageflow has no unknown-rank values. ``TensorShape(None)``,
TensorFlow's shape of unknown rank, exists for what describes tensors (``sf.TensorSpec(None)``,
a signature taking any rank): its ``rank`` is None, it is compatible with every shape, and
what needs the dims (``len``, iteration, ``as_list()``) raises ValueError, as in TensorFlow.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Iterator
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

    def __new__(cls, dims: Iterable[Any] | None = ()) -> TensorShape:
        if dims is None or isinstance(dims, _UnknownRank):
            return _UNKNOWN_RANK
        if isinstance(dims, int):
            dims = (dims,)
        return super().__new__(cls, (None if d is None else operator.index(d) for d in dims))

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return TensorShape(tuple.__getitem__(self, key))
        return tuple.__getitem__(self, key)

    @property
    def rank(self) -> int | None:
        """The number of dims (None for TensorFlow's shape of unknown rank)."""
        return len(self)

    ndims = rank

    @property
    def dims(self) -> list[int | None] | None:
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
        """Whether the shapes have the same rank and agree wherever both dims are known (a
        shape of unknown rank is compatible with every shape)."""
        other = TensorShape(other)
        if other.rank is None:
            return True
        return len(self) == len(other) and all(
            a is None or b is None or a == b for a, b in zip(self, other, strict=True))

    def merge_with(self, other: Iterable[Any]) -> TensorShape:
        """The shape both describe (a dim known in either is known); ValueError if they
        are not compatible."""
        other = TensorShape(other)
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        if other.rank is None:
            return self
        return TensorShape(a if a is not None else b for a, b in zip(self, other, strict=True))

    def concatenate(self, other: Iterable[Any]) -> TensorShape:
        """The dims of this shape, then those of `other` (of unknown rank if it is)."""
        other = TensorShape(other)
        return other if other.rank is None else TensorShape((*self, *other))

    def is_subtype_of(self, other: Iterable[Any]) -> bool:
        """Whether `other` describes every tensor this shape does: its rank is unknown, or
        it is this rank and each of its dims is None or this shape's.

        >>> known, partial = sf.TensorShape([2, 3]), sf.TensorShape([None, 3])
        >>> known.is_subtype_of(partial), partial.is_subtype_of(known)
        (True, False)
        """
        other = TensorShape(other)
        if other.rank is None:
            return True
        return len(self) == len(other) and all(
            b is None or a == b for a, b in zip(self, other, strict=True))

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


class _UnknownRank(TensorShape):
    """TensorFlow's shape of unknown rank, ``TensorShape(None)`` (the one instance).

    An empty tuple underneath, so the methods that would read it as the scalar shape ``()``
    are TensorFlow's here: ``len``, iteration and ``as_list()`` raise ValueError, indexing
    gives None (an unknown dim) or this shape, and it equals only itself.

    >>> shape = sf.TensorShape(None)
    >>> shape, shape.rank, shape.is_fully_defined(), shape.is_compatible_with([2, 3])
    (<unknown>, None, False, True)
    >>> shape.as_list()
    Traceback (most recent call last):
    ValueError: as_list() is not defined on an unknown TensorShape.
    """

    __slots__ = ()

    def __new__(cls) -> _UnknownRank:
        return tuple.__new__(cls, ())

    def __repr__(self) -> str:
        return "<unknown>"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _UnknownRank)

    def __ne__(self, other: object) -> bool:
        return not isinstance(other, _UnknownRank)

    def __hash__(self) -> int:
        return hash(_UnknownRank)

    def __bool__(self) -> bool:
        return False

    def __len__(self) -> int:
        raise ValueError("Cannot take the length of shape with unknown rank.")

    def __iter__(self) -> Iterator[int | None]:
        raise ValueError("Cannot iterate over a shape with unknown rank.")

    def __contains__(self, dim: object) -> bool:
        raise ValueError("Cannot search a shape with unknown rank.")

    def __getitem__(self, key: Any) -> Any:
        return self if isinstance(key, slice) else None

    def __add__(self, other: Any) -> TensorShape:
        return self

    def __radd__(self, other: Any) -> TensorShape:
        return self

    def __reduce__(self) -> tuple[Any, tuple]:
        return TensorShape, (None,)

    @property
    def rank(self) -> None:
        """None: the rank is unknown."""
        return None

    ndims = rank

    @property
    def dims(self) -> None:
        return None

    def as_list(self) -> list[int | None]:
        raise ValueError("as_list() is not defined on an unknown TensorShape.")

    def is_fully_defined(self) -> bool:
        return False

    def num_elements(self) -> None:
        return None

    def is_compatible_with(self, other: Iterable[Any]) -> bool:
        TensorShape(other)  # a check that `other` is a shape
        return True

    def merge_with(self, other: Iterable[Any]) -> TensorShape:
        return TensorShape(other)

    def concatenate(self, other: Iterable[Any]) -> TensorShape:
        return self

    def is_subtype_of(self, other: Iterable[Any]) -> bool:
        return TensorShape(other).rank is None

    def with_rank(self, rank: int) -> TensorShape:
        """A shape of `rank` unknown dims: all this shape says about a tensor of that rank."""
        return TensorShape([None] * rank)

    def assert_has_rank(self, rank: int) -> None:
        """Nothing to check: a tensor of unknown rank may have any."""

    def assert_is_fully_defined(self) -> None:
        raise ValueError("Shape <unknown> is not fully defined")


_UNKNOWN_RANK = _UnknownRank()
