"""How each primitive is written as ONNX nodes: the export's table, keyed by the primitive.

A rule takes the `Builder` (which names values and holds the nodes of the graph being
written), the equation (its params, its operands' and results' types) and the ONNX names
of its operands, and returns the names of its results:

    @exports(ew.exp_p)
    def exp(b: Builder, eq: Equation, x: str) -> str:
        return b.op("Exp", x)

Rules write opset 18 and later (reductions take their axes as an input, Pad its pads).
Where ONNX's meaning differs from stageflow's (integer division truncates, Mod of floats
needs ``fmod=1``, Slice clamps) the rule composes stageflow's meaning from several nodes.
Integers narrower than 32 bits (and bools, where they are counted) compute in int32 and
are cast back, which wraps exactly as NumPy does: ONNX Runtime has no kernels of those
types for many ops (`arithmetic`). Primitives without a rule (the factorizations, random
draws, state updates, Python callbacks) are refused by the exporter, naming the op.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from stageflow.core import dtypes
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.frontend.graph import Equation
from stageflow.onnx.dtypes import SATURATING
from stageflow.onnx.export_builder import NO_WHERE, WIDER, Builder, OnnxMath, Term, element_type
from stageflow.primitives import (
    collective,
    conv,
    depthwise,
    linalg,
    nd_indexing,
    reduction,
    scan,
    selection,
    sorting,
)
from stageflow.primitives import elementwise as ew
from stageflow.primitives import functional as fn
from stageflow.primitives import special as sp
from stageflow.primitives import structural as st

__all__ = ["RULES", "exports"]

Rule = Callable[..., str | list[str]]
RULES: dict[Primitive, Rule] = {}

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def exports(*primitives: Primitive) -> Callable[[Rule], Rule]:
    """Register the decorated function as the ONNX rule of `primitives`."""

    def register(rule: Rule) -> Rule:
        for primitive in primitives:
            if primitive in RULES:
                raise ValueError(f"primitive {primitive.name} has two ONNX rules")
            RULES[primitive] = rule
        return rule

    return register


def _in(eq: Equation, i: int = 0) -> ShapedType:
    return eq.inputs[i].type


def _out(eq: Equation, i: int = 0) -> ShapedType:
    return eq.outputs[i].type


# ------------------------------------------------------------------------ elementwise

_FLOAT_UNARY = {
    ew.exp_p: "Exp", ew.log_p: "Log", ew.sqrt_p: "Sqrt", ew.reciprocal_p: "Reciprocal",
    ew.tanh_p: "Tanh", ew.logistic_p: "Sigmoid", ew.sin_p: "Sin", ew.cos_p: "Cos",
    ew.floor_p: "Floor", ew.ceil_p: "Ceil", ew.round_p: "Round",
}


@exports(*_FLOAT_UNARY)
def float_unary(b: Builder, eq: Equation, x: str) -> str:
    return b.op(_FLOAT_UNARY[eq.primitive], x)


@exports(ew.negative_p, ew.abs_p, ew.sign_p)
def signed_unary(b: Builder, eq: Equation, x: str) -> str:
    """Unsigned integers too: computed in a wider signed type, -x wraps back as NumPy's."""
    op_type = {ew.negative_p: "Neg", ew.abs_p: "Abs", ew.sign_p: "Sign"}[eq.primitive]
    return b.arithmetic(op_type, [x], _in(eq).dtype)


@exports(ew.relu_p)
def relu(b: Builder, eq: Equation, x: str) -> str:
    dtype = _in(eq).dtype
    if dtypes.is_floating(dtype):
        return b.op("Relu", x)
    return b.arithmetic("Max", [x, b.scalar(0, dtype)], dtype)


@exports(ew.expm1_p)
def expm1(b: Builder, eq: Equation, x: str) -> str:
    """Kahan's form, accurate near 0 where exp(x) - 1 cancels: (u - 1) x / log u with
    u = exp(x); x where u rounds to 1, -1 where u - 1 does, u where it overflows."""
    dtype = _in(eq).dtype
    u = b.op("Exp", x)
    less = b.op("Sub", u, b.scalar(1, dtype))
    ratio = b.op("Div", b.op("Mul", less, x), b.op("Log", u))
    ratio = b.op("Where", b.op("Equal", u, b.scalar(1, dtype)), x, ratio)
    ratio = b.op("Where", b.op("Equal", less, b.scalar(-1, dtype)), less, ratio)
    return b.op("Where", b.op("IsInf", u), u, ratio)


