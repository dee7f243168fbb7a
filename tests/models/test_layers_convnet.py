"""The convnet layers (BatchNormalization, pooling, Dropout, ReLU, Add) against NumPy
references, eager and staged, their gradients against finite differences, and how
`training=` reaches sub-layers."""

import numpy as np
import pytest

import stageflow as sf

L = sf.layers


def rng(seed=0):
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------- batch norm


def batch_norm_reference(x, gamma, beta, moving, training, axis=-1, momentum=0.99,
                         epsilon=1e-3):
    """Keras' batch norm in NumPy: the output and the new (moving mean, moving variance)."""
    axis = axis % x.ndim
    reduced = tuple(a for a in range(x.ndim) if a != axis)
    shape = [1] * x.ndim
    shape[axis] = -1
    moving_mean, moving_variance = moving
    if training:
        mean, variance = x.mean(reduced), x.var(reduced)
        moving = (moving_mean * momentum + mean * (1 - momentum),
                  moving_variance * momentum + variance * (1 - momentum))
    else:
        mean, variance = moving_mean, moving_variance
    normalised = (x - mean.reshape(shape)) / np.sqrt(variance.reshape(shape) + epsilon)
    return normalised * gamma.reshape(shape) + beta.reshape(shape), moving


def built_batch_norm(channels, seed=0, **kwargs):
    """A built layer with random gamma and beta (so scale and shift are exercised)."""
    layer = L.BatchNormalization(**kwargs)
    layer.build((2, 3, 3, channels) if kwargs.get("axis", -1) == -1 else (2, channels, 3, 3))
    layer.built = True
    r = rng(seed)
    layer.gamma.assign(r.uniform(0.5, 2.0, channels).astype(np.float32))
    layer.beta.assign(r.standard_normal(channels).astype(np.float32))
    return layer


def batches(shape, count, seed=1):
    r = rng(seed)
    return [(r.standard_normal(shape) * 3 + 1).astype(np.float32) for _ in range(count)]


def moving(layer):
    return layer.moving_mean.numpy(), layer.moving_variance.numpy()


