"""Keras' layers beyond the core ones against NumPy references written here (the
convolutions against their definition as sums, in NCHW as the frameworks write them), eager
and staged giving the same numbers (interpreted and compiled), and the gradients of the
layers with new math against finite differences."""

import numpy as np
import pytest
from strategies import numeric_gradient

import stageflow as sf

L = sf.keras.layers


def conv_reference(x, w, b=None, stride=(1, 1), dilation=(1, 1), groups=1):
    """The definition of a grouped convolution (cross-correlation), NCHW input, OIHW weights
    (I the input channels of a group): each output the sum over its window."""
    n, channels, height, width = x.shape
    outputs, per_group, kh, kw = w.shape
    rows = (height - (kh - 1) * dilation[0] - 1) // stride[0] + 1
    cols = (width - (kw - 1) * dilation[1] - 1) // stride[1] + 1
    out = np.zeros((n, outputs, rows, cols))
    group_out = outputs // groups
    for o in range(outputs):
        first = (o // group_out) * per_group
        for i in range(per_group):
            for u in range(kh):
                for v in range(kw):
                    window = x[:, first + i, u * dilation[0]: u * dilation[0]
                               + (rows - 1) * stride[0] + 1: stride[0],
                               v * dilation[1]: v * dilation[1]
                               + (cols - 1) * stride[1] + 1: stride[1]]
                    out[:, o] += w[o, i, u, v] * window
    return out if b is None else out + b[None, :, None, None]


def conv1d_reference(x, w, b, stride, dilation):
    """`conv_reference` of NCL input and OIK weights, as a height-1 image."""
    return conv_reference(x[:, :, None, :], w[:, :, None, :], b, (1, stride),
                          (1, dilation))[:, :, 0, :]


def conv_transpose_reference(x, w, stride):
    """The definition of a transposed convolution (the full output, no padding): NCHW input,
    IOHW weights; each input pixel adds its weighted kernel at stride spacing."""
    n, channels, height, width = x.shape
    _, outputs, kh, kw = w.shape
    out = np.zeros((n, outputs, (height - 1) * stride[0] + kh, (width - 1) * stride[1] + kw))
    for y in range(height):
        for z in range(width):
            out[:, :, y * stride[0]: y * stride[0] + kh, z * stride[1]: z * stride[1] + kw] += (
                np.einsum("ni,iohw->nohw", x[:, :, y, z], w))
    return out


def rng(seed=0):
    return np.random.default_rng(seed)


def normal(*shape, seed=0):
    return rng(seed).standard_normal(shape)


def flat(value):
    return list(value) if isinstance(value, list | tuple) else [value]


def staged_matches_eager(layer, *inputs, **kwargs):
    """The layer's output eagerly, after checking that the staged call, interpreted and
    compiled, gives it too."""
    eager = layer(*inputs, **kwargs)
    for jit in (False, True):
        staged = sf.function(lambda *xs: layer(*xs, **kwargs), jit=jit)(*inputs)
        for got, want in zip(flat(staged), flat(eager), strict=True):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-12)
    return eager


def gradient_matches_finite_differences(fn, x, rtol=1e-5, atol=1e-7):
    """d sum(fn(x) * weights) / dx against central differences (random weights, so that
    each output element counts)."""
    shape = fn(sf.constant(x)).shape
    weights = sf.constant(rng(9).standard_normal(shape))
    tensor = sf.constant(x)
    with sf.GradientTape() as tape:
        tape.watch(tensor)
        loss = sf.reduce_sum(fn(tensor) * weights)
    numeric = numeric_gradient(lambda v: float(sf.reduce_sum(fn(sf.constant(v)) * weights)), x)
    np.testing.assert_allclose(tape.gradient(loss, tensor).numpy(), numeric, rtol=rtol,
                               atol=atol)


# --------------------------------------------------------------------------- activations


