"""The layout rules of `simplify`: transposes sunk below the ops that do not care about the
order of axes, so that the transposes a layout change puts around each op meet and cancel.

A model written for channels-first (ONNX's and PyTorch's NCHW) runs on stageflow's
channels-last convolutions through a transpose into NHWC before each one and back after
it. Between two convolutions stand a bias add, a relu, a residual add, a concat, the
strided slices of a pooling window: each commutes with a transpose. Moving the transpose
below them (``relu(transpose(x, p))`` -> ``transpose(relu(x), p)``) brings the one after a
convolution next to the one before the next, where `TransposeChain` composes them into
nothing. A rewrite only happens when it removes at least as many transposes as it makes:
one transposed operand used only there (the other operands are transposed the same way,
or are constants, transposed at compile time, or scalars), and one transpose made below.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from stageflow.core.primitive import ShapedType
from stageflow.ir.builder import build_constant, build_op
from stageflow.ir.dialect import ElementwiseOp, SfOp
from stageflow.ir.types import shaped_type
from stageflow.passes.support import (
    constant_array,
    erase_dead_producers,
    inferred_types_match,
    is_op,
)
from stageflow.primitives.reduction import (
    reduce_max_p,
    reduce_min_p,
    reduce_prod_p,
    reduce_sum_p,
)
from stageflow.primitives.structural import concat_p, pad_p, slice_p, transpose_p

Perm = tuple[int, ...]
REDUCTIONS = (reduce_sum_p, reduce_prod_p, reduce_max_p, reduce_min_p)


def _transpose_of(value: SSAValue) -> tuple[SSAValue, Perm] | None:
    """(x, p) when `value` is ``transpose(x, p)``."""
    owner = value.owner
    if is_op(owner, transpose_p):
        return owner.operands[0], tuple(owner.params()["perm"])
    return None


def inverse_permutation(perm: Perm) -> Perm:
    """The permutation that undoes `perm`: ``transpose(transpose(x, p), inverse(p)) == x``.

    >>> inverse_permutation((0, 2, 3, 1))
    (0, 3, 1, 2)
    """
    inverse = [0] * len(perm)
    for i, axis in enumerate(perm):
        inverse[axis] = i
    return tuple(inverse)


def _untransposed_type(ty: ShapedType, perm: Perm) -> ShapedType:
    """The type whose transpose by `perm` is `ty`."""
    inverse = inverse_permutation(perm)
    return ShapedType(tuple(ty.shape[inverse[axis]] for axis in range(len(perm))), ty.dtype)


def _only_use(value: SSAValue) -> bool:
    return sum(1 for _ in value.uses) == 1


class _Sink(RewritePattern):
    """The shared rewrite: `op` applied to the untransposed operands, then one transpose."""

    def sink(self, op: SfOp, operands: Sequence[SSAValue], params: dict, perm: Perm,
             rewriter: PatternRewriter) -> None:
        result = shaped_type(op.results[0].type)
        inner = build_op(op.primitive, operands, params, _untransposed_type(result, perm),
                         op.location)
        if not inferred_types_match(inner):
            return
        rewriter.insert(inner)
        outer = build_op(transpose_p, [inner.results[0]], {"perm": perm},
                         op.results[0].type, op.location)
        old = list(op.operands)
        rewriter.replace(op, outer)
        erase_dead_producers(old, rewriter)



class TransposeBelowElementwise(_Sink):
    """``f(transpose(x, p), transpose(y, p), c)`` -> ``transpose(f(x, y, c'), p)`` for an
    elementwise `f`, `c` a constant (transposed at compile time) or a scalar."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, ElementwiseOp) or op.primitive.stateful or len(op.results) != 1:
            return
        rank = len(shaped_type(op.results[0].type).shape)
        found = [_transpose_of(v) for v in op.operands]
        perms = {p for t in found if t is not None for p in [t[1]]}
        if len(perms) != 1:
            return
        (perm,) = perms
        if len(perm) != rank or not any(
                t is not None and _only_use(v) for t, v in zip(found, op.operands, strict=True)):
            return
        operands = []
        for value, transposed in zip(op.operands, found, strict=True):
            if transposed is not None:
                operands.append(transposed[0])
                continue
            moved = _constant_untransposed(value, perm, rewriter)
            if moved is None:
                return
            operands.append(moved)
        self.sink(op, operands, op.params(), perm, rewriter)


def _constant_untransposed(value: SSAValue, perm: Perm,
                           rewriter: PatternRewriter) -> SSAValue | None:
    """A scalar as it is; a constant broadcast to `perm`'s rank and transposed by its
    inverse (a new constant); None for any other value."""
    ty = shaped_type(value.type)
    if not ty.shape:
        return value
    array = constant_array(value)
    if array is None or array.ndim > len(perm):
        return None
    full = array.reshape((1,) * (len(perm) - array.ndim) + array.shape)
    constant = build_constant(np.ascontiguousarray(np.transpose(full, inverse_permutation(perm))),
                              array.dtype, value.owner.location)
    rewriter.insert(constant)
    return constant.results[0]


class TransposeBelowConcat(_Sink):
    """``concat([transpose(x, p), transpose(y, p)], a)`` -> ``transpose(concat([x, y],
    p[a]), p)``."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not is_op(op, concat_p):
            return
        found = [_transpose_of(v) for v in op.operands]
        if any(t is None for t in found) or len({t[1] for t in found}) != 1:
            return
        if not any(_only_use(v) for v in op.operands):
            return
        perm = found[0][1]
        axis = op.params()["axis"] % len(perm)
        self.sink(op, [t[0] for t in found], {"axis": perm[axis]}, perm, rewriter)


class TransposeBelowWindow(_Sink):
    """``slice(transpose(x, p), s)`` and ``pad(transpose(x, p), q)`` -> the slice or pad of
    `x` along the axes `p` names, then the transpose."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not (is_op(op, slice_p) or is_op(op, pad_p)):
            return
        transposed = _transpose_of(op.operands[0])
        if transposed is None or not _only_use(op.operands[0]):
            return
        source, perm = transposed
        params = dict(op.params())
        key = "slices" if op.primitive is slice_p else "pads"
        per_axis = params[key]
        moved = [None] * len(perm)
        for i, axis in enumerate(perm):
            moved[axis] = per_axis[i]
        params[key] = tuple(moved)
        self.sink(op, [source, *op.operands[1:]], params, perm, rewriter)


class TransposeBelowReduction(_Sink):
    """``reduce(transpose(x, p), axes)`` -> the reduction of `x` over the axes `p` names,
    then the transpose of what is left (none where the axes left keep their order): a
    channels-first global pooling (``reduce_sum(transpose(y, NHWC -> NCHW), [2, 3])``)
    reduces the NHWC result of the last convolution over its pixels instead of
    transposing the whole of it first. Each output reduces the same elements; a max or a
    min is exact in any order, a sum or a product may add them in another (the
    reductions' results match NumPy's to rounding either way: `lowered.reduction`)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, SfOp) or op.primitive not in REDUCTIONS:
            return
        transposed = _transpose_of(op.operands[0])
        if transposed is None or not _only_use(op.operands[0]):
            return
        source, perm = transposed
        params = op.params()
        axes, keepdims = tuple(params["axes"]), params["keepdims"]
        moved = {"axes": tuple(sorted(perm[axis] for axis in axes)), "keepdims": keepdims}
        if keepdims:
            self.sink(op, [source], moved, perm, rewriter)
            return
        kept = [perm[axis] for axis in range(len(perm)) if axis not in axes]
        self.sink(op, [source], moved, tuple(sorted(kept).index(axis) for axis in kept),
                  rewriter)


LAYOUT_PATTERNS: tuple[RewritePattern, ...] = (
    TransposeBelowElementwise(),
    TransposeBelowConcat(),
    TransposeBelowWindow(),
    TransposeBelowReduction(),
)