def test_batch_norm_training_matches_numpy_and_moves_the_statistics():
    layer = built_batch_norm(4)
    gamma, beta = layer.gamma.numpy(), layer.beta.numpy()
    expected_moving = moving(layer)
    for x in batches((5, 3, 3, 4), 4):
        expected, expected_moving = batch_norm_reference(x, gamma, beta, expected_moving, True)
        np.testing.assert_allclose(layer(x, training=True).numpy(), expected, rtol=1e-4,
                                   atol=1e-5)
        for got, want in zip(moving(layer), expected_moving, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_batch_norm_inference_uses_the_moving_statistics_and_keeps_them():
    layer = built_batch_norm(3)
    for x in batches((4, 2, 2, 3), 3):
        layer(x, training=True)
    before = moving(layer)
    x = batches((2, 2, 2, 3), 1, seed=7)[0]
    expected, _ = batch_norm_reference(x, layer.gamma.numpy(), layer.beta.numpy(), before,
                                       False)
    np.testing.assert_allclose(layer(x, training=False).numpy(), expected, rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(layer(x).numpy(), expected, rtol=1e-5, atol=1e-5)
    for got, want in zip(moving(layer), before, strict=True):
        np.testing.assert_array_equal(got, want)


def test_batch_norm_defaults_and_variables():
    layer = L.BatchNormalization(name="bn")
    x = np.ones((2, 3), np.float32) * 2
    # Not training by default: the initial moving statistics (0, 1) apply.
    np.testing.assert_allclose(layer(x).numpy(), x / np.sqrt(1 + 1e-3), rtol=1e-6)
    assert (layer.axis, layer.momentum, layer.epsilon) == (-1, 0.99, 1e-3)
    assert [v.name for v in layer.trainable_variables] == ["bn/gamma", "bn/beta"]
    assert [v.name for v in layer.non_trainable_variables] == [
        "bn/moving_mean", "bn/moving_variance"]
    bare = L.BatchNormalization(center=False, scale=False)
    bare(x)
    assert bare.trainable_variables == [] and len(bare.variables) == 2


def test_batch_norm_on_another_axis():
    layer = built_batch_norm(3, axis=1)
    x = batches((2, 3, 4, 4), 1)[0]
    expected, expected_moving = batch_norm_reference(
        x, layer.gamma.numpy(), layer.beta.numpy(), moving(layer), True, axis=1)
    np.testing.assert_allclose(layer(x, training=True).numpy(), expected, rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(moving(layer)[1], expected_moving[1], rtol=1e-5)


def test_frozen_batch_norm_normalises_with_the_moving_statistics():
    layer = built_batch_norm(2)
    layer.trainable = False
    before = moving(layer)
    x = batches((3, 2, 2, 2), 1)[0]
    expected, _ = batch_norm_reference(x, layer.gamma.numpy(), layer.beta.numpy(), before,
                                       False)
    np.testing.assert_allclose(layer(x, training=True).numpy(), expected, rtol=1e-5)
    np.testing.assert_array_equal(moving(layer)[0], before[0])


@pytest.mark.parametrize("jit", [True, False], ids=["compiled", "interpreted"])
def test_batch_norm_staged_equals_eager_and_updates_the_moving_statistics(jit):
    eager, staged = built_batch_norm(4), built_batch_norm(4)
    step = sf.function(lambda x, training: staged(x, training=training), jit=jit)
    for x in batches((3, 4, 4, 4), 3):
        np.testing.assert_allclose(step(sf.constant(x), True).numpy(),
                                   eager(x, training=True).numpy(), rtol=1e-5, atol=1e-5)
        for got, want in zip(moving(staged), moving(eager), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6)
    x = sf.constant(batches((2, 4, 4, 4), 1, seed=5)[0])
    before = moving(staged)
    np.testing.assert_allclose(step(x, False).numpy(), eager(x).numpy(), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_array_equal(moving(staged)[0], before[0])
    assert step.tracing_count == 2  # once per training mode


# --------------------------------------------------------------------------- pooling


def pool_reference(x, window, strides, padding, reduce):
    """Windows of NHWC `x` reduced over their real elements (TensorFlow's SAME rule)."""
    n, h, w, c = x.shape
    pads, outs = [], []
    for size, k, s in zip((h, w), window, strides, strict=True):
        if padding == "same":
            out = -(-size // s)
            total = max((out - 1) * s + k - size, 0)
            pads.append(total // 2)
        else:
            out = (size - k) // s + 1
            pads.append(0)
        outs.append(out)
    result = np.zeros((n, outs[0], outs[1], c), x.dtype)
    for i in range(outs[0]):
        for j in range(outs[1]):
            top, left = i * strides[0] - pads[0], j * strides[1] - pads[1]
            patch = x[:, max(top, 0):top + window[0], max(left, 0):left + window[1], :]
            result[:, i, j, :] = reduce(patch, axis=(1, 2))
    return result


POOLS = [((2, 2), None, "valid"), ((3, 3), (2, 2), "same"), ((2, 3), (1, 2), "same"),
         ((3, 2), (2, 1), "valid")]


@pytest.mark.parametrize(("layer", "reduce"), [(L.MaxPool2D, np.max),
                                               (L.AveragePooling2D, np.mean)],
                         ids=["max", "average"])
@pytest.mark.parametrize(("pool_size", "strides", "padding"), POOLS)
def test_pooling_matches_numpy(layer, reduce, pool_size, strides, padding):
    x = rng().standard_normal((2, 7, 6, 3)).astype(np.float32)
    pool = layer(pool_size, strides, padding)
    expected = pool_reference(x, pool_size, strides or pool_size, padding, reduce)
    np.testing.assert_allclose(pool(x).numpy(), expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(sf.function(pool)(sf.constant(x)).numpy(), expected,
                               rtol=1e-6, atol=1e-6)


def test_global_average_pooling_matches_numpy():
    x = rng().standard_normal((2, 5, 4, 3)).astype(np.float32)
    np.testing.assert_allclose(L.GlobalAveragePooling2D()(x).numpy(), x.mean((1, 2)),
                               rtol=1e-6)
    kept = L.GlobalAveragePooling2D(keepdims=True)(x)
    assert kept.shape == (2, 1, 1, 3)
    with pytest.raises(ValueError, match="rank 4"):
        L.GlobalAveragePooling2D()(np.ones((2, 3), np.float32))


def test_pooling_arguments_are_checked():
    with pytest.raises(ValueError, match="MaxPooling2D: padding"):
        L.MaxPool2D(2, padding="full")
    with pytest.raises(ValueError, match="AveragePooling2D: pool_size"):
        L.AveragePooling2D((2, 0))


# --------------------------------------------------------------------------- dropout, relu, add


def test_dropout_is_the_identity_unless_training():
    x = np.ones((64, 64), np.float32)
    layer = L.Dropout(0.25, seed=3)
    np.testing.assert_array_equal(layer(x).numpy(), x)
    np.testing.assert_array_equal(layer(x, training=False).numpy(), x)
    dropped = layer(x, training=True).numpy()
    assert set(np.unique(dropped)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((dropped == 0).mean() - 0.25) < 0.03


def test_dropout_staged_draws_a_fresh_mask_each_call():
    layer = L.Dropout(0.5)
    step = sf.function(lambda x: layer(x, training=True))
    x = sf.ones((32, 32))
    first, second = step(x).numpy(), step(x).numpy()
    assert (first == 0).any() and not np.array_equal(first, second)
    with pytest.raises(ValueError, match="rate"):
        L.Dropout(1.0)


def test_relu_layer_matches_keras_rule():
    x = np.linspace(-3, 8, 23).astype(np.float32)
    np.testing.assert_array_equal(L.ReLU()(x).numpy(), np.maximum(x, 0))
    layer = L.ReLU(max_value=6.0, negative_slope=0.1, threshold=1.0)
    expected = np.where(x >= 1.0, np.minimum(x, 6.0), 0.1 * (x - 1.0))
    np.testing.assert_allclose(layer(x).numpy(), expected, rtol=1e-6)


def test_add_sums_a_list_of_inputs():
    a, b, c = (rng(i).standard_normal((2, 3)).astype(np.float32) for i in range(3))
    np.testing.assert_allclose(L.Add()([a, b, c]).numpy(), a + b + c, rtol=1e-6)
    np.testing.assert_allclose(sf.function(L.Add())([sf.constant(a), sf.constant(b)]).numpy(),
                               a + b, rtol=1e-6)
    with pytest.raises(ValueError, match="non-empty list"):
        L.Add()(sf.constant(a))


# --------------------------------------------------------------------------- gradients


def conv_block(seed=0):
    """conv-BN-relu-pool, then a dense head: float64, so finite differences are exact."""
    sf.random.set_seed(seed)
    model = L.Sequential([L.Conv2D(3, 3, padding="same"), L.BatchNormalization(), L.ReLU(),
                          L.MaxPool2D(2), L.GlobalAveragePooling2D(), L.Dense(2)])
    x = rng(seed).standard_normal((3, 6, 6, 2))
    model(x)
    for variable in model.trainable_variables:  # non-trivial gamma and beta
        variable.assign(variable.numpy() + rng(1).uniform(0.1, 0.5, variable.shape))
    return model, x


def block_loss(model, x):
    out = model(x, training=True)
    return sf.reduce_sum(out * sf.constant([[1.0, -2.0]], sf.float64))


def finite_differences(f, variable, indices, step=1e-6):
    grads = []
    for index in indices:
        value = variable.numpy()
        original = value[index]
        value[index] = original + step
        variable.assign(value)
        upper = float(f())
        value[index] = original - step
        variable.assign(value)
        lower = float(f())
        value[index] = original
        variable.assign(value)
        grads.append((upper - lower) / (2 * step))
    return np.array(grads)


@pytest.mark.parametrize("staged", [False, True], ids=["eager", "staged"])
def test_conv_bn_relu_pool_gradients_match_finite_differences(staged):
    model, x = conv_block()
    tx = sf.constant(x)

    def gradients(x):
        with sf.GradientTape() as tape:
            loss = block_loss(model, x)
        return tape.gradient(loss, model.trainable_variables)

    grads = (sf.function(gradients) if staged else gradients)(tx)
    assert [g.shape for g in grads] == [v.shape for v in model.trainable_variables]
    r = rng(2)
    for variable, grad in zip(model.trainable_variables, grads, strict=True):
        size = int(np.prod(variable.shape))
        flat = [np.unravel_index(i, variable.shape)
                for i in r.choice(size, min(size, 4), replace=False)]
        expected = finite_differences(lambda: block_loss(model, tx), variable, flat)
        np.testing.assert_allclose(grad.numpy()[tuple(np.array(flat).T)], expected,
                                   rtol=1e-5, atol=1e-7, err_msg=variable.name)


def test_staged_model_call_inside_a_staged_step_is_differentiated():
    # The paper stages the model call and the training step: the inner function's ops are
    # taped inside the outer trace.
    model, x = conv_block()
    call = sf.function(lambda x: model(x, training=True))
    outer = sf.function(lambda x: _grads(call, model, x))
    eager = _grads(lambda x: model(x, training=True), model, sf.constant(x))
    for got, want in zip(outer(sf.constant(x)), eager, strict=True):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-12)


def _grads(call, model, x):
    with sf.GradientTape() as tape:
        loss = sf.reduce_sum(call(x))
    return tape.gradient(loss, model.trainable_variables)


# --------------------------------------------------------------------------- training=


class Recorder(L.Layer):
    """Records the training mode it is called with."""

    def __init__(self):
        super().__init__()
        self.modes = []

    def call(self, inputs, training=False):
        self.modes.append(training)
        return inputs


class Block(L.Layer):
    """A layer whose `call` takes no `training` and calls a sub-layer without one."""

    def __init__(self):
        super().__init__()
        self.inner = Recorder()

    def call(self, inputs):
        return self.inner(inputs)


class PlainModule(sf.Module):
    def __init__(self):
        super().__init__()
        self.modes = []

    def call(self, inputs, training=False):
        self.modes.append(training)
        return inputs


def test_sequential_forwards_training_to_the_layers_that_take_it():
    recorder, block, plain = Recorder(), Block(), PlainModule()
    model = L.Sequential([recorder, lambda x: x * 1.0, block, plain, L.Dense(2)])
    x = sf.ones((2, 3))
    model(x, training=True)
    model(x)
    model(x, training=False)
    for modes in (recorder.modes, block.inner.modes, plain.modes):
        assert modes == [True, False, False]


def test_training_mode_reaches_batch_norm_through_nested_sequentials_staged():
    bn = L.BatchNormalization()
    model = L.Sequential([L.Dense(4), L.Sequential([bn, L.Dropout(0.5)])])
    step = sf.function(lambda x, training: model(x, training=training))
    x = sf.constant(rng().standard_normal((8, 3)).astype(np.float32))
    step(x, False)
    assert np.array_equal(bn.moving_mean.numpy(), np.zeros(4))
    step(x, True)
    assert not np.array_equal(bn.moving_mean.numpy(), np.zeros(4))
