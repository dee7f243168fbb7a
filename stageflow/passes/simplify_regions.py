"""The region rules of `simplify`: values that pass through an ``sf.cond`` or ``sf.while``
unchanged are read from where they come from.

Traced control flow carries more than it computes: a branch returns one of its inputs as
it is (``sf.cond(p, lambda: (x * 2, y), lambda: (x, y))`` yields ``y`` from both), a loop
carries a value its body never changes (a scale, a bound passed as a loop variable). Read
through the region op, such a value is a dependency of the op (its users wait for the
loop), one more result the runtime moves, and a wall for the rules that look at producers
(a ``transpose`` of a value a loop merely carried is not seen as a ``transpose`` of the
original). The rules replace it by the value itself; `prune` then drops the result (or the
loop variable) nobody reads any more.
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from stageflow.ir.control import CondOp, WhileOp
from stageflow.passes.support import same_type


def _defined_outside(value: SSAValue, op: Operation) -> bool:
    """Whether `value` is defined outside `op` (not by an op or block inside it)."""
    owner = value.owner
    defining = owner if isinstance(owner, Operation) else owner.parent_op()
    return defining is None or not op.is_ancestor(defining)


class CondPassThrough(RewritePattern):
    """A result every region of an ``sf.cond`` yields as the same outer value -> that value.

    ``%r = sf.cond %p ({ ... sf.yield %a, %y }, { sf.yield %x, %y })``: the uses of the
    second result read ``%y``, if its type is exactly the result's.
    """

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, CondOp):
            return
        yields = [op.yields(region) for region in op.branches]
        for position, result in enumerate(op.results):
            if not result.uses:
                continue
            values = {y.operands[position] for y in yields}
            if len(values) != 1:
                continue
            value = values.pop()
            if _defined_outside(value, op) and same_type(value, result):
                rewriter.replace_all_uses_with(result, value)


class WhileInvariant(RewritePattern):
    """A loop variable the body yields unchanged -> the loop's operand, everywhere.

    If the body yields its block argument ``k`` back as loop variable ``k``, that variable
    holds its initial value in every iteration and after the loop: the uses of result
    ``k`` and of both regions' argument ``k`` read the operand instead (if its type is
    exactly the carried one), leaving the variable unused for `prune`.
    """

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, WhileOp):
            return
        body = op.body_region.block
        yielded = op.yields(op.body_region).operands
        cond_args = op.cond_region.block.args
        for position, init in enumerate(op.operands):
            arg = body.args[position]
            if yielded[position] is not arg or not same_type(init, arg):
                continue
            for value in (op.results[position], cond_args[position], arg):
                rewriter.replace_all_uses_with(value, init)


REGION_PATTERNS: tuple[RewritePattern, ...] = (CondPassThrough(), WhileInvariant())