@exports(ew.log1p_p)
def log1p(b: Builder, eq: Equation, x: str) -> str:
    """Kahan's form, accurate near 0: log(u) x / (u - 1) with u = 1 + x; x where u rounds
    to 1, log u where u is 0 or infinite."""
    dtype = _in(eq).dtype
    u = b.op("Add", x, b.scalar(1, dtype))
    log = b.op("Log", u)
    ratio = b.op("Div", b.op("Mul", log, x), b.op("Sub", u, b.scalar(1, dtype)))
    ratio = b.op("Where", b.op("Equal", u, b.scalar(1, dtype)), x, ratio)
    edge = b.op("Or", b.op("IsInf", u), b.op("Equal", u, b.scalar(0, dtype)))
    return b.op("Where", edge, log, ratio)


@exports(ew.log2_p)
def log2(b: Builder, eq: Equation, x: str) -> str:
    return b.op("Div", b.op("Log", x), b.scalar(math.log(2), _in(eq).dtype))


@exports(ew.rsqrt_p)
def rsqrt(b: Builder, eq: Equation, x: str) -> str:
    return b.op("Reciprocal", b.op("Sqrt", x))


@exports(ew.logical_not_p)
def logical_not(b: Builder, eq: Equation, x: str) -> str:
    return b.op("Not", x)


_BINARY = {
    ew.add_p: "Add", ew.subtract_p: "Sub", ew.multiply_p: "Mul", ew.maximum_p: "Max",
    ew.minimum_p: "Min",
}
_COMPARISONS = {
    ew.equal_p: "Equal", ew.less_p: "Less", ew.less_equal_p: "LessOrEqual",
    ew.greater_p: "Greater", ew.greater_equal_p: "GreaterOrEqual",
}


@exports(*_BINARY)
def binary(b: Builder, eq: Equation, x: str, y: str) -> str:
    return b.arithmetic(_BINARY[eq.primitive], [x, y], _in(eq).dtype)


@exports(*_COMPARISONS, ew.not_equal_p)
def compare(b: Builder, eq: Equation, x: str, y: str) -> str:
    dtype = _in(eq).dtype
    if eq.primitive is ew.not_equal_p:
        return b.op("Not", b.arithmetic("Equal", [x, y], dtype, dtypes.bool_))
    return b.arithmetic(_COMPARISONS[eq.primitive], [x, y], dtype, dtypes.bool_)


@exports(ew.logical_and_p, ew.logical_or_p)
def logical(b: Builder, eq: Equation, x: str, y: str) -> str:
    return b.op("And" if eq.primitive is ew.logical_and_p else "Or", x, y)


@exports(ew.divide_p)
def divide(b: Builder, eq: Equation, x: str, y: str) -> str:
    """Integers divide in float64, as NumPy's true division."""
    source, result = _in(eq).dtype, _out(eq).dtype
    return b.op("Div", b.cast(x, source, result), b.cast(y, source, result))


def _integer_division(b: Builder, dtype: np.dtype, x: str, y: str, quotient: bool) -> str:
    """Floored quotient or remainder of integers, NumPy's 0 where y is 0 (ONNX leaves that
    undefined, and ONNX Runtime refuses a constant zero divisor), in a type ONNX Runtime
    divides: Mod (fmod=0) is the floored remainder, and (x - x mod y) / y is exact even
    though Div truncates."""
    wide = WIDER.get(dtype, dtype)
    x, y = b.cast(x, dtype, wide), b.cast(y, dtype, wide)
    zero = b.scalar(0, wide)
    by_zero = b.op("Equal", y, zero)
    divisor = b.op("Where", by_zero, b.scalar(1, wide), y)
    result = b.op("Mod", x, divisor, fmod=0)
    if quotient:
        result = b.op("Div", b.op("Sub", x, result), divisor)
    return b.cast(b.op("Where", by_zero, zero, result), wide, dtype)


@exports(ew.floordiv_p)
def floordiv(b: Builder, eq: Equation, x: str, y: str) -> str:
    dtype = _in(eq).dtype
    if dtypes.is_floating(dtype):
        return b.op("Floor", b.op("Div", x, y))
    return _integer_division(b, dtype, x, y, quotient=True)


@exports(ew.mod_p)
def mod(b: Builder, eq: Equation, x: str, y: str) -> str:
    """The remainder with the divisor's sign: of floats C's fmod (Mod with fmod=1), plus y
    where the remainder is not 0 and its sign differs from y's (NumPy's rule)."""
    dtype = _in(eq).dtype
    if not dtypes.is_floating(dtype):
        return _integer_division(b, dtype, x, y, quotient=False)
    r = b.op("Mod", x, y, fmod=1)
    zero = b.scalar(0, dtype)
    moved = b.op("And", b.op("Not", b.op("Equal", r, zero)),
                 b.op("Xor", b.op("Less", r, zero), b.op("Less", y, zero)))
    return b.op("Where", moved, b.op("Add", r, y), r)


