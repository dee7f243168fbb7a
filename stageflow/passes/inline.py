"""`inline`: replace calls to small functions of the module by a copy of their body.

Staging composes functions by call ops (a function traced once is compiled once however
many callers it has), but a call is a wall for the other passes and for fusion: nothing
folds, merges or fuses across it, and a call costs more than a few ops. Small callees are
therefore copied into their callers; large ones stay shared.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import IsTerminator

from stageflow.passes.fuse import is_kernel
from stageflow.passes.registry import register_pass
from stageflow.passes.support import callee_name, functions, referenced_symbols


def _calls(op: Operation) -> list[tuple[Operation, str]]:
    return [(o, name) for o in op.walk() if (name := callee_name(o)) is not None]


def _recursive(module: ModuleOp) -> set[str]:
    """The functions that can reach themselves through calls (never inlined)."""
    graph = {name: {c for _, c in _calls(f)} for name, f in functions(module).items()}

    def reaches(start: str) -> bool:
        seen: set[str] = set()
        stack = list(graph.get(start, ()))
        while stack:
            name = stack.pop()
            if name == start:
                return True
            if name not in seen:
                seen.add(name)
                stack.extend(graph.get(name, ()))
        return False

    return {name for name in graph if reaches(name)}


def _size(function: FuncOp) -> int:
    """Ops in the body, those inside regions included, terminators (``func.return``,
    ``sf.yield``) not counted."""
    return sum(1 for op in function.body.walk() if not op.has_trait(IsTerminator))


def inline_call(call: Operation, callee: FuncOp) -> list[Operation]:
    """Copy `callee`'s body before `call`, its arguments mapped to the call's operands,
    and replace the call's results by the returned values; the copies."""
    block = callee.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, call.operands, strict=True))
    copies: list[Operation] = []
    returned: list[SSAValue] = []
    for op in block.ops:
        if isinstance(op, ReturnOp):
            returned = [mapping.get(v, v) for v in op.arguments]
            break
        copies.append(op.clone(value_mapper=mapping))
    Rewriter.insert_op(copies, InsertPoint.before(call))
    Rewriter.replace_op(call, [], returned)
    return copies


@register_pass
@dataclass(frozen=True)
class Inline(ModulePass):
    """Inline ``sf.call``/``func.call`` of functions with at most `max_ops` ops.

    Before::

        func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
          %0 = sf.call %x {callee = @twice} : (tensor<4xf32>) -> tensor<4xf32>
          func.return %0 : tensor<4xf32>
        }
        func.func @twice(%a: tensor<4xf32>) -> tensor<4xf32> {
          %0 = sf.add %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
          func.return %0 : tensor<4xf32>
        }

    After: ``@main`` computes ``sf.add %x, %x`` itself and ``@twice`` is gone.

    A callee's size is counted when its call is reached, and calls copied out of a callee
    are considered in turn; functions on a call cycle, declarations and callees with
    several blocks are never inlined. A callee
    that had calls inlined and is referenced no more is erased, except the module's first
    function, the entry point (the traced function comes first, `graph_module`). Stateful
    ops keep their order, as the call did. Calls inside ``sf.cond`` and ``sf.while``
    regions are inlined in place like any other (the copy runs when, and as often as, the
    region does), and a callee holding region ops is copied whole, its regions reading
    the call's operands from above; a callee's size counts the ops inside its regions.
    """

    name = "inline"

    max_ops: int = 8

    def __post_init__(self) -> None:
        if self.max_ops < 0:
            raise ValueError(f"max-ops must be >= 0, got {self.max_ops}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        table = functions(op)
        if not table:
            return
        recursive = _recursive(op)
        inlined: set[str] = set()
        worklist = _calls(op)
        while worklist:
            call, name = worklist.pop()
            callee = table.get(name)
            if call.parent is None or callee is None or name in recursive:
                continue
            if is_kernel(callee):  # outlined by `fuse` on purpose
                continue
            if len(callee.body.blocks) != 1 or _size(callee) > self.max_ops:
                continue
            copies = inline_call(call, callee)
            inlined.add(name)
            for copy in copies:  # copied calls are considered in turn
                worklist.extend(_calls(copy))
        entry = next(iter(table))
        still_used = referenced_symbols(op)
        for name in inlined - still_used - {entry}:
            Rewriter.erase_op(table[name])
