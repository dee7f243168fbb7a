"""Lowering of `sort`: a stable bottom-up merge sort of positions along the axis, per line.

Why merge sort: it is stable without a tie-break (equal keys keep their input order, which
the NumPy kernel's ``kind="stable"`` also gives), runs in n log n on every input, and needs
no recursion: passes of doubling width merge runs of positions from one scratch buffer
into the other. The keys are compared where they lie (strided), NaN after every number
ascending and before every number descending; only positions move. The last pass's buffer
then gathers the keys and the payloads into the outputs and gives the permutation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.emitter import I32, I64, Emitter
from stageflow.codegen.llvm.functions import declare
from stageflow.codegen.llvm.loops import (
    counted_loop,
    fold_loop,
    fold_mul,
    i64,
    return_unless,
    while_loop,
)
from stageflow.codegen.lowered.rule import OpBuilder, Operand, OpSpec, lowering, nest, smaller
from stageflow.core import dtypes
from stageflow.primitives.sorting import sort_p

_PTR = ir.PointerType()
_KEYS = (*dtypes.FLOATING, *dtypes.INTEGER)


@dataclass(frozen=True)
class Sort:
    axis: int
    descending: bool
    dtype: np.dtype

    def _before(self, b: ir.IRBuilder, u: ir.Value, v: ir.Value) -> ir.Value:
        """Whether key `u` goes strictly before key `v`."""
        if self.dtype in dtypes.FLOATING:  # (half-precision keys compared as float32)
            if self.descending:
                return b.or_(b.fcmp_ordered(">", u, v),
                             b.and_(b.fcmp_unordered("uno", u, u), b.fcmp_ordered("ord", v, v)))
            return b.or_(b.fcmp_ordered("<", u, v),
                         b.and_(b.fcmp_unordered("uno", v, v), b.fcmp_ordered("ord", u, u)))
        compare = b.icmp_unsigned if self.dtype.kind == "u" else b.icmp_signed
        return compare(">" if self.descending else "<", u, v)

    def emit(self, ob: OpBuilder) -> None:
        b = ob.b
        keys, payloads = ob.inputs[0], ob.inputs[1:]
        for index in range(len(ob.outputs)):
            ob.expect_output(index, keys.dims)
        for position, payload in enumerate(payloads, 1):
            ob.fail_unless(ob.all_of([ob.eq(have, want) for have, want in
                                      zip(payload.dims, keys.dims, strict=True)]), position)
        n = keys.dims[self.axis]
        malloc = declare(b.module, "malloc", _PTR, [I64])
        free = declare(b.module, "free", ir.VoidType(), [_PTR])
        scratch = b.call(malloc, [b.add(fold_mul(b, n, i64(16)), i64(16))])
        return_unless(b, b.icmp_unsigned("!=", scratch, ir.Constant(_PTR, None)),
                      ir.Constant(I32, len(ob.inputs) + len(ob.outputs) + 1))
        first = scratch
        second = b.gep(scratch, [n], source_etype=I64)
        others = [d for a, d in enumerate(keys.dims) if a != self.axis]
        e = Emitter(b)

        def line(at: list[ir.Value]) -> None:
            def at_position(position: ir.Value) -> list[ir.Value]:
                return [*at[: self.axis], position, *at[self.axis:]]

            def key(position: ir.Value) -> ir.Value:
                return e.load(keys.address(b, keys.offset(b, at_position(position))),
                              self.dtype)

            counted_loop(b, i64(0), n, i64(1),
                         lambda i: b.store(i, b.gep(first, [i], source_etype=I64)), "init")

            def one_pass(state: list[ir.Value]) -> list[ir.Value]:
                width, source, target = state
                self._merge_runs(b, n, width, source, target, key)
                return [b.mul(width, i64(2)), target, source]

            _, ordered, _ = while_loop(b, [i64(1), first, second],
                                   lambda state: b.icmp_signed("<", state[0], n), one_pass,
                                   "pass")
            self._gather(b, ob, n, ordered, at_position)

        nest(b, others, line)
        b.call(free, [scratch])

    def _merge_runs(self, b: ir.IRBuilder, n: ir.Value, width: ir.Value, source: ir.Value,
                    target: ir.Value, key: Callable[[ir.Value], ir.Value]) -> None:
        """Merge each pair of sorted runs of `width` positions from `source` into `target`."""

        def merge(lo: ir.Value) -> None:
            mid = smaller(b, b.add(lo, width), n)
            end = smaller(b, b.add(mid, width), n)

            def position(buffer: ir.Value, k: ir.Value) -> ir.Value:
                return b.load(b.gep(buffer, [k], source_etype=I64), typ=I64)

            def step(k: ir.Value, carried: list[ir.Value]) -> list[ir.Value]:
                p, q = carried
                left_open = b.icmp_signed("<", p, mid)
                right_open = b.icmp_signed("<", q, end)
                from_left = position(source, b.select(left_open, p, lo))
                from_right = position(source, b.select(right_open, q, lo))
                right_first = self._before(b, key(from_right), key(from_left))
                take_left = b.and_(left_open, b.or_(b.not_(right_open), b.not_(right_first)))
                b.store(b.select(take_left, from_left, from_right),
                        b.gep(target, [k], source_etype=I64))
                step_left = b.zext(take_left, I64)
                return [b.add(p, step_left), b.add(q, b.sub(i64(1), step_left))]

            fold_loop(b, lo, end, i64(1), [lo, mid], step, "merge")

        counted_loop(b, i64(0), n, b.mul(width, i64(2)), merge, "run")

    def _gather(self, b: ir.IRBuilder, ob: OpBuilder, n: ir.Value, ordered: ir.Value,
                at_position: Callable[[ir.Value], list[ir.Value]]) -> None:
        keys, payloads = ob.inputs[0], ob.inputs[1:]
        out_keys, permutation, *out_payloads = ob.outputs

        def copy(source: Operand, target: Operand, j: ir.Value, p: ir.Value) -> None:
            value = b.load(source.address(b, source.offset(b, at_position(p))),
                           typ=source.element)
            b.store(value, target.address(b, target.offset(b, at_position(j))))

        def write(j: ir.Value) -> None:
            p = b.load(b.gep(ordered, [j], source_etype=I64), typ=I64)
            copy(keys, out_keys, j, p)
            b.store(b.trunc(p, I32), permutation.address(b, permutation.offset(
                b, at_position(j))))
            for source, target in zip(payloads, out_payloads, strict=True):
                copy(source, target, j, p)

        counted_loop(b, i64(0), n, i64(1), write, "gather")


@lowering(sort_p)
def _sort(spec: OpSpec) -> Sort | None:
    dtype = spec.inputs[0].dtype
    if dtype not in _KEYS:
        return None
    return Sort(spec.params["axis"] % spec.inputs[0].ndim, bool(spec.params["descending"]),
                dtype)
