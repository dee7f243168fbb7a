"""`simplify`: algebraic identities and op chains rewritten to fewer, cheaper ops.

Traced code is written for readability, not for the compiler: ``x * 1.0`` from a default
scale, ``reshape(reshape(x))`` and ``transpose(transpose(x))`` from layer glue, casts to
the dtype a tensor already has, constants broadcast to a full shape before an elementwise
op, broadcasts (from gradients of broadcasting ops) feeding ops that broadcast anyway.
Each rule is an xDSL `RewritePattern`, applied to a fixed point by a
`PatternRewriteWalker`, and each one only replaces a value by a value of exactly the same
type (dims included): ``x + 0`` where the zeros broadcast ``x`` to a bigger shape stays.

The arithmetic rules are exact in IEEE arithmetic: ``x * 0`` is folded only for integers
(``inf * 0`` and ``NaN * 0`` are NaN), and ``x + 0.0`` only with ``no-signed-zeros``
(``-0.0 + 0.0`` is ``+0.0``; ``x + -0.0`` and ``x - 0.0`` are always ``x``). The shape rules
are in `simplify_shapes`, the ones moving transposes to where they meet and cancel in
`simplify_layouts` (across elementwise ops, concats, slices, pads) and `simplify_regroup`
(across a reshape, to the transpose on its other side), the rules that see through region
ops in `simplify_regions`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from stageflow.core import dtypes
from stageflow.core.primitive import ShapedType
from stageflow.ir.builder import build_constant, build_op
from stageflow.ir.dialect import BinaryElementwiseOp, SfOp, TernaryElementwiseOp
from stageflow.ir.types import AbstractValue, abstract_value, ir_type, shaped_type
from stageflow.passes.registry import register_pass
from stageflow.passes.simplify_layouts import LAYOUT_PATTERNS
from stageflow.passes.simplify_regions import REGION_PATTERNS
from stageflow.passes.simplify_regroup import REGROUP_PATTERNS
from stageflow.passes.simplify_shapes import SHAPE_PATTERNS, replace_by
from stageflow.passes.support import (
    constant_array,
    erase_dead_producers,
    is_op,
    splat_of,
    splat_value,
)
from stageflow.primitives.elementwise import (
    add_p,
    cast_p,
    divide_p,
    logical_not_p,
    multiply_p,
    negative_p,
    subtract_p,
)
from stageflow.primitives.reduction import reduce_prod_p, reduce_sum_p
from stageflow.primitives.structural import broadcast_to_p


def _is(value: SSAValue, number: int, *, signed_zero: bool | None = None) -> bool:
    """Whether `value` is a constant with every element `number`; for a zero,
    `signed_zero` asks for -0.0 (True), +0.0 (False) or either (None) in floats (in both
    parts of complex numbers). A complex 1 is never one: multiplying or dividing by it
    is no identity (inf * 0 is NaN in the cross terms, zeros change sign)."""
    splat = splat_of(value)
    if splat is None or splat != number:
        return False
    if dtypes.is_complex(splat.dtype) and number != 0:
        return False
    if number == 0 and signed_zero is not None and dtypes.is_inexact(splat.dtype):
        parts = (splat.real, splat.imag) if dtypes.is_complex(splat.dtype) else (splat,)
        return all(bool(np.signbit(part)) == signed_zero for part in parts)
    return True


def _is_integer(value: SSAValue) -> bool:
    aval = abstract_value(value.type)
    return isinstance(aval, ShapedType) and dtypes.is_integer(aval.dtype)


@dataclass
class ArithmeticIdentity(RewritePattern):
    """``x + 0``, ``0 + x``, ``x - 0``, ``x * 1``, ``1 * x``, ``x / 1`` -> ``x``."""

    no_signed_zeros: bool = False

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, BinaryElementwiseOp):
            return
        x, y = op.operands
        zero_sign = None if self.no_signed_zeros else True
        candidates: list[SSAValue] = []
        if is_op(op, add_p):
            candidates = [v for v, c in ((x, y), (y, x)) if _is(c, 0, signed_zero=zero_sign)]
        elif is_op(op, subtract_p):
            if _is(y, 0, signed_zero=None if self.no_signed_zeros else False):
                candidates = [x]
        elif is_op(op, multiply_p):
            candidates = [v for v, c in ((x, y), (y, x)) if _is(c, 1)]
        elif is_op(op, divide_p) and _is(y, 1):
            candidates = [x]
        for candidate in candidates:
            if replace_by(op, candidate, rewriter):
                return


class IntegerMultiplyByZero(RewritePattern):
    """``x * 0`` and ``0 * x`` -> ``0`` for integers (for floats they can be NaN)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not is_op(op, multiply_p) or not _is_integer(op.results[0]):
            return
        for zero in op.operands:
            if not _is(zero, 0):
                continue
            if replace_by(op, zero, rewriter):
                return
            result_type = op.results[0].type
            aval = abstract_value(result_type)
            if not isinstance(aval, ShapedType) or None in aval.shape:
                return
            scalar = build_constant(np.zeros((), aval.dtype))
            scalar.location = op.location
            broadcast = build_op(
                broadcast_to_p, [scalar.result], {"shape": aval.shape}, result_type, op.location
            )
            operands = list(op.operands)
            rewriter.replace(op, [scalar, broadcast])
            erase_dead_producers(operands, rewriter)
            return


