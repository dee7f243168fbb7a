"""Lowering of `pow` on signed integers, which refuses negative exponents.

NumPy raises for an integer raised to a negative integer power ("Integers to negative
integer powers are not allowed"), and so does eager execution. A kernel cannot refuse one
element of many, so `pow` of signed integers is never fused (`Primitive.refuses`): this op
computes it alone, by the kernels' square-and-multiply rule, and returns an error code at
the first negative exponent; the NumPy kernel then runs and raises NumPy's error, as it does
for a reduction over an empty axis. Operands broadcast as NumPy's do, any strides.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from stageflow.codegen.kernels.rules import RULES, Node
from stageflow.codegen.llvm.emitter import Emitter
from stageflow.codegen.llvm.loops import i64
from stageflow.codegen.lowered.rule import OpBuilder, OpSpec, dot, lowering, nest
from stageflow.core import dtypes
from stageflow.primitives.elementwise import pow_p


@dataclass(frozen=True)
class IntegerPower:
    """``x ** y`` elementwise, refusing ``y < 0``."""

    dtype: np.dtype

    def emit(self, ob: OpBuilder) -> None:
        b, out = ob.b, ob.outputs[0]
        rank = len(out.dims)
        strides, sizes = [], []
        for operand in ob.inputs:
            pad = rank - len(operand.dims)
            dims = [i64(1)] * pad + list(operand.dims)
            steps = [i64(0)] * pad + list(operand.strides)
            sizes.append(dims)
            strides.append([b.select(ob.eq(d, i64(1)), i64(0), s)
                            for d, s in zip(dims, steps, strict=True)])
        broadcast = [b.select(ob.eq(dx, i64(1)), dy, dx)
                     for dx, dy in zip(*sizes, strict=True)]
        for index, dims in enumerate(sizes):
            ob.fail_unless(ob.all_of([b.or_(ob.eq(d, i64(1)), ob.eq(d, o))
                                      for d, o in zip(dims, broadcast, strict=True)]), index)
        ob.expect_output(0, broadcast)
        e = Emitter(b)
        power = RULES[pow_p]

        def element(at: list[ir.Value]) -> None:
            x, y = (e.load(operand.address(b, dot(b, at, steps)), self.dtype)
                    for operand, steps in zip(ob.inputs, strides, strict=True))
            ob.fail_unless(b.icmp_signed(">=", y, e.like(y, 0)), 1)
            value = power(e, Node((x, y), (self.dtype, self.dtype), self.dtype))
            e.store(value, out.address(b, dot(b, at, out.strides)), self.dtype)

        nest(b, broadcast, element, "element")


@lowering(pow_p, generic=True)
def _integer_power(spec: OpSpec) -> IntegerPower | None:
    dtype = spec.inputs[0].dtype
    return IntegerPower(dtype) if dtype in dtypes.SIGNED else None
