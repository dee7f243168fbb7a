"""The ops `stageflow.runtime.gpu_ops` runs on a GPU (convolutions, pooling windows, zero
pads, gathers by run-time indices, row updates) against the same ops on the host: the
same numbers, the result on the GPU, and no copy beyond an index map put there once (or
the indices and index a gather or a row update reads on the host). The suite's first GPU
is a real one where the machine has one, else the emulated GPU of `conftest.py`."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stageflow as sf
from stageflow.core.errors import InvalidIndexError
from stageflow.frontend.tensor import DeviceTensor
from stageflow.primitives.conv import (
    conv2d_filter_gradient_p,
    conv2d_input_gradient_p,
    conv2d_p,
    max_pool_gradient_p,
    reduce_window_p,
)
from stageflow.primitives.depthwise import depthwise_conv2d_p
from stageflow.primitives.structural import pad_p
from stageflow.runtime.gpu import MAX_MAPS

GPU = "/device:GPU:0"


def copies() -> int:
    return sf.config.statistics()["device_copies"]


def on_gpu(x: np.ndarray) -> sf.Tensor:
    return sf.constant(x).gpu()


@st.composite
def convolutions(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, dict]:
    """An NHWC image, HWIO filters and the conv's geometry, every window fitting."""
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dilations = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    strides = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(2))
    extent = [(k - 1) * d + 1 for k, d in zip((kh, kw), dilations, strict=True)]
    h = draw(st.integers(max(1, extent[0] - sum(padding[0])), 7))
    w = draw(st.integers(max(1, extent[1] - sum(padding[1])), 7))
    n, c, o = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    x = rng.standard_normal((n, h, w, c)).astype(dtype)
    filters = rng.standard_normal((kh, kw, c, o)).astype(dtype)
    return x, filters, {"strides": strides, "padding": padding, "dilations": dilations}


@given(operands=convolutions())
def test_convolutions_run_on_the_gpu_as_a_gather_and_a_gemm(operands):
    x, w, geometry = operands
    want = conv2d_p.bind(sf.constant(x), sf.constant(w), **geometry).numpy()
    gx, gw = on_gpu(x), on_gpu(w)
    before = copies()
    got = conv2d_p.bind(gx, gw, **geometry)
    assert type(got) is DeviceTensor and got.device == GPU
    assert copies() - before <= 1  # the windows' index map, once per signature
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


@given(operands=convolutions())
def test_the_gradients_of_convolutions_run_on_the_gpu(operands):
    """The filter gradient (the windows transposed by the cotangent) and the input gradient
    (col2im: a gemm, then a sum through the inverted windows' map) against the host's."""
    x, w, geometry = operands
    g = conv2d_p.bind(sf.constant(x), sf.constant(w), **geometry).numpy()
    g = np.random.default_rng(7).standard_normal(g.shape).astype(x.dtype)
    filters = {"filter_size": w.shape[:2], **geometry}
    inputs = {"input_size": x.shape[1:3], **geometry}
    want_w = conv2d_filter_gradient_p.bind(sf.constant(x), sf.constant(g), **filters).numpy()
    want_x = conv2d_input_gradient_p.bind(sf.constant(g), sf.constant(w), **inputs).numpy()
    gx, gg, gw = on_gpu(x), on_gpu(g), on_gpu(w)
    before = copies()
    got_w = conv2d_filter_gradient_p.bind(gx, gg, **filters)
    got_x = conv2d_input_gradient_p.bind(gg, gw, **inputs)
    assert got_w.device == got_x.device == GPU
    assert copies() - before <= 2  # an index map each, once per geometry
    np.testing.assert_allclose(got_w.numpy(), want_w, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got_x.numpy(), want_x, rtol=1e-5, atol=1e-4)


def test_a_pointwise_convolution_is_the_gemm_alone():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3, 4, 5), np.float32), rng.standard_normal((1, 1, 5, 6),
                                                                                np.float32)
    geometry = {"strides": (1, 1), "padding": ((0, 0), (0, 0)), "dilations": (1, 1)}
    gx, gw = on_gpu(x), on_gpu(w)
    before = copies()
    got = conv2d_p.bind(gx, gw, **geometry)
    assert copies() == before  # no index map at all
    np.testing.assert_allclose(got.numpy(), np.einsum("nhwc,co->nhwo", x, w[0, 0]), rtol=1e-5)


