"""Tests of `sf.nn`, the conv2d / reduce_window primitives and the erf kernel.

Every function is checked against a small NumPy reference written here with explicit loops
(so it shares no code with the vectorised kernels), in float32 and float64, plus the shape
rules with unknown dims through a shape-only trace.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as hst

import stageflow as sf
from stageflow.core import context
from stageflow.core.primitive import ShapedType
from stageflow.frontend.ops import nn
from stageflow.frontend.tensor import Tensor, wrap
from stageflow.primitives import conv
from stageflow.primitives.elementwise import _erf

FLOATS = [np.float32, np.float64]
RNG = np.random.default_rng(1234)


def rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def tol(dtype):
    return {"rtol": 2e-5, "atol": 2e-5} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}


# --------------------------------------------------------------------------- references


def tf_same_pads(size, window, stride, dilation=1):
    """TensorFlow's documented SAME rule: out = ceil(size / stride), extra pad at the end."""
    effective = (window - 1) * dilation + 1
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + effective - size, 0)
    return total // 2, total - total // 2


def conv2d_ref(x, w, strides, pads, dilations=(1, 1)):
    x, w = x.astype(np.float64), w.astype(np.float64)
    xp = np.pad(x, ((0, 0), pads[0], pads[1], (0, 0)))
    kh, kw, _, channels_out = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    out_h = (xp.shape[1] - (kh - 1) * dh - 1) // sh + 1
    out_w = (xp.shape[2] - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((x.shape[0], out_h, out_w, channels_out))
    for i in range(out_h):
        for j in range(out_w):
            for a in range(kh):
                for b in range(kw):
                    out[:, i, j, :] += xp[:, i * sh + a * dh, j * sw + b * dw, :] @ w[a, b]
    return out


def pool_ref(x, kind, window, strides, pads):
    """Max or mean over the real elements of each window (padding never counts)."""
    _, height, width, _ = x.shape
    out_h = (height + sum(pads[0]) - window[0]) // strides[0] + 1
    out_w = (width + sum(pads[1]) - window[1]) // strides[1] + 1
    out = np.zeros((x.shape[0], out_h, out_w, x.shape[3]), dtype=np.float64)
    for i in range(out_h):
        for j in range(out_w):
            r0 = i * strides[0] - pads[0][0]
            c0 = j * strides[1] - pads[1][0]
            rows = slice(max(r0, 0), min(r0 + window[0], height))
            cols = slice(max(c0, 0), min(c0 + window[1], width))
            patch = x[:, rows, cols, :].astype(np.float64)
            out[:, i, j, :] = patch.max(axis=(1, 2)) if kind == "max" else patch.mean(axis=(1, 2))
    return out


def log_softmax_ref(x, axis=-1):
    x = x.astype(np.float64)
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


# --------------------------------------------------------------------------- a shape-only trace


class Abstract(Tensor):
    """A symbolic tensor: only a ShapedType, as a staging trace sees it."""

    def __init__(self, aval: ShapedType) -> None:
        self.aval = aval

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))


class ShapeTrace:
    """Runs only shape rules, like the staging trace, so None dims flow through the ops."""

    def process(self, primitive, args, params):
        avals = [a.aval if isinstance(a, Abstract) else ShapedType(a.shape, a.dtype) for a in args]
        out = primitive.abstract_eval(*avals, **params)
        return tuple(map(Abstract, out)) if primitive.multiple_results else Abstract(out)

    def constant(self, array, device=None):
        return wrap(np.asarray(array))


def traced(fn, *avals):
    with context.push_trace(ShapeTrace()):
        return fn(*(Abstract(a) for a in avals))


# --------------------------------------------------------------------------- conv2d


