"""The shape rules of `simplify`: chains of data movement composed, no-op moves removed.

A transpose of a transpose is one transpose (or none), a reshape of a reshape one reshape,
a reshape of a transpose that only moves axes of size 1 a reshape of its operand, a
reshape, broadcast or cast to the type its operand already has moves nothing, and a
gather of a constant run of consecutive indices is a slice (an exported model picks a
fused projection's query, key and value apart with a Gather of 0, 1 and 2). Each
rule builds the replacement with `build_op` and keeps it only if the primitive's shape rule
gives exactly the declared result type, so the result is never less precise than before.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from stageflow.core.primitive import Primitive, ShapedType
from stageflow.ir.builder import build_op
from stageflow.ir.dialect import SfOp
from stageflow.ir.types import shaped_type
from stageflow.passes.support import (
    constant_array,
    erase_dead_producers,
    inferred_types_match,
    is_op,
    same_type,
    splat_value,
)
from stageflow.primitives.elementwise import cast_p, select_p
from stageflow.primitives.structural import (
    broadcast_to_p,
    gather_p,
    reshape_p,
    slice_p,
    transpose_p,
)


def replace_by(op: Operation, value: SSAValue, rewriter: PatternRewriter) -> bool:
    """Replace `op`'s one result by `value` if their types are identical; whether it did.
    Ops that fed `op` and are unused afterwards are erased with it."""
    if len(op.results) != 1 or not same_type(value, op.results[0]):
        return False
    operands = list(op.operands)
    rewriter.replace(op, [], [value])
    erase_dead_producers(operands, rewriter)
    return True


def _replace_by_op(op: Operation, new: SfOp, rewriter: PatternRewriter) -> bool:
    """Replace `op` by the unattached op `new` if `new`'s types are exactly `op`'s."""
    if not inferred_types_match(new) or new.result_types != op.result_types:
        return False
    operands = list(op.operands)
    rewriter.replace(op, new)
    erase_dead_producers(operands, rewriter)
    return True


def _producer(value: SSAValue, primitive: Primitive) -> SfOp | None:
    owner = value.owner
    return owner if is_op(owner, primitive) else None


class TransposeChain(RewritePattern):
    """``transpose(transpose(x, p), q)`` -> ``transpose(x, p[q])``; identity perms -> ``x``."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not is_op(op, transpose_p):
            return
        perm = tuple(op.params()["perm"])
        if perm == tuple(range(len(perm))):
            replace_by(op, op.operands[0], rewriter)
            return
        inner = _producer(op.operands[0], transpose_p)
        if inner is None:
            return
        inner_perm = inner.params()["perm"]
        composed = tuple(inner_perm[axis] for axis in perm)
        source = inner.operands[0]
        if composed == tuple(range(len(composed))):
            replace_by(op, source, rewriter)
            return
        new = build_op(transpose_p, [source], {"perm": composed}, op.result_types, op.location)
        _replace_by_op(op, new, rewriter)


class ReshapeChain(RewritePattern):
    """``reshape(reshape(x, s), t)`` -> ``reshape(x, t)`` (row-major order composes); dims
    of `t` that name the inner result's dims (``-2 - k``) name what `s` gave them, and the
    chain stays where that was inferred (a -1)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not is_op(op, reshape_p):
            return
        inner = _producer(op.operands[0], reshape_p)
        if inner is None:
            return
        inner_shape = inner.params()["shape"]
        shape = []
        for n in op.params()["shape"]:
            if n <= -2:
                n = inner_shape[-2 - n]
                if n == -1:
                    return
            shape.append(n)
        if -1 in shape and any(n <= -2 for n in shape):
            return
        new = build_op(
            reshape_p, [inner.operands[0]], {"shape": tuple(shape)}, op.result_types,
            op.location
        )
        _replace_by_op(op, new, rewriter)


class ReshapeOfUnitTranspose(RewritePattern):
    """``reshape(transpose(x, p), s)`` -> ``reshape(x, s)`` where `p` moves only axes of
    size 1 past the others, which keep their order: both list x's elements in the same
    row-major order (a global pooling's (1, 1, 1, C) result transposed to (1, C, 1, 1),
    then flattened)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not is_op(op, reshape_p):
            return
        inner = _producer(op.operands[0], transpose_p)
        if inner is None:
            return
        perm = inner.params()["perm"]
        dims = shaped_type(inner.operands[0].type).shape
        long = [axis for axis in perm if dims[axis] != 1]
        if long != sorted(long):
            return
        shape = tuple(-2 - perm[-2 - n] if n <= -2 else n for n in op.params()["shape"])
        new = build_op(reshape_p, [inner.operands[0]], {"shape": shape}, op.result_types,
                       op.location)
        _replace_by_op(op, new, rewriter)


