"""`cse`: merge ops that compute the same thing from the same operands.

Traced code repeats itself: a layer that normalises its input twice, two gradients that
share a forward value, the same Python scalar captured as a constant at every use. xDSL's
common-subexpression elimination does what MLIR's does, and it decides what may merge from
the traits alone: ops with the ``Pure`` trait (every non-stateful primitive, ``sf.constant``)
merge when name, attributes, operands and result types are equal; ops with unknown effects
(every stateful primitive: ``sf.read_variable``, ``sf.assign_variable``, ``sf.print``,
``sf.call``) never merge there. Reads of a variable are merged by this pass itself: two
``sf.read_variable`` of the same handle in one block give the same value if no other
stateful op (a write, a call, anything whose effects are unknown) runs between them.

In ``sf.cond`` and ``sf.while`` regions (MLIR's rules, by which xDSL's pass works): ops
merge within a block, and an op inside a region reuses an equal op of an enclosing block
that dominates it (a loop body reads a value computed once before the loop instead of
computing it every iteration). Ops of sibling regions never merge with each other: only
one branch of a cond runs, and a loop's condition and body see different values. A region
op itself has its contents' effects, so a pure one merges with an earlier region op only
if the two are structurally equal (the same regions, op for op, reading the same values),
and one holding an effect never merges. Between two reads of a variable, a region op ends
the merge only if it may write (holds a stateful op other than a read).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.transforms.common_subexpression_elimination import cse

from stageflow.core.op_facts import Effect
from stageflow.passes.registry import register_pass
from stageflow.passes.support import effects_of, is_op
from stageflow.primitives.state import read_variable_p


@register_pass
@dataclass(frozen=True)
class CommonSubexpressions(ModulePass):
    """Replace a pure op by an earlier equal op in the same or an enclosing block.

    Before::

        %0 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
        %1 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
        %2 = sf.add %0, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>

    After::

        %0 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
        %2 = sf.add %0, %0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>

    ``sf.random_bits`` is pure given its state operand, so two draws from the same state
    value merge (they are the same numbers), while draws from successive states do not.
    Like MLIR's, the pass also erases pure ops that were unused already. It does not merge
    commuted operands (``x + y`` and ``y + x``) or ops whose types differ.
    """

    name = "cse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        merge_variable_reads(op)
        cse(op)


def merge_variable_reads(module: ModuleOp) -> None:
    """Replace each read of a variable by the previous read of the same handle in its
    block, unless a stateful op other than a read ran in between."""
    blocks = [block for op in module.walk() for region in op.regions for block in region.blocks]
    for block in blocks:
        last_read: dict[SSAValue, Operation] = {}
        for op in list(block.ops):
            if is_op(op, read_variable_p):
                handle = op.operands[0]
                earlier = last_read.get(handle)
                if earlier is not None and earlier.result_types == op.result_types:
                    Rewriter.replace_op(op, [], earlier.results)
                else:
                    last_read[handle] = op
            elif _may_write(op):
                last_read.clear()


def _may_write(op: Operation) -> bool:
    """Whether `op` may change a variable: it, or an op in its regions, may have an effect
    other than reading."""
    return bool(effects_of(op) & ~Effect.READS)
