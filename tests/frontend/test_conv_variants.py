"""`sf.nn.conv1d`, `conv2d_transpose` and `depthwise_conv2d` against direct NumPy loops over
strides, dilations and paddings, eagerly, interpreted and compiled; gradients against
finite differences; the transpose is the adjoint of `conv2d`."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from strategies import numeric_gradient

import stageflow as sf

WAYS = ["eager", "interpreted", "compiled"]


def run(f, way, *args):
    return (f if way == "eager" else sf.function(f, jit=way == "compiled"))(*args)


def pads_for(padding, size, window, stride, dilation):
    if padding == "VALID":
        return 0, 0
    out = -(-size // stride)
    total = max((out - 1) * stride + (window - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def conv1d_reference(x, w, stride, padding, dilation):
    lo, hi = pads_for(padding, x.shape[1], w.shape[0], stride, dilation)
    xp = np.pad(x, ((0, 0), (lo, hi), (0, 0)))
    count = (xp.shape[1] - (w.shape[0] - 1) * dilation - 1) // stride + 1
    out = np.zeros((x.shape[0], count, w.shape[2]))
    for i in range(count):
        for k in range(w.shape[0]):
            out[:, i] += xp[:, i * stride + k * dilation] @ w[k]
    return out


def depthwise_reference(x, w, strides, padding, dilations):
    (sh, sw), (dh, dw) = strides, dilations
    kh, kw, c, m = w.shape
    (t, b) = pads_for(padding, x.shape[1], kh, sh, dh)
    (left, right) = pads_for(padding, x.shape[2], kw, sw, dw)
    xp = np.pad(x, ((0, 0), (t, b), (left, right), (0, 0)))
    ho = (xp.shape[1] - (kh - 1) * dh - 1) // sh + 1
    wo = (xp.shape[2] - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((x.shape[0], ho, wo, c, m))
    for i, j, a, bb in itertools.product(range(ho), range(wo), range(kh), range(kw)):
        out[:, i, j] += xp[:, i * sh + a * dh, j * sw + bb * dw, :, None] * w[a, bb]
    return out.reshape(x.shape[0], ho, wo, c * m)


def transpose_reference(x, w, output_shape, strides, padding):
    """Scatter each input pixel times the filters into the output (the adjoint of conv2d)."""
    (sh, sw) = strides
    kh, kw = w.shape[:2]
    (t, _) = pads_for(padding, output_shape[1], kh, sh, 1)
    (left, _) = pads_for(padding, output_shape[2], kw, sw, 1)
    out = np.zeros(output_shape)
    for i, j, a, b in itertools.product(range(x.shape[1]), range(x.shape[2]), range(kh),
                                        range(kw)):
        r, c = i * sh + a - t, j * sw + b - left
        if 0 <= r < output_shape[1] and 0 <= c < output_shape[2]:
            out[:, r, c] += x[:, i, j] @ w[a, b].T
    return out


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize(("stride", "padding", "dilation"),
                         [(1, "VALID", 1), (2, "SAME", 1), (1, "SAME", 2), (3, "VALID", 2)])
def test_conv1d_matches_numpy(way, stride, padding, dilation):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 11, 3)), rng.standard_normal((3, 3, 4))
    got = run(lambda a, b: sf.nn.conv1d(a, b, stride, padding, dilations=dilation), way,
              sf.constant(x), sf.constant(w))
    np.testing.assert_allclose(got.numpy(), conv1d_reference(x, w, stride, padding, dilation),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize(("strides", "padding", "dilations"),
                         [((1, 1), "VALID", (1, 1)), ((2, 1), "SAME", (1, 1)),
                          ((1, 1), "SAME", (2, 1)), ((2, 2), "VALID", (1, 2))])
def test_depthwise_conv2d_matches_numpy(way, strides, padding, dilations):
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 7, 6, 3)), rng.standard_normal((3, 2, 3, 2))
    got = run(lambda a, b: sf.nn.depthwise_conv2d(a, b, strides, padding, dilations=dilations),
              way, sf.constant(x), sf.constant(w))
    want = depthwise_reference(x, w, strides, padding, dilations)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize(("output_shape", "strides", "padding"),
                         [((2, 8, 8, 2), (2, 2), "SAME"), ((2, 9, 7, 2), (2, 3), "VALID"),
                          ((2, 5, 5, 2), (1, 1), "SAME")])
def test_conv2d_transpose_matches_numpy_and_is_conv2d_s_adjoint(way, output_shape, strides,
                                                                padding):
    rng = np.random.default_rng(2)
    w = rng.standard_normal((3, 3, 2, 4))  # [kh, kw, O, I]
    y = rng.standard_normal(output_shape)
    forward = sf.nn.conv2d(sf.constant(y), sf.constant(w), strides, padding).numpy()
    x = rng.standard_normal(forward.shape)
    got = run(lambda a, b: sf.nn.conv2d_transpose(a, b, output_shape, strides, padding), way,
              sf.constant(x), sf.constant(w)).numpy()
    np.testing.assert_allclose(got, transpose_reference(x, w, output_shape, strides, padding),
                               rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.sum(forward * x), np.sum(y * got), rtol=1e-10)


def test_conv2d_transpose_checks_the_output_shape():
    with pytest.raises(ValueError, match="gives"):
        sf.nn.conv2d_transpose(sf.ones((1, 2, 2, 1)), sf.ones((2, 2, 1, 1)), (1, 7, 7, 1), 2,
                               "VALID")



@pytest.mark.parametrize("op", ["conv1d", "depthwise", "transpose"])
def test_gradients_match_finite_differences(op):
    rng = np.random.default_rng(3)
    cases = {
        "conv1d": (lambda a, b: sf.nn.conv1d(a, b, 2, "SAME"), (1, 7, 2), (3, 2, 2)),
        "depthwise": (lambda a, b: sf.nn.depthwise_conv2d(a, b, 2, "SAME"), (1, 5, 4, 2),
                      (2, 3, 2, 2)),
        "transpose": (lambda a, b: sf.nn.conv2d_transpose(a, b, (1, 6, 6, 2), 2, "SAME"),
                      (1, 3, 3, 3), (3, 3, 2, 3)),
    }
    f, x_shape, w_shape = cases[op]
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    weights = rng.standard_normal(f(sf.constant(x), sf.constant(w)).shape)

    def loss(a, b):
        return sf.reduce_sum(f(a, b) * weights)

    with sf.GradientTape() as tape:
        a, b = sf.constant(x), sf.constant(w)
        tape.watch([a, b])
        value = loss(a, b)
    ga, gb = tape.gradient(value, [a, b])
    np.testing.assert_allclose(
        ga.numpy(), numeric_gradient(lambda v: float(loss(sf.constant(v), b).numpy()), x),
        rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        gb.numpy(), numeric_gradient(lambda v: float(loss(a, sf.constant(v)).numpy()), w),
        rtol=1e-6, atol=1e-6)