CONV_CASES = [
    # (input NHWC, filter HWIO, strides, dilations)
    ((2, 7, 6, 3), (3, 3, 3, 4), 1, 1),
    ((2, 7, 6, 3), (3, 3, 3, 4), 2, 1),
    ((1, 9, 8, 2), (3, 2, 2, 5), (2, 1), 1),
    ((2, 9, 9, 3), (3, 3, 3, 2), 1, 2),
    ((1, 11, 10, 2), (2, 3, 2, 3), 2, 2),
    ((3, 5, 5, 1), (1, 1, 1, 2), 1, 1),
    ((1, 4, 4, 2), (4, 4, 2, 1), 1, 1),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_matches_loops(case, padding, dtype):
    x_shape, w_shape, strides, dilations = case
    x, w = rand(*x_shape, dtype=dtype), rand(*w_shape, dtype=dtype)
    s = (strides, strides) if isinstance(strides, int) else strides
    d = (dilations, dilations)
    if padding == "SAME":
        pads = tuple(tf_same_pads(x_shape[1 + i], w_shape[i], s[i], d[i]) for i in (0, 1))
    else:
        pads = ((0, 0), (0, 0))
    out = nn.conv2d(sf.constant(x), sf.constant(w), strides, padding, dilations=dilations)
    assert out.dtype == dtype
    if padding == "SAME" and dilations == 1:
        assert out.shape[1:3] == tuple(math.ceil(x_shape[1 + i] / s[i]) for i in (0, 1))
    np.testing.assert_allclose(out.numpy(), conv2d_ref(x, w, s, pads, d), **tol(dtype))


def test_conv2d_argument_forms():
    x, w = rand(1, 6, 7, 2), rand(3, 3, 2, 3)
    ref = conv2d_ref(x, w, (2, 1), ((1, 2), (0, 1)))
    for strides in ([1, 2, 1, 1], [2, 1]):
        for padding in ([[0, 0], [1, 2], [0, 1], [0, 0]], [[1, 2], [0, 1]]):
            got = nn.conv2d(x, w, strides, padding).numpy()
            np.testing.assert_allclose(got, ref, rtol=1e-12)
    same = nn.conv2d(x, w, [1, 1, 1, 1], "same")  # TF spells it in capitals; either works
    np.testing.assert_allclose(same.numpy(), conv2d_ref(x, w, (1, 1), ((1, 1), (1, 1))))
    empty = nn.conv2d(np.zeros((0, 5, 5, 2)), np.ones((3, 3, 2, 4)), 2, "SAME")
    assert empty.shape == (0, 3, 3, 4)


def test_same_padding_rule_known_values():
    # TensorFlow: out = ceil(in / stride), and the odd pixel of padding goes at the end.
    assert nn.same_padding(5, 3, 2) == (1, 1)
    assert nn.same_padding(6, 3, 2) == (0, 1)
    assert nn.same_padding(4, 1, 2) == (0, 0)
    assert nn.same_padding(7, 3, 1, dilation=2) == (2, 2)
    assert nn.same_padding(None, 4, 1) == (1, 2)
    with pytest.raises(ValueError, match="stride > 1"):
        nn.same_padding(None, 3, 2)


@given(
    n=hst.integers(1, 2), h=hst.integers(1, 8), w=hst.integers(1, 8), c=hst.integers(1, 3),
    o=hst.integers(1, 3), kh=hst.integers(1, 3), kw=hst.integers(1, 3),
    sh=hst.integers(1, 3), sw=hst.integers(1, 3), dil=hst.integers(1, 2),
    padding=hst.sampled_from(["SAME", "VALID"]),
)
def test_conv2d_hypothesis(n, h, w, c, o, kh, kw, sh, sw, dil, padding):
    x, f = rand(n, h, w, c), rand(kh, kw, c, o)
    if padding == "VALID" and ((kh - 1) * dil + 1 > h or (kw - 1) * dil + 1 > w):
        with pytest.raises(ValueError, match="conv2d.*larger than the padded input"):
            nn.conv2d(x, f, [sh, sw], padding, dilations=dil)
        return
    pads = ((0, 0), (0, 0))
    if padding == "SAME":
        pads = (tf_same_pads(h, kh, sh, dil), tf_same_pads(w, kw, sw, dil))
    got = nn.conv2d(x, f, [sh, sw], padding, dilations=dil).numpy()
    np.testing.assert_allclose(got, conv2d_ref(x, f, (sh, sw), pads, (dil, dil)), rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_conv2d_half_precision(dtype):
    x, w = rand(1, 5, 5, 4), rand(3, 3, 4, 2)
    out = nn.conv2d(sf.constant(x.astype(dtype)), sf.constant(w.astype(dtype)), 1, "SAME")
    assert out.dtype == dtype
    ref = conv2d_ref(x.astype(dtype), w.astype(dtype), (1, 1), ((1, 1), (1, 1)))
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref, rtol=0.05, atol=0.1)


def test_conv2d_channel_mismatch_names_op_and_shapes():
    x, w = sf.constant(rand(1, 5, 5, 3, dtype=np.float32)), sf.zeros((3, 3, 4, 8))
    with pytest.raises(ValueError) as info:
        nn.conv2d(x, w, 1, "SAME")
    message = str(info.value)
    assert "conv2d" in message and "(1, 5, 5, 3)" in message and "(3, 3, 4, 8)" in message


@pytest.mark.parametrize(
    "x, w, error, pattern",
    [
        (np.zeros((1, 4, 4, 2), np.int32), np.zeros((3, 3, 2, 1), np.int32), TypeError,
         "conv2d.*int32"),
        (np.zeros((1, 4, 4, 2), np.float32), np.zeros((3, 3, 2, 1), np.float64), TypeError,
         "conv2d.*different dtypes"),
        (np.zeros((4, 4, 2), np.float32), np.zeros((3, 3, 2, 1), np.float32), ValueError,
         "conv2d.*rank 4"),
        (np.zeros((1, 4, 4, 2), np.float32), np.zeros((3, 2, 1), np.float32), ValueError,
         r"conv2d.*\(3, 2, 1\).*\(1, 4, 4, 2\)"),
    ],
)
def test_conv2d_bad_operands(x, w, error, pattern):
    with pytest.raises(error, match=pattern):
        nn.conv2d(x, w, 1, "SAME")


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        ({"strides": [1, 2, 3]}, "strides"),
        ({"strides": [2, 1, 1, 1]}, "batch and channel"),
        ({"strides": 0}, "positive"),
        ({"padding": "FULL"}, "'SAME', 'VALID'"),
        ({"padding": [[1, 1], [1, 1], [1, 1], [1, 1]]}, "batch and channel"),
        ({"padding": [[1, -1], [0, 0]]}, "2 or 4 pairs"),
        ({"data_format": "NCHW"}, "NHWC"),
    ],
)
def test_conv2d_bad_arguments(kwargs, pattern):
    args = {"strides": 1, "padding": "SAME"} | kwargs
    with pytest.raises(ValueError, match=f"conv2d.*{pattern}"):
        nn.conv2d(np.zeros((1, 4, 4, 2)), np.zeros((3, 3, 2, 1)), **args)


