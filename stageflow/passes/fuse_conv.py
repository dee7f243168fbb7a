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
the unfused ops'.

A bfloat16 ``conv2d`` of one feature group (a grouped one runs NumPy's kernel: its
epilogue stays compiled) takes the chain a layer under the ``mixed_bfloat16`` policy makes:
its result cast to float32, per-channel steps of float32 operands, the cast back to
bfloat16 (a batch norm computing in its variables' dtype), or one per-channel step of a
bfloat16 operand (a bias), widened to float32 exactly; then a bfloat16 residual and the
ReLU (before or after the cast back: the rounding keeps its sign). The fused op rounds
where the casts and the bfloat16 ops do; a chain that would end in float32 stops at its
last bfloat16 value. Runs after `prepack` (whose packed convolutions it fuses too) and before
`fuse`, on what autodiff already produced: a pre-activation a gradient reads has a second
use, and stays.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern
from xdsl.rewriter import InsertPoint, Rewriter

from stageflow.core import dtypes
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
from stageflow.primitives.elementwise import add_p, cast_p, multiply_p, relu_p, subtract_p
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
    # A bfloat16 conv's chain: whether its end is a float32 value (cast up, not yet back),
    # whether its per-channel steps are over (rounded to bfloat16 after them), and the
    # run-time per-channel operands that are bfloat16, to be cast up.
    wide: bool = False
    closed: bool = False
    widened: tuple[str, ...] = ()

    def copy(self) -> _Chain:
        return replace(self, ops=list(self.ops), operands=dict(self.operands))

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
HALF_TO_WIDE = (dtypes.bfloat16, dtypes.float32)  # a bfloat16 chain's cast up


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


def _cast(chain: _Chain, op: Operation) -> bool:
    """Take a cast of a bfloat16 chain's end as its next step if it is one: to float32
    before any per-channel step, or back to bfloat16 after them."""
    source, target = shaped_type(chain.end.type), shaped_type(op.results[0].type)
    if source.shape != target.shape:
        return False
    if not chain.wide and not chain.closed and (source.dtype, target.dtype) == HALF_TO_WIDE:
        chain.wide = True
    elif chain.wide and (source.dtype, target.dtype) == HALF_TO_WIDE[::-1]:
        chain.wide, chain.closed = False, True
    else:
        return False
    return True


def _step(chain: _Chain, op: Operation, channels: int, half: bool) -> bool:
    """Take `op`, the only user of the chain's end, as its next step if it is one (`half`:
    the chain of a bfloat16 conv, see the module docstring)."""
    value = chain.end
    if not isinstance(op, SfOp) or not op.results:
        return False
    if half and is_op(op, cast_p):
        taken = _cast(chain, op)
    else:
        taken = same_type(op.results[0], value) and _elementwise(chain, op, channels, half)
    if taken:
        chain.ops.append(op)
        chain.end = op.results[0]
    return taken


def _elementwise(chain: _Chain, op: Operation, channels: int, half: bool) -> bool:
    """Take the elementwise op `op` of the chain end's type as the chain's next step if it
    is one (the per-channel steps of a bfloat16 chain in float32, or one of a bfloat16
    operand, widened)."""
    value = chain.end
    ty = shaped_type(value.type)
    rank = len(ty.shape)
    others = [o for o in op.operands if o is not value]
    if half and not chain.wide and not is_op(op, relu_p):
        return _half_step(chain, op, others, channels, rank)
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
        elif same_type(other, value) and not chain.taken("residual") and not chain.wide:
            chain.operands["residual"] = other
        else:
            return False
    else:
        return False
    return True


def _half_step(chain: _Chain, op: Operation, others: list[SSAValue], channels: int,
               rank: int) -> bool:
    """A bfloat16 chain's op on its bfloat16 end: the residual, or (before any other
    per-channel step) one per-channel step of a bfloat16 operand, which it rounds after."""
    value = chain.end
    dtype = shaped_type(value.type).dtype
    if len(others) != 1 or not (is_op(op, add_p) or is_op(op, multiply_p)
                                or is_op(op, subtract_p) and op.operands[0] is value):
        return False
    other = others[0]
    if is_op(op, add_p) and same_type(other, value):
        if chain.taken("residual"):
            return False
        chain.operands["residual"] = other
        return True
    step = chain.next(SCALES[:1] if is_op(op, multiply_p) else SHIFTS[:1])
    operand = _per_channel(other, channels, dtype, rank)
    if chain.closed or step is None or operand is None:
        return False
    if isinstance(operand, np.ndarray):
        widened = operand.astype(dtypes.float32)
        chain.operands[step] = np.negative(widened) if is_op(op, subtract_p) else widened
    elif is_op(op, subtract_p):
        return False
    else:
        chain.operands[step] = operand
        chain.widened += (step,)
    chain.closed = True
    return True


def _before(made: Operation, user: Operation, conv: Operation) -> SSAValue:
    """`made` (a constant, or a reshape of a run-time operand to the channels' shape),
    inserted before `user` at the convolution's location: its result."""
    made.location = conv.location
    Rewriter.insert_op(made, InsertPoint.before(user))
    return made.results[0]


def _channels(operand: SSAValue, widened: bool, channels: int, user: Operation,
              conv: Operation) -> SSAValue:
    """A run-time per-channel operand as the fused op takes it: cast to float32 where it is
    a bfloat16 chain's (`widened`), reshaped to (channels,) where it is not so."""
    ty = shaped_type(operand.type)
    if widened:
        ty = ShapedType(ty.shape, dtypes.float32)
        operand = _before(build_op(cast_p, [operand], {"dtype": ty.dtype}, ty), user, conv)
    if len(ty.shape) != 1:
        operand = _before(build_op(reshape_p, [operand], {"shape": (channels,)},
                                   ShapedType((channels,), ty.dtype)), user, conv)
    return operand


class ConvEpilogue(RewritePattern):
    """A convolution and its epilogue (the module docstring's chain) as one
    `conv2d_fused`."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        packed = is_op(op, conv2d_prepacked_p)
        if not (packed or is_op(op, conv2d_p)):
            return
        result = op.results[0]
        ty = shaped_type(result.type)
        params = op.params()
        filter_shape = tuple(params.pop("filter_shape")) if packed \
            else tuple(shaped_type(op.operands[1].type).shape)
        if None in filter_shape:
            return
        half = ty.dtype == dtypes.bfloat16
        grouped = params.get("feature_group_count", 1) != 1
        if ty.dtype not in PACKED_DTYPES and not (half and not packed and not grouped):
            return
        chain = _Chain(result, [], {})
        ended = chain.copy()  # the chain as far as its last value of the conv's type
        while (user := only_user(chain.end)) is not None and _step(chain, user,
                                                                     filter_shape[3], half):
            if not chain.wide:
                ended = chain.copy()
        chain = ended
        if not chain.ops:
            return
        extras = []
        for name in EPILOGUE_OPERANDS:
            operand = chain.operands.get(name)
            if isinstance(operand, np.ndarray):
                operand = _before(build_constant(operand), chain.ops[-1], op)
            elif name != "residual" and operand is not None:
                operand = _channels(operand, name in chain.widened, filter_shape[3],
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