def test_activation_layers_match_numpy():
    x = normal(3, 4)
    cases = [
        (L.Activation("relu"), np.maximum(x, 0)),
        (L.Activation("sigmoid"), 1 / (1 + np.exp(-x))),
        (L.Activation(None), x),
        (L.LeakyReLU(), np.where(x > 0, x, 0.3 * x)),
        (L.LeakyReLU(negative_slope=0.05), np.where(x > 0, x, 0.05 * x)),
        (L.ELU(), np.where(x > 0, x, np.expm1(x))),
        (L.ELU(alpha=0.5), np.where(x > 0, x, 0.5 * np.expm1(x))),
        (L.Softmax(), np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
        (L.Softmax(axis=0), np.exp(x) / np.exp(x).sum(0, keepdims=True)),
    ]
    for layer, expected in cases:
        got = staged_matches_eager(layer, sf.constant(x))
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, err_msg=layer.name)


def test_prelu_learns_one_slope_per_unshared_position():
    x = normal(2, 3, 3, 4)
    layer = L.PReLU(shared_axes=[1, 2])
    layer(sf.constant(x))
    assert layer.alpha.shape == (1, 1, 4) and not layer.alpha.numpy().any()  # zeros
    alpha = rng(1).uniform(0.1, 0.5, (1, 1, 4))
    layer.alpha.assign(alpha)
    got = staged_matches_eager(layer, sf.constant(x))
    np.testing.assert_allclose(got.numpy(), np.where(x > 0, x, alpha * x), rtol=1e-12)
    assert L.PReLU()(sf.ones((2, 5))).shape == (2, 5)
    gradient_matches_finite_differences(layer, x)
    with sf.GradientTape() as tape:
        y = sf.reduce_sum(layer(sf.constant(x)))
    np.testing.assert_allclose(tape.gradient(y, layer.alpha).numpy(),
                               np.minimum(x, 0).sum((0, 1, 2)).reshape(1, 1, 4), rtol=1e-12)


# --------------------------------------------------------------------------- merging


def test_elementwise_merges_match_numpy():
    xs = [normal(2, 3, seed=s) for s in range(3)]
    inputs = [sf.constant(x) for x in xs]
    cases = [(L.Add(), xs[0] + xs[1] + xs[2]), (L.Multiply(), xs[0] * xs[1] * xs[2]),
             (L.Average(), (xs[0] + xs[1] + xs[2]) / 3),
             (L.Maximum(), np.maximum.reduce(xs)), (L.Minimum(), np.minimum.reduce(xs))]
    for layer, expected in cases:
        got = staged_matches_eager(layer, inputs)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, err_msg=layer.name)
    got = staged_matches_eager(L.Subtract(), inputs[:2])
    np.testing.assert_allclose(got.numpy(), xs[0] - xs[1], rtol=1e-12)
    with pytest.raises(ValueError, match="Subtract: expected a list of exactly 2 of tensors, "
                                         "got 3"):
        L.Subtract()(inputs)


@pytest.mark.parametrize(("shapes", "axes", "subscripts"), [
    (((4, 3), (4, 3)), 1, "bi,bi->b"),
    (((4, 5, 3), (4, 6, 3)), 2, "bmi,bni->bmn"),
    (((4, 3, 5), (4, 3, 6)), (1, 1), "bim,bin->bmn"),
    (((4, 5, 3), (4, 3, 6)), (2, 1), "bmi,bin->bmn"),
    (((4, 3), (4, 3, 6)), (1, 1), "bi,bin->bn"),
    (((4, 5, 3), (4, 3)), (-1, -1), "bmi,bi->bm"),
])
@pytest.mark.parametrize("normalize", [False, True])
def test_dot_is_keras_batch_dot(shapes, axes, subscripts, normalize):
    x, y = normal(*shapes[0], seed=1), normal(*shapes[1], seed=2)
    layer = L.Dot(axes=axes, normalize=normalize)
    got = staged_matches_eager(layer, [sf.constant(x), sf.constant(y)])
    if normalize:
        ax, ay = layer.axes
        x = x / np.linalg.norm(x, axis=ax, keepdims=True)
        y = y / np.linalg.norm(y, axis=ay, keepdims=True)
    expected = np.einsum(subscripts, x, y)
    if expected.ndim == 1:
        expected = expected[:, None]  # Keras' [batch, 1] for two batches of vectors
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10)
    if normalize:
        gradient_matches_finite_differences(lambda t: layer([t, sf.constant(y)]),
                                            normal(*shapes[0], seed=1))


