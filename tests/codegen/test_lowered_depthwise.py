"""`depthwise_conv2d`: the lowered op against its NumPy kernel and a direct loop reference
(shapes, channels, multipliers, windows, strides, dilations, padding and dtypes drawn by
hypothesis; compiled alone, so that its status code says the compiled code ran, with static
and unknown dims), split over the cores on a large image; its gradients against finite
differences and against the gradients of the sum-of-slices decomposition it replaced;
eager, interpreted and compiled staged runs agreeing with an unknown batch; bad dims
refused with a status code; the ONNX export run by onnxruntime."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.codegen.lowered.compile import OpSpec, compile_ops
from stageflow.core.primitive import REGISTRY, ShapedType
from stageflow.primitives.depthwise import depthwise_conv2d_p

FLOATS = [np.float32, np.float64]
NAME = depthwise_conv2d_p.name


def reference(x, w, strides, padding, dilations):
    """Pixel by pixel, tap by tap, in float64 over the zero-padded input."""
    kh, kw, channels, multiplier = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), padding[0], padding[1], (0, 0)))
    (sh, sw), (dh, dw) = strides, dilations
    ho = (xp.shape[1] - (kh - 1) * dh - 1) // sh + 1
    wo = (xp.shape[2] - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((x.shape[0], ho, wo, channels, multiplier))
    for i in range(ho):
        for j in range(wo):
            for a in range(kh):
                for b in range(kw):
                    out[:, i, j] += xp[:, i * sh + a * dh, j * sw + b * dw, :, None] * w[a, b]
    return out.reshape(x.shape[0], ho, wo, channels * multiplier)


def run_compiled(arrays: list[np.ndarray], unknown: bool, **params) -> tuple[int, np.ndarray]:
    """The compiled op's status and result (NaN where it wrote nothing)."""
    inputs = tuple(ShapedType(tuple(None if unknown else d for d in a.shape), a.dtype)
                   for a in arrays)
    spec = OpSpec(NAME, inputs, (REGISTRY[NAME].shape_rule(*inputs, **params),), params)
    (op,) = compile_ops([spec])
    assert op is not None, "depthwise_conv2d has no lowering"
    shape = REGISTRY[NAME].kernel(*arrays, **params).shape
    out = np.full(shape, np.nan, arrays[0].dtype)
    return op.call(arrays, [out]), out