class NoOpMove(RewritePattern):
    """``reshape``, ``broadcast_to`` or ``cast`` to the operand's own type -> the operand.

    The declared type alone is not enough: the verifier accepts ``tensor<?x?xf32>`` for a
    reshape of a ``tensor<?x?xf32>`` to ``[2, 8]``, which is not a no-op, so the shape rule
    must also infer exactly the declared type.
    """

    PRIMITIVES = frozenset({reshape_p, broadcast_to_p, cast_p})

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, SfOp) or op.primitive not in self.PRIMITIVES:
            return
        if same_type(op.operands[0], op.results[0]) and inferred_types_match(op):
            replace_by(op, op.operands[0], rewriter)


class GatherOfRun(RewritePattern):
    """``gather(x, constant [k, k+1, ..., k+n-1], axis)`` -> ``slice(x, k:k+n along axis)``,
    and a gather of one constant index ``k`` -> that slice reshaped without the axis: the
    same elements, moved as a strided copy (or none, where a program aliases a slice) rather
    than looked up one by one. Indices out of range stay a gather, whose kernel raises."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not is_op(op, gather_p):
            return
        x, indices = op.operands
        picked = constant_array(indices)
        shape = shaped_type(x.type).shape
        if picked is None or picked.ndim > 1 or picked.size == 0:
            return
        axis = op.params()["axis"] % len(shape)
        size = shape[axis]
        if size is None:
            return
        flat = picked.reshape(-1).astype(np.int64)
        flat = np.where(flat < 0, flat + size, flat)
        first = int(flat[0])
        if (flat < 0).any() or (flat >= size).any() or not np.array_equal(
                flat, np.arange(first, first + flat.size)):
            return
        slices = [(None, None, None)] * len(shape)
        slices[axis] = (first, first + flat.size, 1)
        taken = tuple(flat.size if a == axis else d for a, d in enumerate(shape))
        element = shaped_type(x.type).dtype
        sliced = build_op(slice_p, [x], {"slices": tuple(slices)}, ShapedType(taken, element),
                          op.location)
        if picked.ndim == 1:
            _replace_by_op(op, sliced, rewriter)
            return
        kept = tuple(-1 if d is None else d for a, d in enumerate(shape) if a != axis)
        result = build_op(reshape_p, [sliced.results[0]], {"shape": kept}, op.result_types,
                          op.location)
        if not inferred_types_match(result) or result.result_types != op.result_types:
            return
        rewriter.insert(sliced, InsertPoint.before(op))
        operands = list(op.operands)
        rewriter.replace(op, result)
        erase_dead_producers(operands, rewriter)


class SelectConstantCondition(RewritePattern):
    """``select(true, x, y)`` -> ``x``, ``select(false, x, y)`` -> ``y`` (all-equal
    conditions only, and only if the chosen branch already has the result type)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not is_op(op, select_p):
            return
        condition, if_true, if_false = op.operands
        array = constant_array(condition)
        value = None if array is None else splat_value(array)
        if value is not None:
            replace_by(op, if_true if bool(value) else if_false, rewriter)


SHAPE_PATTERNS: tuple[RewritePattern, ...] = (
    TransposeChain(),
    ReshapeChain(),
    ReshapeOfUnitTranspose(),
    NoOpMove(),
    GatherOfRun(),
    SelectConstantCondition(),
)
