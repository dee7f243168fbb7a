"""Precision policies (`sf.keras.mixed_precision`, `sf.config.set_precision_policy`) against
Keras' documented behaviour: a ``mixed_bfloat16`` layer keeps float32 variables, casts its
floating inputs to bfloat16, reads its variables as bfloat16 casts (their gradients
arrive float32), and returns bfloat16; losses compute in float32; a model trained under
it ends close to the float32 run, staged as eagerly."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import stageflow as sf

keras = sf.keras
mp = sf.keras.mixed_precision
BF16 = np.dtype(ml_dtypes.bfloat16)
NAMES = {"float32": ("float32", "float32"), "float64": ("float64", "float64"),
         "bfloat16": ("bfloat16", "bfloat16"), "float16": ("float16", "float16"),
         "mixed_bfloat16": ("bfloat16", "float32"), "mixed_float16": ("float16", "float32")}


@pytest.fixture(autouse=True)
def default_policy():
    """Every test starts and ends under the default policy (the global state is shared)."""
    mp.set_global_policy(None)
    yield
    mp.set_global_policy(None)


def bf16(values):
    """`values` rounded to bfloat16, as float32 (the reference computes on those)."""
    return np.asarray(values, np.float32).astype(BF16).astype(np.float32)


# --------------------------------------------------------------------------- policies


@pytest.mark.parametrize("name", list(NAMES))
def test_policy_names_their_compute_and_variable_dtypes(name):
    policy = mp.Policy(name)
    assert (policy.name, policy.compute_dtype, policy.variable_dtype) == (name, *NAMES[name])
    assert policy == mp.Policy(name) and repr(policy) == f'<Policy "{name}">'


def test_unknown_policy_names_the_valid_ones():
    with pytest.raises(ValueError, match="one of float32, float64, bfloat16, float16, "
                                         "mixed_bfloat16, mixed_float16"):
        mp.Policy("mixed_int8")
    with pytest.raises(ValueError, match="mixed_bfloat16"):
        mp.set_global_policy("bf16_mixed")
    with pytest.raises(ValueError, match="mixed_bfloat16"):
        keras.layers.Dense(2, dtype="int32")


def test_global_policy_setters_and_getters_share_one_state():
    assert mp.global_policy() == mp.Policy("float32")  # Keras' default
    sf.config.set_precision_policy("mixed_bfloat16")
    assert mp.global_policy().name == "mixed_bfloat16"
    mp.set_global_policy(mp.Policy("float16"))
    assert sf.config.get_precision_policy() == mp.Policy("float16")
    mp.set_global_policy(None)
    assert sf.config.get_precision_policy().name == "float32"


def test_a_layer_keeps_the_policy_it_was_made_under():
    mp.set_global_policy("mixed_bfloat16")
    mixed = keras.layers.Dense(2)
    mp.set_global_policy("float32")
    plain = keras.layers.Dense(2)
    assert mixed.dtype_policy.name == "mixed_bfloat16" and plain.dtype_policy.name == "float32"
    assert mixed(sf.ones((1, 3))).dtype == BF16 and plain(sf.ones((1, 3))).dtype == np.float32


# --------------------------------------------------------------------------- layers


def conv_input():
    return np.random.default_rng(0).standard_normal((2, 6, 6, 3)).astype(np.float32)


def sequence_input():
    return np.random.default_rng(1).standard_normal((2, 5, 3)).astype(np.float32)


LAYERS = {
    "Dense": (lambda **kw: keras.layers.Dense(4, activation="relu", **kw),
              lambda: np.ones((2, 3), np.float32)),
    "Conv2D": (lambda **kw: keras.layers.Conv2D(4, 3, padding="same", **kw), conv_input),
    "Conv1D": (lambda **kw: keras.layers.Conv1D(4, 2, padding="causal", **kw),
               sequence_input),
    "DepthwiseConv2D": (lambda **kw: keras.layers.DepthwiseConv2D(3, **kw), conv_input),
    "SeparableConv2D": (lambda **kw: keras.layers.SeparableConv2D(4, 3, **kw), conv_input),
    "Conv2DTranspose": (lambda **kw: keras.layers.Conv2DTranspose(2, 3, strides=2, **kw),
                        conv_input),
    "SimpleRNN": (lambda **kw: keras.layers.SimpleRNN(4, **kw), sequence_input),
    "LSTM": (lambda **kw: keras.layers.LSTM(4, return_sequences=True, **kw), sequence_input),
    "GRU": (lambda **kw: keras.layers.GRU(4, **kw), sequence_input),
    "BatchNormalization": (keras.layers.BatchNormalization, conv_input),
    "LayerNormalization": (keras.layers.LayerNormalization, sequence_input),
    "PReLU": (keras.layers.PReLU, sequence_input),
    "Embedding": (lambda **kw: keras.layers.Embedding(10, 4, **kw),
                  lambda: np.array([[1, 2], [3, 9]], np.int32)),
}


@pytest.mark.parametrize("by", ["global", "name", "policy"])
@pytest.mark.parametrize("kind", list(LAYERS))
def test_mixed_layer_keeps_float32_variables_and_returns_bfloat16(kind, by):
    """Under the global policy, or given ``dtype=`` (a name or a `Policy`)."""
    make, inputs = LAYERS[kind]
    if by == "global":
        mp.set_global_policy("mixed_bfloat16")
        layer = make()
    else:
        layer = make(dtype="mixed_bfloat16" if by == "name" else mp.Policy("mixed_bfloat16"))
    outputs = layer(sf.constant(inputs()), training=True)
    assert outputs.dtype == BF16, kind
    assert layer.variables and {v.dtype for v in layer.variables} == {np.dtype(np.float32)}
    assert (layer.compute_dtype, layer.variable_dtype, layer.dtype) == (
        "bfloat16", "float32", "float32")


def test_dense_computes_on_bfloat16_inputs_and_weights():
    x = np.random.default_rng(2).standard_normal((3, 5)).astype(np.float32)
    layer = keras.layers.Dense(4, bias_initializer="glorot_uniform", dtype="mixed_bfloat16")
    got = layer(x).numpy().astype(np.float32)
    kernel, bias = layer.kernel.numpy(), layer.bias.numpy()
    # The product of the bfloat16-rounded inputs and kernel (summed in float32), rounded to
    # bfloat16, plus the rounded bias, rounded again: within one bfloat16 step.
    want = bf16(bf16(bf16(x) @ bf16(kernel)) + bf16(bias))
    np.testing.assert_allclose(got, want, rtol=2 ** -8, atol=1e-6)
    # Staged, the bias add is fused into the product (rounded once, not twice): within
    # a bfloat16 step of the terms' magnitude of the eager result.
    staged = sf.function(lambda t: layer(t))(sf.constant(x))
    terms = np.abs(bf16(x) @ bf16(kernel)).max() + np.abs(bias).max()
    np.testing.assert_allclose(staged.numpy().astype(np.float32), got, rtol=0,
                               atol=terms * 2 ** -7)


def test_float32_output_layer_in_a_mixed_model_casts_its_inputs_up():
    """Keras' guide: the softmax of a mixed model's output is given ``dtype="float32"``."""
    mp.set_global_policy("mixed_bfloat16")
    model = keras.Sequential([keras.layers.Dense(5),
                              keras.layers.Activation("softmax", dtype="float32")])
    probabilities = model(sf.ones((2, 3)))
    assert probabilities.dtype == np.float32
    np.testing.assert_allclose(probabilities.numpy().sum(1), 1.0, rtol=1e-6)
    assert model.layers[1].compute_dtype == "float32"


def test_only_floating_inputs_are_cast():
    mp.set_global_policy("mixed_bfloat16")
    pixels = keras.layers.Rescaling(1 / 255)(sf.constant([[0, 255]], sf.uint8))
    assert pixels.dtype == BF16 and pixels.numpy().astype(np.float32).tolist() == [[0.0, 1.0]]
    mha = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    mask = sf.constant([[[True, False]] * 3])
    out, scores = mha(sf.ones((1, 3, 8)), sf.ones((1, 2, 6)), attention_mask=mask,
                      return_attention_scores=True)
    assert out.dtype == scores.dtype == BF16
    np.testing.assert_array_equal(scores.numpy().astype(np.float32)[0, :, :, 1], 0.0)


def test_a_subclassed_layer_reads_its_variables_in_the_compute_dtype():
    class Scale(keras.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight("w", (input_shape[-1],), "ones")

        def call(self, inputs):
            assert self.w.read_value().dtype == np.float32  # as kept
            return inputs * self.w  # an operand: read as bfloat16

    layer = Scale(dtype="mixed_bfloat16")
    outputs = layer(sf.constant([[1.5, 2.0]]))
    assert outputs.dtype == BF16 and layer.w.dtype == np.float32
    assert (layer.w * 2.0).dtype == np.float32  # outside the layer's call: as kept


def test_functional_model_under_the_global_policy():
    mp.set_global_policy("mixed_bfloat16")
    inputs = keras.Input((3,))
    hidden = keras.layers.Dense(4, activation="relu")(inputs)
    assert inputs.dtype == np.float32 and hidden.dtype == BF16
    outputs = keras.layers.Dense(1, dtype="float32")(hidden)
    model = keras.Model(inputs, outputs)
    assert model(sf.ones((2, 3))).dtype == np.float32
    assert all(v.dtype == np.float32 for v in model.variables)


def test_default_keeps_the_input_dtype_and_float32_policy_casts_as_keras():
    """With no policy set, a layer takes its first input's floating dtype (stageflow's
    rule); an explicit float32 policy casts float64 inputs to float32, as Keras does."""
    inferred = keras.layers.Dense(2)
    assert inferred(sf.ones((1, 3), sf.float64)).dtype == np.float64
    assert inferred.kernel.dtype == np.float64 and inferred.dtype_policy.name == "float64"
    mp.set_global_policy("float32")
    fixed = keras.layers.Dense(2)
    assert fixed(sf.ones((1, 3), sf.float64)).dtype == np.float32
    assert fixed.kernel.dtype == np.float32


def test_batch_norm_statistics_are_float32():
    x = np.random.default_rng(3).standard_normal((8, 4)).astype(np.float32) * 3 + 100
    bn = keras.layers.BatchNormalization(momentum=0.0, dtype="mixed_bfloat16")
    y = bn(x, training=True)
    assert y.dtype == BF16 and bn.moving_mean.dtype == np.float32
    # The statistics of the bfloat16 inputs, computed in float32 (not rounded to bf16).
    np.testing.assert_allclose(bn.moving_mean.numpy(), bf16(x).mean(0), rtol=1e-6)
    np.testing.assert_allclose(bn.moving_variance.numpy(), bf16(x).var(0), rtol=1e-4)


# --------------------------------------------------------------------------- gradients


def mlp(policy=None, activation="relu"):
    """A 4-16-1 perceptron with fixed (seeded) weights, so that every run sees the same."""
    model = keras.Sequential([keras.layers.Dense(16, activation=activation, dtype=policy),
                              keras.layers.Dense(1, dtype=policy)])
    model(sf.zeros((1, 4)))
    rng = np.random.default_rng(6)
    for variable in model.variables:
        variable.assign(0.5 * rng.standard_normal(variable.shape).astype(np.float32))
    return model


def copy_weights(source, target):
    for a, b in zip(source.variables, target.variables, strict=True):
        b.assign(a.numpy())


@pytest.mark.parametrize("staged", [False, True], ids=["eager", "staged"])
def test_gradients_arrive_float32_and_match_the_float32_model(staged):
    x = sf.constant(np.random.default_rng(4).standard_normal((16, 4)).astype(np.float32))
    # tanh: a gradient continuous in the pre-activations, which bfloat16 rounds (relu's
    # would jump where one crosses 0).
    plain, mixed = mlp(activation="tanh"), mlp("mixed_bfloat16", activation="tanh")

    def gradients(model):
        with sf.GradientTape() as tape:
            loss = sf.reduce_mean(sf.square(sf.cast(model(x), sf.float32)))
        return tape.gradient(loss, model.trainable_variables)

    run = sf.function(gradients) if staged else gradients
    got, want = run(mixed), gradients(plain)
    assert [g.dtype for g in got] == [np.dtype(np.float32)] * 4
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=2 ** -6,
                                   atol=2 ** -6 * np.abs(w.numpy()).max())


def regression(n=256, seed=5):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    return x, (np.sin(x[:, :1]) + 0.5 * x[:, 1:2] * x[:, 2:3]).astype(np.float32)


def fit(policy, run_eagerly, initial):
    mp.set_global_policy(policy)
    model = keras.Sequential([keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    model(sf.zeros((1, 4)))
    copy_weights(initial, model)
    model.compile(keras.optimizers.Adam(0.01), "mse", metrics=["mae"],
                  run_eagerly=run_eagerly)
    x, y = regression()
    history = model.fit(x, y, batch_size=32, epochs=8, shuffle=False, verbose=0)
    mp.set_global_policy(None)
    return model, history.history


def test_fit_under_mixed_bfloat16_ends_near_the_float32_run_staged_as_eagerly():
    initial = mlp()
    _, plain = fit("float32", False, initial)
    staged_model, staged = fit("mixed_bfloat16", False, initial)
    eager_model, eager = fit("mixed_bfloat16", True, initial)
    assert plain["loss"][-1] < 0.6 * plain["loss"][0]  # it learns
    assert staged["loss"][-1] == pytest.approx(plain["loss"][-1], rel=0.1)
    # Staged and eager differ by bfloat16 roundings: the staged step fuses a layer's bias
    # add into its product (one rounding where eager rounds twice) and sums in another
    # order, so they agree to bfloat16's precision.
    np.testing.assert_allclose(staged["loss"], eager["loss"], rtol=2 ** -7)
    np.testing.assert_allclose(staged["mae"], eager["mae"], rtol=2 ** -7)
    for a, b in zip(staged_model.variables, eager_model.variables, strict=True):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2 ** -7, atol=3e-2)
    slots = [v for v in staged_model.optimizer.variables if v.shape.rank]
    assert len(slots) == 8 and all(v.dtype == np.float32 for v in slots)  # Adam's m and v
    x, _ = regression(8)
    assert staged_model.predict(x, verbose=0).dtype == BF16  # the last layer's dtype


def test_losses_compute_in_float32():
    y_pred = sf.constant([[0.3, 0.7], [0.9, 0.1]], sf.bfloat16)
    y_true = sf.constant([[0.0, 1.0], [1.0, 0.0]])
    loss = keras.losses.CategoricalCrossentropy()(y_true, y_pred)
    assert loss.dtype == np.float32
    probabilities = bf16([[0.3, 0.7], [0.9, 0.1]])
    probabilities /= probabilities.sum(1, keepdims=True)  # Keras normalises them, in float32
    want = -np.mean(np.log(probabilities[[0, 1], [1, 0]]))
    assert float(loss) == pytest.approx(want, rel=1e-6)
    assert keras.losses.MeanSquaredError()(y_true, y_pred).dtype == np.float32


# --------------------------------------------------------------------------- loss scaling

# What the eager NumPy kernels say when a float16 backward pass overflows, as these tests
# make it do.
overflows = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                                       "ignore:invalid value encountered:RuntimeWarning")


def loss_scale_steps(gradients, staged, growth=2):
    """`LossScaleOptimizer(Adam)` over `gradients` (of the scaled loss), one step each:
    the variable, Adam's slots, the step count and the scale after every step."""
    w = sf.Variable([1.0, -1.0])
    opt = mp.LossScaleOptimizer(sf.optimizers.Adam(0.1), initial_scale=4.0,
                                dynamic_growth_steps=growth)

    def step(g):
        opt.apply_gradients([(g, w)])

    run = sf.function(step) if staged else step
    seen = []
    for g in gradients:
        run(sf.constant(g, sf.float32))
        slots = [opt.inner_optimizer.get_slot(w, name).numpy() for name in ("m", "v")]
        seen.append((w.numpy(), *slots, int(opt.iterations), float(opt.dynamic_scale)))
    return seen


