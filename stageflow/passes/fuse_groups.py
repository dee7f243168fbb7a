"""Fusion groups: which elementwise ops of a block `fuse` outlines together, and why that is
safe to do.

An op is *fusible* if code generation compiles it inside a kernel: an elementwise `sf` op
(unary, binary, ``sf.select``, ``sf.cast``) on ranked tensors. Constants are never members:
0-d and splat ones are cloned into each kernel that reads them, others are arguments.

The block is read as a graph whose edges are def-use edges plus an *effect chain* linking
each stateful op to the previous one (their order is the program's). Groups are formed
greedily in program order: each fusible op joins the groups of its fusible producers, one
by one in operand order, whenever the union stays within `max_ops`, its ops' shapes
broadcast together (a kernel has one iteration space), and the graph with every
group contracted to one node (the call that replaces it) stays acyclic. That condition is
convexity of the union (no path leaves it and comes back), taken over the contracted graph,
so that two groups can never need each other either::

    %a = sf.exp %x            // joins %c's group? %b = reduce(%a) feeds %c and needs %a:
    %b = sf.reduce_sum %a     // a call computing %a and %c could run neither before nor
    %c = sf.add %a, %b        // after the reduction, so %a and %c stay in two groups.

Once the groups are formed, a reduction (``sf.reduce_sum``, ``_prod``, ``_max``,
``_min``, of a dtype code generation accumulates) joins the group producing its operand
when the operand spans the group's iteration space (its static shape is the one the
group's shapes broadcast to; with unknown dims, every op of the group leads to it), so the
kernel visits each of its elements once and folds it into
the result without writing the operand out. An operand also used elsewhere is written
anyway: its reductions join only if they keep the innermost axis (see `_only_reduced` and
`_keeps_rows`). Reductions of several values of a group may join it (batch norm's
backward sums the gradient and its product with the normalised input in one loop).
Forming the groups first keeps elementwise fusion as it was: a group whose value feeds a
reduction and other elementwise ops keeps them, and the reduction stays separate, rather
than the reduction splitting that group in two. A value computed from a reduction's
result could only be computed after the whole loop, so it is never in its group (the
reduction would close a cycle)::

    %e = sf.exp %d            // were %e reduced only, %e and %s would be one kernel; %y
    %s = sf.reduce_sum %e     // needs all of %s, so it can never join them: %e is written,
    %y = sf.divide %e, %s     // and its reduction stays a step

The check keeps, per node, a bitset of every op it transitively depends on: a union may be
formed iff none of the nodes feeding it depends on it; once formed, the nodes depending on
a part of it depend on all of it. The greedy order decides which of two incompatible
merges wins (the first producer's), so the partition is maximal, not minimal in count.
Dead elementwise ops (whose values reach no other kind of op) are left where they are:
removing them is `prune`'s job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Block, Operation, SSAValue

from stageflow.ir.dialect import ElementwiseOp, ReductionOp
from stageflow.ir.types import dtype_of
from stageflow.passes.support import is_stateful, splat_of
from stageflow.primitives import elementwise as ew

IsEffect = Callable[[Operation], bool]


def is_fusible(op: Operation) -> bool:
    """Whether `op` may be a kernel op: elementwise, pure, one ranked-tensor result, and
    no operand of a dtype whose values it may refuse (`ElementwisePrimitive.refuses`)."""
    return (
        isinstance(op, ElementwiseOp)
        and not is_stateful(op)
        and len(op.results) == 1
        and all(isinstance(v.type, TensorType) for v in (*op.operands, *op.results))
        and not any(dtype_of(v.type.get_element_type()) in op.primitive.refuses
                    for v in op.operands)
    )


def is_fusible_reduction(op: Operation) -> bool:
    """Whether `op` may end a kernel: a reduction (its primitive has a `reduction` kind) of
    one ranked tensor to another of the same dtype, one the kind accumulates in natively
    (`ReductionKind.native_dtypes`, which code generation honours too). A kind that needs
    elements (max, min) joins only where every reduced dim is known and not 0: a kernel
    cannot refuse an empty one (it would give the identity, -inf, where NumPy raises), the
    op's own lowering does."""
    if not (isinstance(op, ReductionOp) and len(op.operands) == 1 and len(op.results) == 1):
        return False
    kind = op.primitive.reduction
    operand, result = op.operands[0].type, op.results[0].type
    if not (kind is not None
            and isinstance(operand, TensorType) and isinstance(result, TensorType)
            and operand.get_element_type() == result.get_element_type()
            and dtype_of(result.get_element_type()) in kind.native_dtypes):
        return False
    if kind.needs_elements:
        shape = operand.get_shape()
        return all(0 <= axis < len(shape) and shape[axis] > 0
                   for axis in op.params()["axes"])
    return True