@pytest.mark.parametrize(("channels", "filters", "groups"), [(4, 6, 2), (6, 6, 6), (3, 6, 3)])
def test_grouped_convolutions_run_on_the_gpu_as_one_batched_gemm(channels, filters, groups):
    """Groups of channels (depthwise where each group is one channel), strided and
    padded: the host's numbers, and only the kept maps put there (windows by group,
    filters by group, the products' order)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6, 5, channels)).astype(np.float32)
    w = rng.standard_normal((3, 2, channels // groups, filters)).astype(np.float32)
    geometry = {"strides": (2, 1), "padding": ((1, 1), (0, 1)), "dilations": (1, 1),
                "feature_group_count": groups}
    want = conv2d_p.bind(sf.constant(x), sf.constant(w), **geometry).numpy()
    gx, gw = on_gpu(x), on_gpu(w)
    before = copies()
    got = conv2d_p.bind(gx, gw, **geometry)
    assert got.device == GPU and copies() - before <= 3
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    filters_gradient = {"filter_size": (3, 2), **geometry}
    g = on_gpu(np.ones(want.shape, np.float32))
    before = copies()
    conv2d_filter_gradient_p.bind(gx, g, **filters_gradient)  # grouped: still the host's
    assert copies() - before == 3


@pytest.mark.parametrize("multiplier", [1, 2])
def test_depthwise_convolutions_run_on_the_gpu(multiplier):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 7, 6, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, multiplier)).astype(np.float32)
    geometry = {"strides": (2, 2), "padding": ((1, 1), (1, 1)), "dilations": (1, 1)}
    want = depthwise_conv2d_p.bind(sf.constant(x), sf.constant(w), **geometry).numpy()
    got = depthwise_conv2d_p.bind(on_gpu(x), on_gpu(w), **geometry)
    assert got.device == GPU
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


@given(data=st.data(), shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4),
       dtype=st.sampled_from([np.float32, np.int64, np.bool_, np.float16]))
def test_concats_run_on_the_gpu(data, shape, dtype):
    """Along any axis, of operands of any sizes there (empty ones too): the operands put
    into one buffer, then arranged unless they join along the leading axes."""
    axis = data.draw(st.integers(0, len(shape) - 1))
    sizes = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    parts = [(rng.standard_normal((*shape[:axis], n, *shape[axis + 1:])) * 4).astype(dtype)
             for n in sizes]
    got = sf.concat([on_gpu(p) for p in parts], axis=axis)
    assert got.device == GPU
    np.testing.assert_array_equal(got.numpy(), np.concatenate(parts, axis))


@pytest.mark.parametrize("kind", ["max", "sum"])
@given(seed=st.integers(0, 2**31), window=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       strides=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       padding=st.tuples(st.integers(0, 1), st.integers(0, 1)),
       dtype=st.sampled_from([np.float32, np.int32]))
def test_pooling_windows_reduce_on_the_gpu_where_padding_never_wins(kind, seed, window,
                                                                    strides, padding, dtype):
    rng = np.random.default_rng(seed)
    # all negative: a padding read as zero would win every max at the border
    x = -rng.integers(1, 50, (2, 5, 6, 3)).astype(dtype)
    params = {"kind": kind, "window": window, "strides": strides,
              "padding": tuple((p, p) for p in padding)}
    want = reduce_window_p.bind(sf.constant(x), **params).numpy()
    gx = on_gpu(x)
    before = copies()
    got = reduce_window_p.bind(gx, **params)
    assert got.device == GPU and copies() - before <= 1
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


@given(seed=st.integers(0, 2**31), window=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       strides=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       padding=st.tuples(st.integers(0, 1), st.integers(0, 1)))
def test_max_pooling_gradients_go_to_each_windows_first_maximum_on_the_gpu(
        seed, window, strides, padding):
    """Ties (few distinct values, zeros as after a ReLU, where a zero padding would tie),
    NaN windows passing nothing on: TensorFlow's MaxPoolGrad, as the host computes it."""
    rng = np.random.default_rng(seed)
    x = rng.choice(np.array([0.0, 0.0, 1.0, 2.0, np.nan], np.float32), (2, 5, 6, 3))
    params = {"window": window, "strides": strides,
              "padding": tuple((p, p) for p in padding)}
    out = reduce_window_p.bind(sf.constant(x), kind="max", **params).numpy()
    g = rng.standard_normal(out.shape).astype(np.float32)
    want = max_pool_gradient_p.bind(sf.constant(x), sf.constant(out), sf.constant(g),
                                    **params).numpy()
    gx, gout, gg = on_gpu(x), on_gpu(out), on_gpu(g)
    before = copies()
    got = max_pool_gradient_p.bind(gx, gout, gg, **params)
    assert got.device == GPU and copies() - before <= 7  # the kept maps, once
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


