"""`prepack`: constant filters of a convolution laid out once, at compile time, the way the
compiled gemm reads them.

A compiled convolution copies each panel of its filters (all of k by a tile's columns)
before multiplying by it, once per block of rows and per task: at batch 1 a late layer of
a ResNet has a few dozen rows and megabytes of filters, read a cache line per row of k from
a new page, and the copy took as long as the arithmetic. Where the filters are a constant
(an imported model's weights, a function's captured array), this pass packs them into the
panels in the order the gemm reads them (`primitives.prepacked`) and the op becomes
`conv2d_prepacked`, whose gemm reads the panels in place. The original constant is left
to `prune`; one filter used by several convolutions is packed once.

Only float32 and float64 convolutions whose filters the gemm reads (not those the direct
loops serve: few output channels) are rewritten. A pointwise convolution's numbers do not
change (the gemm sums each output channel in the same order from a panel in place as from
its copy); one of more taps may take the blocked direct loops (`conv.blocked`), which sum
its input channels in chunks, and so round otherwise.

A matmul by constant weights, ``a @ w`` with `w` a (k, n) constant (or its transpose),
is the same product: a 1x1 convolution of a's rows as pixels by `w` as its filters. Where
`a` has at least `MIN_ROWS` rows it becomes that convolution, prepacked, between two
reshapes (views): a dense layer of a batch of one sequence (128 rows) copied its weights'
panels on every call as a convolution did. A product of fewer rows (a decoder's step)
stays a matmul, whose one row is a matrix-vector product. If it reads its weights
transposed (a PyTorch ``Linear`` exported to ONNX is ``Gemm(transB=1)``), it reads a
transposed copy of them instead, made here once: the gemm copies a transposed operand
row-major on every call, which for a classifier's few rows cost more than the
arithmetic itself.

With ``invariant`` (the default pipeline's), filters and weights that a function computes
from variables it never writes are laid out the same way, by ops (a reshape and a
transpose) that `hoist-invariant`, run next, moves into the function's partner: the
runtime keeps their result until a variable changes, so a model reading its weights as
variables reads packed panels as a frozen one does (and holds its weights twice: the
variables, and the panels). Only filters whose panels need no padding (every group's
columns a multiple of a panel's width, as a ResNet's and a transformer's are) are laid
out so, since `hoist-invariant` keeps no value larger than the variables it comes from.
Without `hoist-invariant` (an ahead-of-time library) the layout would be redone on every
call, so only the default pipeline asks for it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from stageflow.core.primitive import ShapedType
from stageflow.ir.builder import build_constant, build_op
from stageflow.ir.dialect import SfOp
from stageflow.ir.types import shaped_type
from stageflow.passes.hoist import hoisted_functions, invariant_ops
from stageflow.passes.registry import register_pass
from stageflow.passes.support import constant_array, is_op
from stageflow.primitives.conv import conv2d_p
from stageflow.primitives.linalg import matmul_add_p, matmul_p
from stageflow.primitives.prepacked import (
    PACKED_DTYPES,
    conv2d_prepacked_p,
    gemm_reads,
    pack,
    panels_shape,
)
from stageflow.primitives.structural import reshape_p, transpose_p

MIN_ROWS = 16  # a matmul of fewer rows keeps its matmul (one row: a matrix-vector product)


@register_pass
@dataclass(frozen=True)
class Prepack(ModulePass):
    """Rewrite ``conv2d(x, constant)`` as ``conv2d_prepacked(x, constant panels)``, and a
    matmul by constant weights of `MIN_ROWS` rows or more as a pointwise one (`_matmul`);
    with `invariant`, filters computed from unwritten variables too, packed by ops.

    Before::

        %w = sf.constant dense<...> : tensor<3x3x64x128xf32>
        %y = sf.conv2d %x, %w {strides = [1, 1], padding = [[1, 1], [1, 1]],
                               dilations = [1, 1]}
            : (tensor<1x56x56x64xf32>, tensor<3x3x64x128xf32>) -> tensor<1x56x56x128xf32>

    After::

        %p = sf.constant dense<...> : tensor<4x576x32xf32>
        %y = sf.conv2d_prepacked %x, %p {filter_shape = [3, 3, 64, 128], strides = [1, 1],
                                         padding = [[1, 1], [1, 1]], dilations = [1, 1]}
            : (tensor<1x56x56x64xf32>, tensor<4x576x32xf32>) -> tensor<1x56x56x128xf32>
    """

    name = "prepack"

    invariant: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        invariant = _invariant_values(op) if self.invariant else frozenset()
        made: dict[tuple[SSAValue, str, int], SSAValue] = {}

        def beside(w: SSAValue, key: tuple[str, int],
                   build: Callable[[], list[Operation]]) -> SSAValue:
            """The last of the ops `build` makes, once per `w` and `key`, inserted after
            `w`'s op."""
            if (w, *key) not in made:
                ops = build()
                for built in ops:
                    built.location = w.owner.location
                ops[-1].results[0].name_hint = w.name_hint
                Rewriter.insert_op(ops, InsertPoint.after(w.owner))
                made[w, *key] = ops[-1].results[0]
            return made[w, *key]

        def panels(w: SSAValue, filter_shape: tuple[int, ...], transposed: bool = False,
                   groups: int = 1) -> SSAValue | None:
            """`w` (read transposed as a matmul's weights) as the panels of filters
            `filter_shape` of `groups` groups, or None where it is neither a constant nor an
            invariant value that packs without padding."""
            key = ("transposed panels" if transposed else "panels", groups)
            weights = constant_array(w)
            if weights is not None:
                return beside(w, key, lambda: [build_constant(pack(
                    np.reshape(weights.T if transposed else weights, filter_shape), groups))])
            dtype = shaped_type(w.type).dtype
            shape = panels_shape(filter_shape, dtype, groups)
            if w not in invariant or math.prod(shape) != math.prod(filter_shape):
                return None
            return beside(w, key, lambda: _packing(w, shape, transposed))

        def stored_transposed(w: SSAValue) -> SSAValue | None:
            """`w`, a constant matrix, transposed as it is stored, or None."""
            weights = constant_array(w)
            if weights is None:
                return None
            return beside(w, ("transposed", 1),
                          lambda: [build_constant(np.ascontiguousarray(weights.T))])

        for candidate in list(op.walk()):
            if is_op(candidate, conv2d_p):
                _conv(candidate, panels)
            elif is_op(candidate, matmul_p) or is_op(candidate, matmul_add_p):
                # a matmul that stays one (too few rows, or an addend) reads its weights
                # as they are stored
                if not (is_op(candidate, matmul_p) and _matmul(candidate, panels)):
                    _untranspose(candidate, stored_transposed)