@exports(ew.pow_p)
def power(b: Builder, eq: Equation, x: str, y: str) -> str:
    return b.arithmetic("Pow", [x, y], _in(eq).dtype)


@exports(ew.select_p)
def select(b: Builder, eq: Equation, condition: str, x: str, y: str) -> str:
    dtype = _in(eq, 1).dtype
    if dtype in NO_WHERE:
        wide = dtypes.int32
        chosen = b.op("Where", condition, b.cast(x, dtype, wide), b.cast(y, dtype, wide))
        return b.cast(chosen, wide, dtype)
    return b.op("Where", condition, x, y)


@exports(collective.all_reduce_p)
def all_reduce(b: Builder, eq: Equation, *xs: str) -> str:
    """Folded left to right by its reduction's binary op, as stageflow adds (ONNX's
    variadic Sum and Mean leave the order to the runtime); a mean then divides by n."""
    kind = collective.REDUCTIONS[eq.params["reduction"]]
    dtype = _in(eq).dtype
    total = b.op("Identity", xs[0]) if len(xs) == 1 else xs[0]
    for x in xs[1:]:
        total = b.arithmetic(_BINARY[kind.combine], [total, x], dtype)
    return b.op("Div", total, b.scalar(len(xs), dtype)) if kind.mean else total




# The opset that brought each narrow type into ONNX's Cast.
_SINCE = {**dict.fromkeys(SATURATING, 19), dtypes.int4: 21, dtypes.uint4: 21,
          dtypes.float4_e2m1fn: 23, dtypes.int2: 25, dtypes.uint2: 25}
# The narrow integers' ranges: [offset - size, offset) wraps as sf.cast keeps low bits.
_NARROW_RANGES = {dtypes.int4: (16, 8), dtypes.uint4: (16, 0), dtypes.int2: (4, 2),
                  dtypes.uint2: (4, 0)}
# ml_dtypes' floats: their casts to integers give 0 where the value does not fit.
_ML_DTYPES_FLOATS = frozenset({dtypes.bfloat16, *dtypes.NARROW_FLOATING})


@exports(ew.cast_p)
def cast(b: Builder, eq: Equation, x: str) -> str:
    """A cast to a float8 with a NaN says ``saturate=0``: sf.cast overflows into NaN or
    infinity as ml_dtypes does. A float whose cast follows ml_dtypes (to a narrow integer,
    or from bfloat16 or a narrow float to any integer) is truncated where it fits and 0
    elsewhere (`_float_to_int_or_zero`). An integer cast to a narrow integer goes through
    int32, whose value is wrapped into the narrow range (``(v + offset) mod size -
    offset``) before the last, exact Cast: onnxruntime's Cast to int4 rounds floats and
    saturates. ONNX's Cast to float8 E8M0 rounds a negative value's magnitude where
    ml_dtypes gives NaN, and ties apart from it: not exported."""
    source, dtype = _in(eq).dtype, _out(eq).dtype
    if dtype == dtypes.float8_e8m0fnu:
        raise NotImplementedError("a cast to float8_e8m0fnu: ONNX's Cast rounds as sf.cast "
                                  "does not (negative values, ties); cast to float32 instead")
    for narrow in (source, dtype):
        if b.opset < _SINCE.get(narrow, 0):
            raise NotImplementedError(f"{narrow.name} needs opset {_SINCE[narrow]} or later")
    if dtype in SATURATING:
        return b.op("Cast", x, to=element_type(dtype), saturate=0)
    floating = dtypes.is_floating(source) or dtypes.is_narrow_floating(source)
    integer = dtypes.is_integer(dtype) or dtype in _NARROW_RANGES
    if floating and integer and (dtype in _NARROW_RANGES or source in _ML_DTYPES_FLOATS):
        return _float_to_int_or_zero(b, x, source, dtype)
    if dtype in _NARROW_RANGES and source not in dtypes.NARROW_INTEGER:
        size, offset = _NARROW_RANGES[dtype]
        shifted = b.op("Add", b.cast(x, source, dtypes.int32), b.scalar(offset, dtypes.int32))
        x = b.op("Sub", b.op("Mod", shifted, b.scalar(size, dtypes.int32)),
                 b.scalar(offset, dtypes.int32))
    return b.op("Cast", x, to=element_type(dtype))


