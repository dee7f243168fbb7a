"""MultiHeadAttention and Reshape: Keras' equations checked against NumPy with the layer's
own weights, eagerly and staged, masks, scores, gradients flowing to every projection."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf


def attention_numpy(layer, query, value, mask=None):
    def dense(x, projection):
        kernel, bias = (v.numpy() if v is not None else 0.0 for v in projection)
        return x @ kernel + bias

    def heads(x, size):
        b, n, _ = x.shape
        return x.reshape(b, n, layer.num_heads, size).transpose(0, 2, 1, 3)

    q = heads(dense(query, layer.query_dense), layer.key_dim)
    k = heads(dense(value, layer.key_dense), layer.key_dim)
    v = heads(dense(value, layer.value_dense), layer.value_dim)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(layer.key_dim)
    if mask is not None:
        scores = np.where(mask[:, None], scores, -1e9)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    merged = (weights @ v).transpose(0, 2, 1, 3).reshape(query.shape[0], query.shape[1], -1)
    return dense(merged, layer.output_dense), weights


@pytest.mark.parametrize("staged", [False, True])
def test_multi_head_attention_matches_numpy(staged):
    rng = np.random.default_rng(0)
    query, value = rng.normal(size=(2, 3, 6)), rng.normal(size=(2, 5, 4))
    mask = rng.uniform(size=(2, 3, 5)) > 0.3
    mask[:, :, 0] = True
    layer = sf.layers.MultiHeadAttention(num_heads=2, key_dim=3, value_dim=4)
    call = layer
    if staged:
        call = sf.function(lambda q, v, m: layer(q, v, attention_mask=m,
                                                 return_attention_scores=True))
        output, weights = call(sf.constant(query), sf.constant(value), sf.constant(mask))
    else:
        output, weights = call(sf.constant(query), sf.constant(value), attention_mask=mask,
                               return_attention_scores=True)
    want_output, want_weights = attention_numpy(layer, query, value, mask)
    np.testing.assert_allclose(output.numpy(), want_output, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(weights.numpy(), want_weights, rtol=1e-9, atol=1e-12)
    assert output.shape == (2, 3, 6) and weights.shape == (2, 2, 3, 5)


def test_attention_trains_every_projection():
    layer = sf.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    x = sf.constant(np.random.default_rng(1).normal(size=(2, 5, 8)).astype(np.float32))
    with sf.GradientTape() as tape:
        loss = sf.reduce_sum(sf.square(layer(x, x)))
    grads = tape.gradient(loss, layer.trainable_variables)
    assert len(grads) == 8 and all(g is not None and np.any(g.numpy()) for g in grads)


def test_reshape_layer():
    x = sf.constant(np.arange(24.0).reshape(2, 12))
    np.testing.assert_array_equal(sf.layers.Reshape((3, 4))(x).numpy(),
                                  x.numpy().reshape(2, 3, 4))
    staged = sf.function(lambda v: sf.layers.Reshape((-1, 2))(v),
                         input_signature=[sf.TensorSpec([None, 12], sf.float64)])
    assert staged(x).shape == (2, 6, 2)