@given(seed=st.integers(0, 2**31), pads=st.lists(st.tuples(st.integers(0, 2),
                                                          st.integers(0, 2)), min_size=1,
                                                max_size=3))
def test_zero_padding_runs_on_the_gpu(seed, pads):
    x = np.random.default_rng(seed).integers(1, 9, [3, 2, 4][:len(pads)]).astype(np.float32)
    gx = on_gpu(x)
    before = copies()
    got = pad_p.bind(gx, pads=tuple(pads), value=0)
    assert got.device == GPU and copies() - before <= 1
    np.testing.assert_array_equal(got.numpy(), np.pad(x, pads))
    other = pad_p.bind(gx, pads=tuple(pads), value=-1.5)  # another value: the host's pad
    np.testing.assert_array_equal(other.numpy(), np.pad(x, pads, constant_values=-1.5))


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gathers_by_indices_on_the_gpu_read_them_there(axis, index_dtype):
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    indices = np.array([[0, -1], [2, 1]], index_dtype)
    gx, gi = on_gpu(x), on_gpu(indices)
    before = copies()
    got = sf.gather(gx, gi, axis=axis)
    assert got.device == GPU
    assert copies() == before  # no copy: the kernel reads the indices on the GPU
    np.testing.assert_array_equal(got.numpy(), np.take(x, indices, axis=axis))


@given(data=st.data(), dtype=st.sampled_from([np.float64, np.int8, np.bool_, np.complex64]))
def test_gathers_on_the_gpu_equal_numpys_take(data, dtype):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    size = shape[axis]
    indices = data.draw(hnp.arrays(np.int64, hnp.array_shapes(min_dims=0, max_dims=2,
                                                              min_side=0, max_side=3),
                                   elements=st.integers(-size, size - 1)))
    x = data.draw(hnp.arrays(dtype, shape))
    got = sf.gather(on_gpu(x), on_gpu(indices), axis=axis)
    np.testing.assert_array_equal(got.numpy(), np.take(x, indices, axis=axis))


def test_a_gathers_indices_out_of_range_give_zeros_on_the_gpu():
    """TensorFlow's rule on a GPU, whose kernels cannot raise: an index out of range
    gathers zeros (on the host it is NumPy's error)."""
    x = np.arange(1.0, 13.0).reshape(3, 4)
    got = sf.gather(on_gpu(x), np.array([1, 3, -4], np.int32), axis=0)
    np.testing.assert_array_equal(got.numpy(), [x[1], np.zeros(4), np.zeros(4)])
    with pytest.raises(InvalidIndexError, match=r"out of range \[-3, 3\) for axis 0"):
        sf.gather(sf.constant(x), np.array([3], np.int32), axis=0)


@pytest.mark.parametrize("index", [0, 2, -1])
def test_a_row_update_writes_one_row_of_a_copy_on_the_gpu(index):
    x = np.arange(12, dtype=np.float64).reshape(3, 2, 2)
    row = -np.ones((2, 2))
    gx, grow, gi = on_gpu(x), on_gpu(row), on_gpu(np.int64(index))
    before = copies()
    got = sf.dynamic_update_index(gx, grow, gi)
    assert got.device == GPU and copies() == before  # the kernel reads the index there
    want = x.copy()
    want[index] = row
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(gx.numpy(), x)  # the operand is untouched


@pytest.mark.parametrize(("index", "row"), [(3, 2), (7, 2), (-4, 0), (-9, 0)])
def test_a_row_update_clamps_an_index_out_of_range_on_the_gpu(index, row):
    """XLA's rule on a GPU (dynamic_update_slice clamps the index); on the host it is
    NumPy's error."""
    x, update = np.zeros((3, 2), np.int32), np.array([5, 6], np.int32)
    got = sf.dynamic_update_index(on_gpu(x), on_gpu(update), on_gpu(np.int32(index)))
    want = x.copy()
    want[row] = update
    np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(InvalidIndexError, match=rf"index {index} is out of range \[-3, 3\)"):
        sf.dynamic_update_index(sf.constant(x), update, index)


