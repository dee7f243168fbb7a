"""`remat`: choose which forward values a backward pass reads from memory and which it
recomputes, saving the fewest bytes within a recomputation budget.

A staged function differentiated under an eager tape becomes two functions
(`stageflow.staging.staged_grad`): the forward returns its outputs and then the *residuals*
(``sf.residuals = N`` on it: its last N results), and the backward (``sf.forward = @fwd``)
takes those N values as its first arguments. Every residual stays alive from the forward
call until the backward runs, so their bytes are the activation memory of training.

Most residuals are cheap to recompute: the intermediates of ``gelu``, ``tanh`` or a
normalisation are a few elementwise ops away from a value that must be kept anyway (a
matmul's output, an input). As in AOTAutograd's partitioner, the choice is a minimum cut:
each forward value is an edge ``v_in -> v_out`` whose capacity is its size in bytes; a value
an op may recompute has infinite edges from its operands' ``out`` nodes to its ``in`` node;
a value that may not be recomputed (a function argument, the result of a matmul, a
reduction, a random op, a variable read, a call) hangs from the source; the residuals hang
into the sink. A minimum cut crosses exactly the edges of the values to save; everything
between the cut and the residuals is recomputed in the backward function, each op just
before its first user (where `fuse` merges it into the backward's own kernels). A chain of
more than `MAX_DEPTH` recomputed ops is cut by saving a value in it.

Recomputation has a cost, estimated per op from its result's element count (transcendental
ops weigh more, a matmul by its multiply-adds): `budget` caps the recomputed work as a
fraction of the forward's. While a cut exceeds it, the costliest recomputed op is forbidden
to recompute (saved instead, or recomputed from its own saved inputs never) and the cut is
computed again. Unknown dims count as `UNKNOWN_DIM` elements: they are usually the batch,
shared by every activation, so only the ratios between candidate values matter.

A region op (``sf.cond``, ``sf.while``) of the forward is opaque: its results hang from
the source like a matmul's (never recomputed: a loop can cost anything, and its regions
read values the cut does not see), so a residual it computes is saved. In the backward,
a recomputed op used inside a region is placed before the region op.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, SymbolRefAttr, TensorType, i64
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from stageflow.core.op_facts import Cost
from stageflow.ir.dialect import SfOp
from stageflow.ir.types import dtype_of
from stageflow.passes.min_cut import INFINITY, FlowNetwork
from stageflow.passes.registry import register_pass
from stageflow.passes.support import functions

# The attributes linking a forward function and its backward (see the module docstring).
RESIDUALS_ATTR = "sf.residuals"
FORWARD_ATTR = "sf.forward"

UNKNOWN_DIM = 128
# The longest chain of ops the backward may recompute before a value it needs. A longer
# chain (a residual stream through every layer) has to be recomputed in full before the
# first layer's gradient, so all its values are live at once: the memory remat means to
# save, spent again, and one kernel too large to vectorise well.
MAX_DEPTH = 12
# The cost classes (each primitive's `cost` fact) of the ops the backward may recompute.
_RECOMPUTABLE = frozenset({Cost.FREE, Cost.MOVEMENT, Cost.ELEMENTWISE, Cost.TRANSCENDENTAL})
# Units per result element, by cost class (matmuls count their multiply-adds instead).
_WEIGHTS = {Cost.FREE: 0, Cost.TRANSCENDENTAL: 8}
# Multiply-adds per unit of cost: a core retires many more of them per cycle than it
# streams elements through an elementwise op.
_MULTIPLY_ADDS_PER_UNIT = 8


def residual_count(function: FuncOp) -> int | None:
    """How many trailing results of a forward function are residuals (None: not one)."""
    attr = function.attributes.get(RESIDUALS_ATTR)
    return attr.value.data if isinstance(attr, IntegerAttr) else None


def mark_pair(forward: FuncOp, backward: FuncOp, residuals: int) -> None:
    """Mark `forward` (its last `residuals` results) and `backward` (that many leading
    arguments) as a forward/backward pair."""
    forward.attributes[RESIDUALS_ATTR] = IntegerAttr(residuals, i64)
    backward.attributes[FORWARD_ATTR] = SymbolRefAttr(forward.sym_name.data)


def _elements(value: SSAValue) -> int:
    ty = value.type
    if not isinstance(ty, TensorType):
        return 0
    return int(np.prod([d if d >= 0 else UNKNOWN_DIM for d in ty.get_shape()], dtype=np.int64))


def _bytes(value: SSAValue) -> int:
    ty = value.type
    if not isinstance(ty, TensorType):
        return 0
    return _elements(value) * dtype_of(ty.get_element_type()).itemsize


def _recomputable(op: Operation) -> bool:
    if not isinstance(op, SfOp) or op.primitive.stateful or len(op.results) != 1:
        return False
    return op.primitive.cost in _RECOMPUTABLE


def _cost(op: Operation) -> int:
    """Estimated work of `op` in units of one plain elementwise operation on one element
    (a constant costs nothing: code generation folds it into the kernels reading it)."""
    elements = sum(_elements(r) for r in op.results)
    if not isinstance(op, SfOp):
        return elements
    cost = op.primitive.cost
    if cost is Cost.MATMUL:
        contracted = op.operands[0].type.get_shape()[-1]
        depth = contracted if contracted >= 0 else UNKNOWN_DIM
        return elements * depth // _MULTIPLY_ADDS_PER_UNIT
    return elements * _WEIGHTS.get(cost, 1)


@dataclass(frozen=True)
class Cut:
    """Which forward values to save and which ops the backward recomputes (forward order)."""

    saved: list[SSAValue]
    recomputed: list[Operation]


def choose_cut(forward: FuncOp, residuals: list[SSAValue], budget: float) -> Cut:
    """The minimum-bytes set of values to save so that every residual is saved or
    recomputable from saved values, recomputing at most `budget` times the forward's work."""
    block = forward.body.block
    ops = [op for op in block.ops if not isinstance(op, ReturnOp)]
    total = max(1, sum(_cost(op) for op in ops))
    banned: set[Operation] = set()
    while True:
        cut = _min_cut(block, ops, residuals, banned)
        depths = _depths(cut)
        deepest = max(cut.recomputed, key=depths.__getitem__, default=None)
        if deepest is not None and depths[deepest] > MAX_DEPTH:
            banned.add(deepest)
            continue
        work = sum(_cost(op) for op in cut.recomputed)
        if work <= budget * total or not cut.recomputed:
            return cut
        banned.add(max(cut.recomputed, key=_cost))


