"""Grouped convolution (conv2d's `feature_group_count`): the NumPy kernel and the compiled
op (its gemm family run group by group, pointwise and through im2col) against a reference
of one convolution per group, the compiled gradients against their kernels, over shapes,
strides, padding, dilations, groups and dtypes drawn by hypothesis, with static and
unknown dims; the prepacked op bit for bit the unpacked one; eager, staged-interpreted and
compiled functions alike, constant filters packed group by group; gradients against the
per-group reference's; the frontends' group inference and errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.core.primitive import REGISTRY, ShapedType
from stageflow.primitives import prepacked
from tests.codegen.test_lowered_conv import conv_reference, run_compiled, tolerance, values

FLOATS = [np.float32, np.float64]


def grouped_reference(x, w, strides, padding, dilations, groups):
    """One float64 convolution per group: input channel block g by filter columns block g."""
    per_group, columns = w.shape[2], w.shape[3] // groups
    return np.concatenate([
        conv_reference(x[..., g * per_group:(g + 1) * per_group],
                       w[..., g * columns:(g + 1) * columns], strides, padding, dilations)
        for g in range(groups)], axis=-1)


@st.composite
def grouped_convs(draw, max_out: int = 40):
    """Operands and params of a grouped conv2d whose window fits: 1x1 stride-1 unpadded
    (the pointwise gemm) often, else any geometry (im2col)."""
    groups = draw(st.integers(2, 4))
    per_group = draw(st.integers(1, 5))
    columns = draw(st.sampled_from([1, 3, 8, 16, max_out]))
    if draw(st.booleans()):
        window, strides, padding, dilations = (1, 1), (1, 1), ((0, 0), (0, 0)), (1, 1)
    else:
        pairs = st.tuples(st.integers(1, 3), st.integers(1, 3))
        window, strides = draw(pairs), draw(st.tuples(st.integers(1, 2), st.integers(1, 2)))
        padding = draw(st.tuples(st.tuples(st.integers(0, 2), st.integers(0, 2)),
                                 st.tuples(st.integers(0, 2), st.integers(0, 2))))
        dilations = draw(st.tuples(st.integers(1, 2), st.integers(1, 2)))
    size = (draw(st.integers(1, 7)), draw(st.integers(1, 7)))
    for axis in (0, 1):
        assume(size[axis] + sum(padding[axis]) >= (window[axis] - 1) * dilations[axis] + 1)
    dtype = draw(st.sampled_from(FLOATS))
    seed = draw(st.integers(0, 2**16))
    x = values((draw(st.integers(1, 2)), *size, per_group * groups), dtype, seed)
    w = values((*window, per_group, columns * groups), dtype, seed + 1)
    params = {"strides": strides, "padding": padding, "dilations": dilations,
              "feature_group_count": groups}
    return x, w, params


@settings(max_examples=60, deadline=None)
@given(case=grouped_convs())
def test_the_kernel_is_one_convolution_per_group(case):
    x, w, params = case
    got = REGISTRY["conv2d"].kernel(x, w, **params)
    geometry = {k: v for k, v in params.items() if k != "feature_group_count"}
    want = grouped_reference(x, w, **geometry, groups=params["feature_group_count"])
    assert got.dtype == x.dtype
    np.testing.assert_allclose(got, want, rtol=10 * tolerance(x.dtype),
                               atol=10 * tolerance(x.dtype))


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(case=grouped_convs(), unknown=st.booleans())
def test_compiled_grouped_conv_and_its_prepacked_form(case, unknown):
    """The compiled op (its status says the compiled code ran) is the per-group reference
    within rounding; with the filters packed group by group, bit for bit the unpacked op."""
    x, w, params = case
    geometry = {k: v for k, v in params.items() if k != "feature_group_count"}
    groups = params["feature_group_count"]
    got = run_compiled("conv2d", [x, w], unknown, **params)
    np.testing.assert_allclose(got, grouped_reference(x, w, **geometry, groups=groups),
                               rtol=10 * tolerance(x.dtype), atol=10 * tolerance(x.dtype))
    packed = run_compiled("conv2d_prepacked", [x, prepacked.pack(w, groups)], unknown,
                          filter_shape=w.shape, **params)
    np.testing.assert_array_equal(packed, got)


@pytest.mark.slow
@settings(max_examples=5, deadline=None)
@given(case=grouped_convs(), unknown=st.booleans())
def test_compiled_gradients_of_a_grouped_conv(case, unknown):
    """The compiled input and filter gradients (group by group: their gemms read and write
    each group's columns, col2im adds into its channels) are the NumPy kernels' within
    rounding, and those are the per-group gradients (`test_gradients_are_...`)."""
    x, w, params = case
    g = values(REGISTRY["conv2d"].kernel(x, w, **params).shape, x.dtype, seed=7)
    tol = 10 * tolerance(x.dtype)
    for name, arrays, size in [("conv2d_input_gradient", [g, w], {"input_size": x.shape[1:3]}),
                               ("conv2d_filter_gradient", [x, g],
                                {"filter_size": w.shape[:2]})]:
        np.testing.assert_allclose(run_compiled(name, arrays, unknown, **size, **params),
                                   REGISTRY[name].kernel(*arrays, **size, **params),
                                   rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize("dtype", FLOATS)
def test_large_groups_span_chunks_and_tasks(dtype):
    """Groups of many channels: filters of more than one chunk of k (im2col in chunks of
    filter rows) and a pointwise conv of ShuffleNet's shape split over the cores."""
    for x_shape, w_shape, pad, groups in [((1, 7, 7, 192), (3, 3, 64, 90), 1, 3),
                                          ((2, 14, 14, 240), (1, 1, 60, 240), 0, 4)]:
        x, w = values(x_shape, dtype), values(w_shape, dtype, seed=1) / 10
        params = {"strides": (1, 1), "padding": ((pad, pad), (pad, pad)),
                  "dilations": (1, 1), "feature_group_count": groups}
        got = run_compiled("conv2d", [x, w], False, **params)
        want = grouped_reference(x, w, (1, 1), params["padding"], (1, 1), groups)
        np.testing.assert_allclose(got, want, rtol=100 * tolerance(dtype),
                                   atol=100 * tolerance(dtype))
        np.testing.assert_array_equal(
            run_compiled("conv2d_prepacked", [x, prepacked.pack(w, groups)], False,
                         filter_shape=w_shape, **params), got)
        g = values(got.shape, dtype, seed=2) / 10  # the gradients' tasks: several
        for name, arrays, size in [("conv2d_input_gradient", [g, w],
                                    {"input_size": x_shape[1:3]}),
                                   ("conv2d_filter_gradient", [x, g],
                                    {"filter_size": w_shape[:2]})]:
            np.testing.assert_allclose(run_compiled(name, arrays, False, **size, **params),
                                       REGISTRY[name].kernel(*arrays, **size, **params),
                                       rtol=100 * tolerance(dtype),
                                       atol=100 * tolerance(dtype), err_msg=name)


@given(shape=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 5),
                       st.integers(1, 40)), groups=st.integers(1, 4),
       dtype=st.sampled_from(FLOATS))