def is_scalar_constant(value: SSAValue) -> bool:
    """Whether an ``sf.constant`` of a 0-d or splat value defines `value` (kernels clone it)."""
    return splat_of(value) is not None


def dependencies(ops: Sequence[Operation], is_effect: IsEffect) -> list[list[int]]:
    """For each of `ops` (a block's, in order), the indices of those it must follow: the
    producers of its operands (of ops nested in it too) and the previous op with an effect."""
    index = {op: i for i, op in enumerate(ops)}
    result: list[list[int]] = []
    last_effect: int | None = None
    for i, op in enumerate(ops):
        found: dict[int, None] = {}
        for inner in op.walk():
            for value in inner.operands:
                j = index.get(value.owner) if isinstance(value.owner, Operation) else None
                if j is not None and j != i:
                    found[j] = None
        if is_effect(op):
            if last_effect is not None:
                found[last_effect] = None
            last_effect = i
        result.append(list(found))
    return result


def _live(ops: Sequence[Operation], block: Block, fusible: list[bool]) -> list[bool]:
    """Fusible ops some result of which reaches a non-fusible op, or leaves the block."""
    index = {op: i for i, op in enumerate(ops)}
    live = [False] * len(ops)
    for i in reversed(range(len(ops))):
        if not fusible[i]:
            continue
        for result in ops[i].results:
            for use in result.uses:
                user = block.find_ancestor_op_in_block(use.operation)
                j = index.get(user) if user is not None else None
                if j is None or not fusible[j] or live[j]:
                    live[i] = True
    return live


@dataclass
class _Node:
    """A group of fusible ops, or one other op: its members, as op indices and as a bitset;
    every op it transitively depends on (other groups counted whole); the ops feeding it."""

    members: list[int]
    bits: int
    ancestors: int
    inputs: set[int] = field(default_factory=set)
    fusible: bool = False
    space: tuple[int, ...] | None = ()  # the iteration space: its results' broadcast shape


def _union(node: _Node, other: _Node) -> _Node:
    bits = node.bits | other.bits
    return _Node(
        members=node.members + other.members,
        bits=bits,
        ancestors=(node.ancestors | other.ancestors) & ~bits,
        inputs={y for y in node.inputs | other.inputs if not bits >> y & 1},
        fusible=True,
        space=_broadcast(node.space, other.space),
    )


def _result_shape(op: Operation) -> tuple[int, ...] | None:
    result = op.results[0].type if len(op.results) == 1 else None
    return tuple(result.get_shape()) if isinstance(result, TensorType) else None


def _broadcast(a: tuple[int, ...] | None, b: tuple[int, ...] | None
               ) -> tuple[int, ...] | None:
    """The shape both broadcast to, or None: a kernel has one iteration space, so ops whose
    shapes do not broadcast together (two weight updates sharing a 0-d learning rate) stay
    in two kernels. An unknown dim (DYNAMIC_INDEX) matches itself and 1 only: beside a known size it
    might differ at run time."""
    if a is None or b is None:
        return None
    shape = []
    for x, y in zip(a[::-1] + (1,) * (len(b) - len(a)), b[::-1] + (1,) * (len(a) - len(b)),
                    strict=True):
        if x == y or y == 1:
            shape.append(x)
        elif x == 1:
            shape.append(y)
        else:
            return None
    return tuple(shape[::-1])