def _depths(cut: Cut) -> dict[Operation, int]:
    """How many recomputed ops each recomputed op waits for, along its longest chain."""
    depths: dict[Operation, int] = {}
    for op in cut.recomputed:  # forward order: producers first
        depths[op] = 1 + max((depths.get(v.owner, 0) for v in op.operands
                              if v not in cut.saved), default=0)
    return depths


def _min_cut(block: Block, ops: list[Operation], residuals: list[SSAValue],
             banned: set[Operation]) -> Cut:
    values = list(block.args) + [r for op in ops for r in op.results]
    index = {v: i for i, v in enumerate(values)}
    source, sink = 2 * len(values), 2 * len(values) + 1
    network = FlowNetwork(2 * len(values) + 2)
    for i, value in enumerate(values):
        network.add_edge(2 * i, 2 * i + 1, _bytes(value))
    for arg in block.args:
        network.add_edge(source, 2 * index[arg], INFINITY)
    for op in ops:
        for result in op.results:
            i = index[result]
            if _recomputable(op) and op not in banned:
                for operand in op.operands:
                    network.add_edge(2 * index[operand] + 1, 2 * i, INFINITY)
            else:
                network.add_edge(source, 2 * i, INFINITY)
    for value in residuals:
        network.add_edge(2 * index[value] + 1, sink, INFINITY)
    network.max_flow(source, sink)
    sink_side = network.reaches(sink)
    saved = {v for v in values
             if 2 * index[v] not in sink_side and 2 * index[v] + 1 in sink_side}
    needed: set[Operation] = set()
    stack = [v for v in residuals if v not in saved]
    while stack:
        owner = stack.pop().owner
        if isinstance(owner, Operation) and owner not in needed:
            needed.add(owner)
            stack.extend(v for v in owner.operands if v not in saved)
    return Cut([v for v in values if v in saved], [op for op in ops if op in needed])