def test_dot_names_mismatched_axes():
    with pytest.raises(ValueError, match=r"Dot: axes \(1, 1\) must name non-batch dims of one "
                                         r"size, got shapes \(2, 3\) and \(2, 4\)"):
        L.Dot(axes=1)([sf.ones((2, 3)), sf.ones((2, 4))])


# --------------------------------------------------------------------------- reshaping


def test_reshaping_layers_match_numpy():
    x = normal(2, 5, 6, 3)
    cases = [
        (L.Permute((3, 1, 2)), x.transpose(0, 3, 1, 2)),
        (L.ZeroPadding2D(2), np.pad(x, ((0, 0), (2, 2), (2, 2), (0, 0)))),
        (L.ZeroPadding2D((1, 2)), np.pad(x, ((0, 0), (1, 1), (2, 2), (0, 0)))),
        (L.ZeroPadding2D(((0, 1), (3, 0))), np.pad(x, ((0, 0), (0, 1), (3, 0), (0, 0)))),
        (L.Cropping2D(1), x[:, 1:-1, 1:-1]),
        (L.Cropping2D(((1, 2), (0, 3))), x[:, 1:-2, :-3]),
        (L.UpSampling2D(), x.repeat(2, 1).repeat(2, 2)),
        (L.UpSampling2D((3, 1)), x.repeat(3, 1)),
    ]
    for layer, expected in cases:
        got = staged_matches_eager(layer, sf.constant(x))
        np.testing.assert_array_equal(got.numpy(), expected, err_msg=layer.name)
    s = normal(2, 7, 3)
    for layer, expected in [(L.ZeroPadding1D(2), np.pad(s, ((0, 0), (2, 2), (0, 0)))),
                            (L.ZeroPadding1D((0, 3)), np.pad(s, ((0, 0), (0, 3), (0, 0)))),
                            (L.Cropping1D((2, 1)), s[:, 2:-1]), (L.Cropping1D(3), s[:, 3:-3]),
                            (L.UpSampling1D(3), s.repeat(3, 1))]:
        got = staged_matches_eager(layer, sf.constant(s))
        np.testing.assert_array_equal(got.numpy(), expected, err_msg=layer.name)
    v = normal(4, 3)
    got = staged_matches_eager(L.RepeatVector(5), sf.constant(v))
    np.testing.assert_array_equal(got.numpy(), np.repeat(v[:, None], 5, 1))
    with pytest.raises(ValueError, match="Cropping2D: cropping .* leaves nothing"):
        L.Cropping2D(3)(sf.constant(x))


def test_upsampling_and_repeat_vector_take_a_free_batch_dim():
    x = normal(2, 3, 4, 1)
    signature = [sf.TensorSpec((None, 3, 4, 1), sf.float64)]
    up = sf.function(L.UpSampling2D(2), input_signature=signature)
    np.testing.assert_array_equal(up(sf.constant(x)).numpy(), x.repeat(2, 1).repeat(2, 2))
    repeat = sf.function(L.RepeatVector(3), input_signature=[sf.TensorSpec((None, 4))])
    v = normal(5, 4).astype(np.float32)
    np.testing.assert_array_equal(repeat(sf.constant(v)).numpy(), np.repeat(v[:, None], 3, 1))


@pytest.mark.parametrize("layer", [L.UpSampling2D((2, 3)), L.Cropping2D(((1, 0), (2, 1))),
                                   L.ZeroPadding2D(1), L.Permute((2, 3, 1))],
                         ids=lambda layer: type(layer).__name__)
def test_reshaping_gradients_match_finite_differences(layer):
    gradient_matches_finite_differences(layer, normal(1, 3, 4, 2))


# --------------------------------------------------------------------------- convolutions


