"""Keras' losses, metrics and compile's names: the loss functions against NumPy versions of
Keras' formulas (eager, interpreted and compiled), their gradients against finite
differences, the metrics' running means against NumPy over several weighted batches, and
the strings `compile` takes."""

import numpy as np
import pytest
from strategies import numeric_gradient

import stageflow as sf

WAYS = ["eager", "interpreted", "compiled"]
EPS = 1e-7


def way(name, fn):
    return fn if name == "eager" else sf.function(fn, jit=name == "compiled")


def l2n(x):
    return x / np.sqrt(np.maximum((x * x).sum(-1, keepdims=True), 1e-12))


# Keras' formulas, written out in NumPy (keras/losses.py), each over the last axis.
REFERENCES = {
    "mean_squared_logarithmic_error": lambda t, p: np.mean(
        (np.log(np.maximum(p, EPS) + 1) - np.log(np.maximum(t, EPS) + 1)) ** 2, -1),
    "mean_absolute_percentage_error": lambda t, p: 100 * np.mean(
        np.abs((t - p) / np.maximum(np.abs(t), EPS)), -1),
    "kl_divergence": lambda t, p: np.sum(
        np.clip(t, EPS, 1) * np.log(np.clip(t, EPS, 1) / np.clip(p, EPS, 1)), -1),
    "log_cosh": lambda t, p: np.mean(np.log(np.cosh(p - t)), -1),
    "poisson": lambda t, p: np.mean(p - t * np.log(p + EPS), -1),
    "cosine_similarity": lambda t, p: -np.sum(l2n(t) * l2n(p), -1),
    "hinge": lambda t, p: np.mean(np.maximum(1 - t * p, 0), -1),
    "mean_squared_error": lambda t, p: np.mean((t - p) ** 2, -1),
    "mean_absolute_error": lambda t, p: np.mean(np.abs(t - p), -1),
    "binary_crossentropy": lambda t, p: -np.mean(
        t * np.log(np.clip(p, EPS, 1 - EPS)) + (1 - t) * np.log(1 - np.clip(p, EPS, 1 - EPS)),
        -1),
}


def operands(name, shape=(3, 4, 5), seed=0):
    r = np.random.default_rng(seed)
    if name in ("kl_divergence", "binary_crossentropy"):
        t = r.uniform(0, 1, shape)
        t.flat[0] = 0.0  # clipped, not NaN
        return t, r.uniform(0.01, 0.99, shape)
    if name == "hinge":
        return np.sign(r.standard_normal(shape)), r.standard_normal(shape)
    if name == "poisson":
        return r.poisson(2.0, shape).astype(np.float64), r.uniform(0.1, 4.0, shape)
    return r.uniform(-1, 3, shape), r.uniform(-1, 3, shape)


@pytest.mark.parametrize("mode", WAYS)
@pytest.mark.parametrize("name", list(REFERENCES))
def test_loss_functions_match_keras_formulas_over_the_last_axis(name, mode):
    t, p = operands(name)
    fn = way(mode, getattr(sf.keras.losses, name))
    got = fn(sf.constant(t), sf.constant(p))
    assert got.shape == (3, 4) and got.dtype == sf.float64
    np.testing.assert_allclose(got.numpy(), REFERENCES[name](t, p), rtol=1e-10, atol=1e-12)


def test_hinge_takes_zero_one_labels_as_minus_one_one():
    t, p = operands("hinge")
    np.testing.assert_allclose(sf.losses.hinge((t + 1) / 2, p).numpy(),
                               REFERENCES["hinge"](t, p), rtol=1e-12)