@overflows
@pytest.mark.parametrize("staged", [False, True], ids=["eager", "staged"])
def test_loss_scale_skips_non_finite_steps_and_adapts_the_scale(staged):
    grads = [[4.0, 8.0], [np.inf, 1.0], [np.nan, 0.0], [2.0, 2.0], [1.0, 1.0], [3.0, 1.0]]
    seen = loss_scale_steps(grads, staged)
    # The same Adam steps on the finite gradients, divided by the scale of their step.
    w, plain = sf.Variable([1.0, -1.0]), sf.optimizers.Adam(0.1)
    want = {}
    for index, (g, scale) in {0: ([4.0, 8.0], 4.0), 3: ([2.0, 2.0], 1.0),
                              4: ([1.0, 1.0], 1.0), 5: ([3.0, 1.0], 2.0)}.items():
        plain.apply_gradients([(sf.constant(g) / scale, w)])
        want[index] = w.numpy()
    assert [s[4] for s in seen] == [4.0, 2.0, 1.0, 1.0, 2.0, 2.0]  # halved, halved, doubled
    assert [s[3] for s in seen] == [1, 1, 1, 2, 3, 4]  # skipped steps do not count
    for index, value in want.items():
        np.testing.assert_allclose(seen[index][0], value, rtol=1e-6)
    for skipped in (1, 2):  # nothing moved: variable and slots as after step 0
        for got, before in zip(seen[skipped][:3], seen[0][:3], strict=True):
            np.testing.assert_array_equal(got, before)