# --------------------------------------------------------------------------- pooling

POOL_CASES = [
    # (input NHWC, ksize, strides)
    ((2, 7, 6, 3), 2, 2),
    ((2, 7, 6, 3), 3, 2),
    ((1, 5, 5, 2), 3, 1),
    ((1, 9, 8, 1), (3, 2), (2, 3)),
    ((2, 4, 4, 2), 4, 4),
    ((1, 6, 5, 1), 1, 2),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", POOL_CASES)
def test_pooling_matches_loops(case, kind, padding, dtype):
    shape, ksize, strides = case
    k = (ksize, ksize) if isinstance(ksize, int) else ksize
    s = (strides, strides) if isinstance(strides, int) else strides
    pads = ((0, 0), (0, 0))
    if padding == "SAME":
        pads = tuple(tf_same_pads(shape[1 + i], k[i], s[i]) for i in (0, 1))
    x = rand(*shape, dtype=dtype)
    pool = nn.max_pool2d if kind == "max" else nn.avg_pool2d
    out = pool(sf.constant(x), ksize, strides, padding)
    assert out.dtype == dtype
    np.testing.assert_allclose(out.numpy(), pool_ref(x, kind, k, s, pads), **tol(dtype))


def test_avg_pool_same_excludes_padding_like_tensorflow():
    x = np.arange(1.0, 10.0, dtype=np.float32).reshape(1, 3, 3, 1)
    out = nn.avg_pool2d(x, 2, 2, "SAME").numpy()[0, :, :, 0]
    np.testing.assert_array_equal(out, [[3.0, 4.5], [7.5, 9.0]])
    out = nn.max_pool2d(-x, 2, 2, "SAME").numpy()[0, :, :, 0]  # -inf padding never wins
    np.testing.assert_array_equal(out, [[-1.0, -3.0], [-7.0, -9.0]])


def test_pooling_explicit_padding():
    x = rand(1, 5, 6, 2)
    pads = [[0, 0], [2, 1], [0, 2], [0, 0]]
    for kind, pool in (("max", nn.max_pool2d), ("avg", nn.avg_pool2d)):
        got = pool(x, [1, 3, 3, 1], [1, 2, 1, 1], pads).numpy()
        np.testing.assert_allclose(got, pool_ref(x, kind, (3, 3), (2, 1), ((2, 1), (0, 2))))


@given(
    h=hst.integers(1, 9), w=hst.integers(1, 9), kh=hst.integers(1, 4), kw=hst.integers(1, 4),
    sh=hst.integers(1, 3), sw=hst.integers(1, 3), kind=hst.sampled_from(["max", "avg"]),
    padding=hst.sampled_from(["SAME", "VALID"]),
)
def test_pooling_hypothesis(h, w, kh, kw, sh, sw, kind, padding):
    x = rand(2, h, w, 2)
    pool = nn.max_pool2d if kind == "max" else nn.avg_pool2d
    if padding == "VALID" and (kh > h or kw > w):
        with pytest.raises(ValueError, match="larger than the padded input"):
            pool(x, [kh, kw], [sh, sw], padding)
        return
    pads = ((0, 0), (0, 0))
    if padding == "SAME":
        pads = (tf_same_pads(h, kh, sh), tf_same_pads(w, kw, sw))
    got = pool(x, [kh, kw], [sh, sw], padding).numpy()
    np.testing.assert_allclose(got, pool_ref(x, kind, (kh, kw), (sh, sw), pads), rtol=1e-12)


def test_max_pool_int_and_avg_pool_int_error():
    x = np.arange(-20, 16, dtype=np.int32).reshape(1, 6, 6, 1)
    got = nn.max_pool2d(x, 3, 2, "SAME")
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got.numpy(), pool_ref(x, "max", (3, 3), (2, 2), ((0, 1),) * 2))
    with pytest.raises(TypeError, match="avg_pool2d.*int32"):
        nn.avg_pool2d(x, 2, 2, "SAME")
    with pytest.raises(TypeError, match="reduce_window.*bool"):
        nn.max_pool2d(x > 0, 2, 2, "SAME")


