"""`schedule`: order each block's ops so that work started in the background overlaps the rest.

A `py_func` with ``schedule = "early"`` starts work that runs beside the program (a
worker's all-reduce of one bucket of gradients, handed to its collective thread), and one
with ``schedule = "late"`` waits for such work. Tracing records a training step in program
order: every gradient first, then each bucket's start and wait, so the all-reduces would run
one after another once the backward pass is over, as if they were synchronous. This pass
list-schedules each block that holds such calls:

- an op that an early call needs ranks with the first early call that needs it, and ready
  ops run by rank, then in their traced order: the ops of the first bucket's gradients,
  its start, then what the second bucket needs, its start, and so on (the backward pass
  goes on while the first bucket's values travel);
- a late call runs only when nothing else is ready: the block computes all it can before
  it waits;
- order is kept where it means something: each op after what it reads (values defined
  in the block, read by the op or by the ops of its regions); ops with other effects
  (reads and writes of variables, printing, other callbacks, calls of functions that have
  effects) in their traced order among themselves; early calls, and late calls, in their
  traced order among themselves (every worker issues its collectives in the same order,
  since every worker runs the same schedule).

Before, traced order (``@start``: early, ``@done``: late)::

    %g1 = sf.exp %x        %g2 = sf.tanh %g1
    %t1 = sf.py_func %g1 {func = "start#1", schedule = "early"}
    %r1 = sf.py_func %t1 {func = "done#2", schedule = "late"}
    %t2 = sf.py_func %g2 {func = "start#3", schedule = "early"}
    ...

After: ``%g1``, ``%t1``, ``%g2``, ``%t2``, then ``%r1``: the first start runs before the
second bucket's ``sf.tanh``, and the waits come last. A block without such calls is left
as it is.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.traits import IsTerminator

from stageflow.core.op_facts import Effect
from stageflow.ir.control import ControlOp
from stageflow.passes.registry import register_pass
from stageflow.passes.support import callee_name, effects_of, functions, is_op
from stageflow.primitives.control import py_func_p


@register_pass
@dataclass(frozen=True)
class Schedule(ModulePass):
    """Run each background call's start as early as its operands allow and its wait as late
    as its users allow (``py_func`` ops whose ``schedule`` is "early" or "late"), keeping
    every dependence and the order of effects.

    Before::

        func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
          %g = sf.exp %x : (tensor<4xf32>) -> tensor<4xf32>
          %t = sf.py_func %g {func = "start#1", shapes = [[]], dtypes = ["int64"],
                              schedule = "early"} : (tensor<4xf32>) -> tensor<i64>
          %r = sf.py_func %t {func = "wait#2", shapes = [[4]], dtypes = ["float32"],
                              schedule = "late"} : (tensor<i64>) -> tensor<4xf32>
          %h = sf.tanh %g : (tensor<4xf32>) -> tensor<4xf32>
          func.return %r, %h : tensor<4xf32>, tensor<4xf32>
        }

    After: ``%g``, ``%t``, ``%h``, ``%r``: the tanh runs while the started work does.
    """

    name = "schedule"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        blocks = [block for inner in op.walk() for region in inner.regions
                  for block in region.blocks
                  if any(_schedule_of(o) for o in block.ops)]
        if blocks:  # most modules have none: the pure functions are not worth finding
            pure = _pure_functions(op)
            for block in blocks:
                _reorder(block, pure)


def _schedule_of(op: Operation) -> str:
    return str(op.params().get("schedule", "")) if is_op(op, py_func_p) else ""


def _pure_functions(module: ModuleOp) -> set[str]:
    """Names of the module's functions whose bodies have no effect (fused kernels), so
    that a call of one may move like the ops it stands for."""
    table = functions(module)
    pure: set[str] = set()
    changed = True
    while changed:  # a function calling only pure functions is pure, transitively
        changed = False
        for name, function in table.items():
            if name not in pure and not any(_effects(o, pure) for o in function.body.ops):
                pure.add(name)
                changed = True
    return pure


def _effects(op: Operation, pure: set[str]) -> Effect:
    """`op`'s effects (`effects_of`), where a call of a function of `pure` has none: a
    region op has its contents' effects, each op's own."""
    effects = Effect.PURE
    for inner in op.walk():
        if not isinstance(inner, ControlOp) and callee_name(inner) not in pure:
            effects |= effects_of(inner)
    return effects


def _reorder(block: Block, pure: set[str]) -> None:
    """List-schedule `block`'s ops (its terminator stays last): the ready op of the lowest
    rank (`_ranks`) first, ties in traced order, so the result is a topological order of
    what each op reads and of the chains of ordered ops."""
    ops = [op for op in block.ops if not op.has_trait(IsTerminator)]
    position = {op: index for index, op in enumerate(ops)}
    needs: list[set[int]] = [set() for _ in ops]
    for index, op in enumerate(ops):
        for inner in op.walk():
            for operand in inner.operands:
                owner = operand.owner
                if isinstance(owner, Operation) and owner in position and owner is not op:
                    needs[index].add(position[owner])
    last: dict[str, int] = {}
    for index, op in enumerate(ops):  # the chains of ordered ops, each in traced order
        chain = _schedule_of(op) or ("effects" if _effects(op, pure) else "")
        if chain:
            if chain in last:
                needs[index].add(last[chain])
            last[chain] = index
    rank = _ranks(ops, needs)
    users: list[list[int]] = [[] for _ in ops]
    waiting = [len(n) for n in needs]
    for index, n in enumerate(needs):
        for needed in n:
            users[needed].append(index)
    ready = [(rank[i], i) for i in range(len(ops)) if not waiting[i]]
    heapq.heapify(ready)
    order = []
    while ready:
        _, index = heapq.heappop(ready)
        order.append(ops[index])
        for user in users[index]:
            waiting[user] -= 1
            if not waiting[user]:
                heapq.heappush(ready, (rank[user], user))
    anchor = block.last_op if block.last_op is not None and block.last_op.has_trait(
        IsTerminator) else None
    for op in order:
        op.detach()
        if anchor is None:
            block.add_op(op)
        else:
            block.insert_op_before(op, anchor)


def _ranks(ops: list[Operation], needs: list[set[int]]) -> list[int]:
    """Each op's rank: the count of early calls before the first early call that needs it
    (itself included); after every early call's, the ops no early call needs, and after
    those the late calls that none needs."""
    early = [index for index, op in enumerate(ops) if _schedule_of(op) == "early"]
    rank = [len(early) + (_schedule_of(op) == "late") for op in ops]
    for count, start in enumerate(early):
        stack = [start]
        seen = {start}
        while stack:
            index = stack.pop()
            rank[index] = min(rank[index], count)
            for needed in needs[index]:
                if needed not in seen:
                    seen.add(needed)
                    stack.append(needed)
    return rank