def values(shape, dtype, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@settings(max_examples=15, deadline=None)  # each example compiles its own op
@given(batch=st.integers(1, 3), size=st.tuples(st.integers(1, 9), st.integers(1, 9)),
       channels=st.sampled_from([1, 3, 8, 16, 21, 40]), multiplier=st.integers(1, 3),
       window=st.tuples(st.integers(1, 4), st.integers(1, 4)),
       strides=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       dilations=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       padding=st.tuples(st.tuples(st.integers(0, 3), st.integers(0, 3)),
                         st.tuples(st.integers(0, 3), st.integers(0, 3))),
       dtype=st.sampled_from(FLOATS), unknown=st.booleans())
def test_the_compiled_op_matches_the_kernel_and_a_direct_reference(
        batch, size, channels, multiplier, window, strides, dilations, padding, dtype,
        unknown):
    for axis in (0, 1):
        assume(size[axis] + sum(padding[axis]) >= (window[axis] - 1) * dilations[axis] + 1)
    x = values((batch, *size, channels), dtype)
    w = values((*window, channels, multiplier), dtype, seed=1)
    params = {"strides": strides, "padding": padding, "dilations": dilations}
    status, got = run_compiled([x, w], unknown, **params)
    assert status == 0
    want = reference(x, w, strides, padding, dilations)
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(REGISTRY[NAME].kernel(x, w, **params), want, rtol=tolerance,
                               atol=tolerance)


@pytest.mark.parametrize("threads", [0, 1])
def test_a_large_image_split_over_the_cores_matches_the_kernel(threads):
    """Enough work for several tasks (and, with one thread, the same result in one)."""
    x = values((2, 40, 36, 48), np.float32)
    w = values((3, 3, 48, 1), np.float32, seed=1)
    params = {"strides": (1, 1), "padding": ((1, 1), (1, 1)), "dilations": (1, 1)}
    before = sf.config.threading.get_intra_op_parallelism_threads()
    sf.config.threading.set_intra_op_parallelism_threads(threads)
    try:
        status, got = run_compiled([x, w], False, **params)
    finally:
        sf.config.threading.set_intra_op_parallelism_threads(before)
    assert status == 0
    np.testing.assert_allclose(got, REGISTRY[NAME].kernel(x, w, **params), rtol=1e-5,
                               atol=1e-5)


def test_bad_dims_are_refused_with_a_status_code():
    params = {"strides": (1, 1), "padding": ((0, 0), (0, 0)), "dilations": (1, 1)}
    x, w = values((1, 5, 5, 4), np.float32), values((3, 3, 4, 1), np.float32)
    inputs = (ShapedType((None,) * 4, np.dtype(np.float32)),) * 2
    spec = OpSpec(NAME, inputs, (REGISTRY[NAME].shape_rule(*inputs, **params),), params)
    (op,) = compile_ops([spec])
    assert op is not None
    out = np.zeros((1, 3, 3, 4), np.float32)
    assert op.call([x, values((3, 3, 5, 1), np.float32)], [np.zeros((1, 3, 3, 5),
                                                                     np.float32)]) == 2
    assert op.call([values((1, 2, 5, 4), np.float32), w], [out]) == 1  # the window is taller
    assert op.call([x, w], [np.zeros((1, 3, 4, 4), np.float32)]) == 3  # the result's dims
    assert op.call([x, w], [out]) == 0


# -- gradients -----------------------------------------------------------------------------


def decomposition(x, w, strides, padding, dilations):
    """The sum over taps of strided slices of the padded input times the taps' filter rows
    that `sf.nn.depthwise_conv2d` was before the primitive."""
    kh, kw, channels, multiplier = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    padded = sf.expand_dims(sf.pad(x, [(0, 0), *padding, (0, 0)]), 4)
    ho = (padded.shape[1] - (kh - 1) * dh - 1) // sh + 1
    wo = (padded.shape[2] - (kw - 1) * dw - 1) // sw + 1
    total = None
    for a in range(kh):
        for b in range(kw):
            tap = padded[:, a * dh: a * dh + (ho - 1) * sh + 1: sh,
                         b * dw: b * dw + (wo - 1) * sw + 1: sw] * w[a, b]
            total = tap if total is None else total + tap
    return sf.reshape(total, (x.shape[0], ho, wo, channels * multiplier))


@pytest.mark.parametrize("strides, dilations, padding, multiplier", [
    ((1, 1), (1, 1), ((1, 1), (1, 1)), 1),
    ((2, 1), (1, 2), ((0, 2), (3, 0)), 2),
    ((2, 3), (2, 1), ((2, 1), (0, 0)), 3),
    ((3, 2), (1, 1), ((0, 0), (1, 2)), 1),
])
def test_gradients_match_finite_differences_and_the_decomposition(strides, dilations, padding,
                                                                  multiplier):
    x = values((2, 7, 8, 3), np.float64)
    w = values((3, 2, 3, multiplier), np.float64, seed=1)
    weights = values(REGISTRY[NAME].kernel(x, w, strides=strides, padding=padding,
                                           dilations=dilations).shape, np.float64, seed=2)

    def loss(conv):
        return lambda a, b: sf.reduce_sum(sf.tanh(conv(a, b, strides, padding, dilations))
                                          * weights)

    def primitive(a, b, strides, padding, dilations):
        return sf.nn.depthwise_conv2d(a, b, strides, padding, dilations=dilations)

    staged = sf.function(sf.grad(loss(primitive), argnums=(0, 1)))
    dx, dw = (g.numpy() for g in staged(x, w))
    old_dx, old_dw = (g.numpy() for g in sf.grad(loss(decomposition), argnums=(0, 1))(x, w))
    np.testing.assert_allclose(dx, old_dx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dw, old_dw, rtol=1e-10, atol=1e-12)
    f = loss(primitive)
    rng, eps = np.random.default_rng(3), 1e-6
    for operand, grad, index in ((x, dx, 0), (w, dw, 1)):
        for _ in range(4):
            at = tuple(int(rng.integers(0, n)) for n in operand.shape)
            up, down = operand.copy(), operand.copy()
            up[at] += eps
            down[at] -= eps
            args_up = (up, w) if index == 0 else (x, up)
            args_down = (down, w) if index == 0 else (x, down)
            numeric = (float(f(*args_up)) - float(f(*args_down))) / (2 * eps)
            assert abs(numeric - grad[at]) < 1e-6 * max(1.0, abs(numeric))


@pytest.mark.parametrize("dtype", FLOATS)
def test_eager_interpreted_and_compiled_agree_with_an_unknown_batch(dtype):
    x = values((3, 10, 9, 20), dtype)
    w = values((3, 3, 20, 2), dtype, seed=1)

    def forward(a):
        return sf.nn.relu(sf.nn.depthwise_conv2d(a, w, [2, 1], "SAME", dilations=1))

    signature = [sf.TensorSpec([None, 10, 9, 20], dtype)]
    eager = forward(sf.constant(x)).numpy()
    compiled = sf.function(forward, input_signature=signature)
    interpreted = sf.function(forward, input_signature=signature, jit=False)
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    for batch in (1, 3):
        want = eager[:batch] if batch == 3 else forward(sf.constant(x[:1])).numpy()
        np.testing.assert_allclose(compiled(x[:batch]).numpy(), want, rtol=tolerance,
                                   atol=tolerance)
        np.testing.assert_allclose(interpreted(x[:batch]).numpy(), want, rtol=tolerance,
                                   atol=tolerance)
    assert eager.shape == (3, 5, 9, 40)


def test_half_precision_accumulates_in_float32():
    x = values((1, 6, 6, 5), np.float16)
    w = values((3, 3, 5, 1), np.float16, seed=1)
    got = sf.function(lambda a, b: sf.nn.depthwise_conv2d(a, b, 1, "VALID"))(x, w)
    want = reference(x.astype(np.float32), w.astype(np.float32), (1, 1), ((0, 0), (0, 0)),
                     (1, 1)).astype(np.float32).astype(np.float16)
    assert got.dtype == sf.float16
    np.testing.assert_array_equal(got.numpy(), want)


def test_an_onnx_export_runs_in_onnxruntime():
    w = values((3, 3, 4, 2), np.float32, seed=1)
    f = sf.function(lambda a: sf.nn.depthwise_conv2d(a, w, 2, "SAME", dilations=1))
    model = sf.onnx.export(f, [sf.TensorSpec([None, 9, 8, 4], sf.float32)])
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    x = values((2, 9, 8, 4), np.float32)
    (got,) = session.run(None, {session.get_inputs()[0].name: x})
    np.testing.assert_allclose(got, f(x).numpy(), rtol=1e-5, atol=1e-5)


def test_the_primitive_is_one_op_of_a_compiled_program():
    """No slices: the staged graph holds the one depthwise op."""
    w = values((3, 3, 4, 1), np.float32, seed=1)
    f = sf.function(lambda a: sf.nn.depthwise_conv2d(a, w, 1, "SAME"))
    names = [eq.primitive.name for eq in f.get_concrete_function(
        sf.TensorSpec([1, 6, 6, 4], sf.float32)).graph.equations]
    assert names.count(NAME) == 1 and "slice" not in names
