"""Dim arithmetic: the dims part of every shape rule, written once and interpreted twice.

A primitive's ``dims`` function computes its result's dims from its operands' dims through a
`DimArith`, never with Python operators, so the same function serves two interpreters:

- `PYTHON`, on ints while tracing, where an unknown dim is ``None`` and arithmetic with an
  unknown gives an unknown (broadcasting decides otherwise: a known dim other than 1 wins);
  the shape rules call it after their dtype and consistency checks;
- the LLVM interpreter of the whole-function program (`codegen.llvm.dim_arith`), which emits i64
  arithmetic for the dims known only at run time and folds the static ones.

Nothing is checked here: mismatched operands are the shape rules' to reject while tracing
and the kernels' at run time. So `first_not_one` and `same` trust that the dims they get
agree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

D = TypeVar("D")
Cond = TypeVar("Cond")

Dim = int | None


class DimArith(Protocol[D, Cond]):
    """The operations a dims function may apply to dims (`D`) and conditions (`Cond`)."""

    def const(self, n: int | None) -> D:
        """A dim given by a param; None (a param left open) is a dim unknown until run time."""

    def add(self, x: D, y: D) -> D: ...

    def sub(self, x: D, y: D) -> D: ...

    def mul(self, x: D, y: D) -> D: ...

    def floordiv(self, x: D, n: int) -> D:
        """``x // n`` for a positive `n`; only exact for ``x >= 0`` (LLVM divides rounding
        to zero), so a negative `x` must be discarded by a `select`."""

    def max(self, x: D, y: D) -> D: ...

    def min(self, x: D, y: D) -> D: ...

    def lt(self, x: D, y: D) -> Cond: ...

    def gt(self, x: D, y: D) -> Cond: ...

    def select(self, cond: Cond, x: D, y: D) -> D: ...

    def first_not_one(self, dims: Sequence[D]) -> D:
        """The broadcast of `dims` along one axis: the first that is not 1 (1 if all are)."""

    def same(self, dims: Sequence[D]) -> D:
        """One of `dims` that the op requires equal, the best known of them."""


# ``dims(d, operand dims, **params) -> result dims`` of a single-result primitive (resource
# operands have ``[]``). Functions take the params they need by name and ignore the others.
DimsRule = Callable[..., list[Any]]


class PythonDims:
    """`DimArith` on ints, ``None`` standing for an unknown dim (or condition)."""

    def const(self, n: int | None) -> Dim:
        return n

    def add(self, x: Dim, y: Dim) -> Dim:
        return None if x is None or y is None else x + y

    def sub(self, x: Dim, y: Dim) -> Dim:
        return None if x is None or y is None else x - y

    def mul(self, x: Dim, y: Dim) -> Dim:
        return None if x is None or y is None else x * y

    def floordiv(self, x: Dim, n: int) -> Dim:
        return None if x is None else x // n

    def max(self, x: Dim, y: Dim) -> Dim:
        return None if x is None or y is None else max(x, y)

    def min(self, x: Dim, y: Dim) -> Dim:
        return None if x is None or y is None else min(x, y)

    def lt(self, x: Dim, y: Dim) -> bool | None:
        return None if x is None or y is None else x < y

    def gt(self, x: Dim, y: Dim) -> bool | None:
        return None if x is None or y is None else x > y

    def select(self, cond: bool | None, x: Dim, y: Dim) -> Dim:
        return None if cond is None else x if cond else y

    def first_not_one(self, dims: Sequence[Dim]) -> Dim:
        """A known dim other than 1 decides (the others must be 1 or equal to it); failing
        one, an unknown dim leaves the axis unknown."""
        unknown = False
        for dim in dims:
            if dim is None:
                unknown = True
            elif dim != 1:
                return dim
        return None if unknown else 1

    def same(self, dims: Sequence[Dim]) -> Dim:
        return next((dim for dim in dims if dim is not None), None)


PYTHON = PythonDims()


def broadcast_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]]) -> list[D]:
    """NumPy broadcasting of the operands' dims, aligned at the right: the dims function of
    the elementwise ops, and of matmul's batch dims."""
    rank = max(map(len, operands), default=0)
    if rank == 0:
        return []
    return [d.first_not_one([dims[axis - rank + len(dims)] for dims in operands
                             if axis - rank + len(dims) >= 0])
            for axis in range(rank)]


def same_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], **_: object) -> list[D]:
    """The result has the first operand's dims (unary elementwise ops, casts, ...)."""
    return list(operands[0])