def test_window_counts_at_run_time_match_static_counts():
    x = sf.constant(rand(2, 7, 5, 3))
    for window, strides in (((3, 3), (1, 1)), ((2, 3), (2, 2)), ((4, 2), (3, 1))):
        pads = tuple(tf_same_pads(x.shape[1 + i], window[i], strides[i]) for i in (0, 1))
        static = nn._window_counts(x, window, strides, pads).numpy()
        dynamic = nn._window_counts_at_run_time(x, window, strides, pads).numpy()
        np.testing.assert_array_equal(np.broadcast_to(static, dynamic.shape), dynamic)


# --------------------------------------------------------------------------- unknown dims


def test_shape_rules_with_unknown_dims():
    f32 = np.dtype(np.float32)
    out = conv.conv2d_p.abstract_eval(
        ShapedType((None, 9, None, 3), f32), ShapedType((3, 3, 3, 8), f32),
        strides=(2, 2), padding=((1, 1), (1, 1)), dilations=(1, 1))
    assert out == ShapedType((None, 5, None, 8), f32)
    out = conv.reduce_window_p.abstract_eval(
        ShapedType((None, None, 6, 2), f32), kind="max", window=(2, 2), strides=(2, 2),
        padding=((0, 0), (0, 0)))
    assert out == ShapedType((None, None, 3, 2), f32)


def test_nn_functions_trace_with_unknown_dims():
    f32 = np.dtype(np.float32)
    image = ShapedType((None, 8, 8, 3), f32)
    filters = ShapedType((3, 3, 3, 4), f32)
    assert traced(lambda x, w: nn.conv2d(x, w, 2, "SAME"), image, filters).shape == (
        None, 4, 4, 4)
    unknown = ShapedType((None, None, None, 3), f32)
    assert traced(lambda x: nn.avg_pool2d(x, 3, 1, "SAME"), unknown).shape == (
        None, None, None, 3)
    assert traced(lambda x: nn.max_pool2d(x, 2, 2, "VALID"), unknown).shape == (
        None, None, None, 3)
    with pytest.raises(ValueError, match="stride > 1"):
        traced(lambda x: nn.avg_pool2d(x, 3, 2, "SAME"), unknown)
    logits = ShapedType((None, 10), f32)
    labels = ShapedType((None,), np.dtype(np.int32))
    loss = traced(nn.sparse_softmax_cross_entropy_with_logits, labels, logits)
    assert loss.shape == (None,)
    assert traced(nn.softmax, logits).shape == (None, 10)
    assert traced(lambda x: nn.gelu(x, approximate=True), logits).shape == (None, 10)


