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
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from stageflow.ir.builder import build_constant, build_op
from stageflow.ir.dialect import ConstantOp
from stageflow.passes.registry import register_pass
from stageflow.passes.support import constant_array, is_op
from stageflow.primitives.conv import conv2d_p
from stageflow.primitives.prepacked import PACKED_DTYPES, conv2d_prepacked_p, gemm_reads, pack


@register_pass
@dataclass(frozen=True)
class Prepack(ModulePass):
    """Rewrite ``conv2d(x, constant)`` as ``conv2d_prepacked(x, constant panels)``.

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
        packed: dict[SSAValue, ConstantOp] = {}
        for conv in [o for o in op.walk() if is_op(o, conv2d_p)]:
            x, w = conv.operands
            filters = constant_array(w)
            params = conv.params()
            if (filters is None or filters.dtype not in PACKED_DTYPES
                    or not gemm_reads(filters.shape, filters.dtype, params["dilations"])):
                continue
            if w not in packed:
                constant = build_constant(pack(filters))
                constant.location = w.owner.location
                constant.result.name_hint = w.name_hint
                Rewriter.insert_op(constant, InsertPoint.after(w.owner))
                packed[w] = constant
            rewritten = build_op(conv2d_prepacked_p, [x, packed[w].result],
                                 {"filter_shape": tuple(filters.shape), **params},
                                 conv.results[0].type)
            rewritten.location = conv.location
            Rewriter.replace_op(conv, rewritten)