class DoubleNegation(RewritePattern):
    """``-(-x)`` -> ``x`` and ``not(not(x))`` -> ``x``."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not (is_op(op, negative_p) or is_op(op, logical_not_p)):
            return
        inner = op.operands[0].owner
        if isinstance(inner, Operation) and inner.name == op.name:
            replace_by(op, inner.operands[0], rewriter)


class ScalarBroadcastConstant(RewritePattern):
    """A splat constant operand of a broadcasting binary op -> a 0-d constant.

    ``x + dense<2.0> : tensor<4xf32>`` becomes ``x + dense<2.0> : tensor<f32>``: one scalar
    instead of a buffer (code generation reads it as an immediate; ``cse`` merges it with
    every other use of 2.0), when the result type stays the same.
    """

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, BinaryElementwiseOp):
            return
        for index, operand in enumerate(op.operands):
            array = constant_array(operand)
            if array is None or array.ndim == 0 or (value := splat_value(array)) is None:
                continue
            scalar_aval = ShapedType((), op.operand_avals()[index].dtype)  # type: ignore
            if not _keeps_result_type(op, index, scalar_aval):
                continue
            scalar = build_constant(np.asarray(value))
            scalar.location = operand.owner.location  # type: ignore[union-attr]
            scalar.result.name_hint = operand.name_hint
            rewriter.insert(scalar)
            _replace_operand(op, index, scalar.result, rewriter)
            return


class BroadcastIntoConsumer(RewritePattern):
    """A `broadcast_to` operand of a broadcasting elementwise op -> the broadcast's operand.

    ``multiply(broadcast_to(s, [64, 10]), x)`` with ``s : 64x1`` and ``x : 64x10`` becomes
    ``multiply(s, x)``: the op broadcasts ``s`` itself, so the full copy the broadcast
    writes (and reads back) is never made; after fusion the kernel reads ``s`` with stride
    0. Only where the result type stays the same (another operand gives the shape).
    """

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, BinaryElementwiseOp | TernaryElementwiseOp):
            return
        for index, operand in enumerate(op.operands):
            producer = operand.owner
            if not is_op(producer, broadcast_to_p):
                continue
            source = producer.operands[0]
            if not _keeps_result_type(op, index, abstract_value(source.type)):
                continue
            _replace_operand(op, index, source, rewriter)
            return


def _keeps_result_type(op: SfOp, index: int, aval: AbstractValue) -> bool:
    """Whether `op`, with operand `index` of type `aval` instead, infers the same result
    type (a rewrite may change an operand, never what the op produces)."""
    avals = op.operand_avals()
    avals[index] = aval
    try:
        inferred = op.primitive.shape_rule(*avals, **op.params())
    except (ValueError, TypeError):
        return False
    return ir_type(inferred) == op.results[0].type


def _replace_operand(op: SfOp, index: int, value: SSAValue,
                     rewriter: PatternRewriter) -> None:
    """Make `value` operand `index` of `op`, erasing what only the old operand needed."""
    old = op.operands[index]
    operands = list(op.operands)
    operands[index] = value
    op.operands = operands
    rewriter.notify_op_modified(op)
    erase_dead_producers([old], rewriter)


class HalfReductionInFloat32(RewritePattern):
    """``reduce_sum`` or ``reduce_prod`` of float16 or bfloat16 -> the same reduction of
    the operand cast to float32, cast back: exactly what its kernel computes (it
    accumulates in float32 and rounds once), written as ops that code generation compiles.
    A half-float sum has no compiled loop of its own (a loop accumulating in the half
    dtype would round at every element), and one op without a lowering made a whole
    program run op by op."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not (is_op(op, reduce_sum_p) or is_op(op, reduce_prod_p)):
            return
        operand, result = shaped_type(op.operands[0].type), shaped_type(op.results[0].type)
        if operand.dtype not in (dtypes.float16, dtypes.bfloat16):
            return
        wide = build_op(cast_p, [op.operands[0]], {"dtype": dtypes.float32},
                        ShapedType(operand.shape, dtypes.float32), op.location)
        reduced = build_op(op.primitive, [wide.results[0]], op.params(),
                           ShapedType(result.shape, dtypes.float32), op.location)
        narrow = build_op(cast_p, [reduced.results[0]], {"dtype": result.dtype},
                          op.result_types[0], op.location)
        rewriter.replace(op, [wide, reduced, narrow], [narrow.results[0]])