def test_loss_scale_refuses_what_it_cannot_wrap():
    with pytest.raises(TypeError, match="sf.optimizers object"):
        mp.LossScaleOptimizer("adam")
    with pytest.raises(ValueError, match="initial_scale"):
        mp.LossScaleOptimizer(sf.optimizers.SGD(), initial_scale=0.0)


def tiny_loss(y_true, y_pred):
    """A loss whose gradients (about 1e-9) flush to zero in a float16 backward pass."""
    return 1e-8 * sf.reduce_mean(sf.square(y_pred - y_true))


@overflows
@pytest.mark.parametrize("run_eagerly", [False, True], ids=["staged", "eager"])
def test_fit_under_mixed_float16_learns_with_loss_scaling_only(run_eagerly):
    x, y = regression(64)

    def train(policy, optimizer):
        mp.set_global_policy(policy)
        model = keras.Sequential([keras.layers.Dense(1)])
        model(sf.zeros((1, 4)))
        model.variables[0].assign(np.full((4, 1), 0.5, np.float32))
        model.compile(optimizer, tiny_loss, run_eagerly=run_eagerly)
        model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
        mp.set_global_policy(None)
        return model.variables[0].numpy()

    def sgd():
        return sf.optimizers.SGD(1e6)

    start = np.full((4, 1), 0.5, np.float32)
    reference = train("float32", sgd())
    assert not np.allclose(reference, start)
    np.testing.assert_array_equal(train("mixed_float16", sgd()), start)  # all underflowed
    scaled = train("mixed_float16", mp.LossScaleOptimizer(sgd(), initial_scale=2.0 ** 24))
    np.testing.assert_allclose(scaled - start, reference - start, rtol=2 ** -5, atol=1e-5)


