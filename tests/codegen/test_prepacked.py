"""Filters packed at compile time (`prepack`, `conv2d_prepacked`): the packed layout round
trips; the compiled op, its gemm reading the panels in place, gives bit for bit the
numbers of compiled conv2d (the same sums in the same order) over shapes, strides,
padding, dilations and dtypes drawn by hypothesis, and the kernel's within rounding;
staged functions with constant filters run it, eagerly, interpreted and compiled alike;
panels of the wrong shape are refused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.codegen.lowered.conv.families import COLUMN_SPLIT_ROWS
from stageflow.core.primitive import REGISTRY
from stageflow.primitives import prepacked
from tests.codegen.test_lowered_conv import run_compiled, spec_for, tolerance, values

FLOATS = [np.float32, np.float64]
pairs = st.tuples(st.integers(1, 3), st.integers(1, 3))


@given(shape=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 5),
                       st.integers(1, 70)), dtype=st.sampled_from(FLOATS))
def test_packing_round_trips_into_zero_padded_panels(shape, dtype):
    filters = values(shape, dtype)
    panels = prepacked.pack(filters)
    width = prepacked.panel_width(dtype)
    assert panels.shape == prepacked.panels_shape(shape, dtype)
    assert panels.shape[2] * panels.dtype.itemsize == prepacked.PANEL_BYTES
    np.testing.assert_array_equal(prepacked.unpack(panels, shape), filters)
    columns = panels.transpose(1, 0, 2).reshape(panels.shape[1], -1)
    np.testing.assert_array_equal(columns[:, :shape[3]], filters.reshape(-1, shape[3]))
    assert not columns[:, shape[3]:].any()
    assert panels.shape[0] == -(-shape[3] // width)


@settings(max_examples=8, deadline=None)  # each geometry compiles two convolutions
@given(batch=st.integers(1, 2), size=st.tuples(st.integers(1, 9), st.integers(1, 9)),
       channels=st.integers(1, 6), out_channels=st.sampled_from([1, 9, 33, 40, 70]),
       window=pairs, strides=pairs, dilations=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       padding=st.tuples(st.tuples(st.integers(0, 2), st.integers(0, 2)),
                         st.tuples(st.integers(0, 2), st.integers(0, 2))),
       dtype=st.sampled_from(FLOATS))
def test_the_packed_gemm_gives_conv2ds_numbers_bit_for_bit(batch, size, channels, out_channels,
                                                          window, strides, dilations, padding,
                                                          dtype):
    for axis in (0, 1):
        assume(size[axis] + sum(padding[axis]) >= (window[axis] - 1) * dilations[axis] + 1)
    x = values((batch, *size, channels), dtype)
    w = values((*window, channels, out_channels), dtype, seed=1)
    assume(prepacked.gemm_reads(w.shape, w.dtype, dilations))
    params = {"strides": strides, "padding": padding, "dilations": dilations}
    plain = run_compiled("conv2d", [x, w], True, **params)
    packed = run_compiled("conv2d_prepacked", [x, prepacked.pack(w)], True,
                          filter_shape=w.shape, **params)
    np.testing.assert_array_equal(packed, plain)
    np.testing.assert_allclose(packed, REGISTRY["conv2d"].kernel(x, w, **params),
                               rtol=10 * tolerance(dtype), atol=10 * tolerance(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_large_filters_span_panels_chunks_and_tasks(dtype):
    """Filters of more than one chunk of k (im2col in chunks of filter rows, each reading
    the panels from its own first row) and a pointwise conv split over the cores."""
    for x_shape, w_shape, pad in [((1, 7, 7, 96), (3, 3, 96, 100), 1),
                                  ((2, 14, 14, 300), (1, 1, 300, 130), 0)]:
        x, w = values(x_shape, dtype), values(w_shape, dtype, seed=1) / 10
        params = {"strides": (1, 1), "padding": ((pad, pad), (pad, pad)),
                  "dilations": (1, 1)}
        np.testing.assert_array_equal(
            run_compiled("conv2d_prepacked", [x, prepacked.pack(w)], False,
                         filter_shape=w_shape, **params),
            run_compiled("conv2d", [x, w], False, **params))


# float32 for every shape, float64 (panels of half as many columns) for the first: each
# case compiles three convolutions of its own.
@pytest.mark.parametrize(("dtype", "pixels", "out_channels"), [
    (np.float32, (1, 1, 1), 1000), (np.float32, (1, 7, 7), 257),
    (np.float32, (2, 5, 3), 512), (np.float32, (1, 30, 40), 300),
    (np.float64, (1, 1, 1), 1000)])
def test_pointwise_convs_with_few_pixels_share_out_their_filters(dtype, pixels, out_channels):
    """A pointwise conv of few pixels into many filters splits its filters' panels over
    the cores (a last panel partly past O included), packed or not, with the numbers of a
    split by pixels (the same pixels repeated past `COLUMN_SPLIT_ROWS`)."""
    x = values((*pixels, 40), dtype)
    w = values((1, 1, 40, out_channels), dtype, seed=1) / 10
    params = {"strides": (1, 1), "padding": ((0, 0), (0, 0)), "dilations": (1, 1)}
    plain = run_compiled("conv2d", [x, w], False, **params)
    np.testing.assert_array_equal(
        run_compiled("conv2d_prepacked", [x, prepacked.pack(w)], False, filter_shape=w.shape,
                     **params), plain)
    np.testing.assert_allclose(plain, REGISTRY["conv2d"].kernel(x, w, **params),
                               rtol=10 * tolerance(dtype), atol=10 * tolerance(dtype))
    copies = COLUMN_SPLIT_ROWS // int(np.prod(pixels)) + 1  # split by pixels
    np.testing.assert_array_equal(
        run_compiled("conv2d", [np.concatenate([x] * copies, axis=1), w], False, **params),
        np.concatenate([plain] * copies, axis=1))


@pytest.mark.parametrize(("dtype", "x_shape", "window", "strides", "pad", "out_channels"), [
    (np.float32, (1, 7, 7, 40), (3, 3), (1, 1), 1, 257),      # a last panel partly past O
    (np.float32, (1, 13, 13, 16), (3, 3), (1, 1), 1, 256),
    (np.float32, (3, 7, 7, 8), (3, 2), (2, 1), 0, 300),       # three images, strides
    (np.float32, (1, 7, 7, 300), (3, 3), (1, 1), 1, 260),     # windows in filter-row chunks
    (np.float64, (1, 7, 7, 40), (3, 3), (1, 1), 1, 257),
])
def test_windowed_convs_with_few_pixels_share_out_their_filters(dtype, x_shape, window,
                                                                strides, pad, out_channels):
    """A windowed conv of few pixels into many filters, its image rows odd (uneven over
    two cores), splits its filters' panels over the cores, each task copying every window,
    packed or not, with the numbers of a split by image rows (the same images repeated
    past `COLUMN_SPLIT_ROWS`) and the kernel's."""
    x = values(x_shape, dtype)
    w = values((*window, x_shape[3], out_channels), dtype, seed=1) / 10
    params = {"strides": strides, "padding": ((pad, pad), (pad, pad)), "dilations": (1, 1)}
    plain = run_compiled("conv2d", [x, w], False, **params)
    np.testing.assert_array_equal(
        run_compiled("conv2d_prepacked", [x, prepacked.pack(w)], False, filter_shape=w.shape,
                     **params), plain)
    np.testing.assert_allclose(plain, REGISTRY["conv2d"].kernel(x, w, **params),
                               rtol=10 * tolerance(dtype), atol=10 * tolerance(dtype))
    copies = COLUMN_SPLIT_ROWS // int(np.prod(plain.shape[:3])) + 1  # split by image rows
    np.testing.assert_array_equal(
        run_compiled("conv2d", [np.concatenate([x] * copies), w], False, **params),
        np.concatenate([plain] * copies))


