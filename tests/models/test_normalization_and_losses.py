"""The normalisation ops of `sf.nn`, `sf.losses` and the LayerNormalization and Embedding
layers: NumPy's values, eagerly, interpreted and compiled; gradients against finite
differences."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from strategies import numeric_gradient

import stageflow as sf

WAYS = ["eager", "interpreted", "compiled"]


def way(name: str, fn):
    return fn if name == "eager" else sf.function(fn, jit=name == "compiled")



@settings(max_examples=20, deadline=None)
@given(array=hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=3, min_side=1,
                                                     max_side=4),
                        elements=st.floats(-3, 3)), data=st.data())
def test_moments_and_layer_normalization_match_numpy(array, data):
    axes = sorted(data.draw(st.sets(st.integers(0, array.ndim - 1), min_size=1)))
    mean, variance = sf.nn.moments(sf.constant(array), axes)
    np.testing.assert_allclose(mean.numpy(), array.mean(axis=tuple(axes)), atol=1e-12)
    np.testing.assert_allclose(variance.numpy(), array.var(axis=tuple(axes)), atol=1e-12)
    got = sf.nn.layer_normalization(sf.constant(array), axes, epsilon=1e-3).numpy()
    m = array.mean(axis=tuple(axes), keepdims=True)
    v = array.var(axis=tuple(axes), keepdims=True)
    np.testing.assert_allclose(got, (array - m) / np.sqrt(v + 1e-3), atol=1e-10)


@pytest.mark.parametrize("name", WAYS)
def test_normalisation_ops_three_ways(name):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 3))
    b = rng.normal(size=3)
    table = rng.normal(size=(5, 2))
    ids = np.array([[0, 4], [2, 2]], np.int32)
    labels = rng.uniform(size=(4, 3))

    def ops(x, b, table, ids, labels):
        return (sf.nn.l2_normalize(x, axis=1), sf.nn.bias_add(x, b),
                sf.nn.embedding_lookup(table, ids),
                sf.nn.sigmoid_cross_entropy_with_logits(labels, x),
                sf.nn.batch_normalization(x, 0.5, 2.0, b, 3.0, 1e-3))

    got = way(name, ops)(*(sf.constant(a) for a in (x, b, table, ids, labels)))
    want = (x / np.sqrt(np.maximum((x * x).sum(1, keepdims=True), 1e-12)), x + b, table[ids],
            -labels * np.log(1 / (1 + np.exp(-x))) - (1 - labels) * np.log(
                1 - 1 / (1 + np.exp(-x))),
            3.0 * (x - 0.5) / np.sqrt(2.0 + 1e-3) + b)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-10, atol=1e-12)


def test_bias_add_checks_the_bias():
    with pytest.raises(ValueError, match="bias must be 1-D of the value's last dim"):
        sf.nn.bias_add(sf.ones([2, 3]), sf.ones([2]))


def test_layer_normalization_gradient_matches_finite_differences():
    rng = np.random.default_rng(1)
    x0, w = rng.normal(size=(2, 4)), rng.normal(size=(2, 4))

    def loss(v):
        return float(sf.reduce_sum(sf.nn.layer_normalization(sf.constant(v)) * w))

    x = sf.constant(x0)
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = sf.reduce_sum(sf.nn.layer_normalization(x) * w)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), numeric_gradient(loss, x0),
                               rtol=1e-6, atol=1e-8)


LOSSES = {
    "mse": (sf.losses.MeanSquaredError(), lambda t, p: ((p - t) ** 2).mean(-1)),
    "mae": (sf.losses.MeanAbsoluteError(), lambda t, p: np.abs(p - t).mean(-1)),
    "huber": (sf.losses.Huber(delta=0.5),
              lambda t, p: np.where(np.abs(p - t) <= 0.5, 0.5 * (p - t) ** 2,
                                    0.5 * (np.abs(p - t) - 0.25)).mean(-1)),
    "bce": (sf.losses.BinaryCrossentropy(),
            lambda t, p: -(t * np.log(p) + (1 - t) * np.log(1 - p)).mean(-1)),
    "cce": (sf.losses.CategoricalCrossentropy(),
            lambda t, p: -(t * np.log(p / p.sum(-1, keepdims=True))).sum(-1)),
}


@pytest.mark.parametrize("loss", sorted(LOSSES))
@pytest.mark.parametrize("reduction", ["sum_over_batch_size", "sum", "none"])
def test_losses_match_their_formulas(loss, reduction):
    rng = np.random.default_rng(2)
    y_true = rng.uniform(0.05, 0.95, size=(5, 3))
    y_pred = rng.uniform(0.05, 0.95, size=(5, 3))
    instance, formula = LOSSES[loss]
    instance.reduction = reduction
    weights = rng.uniform(size=5)
    per_example = formula(y_true, y_pred) * weights
    want = {"sum_over_batch_size": per_example.mean(), "sum": per_example.sum(),
            "none": per_example}[reduction]
    for fn in (instance, sf.function(instance)):
        got = fn(sf.constant(y_true), sf.constant(y_pred), sf.constant(weights))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)


def test_logits_and_sparse_cross_entropies_agree():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(4, 5))
    labels = np.array([0, 3, 4, 1], np.int32)
    one_hot = np.eye(5)[labels]
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    values = [
        sf.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, sf.constant(logits)),
        sf.losses.SparseCategoricalCrossentropy()(labels, sf.constant(probabilities)),
        sf.losses.CategoricalCrossentropy(from_logits=True)(one_hot, sf.constant(logits)),
        sf.losses.CategoricalCrossentropy()(one_hot, sf.constant(probabilities)),
    ]
    want = -np.log(probabilities[np.arange(4), labels]).mean()
    for value in values:
        assert float(value) == pytest.approx(want, rel=1e-6)
    smoothed = sf.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1)
    soft = one_hot * 0.9 + 0.1 / 5
    assert float(smoothed(one_hot, sf.constant(logits))) == pytest.approx(
        -(soft * np.log(probabilities)).sum(-1).mean(), rel=1e-6)


@pytest.mark.parametrize("name", WAYS)
def test_layer_normalization_layer(name):
    layer = sf.layers.LayerNormalization(epsilon=1e-5)
    x = np.random.default_rng(4).normal(size=(3, 2, 4)).astype(np.float32)
    got = way(name, layer)(sf.constant(x)).numpy()
    m, v = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(got, (x - m) / np.sqrt(v + 1e-5), rtol=1e-4, atol=1e-5)
    assert layer.gamma.shape == (4,) and layer.beta.shape == (4,)
    assert len(layer.trainable_variables) == 2


def test_embedding_trains_only_the_rows_it_looks_up():
    layer = sf.layers.Embedding(6, 3)
    opt = sf.optimizers.SGD(0.5)
    ids = sf.constant(np.array([[1, 4], [4, 4]], np.int32))

    @sf.function
    def step(ids):
        with sf.GradientTape() as tape:
            loss = sf.reduce_sum(layer(ids))
        opt.apply_gradients(zip(tape.gradient(loss, layer.trainable_variables),
                                layer.trainable_variables, strict=True))
        return loss

    before = layer(ids) if layer.embeddings is None else None
    del before
    table = layer.embeddings.numpy().copy()
    step(ids)
    after = layer.embeddings.numpy()
    counts = np.array([0, 1, 0, 0, 3, 0])[:, None]
    np.testing.assert_allclose(after, table - 0.5 * counts, rtol=1e-6)
    assert layer.embeddings.shape == (6, 3)
    with pytest.raises(TypeError, match="ids must be integers"):
        layer(sf.constant([1.0]))


MATH = {
    "tan": (sf.math.tan, np.tan),
    "sinh": (sf.math.sinh, np.sinh),
    "cosh": (sf.math.cosh, np.cosh),
}


@settings(max_examples=15, deadline=None)
@given(array=hnp.arrays(np.float64, hnp.array_shapes(max_dims=2, max_side=4),
                        elements=st.floats(-1.4, 1.4)), name=st.sampled_from(sorted(MATH)))
def test_math_functions_and_their_gradients(array, name):
    ours, numpy = MATH[name]
    np.testing.assert_allclose(ours(sf.constant(array)).numpy(), numpy(array), rtol=1e-12,
                               atol=1e-14)
    x = sf.constant(array)
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = sf.reduce_sum(ours(x))
    grad = tape.gradient(y, x)
    if array.size:
        np.testing.assert_allclose(
            grad.numpy(), numeric_gradient(lambda v: float(numpy(v).sum()), array),
            rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", WAYS)
def test_tests_reductions_and_movement_three_ways(name):
    values = np.array([[1.0, np.nan, -np.inf], [0.0, 2.0, np.inf]])
    flags = np.array([[True, False], [False, False], [True, True]])
    x = np.arange(12.0).reshape(3, 4)

    def ops(values, flags, x):
        return (sf.math.is_nan(values), sf.math.is_inf(values), sf.math.is_finite(values),
                sf.reduce_any(flags, axis=1), sf.reduce_all(flags, axis=1),
                sf.reduce_any(flags[:, :0], axis=1), sf.reduce_all(flags[:, :0], axis=1),
                sf.reverse(x, [0, 1]), sf.roll(x, 1, 1), sf.roll(x, [-1, 2], [0, 1]))

    got = way(name, ops)(*(sf.constant(a) for a in (values, flags, x)))
    want = (np.isnan(values), np.isinf(values), np.isfinite(values), flags.any(1),
            flags.all(1), np.zeros(3, bool), np.ones(3, bool), x[::-1, ::-1],
            np.roll(x, 1, 1), np.roll(x, (-1, 2), (0, 1)))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.numpy(), w)


def test_meshgrid_and_global_norm_clipping():
    a, b = np.arange(3.0), np.arange(4.0) * 10
    for indexing in ("xy", "ij"):
        for g, w in zip(sf.meshgrid(sf.constant(a), sf.constant(b), indexing=indexing),
                        np.meshgrid(a, b, indexing=indexing), strict=True):
            np.testing.assert_array_equal(g.numpy(), w)
    tensors = [sf.constant([3.0, 4.0]), None, sf.constant([12.0])]
    clipped, norm = sf.clip_by_global_norm(tensors, 6.5)
    assert float(norm) == 13.0 and clipped[1] is None
    np.testing.assert_allclose(clipped[0].numpy(), [1.5, 2.0])
    np.testing.assert_allclose(clipped[2].numpy(), [6.0])
    unchanged, _ = sf.clip_by_global_norm(tensors, 100.0)
    np.testing.assert_allclose(unchanged[0].numpy(), [3.0, 4.0])


@pytest.mark.parametrize("axes", [None, 1, [0, 1]])
def test_clip_by_norm_against_numpy_and_finite_differences(axes):
    """TensorFlow's ``clip_by_norm``: at most `clip_norm` long over `axes`, untouched below;
    a zero tensor stays zero (no 0/0)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4))
    norm = np.sqrt(np.sum(x * x, axis=None if axes is None else tuple(np.atleast_1d(axes)),
                          keepdims=True))
    want = x * 1.5 / np.maximum(norm, 1.5)
    np.testing.assert_allclose(sf.clip_by_norm(x, 1.5, axes=axes).numpy(), want, rtol=1e-12)
    np.testing.assert_array_equal(sf.clip_by_norm(np.zeros((2, 2)), 1.0).numpy(), 0.0)
    staged = sf.function(lambda t: sf.clip_by_norm(t, 1.5, axes=axes))
    np.testing.assert_allclose(staged(x).numpy(), want, rtol=1e-12)
    weights = rng.standard_normal((3, 4))
    loss = lambda t: sf.reduce_sum(sf.clip_by_norm(t, 1.5, axes=axes) * weights)  # noqa: E731
    direction = rng.standard_normal((3, 4))
    eps = 1e-6
    numeric = (float(loss(sf.constant(x + eps * direction)))
               - float(loss(sf.constant(x - eps * direction)))) / (2 * eps)
    grad = sf.grad(loss)(sf.constant(x)).numpy()
    np.testing.assert_allclose(np.sum(grad * direction), numeric, rtol=1e-6)
    with pytest.raises(TypeError, match="clip_by_norm: needs a float tensor"):
        sf.clip_by_norm([1, 2], 1.0)
