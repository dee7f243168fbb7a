"""`conv2d_prepacked`: conv2d whose filters were laid out at compile time the way the
compiled convolution's gemm reads them.

The gemm (`codegen.lowered.conv.gemm`) multiplies a block of columns of the filters (a
*panel*: all of k by a vector tile's width) from a copy it makes per block of rows: the
filters' rows lie a row of O elements apart, so that copy reads a cache line or two from a
new page per k, at memory's latency rather than its bandwidth. At batch 1, where a
convolution has few rows (a 7x7 image: 49) and many filters (512 x 2048), the copy cost as
much as the arithmetic. Filters that are constants (an inference model's weights) are
copied once instead, by the `prepack` pass: into panels of `panel_width` columns, one
after another, each all of k by its columns, zero beyond the last filter. The gemm then
reads each panel in order, as the hardware prefetches it, and copies nothing.

The panel's width is 128 bytes whatever the target (32 float32s, 16 float64s): a multiple
of every vector tile's width (16 to 32 float32 columns), so that the IR, and a library
built from it, does not depend on the machine that runs it.

Grouped filters (`feature_group_count` G: (kh, kw, C/G, O)) are packed group by group, each
group's O/G columns into panels of their own, so that every group's gemm starts at a
panel's first column: G * ceil(O/G / width) panels of kh*kw*C/G rows.

Only what the gemm serves is packed: the direct loops (few output channels, one group)
read the filters in their own layout, by the rule below, which they import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.dims import D, DimArith
from stageflow.core.op_facts import Family, LoweredBy
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.shapes import format_shape
from stageflow.primitives.autodiff import floating_only, reshape, wanted
from stageflow.primitives.conv import (
    Padding,
    Pair,
    conv2d_filter_gradient,
    conv2d_input_gradient,
    conv2d_p,
    grouped,
)
from stageflow.primitives.structural import pad_p, slice_p, transpose_p

PANEL_BYTES = 128
PACKED_DTYPES = (dtypes.float32, dtypes.float64)
# The direct loops' rule (`codegen.lowered.conv.direct`): they serve a filter whose taps
# along a row are one image column apart (no dilation across), of a multiple of
# `DIRECT_VECTOR_BYTES`' worth of output channels, at most two of the target's widest
# blocks of channels and at least `DIRECT_MAX_OUT_CHANNELS` (`direct_max_out_channels`).
DIRECT_MAX_OUT_CHANNELS = 32
DIRECT_VECTOR_BYTES = 32
DIRECT_WIDEST_BLOCK_BYTES = 128  # two AVX-512 vectors: the widest block of any target


def direct_max_out_channels(dtype: np.dtype, widest_block_bytes: int = DIRECT_WIDEST_BLOCK_BYTES,
                            least: int = DIRECT_MAX_OUT_CHANNELS) -> int:
    """The most output channels the direct loops take where their widest block of channels
    is `widest_block_bytes` (by default the widest of any target, for rules that must not
    depend on the machine): two such blocks, and at least `least`.

    >>> direct_max_out_channels(np.float32), direct_max_out_channels(np.float32, 64)
    (64, 32)
    """
    return max(least, 2 * widest_block_bytes // np.dtype(dtype).itemsize)


def panel_width(dtype: np.dtype) -> int:
    """Columns per panel: `PANEL_BYTES` of the dtype."""
    return PANEL_BYTES // np.dtype(dtype).itemsize


def gemm_reads(filter_shape: Sequence[int], dtype: np.dtype, dilations: Pair,
               groups: int = 1) -> bool:
    """Whether compiled conv2d multiplies these filters by its gemm (else the direct loops
    read them): what is worth packing. Grouped filters are always the gemm's."""
    out_channels = filter_shape[3]
    lanes = DIRECT_VECTOR_BYTES // np.dtype(dtype).itemsize
    direct = (groups == 1 and dilations[1] == 1 and out_channels % lanes == 0
              and out_channels <= direct_max_out_channels(dtype))
    return not direct


