"""`Function.freeze`: a graph function whose variable reads are constants of their values
at freezing time. It must compute what the unfrozen function computes, keep those values
when the variables change, refuse to freeze a write, and give the compiler constants to
work on (packed filters, batch norm's scale and shift folded)."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf
from stageflow.core.errors import StagingError


def convnet() -> sf.keras.Sequential:
    """A convolution, a batch norm of 2048 channels (above `fold`'s default limit), ReLU,
    a global mean and a dense layer: weights built on the first call."""
    return sf.keras.Sequential([
        sf.keras.layers.Conv2D(2048, 3, padding="same", use_bias=False),
        sf.keras.layers.BatchNormalization(),
        sf.keras.layers.ReLU(),
        sf.keras.layers.GlobalAveragePooling2D(),
        sf.keras.layers.Dense(10),
    ])


def test_a_frozen_model_computes_what_its_variables_give_and_keeps_those_values():
    model = convnet()
    infer = sf.function(lambda x: model(x, training=False))
    x = sf.constant(np.random.default_rng(0).standard_normal((2, 6, 6, 16)).astype(np.float32))
    frozen = infer.freeze(x)  # the first trace builds the weights
    batch_norm = model.layers[1]
    batch_norm.moving_variance.assign(np.linspace(0.5, 2.0, 2048).astype(np.float32))
    before = infer(x).numpy()
    frozen = infer.freeze(x)
    np.testing.assert_allclose(frozen(x).numpy(), before, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(frozen(x).numpy(), model(x, training=False).numpy(),
                               rtol=2e-5, atol=2e-6)
    for variable in model.variables:  # training moves every weight
        variable.assign(variable.numpy() * 1.5 + 0.25)
    np.testing.assert_allclose(frozen(x).numpy(), before, rtol=2e-5, atol=2e-6)
    assert not np.allclose(infer(x).numpy(), before, rtol=1e-3)


def test_a_frozen_function_reads_no_variable_and_its_weights_are_folded_and_packed():
    model = convnet()
    infer = sf.function(lambda x: model(x, training=False))
    x = sf.TensorSpec([1, 6, 6, 16], sf.float32)
    optimized = infer.freeze(x).ir("optimized")
    assert "read_variable" not in optimized
    assert "packed = true" in optimized  # the filters laid out once, at compile time
    assert "rsqrt" not in optimized  # the batch norm's scale, a constant now
    assert "read_variable" in infer.get_concrete_function(x).ir("optimized")


def test_a_loop_body_reads_the_frozen_value():
    weight = sf.Variable(np.float32(0.5))

    def decay(x):
        return sf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, h * weight),
                             (sf.constant(0), x))[1]

    frozen = sf.function(decay).freeze(sf.TensorSpec([2], sf.float32))
    weight.assign(2.0)
    np.testing.assert_allclose(frozen(sf.constant([8.0, 16.0])).numpy(), [1.0, 2.0])
    assert "read_variable" not in frozen.ir("optimized")


def test_freezing_a_function_that_writes_a_variable_names_it_and_the_line():
    counter = sf.Variable(0.0, name="counter")

    def step(x):
        counter.assign_add(1.0)
        return x * 2.0

    with pytest.raises(StagingError, match=r"(?s)cannot write variable 'counter'.*test_freeze\.py"):
        sf.function(step).freeze(sf.TensorSpec([], sf.float32))
