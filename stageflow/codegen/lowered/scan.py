"""Lowering of the scans `cumsum` and `cumprod`: for every line along the axis (the other
dims' loops outside), one sequential loop carrying the running value, storing it (or,
exclusive, the value before the element) at each position, forwards or reversed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.emitter import storage_type
from stageflow.codegen.llvm.loops import fold_loop, i64
from stageflow.codegen.lowered.rule import OpBuilder, OpSpec, lowering, nest
from stageflow.core import dtypes
from stageflow.primitives.scan import cumprod_p, cumsum_p

_NATIVE = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64)


@dataclass(frozen=True)
class Scan:
    axis: int
    product: bool
    exclusive: bool
    reverse: bool
    dtype: np.dtype

    def emit(self, ob: OpBuilder) -> None:
        b, x, out = ob.b, ob.inputs[0], ob.outputs[0]
        ob.expect_output(0, x.dims)
        ty = storage_type(self.dtype)
        floating = self.dtype.kind == "f"
        start = (ir.Constant(ty, 1.0 if self.product else 0.0) if floating
                 else ir.Constant(ty, 1 if self.product else 0))
        others = [d for a, d in enumerate(x.dims) if a != self.axis]
        n = x.dims[self.axis]

        def line(at: list[ir.Value]) -> None:
            def step(k: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
                position = b.sub(b.sub(n, i64(1)), k) if self.reverse else k
                index = [*at[: self.axis], position, *at[self.axis:]]
                value = b.load(x.address(b, x.offset(b, index)), typ=x.element)
                before = carried[0]
                if self.product:
                    after = b.fmul(before, value) if floating else b.mul(before, value)
                else:
                    after = b.fadd(before, value) if floating else b.add(before, value)
                b.store(before if self.exclusive else after,
                        out.address(b, out.offset(b, index)))
                return [after]

            fold_loop(b, i64(0), n, i64(1), [start], step, "scan")

        nest(b, others, line)


@lowering(cumsum_p, cumprod_p)
def _scan(spec: OpSpec) -> Scan | None:
    dtype = spec.inputs[0].dtype
    if dtype not in _NATIVE:
        return None
    params = spec.params
    return Scan(params["axis"] % spec.inputs[0].ndim, spec.primitive is cumprod_p,
                bool(params["exclusive"]), bool(params["reverse"]), dtype)
