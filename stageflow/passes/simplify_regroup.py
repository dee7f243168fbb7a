"""The rule of `simplify` that moves a transpose across a reshape, so that the transposes on
either side of the reshape meet and compose into one copy.

A reshape only splits and merges axes: read in row-major order, its operand's axes fall
into runs (`AxisGroup`), each run becoming a run of result axes with the same element
count, and axes of size 1 come and go on their own. A transpose that keeps every
multi-axis run together and in its order commutes with the reshape: the split or merge can
happen on its other side, and the transpose then permutes the runs as it permuted them
before. A channel shuffle in a channels-last model is the case this is for::

    transpose NHWC->NCHW, reshape C -> (G, C/G), transpose (G, C/G) -> (C/G, G),
    reshape (C/G, G) -> C, transpose NCHW->NHWC

is three copies; the first transpose crosses the split (a split keeps any transpose's runs
whole) and composes with the second, the last crosses the merge backwards (it moves the
merged channels as one) and composes too, leaving ``reshape (N, H, W, G, C/G)``, one
transpose of the last two axes, ``reshape (N, H, W, C)``: one copy, two views.

The rule only rewrites ``transpose(reshape(transpose(x)))``, each op the only use of the
one before: of the two transposes, one crosses the reshape and the two compose into one (or
none), so each rewrite removes a transpose and the rewriting ends. Dims the IR does not know
(``?``) are only followed where the reshape names them (its ``-2 - k`` dims); a ``-1`` dim
must be known from the result type; anything else is not proven and nothing moves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from stageflow.ir.builder import build_op
from stageflow.ir.dialect import SfOp
from stageflow.ir.types import shaped_type
from stageflow.passes.simplify_layouts import Perm, inverse_permutation
from stageflow.passes.support import erase_dead_producers, is_op
from stageflow.primitives.structural import reshape_p, transpose_p


@dataclass(frozen=True)
class Ref:
    """A reshape's result dim that is its operand's unknown dim `axis` (``-2 - axis``)."""

    axis: int


TargetDim = int | Ref


@dataclass(frozen=True)
class AxisGroup:
    """A run of a reshape's operand axes (`source`) that becomes a run of its result axes
    (`result`) with the same element count; one side is empty for an axis of size 1 that
    the reshape drops or inserts."""

    source: tuple[int, ...]
    result: tuple[int, ...]


def reshape_targets(source: Sequence[int | None], shape: Sequence[int],
                    result: Sequence[int | None]) -> list[TargetDim] | None:
    """The result dims of reshaping dims `source` by the param `shape` into the declared
    dims `result`: a known size, or a `Ref` to an unknown operand dim; None where a dim is
    unknown and not named as an operand's (a ``-1`` the result type does not know).

    >>> reshape_targets((None, 6), (-2, 2, 3), (None, 2, 3))
    [Ref(axis=0), 2, 3]
    >>> reshape_targets((None, 6), (-1, 3), (None, 3)) is None
    True
    """
    targets: list[TargetDim] = []
    for n, declared in zip(shape, result, strict=True):
        if n >= 0:
            targets.append(n)
        elif n <= -2:
            k = -2 - n
            targets.append(Ref(k) if source[k] is None else int(source[k]))
        elif declared is not None:
            targets.append(declared)
        else:
            return None
    return targets


def axis_groups(source: Sequence[int | None],
                targets: Sequence[TargetDim]) -> list[AxisGroup] | None:
    """How a reshape of dims `source` into `targets` (`reshape_targets`) splits and merges
    axes, or None where that cannot be proven (an unknown dim not carried over as it is, or
    a dim of size 0, which every cut fits).

    >>> axis_groups((1, 112, 56, 56), (1, 4, 28, 56, 56))  # doctest: +NORMALIZE_WHITESPACE
    [AxisGroup(source=(1,), result=(1, 2)), AxisGroup(source=(2,), result=(3,)),
     AxisGroup(source=(3,), result=(4,)), AxisGroup(source=(0,), result=()),
     AxisGroup(source=(), result=(0,))]
    """
    if 0 in source or 0 in targets:
        return None
    axes = [i for i, d in enumerate(source) if d != 1]
    dims = [j for j, d in enumerate(targets) if d != 1]
    groups: list[AxisGroup] = []
    i = j = 0
    while i < len(axes) and j < len(dims):
        a, b = source[axes[i]], targets[dims[j]]
        if isinstance(b, Ref) or a is None:
            if b != Ref(axes[i]):
                return None
            groups.append(AxisGroup((axes[i],), (dims[j],)))
            i, j = i + 1, j + 1
            continue
        first_i, first_j = i, j
        i, j = i + 1, j + 1
        while a != b:
            if a < b:
                if i == len(axes) or source[axes[i]] is None:
                    return None
                a, i = a * source[axes[i]], i + 1
            else:
                if j == len(dims) or isinstance(targets[dims[j]], Ref):
                    return None
                b, j = b * targets[dims[j]], j + 1
        groups.append(AxisGroup(tuple(axes[first_i:i]), tuple(dims[first_j:j])))
    if i < len(axes) or j < len(dims):
        return None
    groups += [AxisGroup((i,), ()) for i, d in enumerate(source) if d == 1]
    groups += [AxisGroup((), (j,)) for j, d in enumerate(targets) if d == 1]
    return groups


def _in_order(axes: Sequence[int]) -> bool:
    return all(b == a + 1 for a, b in zip(axes, axes[1:], strict=False))


def _ordered(groups: list[AxisGroup], places: dict[AxisGroup, list[int]],
             side: str) -> list[AxisGroup]:
    """`groups` sorted by where the other side of the transpose puts them (`places`: the
    positions of each group's axes there); a group with no axes there (a size-1 axis the
    reshape drops or inserts on this side) goes right after the group before it on this
    `side`, so that it stays where it was."""
    after: dict[int, float] = {}
    for group in sorted((g for g in groups if places[g]), key=lambda g: places[g][0]):
        for axis in getattr(group, side):
            after[axis] = places[group][-1] + 0.5

    def key(group: AxisGroup) -> tuple[float, int]:
        if places[group]:
            return places[group][0], -1
        axis = getattr(group, side)[0]
        before = [after[a] for a in range(axis) if a in after]
        return (before[-1] if before else -0.5), axis

    return sorted(groups, key=key)


def _param(target: TargetDim, axis_of: Sequence[int]) -> int:
    """A reshape param entry for `target`, a `Ref` renamed to the new operand's axis."""
    return -2 - axis_of[target.axis] if isinstance(target, Ref) else target


