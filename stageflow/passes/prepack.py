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
loops serve: few output channels) are rewritten, so the pass changes no numbers: the
gemm sums each output channel in the same order from a panel in place as from its copy.

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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from stageflow.core.primitive import ShapedType
from stageflow.ir.builder import build_constant, build_op
from stageflow.ir.dialect import ConstantOp, SfOp
from stageflow.ir.types import shaped_type
from stageflow.passes.registry import register_pass
from stageflow.passes.support import constant_array, is_op
from stageflow.primitives.conv import conv2d_p
from stageflow.primitives.linalg import matmul_add_p, matmul_p
from stageflow.primitives.prepacked import PACKED_DTYPES, conv2d_prepacked_p, gemm_reads, pack
from stageflow.primitives.structural import reshape_p

MIN_ROWS = 16  # a matmul of fewer rows keeps its matmul (one row: a matrix-vector product)


@register_pass
@dataclass(frozen=True)
class Prepack(ModulePass):
    """Rewrite ``conv2d(x, constant)`` as ``conv2d_prepacked(x, constant panels)``, and a
    matmul by constant weights of `MIN_ROWS` rows or more as a pointwise one (`_matmul`).

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

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        packed: dict[tuple[SSAValue, bool, int], ConstantOp] = {}

        def panels(w: SSAValue, filters: np.ndarray, transposed: bool = False,
                   groups: int = 1) -> SSAValue:
            """The packed constant of `filters` (the constant `w`, read transposed as a
            matmul's; of `groups` feature groups), made once, beside `w`."""
            if (w, transposed, groups) not in packed:
                constant = build_constant(pack(filters, groups))
                constant.location = w.owner.location
                constant.result.name_hint = w.name_hint
                Rewriter.insert_op(constant, InsertPoint.after(w.owner))
                packed[w, transposed, groups] = constant
            return packed[w, transposed, groups].result

        transposed: dict[SSAValue, ConstantOp] = {}

        def stored_transposed(w: SSAValue, weights: np.ndarray) -> SSAValue:
            """The constant of `weights` transposed, made once, beside `w`."""
            if w not in transposed:
                constant = build_constant(np.ascontiguousarray(weights.T))
                constant.location = w.owner.location
                constant.result.name_hint = w.name_hint
                Rewriter.insert_op(constant, InsertPoint.after(w.owner))
                transposed[w] = constant
            return transposed[w].result

        for candidate in list(op.walk()):
            if is_op(candidate, conv2d_p):
                _conv(candidate, panels)
            elif is_op(candidate, matmul_p) or is_op(candidate, matmul_add_p):
                # a matmul that stays one (too few rows, or an addend) reads its weights
                # as they are stored
                if not (is_op(candidate, matmul_p) and _matmul(candidate, panels)):
                    _untranspose(candidate, stored_transposed)


Panels = Callable[..., SSAValue]


def _conv(conv: SfOp, panels: Panels) -> None:
    """``conv2d(x, constant)`` as ``conv2d_prepacked`` where the gemm reads the filters."""
    x, w = conv.operands
    filters = constant_array(w)
    params = conv.params()
    groups = params.get("feature_group_count", 1)
    if (filters is None or filters.dtype not in PACKED_DTYPES
            or not gemm_reads(filters.shape, filters.dtype, params["dilations"], groups)):
        return
    rewritten = build_op(conv2d_prepacked_p, [x, panels(w, filters, groups=groups)],
                         {"filter_shape": tuple(filters.shape), **params}, conv.results[0].type)
    rewritten.location = conv.location
    Rewriter.replace_op(conv, rewritten)


def _matmul(matmul: SfOp, panels: Panels) -> bool:
    """``a @ constant`` (a untransposed, of at least `MIN_ROWS` rows and at most one
    unknown dim) as a pointwise ``conv2d_prepacked`` of a's rows: ``reshape(conv(reshape(a,
    (1, rows, 1, k)), panels), a's leading dims + (n,))``."""
    a, w = matmul.operands
    weights = constant_array(w)
    params = matmul.params()
    a_type = shaped_type(a.type)
    if (weights is None or weights.ndim != 2 or weights.dtype not in PACKED_DTYPES
            or params["transpose_a"] or a_type.shape[-1] is None
            or a_type.shape[:-1].count(None) > 1
            or math.prod(d for d in a_type.shape[:-1] if d is not None) < MIN_ROWS):
        return False
    matrix = weights.T if params["transpose_b"] else weights
    depth, columns = matrix.shape
    filter_shape = (1, 1, depth, columns)
    rows = None if None in a_type.shape[:-1] else math.prod(a_type.shape[:-1])
    images = build_op(reshape_p, [a], {"shape": (1, -1 if rows is None else rows, 1, depth)},
                      ShapedType((1, rows, 1, depth), a_type.dtype))
    conv = build_op(conv2d_prepacked_p, [images.results[0],
                                         panels(w, matrix.reshape(filter_shape),
                                                params["transpose_b"])],
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


def _untranspose(matmul: SfOp, stored_transposed: Callable[..., SSAValue]) -> None:
    """A matmul (or matmul_add) that reads constant weights transposed reads a transposed
    copy of them as they are: the gemm would otherwise transpose them on every call (a
    PyTorch ``Linear`` exported to ONNX is ``Gemm(transB=1)``)."""
    params = matmul.params()
    w = matmul.operands[1]
    weights = constant_array(w)
    if not params["transpose_b"] or weights is None or weights.ndim != 2:
        return
    operands = list(matmul.operands)
    operands[1] = stored_transposed(w, weights)
    rewritten = build_op(matmul.primitive, operands, {**params, "transpose_b": False},
                         matmul.results[0].type)
    rewritten.location = matmul.location
    Rewriter.replace_op(matmul, rewritten)