Panels = Callable[..., SSAValue | None]


def _invariant_values(module: ModuleOp) -> frozenset[SSAValue]:
    """The values `hoist-invariant` may move out of the functions it gives partners."""
    return frozenset(result for function in hoisted_functions(module)
                     for found in invariant_ops(function) for result in found.results)


def _packing(w: SSAValue, shape: tuple[int, int, int], transposed: bool) -> list[Operation]:
    """The ops laying out `w`, filters (kh, kw, C/G, O) or a matmul's weights (k, n), or
    (n, k) read `transposed`, as `shape`'s panels (count, k, width), none of them padded:
    the columns in runs of a panel's width, the runs one after another."""
    count, depth, width = shape
    dtype = shaped_type(w.type).dtype
    runs = (count, width, depth) if transposed else (depth, count, width)
    cut = build_op(reshape_p, [w], {"shape": runs}, ShapedType(runs, dtype))
    laid = build_op(transpose_p, [cut.results[0]], {"perm": (0, 2, 1) if transposed else (1, 0, 2)},
                    ShapedType(shape, dtype))
    return [cut, laid]


def _conv(conv: SfOp, panels: Panels) -> None:
    """``conv2d(x, filters)`` as ``conv2d_prepacked`` where the gemm reads the filters."""
    x, w = conv.operands
    w_type = shaped_type(w.type)
    params = conv.params()
    groups = params.get("feature_group_count", 1)
    if (w_type.dtype not in PACKED_DTYPES or None in w_type.shape
            or not gemm_reads(w_type.shape, w_type.dtype, params["dilations"], groups)):
        return
    filter_shape = tuple(w_type.shape)
    packed = panels(w, filter_shape, groups=groups)
    if packed is None:
        return
    rewritten = build_op(conv2d_prepacked_p, [x, packed],
                         {"filter_shape": filter_shape, **params}, conv.results[0].type)
    rewritten.location = conv.location
    Rewriter.replace_op(conv, rewritten)


