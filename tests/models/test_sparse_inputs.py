"""Keras' sparse inputs: ``Input(sparse=True)``, `Dense` on an `sf.SparseTensor` (a sparse
matrix product), and `predict` over a sparse batch of examples, as TensorFlow's sparse
tensor guide uses them."""

from __future__ import annotations

import numpy as np

import stageflow as sf


def test_a_model_on_sparse_inputs_is_the_model_on_their_dense_form():
    x = sf.keras.Input(shape=(4,), sparse=True)
    model = sf.keras.Model(x, sf.keras.layers.Dense(3)(x))
    data = sf.SparseTensor(indices=[(0, 0), (0, 1), (0, 2), (4, 3), (5, 0), (5, 1)],
                           values=[1, 1, 1, 1, 1, 1], dense_shape=(6, 4))
    dense = sf.sparse.to_dense(data).numpy().astype(np.float32)
    want = dense @ model.layers[0].kernel.numpy() + model.layers[0].bias.numpy()
    np.testing.assert_allclose(model(data).numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(model.predict(data, batch_size=4), want, rtol=1e-6)
    np.testing.assert_allclose(model(sf.constant(dense)).numpy(), want, rtol=1e-6)
