"""A fused convolution's epilogue (`primitives.fused_conv`) where its sums are stored.

The gemm's tiles and the direct loops hold a block of output pixels by a few vectors of
output channels in registers until the last term; where an epilogue is given they apply it
there, before the store, so the result is written once and never read back: each vector
multiplied by its channels' scales, plus their shifts, times their second scales, plus
their second shifts, plus the residual's same elements, then the ReLU, each step only
where its operand is given (a null pointer: not).

An `Epilogue` is six values of the generated code: the per-channel operands' pointers at
the first output channel of the block of columns the code computes, the residual's
pointer at the block's first element (the residual is laid out as the output, so the
block's rows lie as far apart in it), and whether to apply the ReLU. Each function that
stores sums takes them as arguments (`TYPES`); `NONE` is no epilogue, for every other
caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.emitter import I1, I32
from stageflow.codegen.llvm.functions import declare
from stageflow.codegen.llvm.loops import values_where
from stageflow.primitives.fused_conv import EPILOGUE_OPERANDS, EPILOGUE_STEPS

PTR = ir.PointerType()
NULL = ir.Constant(PTR, None)


@dataclass(frozen=True)
class Epilogue:
    """The pointers of the steps' operands at a block of the output, in the order of
    `fused_conv.EPILOGUE_OPERANDS` (each null where the op has none), and the ReLU's
    flag."""

    pointers: tuple[ir.Value, ...]
    relu: ir.Value

    @classmethod
    def of(cls, values: list[ir.Value]) -> Epilogue:
        """The epilogue a function takes as its arguments `values` (of `TYPES`)."""
        return cls(tuple(values[:-1]), values[-1])

    @property
    def residual(self) -> ir.Value:
        return self.pointers[EPILOGUE_OPERANDS.index("residual")]

    def arguments(self) -> list[ir.Value]:
        return [*self.pointers, self.relu]

    def any(self, b: ir.IRBuilder) -> ir.Value:
        """Whether there is anything to apply."""
        flag = self.relu
        for pointer in self.pointers:
            flag = b.or_(flag, b.icmp_unsigned("!=", pointer, NULL))
        return flag

    def where(self, b: ir.IRBuilder, condition: ir.Value) -> Epilogue:
        """This epilogue where `condition` holds, else none."""
        return Epilogue(tuple(b.select(condition, p, NULL) for p in self.pointers),
                        b.and_(condition, self.relu))

    def at(self, b: ir.IRBuilder, element: ir.Type, column: ir.Value,
           offset: ir.Value) -> Epilogue:
        """The epilogue of the block whose first element is `column` of a row and lies
        `offset` elements past the output's first (null pointers stay null)."""

        def moved(pointer: ir.Value, by: ir.Value) -> ir.Value:
            return b.select(b.icmp_unsigned("==", pointer, NULL), NULL,
                            b.gep(pointer, [by], source_etype=element))

        return Epilogue(tuple(moved(pointer, column if EPILOGUE_STEPS[name][1] else offset)
                              for name, pointer in zip(EPILOGUE_OPERANDS, self.pointers,
                                                       strict=True)), self.relu)

    def prefetch(self, b: ir.IRBuilder, condition: ir.Value, output: ir.Value,
                 elements: list[ir.Value], element: ir.Type) -> None:
        """Start reading the cache lines at `elements` past the block's first element
        before the sums are computed: the residual's where `condition` holds and there is
        one, else the output's own (`output`, the block's first element), which the sums
        are stored into next. Read as the sums are stored, a tile's residual came from
        memory while the tile waited, which a tile of few terms could not hide. No branch:
        one around the prefetches, before a tile's loop of terms, slowed every gemm, those
        without an epilogue too."""
        prefetch = declare(b.module, "llvm.prefetch.p0", ir.VoidType(), [PTR, I32, I32, I32])
        given = b.and_(condition, b.icmp_unsigned("!=", self.residual, NULL))
        base = b.select(given, self.residual, output)
        for offset in elements:
            b.call(prefetch, [b.gep(base, [offset], source_etype=element),
                              ir.Constant(I32, 0), ir.Constant(I32, 3), ir.Constant(I32, 1)])

    def apply(self, b: ir.IRBuilder, sums: list[ir.Value],
              channels: list[ir.Value], elements: list[ir.Value],
              load: Callable[[ir.Value], ir.Value], element: ir.Type) -> list[ir.Value]:
        """`sums` through the epilogue: sum i's channels start `channels[i]` elements past
        the block's first column, its residual elements `elements[i]` past the block's
        first element; `load` reads a vector at a pointer (masked as the store is)."""

        def at(pointer: ir.Value, offset: ir.Value) -> ir.Value:
            return b.gep(pointer, [offset], source_etype=element)

        def step(pointer: ir.Value, offsets: list[ir.Value],
                 combine: Callable[[ir.Value, ir.Value], ir.Value],
                 values: list[ir.Value]) -> list[ir.Value]:
            return values_where(b, b.icmp_unsigned("!=", pointer, NULL), values, lambda: [
                combine(value, load(at(pointer, offset)))
                for value, offset in zip(values, offsets, strict=True)])

        for name, pointer in zip(EPILOGUE_OPERANDS, self.pointers, strict=True):
            operation, per_channel = EPILOGUE_STEPS[name]
            sums = step(pointer, channels if per_channel else elements,
                        b.fmul if operation is np.multiply else b.fadd, sums)
        vector = sums[0].type
        zeros = ir.Constant(vector, [0.0] * vector.count)
        # relu's own rule: x where x > 0 or x is NaN (unordered), else +0.
        return values_where(b, self.relu, sums, lambda: [
            b.select(b.fcmp_unordered(">", value, zeros), value, zeros) for value in sums])


TYPES = [PTR] * len(EPILOGUE_OPERANDS) + [I1]
NAMES = [*EPILOGUE_OPERANDS, "rectify"]  # the arguments' names
NONE = Epilogue((NULL,) * len(EPILOGUE_OPERANDS), ir.Constant(I1, 0))