def _float_to_int_or_zero(b: Builder, x: str, source: np.dtype, dtype: np.dtype) -> str:
    """x truncated to the integer `dtype`, and 0 where that does not fit (NaN and
    infinities too), compared in float64, which holds each value of `source` exactly. A
    narrow result comes through int32: onnxruntime's Cast to int4 rounds."""
    info = ml_dtypes.iinfo(dtype)
    low, high = int(info.min), int(info.max)
    wide = b.cast(x, source, dtypes.float64)
    # Truncation fits where low - 1 < x < high + 1; where low - 1 rounds to low in
    # float64 (int64), no value lies between them: low <= x.
    lower = (b.op("Greater", wide, b.scalar(low - 1, dtypes.float64))
             if float(low - 1) != float(low)
             else b.op("GreaterOrEqual", wide, b.scalar(low, dtypes.float64)))
    fits = b.op("And", lower, b.op("Less", wide, b.scalar(float(high + 1), dtypes.float64)))
    kept = b.op("Where", fits, wide, b.scalar(0.0, dtypes.float64))
    via = dtypes.int32 if dtype in _NARROW_RANGES else dtype
    return b.cast(b.op("Cast", kept, to=element_type(via)), via, dtype)


@exports(ew.shift_right_logical_p)
def shift_right_logical(b: Builder, eq: Equation, x: str, y: str) -> str:
    """BitShift shifts unsigned integers: a signed operand's bits are shifted as the
    unsigned type of its width (Cast between them keeps the bits)."""
    dtype = _in(eq).dtype
    bits = np.dtype(f"uint{dtype.itemsize * 8}")
    shifted = b.op("BitShift", b.cast(x, dtype, bits), b.cast(y, dtype, bits),
                   direction="RIGHT")
    return b.cast(shifted, bits, dtype)


@exports(fn.stop_gradient_p, fn.device_copy_p)
def identity(b: Builder, eq: Equation, x: str) -> str:
    return b.op("Identity", x)


# ------------------------------------------------------------------ special functions


def _erf(m: OnnxMath, x: Term) -> Term:
    """`sf.erf`'s kernel (Cody's forms): the small form near 0, 1 - erfc beyond."""
    y = m.fabs(x)
    limit = m.const(x, ew._ERF_SMALL_LIMIT)
    near = m.select(y > limit, limit, y)
    small = near * sp._cody(m, near * near, ew._ERF_SMALL_NUM, ew._ERF_SMALL_DEN)
    half = m.const(x, 0.5)
    large = (half - sp._erfc_nonnegative(m, y)) + half
    return m.select(y <= limit, m.copysign(small, x), m.copysign(large, x))


# Also where ONNX has the op: ONNX Runtime runs Erf, Atan, Asin and Acos in float32 only,
# and its float32 Acos loses digits near 1 that this float64 form keeps.
_ALGORITHMS: dict[Primitive, Callable[..., Any]] = {**sp.ALGORITHMS, ew.erf_p: _erf}


@exports(*_ALGORITHMS)
def special(b: Builder, eq: Equation, *xs: str) -> str:
    """The algorithm stageflow compiles (`primitives.special`), written in float64 nodes
    and rounded once to the operands' type."""
    dtype = _in(eq).dtype
    terms = [Term(b, b.cast(x, dtype, dtypes.float64)) for x in xs]
    result = _ALGORITHMS[eq.primitive](OnnxMath(b), *terms)
    return b.cast(result.name, dtypes.float64, dtype)


# ------------------------------------------------------------------------- reductions

_REDUCTIONS = {
    reduction.reduce_sum_p: "ReduceSum", reduction.reduce_prod_p: "ReduceProd",
    reduction.reduce_max_p: "ReduceMax", reduction.reduce_min_p: "ReduceMin",
}


@exports(*_REDUCTIONS)
def reduce(b: Builder, eq: Equation, x: str) -> str:
    """Over `axes` (none: x itself, ``noop_with_empty_axes``)."""
    dtype = _in(eq).dtype
    axes = b.ints(eq.params["axes"])
    return b.arithmetic(_REDUCTIONS[eq.primitive], [x, axes], dtype, keep=(1,),
                        keepdims=int(eq.params["keepdims"]), noop_with_empty_axes=1)


@exports(reduction.argmax_p, reduction.argmin_p)
def arg_reduce(b: Builder, eq: Equation, x: str) -> str:
    """The first extremum along the axis (ONNX's default, NumPy's rule)."""
    op_type = "ArgMax" if eq.primitive is reduction.argmax_p else "ArgMin"
    dtype = _in(eq).dtype
    wide = WIDER.get(dtype)
    operand = x if wide is None else b.cast(x, dtype, wide)
    return b.op(op_type, operand, axis=eq.params["axis"], keepdims=0)