def _matmul(matmul: SfOp, panels: Panels) -> bool:
    """``a @ weights`` (a untransposed, of at least `MIN_ROWS` rows and at most one
    unknown dim) as a pointwise ``conv2d_prepacked`` of a's rows: ``reshape(conv(reshape(a,
    (1, rows, 1, k)), panels), a's leading dims + (n,))``."""
    a, w = matmul.operands
    w_type = shaped_type(w.type)
    params = matmul.params()
    a_type = shaped_type(a.type)
    if (len(w_type.shape) != 2 or None in w_type.shape or w_type.dtype not in PACKED_DTYPES
            or params["transpose_a"] or a_type.shape[-1] is None
            or a_type.shape[:-1].count(None) > 1
            or math.prod(d for d in a_type.shape[:-1] if d is not None) < MIN_ROWS):
        return False
    depth, columns = w_type.shape[::-1] if params["transpose_b"] else w_type.shape
    filter_shape = (1, 1, depth, columns)
    packed = panels(w, filter_shape, params["transpose_b"])
    if packed is None:
        return False
    rows = None if None in a_type.shape[:-1] else math.prod(a_type.shape[:-1])
    images = build_op(reshape_p, [a], {"shape": (1, -1 if rows is None else rows, 1, depth)},
                      ShapedType((1, rows, 1, depth), a_type.dtype))
    conv = build_op(conv2d_prepacked_p, [images.results[0], packed],
                    {"filter_shape": filter_shape, "strides": (1, 1),
                     "padding": ((0, 0), (0, 0)), "dilations": (1, 1)},
                    ShapedType((1, rows, 1, columns), a_type.dtype))
    shape = tuple(-1 if d is None else d for d in a_type.shape[:-1]) + (columns,)
    result = build_op(reshape_p, [conv.results[0]], {"shape": shape}, matmul.results[0].type)
    for made in (images, conv, result):
        made.location = matmul.location
    Rewriter.insert_op([images, conv], InsertPoint.before(matmul))
    Rewriter.replace_op(matmul, result)
    return True


def _untranspose(matmul: SfOp, stored_transposed: Callable[..., SSAValue | None]) -> None:
    """A matmul (or matmul_add) that reads constant weights transposed reads a transposed
    copy of them as they are: the gemm would otherwise transpose them on every call (a
    PyTorch ``Linear`` exported to ONNX is ``Gemm(transB=1)``). Weights read from variables
    keep their transposed reads: a decoder's step of a few rows reads them in place, and a
    kept copy would hold its weights twice."""
    params = matmul.params()
    w = matmul.operands[1]
    shape = shaped_type(w.type).shape
    if not params["transpose_b"] or len(shape) != 2 or None in shape:
        return
    transposed = stored_transposed(w)
    if transposed is None:
        return
    operands = list(matmul.operands)
    operands[1] = transposed
    rewritten = build_op(matmul.primitive, operands, {**params, "transpose_b": False},
                         matmul.results[0].type)
    rewritten.location = matmul.location
    Rewriter.replace_op(matmul, rewritten)
