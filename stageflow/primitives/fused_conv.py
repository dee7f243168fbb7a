"""`conv2d_fused`: a convolution whose result goes through its elementwise epilogue before it
is stored, ``activation(((conv2d(x, filters) * scale + shift) * second_scale +
second_shift) + residual)``.

An inference network follows nearly every convolution with a per-channel affine map (a
bias, or a batch norm's scale and shift; some exporters add a second one after the batch
norm), often a residual sum and a ReLU. As ops of their
own these read and write the whole result again: at batch 8 a ResNet-50's residual sums
run on tensors larger than the cache. The `fuse-conv` pass makes them this op's epilogue:
the compiled convolution applies it to each tile of sums in registers as it stores them
(`codegen.lowered.conv`), so the result is written once.

The operands after the filters are those the flags name, in this order: `scale`, `shift`,
`second_scale` and `second_shift` (the output channels' own, (O,)), `residual` (the
result's shape). `activation` is
"none" or "relu". The filters are conv2d's (HWIO) or, `packed`, `conv2d_prepacked`'s panels
of `filter_shape`. Each step of the epilogue is the one the unfused ops make, in their
order and dtype, so the numbers are theirs.

In bfloat16 (HWIO filters) the epilogue is a mixed-precision layer's: the per-channel
operands are float32 and their steps compute in float32 on the convolution's rounded
result, rounded to bfloat16 once after the last of them (a batch norm under
``mixed_bfloat16``: the conv's result cast up, scaled and shifted, cast back); the
residual is bfloat16, its sum rounded as a bfloat16 ``add`` rounds it.

The op is made by the compiler after differentiation (its passes run on the traced step,
gradients included) and has no gradient of its own: differentiating it by hand is an error
that says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.dims import D, DimArith
from stageflow.core.op_facts import Family, LoweredBy
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.shapes import format_shape
from stageflow.primitives.conv import Padding, Pair, conv2d_p, grouped
from stageflow.primitives.elementwise import relu_p
from stageflow.primitives.prepacked import PACKED_DTYPES, conv2d_prepacked_p

ACTIVATIONS = ("none", relu_p.name)
EPILOGUE_OPERANDS = ("scale", "shift", "second_scale", "second_shift", "residual")
# Each step: the elementwise op it is, and whether its operand is per channel.
EPILOGUE_STEPS = {"scale": (np.multiply, True), "shift": (np.add, True),
                  "second_scale": (np.multiply, True), "second_shift": (np.add, True),
                  "residual": (np.add, False)}


def epilogue_operands(params: Mapping[str, Any]) -> list[str]:
    """The names of the operands after the filters, in their order, from the op's flags
    (a flag left out is false)."""
    return [name for name in EPILOGUE_OPERANDS if params.get(name, False)]


def _present(*flags: bool) -> list[str]:
    """The names of the operands after the filters, from the flags in their order."""
    return [name for name, flag in zip(EPILOGUE_OPERANDS, flags, strict=True) if flag]


def _conv_rule(x: ShapedType, filters: ShapedType, packed: bool, filter_shape: tuple,
               geometry: dict[str, Any]) -> ShapedType:
    if packed:
        return conv2d_prepacked_p.shape_rule(x, filters, filter_shape=filter_shape,
                                             **geometry)
    if len(filters.shape) != len(filter_shape) or any(
            d is not None and d != f for d, f in zip(filters.shape, filter_shape, strict=True)):
        raise ValueError(f"conv2d_fused: filters {tuple(filter_shape)}, got "
                         f"{format_shape(filters.shape)}")
    return conv2d_p.shape_rule(x, ShapedType(tuple(filter_shape), filters.dtype), **geometry)


def _rule(x: ShapedType, filters: ShapedType, *extras: ShapedType, filter_shape: tuple,
          strides: Pair, padding: Padding, dilations: Pair, packed: bool, scale: bool,
          shift: bool, second_scale: bool = False, second_shift: bool = False,
          residual: bool, activation: str, feature_group_count: int = 1) -> ShapedType:
    geometry = {"strides": strides, "padding": padding, "dilations": dilations,
                **grouped(feature_group_count)}
    result = _conv_rule(x, filters, packed, filter_shape, geometry)
    half = _mixed(result.dtype, packed)
    if result.dtype not in PACKED_DTYPES and not half:
        raise TypeError(f"conv2d_fused: float32 or float64 operands (bfloat16 with HWIO "
                        f"filters), got {result.dtype.name}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"conv2d_fused: activation is one of {ACTIVATIONS}, got "
                         f"{activation!r}")
    names = _present(scale, shift, second_scale, second_shift, residual)
    if len(extras) != len(names):
        raise TypeError(f"conv2d_fused: {len(names)} operand(s) after the filters "
                        f"({', '.join(names) or 'none'}), got {len(extras)}")
    channels = (filter_shape[3],)
    for name, extra in zip(names, extras, strict=True):
        per_channel = EPILOGUE_STEPS[name][1]
        want = channels if per_channel else result.shape
        dtype = dtypes.float32 if half and per_channel else result.dtype
        if extra.dtype != dtype or len(extra.shape) != len(want) or any(
                d is not None and w is not None and d != w
                for d, w in zip(extra.shape, want, strict=True)):
            raise ValueError(f"conv2d_fused: its {name} is {dtype.name}"
                             f"{format_shape(want)}, got {extra.dtype.name}"
                             f"{format_shape(extra.shape)}")
    return result


def _mixed(dtype: np.dtype, packed: bool) -> bool:
    """Whether a fused conv of result `dtype` has the mixed-precision epilogue."""
    return dtype == dtypes.bfloat16 and not packed


def _dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *, filter_shape: tuple,
          strides: Pair, padding: Padding, dilations: Pair, **_: Any) -> list[D]:
    """conv2d's dims, the filters' from `filter_shape`."""
    return conv2d_p.dims(d, [operands[0], [d.const(v) for v in filter_shape]],
                         strides=strides, padding=padding, dilations=dilations)


def _conv2d_fused(x, filters, *extras, filter_shape, strides, padding, dilations, packed,
                  scale, shift, second_scale=False, second_shift=False, residual, activation,
                  feature_group_count=1):
    """The convolution's kernel, then each step of the epilogue as its own op computes it."""
    geometry = {"strides": strides, "padding": padding, "dilations": dilations,
                "feature_group_count": feature_group_count}
    if packed:
        y = conv2d_prepacked_p.kernel(x, filters, filter_shape=filter_shape, **geometry)
    else:
        y = conv2d_p.kernel(x, filters, **geometry)
    names = _present(scale, shift, second_scale, second_shift, residual)
    mixed = _mixed(np.dtype(x.dtype), packed)
    if mixed:
        y = np.asarray(y, dtypes.float32)
    for name, value in zip(names, extras, strict=True):
        if mixed and name == "residual":
            y = np.asarray(y, x.dtype).astype(dtypes.float32)
        y = EPILOGUE_STEPS[name][0](y, value)
    if activation == relu_p.name:
        y = relu_p.kernel(y)
    return np.asarray(y, x.dtype)


conv2d_fused_p = Primitive(
    "conv2d_fused",
    shape_rule=_rule,
    kernel=_conv2d_fused,
    dims=_dims,
    summary="conv2d (of HWIO or packed filters) with its elementwise epilogue: "
            "activation((conv * scale + shift) * second_scale + second_shift + residual), "
            "made by the fuse-conv pass",
    family=Family.LINALG,
    lowered_by=LoweredBy.OP_RULE,
)


@conv2d_fused_p.def_vjp
def _conv2d_fused_vjp(cotangents, inputs, outputs, **params):
    # Made by the compiler from a step already differentiated: nothing differentiates it.
    raise NotImplementedError("conv2d_fused has no gradient: the fuse-conv pass makes it "
                              "after differentiation; differentiate the conv2d and the "
                              "elementwise ops it was made of")


__all__ = ["ACTIVATIONS", "EPILOGUE_OPERANDS", "EPILOGUE_STEPS", "conv2d_fused_p",
           "epilogue_operands"]