@pytest.mark.parametrize("jit", [True, False])
def test_a_staged_convnet_on_the_gpu_keeps_its_tensors_there(jit):
    """Convolutions, batch norm, ReLU, max pooling and a global mean, staged on the GPU:
    the host's numbers, and after the first call (the constants and the index maps) no
    copy at all."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 9, 9, 3)).astype(np.float32)
    w1 = rng.standard_normal((3, 3, 3, 8)).astype(np.float32) * 0.3
    w2 = rng.standard_normal((1, 1, 8, 4)).astype(np.float32) * 0.3

    def net(x, w1, w2):
        h = sf.nn.relu(sf.nn.conv2d(x, w1, 2, "SAME") * 0.5 + 0.1)
        h = sf.nn.max_pool2d(h, 3, 1, "SAME")
        h = sf.nn.conv2d(h, w2, 1, "VALID")
        return sf.reduce_mean(h, axis=(1, 2))

    want = net(sf.constant(x), sf.constant(w1), sf.constant(w2)).numpy()
    f = sf.function(net, jit=jit)
    args = [on_gpu(a) for a in (x, w1, w2)]
    counts = []
    for _ in range(3):
        before = copies()
        with sf.device(GPU):
            got = f(*args)
        counts.append(copies() - before)
        assert got.device == GPU
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    assert counts[1:] == [0, 0]


def test_a_staged_convnet_trains_on_the_gpu():
    """The gradients of a staged convnet's loss under a tape, placed on the GPU: the
    forward and backward passes of its convolutions, max pooling and `stop_gradient` all
    run there (after the first calls, only the loss's cotangent, made on the host, is put
    there), with the host's numbers."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 8, 8, 3)).astype(np.float32)
    w1 = rng.standard_normal((3, 3, 3, 4)).astype(np.float32) * 0.3
    w2 = rng.standard_normal((3, 3, 4, 2)).astype(np.float32) * 0.3

    def loss(x, w1, w2):
        h = sf.nn.max_pool2d(sf.nn.relu(sf.nn.conv2d(x, w1, 1, "SAME")), 3, 2, "SAME")
        h = h - sf.stop_gradient(sf.reduce_mean(h, axis=(0, 1, 2)))  # as batch norm's
        return sf.reduce_mean(sf.square(sf.nn.conv2d(h, w2, 2, "SAME")))

    def gradients(f, args):
        with sf.GradientTape() as tape:
            for a in args[1:]:
                tape.watch(a)
            value = f(*args)
        return [value, *tape.gradient(value, args[1:])]

    want = [t.numpy() for t in gradients(loss, [sf.constant(a) for a in (x, w1, w2)])]
    f = sf.function(loss)
    args = [on_gpu(a) for a in (x, w1, w2)]
    counts = []
    for _ in range(3):
        before = copies()
        with sf.device(GPU):
            got = gradients(f, args)
        counts.append(copies() - before)
        assert all(t.device == GPU for t in got)
    assert counts[1] == counts[2] <= 1
    for g, expected in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@given(x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                    elements=st.sampled_from([-1.0, 0.0, 2.0, np.nan])), data=st.data(),
       integers=st.booleans())
def test_arg_extrema_on_the_gpu_take_the_first_and_nan_as_numpy_does(name, x, data,
                                                                      integers):
    """Ties take the first index; in floats the first NaN wins, as in NumPy."""
    if integers:
        x = np.nan_to_num(x, nan=5.0).astype(np.int32)
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    got = getattr(sf, name)(on_gpu(x), axis=axis)
    assert got.device == GPU
    np.testing.assert_array_equal(got.numpy(), getattr(np, name)(x, axis=axis))


def test_a_models_index_maps_stay_kept_while_other_signatures_come_and_go():
    """The maps are kept per GPU up to `MAX_MAPS`, the least recently used going first: a
    model called between other work keeps its maps (and so makes no copy), however many
    other signatures pass."""
    f = sf.function(lambda x: sf.nn.max_pool2d(sf.transpose(x, (0, 2, 1, 3)), 3, 1, "SAME"))
    x = on_gpu(np.random.default_rng(5).standard_normal((1, 5, 6, 2)).astype(np.float32))
    with sf.device(GPU):
        f(x)
        for size in range(2, 2 + 2 * MAX_MAPS):
            sf.transpose(on_gpu(np.zeros((size, 3), np.float32)))  # a new map each
            if size % 50 == 0:
                before = copies()
                f(x)
                assert copies() == before