def same_pads(size, window, stride, dilation=1):
    """TensorFlow's "SAME" padding of one axis: (before, after)."""
    span = (window - 1) * dilation + 1
    total = max((-(-size // stride) - 1) * stride + span - size, 0)
    return total // 2, total - total // 2


@pytest.mark.parametrize(("kernel", "strides", "padding", "dilation"), [
    (3, 1, "valid", 1), (3, 2, "same", 1), (4, 1, "same", 1), (3, 1, "causal", 2),
    (2, 3, "valid", 1), (3, 1, "same", 2)])
def test_conv1d_matches_its_definition(kernel, strides, padding, dilation):
    x = normal(2, 11, 3)
    layer = L.Conv1D(4, kernel, strides=strides, padding=padding, dilation_rate=dilation,
                     activation="tanh")
    got = staged_matches_eager(layer, sf.constant(x))
    layer.bias.assign(normal(4, seed=5))
    got = staged_matches_eager(layer, sf.constant(x))
    w, b = layer.kernel.numpy(), layer.bias.numpy()
    pads = ((kernel - 1) * dilation, 0) if padding == "causal" else (
        same_pads(11, kernel, strides, dilation) if padding == "same" else (0, 0))
    padded = np.pad(x, ((0, 0), pads, (0, 0))).transpose(0, 2, 1)
    expected = conv1d_reference(padded, w.transpose(2, 1, 0), b, strides,
                                dilation).transpose(0, 2, 1)
    np.testing.assert_allclose(got.numpy(), np.tanh(expected), rtol=1e-10, atol=1e-12)


def test_causal_conv1d_sees_no_later_step():
    layer = L.Conv1D(2, 3, padding="causal", dilation_rate=2)
    x = normal(1, 9, 2)
    base = layer(sf.constant(x)).numpy()
    changed = x.copy()
    changed[0, 6] += 1.0
    after = layer(sf.constant(changed)).numpy()
    np.testing.assert_array_equal(after[0, :6], base[0, :6])
    assert np.abs(after[0, 6] - base[0, 6]).max() > 0
    gradient_matches_finite_differences(layer, x)


@pytest.mark.parametrize(("kernel", "strides", "padding", "multiplier"), [
    (3, 1, "valid", 1), (3, 2, "same", 2), ((2, 3), (1, 2), "same", 1)])
def test_depthwise_and_separable_convolutions_match_their_definition(kernel, strides, padding,
                                                          multiplier):
    x = normal(2, 7, 8, 3)
    depthwise = L.DepthwiseConv2D(kernel, strides=strides, padding=padding,
                                  depth_multiplier=multiplier)
    separable = L.SeparableConv2D(5, kernel, strides=strides, padding=padding,
                                  depth_multiplier=multiplier)
    got_depthwise = staged_matches_eager(depthwise, sf.constant(x))
    separable(sf.constant(x))
    separable.bias.assign(normal(5, seed=4))
    got_separable = staged_matches_eager(separable, sf.constant(x))

    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    sh, sw = (strides, strides) if isinstance(strides, int) else strides
    pads = ((same_pads(7, kh, sh), same_pads(8, kw, sw)) if padding == "same"
            else ((0, 0), (0, 0)))
    padded = np.pad(x, ((0, 0), *pads, (0, 0))).transpose(0, 3, 1, 2)

    def depthwise_reference(kernel_value):
        weights = kernel_value.transpose(2, 3, 0, 1).reshape(3 * multiplier, 1, kh, kw)
        return conv_reference(padded, weights, stride=(sh, sw), groups=3)

    expected = depthwise_reference(depthwise.depthwise_kernel.numpy())
    np.testing.assert_allclose(got_depthwise.numpy(), expected.transpose(0, 2, 3, 1),
                               rtol=1e-10, atol=1e-12)
    mixed = conv_reference(depthwise_reference(separable.depthwise_kernel.numpy()),
                           separable.pointwise_kernel.numpy().transpose(3, 2, 0, 1),
                           separable.bias.numpy())
    np.testing.assert_allclose(got_separable.numpy(), mixed.transpose(0, 2, 3, 1),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("kernel", "strides", "padding"), [
    (3, 2, "same"), (3, 2, "valid"), (4, 2, "same"), (2, 3, "valid"), (1, 3, "same"),
    ((3, 2), (1, 2), "same"), (3, 1, "valid")])
def test_conv2d_transpose_matches_its_definition(kernel, strides, padding):
    x = normal(2, 4, 5, 3)
    layer = L.Conv2DTranspose(6, kernel, strides=strides, padding=padding)
    layer(sf.constant(x))
    layer.bias.assign(normal(6, seed=3))
    got = staged_matches_eager(layer, sf.constant(x))
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    sh, sw = (strides, strides) if isinstance(strides, int) else strides
    # Keras' output sizes
    size = [n * s if padding == "same" else n * s + max(k - s, 0)
            for n, k, s in ((4, kh, sh), (5, kw, sw))]
    assert got.shape == (2, *size, 6)
    # the full transposed convolution, then the rows and columns TensorFlow's padding of
    # the forward convolution of that output size skips (zeros where it reaches past it)
    full = conv_transpose_reference(x.transpose(0, 3, 1, 2),
                                    layer.kernel.numpy().transpose(3, 2, 0, 1),
                                    (sh, sw)).transpose(0, 2, 3, 1)
    tops = [same_pads(n, k, s)[0] if padding == "same" else 0
            for n, k, s in ((size[0], kh, sh), (size[1], kw, sw))]
    full = np.pad(full, ((0, 0), (0, max(size[0] + tops[0] - full.shape[1], 0)),
                         (0, max(size[1] + tops[1] - full.shape[2], 0)), (0, 0)))
    expected = full[:, tops[0]: tops[0] + size[0], tops[1]: tops[1] + size[1]]
    np.testing.assert_allclose(got.numpy(), expected + layer.bias.numpy(), rtol=1e-10,
                               atol=1e-12)


def test_conv2d_transpose_is_the_adjoint_of_conv2d_and_differentiates():
    """<conv2d(y, w), x> == <y, conv2d_transpose(x, w)>: the transpose is the adjoint."""
    layer = L.Conv2DTranspose(2, 3, strides=2, padding="same", use_bias=False)
    x = normal(1, 3, 3, 4)
    up = layer(sf.constant(x)).numpy()
    y = normal(*up.shape, seed=2)
    down = sf.nn.conv2d(sf.constant(y), layer.kernel, 2, "SAME").numpy()
    np.testing.assert_allclose((down * x).sum(), (up * y).sum(), rtol=1e-10)
    gradient_matches_finite_differences(layer, x)
    kernel = layer.kernel.numpy()

    def by_kernel(values):
        layer.kernel.assign(values)
        return float(sf.reduce_sum(layer(sf.constant(x)) * y))

    with sf.GradientTape() as tape:
        loss = sf.reduce_sum(layer(sf.constant(x)) * y)
    analytic = tape.gradient(loss, layer.kernel).numpy()
    np.testing.assert_allclose(analytic, numeric_gradient(by_kernel, kernel), rtol=1e-5,
                               atol=1e-7)


# --------------------------------------------------------------------------- pooling


def windows_1d(x, pool, stride, padding):
    """The windows of steps as NumPy sees them: (start, stop) per output step."""
    steps = x.shape[1]
    if padding == "same":
        before = same_pads(steps, pool, stride)[0]
        count = -(-steps // stride)
    else:
        before, count = 0, (steps - pool) // stride + 1
    return [(max(i * stride - before, 0), min(i * stride - before + pool, steps))
            for i in range(count)]


@pytest.mark.parametrize(("pool", "strides", "padding"), [(2, None, "valid"), (3, 1, "same"),
                                                          (3, 2, "same"), (2, 3, "valid")])
def test_1d_pooling_matches_numpy(pool, strides, padding):
    x = normal(2, 9, 3)
    stride = pool if strides is None else strides
    spans = windows_1d(x, pool, stride, padding)
    for layer, reduce in ((L.MaxPooling1D(pool, strides, padding), np.max),
                          (L.AveragePooling1D(pool, strides, padding), np.mean)):
        got = staged_matches_eager(layer, sf.constant(x))
        expected = np.stack([reduce(x[:, a:b], axis=1) for a, b in spans], 1)
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)


def test_global_pooling_and_keras_aliases():
    x = normal(2, 4, 5, 3)
    np.testing.assert_array_equal(staged_matches_eager(L.GlobalMaxPooling2D(), sf.constant(x))
                                  .numpy(), x.max((1, 2)))
    assert L.GlobalMaxPooling2D(keepdims=True)(sf.constant(x)).shape == (2, 1, 1, 3)
    s = normal(2, 7, 3)
    np.testing.assert_allclose(L.GlobalAveragePooling1D()(sf.constant(s)).numpy(), s.mean(1))
    np.testing.assert_array_equal(L.GlobalMaxPooling1D()(sf.constant(s)).numpy(), s.max(1))
    assert L.MaxPooling2D is L.MaxPool2D and L.AvgPool2D is L.AveragePooling2D
    assert L.MaxPool1D is L.MaxPooling1D and L.GlobalAvgPool2D is L.GlobalAveragePooling2D
    with pytest.raises(ValueError, match="GlobalMaxPooling1D: expected inputs of rank 3"):
        L.GlobalMaxPooling1D()(sf.constant(x))


# --------------------------------------------------------------------------- noise


def test_spatial_dropout_drops_whole_channels_while_training():
    layer = L.SpatialDropout2D(0.4, seed=7)
    x = sf.ones((64, 3, 3, 16))
    np.testing.assert_array_equal(layer(x).numpy(), x.numpy())  # inference: the identity
    y = layer(x, training=True).numpy()
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.6)}
    assert (y == y[:, :1, :1]).all()  # one decision per (example, channel)
    assert 0.3 < (y[:, 0, 0] == 0).mean() < 0.5
    staged = sf.function(lambda t: layer(t, training=True))
    first, second = staged(x).numpy(), staged(x).numpy()
    assert not np.array_equal(first, second)  # a fresh mask on every call


def test_gaussian_noise_only_while_training():
    layer = L.GaussianNoise(0.5, seed=3)
    x = sf.zeros((20000,), sf.float64)
    np.testing.assert_array_equal(layer(x).numpy(), 0.0)
    y = layer(x, training=True).numpy()
    assert y.dtype == np.float64
    assert abs(y.mean()) < 0.02 and abs(y.std() - 0.5) < 0.02


# --------------------------------------------------------------------------- preprocessing


def test_normalization_adapts_to_data_and_normalizes():
    data = normal(50, 4) * [1.0, 2.0, 3.0, 0.0] + [0.0, 1.0, -2.0, 5.0]
    layer = L.Normalization()
    batches = sf.data.Dataset.from_tensor_slices(data).batch(16)
    layer.adapt(batches)
    np.testing.assert_allclose(layer.mean.numpy(), data.mean(0), rtol=1e-5)
    np.testing.assert_allclose(layer.variance.numpy(), data.var(0), rtol=1e-5, atol=1e-7)
    assert not layer.trainable_variables
    x = normal(3, 4, seed=1)
    got = staged_matches_eager(layer, sf.constant(x, sf.float32))
    expected = (x - data.mean(0)) / np.maximum(np.sqrt(data.var(0)), 1e-7)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-4, atol=1e-3)

    images = normal(6, 3, 3, 2)
    per_row = L.Normalization(axis=1)
    per_row.adapt(images)
    assert per_row.mean.shape == (3, 1, 1)
    np.testing.assert_allclose(per_row.mean.numpy().ravel(), images.mean((0, 2, 3)),
                               rtol=1e-5)
    fixed = L.Normalization(mean=[1.0, 2.0], variance=[4.0, 0.25])
    np.testing.assert_allclose(fixed(sf.constant([[3.0, 3.0]])).numpy(), [[1.0, 2.0]])


