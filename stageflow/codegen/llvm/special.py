"""The special functions of `primitives.special` on LLVM values: the same algorithms as the
eager kernels, computed in float64 and rounded once for float32, from instructions every
target lowers (`mathlib` supplies log, exp, sin and cos)."""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from stageflow.codegen.llvm import mathlib
from stageflow.codegen.llvm.emitter import F32, F64, Emitter
from stageflow.core.primitive import Primitive
from stageflow.primitives.special import ALGORITHMS


class _Value:
    """An LLVM float (or i1 mask) with Python's operators emitting instructions."""

    def __init__(self, e: Emitter, value: ir.Value) -> None:
        self.e, self.v = e, value

    def _other(self, other: Any) -> ir.Value:
        return other.v if isinstance(other, _Value) else self.e.like(self.v, float(other))

    def _op(self, method: str, other: Any, swap: bool = False) -> _Value:
        a, b = (self._other(other), self.v) if swap else (self.v, self._other(other))
        return _Value(self.e, getattr(self.e.b, method)(a, b))

    def __add__(self, other: Any) -> _Value:
        return self._op("fadd", other)

    def __radd__(self, other: Any) -> _Value:
        return self._op("fadd", other, swap=True)

    def __sub__(self, other: Any) -> _Value:
        return self._op("fsub", other)

    def __rsub__(self, other: Any) -> _Value:
        return self._op("fsub", other, swap=True)

    def __mul__(self, other: Any) -> _Value:
        return self._op("fmul", other)

    def __rmul__(self, other: Any) -> _Value:
        return self._op("fmul", other, swap=True)

    def __truediv__(self, other: Any) -> _Value:
        return self._op("fdiv", other)

    def __rtruediv__(self, other: Any) -> _Value:
        return self._op("fdiv", other, swap=True)

    def __neg__(self) -> _Value:
        return _Value(self.e, self.e.b.fneg(self.v))

    def _compare(self, op: str, other: Any) -> _Value:
        return _Value(self.e, self.e.b.fcmp_ordered(op, self.v, self._other(other)))

    def __lt__(self, other: Any) -> _Value:
        return self._compare("<", other)

    def __le__(self, other: Any) -> _Value:
        return self._compare("<=", other)

    def __gt__(self, other: Any) -> _Value:
        return self._compare(">", other)

    def __ge__(self, other: Any) -> _Value:
        return self._compare(">=", other)

    def __eq__(self, other: Any) -> _Value:  # type: ignore[override]
        return self._compare("==", other)

    def __and__(self, other: _Value) -> _Value:
        return _Value(self.e, self.e.b.and_(self.v, other.v))

    def __or__(self, other: _Value) -> _Value:
        return _Value(self.e, self.e.b.or_(self.v, other.v))

    def __invert__(self) -> _Value:
        return _Value(self.e, self.e.b.not_(self.v))

    __hash__ = None  # type: ignore[assignment]


class _LLVMMath:
    """`primitives.special.Math` emitting into one kernel."""

    def __init__(self, e: Emitter) -> None:
        self.e = e

    def _wrap(self, value: ir.Value) -> _Value:
        return _Value(self.e, value)

    def const(self, like: _Value, value: float) -> _Value:
        return self._wrap(self.e.like(like.v, value))

    def select(self, mask: _Value, a: _Value, b: _Value) -> _Value:
        return self._wrap(self.e.select(mask.v, a.v, b.v))

    def floor(self, x: _Value) -> _Value:
        return self._wrap(self.e.call("floor", x.v))

    def fabs(self, x: _Value) -> _Value:
        return self._wrap(self.e.call("fabs", x.v))

    def copysign(self, x: _Value, sign: _Value) -> _Value:
        return self._wrap(self.e.call("copysign", x.v, sign.v))

    def sqrt(self, x: _Value) -> _Value:
        return self._wrap(self.e.call("sqrt", x.v))

    def log(self, x: _Value) -> _Value:
        return self._wrap(mathlib.log(self.e, x.v))

    def exp(self, x: _Value) -> _Value:
        return self._wrap(mathlib.exp(self.e, x.v))

    def sin(self, x: _Value) -> _Value:
        return self._wrap(mathlib.sin(self.e, x.v))

    def cos(self, x: _Value) -> _Value:
        return self._wrap(mathlib.cos(self.e, x.v))

    def isnan(self, x: _Value) -> _Value:
        return self._wrap(self.e.is_nan(x.v))

    def poly(self, x: _Value, coefficients: tuple[float, ...]) -> _Value:
        return self._wrap(self.e.poly(x.v, coefficients))


def evaluate(e: Emitter, primitive: Primitive, *args: ir.Value) -> ir.Value:
    """The special function `primitive` of float32/float64 values (computed in float64,
    rounded once to their type); complex lowerings call it for their arguments' angles."""
    m = _LLVMMath(e)
    narrow = args[0].type == F32
    wide = [_Value(e, e.b.fpext(a, F64) if narrow else a) for a in args]
    result = ALGORITHMS[primitive](m, *wide).v
    return e.b.fptrunc(result, F32) if narrow else result


def special(primitive: Primitive):  # noqa: ANN201 - a lowering rule (`kernels.rules.Rule`)
    """The rule lowering the special function `primitive` on float32/float64 operands."""

    def rule(e: Emitter, node: Any) -> ir.Value:
        return evaluate(e, primitive, *node.args)
    return rule


__all__ = ["evaluate", "special"]