@pytest.mark.skipif(not hasattr(sf, "function"), reason="sf.function is not there yet")
def test_staged_with_unknown_batch_matches_eager():
    def model(x, w, labels):
        h = nn.relu(nn.conv2d(x, w, 2, "SAME"))
        h = nn.max_pool2d(nn.avg_pool2d(h, 3, 1, "SAME"), 2, 2, "VALID")
        logits = sf.reshape(h, (-1, 16))
        return nn.sparse_softmax_cross_entropy_with_logits(labels, logits), nn.gelu(logits)

    specs = [sf.TensorSpec((None, 8, 8, 3), sf.float32), sf.TensorSpec((3, 3, 3, 4), sf.float32),
             sf.TensorSpec((None,), sf.int32)]
    staged = sf.function(model, input_signature=specs, jit=False)
    for batch in (1, 5):
        args = (rand(batch, 8, 8, 3, dtype=np.float32), rand(3, 3, 3, 4, dtype=np.float32),
                RNG.integers(0, 16, batch).astype(np.int32))
        for got, want in zip(staged(*args), model(*args), strict=True):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------- activations


def _erf_ref(x):
    return np.vectorize(math.erf)(x.astype(np.float64))


ACTIVATIONS = {
    "relu": (nn.relu, lambda x: np.maximum(x, 0)),
    "relu6": (nn.relu6, lambda x: np.clip(x, 0, 6)),
    "leaky_relu": (nn.leaky_relu, lambda x: np.where(x > 0, x, 0.2 * x)),
    "elu": (nn.elu, lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0)))),
    "gelu": (nn.gelu, lambda x: 0.5 * x * (1 + _erf_ref(x / np.sqrt(2)))),
    "gelu_tanh": (lambda x: nn.gelu(x, approximate=True),
                  lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))),
    "softplus": (nn.softplus, lambda x: np.logaddexp(0, x)),
    "sigmoid": (nn.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    "tanh": (nn.tanh, np.tanh),
    "silu": (nn.silu, lambda x: x / (1 + np.exp(-x))),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations(name, dtype):
    fn, ref = ACTIVATIONS[name]
    x = np.concatenate([rand(50) * 4, [-30.0, -7.0, -0.0, 0.0, 1e-8, 5.5, 7.0, 30.0]])
    x = x.astype(dtype)
    out = fn(sf.constant(x))
    assert out.dtype == dtype and out.shape == x.shape
    np.testing.assert_allclose(out.numpy(), ref(x.astype(np.float64)), **tol(dtype))


def test_leaky_relu_alpha_and_int_relu():
    x = np.array([-2.0, 0.5], np.float32)
    np.testing.assert_allclose(nn.leaky_relu(x, alpha=0.5).numpy(), [-1.0, 0.5])
    ints = nn.relu6(np.array([-3, 2, 9], np.int32))
    assert ints.dtype == np.int32
    np.testing.assert_array_equal(ints.numpy(), [0, 2, 6])


@pytest.mark.parametrize(
    "fn", [nn.elu, nn.gelu, nn.softplus, nn.leaky_relu, nn.softmax, nn.log_softmax, nn.silu]
)
def test_float_only_functions_reject_ints(fn):
    with pytest.raises(TypeError, match="int32"):
        fn(np.array([1, 2], np.int32))


@pytest.mark.parametrize("dtype", FLOATS)
def test_softplus_is_stable(dtype):
    x = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], dtype)
    out = nn.softplus(x).numpy()
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, np.logaddexp(0, x.astype(np.float64)), rtol=1e-6)