def test_rescaling_casts_and_scales():
    x = np.arange(0, 256, 51, dtype=np.uint8)
    got = staged_matches_eager(L.Rescaling(1 / 255, offset=0.5), sf.constant(x))
    assert got.dtype == sf.float32
    np.testing.assert_allclose(got.numpy(), x / 255 + 0.5, rtol=1e-6)


def test_preprocessing_layers_in_a_trained_model():
    r = rng(4)
    x = (r.standard_normal((64, 3)) * 10 + 50).astype(np.float32)
    y = (x[:, :1] > 50).astype(np.float32)
    norm = L.Normalization(input_shape=(3,))
    norm.adapt(x)
    model = sf.keras.Sequential([norm, L.Dense(1, activation="sigmoid")])
    model.compile(optimizer="nadam", loss="binary_crossentropy", metrics=["accuracy"])
    history = model.fit(x, y, epochs=2, batch_size=16, verbose=0)
    assert history.history["loss"][1] < history.history["loss"][0]
    np.testing.assert_allclose(norm.mean.numpy(), x.mean(0), rtol=1e-5)  # not trained


# --------------------------------------------------------------------------- wrappers


def test_time_distributed_applies_one_layer_to_every_step():
    x = normal(2, 5, 4)
    dense = L.Dense(3)
    layer = L.TimeDistributed(dense)
    got = staged_matches_eager(layer, sf.constant(x))
    expected = x @ dense.kernel.numpy() + dense.bias.numpy()
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10)
    assert len(layer.trainable_variables) == 2
    conv = L.TimeDistributed(L.Conv2D(2, 3))
    assert conv(sf.ones((2, 4, 5, 5, 1))).shape == (2, 4, 3, 3, 2)