def test_sparse_crossentropy_takes_labels_with_a_trailing_one_as_keras_does():
    r = np.random.default_rng(2)
    logits, labels = r.standard_normal((5, 3)), r.integers(0, 3, 5)
    for from_logits, scores in ((True, logits), (False, np.exp(logits) / 4.0)):
        flat = sf.losses.sparse_categorical_crossentropy(labels, scores, from_logits)
        column = sf.losses.sparse_categorical_crossentropy(labels[:, None], scores, from_logits)
        np.testing.assert_allclose(column.numpy(), flat.numpy(), rtol=1e-12)
        shifted = logits - logits.max(-1, keepdims=True)
        log_p = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        np.testing.assert_allclose(flat.numpy(), -log_p[np.arange(5), labels], rtol=1e-10)


def test_keras_short_names_are_the_functions():
    losses = sf.keras.losses
    assert losses.mse is losses.mean_squared_error and losses.mae is losses.mean_absolute_error
    assert losses.kld is losses.kl_divergence and losses.logcosh is losses.log_cosh
    assert losses.mape is losses.mean_absolute_percentage_error
    assert losses.msle is losses.mean_squared_logarithmic_error


def test_log_cosh_does_not_overflow():
    got = sf.losses.log_cosh([[0.0]], [[1000.0]]).numpy()
    np.testing.assert_allclose(got, [1000.0 - np.log(2.0)], rtol=1e-6)


@pytest.mark.parametrize("name", ["log_cosh", "kl_divergence", "cosine_similarity",
                                  "mean_squared_logarithmic_error", "poisson"])
def test_loss_gradients_match_finite_differences(name):
    t, p = operands(name, (2, 3), seed=1)
    fn = getattr(sf.losses, name)

    def total(values):
        return float(sf.reduce_sum(fn(sf.constant(t), sf.constant(values))))

    x = sf.constant(p)
    with sf.GradientTape() as tape:
        tape.watch(x)
        loss = sf.reduce_sum(fn(sf.constant(t), x))
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(), numeric_gradient(total, p),
                               rtol=1e-5, atol=1e-7)


CLASSES = {
    "MeanSquaredLogarithmicError": "mean_squared_logarithmic_error",
    "MeanAbsolutePercentageError": "mean_absolute_percentage_error",
    "KLDivergence": "kl_divergence", "LogCosh": "log_cosh", "Poisson": "poisson",
    "CosineSimilarity": "cosine_similarity", "Hinge": "hinge",
}


@pytest.mark.parametrize("reduction", ["sum_over_batch_size", "sum", "none"])
@pytest.mark.parametrize("cls", list(CLASSES))
def test_loss_classes_reduce_weighted_examples(cls, reduction):
    t, p = operands(CLASSES[cls], (4, 3))
    weights = np.array([1.0, 0.0, 2.0, 0.5])
    loss = getattr(sf.keras.losses, cls)(reduction=reduction)
    values = REFERENCES[CLASSES[cls]](t, p) * weights
    expected = {"sum_over_batch_size": values.mean(), "sum": values.sum(), "none": values}
    for fn in (loss, sf.function(loss)):
        got = fn(sf.constant(t), sf.constant(p), sample_weight=sf.constant(weights))
        np.testing.assert_allclose(got.numpy(), expected[reduction], rtol=1e-10)


# --------------------------------------------------------------------------- metrics


def batches(seed=0):
    r = np.random.default_rng(seed)
    for size in (4, 6):
        yield (r.integers(0, 2, (size, 3)).astype(np.float32),
               r.uniform(0, 1, (size, 3)).astype(np.float32),
               r.uniform(0, 2, size).astype(np.float32))


def running_mean(per_example, seed=0):
    """The mean over all batches of per-example values weighted by the sample weights."""
    total = count = 0.0
    for t, p, w in batches(seed):
        total += (per_example(t, p) * w).sum()
        count += w.sum()
    return total / count