def test_staged_functions_pack_constant_filters_and_agree_everywhere():
    """A captured NumPy filter (a constant of the function) is packed, as the optimized IR
    shows, a variable's is not, and the function gives the eager numbers compiled and
    interpreted."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((3, 3, 8, 72)).astype(np.float32)  # wider than direct loops take
    v = sf.Variable(w)

    def body(x):
        return sf.nn.relu(sf.nn.conv2d(x, w, 1, "SAME")) + sf.nn.conv2d(x, v, 2, "SAME")[
            :, :1, :1, :]

    x = sf.constant(rng.standard_normal((2, 9, 9, 8)).astype(np.float32))
    eager = body(x).numpy()
    staged = sf.function(body)
    optimized = staged.get_concrete_function(x).ir("optimized")
    # the constant's conv packed and fused with its ReLU (`fuse-conv`), the variable's not
    assert optimized.count("sf.conv2d_fused") == optimized.count("packed = true") == 1
    assert optimized.count("sf.conv2d ") == 1
    for jit in (True, False):
        np.testing.assert_allclose(sf.function(body, jit=jit)(x).numpy(), eager,
                                   rtol=1e-5, atol=1e-5)


def test_panels_of_another_shape_are_refused():
    w = values((3, 3, 4, 40), np.float32)
    x = values((1, 5, 5, 4), np.float32)
    params = {"filter_shape": w.shape, "strides": (1, 1), "padding": ((1, 1), (1, 1)),
              "dilations": (1, 1)}
    with pytest.raises(ValueError, match="pack into panels"):
        spec_for("conv2d_prepacked", [x, np.zeros((1, 36, 32), np.float32)], False,
                 **params)
    op = REGISTRY["conv2d_prepacked"]
    with pytest.raises(ValueError):
        op.kernel(x, np.zeros((1, 36, 32), np.float32), **params)


def test_gradients_are_conv2ds_through_the_packing():
    """With respect to the input, conv2d's; with respect to the panels, conv2d's filter
    gradient packed (nothing for the padding columns)."""
    rng = np.random.default_rng(5)
    x = sf.constant(rng.standard_normal((2, 6, 5, 3)).astype(np.float32))
    w = rng.standard_normal((3, 2, 3, 35)).astype(np.float32)
    c = sf.constant(rng.standard_normal((2, 3, 3, 35)).astype(np.float32))
    geometry = {"strides": (2, 2), "padding": ((1, 0), (0, 1)), "dilations": (1, 1)}
    panels, filters = sf.constant(prepacked.pack(w)), sf.constant(w)
    with sf.GradientTape(persistent=True) as tape:
        tape.watch([x, panels, filters])
        packed = prepacked.conv2d_prepacked_p.bind(x, panels, filter_shape=w.shape,
                                                   **geometry)
        plain = REGISTRY["conv2d"].bind(x, filters, **geometry)
        losses = [sf.reduce_sum(packed * c), sf.reduce_sum(plain * c)]
    (dx_packed, dpanels), (dx, dw) = (tape.gradient(loss, pair) for loss, pair in
                                      zip(losses, [[x, panels], [x, filters]], strict=True))
    np.testing.assert_allclose(dx_packed.numpy(), dx.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dpanels.numpy(), prepacked.pack(dw.numpy()), rtol=1e-5,
                               atol=1e-5)


@settings(max_examples=10, deadline=None)
@given(lead=st.sampled_from([(16,), (2, 9), (None, 16), (3, 1, 17)]),
       k=st.integers(1, 40), n=st.sampled_from([1, 31, 33, 70]),
       transpose_b=st.booleans(), dtype=st.sampled_from(FLOATS))
def test_dense_layers_of_constant_weights_are_prepacked_convolutions(lead, k, n, transpose_b,
                                                                     dtype):
    """``a @ w`` (and its bias, ReLU) with `w` a captured array: a pointwise prepacked
    convolution of a's rows when a has 16 rows or more (an unknown batch dim counted as
    1), with NumPy's numbers, weights transposed or not; a matmul below that."""
    rng = np.random.default_rng(k * n)
    w = rng.standard_normal((n, k) if transpose_b else (k, n)).astype(dtype)
    bias = rng.standard_normal(n).astype(dtype)
    staged = sf.function(lambda a: sf.nn.relu(
        sf.matmul(a, w, transpose_b=transpose_b) + bias))
    shape = tuple(2 if d is None else d for d in lead) + (k,)
    a = rng.standard_normal(shape).astype(dtype)
    spec = sf.TensorSpec(lead + (k,), dtype)
    np.testing.assert_allclose(staged(a).numpy() if None not in lead else
                               staged.get_concrete_function(spec)(a).numpy(),
                               np.maximum(a @ (w.T if transpose_b else w) + bias, 0),
                               rtol=10 * tolerance(dtype), atol=10 * tolerance(dtype))
    optimized = staged.get_concrete_function(spec).ir("optimized")
    rows = np.prod([d for d in lead if d is not None])
    assert ("sf.conv2d_prepacked" in optimized) == (rows >= 16)
    assert ("sf.matmul" in optimized) == (rows < 16)