@exports(scan.cumsum_p, scan.cumprod_p)
def cumulative(b: Builder, eq: Equation, x: str) -> str:
    op_type = "CumSum" if eq.primitive is scan.cumsum_p else "CumProd"
    if op_type == "CumProd" and b.opset < 26:
        raise NotImplementedError("cumprod needs opset 26 or later (CumProd)")
    axis = b.const(np.int64(eq.params["axis"]))
    return b.arithmetic(op_type, [x, axis], _in(eq).dtype, keep=(1,),
                        exclusive=int(eq.params["exclusive"]), reverse=int(eq.params["reverse"]))


# ------------------------------------------------------------------------ linear algebra


def _swap_last(b: Builder, x: str, ndim: int) -> str:
    perm = [*range(ndim - 2), ndim - 1, ndim - 2]
    return b.op("Transpose", x, perm=perm)


@exports(linalg.matmul_p, linalg.matmul_add_p)
def matmul(b: Builder, eq: Equation, x: str, y: str, c: str | None = None) -> str:
    """MatMul of the operands transposed as asked; matmul_add adds alpha times it to c."""
    dtype = _in(eq).dtype
    if eq.params["transpose_a"]:
        x = _swap_last(b, x, _in(eq, 0).ndim)
    if eq.params["transpose_b"]:
        y = _swap_last(b, y, _in(eq, 1).ndim)
    product = b.arithmetic("MatMul", [x, y], dtype)
    if c is None:
        return product
    scaled = b.arithmetic("Mul", [product, b.scalar(eq.params["alpha"], dtype)], dtype)
    return b.arithmetic("Add", [scaled, c], dtype)


def _group(eq: Equation) -> dict[str, int]:
    """Conv's `group` attribute of a grouped op (none for one group, ONNX's default)."""
    groups = eq.params.get("feature_group_count", 1)
    return {} if groups == 1 else {"group": groups}


@exports(conv.conv2d_p)
def conv2d(b: Builder, eq: Equation, x: str, w: str) -> str:
    """NHWC and HWIO transposed to ONNX's NCHW and OIHW, and the result back; the feature
    groups are Conv's `group` (its filters are (O, C / group, kh, kw) as ours are HWIO of
    C / group input channels)."""
    (top, bottom), (left, right) = eq.params["padding"]
    nchw = b.op("Transpose", x, perm=[0, 3, 1, 2])
    oihw = b.op("Transpose", w, perm=[3, 2, 0, 1])
    y = b.op("Conv", nchw, oihw, strides=list(eq.params["strides"]),
             dilations=list(eq.params["dilations"]), pads=[top, left, bottom, right],
             **_group(eq))
    return b.op("Transpose", y, perm=[0, 2, 3, 1])


@exports(depthwise.depthwise_conv2d_p)
def depthwise_conv2d(b: Builder, eq: Equation, x: str, w: str) -> str:
    """A Conv of one group per input channel: NHWC transposed to NCHW, the [kh, kw, C, M]
    filter to ONNX's (C * M, 1, kh, kw), and the result back."""
    (top, bottom), (left, right) = eq.params["padding"]
    kh, kw, channels, multiplier = _in(eq, 1).shape
    if None in (kh, kw, channels, multiplier):
        raise NotImplementedError("a depthwise convolution of unknown filter dims")
    nchw = b.op("Transpose", x, perm=[0, 3, 1, 2])
    cmhw = b.op("Transpose", w, perm=[2, 3, 0, 1])
    filters = b.op("Reshape", cmhw, b.ints([channels * multiplier, 1, kh, kw]))
    y = b.op("Conv", nchw, filters, strides=list(eq.params["strides"]),
             dilations=list(eq.params["dilations"]), pads=[top, left, bottom, right],
             group=channels)
    return b.op("Transpose", y, perm=[0, 2, 3, 1])


@exports(conv.conv2d_input_gradient_p)
def conv2d_input_gradient(b: Builder, eq: Equation, g: str, w: str) -> str:
    """ConvTranspose of the cotangent by the filters (OIHW is its CMHW); output_padding
    adds the input's rows and columns no window read, which the transpose leaves out."""
    (top, bottom), (left, right) = eq.params["padding"]
    strides, dilations = eq.params["strides"], eq.params["dilations"]
    kernel, positions = _in(eq, 1).shape[:2], _in(eq).shape[1:3]
    if None in positions:
        raise NotImplementedError("the input gradient of conv2d of unknown output dims")
    extra = [size + lo + hi - (n - 1) * s - (k - 1) * d - 1 for size, lo, hi, n, s, k, d in
             zip(eq.params["input_size"], (top, left), (bottom, right), positions, strides,
                 kernel, dilations, strict=True)]
    nchw = b.op("Transpose", g, perm=[0, 3, 1, 2])
    oihw = b.op("Transpose", w, perm=[3, 2, 0, 1])
    y = b.op("ConvTranspose", nchw, oihw, strides=list(strides), dilations=list(dilations),
             pads=[top, left, bottom, right], output_padding=extra, **_group(eq))
    return b.op("Transpose", y, perm=[0, 2, 3, 1])