# A merge or a reduction the grouping turned down: (the op, the op of the other side, why).
Rejection = tuple[Operation, Operation, str]


def find_groups(block: Block, max_ops: int, is_effect: IsEffect,
                reductions: bool = True,
                rejected: list[Rejection] | None = None,
                recompute: bool = False) -> list[list[Operation]]:
    """The fusion groups of `block`, each in program order, ordered by their last op (where
    their calls go); with `reductions`, groups may end in reductions of their values; with
    `recompute`, a group whose values are broadcast joins their users whatever its work
    (`_computed_once`). `rejected`, if given, receives every merge of a fusible op with a
    fusible producer, and every reduction of a group's value, that was turned down, with
    the reason."""
    turned_down: list[tuple[int, int, str]] = []
    ops = list(block.ops)
    deps = dependencies(ops, is_effect)
    fusible = [is_fusible(op) for op in ops]
    live = _live(ops, block, fusible)
    users = _users(ops, block)
    shapes = [_result_shape(op) for op in ops]
    origins = _dim_origins(ops, shapes)
    node_of = list(range(len(ops)))  # op index -> id of its node (the op that formed it)
    nodes: dict[int, _Node] = {}
    for i, producers in enumerate(deps):
        ancestors = 0
        for y in producers:
            feeding = nodes[node_of[y]]
            ancestors |= feeding.bits | feeding.ancestors
        node = _Node([i], 1 << i, ancestors, set(producers), fusible[i] and live[i],
                     _result_shape(ops[i]))
        if node.fusible:
            candidates = dict.fromkeys(node_of[y] for y in producers if nodes[node_of[y]].fusible)
            for candidate in candidates:
                union = _union(node, nodes[candidate])
                why = (_refusal(union, nodes, node_of, max_ops)
                       or _narrow_output(union, users, shapes, origins, ops)
                       or (None if recompute else _computed_once(nodes[candidate], union, ops)))
                if why is None:
                    node = union
                    del nodes[candidate]
                else:
                    turned_down.append((i, candidate, why))
        for member in node.members:
            node_of[member] = i
        nodes[i] = node
        if len(node.members) > 1:
            _propagate(nodes, node_of, i)
    groups = [sorted(n.members) for n in nodes.values() if n.fusible]
    if reductions:
        _end_in_reductions(ops, groups, deps, max_ops, turned_down)
    if rejected is not None:
        rejected.extend((ops[i], ops[j], why) for i, j, why in turned_down)
    return [[ops[j] for j in members] for members in sorted(groups, key=lambda m: m[-1])]


def _users(ops: Sequence[Operation], block: Block) -> list[set[int]]:
    """For each op, the indices of the ops of the block using its results (-1: a use
    outside the block, the terminator's included)."""
    index = {op: i for i, op in enumerate(ops)}
    found: list[set[int]] = []
    for op in ops:
        here: set[int] = set()
        for result in op.results:
            for use in result.uses:
                user = block.find_ancestor_op_in_block(use.operation)
                here.add(index.get(user, -1) if user is not None else -1)
        found.append(here)
    return found


def _narrow_output(union: _Node, users: list[set[int]], shapes: list, origins: list,
                   ops: list) -> str | None:
    """Why a value of the union used outside it cannot be one of its outputs: a kernel
    computes every element of its iteration space once, so an output of another shape
    would be written only where that space has elements (never, if it is empty). Unknown
    dims of equal static shapes may still differ at run time (one of them 1, broadcast):
    each must come from where the space's does (`_dim_origins`)."""
    members = set(union.members)
    space = None
    for i in union.members:
        if not users[i] - members:
            continue
        if shapes[i] == union.space:
            space = _space_origins(union, shapes, origins) if space is None else space
            if all(o is None or o == s for o, s in zip(origins[i], space, strict=True)):
                continue
        return (f"{ops[i].name}'s result, used elsewhere, would be an output narrower "
                "than the kernel's iteration space")
    return None


