"""The primitives' dims functions interpreted as LLVM i64 arithmetic (`LLVMDims`).

Static dims are ``ir.Constant``s and fold through every operation, so a function whose
types are static emits no instruction; folding covers at least what the Python
interpretation knows while tracing (a dim the result type fixes is a constant here too).
Conditions are ``i1`` values, or Python bools where they fold.
"""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

from stageflow.codegen.llvm.loops import fold_add, fold_mul, i64

Cond = ir.Value | bool


def _is(value: ir.Value, n: int) -> bool:
    return isinstance(value, ir.Constant) and value.constant == n


def _both_constant(x: ir.Value, y: ir.Value) -> bool:
    return isinstance(x, ir.Constant) and isinstance(y, ir.Constant)


class LLVMDims:
    """`stageflow.core.dims.DimArith` emitting i64 instructions at `b`'s position."""

    def __init__(self, b: ir.IRBuilder) -> None:
        self.b = b

    def const(self, n: int | None) -> ir.Value:
        if n is None:
            raise NotImplementedError("a dim that a param leaves unknown has no run-time "
                                      "value to compute")
        return i64(n)

    def add(self, x: ir.Value, y: ir.Value) -> ir.Value:
        if _both_constant(x, y):
            return i64(x.constant + y.constant)
        return fold_add(self.b, x, y)

    def sub(self, x: ir.Value, y: ir.Value) -> ir.Value:
        if _both_constant(x, y):
            return i64(x.constant - y.constant)
        return x if _is(y, 0) else self.b.sub(x, y)

    def mul(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return fold_mul(self.b, x, y)

    def floordiv(self, x: ir.Value, n: int) -> ir.Value:
        if isinstance(x, ir.Constant):
            return i64(x.constant // n)
        return x if n == 1 else self.b.sdiv(x, i64(n))

    def max(self, x: ir.Value, y: ir.Value) -> ir.Value:
        if _both_constant(x, y):
            return i64(max(x.constant, y.constant))
        return self.b.select(self.b.icmp_signed(">", x, y), x, y)

    def min(self, x: ir.Value, y: ir.Value) -> ir.Value:
        if _both_constant(x, y):
            return i64(min(x.constant, y.constant))
        return self.b.select(self.b.icmp_signed("<", x, y), x, y)

    def lt(self, x: ir.Value, y: ir.Value) -> Cond:
        if _both_constant(x, y):
            return x.constant < y.constant
        return self.b.icmp_signed("<", x, y)

    def gt(self, x: ir.Value, y: ir.Value) -> Cond:
        if _both_constant(x, y):
            return x.constant > y.constant
        return self.b.icmp_signed(">", x, y)

    def select(self, cond: Cond, x: ir.Value, y: ir.Value) -> ir.Value:
        if isinstance(cond, bool):
            return x if cond else y
        return self.b.select(cond, x, y)

    def first_not_one(self, dims: Sequence[ir.Value]) -> ir.Value:
        """A constant other than 1 decides at compile time (the operands agree or the op
        fails); otherwise one ``select`` per unknown candidate, the first not 1 winning."""
        known = next((d for d in dims if isinstance(d, ir.Constant) and d.constant != 1), None)
        if known is not None:
            return known
        result: ir.Value = i64(1)
        for dim in reversed(dims):
            if isinstance(dim, ir.Constant):
                continue  # a 1
            if _is(result, 1):  # `dim if dim != 1 else 1` is `dim`
                result = dim
            elif dim is not result:
                result = self.b.select(self.b.icmp_signed("!=", dim, i64(1)), dim, result)
        return result

    def same(self, dims: Sequence[ir.Value]) -> ir.Value:
        return next((d for d in dims if isinstance(d, ir.Constant)), dims[0])