@exports(conv.conv2d_filter_gradient_p)
def conv2d_filter_gradient(b: Builder, eq: Equation, x: str, g: str) -> str:
    """A convolution over the batch: the input's channels as a batch, its images as
    channels, the cotangent as filters; strides and dilations trade places. The windows
    past the filter's size (input rows no output read) are sliced off."""
    if eq.params.get("feature_group_count", 1) != 1:
        raise NotImplementedError("the filter gradient of a grouped conv2d "
                                  "(feature_group_count > 1)")
    (top, bottom), (left, right) = eq.params["padding"]
    kh, kw = eq.params["filter_size"]
    images = b.op("Transpose", x, perm=[3, 0, 1, 2])
    filters = b.op("Transpose", g, perm=[3, 0, 1, 2])
    y = b.op("Conv", images, filters, strides=list(eq.params["dilations"]),
             dilations=list(eq.params["strides"]), pads=[top, left, bottom, right])
    y = b.op("Slice", y, b.ints([0, 0]), b.ints([kh, kw]), b.ints([2, 3]))
    return b.op("Transpose", y, perm=[2, 3, 0, 1])


@exports(conv.max_pool_gradient_p)
def max_pool_gradient(b: Builder, eq: Equation, x: str, pooled: str, g: str) -> str:
    """Tap by tap, in the kernel's order: the padded input (NaN padding, which equals
    nothing) at the tap's strided positions compared with the maximum; the cotangent
    where this is the first tap equal, spread back to those positions (a Reshape opening
    a stride-sized gap after each, Pad, Reshape, Pad to the tap's offset); the sum's
    padding sliced off."""
    (top, bottom), (left, right) = eq.params["padding"]
    (kh, kw), (sh, sw) = eq.params["window"], eq.params["strides"]
    (h, w), (ho, wo) = _in(eq).shape[1:3], _in(eq, 1).shape[1:3]
    if None in (h, w, ho, wo):
        raise NotImplementedError("the gradient of max pooling of unknown height or width")
    dtype = _in(eq).dtype
    hp, wp = h + top + bottom, w + left + right
    padded = b.op("Pad", x, b.ints([0, top, left, 0, 0, bottom, right, 0]),
                  b.scalar(np.nan, dtype))
    zero = b.scalar(0, dtype)
    taken, total = None, None
    for a in range(kh):
        for c in range(kw):
            view = b.op("Slice", padded, b.ints([a, c]),
                        b.ints([a + (ho - 1) * sh + 1, c + (wo - 1) * sw + 1]), b.ints([1, 2]),
                        b.ints([sh, sw]))
            hit = b.op("Equal", view, pooled)
            if taken is not None:
                hit = b.op("And", hit, b.op("Not", taken))
                taken = b.op("Or", taken, hit)
            else:
                taken = hit
            part = b.op("Reshape", b.op("Where", hit, g, zero), b.ints([0, ho, 1, wo, 1, -1]))
            part = b.op("Pad", part, b.ints([0, 0, 0, 0, 0, 0, 0, 0, sh - 1, 0, sw - 1, 0]),
                        zero)
            part = b.op("Reshape", part, b.ints([0, ho * sh, wo * sw, -1]))
            after = (hp - a - ho * sh, wp - c - wo * sw)
            part = b.op("Pad", part, b.ints([0, a, c, 0, 0, max(after[0], 0),
                                              max(after[1], 0), 0]), zero)
            if min(after) < 0:
                part = b.op("Slice", part, b.ints([0, 0]), b.ints([hp, wp]), b.ints([1, 2]))
            total = part if total is None else b.op("Add", total, part)
    return b.op("Slice", total, b.ints([top, left]), b.ints([top + h, left + w]),
                b.ints([1, 2]))


@exports(conv.reduce_window_p)
def reduce_window(b: Builder, eq: Equation, x: str) -> str:
    """Max pooling (padding never wins), or sum pooling as an average over the whole
    window, padding counted, times its size."""
    (top, bottom), (left, right) = eq.params["padding"]
    window, dtype = list(eq.params["window"]), _in(eq).dtype
    if eq.params["kind"] != "max" and not dtypes.is_floating(dtype):
        raise NotImplementedError("sum pooling of integers")
    nchw = b.op("Transpose", x, perm=[0, 3, 1, 2])
    common = {"kernel_shape": window, "strides": list(eq.params["strides"]),
              "pads": [top, left, bottom, right]}
    if eq.params["kind"] == "max":
        y = b.arithmetic("MaxPool", [nchw], dtype, **common)
    else:
        average = b.op("AveragePool", nchw, count_include_pad=1, **common)
        y = b.op("Mul", average, b.scalar(window[0] * window[1], dtype))
    return b.op("Transpose", y, perm=[0, 2, 3, 1])