METRICS = {
    "BinaryAccuracy": (lambda: sf.metrics.BinaryAccuracy(),
                       lambda t, p: (t == (p > 0.5)).mean(-1)),
    "BinaryAccuracy_0.3": (lambda: sf.metrics.BinaryAccuracy(threshold=0.3),
                           lambda t, p: (t == (p > 0.3)).mean(-1)),
    "MeanAbsoluteError": (lambda: sf.metrics.MeanAbsoluteError(),
                          lambda t, p: np.abs(t - p).mean(-1)),
    "BinaryCrossentropy": (lambda: sf.metrics.BinaryCrossentropy(),
                           REFERENCES["binary_crossentropy"]),
    "TopKCategoricalAccuracy": (
        lambda: sf.metrics.TopKCategoricalAccuracy(k=2),
        lambda t, p: ((p > (p * np.eye(3)[t.argmax(-1)]).sum(-1, keepdims=True)).sum(-1)
                      < 2).astype(np.float64)),
}


@pytest.mark.parametrize("staged", [False, True], ids=["eager", "staged"])
@pytest.mark.parametrize("name", list(METRICS))
def test_metrics_are_running_means_weighted_by_examples(name, staged):
    make, per_example = METRICS[name]
    metric = make()
    update = sf.function(metric.update_state) if staged else metric.update_state
    for t, p, w in batches():
        update(sf.constant(t), sf.constant(p), sf.constant(w))
    np.testing.assert_allclose(metric.result().numpy(), running_mean(per_example), rtol=1e-5)
    metric.reset_state()
    assert float(metric.result()) == 0.0


def test_root_mean_squared_error_is_the_root_of_the_running_mean():
    metric = sf.metrics.RootMeanSquaredError()
    squares = weights = 0.0
    for t, p, w in batches():
        metric.update_state(t, p, sample_weight=w)
        squares += ((t - p) ** 2 * w[:, None]).sum()
        weights += w.sum() * 3
    np.testing.assert_allclose(float(metric.result()), np.sqrt(squares / weights), rtol=1e-5)