def reshape_first(perm: Perm, groups: list[AxisGroup],
                  targets: Sequence[TargetDim]) -> tuple[tuple[int, ...], Perm] | None:
    """``reshape(transpose(x, perm))`` as ``transpose(reshape(x, shape), moved)``: (shape,
    moved), or None where `perm` breaks up a run of axes the reshape merges.

    >>> groups = axis_groups((1, 112, 56, 56), (1, 4, 28, 56, 56))
    >>> reshape_first((0, 3, 1, 2), groups, (1, 4, 28, 56, 56))
    ((1, 56, 56, 4, 28), (0, 3, 4, 1, 2))
    """
    places = {g: [perm[a] for a in g.source] for g in groups}
    if not all(_in_order(p) for p in places.values()):
        return None
    order = [a for g in _ordered(groups, places, "result") for a in g.result]
    position = inverse_permutation(tuple(order))
    shape = tuple(_param(targets[a], perm) for a in order)
    return shape, position


def transpose_first(perm: Perm, groups: list[AxisGroup],
                    targets: Sequence[TargetDim]) -> tuple[Perm, tuple[int, ...]] | None:
    """``transpose(reshape(x), perm)`` as ``reshape(transpose(x, moved), shape)``: (moved,
    shape), or None where `perm` breaks up a run of axes the reshape splits into.

    >>> groups = axis_groups((1, 28, 4, 56, 56), (1, 112, 56, 56))
    >>> transpose_first((0, 2, 3, 1), groups, (1, 112, 56, 56))
    ((0, 3, 4, 1, 2), (1, 56, 56, 112))
    """
    inverse = inverse_permutation(perm)
    places = {g: [inverse[a] for a in g.result] for g in groups}
    if not all(_in_order(p) for p in places.values()):
        return None
    moved = tuple(a for g in _ordered(groups, places, "source") for a in g.source)
    position = inverse_permutation(moved)
    shape = tuple(_param(targets[a], position) for a in perm)
    return moved, shape