# ------------------------------------------------------------------------- structural


@exports(st.constant_p)
def constant(b: Builder, eq: Equation) -> str:
    return b.const(eq.params["value"], _out(eq).dtype)


@exports(st.iota_p)
def iota(b: Builder, eq: Equation) -> str:
    """A constant: its shape is known while tracing."""
    if None in eq.params["shape"]:
        raise NotImplementedError("iota of an unknown shape")
    return b.const(st.iota_p.kernel(**eq.params))


@exports(st.dim_size_p)
def dim_size(b: Builder, eq: Equation, x: str) -> str:
    return b.op("Reshape", b.dim(x, eq.params["axis"]), b.ints([]))


@exports(st.broadcast_to_p)
def broadcast_to(b: Builder, eq: Equation, x: str) -> str:
    """Expand; an unknown dim of the target is x's own (1 keeps it, Expand broadcasting
    both ways). A dim of 0 is expanded to 1 and sliced to 0: ONNX Runtime's optimizer drops
    an Expand to 0 of an operand whose dims are 1 or unknown, as if it changed nothing."""
    shape = [1 if d is None else d for d in eq.params["shape"]]
    empty = [axis for axis, d in enumerate(shape) if d == 0]
    y = b.op("Expand", x, b.ints([d or 1 for d in shape]))
    if not empty:
        return y
    zeros = b.ints([0] * len(empty))
    return b.op("Slice", y, zeros, zeros, b.ints(empty))


@exports(st.reshape_p)
def reshape(b: Builder, eq: Equation, x: str) -> str:
    """A dim ``-2 - k`` is x's dim k, read at run time; 0 is a size (``allowzero``)."""
    target = eq.params["shape"]
    if all(n >= -1 for n in target):
        shape = b.ints(target)
    else:
        parts = [b.dim(x, -2 - n) if n <= -2 else b.ints([n]) for n in target]
        shape = b.op("Concat", *parts, axis=0)
    return b.op("Reshape", x, shape, allowzero=1)


@exports(st.transpose_p)
def transpose(b: Builder, eq: Equation, x: str) -> str:
    return b.op("Transpose", x, perm=list(eq.params["perm"]))


@exports(st.slice_p)
def slice_(b: Builder, eq: Equation, x: str) -> str:
    """Python's slices. Along a known dim, the bounds ``slice.indices`` gives (an empty
    slice as 0:0). Along an unknown one, an omitted bound is ONNX's clamped extreme for the
    step's direction; and where a negative start with a negative step may lie before the
    axis, which Python's slice makes empty and ONNX's Slice clamps to element 0, the bounds
    become 0:0 at run time."""
    bounds: list[tuple[str, str, str]] = []
    for axis, (dim, (start, stop, step)) in enumerate(zip(
            _in(eq).shape, eq.params["slices"], strict=True)):
        step = 1 if step is None else step
        if dim is not None:
            first, last, step = slice(start, stop, step).indices(dim)
            if not range(first, last, step):
                first, last, step = 0, 0, 1
            last = INT64_MIN if last < 0 else last  # -1: before element 0
            bounds.append((b.ints([first]), b.ints([last]), b.ints([step])))
            continue
        first = (0 if step > 0 else INT64_MAX) if start is None else start
        last = (INT64_MAX if step > 0 else INT64_MIN) if stop is None else stop
        bound = (b.ints([first]), b.ints([last]), b.ints([step]))
        if step < 0 and first < 0:
            before = b.op("Less", b.op("Add", bound[0], b.dim(x, axis)), b.ints([0]))
            zero = b.ints([0])
            bound = (b.op("Where", before, zero, bound[0]), b.op("Where", before, zero,
                     bound[1]), b.op("Where", before, b.ints([1]), bound[2]))
        bounds.append(bound)
    if not bounds:
        return b.op("Identity", x)
    starts, ends, steps = ([bound[i] for bound in bounds] for i in range(3))
    joined = [parts[0] if len(parts) == 1 else b.op("Concat", *parts, axis=0)
              for parts in (starts, ends, steps)]
    return b.op("Slice", x, joined[0], joined[1], b.ints(range(len(bounds))), joined[2])