# --------------------------------------------------------------------------- softmax


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_and_log_softmax(axis, dtype):
    x = rand(3, 5, 4, dtype=dtype) * 3
    ref = log_softmax_ref(x, axis)
    np.testing.assert_allclose(nn.log_softmax(x, axis).numpy(), ref, **tol(dtype))
    np.testing.assert_allclose(nn.softmax(x, axis=axis).numpy(), np.exp(ref), **tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_large_logits(dtype):
    x = np.array([[1000.0, 0.0, -1000.0], [-1000.0, -1000.0, -999.0]], dtype)
    soft, log = nn.softmax(x).numpy(), nn.log_softmax(x).numpy()
    assert np.all(np.isfinite(soft)) and np.all(np.isfinite(log))
    np.testing.assert_allclose(log, log_softmax_ref(x), rtol=1e-6)
    np.testing.assert_allclose(soft, np.exp(log_softmax_ref(x)), rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(soft.sum(axis=-1), 1.0, rtol=1e-6)


def test_softmax_bad_axis():
    with pytest.raises(ValueError, match="softmax.*axis 2"):
        nn.softmax(np.zeros((2, 2)), axis=2)


# --------------------------------------------------------------------------- losses


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_cross_entropy(dtype):
    logits = rand(4, 6, dtype=dtype) * 5
    labels = RNG.random((4, 6)).astype(dtype)
    labels /= labels.sum(axis=-1, keepdims=True)
    ref = -(labels * log_softmax_ref(logits)).sum(axis=-1)
    got = nn.softmax_cross_entropy_with_logits(labels, logits)
    assert got.dtype == dtype and got.shape == (4,)
    np.testing.assert_allclose(got.numpy(), ref, **tol(dtype))
    by_axis = nn.softmax_cross_entropy_with_logits(labels.T, logits.T, axis=0)
    np.testing.assert_allclose(by_axis.numpy(), ref, **tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_cross_entropies_with_large_logits(dtype):
    logits = np.array([[1000.0, -1000.0, 0.0], [-1000.0, 1000.0, 999.0]], dtype)
    dense = nn.softmax_cross_entropy_with_logits([[1.0, 0, 0], [0, 0, 1.0]], logits).numpy()
    sparse = nn.sparse_softmax_cross_entropy_with_logits([0, 2], logits).numpy()
    expected = [0.0, 1.0 + np.log1p(np.exp(-1.0))]
    np.testing.assert_allclose(dense, expected, rtol=1e-6, atol=0)
    np.testing.assert_allclose(sparse, expected, rtol=1e-6, atol=0)
    assert not np.signbit(dense[0]) and not np.signbit(sparse[0])


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", FLOATS)
def test_sparse_softmax_cross_entropy(dtype, label_dtype):
    logits = rand(2, 3, 5, dtype=dtype) * 4
    labels = RNG.integers(0, 5, (2, 3)).astype(label_dtype)
    ref = -np.take_along_axis(log_softmax_ref(logits), labels[..., None], -1)[..., 0]
    got = nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
    assert got.dtype == dtype and got.shape == (2, 3)
    np.testing.assert_allclose(got.numpy(), ref, **tol(dtype))


def test_loss_errors():
    logits = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="sparse_softmax.*outside \\[0, 3\\)"):
        nn.sparse_softmax_cross_entropy_with_logits(np.array([0, 3], np.int32), logits)
    with pytest.raises(TypeError, match="sparse_softmax.*int32 or int64"):
        nn.sparse_softmax_cross_entropy_with_logits(np.array([0.0, 1.0]), logits)
    with pytest.raises(ValueError, match="sparse_softmax.*without its last dim"):
        nn.sparse_softmax_cross_entropy_with_logits(np.array([0, 1, 2], np.int32), logits)
    with pytest.raises(TypeError, match="softmax_cross_entropy.*float64.*float32"):
        nn.softmax_cross_entropy_with_logits(sf.constant(np.zeros((2, 3))), logits)
    with pytest.raises(TypeError, match="int32"):
        nn.softmax_cross_entropy_with_logits([[1, 0]], np.array([[1, 2]], np.int32))


@pytest.mark.parametrize("jit", [True, False], ids=["compiled", "interpreted"])
@pytest.mark.parametrize("label", [3, -1])
def test_out_of_range_labels_raise_when_a_staged_function_runs(jit, label):
    """Once NaN in staged functions while eager raised: now IndexError from the graph."""
    loss = sf.function(nn.sparse_softmax_cross_entropy_with_logits, jit=jit)
    logits = np.zeros((2, 3), np.float32)
    np.testing.assert_allclose(loss(np.array([0, 2], np.int32), logits).numpy(), np.log(3.0),
                               rtol=1e-6)
    with pytest.raises(IndexError, match="out of range"):
        loss(np.array([0, label], np.int32), logits)


@pytest.mark.filterwarnings("ignore:divide by zero")  # log_softmax's log(0) over no elements
@pytest.mark.parametrize("jit", [True, False], ids=["compiled", "interpreted"])
def test_softmax_over_an_unknown_dim_that_is_empty(jit):
    """Eagerly a (3, 0) softmax is (3, 0); staged with unknown dims it once raised (the max
    of no elements)."""
    spec = [sf.TensorSpec([None, None], sf.float32)]
    both = sf.function(lambda v: (nn.softmax(v), nn.log_softmax(v)), input_signature=spec,
                       jit=jit)
    assert [t.shape for t in both(np.zeros((3, 0), np.float32))] == [(3, 0), (3, 0)]
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(both(x)[0].numpy(), nn.softmax(x).numpy(), rtol=1e-6)


# --------------------------------------------------------------------------- erf


def test_erf_matches_math_erf_to_a_few_ulps():
    x = np.concatenate([
        np.linspace(-6.0, 6.0, 200_001),
        np.geomspace(1e-300, 6.0, 20_000),
        -np.geomspace(1e-300, 6.0, 20_000),
        [0.46875, np.nextafter(0.46875, 1), 4.0, np.nextafter(4.0, 5)],
    ])
    ref = _erf_ref(x)
    got = _erf(x)
    assert got.dtype == np.float64
    rel = np.abs(got - ref) / np.abs(np.where(ref == 0, 1.0, ref))
    assert rel.max() < 1e-14
    assert np.all(np.abs(got - ref) <= 4 * np.spacing(np.abs(ref)))


def test_erf_limits_nan_and_signed_zero():
    x = np.array([6.0, 7.5, 27.0, 1e300, np.inf, -6.0, -1e300, -np.inf, np.nan, 0.0, -0.0])
    # Branches run on clamped operands: no overflow or invalid warnings (underflow is benign).
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        got = _erf(x)
    np.testing.assert_array_equal(got[:8], [1, 1, 1, 1, 1, -1, -1, -1])
    assert np.isnan(got[8])
    assert got[9] == 0 and not np.signbit(got[9]) and np.signbit(got[10])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32])