def _dim_origins(ops: list[Operation], shapes: list) -> list[tuple | None]:
    """For each op's result, where each unknown dim comes from at run time: the set of
    (value, axis) dims it is the broadcast of, followed through elementwise ops (an operand
    dim statically 1 adds nothing); a value no elementwise op of the block made is its own
    origin. None for a known dim. Dims of one set are equal at run time, whatever the
    sizes: a dim of `x * w` is `{x's, w's}`, and so is that of `(x * w) + x`."""
    known: dict[SSAValue, tuple] = {}

    def of(value: SSAValue) -> tuple:
        if value not in known:
            shape = value.type.get_shape() if isinstance(value.type, TensorType) else ()
            known[value] = tuple(None if d >= 0 else frozenset({(value, k)})
                                 for k, d in enumerate(shape))
        return known[value]

    found: list[tuple | None] = []
    for op, shape in zip(ops, shapes, strict=True):
        if shape is None:
            found.append(None)
            continue
        result = op.results[0]
        if isinstance(op, ElementwiseOp):
            operands = [(o.type.get_shape(), of(o)) for o in op.operands
                        if isinstance(o.type, TensorType)]
            axes = []
            for k, d in enumerate(shape):
                leaves = frozenset().union(*(
                    origin[at] for s, origin in operands
                    if (at := len(s) - len(shape) + k) >= 0 and s[at] != 1
                    and origin[at] is not None))
                axes.append(None if d >= 0 else leaves or frozenset({(result, k)}))
            known[result] = tuple(axes)
        found.append(of(result))
    return found


def _space_origins(union: _Node, shapes: list, origins: list) -> tuple:
    """Where each unknown dim of the union's iteration space comes from: every origin of
    its members' dims there (those not statically 1), as the space is their broadcast."""
    rank = len(union.space)
    axes = []
    for k in range(rank):
        leaves = frozenset().union(*(
            origins[i][at] for i in union.members
            if shapes[i] is not None and (at := len(shapes[i]) - rank + k) >= 0
            and shapes[i][at] != 1 and origins[i][at] is not None))
        axes.append(None if union.space[k] >= 0 else leaves)
    return tuple(axes)


def _refusal(union: _Node, nodes: dict[int, _Node], node_of: list[int],
             max_ops: int) -> str | None:
    """Why two groups may not merge into `union`, or None if they may."""
    if len(union.members) > max_ops:
        return f"together they would exceed {max_ops} ops (max-ops)"
    if union.space is None:
        return "their shapes do not broadcast together (a kernel has one iteration space)"
    if any(nodes[node_of[y]].ancestors & union.bits for y in union.inputs):
        return ("another op lies on a path between them: one kernel could run neither before "
                "nor after it")
    return None


# Elementwise ops that cost about as much as reading their value would: one of them alone
# may be computed again for every element its value is broadcast to.
_CHEAP = frozenset(f"sf.{primitive.name}" for primitive in (
    ew.cast_p, ew.add_p, ew.subtract_p, ew.multiply_p, ew.negative_p, ew.abs_p, ew.relu_p,
    ew.maximum_p, ew.minimum_p, ew.select_p, ew.equal_p, ew.not_equal_p, ew.less_p,
    ew.less_equal_p, ew.greater_p, ew.greater_equal_p, ew.logical_and_p, ew.logical_or_p,
    ew.logical_not_p))


def _computed_once(producer: _Node, union: _Node, ops: list[Operation]) -> str | None:
    """Why `producer`'s group stays out of `union` on a CPU: its values are broadcast there
    (its iteration space has a dim of 1, or fewer dims, where the union's has more), and
    it does more than one cheap op, so the kernel would compute them again for every
    element they are broadcast to. A batch norm's per-channel scale (a reciprocal square
    root and products) was computed once per pixel; in a kernel of its own it is computed
    once per channel and read back. None where it may join."""
    small, large = producer.space, union.space
    if small is None or large is None:
        return None
    padded = (1,) * (len(large) - len(small)) + small
    if all(s != 1 or n == 1 for s, n in zip(padded, large, strict=True)):
        return None
    if len(producer.members) == 1 and ops[producer.members[0]].name in _CHEAP:
        return None
    return ("its values are broadcast there: they are computed once in a kernel of their "
            "own, not again for every element they are broadcast to")