def simple_rnn(x, layer, reverse=False):
    """Keras' SimpleRNN in NumPy: every step's h, in the order the steps were read."""
    w, u, b = layer.kernel.numpy(), layer.recurrent_kernel.numpy(), layer.bias.numpy()
    h, out = np.zeros((x.shape[0], w.shape[1])), []
    for t in (range(x.shape[1] - 1, -1, -1) if reverse else range(x.shape[1])):
        h = np.tanh(x[:, t] @ w + h @ u + b)
        out.append(h)
    return np.stack(out, 1)


@pytest.mark.parametrize("merge_mode", ["concat", "sum", "mul", "ave", None])
def test_bidirectional_matches_a_forward_and_a_reversed_rnn(merge_mode):
    x = normal(2, 6, 3)
    layer = L.Bidirectional(L.SimpleRNN(4, return_sequences=True), merge_mode=merge_mode)
    got = staged_matches_eager(layer, sf.constant(x))
    assert layer.backward_layer.name == f"backward_{layer.forward_layer.name}"
    forward = simple_rnn(x, layer.forward_layer)
    backward = simple_rnn(x, layer.backward_layer, reverse=True)[:, ::-1]  # back in order
    expected = {"concat": np.concatenate([forward, backward], -1), "sum": forward + backward,
                "mul": forward * backward, "ave": (forward + backward) / 2,
                None: [forward, backward]}[merge_mode]
    for g, e in zip(flat(got), flat(expected), strict=True):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-10)