@overflows
@pytest.mark.parametrize("run_eagerly", [False, True], ids=["staged", "eager"])
def test_replicas_of_a_strategy_skip_the_same_steps(run_eagerly):
    """Each replica checks its own gradients; they agree (an all-reduce of the verdicts),
    so every copy of a variable takes the same steps, and the skipped ones are not counted."""
    x, y = regression(64)
    mp.set_global_policy("mixed_float16")
    strategy = sf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
    with strategy.scope():
        model = mlp(activation="tanh")
        optimizer = mp.LossScaleOptimizer(sf.optimizers.Adam(0.02), initial_scale=2.0 ** 18)
        model.compile(optimizer, "mse", run_eagerly=run_eagerly)
    history = model.fit(x, y, batch_size=16, epochs=4, shuffle=False, verbose=0)
    assert 0 < int(optimizer.iterations) < 16  # the first steps overflowed float16
    assert float(optimizer.dynamic_scale) < 2.0 ** 18
    assert history.history["loss"][-1] < 0.8 * history.history["loss"][0]
    for variable in [*model.variables, *optimizer.variables]:
        copies = [np.asarray(copy.numpy()) for copy in getattr(variable, "values", [variable])]
        for copy in copies[1:]:
            np.testing.assert_array_equal(copy, copies[0])