def _end_in_reductions(ops: list[Operation], groups: list[list[int]],
                       deps: list[list[int]], max_ops: int,
                       turned_down: list[tuple[int, int, str]]) -> None:
    """Append to each group the fusible reductions of its values that span the group's
    iteration space. A reduction has one operand, so it closes no cycle (a group is convex:
    no member can need a reduction of another); it is among its group's last ops, and
    nothing joins the group after it (groups are complete before any reduction is
    considered)."""
    group_of = {j: members for members in groups for j in members}
    spaces = {id(members): _space(ops, members) for members in groups}
    for i, op in enumerate(ops):
        if not is_fusible_reduction(op):
            continue
        producer = next(iter(deps[i]), None)
        members = group_of.get(producer) if producer is not None else None
        if members is None:
            continue
        if len(members) >= max_ops:
            turned_down.append((i, producer, f"the kernel holds {max_ops} ops (max-ops)"))
        elif not (_only_reduced(ops[producer]) or _keeps_rows(op)):
            turned_down.append((i, producer, "its operand is also used elsewhere and it folds "
                                "the innermost axis (measured slower in the writing loop)"))
        elif _spans(ops, members, producer, deps, spaces[id(members)]):
            members.append(i)
        else:
            turned_down.append((i, producer, "its operand does not span the kernel's "
                                "iteration space"))


def _spans(ops: list[Operation], members: list[int], producer: int, deps: list[list[int]],
           space: tuple[int, ...] | None) -> bool:
    """Whether the value of `producer` spans the iteration space of its group: its shape is
    the group's, all static; with unknown dims (which two values may have only as sizes
    equal at run time), every op of the group leads to it."""
    shape = _result_shape(ops[producer])
    if space is not None and shape == space and min(space, default=0) >= 0:
        return True
    inside = set(members) - {j for j in members if is_fusible_reduction(ops[j])}
    reached, stack = {producer}, [producer]
    while stack:
        for y in deps[stack.pop()]:
            if y in inside and y not in reached:
                reached.add(y)
                stack.append(y)
    return reached == inside


def _space(ops: list[Operation], members: list[int]) -> tuple[int, ...] | None:
    """The iteration space of a group: the shape its ops' results broadcast to."""
    space = _result_shape(ops[members[0]])
    for j in members[1:]:
        space = _broadcast(space, _result_shape(ops[j]))
    return space


def _only_reduced(producer: Operation) -> bool:
    """Whether the value of `producer` is only reduced. A value also used elsewhere must be
    written out anyway, and folding its rows into registers in the loop that writes it
    measured slower than the separate reduction (a softmax's row sum;
    `benchmarks.fused_reduction`), so such a reduction over the innermost axis stays a step
    of its own."""
    return all(is_fusible_reduction(use.operation) for r in producer.results for use in r.uses)


def _keeps_rows(reduction: Operation) -> bool:
    """Whether `reduction` leaves the innermost axis: the kernel then adds each element into
    its result element (whole rows at a time, vectorised) while it writes the operand, no
    slower than writing it alone; a row folded into registers instead slowed the write."""
    rank = len(reduction.operands[0].type.get_shape())
    return rank > 0 and rank - 1 not in reduction.params()["axes"]


def _propagate(nodes: dict[int, _Node], node_of: list[int], formed: int) -> None:
    """Every earlier node that depended on a part of the node just formed depends on all of
    it now, and on what it depends on."""
    node = nodes[formed]
    parts = node.bits & ~(1 << formed)
    seen: set[int] = set()
    for j in range(min(node.members), formed):
        other = node_of[j]
        if other == formed or other in seen:
            continue
        seen.add(other)
        if nodes[other].ancestors & parts:
            nodes[other].ancestors |= node.bits | node.ancestors