def test_bidirectional_states_and_last_outputs():
    x = normal(2, 6, 3)
    layer = L.Bidirectional(L.LSTM(4, return_state=True))
    out, h_f, c_f, h_b, c_b = layer(sf.constant(x))
    assert out.shape == (2, 8) and h_f.shape == c_b.shape == (2, 4)
    np.testing.assert_array_equal(out.numpy(), np.concatenate([h_f.numpy(), h_b.numpy()], -1))
    assert len(layer.trainable_variables) == 6
    # the backward layer is a forward one of its weights reading the reversed sequence
    reverse = L.LSTM(4, return_state=True)
    reverse(sf.constant(x))
    for mine, theirs in zip(reverse.trainable_variables,
                            layer.backward_layer.trainable_variables, strict=True):
        mine.assign(theirs)
    np.testing.assert_allclose(reverse(sf.constant(x[:, ::-1].copy()))[1].numpy(),
                               h_b.numpy(), rtol=1e-6)
    with pytest.raises(TypeError, match="Bidirectional: expected a recurrent layer"):
        L.Bidirectional(L.Dense(3))


def test_bidirectional_trains_in_a_functional_model():
    r = rng(2)
    x = r.standard_normal((32, 5, 2)).astype(np.float32)
    y = x[:, 0, :1] - x[:, -1, :1]  # needs both ends of the sequence
    inputs = sf.keras.Input((5, 2))
    hidden = L.Bidirectional(L.GRU(8))(inputs)
    model = sf.keras.Model(inputs, L.Dense(1)(hidden))
    model.compile(optimizer="adamax", loss="mse")
    history = model.fit(x, y, epochs=3, batch_size=8, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