def panels_shape(filter_shape: Sequence[int], dtype: np.dtype,
                 groups: int = 1) -> tuple[int, int, int]:
    """(panels, k, width) of filters (kh, kw, C/G, O) of `groups` groups packed: each
    group's O/G columns in panels of their own."""
    kh, kw, channels, out_channels = filter_shape
    width = panel_width(dtype)
    return groups * -(-(out_channels // groups) // width), kh * kw * channels, width


def pack(filters: np.ndarray, groups: int = 1) -> np.ndarray:
    """HWIO filters as the gemm's panels: (G * ceil(O/G / width), kh*kw*C/G, width), each
    group's columns from a panel's first, the columns past its last zero."""
    count, depth, width = panels_shape(filters.shape, filters.dtype, groups)
    per_group = count // groups
    columns = filters.shape[3] // groups
    matrix = np.zeros((depth, groups, per_group * width), filters.dtype)
    matrix[:, :, :columns] = filters.reshape(depth, groups, columns)
    return np.ascontiguousarray(matrix.reshape(depth, count, width).transpose(1, 0, 2))


def unpack(panels: np.ndarray, filter_shape: Sequence[int], groups: int = 1) -> np.ndarray:
    """The HWIO filters `pack` laid out as `panels`."""
    count, depth, width = panels.shape
    matrix = panels.transpose(1, 0, 2).reshape(depth, groups, -1)
    columns = matrix[:, :, :filter_shape[3] // groups]
    return np.ascontiguousarray(columns).reshape(tuple(filter_shape))


def _dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *, filter_shape: tuple,
          strides: Pair, padding: Padding, dilations: Pair,
          feature_group_count: int = 1) -> list[D]:
    """conv2d's dims, the filters' from `filter_shape`."""
    return conv2d_p.dims(d, [operands[0], [d.const(v) for v in filter_shape]],
                         strides=strides, padding=padding, dilations=dilations)


def _rule(x: ShapedType, panels: ShapedType, *, filter_shape: tuple, strides: Pair,
          padding: Padding, dilations: Pair, feature_group_count: int = 1) -> ShapedType:
    if panels.dtype not in PACKED_DTYPES or len(filter_shape) != 4:
        raise TypeError(f"conv2d_prepacked: float32 or float64 filters (kh, kw, C, O), got "
                        f"{panels.dtype.name} and {filter_shape}")
    result = conv2d_p.shape_rule(x, ShapedType(tuple(filter_shape), panels.dtype),
                                 strides=strides, padding=padding, dilations=dilations,
                                 **grouped(feature_group_count))
    want = panels_shape(filter_shape, panels.dtype, feature_group_count)
    if len(panels.shape) != 3 or any(d is not None and d != w
                                      for d, w in zip(panels.shape, want, strict=True)):
        raise ValueError(f"conv2d_prepacked: filters {tuple(filter_shape)} of "
                         f"{feature_group_count} group(s) pack into panels "
                         f"{format_shape(want)}, got {format_shape(panels.shape)}")
    return result


def _conv2d_prepacked(x, panels, *, filter_shape, strides, padding, dilations,
                      feature_group_count=1):
    """conv2d's kernel on the filters unpacked."""
    return conv2d_p.kernel(x, unpack(np.asarray(panels), filter_shape, feature_group_count),
                           strides=strides, padding=padding, dilations=dilations,
                           feature_group_count=feature_group_count)


conv2d_prepacked_p = Primitive(
    "conv2d_prepacked",
    shape_rule=_rule,
    kernel=_conv2d_prepacked,
    dims=_dims,
    summary="conv2d of filters packed into the compiled gemm's panels (`prepack`)",
    family=Family.LINALG,
    lowered_by=LoweredBy.OP_RULE,
)


def _unpacked(panels: Any, filter_shape: Sequence[int], groups: int) -> Any:
    """`unpack` as ops: each group's panels side by side, the columns past its last cut
    off."""
    count, depth, width = panels.shape
    columns = reshape(transpose_p.bind(panels, perm=(1, 0, 2)),
                      (depth, groups, count // groups * width))
    kept = slice_p.bind(columns, slices=((0, depth, 1), (0, groups, 1),
                                         (0, filter_shape[3] // groups, 1)))
    return reshape(kept, tuple(filter_shape))


def _packed(filters: Any, filter_shape: Sequence[int], count: int, width: int,
            groups: int) -> Any:
    """`pack` as ops: each group's (k, O/G) matrix padded with zero columns, cut into
    panels."""
    kh, kw, channels, out_channels = filter_shape
    depth, columns = kh * kw * channels, out_channels // groups
    padded = pad_p.bind(reshape(filters, (depth, groups, columns)),
                        pads=((0, 0), (0, 0), (0, count // groups * width - columns)),
                        value=0)
    return transpose_p.bind(reshape(padded, (depth, count, width)), perm=(1, 0, 2))


@conv2d_prepacked_p.def_vjp
@floating_only
def _conv2d_prepacked_vjp(cotangents, inputs, outputs, *, filter_shape, strides, padding,
                          dilations, feature_group_count=1):
    """conv2d's gradients, through the filters unpacked; the filters' packed again (the
    padding columns get none)."""
    (g,), (x, panels), (dx, dpanels) = cotangents, inputs, wanted(inputs)
    groups = feature_group_count
    geometry = (strides, padding, dilations, groups)
    filters = _unpacked(panels, filter_shape, groups)
    return [conv2d_input_gradient(g, filters, x.shape, *geometry) if dx else None,
            _packed(conv2d_filter_gradient(x, g, filter_shape[:2], *geometry), filter_shape,
                    panels.shape[0], panels.shape[2], groups) if dpanels else None]