@register_pass
@dataclass(frozen=True)
class Simplify(ModulePass):
    """Rewrite algebraic identities and op chains to a fixed point.

    Before::

        %0 = sf.constant dense<1.0> : tensor<f32>
        %1 = sf.multiply %x, %0 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
        %2 = sf.transpose %m {perm = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
        %3 = sf.transpose %2 {perm = [1, 0]} : (tensor<3x2xf32>) -> tensor<2x3xf32>

    After: uses of ``%1`` read ``%x`` and uses of ``%3`` read ``%m``; the ops feeding a
    replaced op are erased if nothing else uses them. Rules: ``x+0, x-0, x*1, x/1`` (and
    commuted), integer ``x*0``, ``-(-x)``, ``not(not(x))``, transpose of transpose,
    identity transpose, reshape of reshape, reshape / broadcast_to / cast to the operand's
    own type, select on a constant condition, splat constants of binary ops as 0-d
    constants, broadcasts that an elementwise consumer does itself, transposes sunk below
    the ops that do not care about the order of axes, and two transposes around a reshape
    that splits or merges whole runs of their axes composed into one; and half-float sums
    and products as float32 ones between casts (their kernels' arithmetic, which code
    generation compiles). It does not reassociate, distribute or fold constants (that is
    `fold`).

    The rules apply inside ``sf.cond`` and ``sf.while`` regions as anywhere else (a value
    from above is a value like any other), and two rules of `simplify_regions` see through
    the region ops: a result every branch yields as the same outer value is that value,
    and a loop variable the body yields unchanged is the loop's operand throughout.
    """

    name = "simplify"

    no_signed_zeros: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns: list[RewritePattern] = [
            ArithmeticIdentity(self.no_signed_zeros),
            IntegerMultiplyByZero(),
            DoubleNegation(),
            *SHAPE_PATTERNS,
            *LAYOUT_PATTERNS,
            *REGROUP_PATTERNS,
            ScalarBroadcastConstant(),
            BroadcastIntoConsumer(),
            HalfReductionInFloat32(),
            *REGION_PATTERNS,
        ]
        applier = GreedyRewritePatternApplier(patterns, dce_enabled=False)
        PatternRewriteWalker(applier, apply_recursively=True).rewrite_module(op)