def _transpose_of(value: SSAValue) -> SfOp | None:
    """The transpose defining `value` if `value` has no other use."""
    owner = value.owner
    if is_op(owner, transpose_p) and sum(1 for _ in value.uses) == 1:
        return owner
    return None


def _moves_only_units(perm: Perm, shape: Sequence[int | None]) -> bool:
    """Whether transposing dims `shape` by `perm` keeps the axes not of size 1 in order (a
    reshape, no copy)."""
    kept = [a for a in perm if shape[a] != 1]
    return kept == sorted(kept)


class TransposeAcrossReshape(RewritePattern):
    """``transpose(reshape(transpose(x, p)), q)`` -> one transpose and one reshape (or just
    a reshape), when `p` can cross the reshape forwards or `q` backwards; the three ops in
    one block (nothing moves into or out of a loop's body or a branch)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not is_op(op, transpose_p):
            return
        reshape = op.operands[0].owner
        if not is_op(reshape, reshape_p) or sum(1 for _ in op.operands[0].uses) != 1:
            return
        inner = _transpose_of(reshape.operands[0])
        if inner is None or not (inner.parent is reshape.parent is op.parent):
            return
        source = shaped_type(reshape.operands[0].type).shape
        targets = reshape_targets(source, reshape.params()["shape"],
                                  shaped_type(reshape.results[0].type).shape)
        groups = None if targets is None else axis_groups(source, targets)
        if groups is None:
            return
        x = inner.operands[0]
        first = tuple(inner.params()["perm"])
        last = tuple(op.params()["perm"])
        options = []  # (the rank the one transpose left has, the steps), the lower first
        if (forwards := reshape_first(first, groups, targets)) is not None:
            shape, moved = forwards
            options.append((len(last), [(reshape_p, {"shape": shape}), (
                transpose_p, {"perm": tuple(moved[a] for a in last)})]))
        if (backwards := transpose_first(last, groups, targets)) is not None:
            moved, shape = backwards
            options.append((len(first), [(transpose_p, {"perm": tuple(
                first[a] for a in moved)}), (reshape_p, {"shape": shape})]))
        for _, steps in sorted(options, key=lambda option: option[0]):
            new = _build(x, steps, op)
            if new is not None:
                operands = list(op.operands)
                rewriter.replace(op, new)
                erase_dead_producers(operands, rewriter)
                return


def _build(x: SSAValue, steps: list[tuple], op: SfOp) -> list[SfOp] | None:
    """The ops applying `steps` (a reshape and a transpose, in some order) to `x`: an
    identity transpose left out, one that only moves axes of size 1 made a reshape; None
    unless the shape rules give exactly the types, ending with `op`'s."""
    ops: list[SfOp] = []
    value, ty = x, shaped_type(x.type)
    for primitive, params in steps:
        if primitive is transpose_p:
            perm = params["perm"]
            if perm == tuple(range(len(perm))):
                continue
            if _moves_only_units(perm, ty.shape):
                primitive, params = reshape_p, {"shape": tuple(
                    -2 - a if ty.shape[a] is None else ty.shape[a] for a in perm)}
        try:
            ty = primitive.shape_rule(ty, **params)
        except (ValueError, TypeError):
            return None
        new = build_op(primitive, [value], params, ty, op.location)
        ops.append(new)
        value = new.results[0]
    if not ops or ops[-1].results[0].type != op.results[0].type:
        return None
    return ops


REGROUP_PATTERNS: tuple[RewritePattern, ...] = (TransposeAcrossReshape(),)