def test_top_k_counts_ties_at_the_boundary_as_in_top_k():
    scores = np.array([[0.5, 0.5, 0.5, 0.1], [0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])
    labels = np.array([2, 0, 1])
    got = sf.metrics.sparse_top_k_categorical_accuracy(labels, scores, k=1).numpy()
    np.testing.assert_array_equal(got, [1.0, 0.0, 0.0])  # TensorFlow's in_top_k
    got = sf.metrics.sparse_top_k_categorical_accuracy(labels[:, None], scores, k=2).numpy()
    np.testing.assert_array_equal(got, [1.0, 0.0, 1.0])
    metric = sf.metrics.SparseTopKCategoricalAccuracy(k=2)
    metric.update_state(labels, scores, sample_weight=[1.0, 1.0, 2.0])
    assert float(metric.result()) == 0.75


def test_sparse_crossentropy_metric_is_the_mean_of_the_loss():
    r = np.random.default_rng(3)
    logits = r.standard_normal((5, 4)).astype(np.float32)
    labels = r.integers(0, 4, 5)
    metric = sf.metrics.SparseCategoricalCrossentropy(from_logits=True)
    metric.update_state(labels, logits)
    shifted = logits - logits.max(-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    np.testing.assert_allclose(float(metric.result()), -log_p[np.arange(5), labels].mean(),
                               rtol=1e-5)


def test_metrics_get_takes_keras_names_functions_and_class_names():
    assert isinstance(sf.metrics.get("top_k_categorical_accuracy"),
                      sf.metrics.TopKCategoricalAccuracy)
    assert sf.metrics.get("mae").name == "mae"
    assert sf.metrics.get("AUC").name == "auc"
    wrapped = sf.metrics.get(sf.losses.kl_divergence)
    assert isinstance(wrapped, sf.metrics.MeanMetricWrapper) and wrapped.name == "kl_divergence"
    with pytest.raises(ValueError, match="unknown metric 'Metric'"):
        sf.metrics.get("Metric")
    with pytest.raises(ValueError, match="unknown metric 'accuracy'"):
        sf.metrics.get("accuracy")


# --------------------------------------------------------------------------- compile


def small_model(units):
    return sf.keras.Sequential([sf.keras.layers.Dense(units, input_shape=(3,))])


@pytest.mark.parametrize(("loss", "kind"), [
    ("binary_crossentropy", sf.metrics.BinaryAccuracy),
    (sf.losses.BinaryCrossentropy(from_logits=True), sf.metrics.BinaryAccuracy),
    (sf.losses.binary_crossentropy, sf.metrics.BinaryAccuracy),
    ("sparse_categorical_crossentropy", sf.metrics.SparseCategoricalAccuracy),
    (sf.losses.sparse_categorical_crossentropy, sf.metrics.SparseCategoricalAccuracy),
    (sf.losses.CategoricalCrossentropy(), sf.metrics.CategoricalAccuracy),
])
def test_accuracy_follows_the_loss_as_in_keras(loss, kind):
    model = small_model(2)
    model.compile(optimizer="nadam", loss=loss, metrics=["accuracy"])
    assert type(model.compiled_metrics[0]) is kind
    assert model.compiled_metrics[0].name == "accuracy"  # also for "acc", as before


def test_accuracy_after_another_loss_is_a_clear_error():
    with pytest.raises(ValueError, match="'acc' follows the loss .* 'binary_accuracy'"):
        small_model(1).compile(loss=sf.losses.mean_squared_error, metrics=["acc"])


@pytest.mark.parametrize(("loss", "kind"), [
    ("mape", "MeanAbsolutePercentageError"), ("msle", "MeanSquaredLogarithmicError"),
    ("kld", "KLDivergence"), ("kl_divergence", "KLDivergence"), ("logcosh", "LogCosh"),
    ("poisson", "Poisson"), ("cosine_similarity", "CosineSimilarity"), ("hinge", "Hinge"),
    ("mae", "MeanAbsoluteError")])
@pytest.mark.parametrize("optimizer", ["nadam", "adamax", "adadelta", "lion"])
def test_compile_knows_keras_names(loss, kind, optimizer):
    model = small_model(2)
    model.compile(optimizer=optimizer, loss=loss)
    assert type(model.optimizer).__name__.lower() == optimizer
    assert type(model.compiled_loss) is getattr(sf.losses, kind)


def test_fit_reports_metrics_by_their_keras_names():
    r = np.random.default_rng(0)
    x = r.standard_normal((16, 3)).astype(np.float32)
    y = (x.sum(1, keepdims=True) > 0).astype(np.float32)
    model = sf.keras.Sequential([sf.keras.layers.Dense(1, activation="sigmoid",
                                                       input_shape=(3,))])
    model.compile(optimizer="adamax", loss="binary_crossentropy",
                  metrics=["accuracy", "mae", "binary_crossentropy", "AUC"])
    history = model.fit(x, y, epochs=1, batch_size=16, verbose=0)
    assert set(history.history) == {"loss", "accuracy", "mae", "binary_crossentropy", "auc"}
    p = model.predict(x, verbose=0)
    # one batch, evaluated before the update: the metrics see the loss's predictions
    np.testing.assert_allclose(history.history["binary_crossentropy"][0],
                               history.history["loss"][0], rtol=1e-5)
    assert 0.0 <= history.history["accuracy"][0] <= 1.0 and p.shape == (16, 1)


def test_bool_and_integer_labels_are_cast_to_the_predictions_dtype():
    """As Keras casts them: TensorFlow's ragged guide fits a float model on bool labels."""
    predictions = sf.constant([0.9, 0.2])
    want = sf.keras.losses.binary_crossentropy(sf.constant([1.0, 0.0]), predictions).numpy()
    for labels in (np.array([True, False]), sf.constant([True, False]), sf.constant([1, 0])):
        np.testing.assert_allclose(
            sf.keras.losses.binary_crossentropy(labels, predictions).numpy(), want)