def rematerialize(forward: FuncOp, backward: FuncOp, budget: float) -> None:
    """Rewrite a forward/backward pair to save the values of `choose_cut` instead of its
    residuals, cloning the recomputed ops into the backward function."""
    count = residual_count(forward)
    assert count is not None
    block = forward.body.block
    ret = block.last_op
    assert isinstance(ret, ReturnOp)
    n_outputs = len(ret.operands) - count
    residuals = list(ret.operands[n_outputs:])
    cut = choose_cut(forward, residuals, budget)
    backward_block = backward.body.block
    old_args = list(backward_block.args[:count])
    mapping: dict[SSAValue, SSAValue] = {}
    for position, value in enumerate(cut.saved):
        arg = backward_block.insert_arg(value.type, position)
        arg.name_hint = value.name_hint
        mapping[value] = arg
    clones = [op.clone(value_mapper=mapping) for op in cut.recomputed]
    if clones:
        Rewriter.insert_op(clones, InsertPoint.at_start(backward_block))
    for old, value in zip(old_args, residuals, strict=True):
        old.replace_all_uses_with(mapping[value])
        backward_block.erase_arg(old)
    _sink(clones)
    outputs = list(ret.operands[:n_outputs])
    Rewriter.replace_op(ret, ReturnOp(*outputs, *cut.saved))
    forward.update_function_type()
    backward.update_function_type()
    forward.attributes[RESIDUALS_ATTR] = IntegerAttr(len(cut.saved), i64)


def _sink(ops: list[Operation]) -> None:
    """Move each recomputed op down to just before its first user, last op first, so that
    it is recomputed where the backward needs it: `fuse` then merges it into the kernel
    of that layer's gradient instead of one kernel recomputing everything up front (which
    writes every recomputed value to memory, as saving it would have). A user inside a
    region op's region counts as the region op (the value is recomputed before it, once,
    not in every run of the region)."""
    for op in reversed(ops):
        block = op.parent_block()
        if block is None:
            continue
        users = [block.find_ancestor_op_in_block(use.operation)
                 for result in op.results for use in result.uses]
        order = {o: i for i, o in enumerate(block.ops)}
        placed = [user for user in users if user in order]
        if not placed:
            continue
        first = min(placed, key=order.__getitem__)
        if first is not op.next_op:
            op.detach()
            Rewriter.insert_op(op, InsertPoint.before(first))


@register_pass
@dataclass(frozen=True)
class Remat(ModulePass):
    """Rematerialise residuals of forward/backward pairs by a minimum cut.

    The backward below reads both ``exp`` and ``tanh`` of ``%x``. Before::

        func.func @f_forward(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>,
            tensor<8xf32>) attributes {sf.residuals = 2 : i64} {
          %e = sf.exp %x ...
          %t = sf.tanh %e ...
          func.return %t, %e, %t ...
        }
        func.func @f_backward(%e: tensor<8xf32>, %t: tensor<8xf32>, %g: tensor<8xf32>)
            -> tensor<8xf32> attributes {sf.forward = @f_forward} { ... }

    After: the forward saves only ``%x`` (``sf.residuals = 1``) and the backward starts with
    ``sf.exp`` and ``sf.tanh`` of its new first argument.
    """

    name = "remat"

    budget: float = 0.5

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        table = functions(op)
        for backward in table.values():
            link = backward.attributes.get(FORWARD_ATTR)
            if isinstance(link, SymbolRefAttr):
                forward = table[link.root_reference.data]
                if residual_count(forward) is not None and forward.body.blocks:
                    rematerialize(forward, backward, self.budget)
