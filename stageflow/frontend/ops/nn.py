"""`sf.nn`: activations, softmax, dropout, convolution, pooling and cross-entropy losses.

Everything here except `conv2d` and pooling is a composite of existing op functions, so
autodiff, fusion and codegen only ever see primitives (softplus, say, is `maximum`, `abs`,
`exp` and `log1p`). Argument conventions are TensorFlow's (`tf.nn`): strides and window
sizes are an int or a list of 1, 2 or 4 ints, padding is "SAME", "VALID" or explicit pairs,
images are NHWC and filters HWIO. TensorFlow's "SAME" rule is resolved here, once, into the
explicit padding the `conv2d` and `reduce_window` primitives take.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.shapes import format_shape, normalize_axis
from stageflow.core.source import describe_location
from stageflow.frontend import replica
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops import random as sf_random
from stageflow.frontend.ops.convert import binary_operands, convert_to_tensor, weak_operand
from stageflow.frontend.ops.reductions import reduce_max, reduce_sum
from stageflow.frontend.ops.shape import expand_dims, gather, reshape_to
from stageflow.frontend.ops.shape_of import shape
from stageflow.frontend.tensor import Tensor
from stageflow.primitives import conv, depthwise
from stageflow.primitives import elementwise as ew_p
from stageflow.primitives import structural as st

__all__ = [
    "avg_pool2d", "compute_average_loss", "conv1d", "conv2d", "conv2d_transpose",
    "depthwise_conv2d", "dropout", "elu",
    "gelu", "leaky_relu", "log_softmax",
    "max_pool2d", "relu", "relu6", "scale_regularization_loss", "sigmoid", "silu", "softmax",
    "softmax_cross_entropy_with_logits", "softplus", "sparse_softmax_cross_entropy_with_logits",
    "swish", "tanh",
]

sigmoid = ew.sigmoid
tanh = ew.tanh

IntOrInts = int | Sequence[int]
PaddingArg = str | Sequence[Sequence[int]]


def _fail(op: str, message: str, error: type[Exception] = ValueError) -> Exception:
    return error(f"{op}: {message}{describe_location()}")


def _floating(x: Any, op: str) -> Tensor:
    """`x` as a tensor of a floating dtype; integer activations make no sense (TypeError)."""
    x = convert_to_tensor(x)
    if not dtypes.is_floating(x.dtype):
        raise _fail(op, f"expected a floating tensor, got {x.dtype.name}", TypeError)
    return x


def _axis(op: str, axis: int, ndim: int) -> int:
    try:
        return normalize_axis(int(axis), ndim)
    except ValueError as error:
        raise _fail(op, str(error)) from None


# --------------------------------------------------------------------------- activations


relu = ew.unary_op(ew_p.relu_p, """max(x, 0); integer tensors are allowed, as in TensorFlow.
    The gradient at exactly 0 is 0, as TensorFlow's, PyTorch's and JAX's.

    features: int or float tensor of any shape; returns its shape and dtype.

    >>> sf.nn.relu([-2.0, 0.0, 3.0])
    sf.Tensor([0., 0., 3.], shape=(3,), dtype=float32)
    >>> x = sf.constant([-1.0, 0.0, 2.0])
    >>> with sf.GradientTape() as tape:
    ...     tape.watch(x)
    ...     y = sf.reduce_sum(sf.nn.relu(x))
    >>> tape.gradient(y, x)
    sf.Tensor([0., 0., 1.], shape=(3,), dtype=float32)
    """)


def relu6(features: Any) -> Tensor:
    """min(max(x, 0), 6).

    features: int or float tensor of any shape; returns its shape and dtype.

    >>> sf.nn.relu6([-2.0, 3.0, 8.0])
    sf.Tensor([0., 3., 6.], shape=(3,), dtype=float32)
    """
    return ew.minimum(relu(features), 6)


def leaky_relu(features: Any, alpha: float = 0.2) -> Tensor:
    """x where x > 0, else alpha * x.

    features: float tensor of any shape; returns a tensor of its shape and dtype.

    >>> sf.nn.leaky_relu([-2.0, 3.0], alpha=0.1)
    sf.Tensor([-0.2,  3. ], shape=(2,), dtype=float32)
    """
    x = _floating(features, "leaky_relu")
    return ew.where(ew.greater(x, 0.0), x, ew.multiply(x, float(alpha)))


def elu(features: Any) -> Tensor:
    """x where x > 0, else exp(x) - 1 (expm1 keeps small negative x accurate).

    features: float tensor of any shape; returns a tensor of its shape and dtype.

    >>> sf.nn.elu([-1.0, 0.0, 2.0])
    sf.Tensor([-0.63212055,  0.        ,  2.        ], shape=(3,), dtype=float32)
    """
    x = _floating(features, "elu")
    # expm1 sees only min(x, 0), so the unused branch cannot overflow for large x.
    return ew.where(ew.greater(x, 0.0), x, ew.expm1(ew.minimum(x, 0.0)))


def gelu(features: Any, approximate: bool = False) -> Tensor:
    """x * Phi(x): exactly 0.5 x (1 + erf(x / sqrt 2)), or TensorFlow's tanh approximation.

    features: float tensor of any shape; returns a tensor of its shape and dtype.

    >>> sf.nn.gelu([-1.0, 0.0, 1.0])
    sf.Tensor([-0.15865526,  0.        ,  0.8413447 ], shape=(3,), dtype=float32)
    >>> sf.nn.gelu([-1.0, 0.0, 1.0], approximate=True)
    sf.Tensor([-0.158808,  0.      ,  0.841192], shape=(3,), dtype=float32)
    """
    x = _floating(features, "gelu")
    if approximate:
        cube = ew.multiply(ew.multiply(x, x), x)
        inner = ew.multiply(ew.add(x, ew.multiply(cube, 0.044715)), math.sqrt(2.0 / math.pi))
        return ew.multiply(ew.multiply(x, 0.5), ew.add(ew.tanh(inner), 1.0))
    return ew.multiply(ew.multiply(x, 0.5), ew.add(ew.erf(ew.multiply(x, math.sqrt(0.5))), 1.0))


def softplus(features: Any) -> Tensor:
    """log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)): no overflow, accurate for x << 0.

    features: float tensor of any shape; returns a tensor of its shape and dtype.

    >>> sf.nn.softplus([-100.0, 0.0, 100.0])
    sf.Tensor([3.783506e-44, 6.931472e-01, 1.000000e+02], shape=(3,), dtype=float32)
    """
    x = _floating(features, "softplus")
    return ew.add(ew.maximum(x, 0.0), ew.log1p(ew.exp(ew.negative(ew.abs(x)))))


def silu(features: Any) -> Tensor:
    """x * sigmoid(x) (also called swish).

    features: float tensor of any shape; returns a tensor of its shape and dtype.

    >>> sf.nn.silu([-1.0, 0.0, 1.0])
    sf.Tensor([-0.2689414,  0.       ,  0.7310586], shape=(3,), dtype=float32)
    >>> sf.nn.swish is sf.nn.silu
    True
    """
    x = _floating(features, "silu")
    return ew.multiply(x, ew.sigmoid(x))


swish = silu


def _shifted(logits: Any, axis: int, op: str) -> tuple[Tensor, int]:
    """logits - max(logits) along `axis`: exp of it cannot overflow, and the max term is 1."""
    x = _floating(logits, op)
    axis = _axis(op, axis, x.ndim)
    if x.shape[axis] == 0:  # no elements to shift, and the max of none is an error
        return x, axis
    if x.shape[axis] is None:  # maybe none when the graph runs: a -inf pad keeps one
        pads = tuple((0, 1) if a == axis else (0, 0) for a in range(x.ndim))
        padded = st.pad_p.bind(x, pads=pads, value=float("-inf"))
        return ew.subtract(x, reduce_max(padded, axis, keepdims=True)), axis
    return ew.subtract(x, reduce_max(x, axis, keepdims=True)), axis


def softmax(logits: Any, axis: int = -1) -> Tensor:
    """exp(x) / sum(exp(x)) along `axis`, stable for any finite logits.

    logits: float tensor [..., n] (any rank; `axis` picks the class axis); returns its shape and
    dtype, summing to 1 along `axis`.

    >>> sf.nn.softmax([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    sf.Tensor([[0.09003057, 0.24472846, 0.66524094],
               [0.33333334, 0.33333334, 0.33333334]], shape=(2, 3), dtype=float32)
    """
    shifted, axis = _shifted(logits, axis, "softmax")
    e = ew.exp(shifted)
    return ew.divide(e, reduce_sum(e, axis, keepdims=True))


def log_softmax(logits: Any, axis: int = -1) -> Tensor:
    """x - logsumexp(x) along `axis`, without forming softmax (so no log(0) = -inf).

    logits: float tensor [..., n]; returns its shape and dtype.

    >>> sf.nn.log_softmax([0.0, 0.0, 0.0, 0.0])
    sf.Tensor([-1.3862944, -1.3862944, -1.3862944, -1.3862944], shape=(4,), dtype=float32)
    """
    shifted, axis = _shifted(logits, axis, "log_softmax")
    if shifted.shape[axis] == 0:
        return shifted
    return ew.subtract(shifted, ew.log(reduce_sum(ew.exp(shifted), axis, keepdims=True)))


# --------------------------------------------------------------------------- dropout


def dropout(x: Any, rate: float, training: bool = True, seed: int | None = None) -> Tensor:
    """Zero each element with probability `rate` and scale the rest by 1 / (1 - rate).

    The expected value is unchanged, so no rescaling is needed at inference, where
    (`training=False`) x is returned as it is. The mask comes from `sf.random.uniform`, a
    stateful op: a staged function draws a fresh mask on every call.

    x: float tensor of any shape; rate in [0, 1); returns x's shape and dtype (x itself when
    training is False).

    >>> sf.random.set_seed(0)
    >>> sf.nn.dropout(sf.ones((2, 4)), rate=0.5, seed=1)
    sf.Tensor([[2., 0., 0., 2.],
               [2., 0., 2., 2.]], shape=(2, 4), dtype=float32)
    >>> sf.nn.dropout([1.0, 2.0], rate=0.5, training=False)
    sf.Tensor([1., 2.], shape=(2,), dtype=float32)
    """
    x = _floating(x, "dropout")
    rate = float(rate)
    if not 0.0 <= rate < 1.0:
        raise _fail("dropout", f"rate must be in [0, 1), got {rate}")
    if not training or rate == 0.0:
        return x
    noise = sf_random.uniform(x.shape, 0.0, 1.0, dtype=dtypes.float32, seed=seed)
    keep = ew.greater_equal(noise, rate)
    return ew.where(keep, ew.multiply(x, 1.0 / (1.0 - rate)), convert_to_tensor(0, x.dtype))


# --------------------------------------------------------------------------- windows


def _spatial(value: IntOrInts, name: str, op: str) -> tuple[int, int]:
    """TF's int-or-list convention for strides, dilations and ksize, as (height, width)."""
    if isinstance(value, int | np.integer):
        values = [int(value)]
    else:
        values = [int(v) for v in value]
    if len(values) == 1:
        values = values * 2
    elif len(values) == 4:
        if values[0] != 1 or values[3] != 1:
            raise _fail(op, f"{name} {values} must be 1 in the batch and channel dims (NHWC)")
        values = values[1:3]
    elif len(values) != 2:
        raise _fail(op, f"{name} must be an int or a list of 1, 2 or 4 ints, got {value!r}")
    if min(values) < 1:
        raise _fail(op, f"{name} must be positive, got {value!r}")
    return values[0], values[1]


def same_padding(size: int | None, window: int, stride: int, dilation: int = 1,
                 op: str = "conv2d") -> tuple[int, int]:
    """TensorFlow's "SAME" rule: output ceil(size / stride), the odd pad at the end.

    The total pad depends on `size` only when stride > 1; an unknown size is then an error.
    """
    effective = (window - 1) * dilation + 1
    if size is None:
        if stride != 1:
            raise _fail(op, "'SAME' padding with stride > 1 needs known spatial dims; "
                        "give the input signature static height and width")
        total = effective - 1
    else:
        out = -(-size // stride)
        total = max((out - 1) * stride + effective - size, 0)
    return total // 2, total - total // 2


def _padding(padding: PaddingArg, op: str, sizes: tuple[int | None, int | None],
             window: tuple[int | None, int | None], strides: tuple[int, int],
             dilations: tuple[int, int] = (1, 1)) -> conv.Padding:
    """Explicit ((top, bottom), (left, right)) pads for TF's padding argument."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return (0, 0), (0, 0)
        if mode == "SAME":
            if None in window:
                raise _fail(op, "'SAME' padding needs a known window (filter) size")
            return tuple(  # type: ignore[return-value]
                same_padding(sizes[i], window[i], strides[i], dilations[i], op) for i in (0, 1)
            )
        raise _fail(op, f"padding must be 'SAME', 'VALID' or explicit pairs, got {padding!r}")
    try:
        pairs = [(int(lo), int(hi)) for lo, hi in padding]
    except (TypeError, ValueError):
        raise _fail(op, f"cannot read padding {padding!r} as (before, after) pairs") from None
    if len(pairs) == 4:
        if pairs[0] != (0, 0) or pairs[3] != (0, 0):
            raise _fail(op, f"explicit padding {pairs} must be 0 in the batch and channel dims")
        pairs = pairs[1:3]
    if len(pairs) != 2 or min(min(p) for p in pairs) < 0:
        raise _fail(op, f"explicit padding must be 2 or 4 pairs of ints >= 0, got {padding!r}")
    return pairs[0], pairs[1]


def _image(x: Any, op: str, data_format: str) -> Tensor:
    if data_format != "NHWC":
        raise _fail(op, f"only data_format='NHWC' is supported, got {data_format!r}")
    x = convert_to_tensor(x)
    if x.ndim != 4:
        raise _fail(op, f"expected an NHWC input of rank 4, got shape {format_shape(x.shape)}")
    return x


def conv2d(input: Any, filters: Any, strides: IntOrInts, padding: PaddingArg,  # noqa: A002
           data_format: str = "NHWC", dilations: IntOrInts | None = None) -> Tensor:
    """2-D convolution (cross-correlation, as in every DL framework) of NHWC by HWIO.

    Output [N, Ho, Wo, O]; with "SAME", Ho = ceil(H / stride); with "VALID",
    Ho = ceil((H - (kh - 1) * dilation) / stride).

    input: float tensor [N, H, W, C]; filters: [kh, kw, C, O] of its dtype; returns [N, Ho, Wo,
    O] of that dtype. Filters of fewer input channels, [kh, kw, C / G, O], make a grouped
    convolution of G = C / (their input channels) groups, as TensorFlow infers it: output
    channel block g (O / G wide) convolves input channel block g alone.

    >>> x = sf.reshape(sf.range(16.0), (1, 4, 4, 1))
    >>> k = sf.ones((2, 2, 1, 1))
    >>> y = sf.nn.conv2d(x, k, strides=2, padding="VALID")
    >>> y.shape
    (1, 2, 2, 1)
    >>> sf.reshape(y, (2, 2))
    sf.Tensor([[10., 18.],
               [42., 50.]], shape=(2, 2), dtype=float32)
    >>> sf.nn.conv2d(x, k, strides=1, padding="SAME").shape
    (1, 4, 4, 1)
    >>> pairs = sf.nn.conv2d(sf.ones((1, 2, 2, 4)), sf.ones((1, 1, 2, 6)), 1, "VALID")
    >>> pairs[0, 0, 0]  # 3 groups of 2 filters, each summing its 2 of the 4 channels
    sf.Tensor([2., 2., 2., 2., 2., 2.], shape=(6,), dtype=float32)
    """
    x = _image(input, "conv2d", data_format)
    w = weak_operand(filters, x)
    if w.ndim != 4:
        raise _fail("conv2d", f"filters must be HWIO of rank 4, got shape "
                    f"{format_shape(w.shape)} (input {format_shape(x.shape)})")
    stride_hw = _spatial(strides, "strides", "conv2d")
    dilation_hw = _spatial(1 if dilations is None else dilations, "dilations", "conv2d")
    pads = _padding(padding, "conv2d", x.shape[1:3], w.shape[0:2], stride_hw, dilation_hw)
    return conv.conv2d_p.bind(x, w, strides=stride_hw, padding=pads, dilations=dilation_hw,
                              **conv.grouped(_feature_groups(x, w)))


def _feature_groups(x: Tensor, w: Tensor) -> int:
    """TensorFlow's rule: the input's channels over the filters' input channels, where both
    are known and differ (else one group); an error where they do not divide, or the
    output channels do not divide into the groups."""
    channels, per_group, out_channels = x.shape[3], w.shape[2], w.shape[3]
    if channels is None or per_group is None or channels == per_group:
        return 1
    shapes = f"input {format_shape(x.shape)}, filters {format_shape(w.shape)}"
    if per_group == 0 or channels % per_group:
        raise _fail("conv2d", f"the input's {channels} channels are not a multiple of the "
                    f"filters' {per_group} input channels (a grouped convolution takes "
                    f"[kh, kw, C / groups, O] filters): {shapes}")
    groups = channels // per_group
    if out_channels is not None and out_channels % groups:
        raise _fail("conv2d", f"{groups} groups of {per_group} input channels need output "
                    f"channels divisible by {groups}, got {out_channels}: {shapes}")
    return groups


def conv1d(input: Any, filters: Any, stride: int | Sequence[int], padding: PaddingArg,  # noqa: A002
           data_format: str = "NWC", dilations: int | Sequence[int] | None = None) -> Tensor:
    """1-D convolution of NWC `input` [N, W, C] by WIO `filters` [K, C, O] (TensorFlow's
    `tf.nn.conv1d`): output [N, Wo, O], Wo as for `conv2d`'s width. Explicit `padding` is
    one (left, right) pair. ``sf.nn.conv1d(sf.ones((1, 5, 1)), sf.ones((3, 1, 1)), 1,
    "VALID")`` -> ``[[[3.], [3.], [3.]]]``.

    input: float tensor [N, W, C]; filters: [K, C, O] of its dtype; returns [N, Wo, O].

    >>> x = sf.reshape(sf.range(5.0), (1, 5, 1))
    >>> y = sf.nn.conv1d(x, [[[1.0]], [[-1.0]]], stride=1, padding="VALID")
    >>> sf.reshape(y, (4,))
    sf.Tensor([-1., -1., -1., -1.], shape=(4,), dtype=float32)
    """
    if data_format != "NWC":
        raise _fail("conv1d", f"only data_format='NWC' is supported, got {data_format!r}")
    x, w = binary_operands(input, filters)
    if x.ndim != 3 or w.ndim != 3:
        raise _fail("conv1d", f"needs an [N, W, C] input and [K, C, O] filters, got shapes "
                    f"{format_shape(x.shape)} and {format_shape(w.shape)}")
    one = _spatial(stride, "stride", "conv1d")[1:] if not isinstance(
        stride, int | np.integer) else (int(stride),)
    dilation = 1 if dilations is None else (
        int(dilations) if isinstance(dilations, int | np.integer) else int(dilations[-1]))
    pads = padding if isinstance(padding, str) else [(0, 0), tuple(padding)]
    y = conv2d(expand_dims(x, 1), expand_dims(w, 0), (1, one[-1]), pads,
               dilations=(1, dilation))
    return reshape_to(y, (y.shape[0], y.shape[2], y.shape[3]))


def conv2d_transpose(input: Any, filters: Any, output_shape: Sequence[int],  # noqa: A002
                     strides: IntOrInts, padding: PaddingArg = "SAME",
                     data_format: str = "NHWC", dilations: IntOrInts | None = None) -> Tensor:
    """The transpose of `conv2d` (TensorFlow's `tf.nn.conv2d_transpose`, "deconvolution"):
    the gradient of ``conv2d(y, filters, strides, padding)`` with respect to a `y` of
    `output_shape` [N, Ho, Wo, O], applied to `input` [N, H, W, I]; `filters` are
    [kh, kw, O, I]. ``sf.nn.conv2d_transpose(sf.ones((1, 2, 2, 1)), sf.ones((2, 2, 1, 1)),
    (1, 4, 4, 1), 2)`` upsamples each pixel into a 2x2 block of ones.

    input: float tensor [N, H, W, O]; filters: [kh, kw, C, O]; returns `output_shape` [N, Ho,
    Wo, C] in input's dtype.

    >>> x = sf.ones((1, 2, 2, 1))
    >>> y = sf.nn.conv2d_transpose(x, sf.ones((2, 2, 1, 1)), [1, 4, 4, 1], strides=2)
    >>> y.shape
    (1, 4, 4, 1)
    >>> float(sf.reduce_sum(y))
    16.0
    """
    x = _image(input, "conv2d_transpose", data_format)
    w = weak_operand(filters, x)
    shape = tuple(int(d) for d in output_shape)
    if w.ndim != 4 or len(shape) != 4 or w.shape[3] != x.shape[3] or w.shape[2] != shape[3]:
        raise _fail("conv2d_transpose", f"needs filters [kh, kw, O, I] matching an input "
                    f"[N, H, W, I] and output_shape [N, Ho, Wo, O], got input "
                    f"{format_shape(x.shape)}, filters {format_shape(w.shape)}, output_shape "
                    f"{list(shape)}")
    stride_hw = _spatial(strides, "strides", "conv2d_transpose")
    dilation_hw = _spatial(1 if dilations is None else dilations, "dilations",
                           "conv2d_transpose")
    pads = _padding(padding, "conv2d_transpose", shape[1:3], w.shape[0:2], stride_hw,
                    dilation_hw)
    implied = tuple(conv.window_output_size(shape[1 + a], w.shape[a], stride_hw[a], pads[a],
                                            dilation_hw[a]) for a in (0, 1))
    if implied != tuple(x.shape[1:3]):
        raise _fail("conv2d_transpose", f"output_shape {list(shape)} convolved with these "
                    f"strides and padding gives {list(implied)} positions, the input has "
                    f"{list(x.shape[1:3])}")
    return conv.conv2d_input_gradient(x, w, shape, stride_hw, pads, dilation_hw)


def depthwise_conv2d(input: Any, filter: Any, strides: IntOrInts, padding: PaddingArg,  # noqa: A002
                     data_format: str = "NHWC", dilations: IntOrInts | None = None) -> Tensor:
    """Each input channel convolved with its own filters (TensorFlow's
    `tf.nn.depthwise_conv2d`): `input` [N, H, W, C], `filter` [kh, kw, C, M], output
    [N, Ho, Wo, C * M] with channel c * M + m from filter [:, :, c, m].

    One op (`primitives.depthwise`): compiled, a loop over the output pixels that reads
    each input pixel's channels as one run, split over the cores for large images. Batch,
    height and width may be unknown while tracing; the gradients need a known height and
    width.

    input: float tensor [N, H, W, C]; filter: [kh, kw, C, M]; returns [N, Ho, Wo, C * M] in
    input's dtype.

    >>> x = sf.ones((1, 3, 3, 2))
    >>> f = sf.reshape(sf.constant([1.0, 10.0] * 4), (2, 2, 2, 1))
    >>> y = sf.nn.depthwise_conv2d(x, f, strides=1, padding="VALID")
    >>> y.shape
    (1, 2, 2, 2)
    >>> y[0, 0, 0]
    sf.Tensor([ 4., 40.], shape=(2,), dtype=float32)
    """
    x = _image(input, "depthwise_conv2d", data_format)
    w = weak_operand(filter, x)
    if w.ndim != 4 or w.shape[2] != x.shape[3] or None in w.shape:
        raise _fail("depthwise_conv2d", f"needs a filter [kh, kw, C, M] of known dims for an "
                    f"input [N, H, W, C], got {format_shape(w.shape)} and "
                    f"{format_shape(x.shape)}")
    (sh, sw) = _spatial(strides, "strides", "depthwise_conv2d")
    (dh, dw) = _spatial(1 if dilations is None else dilations, "dilations", "depthwise_conv2d")
    pads = _padding(padding, "depthwise_conv2d", x.shape[1:3], w.shape[:2], (sh, sw), (dh, dw))
    return depthwise.depthwise_conv2d_p.bind(x, w, strides=(sh, sw), padding=pads,
                                             dilations=(dh, dw))


def _pool_args(input: Any, ksize: IntOrInts, strides: IntOrInts, padding: PaddingArg,  # noqa: A002
               op: str, data_format: str):
    x = _image(input, op, data_format)
    window = _spatial(ksize, "ksize", op)
    stride_hw = _spatial(strides, "strides", op)
    pads = _padding(padding, op, x.shape[1:3], window, stride_hw)
    return x, window, stride_hw, pads


def max_pool2d(input: Any, ksize: IntOrInts, strides: IntOrInts, padding: PaddingArg,  # noqa: A002
               data_format: str = "NHWC") -> Tensor:
    """Maximum over each window; padding never wins (it is -inf, or the int minimum).

    input: int or float tensor [N, H, W, C]; ksize, strides: an int or (h, w); returns [N, Ho,
    Wo, C] of its dtype.

    >>> x = sf.reshape(sf.range(16.0), (1, 4, 4, 1))
    >>> sf.reshape(sf.nn.max_pool2d(x, ksize=2, strides=2, padding="VALID"), (2, 2))
    sf.Tensor([[ 5.,  7.],
               [13., 15.]], shape=(2, 2), dtype=float32)
    """
    x, window, stride_hw, pads = _pool_args(input, ksize, strides, padding, "max_pool2d",
                                            data_format)
    return conv.reduce_window_p.bind(x, kind="max", window=window, strides=stride_hw,
                                     padding=pads)


def avg_pool2d(input: Any, ksize: IntOrInts, strides: IntOrInts, padding: PaddingArg,  # noqa: A002
               data_format: str = "NHWC") -> Tensor:
    """Mean over each window, counting only real elements (TF's "SAME" excludes padding).

    input: float tensor [N, H, W, C]; ksize, strides: an int or (h, w); returns [N, Ho, Wo, C]
    of its dtype.

    >>> x = sf.reshape(sf.range(16.0), (1, 4, 4, 1))
    >>> sf.reshape(sf.nn.avg_pool2d(x, ksize=2, strides=2, padding="VALID"), (2, 2))
    sf.Tensor([[ 2.5,  4.5],
               [10.5, 12.5]], shape=(2, 2), dtype=float32)
    """
    x, window, stride_hw, pads = _pool_args(input, ksize, strides, padding, "avg_pool2d",
                                            data_format)
    if not dtypes.is_floating(x.dtype):
        raise _fail("avg_pool2d", f"expected a floating tensor, got {x.dtype.name}", TypeError)
    total = conv.reduce_window_p.bind(x, kind="sum", window=window, strides=stride_hw,
                                      padding=pads)
    return ew.divide(total, _window_counts(x, window, stride_hw, pads))


def _window_counts(x: Tensor, window: tuple[int, int], strides: tuple[int, int],
                   pads: conv.Padding) -> Tensor:
    """How many real (unpadded) elements each output window covers, shaped [1, Ho, Wo, 1].

    With known height and width this is a small constant computed here; otherwise it is the
    same sum-pooling applied to ones, so it stays correct for any size at run time.
    """
    if pads == ((0, 0), (0, 0)):
        return convert_to_tensor(window[0] * window[1], x.dtype)
    height, width = x.shape[1:3]
    if height is not None and width is not None:
        per_axis = [
            _axis_counts(size, k, s, pad)
            for size, k, s, pad in zip((height, width), window, strides, pads, strict=True)
        ]
        counts = np.multiply.outer(*per_axis).astype(x.dtype)
        return convert_to_tensor(counts[None, :, :, None])
    return _window_counts_at_run_time(x, window, strides, pads)


def _window_counts_at_run_time(x: Tensor, window: tuple[int, int], strides: tuple[int, int],
                               pads: conv.Padding) -> Tensor:
    """Sum-pool ones shaped like one channel of one image of x, whose size is unknown here."""
    everything = (None, None, None)
    corner = st.slice_p.bind(x, slices=((0, 1, 1), everything, everything, (0, 1, 1)))
    # select(cond, 1, 1) has cond's shape, known or not (zeros_like needs a static shape).
    one = convert_to_tensor(1, x.dtype)
    ones = ew.where(ew.equal(corner, corner), one, one)
    return conv.reduce_window_p.bind(ones, kind="sum", window=window, strides=strides,
                                     padding=pads)


def _axis_counts(size: int, window: int, stride: int, pad: tuple[int, int]) -> np.ndarray:
    out = conv.window_output_size(size, window, stride, pad)
    starts = np.arange(out) * stride - pad[0]
    return np.minimum(starts + window, size) - np.maximum(starts, 0)


# --------------------------------------------------------------------------- losses


def softmax_cross_entropy_with_logits(labels: Any, logits: Any, axis: int = -1) -> Tensor:
    """-sum(labels * log_softmax(logits)) along `axis`: one loss per example.

    `labels` are probabilities of logits' dtype (Python data is converted to it). Going
    through log_softmax keeps the loss finite and exact for logits of any size.

    labels, logits: float tensors [..., n] (class probabilities and unnormalised scores);
    returns [...] of logits' dtype.

    >>> sf.nn.softmax_cross_entropy_with_logits([[0.0, 1.0], [0.5, 0.5]], [[0.0, 0.0], [0.0, 0.0]])
    sf.Tensor([0.6931472, 0.6931472], shape=(2,), dtype=float32)
    """
    logits = _floating(logits, "softmax_cross_entropy_with_logits")
    labels = _labels_like(labels, logits)
    axis = _axis("softmax_cross_entropy_with_logits", axis, logits.ndim)
    # -(p * log q) per term, then the sum: a perfect prediction gives +0.0, not -0.0.
    return reduce_sum(ew.multiply(labels, ew.negative(log_softmax(logits, axis))), axis)


def _labels_like(labels: Any, logits: Tensor) -> Tensor:
    op = "softmax_cross_entropy_with_logits"
    if isinstance(labels, Tensor) or hasattr(labels, "_as_tensor"):
        labels = convert_to_tensor(labels)
        if labels.dtype != logits.dtype:
            raise _fail(op, f"labels are {labels.dtype.name} but logits are "
                        f"{logits.dtype.name}; use sf.cast", TypeError)
        return labels
    return convert_to_tensor(np.asarray(labels), logits.dtype)


def sparse_softmax_cross_entropy_with_logits(labels: Any, logits: Any) -> Tensor:
    """-log_softmax(logits)[..., label]: integer class labels of shape logits.shape[:-1].

    An out-of-range label raises ``ValueError`` when the labels are known (eagerly), and
    ``IndexError`` when a staged function runs (the check is two tiny gathers).

    labels: int tensor [...]; logits: float tensor [..., n]; returns [...] of logits' dtype.

    >>> sf.nn.sparse_softmax_cross_entropy_with_logits([1, 0], [[0.0, 0.0], [10.0, 0.0]])
    sf.Tensor([6.931472e-01, 4.541771e-05], shape=(2,), dtype=float32)
    """
    op = "sparse_softmax_cross_entropy_with_logits"
    logits = _floating(logits, op)
    labels = convert_to_tensor(labels)
    if labels.dtype not in (dtypes.int32, dtypes.int64):
        raise _fail(op, f"labels must be int32 or int64, got {labels.dtype.name}", TypeError)
    if logits.ndim < 1 or labels.ndim != logits.ndim - 1 or any(
        a != b and None not in (a, b) for a, b in zip(labels.shape, logits.shape[:-1], strict=True)
    ):
        raise _fail(op, f"labels {format_shape(labels.shape)} must have the shape of logits "
                    f"{format_shape(logits.shape)} without its last dim")
    classes = logits.shape[-1]
    if classes is None:
        raise _fail(op, "the number of classes (logits' last dim) must be known")
    if type(labels) is Tensor and labels.size:
        values = labels._value
        if values.min() < 0 or values.max() >= classes:
            raise _fail(op, f"a label is outside [0, {classes}): min {values.min()}, "
                        f"max {values.max()}")
    positions = st.iota_p.bind(shape=(classes,), dtype=labels.dtype, dimension=0)
    hits = ew.equal(expand_dims(labels, -1), positions)
    log_probs = log_softmax(logits, -1)
    # where, not one_hot * log_probs: a -inf log-probability of another class must not
    # turn 0 * -inf into NaN.
    zero = convert_to_tensor(0, logits.dtype)
    loss = reduce_sum(ew.where(hits, ew.negative(log_probs), zero), -1)
    if type(labels) is Tensor:
        return loss
    # Staged: the labels are known only when the graph runs. A gather at each label and at
    # its mirror (classes - 1 - label) is out of range exactly where the label is, and a
    # gather's index check raises IndexError there, compiled or not (as eagerly, not NaN).
    zeros = st.broadcast_to_p.bind(zero, shape=(classes,))
    check = ew.add(gather(zeros, labels), gather(zeros, ew.subtract(classes - 1, labels)))
    return ew.add(loss, check)


def _replicas() -> int:
    current = replica.current()
    return 1 if current is None else current.num_replicas_in_sync


def compute_average_loss(per_example_loss: Any, sample_weight: Any = None,
                         global_batch_size: Any = None) -> Tensor:
    """The sum of the (weighted) per-example losses divided by the global batch size: the
    loss each replica of a distribution strategy minimises, so that the gradients the
    optimizer sums over the replicas are those of the global batch's mean (TensorFlow's
    ``tf.nn.compute_average_loss``). Without `global_batch_size`, this replica's batch
    times the number of replicas.

    >>> sf.nn.compute_average_loss(sf.constant([1.0, 2.0, 3.0]), global_batch_size=6)
    sf.Tensor(1., shape=(), dtype=float32)
    """
    losses = _floating(per_example_loss, "compute_average_loss")
    if sample_weight is not None:
        losses = losses * convert_to_tensor(sample_weight, losses.dtype)
    if global_batch_size is None:
        rows = ew.cast(shape(losses)[0], losses.dtype) if losses.ndim else 1.0
        global_batch_size = rows * float(_replicas())
    return reduce_sum(losses) / ew.cast(convert_to_tensor(global_batch_size), losses.dtype)


def scale_regularization_loss(regularization_loss: Any) -> Tensor:
    """A regularization loss divided by the number of replicas: summed over the replicas'
    gradients, it counts once (TensorFlow's ``tf.nn.scale_regularization_loss``).

    >>> sf.nn.scale_regularization_loss(sf.constant(3.0))
    sf.Tensor(3., shape=(), dtype=float32)
    """
    loss = _floating(regularization_loss, "scale_regularization_loss")
    return loss / float(_replicas())