def test_erf_low_precision_rounds_the_float64_result(dtype):
    x = np.linspace(-5, 5, 1001).astype(dtype)
    got = sf.erf(sf.constant(x))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.numpy(), _erf_ref(x).astype(dtype))


# --------------------------------------------------------------------------- dropout


def test_dropout_inference_and_rate_checks():
    x = sf.constant(rand(4, 4, dtype=np.float32))
    assert nn.dropout(x, 0.5, training=False) is x
    assert nn.dropout(x, 0.0) is x
    for rate in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match="dropout.*rate"):
            nn.dropout(x, rate)
    with pytest.raises(TypeError, match="dropout.*int32"):
        nn.dropout(np.ones(3, np.int32), 0.5)


def test_dropout_keeps_and_scales():
    pytest.importorskip("stageflow.frontend.ops.random")
    x = np.full((200, 200), 2.0, np.float32)
    out = nn.dropout(x, 0.25, seed=7).numpy()
    assert out.dtype == np.float32
    kept = out != 0
    np.testing.assert_allclose(out[kept], 2.0 / 0.75)
    assert abs(kept.mean() - 0.75) < 0.02


@pytest.mark.parametrize("mode", ["eager", "interpreted", "compiled"])
def test_a_conv_over_no_input_channels_is_zeros_every_way(mode):
    """An empty sum per output: zeros of the output's shape, eagerly as compiled."""
    x, w = np.ones((2, 5, 4, 0), np.float32), np.ones((3, 3, 0, 6), np.float32)

    def conv(a, b):
        return sf.nn.conv2d(a, b, strides=2, padding="SAME")

    got = conv(x, w) if mode == "eager" else sf.function(conv, jit=mode == "compiled")(x, w)
    np.testing.assert_array_equal(np.asarray(got), np.zeros((2, 3, 2, 6), np.float32))
