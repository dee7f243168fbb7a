"""`fuse-conv`: a convolution and the elementwise ops that finish its result, as one
`conv2d_fused` that applies them to its sums before it stores them.

An imported network follows nearly every convolution by a per-channel affine map (a bias,
a batch norm's scale and shift), often a residual sum, and a ReLU. `fuse` would make them
one kernel, which still reads the convolution's whole result back and writes it again: at
batch 8 a ResNet-50's residual sums run on tensors larger than the cache. Here they become
the convolution's epilogue (`primitives.fused_conv`), applied in registers.

From a `conv2d` or `conv2d_prepacked` of float32 or float64, each value used only by the
next op, in this order (each step optional, either operand order where the op commutes)::

    y * scale      scale: one value per output channel: a constant (or one value for all),
                   or a value computed at run time (a batch norm's statistics read from
                   its variables), of the channels' shape after leading 1s
    y + shift      shift: the same (``y - c`` is ``y + (-c)``, exactly, for a constant)
    y * scale      second_scale, second_shift: a second affine map of the same kind, as
    y + shift      some exporters write after a batch norm (Inception v2's Mul and Add)
    y + residual   residual: any value of y's type
    relu(y)

Every op of the chain keeps the convolution's type (no broadcast grows the result). The
fused op computes each step as its op does, in the same order and dtype, so the numbers are
the unfused ops'. Runs after `prepack` (whose packed convolutions it fuses too) and before
`fuse`, on what autodiff already produced: a pre-activation a gradient reads has a second
use, and stays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern
from xdsl.rewriter import InsertPoint, Rewriter

from stageflow.core.primitive import ShapedType
from stageflow.ir.builder import build_constant, build_op
from stageflow.ir.dialect import SfOp
from stageflow.ir.types import shaped_type
from stageflow.passes.registry import register_pass
from stageflow.passes.support import (
    constant_array,
    erase_dead_producers,
    is_op,
    only_user,
    same_type,
)
from stageflow.primitives.conv import conv2d_p
from stageflow.primitives.elementwise import add_p, multiply_p, relu_p, subtract_p
from stageflow.primitives.fused_conv import EPILOGUE_OPERANDS, conv2d_fused_p
from stageflow.primitives.prepacked import PACKED_DTYPES, conv2d_prepacked_p
from stageflow.primitives.structural import reshape_p


@dataclass
class _Chain:
    """The epilogue found after a convolution: its steps' operands by name, the ops that
    made them (to replace), and the value it ends in."""

    end: SSAValue
    ops: list[Operation]
    operands: dict[str, SSAValue | np.ndarray]
    relu: bool = False

    def taken(self, step: str) -> bool:
        """Whether `step` (one of `EPILOGUE_OPERANDS`), or one that comes after it (the
        ReLU last), is already in the chain."""
        later = EPILOGUE_OPERANDS[EPILOGUE_OPERANDS.index(step):]
        return self.relu or any(name in self.operands for name in later)

    def next(self, steps: tuple[str, ...]) -> str | None:
        """The first of `steps` (a scale's or a shift's places) the chain can still take."""
        return next((step for step in steps if not self.taken(step)), None)


SCALES = ("scale", "second_scale")
SHIFTS = ("shift", "second_shift")
SECOND = ("second_scale", "second_shift")


def _per_channel(value: SSAValue, channels: int, dtype: np.dtype, rank: int
                 ) -> np.ndarray | SSAValue | None:
    """The (channels,) array of a constant that broadcasts along the last axis only (one
    value, or one per channel), in `dtype`; a value computed at run time of `dtype` and
    shape (channels,) after leading 1s, as it is; else None."""
    array = constant_array(value)
    if array is None:
        ty = shaped_type(value.type)
        shape = ty.shape
        per_channel = (ty.dtype == dtype and 0 < len(shape) <= rank
                       and shape[-1] == channels and all(d == 1 for d in shape[:-1]))
        return value if per_channel else None
    if (array.dtype != dtype or array.ndim > rank
            or any(d != 1 for d in array.shape[:-1])
            or (array.ndim and array.shape[-1] not in (1, channels))):
        return None
    return np.ascontiguousarray(np.broadcast_to(array.reshape(-1), (channels,)))


def _step(chain: _Chain, op: Operation, channels: int) -> bool:
    """Take `op`, the only user of the chain's end, as its next step if it is one."""
    value = chain.end
    if not isinstance(op, SfOp) or not op.results or not same_type(op.results[0], value):
        return False
    ty = shaped_type(value.type)
    rank = len(ty.shape)
    others = [o for o in op.operands if o is not value]
    if is_op(op, relu_p):
        if chain.relu:
            return False
        chain.relu = True
    elif is_op(op, multiply_p) and len(others) == 1 and (step := chain.next(SCALES)):
        scale = _per_channel(others[0], channels, ty.dtype, rank)
        if scale is None:
            return False
        chain.operands[step] = scale
    elif is_op(op, subtract_p) and op.operands[0] is value and len(others) == 1 \
            and (step := chain.next(SHIFTS)):
        shift = _per_channel(others[0], channels, ty.dtype, rank)
        if not isinstance(shift, np.ndarray):
            return False
        chain.operands[step] = np.negative(shift)
    elif is_op(op, add_p) and len(others) == 1:
        other = others[0]
        shift = _per_channel(other, channels, ty.dtype, rank)
        if shift is not None and (step := chain.next(SHIFTS)):
            chain.operands[step] = shift
        elif same_type(other, value) and not chain.taken("residual"):
            chain.operands["residual"] = other
        else:
            return False
    else:
        return False
    chain.ops.append(op)
    chain.end = op.results[0]
    return True


