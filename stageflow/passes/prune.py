"""`prune`: remove ops whose results nobody uses, transitively; effects are kept.

Tracing records every op the Python code ran, including values it computed and dropped
(a debugging ``y = f(x)`` never returned, the unused half of ``random_bits``). Pruning is
xDSL's liveness-based dead-code elimination (`region_dce`): an op is live if it may have an
effect or one of its results feeds a live op. Which ops may have an effect is read from
their traits, and the dialect gives the ``Pure`` trait to exactly the primitives that are not
``stateful``, so ``sf.assign_variable``, ``sf.print``, ``sf.read_variable`` and ``sf.call``
(whose callee may have effects) are always kept, as are terminators and functions.

Dead ops inside ``sf.cond`` and ``sf.while`` regions go like any other, and a region op
has its contents' effects (``RecursiveMemoryEffect``): one whose regions hold no effect and
whose results are unused goes whole, one holding a write, a print or a ``py_func`` stays.
Before that, a region op sheds what nobody reads: the results of an ``sf.cond`` without
uses (and the values its regions yield for them), and the loop variables of an ``sf.while``
that neither the code after the loop nor its condition reads and that its body only passes
back to itself (or ignores); what computed them inside the regions is then dead too.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.transforms.dead_code_elimination import region_dce

from stageflow.ir.control import CondOp, ControlOp, WhileOp, YieldOp
from stageflow.passes.registry import register_pass


@register_pass
@dataclass(frozen=True)
class Prune(ModulePass):
    """Remove ops whose results are unused, transitively, unless they are stateful.

    Before::

        func.func @f(%x: tensor<4xf32>, %v: !sf.resource<tensor<4xf32>>) -> tensor<4xf32> {
          %0 = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
          %1 = sf.negative %0 : (tensor<4xf32>) -> tensor<4xf32>
          sf.assign_variable %v, %x : (!sf.resource<tensor<4xf32>>, tensor<4xf32>) -> ()
          func.return %x : tensor<4xf32>
        }

    After: ``sf.exp`` and ``sf.negative`` are gone, ``sf.assign_variable`` stays.
    It does not remove unused functions or block arguments (the signature is an ABI).
    Unused results of ``sf.cond`` and dead loop variables of ``sf.while`` are removed.
    """

    name = "prune"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        region_dce(op.body)
        while _shed_unused(op):  # what a region op shed may leave another's result unused
            region_dce(op.body)


def _shed_unused(module: ModuleOp) -> bool:
    """Drop the unused results of the module's conds and the dead variables of its loops;
    whether any went."""
    changed = False
    for region_op in [o for o in module.walk() if isinstance(o, CondOp | WhileOp)]:
        keep = (_used_results(region_op) if isinstance(region_op, CondOp)
                else _live_loop_variables(region_op))
        if len(keep) < len(region_op.results):
            _keep_only(region_op, keep)
            changed = True
    return changed


def _used_results(op: CondOp) -> list[int]:
    return [position for position, result in enumerate(op.results) if result.uses]


def _live_loop_variables(op: WhileOp) -> list[int]:
    """The loop variables to keep: all but those whose result and condition argument are
    unused and whose body argument is unused or only yielded back in its own place."""
    body = op.body_region.block
    yielded = op.yields(op.body_region)
    cond_args = op.cond_region.block.args

    def dead(position: int) -> bool:
        return (not op.results[position].uses and not cond_args[position].uses
                and all(use.operation is yielded and use.index == position
                        for use in body.args[position].uses))

    return [position for position in range(len(op.results)) if not dead(position)]


def _keep_only(op: ControlOp, keep: list[int]) -> None:
    """Replace `op` by the same op with only the results (and, for a loop, the loop
    variables) at the positions `keep`; the regions move to the new op."""
    regions = [Rewriter.move_region_contents_to_new_regions(r) for r in op.regions]
    loop = isinstance(op, WhileOp)
    for number, region in enumerate(regions):
        block = region.block
        terminator = block.last_op
        assert isinstance(terminator, YieldOp)
        if not (loop and number == 0):  # a loop's condition yields its predicate, kept
            new_yield = YieldOp(*(terminator.operands[position] for position in keep))
            new_yield.location = terminator.location
            Rewriter.replace_op(terminator, new_yield)
        if loop:  # the dropped variables' arguments are unused now
            for arg in [a for position, a in enumerate(block.args) if position not in keep]:
                block.erase_arg(arg)
    operands = [op.operands[position] for position in keep] if loop else list(op.operands)
    new = type(op).create(operands=operands, attributes=dict(op.attributes), regions=regions,
                          result_types=[op.results[position].type for position in keep])
    new.location = op.location
    Rewriter.insert_op(new, InsertPoint.before(op))
    for position, result in zip(keep, new.results, strict=True):
        result.name_hint = op.results[position].name_hint
        op.results[position].replace_all_uses_with(result)
    Rewriter.erase_op(op)
