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

from stageflow.codegen.llvm.emitter import I1, I32, I64
from stageflow.codegen.llvm.functions import declare, entry_alloca, memcpy
from stageflow.codegen.llvm.loops import i64, values_where
from stageflow.codegen.lowered.rule import OpBuilder, is_row_major
from stageflow.primitives.conv import conv2d_p
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


class FusedOperands:
    """What a convolution that may take an epilogue passes its family's shared code, which
    `conv2d` and `conv2d_fused` (of a dtype) share: the data pointers x, w, the output,
    then the epilogue's operands' (`read` loads them there), and the dims of x, w and the
    output (the operands' between them left out). `extras` (a dataclass field of the
    family) names the op's operands after the filters."""

    extras: tuple[str, ...]

    def _family(self, ob: OpBuilder) -> str:
        return conv2d_p.name

    def _data(self, ob: OpBuilder, data: ir.Value) -> ir.Value:
        """x, w and the output's pointers, then the epilogue's operands' (null where the op
        has none), once they are of the dims the result and the filters imply (else that
        operand's code): scales and shifts one per output channel, the residual the
        result's, each row-major."""
        b = ob.b
        out, o = ob.outputs[0], self._out_channels(ob)
        pointers = [ob.inputs[0].pointer, ob.inputs[1].pointer, out.pointer]
        for name in EPILOGUE_OPERANDS:
            if name not in self.extras:
                pointers.append(NULL)
                continue
            index = 2 + self.extras.index(name)
            operand = ob.inputs[index]
            want = [o] if EPILOGUE_STEPS[name][1] else out.dims
            ob.fail_unless(ob.all_of([*(ob.eq(d, e) for d, e in zip(operand.dims, want,
                                                                    strict=True)),
                                      is_row_major(ob, operand)]), index)
            pointers.append(operand.pointer)
        array = entry_alloca(b, PTR, len(pointers), "operands")
        for k, pointer in enumerate(pointers):
            b.store(pointer, b.gep(array, [i64(k)], source_etype=PTR))
        return array

    def _out_channels(self, ob: OpBuilder) -> ir.Value:
        """The filters' output channels, as the entry sees them."""
        return ob.inputs[1].dims[3]

    def _operand_dims(self, ob: OpBuilder, dims: ir.Value, given: ir.Value,
                      strides: ir.Value) -> ir.Value:
        """x's and w's dims, then the output's (after the epilogue's operands' dims)."""
        b = ob.b
        memcpy(b, dims, given, i64(8 * 8))
        extra = sum(len(operand.dims) for operand in ob.inputs[2:])
        memcpy(b, b.gep(dims, [i64(8)], source_etype=I64),
               b.gep(given, [i64(8 + extra)], source_etype=I64), i64(4 * 8))
        return strides


def read(ob: OpBuilder, relu: ir.Value) -> Epilogue:
    """A conv's epilogue at its output's first element, in its family's shared code: its
    operands' pointers after x, w and the output in the data (`FusedOperands._data`), the
    ReLU's flag `relu` (the geometry's)."""
    b, data = ob.b, ob.arguments[0]
    return Epilogue(tuple(b.load(b.gep(data, [i64(3 + k)], source_etype=PTR), typ=PTR)
                          for k in range(len(EPILOGUE_OPERANDS))), relu)


TYPES = [PTR] * len(EPILOGUE_OPERANDS) + [I1]
NAMES = [*EPILOGUE_OPERANDS, "rectify"]  # the arguments' names
NONE = Epilogue((NULL,) * len(EPILOGUE_OPERANDS), ir.Constant(I1, 0))