def _before(made: Operation, user: Operation, conv: Operation) -> SSAValue:
    """`made` (a constant, or a reshape of a run-time operand to the channels' shape),
    inserted before `user` at the convolution's location: its result."""
    made.location = conv.location
    Rewriter.insert_op(made, InsertPoint.before(user))
    return made.results[0]


class ConvEpilogue(RewritePattern):
    """A convolution and its epilogue (the module docstring's chain) as one
    `conv2d_fused`."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        packed = is_op(op, conv2d_prepacked_p)
        if not (packed or is_op(op, conv2d_p)):
            return
        result = op.results[0]
        ty = shaped_type(result.type)
        if ty.dtype not in PACKED_DTYPES:
            return
        params = op.params()
        filter_shape = tuple(params.pop("filter_shape")) if packed \
            else tuple(shaped_type(op.operands[1].type).shape)
        if None in filter_shape:
            return
        chain = _Chain(result, [], {})
        while (user := only_user(chain.end)) is not None and _step(chain, user,
                                                                     filter_shape[3]):
            pass
        if not chain.ops:
            return
        extras = []
        for name in EPILOGUE_OPERANDS:
            operand = chain.operands.get(name)
            if isinstance(operand, np.ndarray):
                operand = _before(build_constant(operand), chain.ops[-1], op)
            elif name != "residual" and operand is not None \
                    and len(shaped_type(operand.type).shape) != 1:
                channels = (filter_shape[3],)
                operand = _before(build_op(reshape_p, [operand], {"shape": channels},
                                           ShapedType(channels, ty.dtype)),
                                  chain.ops[-1], op)
            if operand is not None:
                extras.append(operand)
        # The second affine map's flags only where it is there (left out, they are false).
        flags = {name: name in chain.operands for name in EPILOGUE_OPERANDS
                 if name in chain.operands or name not in SECOND}
        fused = build_op(conv2d_fused_p, [*op.operands, *extras],
                         {**params, "filter_shape": filter_shape, "packed": packed, **flags,
                          "activation": relu_p.name if chain.relu else "none"},
                         result.type, op.location)
        last = chain.ops[-1]
        rewriter.replace(last, fused)
        erase_dead_producers([o for step in chain.ops[:-1] for o in step.results]
                             + [result], rewriter)


@register_pass
@dataclass(frozen=True)
class FuseConv(ModulePass):
    """Make each convolution's elementwise epilogue part of it (`conv2d_fused`).

    Before::

        %y = sf.conv2d_prepacked %x, %p {filter_shape = [1, 1, 64, 256], ...}
            : (tensor<1x56x56x64xf32>, tensor<8x64x32xf32>) -> tensor<1x56x56x256xf32>
        %s = sf.multiply %y, %scale
            : (tensor<1x56x56x256xf32>, tensor<1x1x1x256xf32>) -> tensor<1x56x56x256xf32>
        %t = sf.add %s, %shift
            : (tensor<1x56x56x256xf32>, tensor<1x1x1x256xf32>) -> tensor<1x56x56x256xf32>
        %r = sf.add %t, %skip
            : (tensor<1x56x56x256xf32>, tensor<1x56x56x256xf32>) -> tensor<1x56x56x256xf32>
        %z = sf.relu %r : (tensor<1x56x56x256xf32>) -> tensor<1x56x56x256xf32>

    After::

        %z = sf.conv2d_fused %x, %p, %scale_256, %shift_256, %skip {filter_shape = [1, 1,
            64, 256], ..., packed = true, scale = true, shift = true, residual = true,
            activation = "relu"} : (...) -> tensor<1x56x56x256xf32>
    """

    name = "fuse-conv"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(ConvEpilogue(), apply_recursively=False).rewrite_module(op)