def test_grouped_packing_round_trips_a_group_per_run_of_panels(shape, groups, dtype):
    filters = values((*shape[:3], shape[3] * groups), dtype)
    panels = prepacked.pack(filters, groups)
    assert panels.shape == prepacked.panels_shape(filters.shape, dtype, groups)
    per_group = panels.shape[0] // groups
    for g in range(groups):  # each group's columns start a panel of their own
        mine = panels[g * per_group:(g + 1) * per_group].transpose(1, 0, 2).reshape(
            panels.shape[1], -1)
        np.testing.assert_array_equal(
            mine[:, :shape[3]], filters[..., g * shape[3]:(g + 1) * shape[3]].reshape(
                panels.shape[1], shape[3]))
        assert not mine[:, shape[3]:].any()
    np.testing.assert_array_equal(prepacked.unpack(panels, filters.shape, groups), filters)


def _shuffle_block(w1, w2):
    """ShuffleNet's pattern: a grouped 1x1 conv, a channel shuffle, a grouped 3x3 conv."""

    def block(x):
        y = sf.nn.relu(sf.nn.conv2d(x, w1, 1, "VALID"))
        n, h, w, c = sf.shape(y)[0], y.shape[1], y.shape[2], y.shape[3]
        shuffled = sf.reshape(sf.transpose(sf.reshape(y, (n, h, w, 2, c // 2)),
                                           (0, 1, 2, 4, 3)), (n, h, w, c))
        return sf.nn.conv2d(shuffled, w2, 2, "SAME")

    return block


def test_eager_interpreted_and_compiled_functions_agree_with_an_unknown_batch():
    """Constant filters are packed group by group (the optimized IR shows the grouped
    prepacked ops, the first fused with its ReLU); the function's numbers are the eager
    ones interpreted and compiled, for two batch sizes of one trace."""
    rng = np.random.default_rng(2)
    w1 = rng.standard_normal((1, 1, 4, 48)).astype(np.float32)
    w2 = rng.standard_normal((3, 3, 12, 36)).astype(np.float32)
    block = _shuffle_block(w1, w2)
    spec = [sf.TensorSpec([None, 6, 6, 16], sf.float32)]
    compiled = sf.function(block, input_signature=spec)
    optimized = compiled.get_concrete_function().ir("optimized")
    # the first with its ReLU (`fuse-conv`), packed as the second is
    assert optimized.count("sf.conv2d_prepacked") == 1
    assert optimized.count("sf.conv2d_fused") == optimized.count("packed = true") == 1
    assert optimized.count("feature_group_count = 4") == 2
    interpreted = sf.function(block, input_signature=spec, jit=False)
    for batch in (1, 3):
        x = rng.standard_normal((batch, 6, 6, 16)).astype(np.float32)
        eager = block(sf.constant(x)).numpy()
        np.testing.assert_allclose(compiled(x).numpy(), eager, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(interpreted(x).numpy(), eager, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("jit", [True, False])
def test_gradients_are_the_per_group_convolutions_gradients(jit):
    """d/dx and d/dw of a grouped conv (a staged function, compiled or interpreted) are
    those of the convolutions of each group, concatenated."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 7, 6, 6))
    w = rng.standard_normal((3, 2, 2, 9))
    c = rng.standard_normal((2, 4, 5, 9))
    geometry = {"strides": (2, 1), "padding": ((1, 1), (1, 0)), "dilations": (1, 2)}

    def loss(x, w):
        y = REGISTRY["conv2d"].bind(x, w, **geometry, feature_group_count=3)
        return sf.reduce_sum(y * c)

    dx, dw = sf.function(lambda x, w: sf.grad(loss, argnums=(0, 1))(x, w), jit=jit)(x, w)
    want_x, want_w = [], []
    for g in range(3):
        xs, ws = sf.constant(x[..., 2 * g:2 * g + 2]), sf.constant(w[..., 3 * g:3 * g + 3])
        with sf.GradientTape() as tape:
            tape.watch([xs, ws])
            part = sf.reduce_sum(REGISTRY["conv2d"].bind(xs, ws, **geometry)
                                 * c[..., 3 * g:3 * g + 3])
        gx, gw = tape.gradient(part, [xs, ws])
        want_x.append(gx.numpy())
        want_w.append(gw.numpy())
    np.testing.assert_allclose(dx.numpy(), np.concatenate(want_x, -1), rtol=1e-10,
                               atol=1e-10)
    np.testing.assert_allclose(dw.numpy(), np.concatenate(want_w, -1), rtol=1e-10,
                               atol=1e-10)


def test_nn_conv2d_infers_the_groups_as_tensorflow_does():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 5, 5, 6)).astype(np.float32)
    w = rng.standard_normal((3, 3, 2, 9)).astype(np.float32)
    got = sf.nn.conv2d(x, w, 1, "SAME").numpy()
    want = grouped_reference(x, w, (1, 1), ((1, 1), (1, 1)), (1, 1), 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"conv2d: the input's 6 channels are not a "
                                         r"multiple of the filters' 4 input channels"):
        sf.nn.conv2d(x, np.ones((3, 3, 4, 8), np.float32), 1, "SAME")
    with pytest.raises(ValueError, match=r"conv2d: 3 groups .* output channels divisible "
                                         r"by 3, got 8"):
        sf.nn.conv2d(x, np.ones((3, 3, 2, 8), np.float32), 1, "SAME")


def test_the_shape_rule_names_the_op_and_the_shapes():
    f32 = np.dtype(np.float32)
    geometry = {"strides": (1, 1), "padding": ((0, 0), (0, 0)), "dilations": (1, 1)}
    rule = REGISTRY["conv2d"].shape_rule
    assert rule(ShapedType((None, 4, 4, 6), f32), ShapedType((1, 1, 2, 9), f32), **geometry,
                feature_group_count=3).shape == (None, 4, 4, 9)
    with pytest.raises(ValueError, match=r"conv2d: the input has 5 channels but the filters "
                                         r"expect 2 per group in 3 groups"):
        rule(ShapedType((1, 4, 4, 5), f32), ShapedType((1, 1, 2, 9), f32), **geometry,
             feature_group_count=3)
    with pytest.raises(ValueError, match=r"conv2d: the filters' output channels \(8\) are not "
                                         r"divisible by feature_group_count 3"):
        rule(ShapedType((1, 4, 4, 6), f32), ShapedType((1, 1, 2, 8), f32), **geometry,
             feature_group_count=3)
    with pytest.raises(ValueError, match="conv2d: feature_group_count must be an int >= 1"):
        rule(ShapedType((1, 4, 4, 6), f32), ShapedType((1, 1, 6, 8), f32), **geometry,
             feature_group_count=0)


def test_keras_conv2d_groups():
    layer = sf.layers.Conv2D(6, 3, padding="same", groups=3, use_bias=False)
    x = np.random.default_rng(6).standard_normal((2, 5, 5, 9)).astype(np.float32)
    y = layer(x).numpy()
    assert layer.kernel.shape == (3, 3, 3, 6)
    want = grouped_reference(x, layer.kernel.numpy(), (1, 1), ((1, 1), (1, 1)), (1, 1), 3)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="Conv2D: groups must be a positive int dividing "
                                         "filters"):
        sf.layers.Conv2D(6, 3, groups=4)
    with pytest.raises(ValueError, match="Conv2D: the input's 9 channels are not divisible "
                                         "by groups=2"):
        sf.layers.Conv2D(6, 3, groups=2)(x)