@exports(st.concat_p)
def concat(b: Builder, eq: Equation, *xs: str) -> str:
    return b.op("Concat", *xs, axis=eq.params["axis"])


@exports(st.pad_p)
def pad(b: Builder, eq: Equation, x: str) -> str:
    pads = eq.params["pads"]
    if not pads:
        return b.op("Identity", x)
    dtype = _in(eq).dtype
    amounts = b.ints([lo for lo, _ in pads] + [hi for _, hi in pads])
    return b.arithmetic("Pad", [x, amounts, b.scalar(eq.params["value"], dtype)], dtype,
                        keep=(1,))


@exports(st.gather_p)
def gather(b: Builder, eq: Equation, params: str, indices: str) -> str:
    return b.op("Gather", params, indices, axis=eq.params["axis"])


@exports(st.update_index_p)
def update_index(b: Builder, eq: Equation, x: str, update: str, index: str) -> str:
    """ScatterND of one row; a negative index counts from the end."""
    position = b.cast(index, _in(eq, 2).dtype, dtypes.int64)
    zero = b.scalar(0, dtypes.int64)
    size = b.op("Reshape", b.dim(x, 0), b.ints([]))
    position = b.op("Where", b.op("Less", position, zero), b.op("Add", position, size),
                    position)
    row = b.op("Reshape", position, b.ints([1, 1]))
    updates = b.op("Unsqueeze", update, b.ints([0]))
    return b.op("ScatterND", x, row, updates)


def _nd_indices(b: Builder, eq: Equation, params: str, indices: str) -> str:
    """Index tuples in int64, negative entries counted from their dim's end."""
    width = eq.params["width"]
    indices = b.cast(indices, _in(eq, 1).dtype, dtypes.int64)
    bounds = b.op("Slice", b.op("Shape", params), b.ints([0]), b.ints([width]))
    negative = b.op("Less", indices, b.scalar(0, dtypes.int64))
    return b.op("Where", negative, b.op("Add", indices, bounds), indices)


@exports(nd_indexing.gather_nd_p)
def gather_nd(b: Builder, eq: Equation, params: str, indices: str) -> str:
    return b.op("GatherND", params, _nd_indices(b, eq, params, indices))


@exports(nd_indexing.scatter_nd_add_p, nd_indexing.scatter_nd_update_p)
def scatter_nd(b: Builder, eq: Equation, tensor: str, indices: str, updates: str) -> str:
    """ScatterND; adding, duplicates accumulate (ONNX's ``reduction="add"``)."""
    positions = _nd_indices(b, eq, tensor, indices)
    if eq.primitive is nd_indexing.scatter_nd_add_p:
        return b.arithmetic("ScatterND", [tensor, positions, updates], _in(eq).dtype, keep=(1,),
                            reduction="add")
    return b.op("ScatterND", tensor, positions, updates)


@exports(sorting.sort_p)
def sort(b: Builder, eq: Equation, keys: str, *payloads: str) -> list[str]:
    """TopK of the whole axis: ties keep their input order, as stageflow's stable sort;
    the permutation also orders the payloads (GatherElements)."""
    axis, dtype = eq.params["axis"], _in(eq).dtype
    wide = WIDER.get(dtype)
    ranked = keys if wide is None else b.cast(keys, dtype, wide)
    values, order = b.node("TopK", [ranked, b.dim(keys, axis)], 2, axis=axis,
                           largest=int(eq.params["descending"]), sorted=1)
    if wide is not None:
        values = b.cast(values, wide, dtype)
    results = [values, b.cast(order, dtypes.int64, _out(eq, 1).dtype)]
    results += [b.op("GatherElements", p, order, axis=axis) for p in payloads]
    return results


@exports(selection.nonzero_p)
def nonzero(b: Builder, eq: Equation, x: str) -> str:
    return b.op("Transpose", b.op("NonZero", x), perm=[1, 0])


@exports(selection.unique_p)
def unique(b: Builder, eq: Equation, x: str) -> list[str]:
    """Unique without sorting: values in the order they first occur, as TensorFlow's.
    Integers go through int64 (ONNX Runtime's Unique has no int32 or int16 kernel)."""
    dtype = _in(eq).dtype
    wide = dtype if dtype in _UNIQUE_TYPES else dtypes.int64
    values, _, inverse, _ = b.node("Unique", [b.cast(x, dtype, wide)], 4, sorted=0)
    return [b.cast(values, wide, dtype), b.cast(inverse, dtypes.int64, _out(eq, 1).dtype)]


_UNIQUE_TYPES = frozenset({dtypes.float32, dtypes.float64, dtypes.int8, dtypes.int64})
