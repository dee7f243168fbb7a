"""`GradientTape.gradient(..., unconnected_gradients=...)` and `sf.UnconnectedGradients`:
TensorFlow's documented behaviour (None by default, zeros of each unconnected source's
shape and dtype with ``ZERO``), for tensors and variables, eager and staged."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf

MODES = ["eager", "interpreted", "compiled"]


def staged(mode: str, fn):
    return fn if mode == "eager" else sf.function(fn, jit=mode == "compiled")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("choice", [sf.UnconnectedGradients.ZERO, "zero"])
def test_zero_gives_zeros_for_unconnected_tensors_and_variables(mode, choice):
    v = sf.Variable([[1.0, 2.0, 3.0]])
    w = sf.Variable(5.0, dtype=sf.float64)

    def f(x, y):
        with sf.GradientTape() as tape:
            tape.watch([x, y])
            z = sf.reduce_sum(x * x)
        return tape.gradient(z, {"x": x, "y": y, "v": v, "w": w},
                             unconnected_gradients=choice)

    grads = staged(mode, f)(sf.constant([1.0, -2.0]), sf.constant([[4.0], [5.0]]))
    np.testing.assert_array_equal(grads["x"].numpy(), [2.0, -4.0])
    for name, shape, dtype in [("y", (2, 1), np.float32), ("v", (1, 3), np.float32),
                               ("w", (), np.float64)]:
        assert grads[name].dtype == dtype, name
        np.testing.assert_array_equal(grads[name].numpy(), np.zeros(shape, dtype))


@pytest.mark.parametrize("mode", MODES)
def test_none_is_the_default(mode):
    v = sf.Variable([1.0])

    def f(x):
        with sf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            z = x * 3.0
        default = tape.gradient(z, [x, v])
        explicit = tape.gradient(z, [x, v], unconnected_gradients=sf.UnconnectedGradients.NONE)
        return default[0], default[1] is None, explicit[1] is None

    gx, default_none, explicit_none = staged(mode, f)(sf.constant([1.0, 2.0]))
    np.testing.assert_array_equal(gx.numpy(), [3.0, 3.0])
    assert default_none and explicit_none


def test_zero_with_output_gradients_and_an_unknown_dim():
    @sf.function(input_signature=[sf.TensorSpec([None])])
    def f(x):
        y = x * 2.0
        with sf.GradientTape() as tape:
            tape.watch([x, y])
            z = x * x
        return tape.gradient(z, [x, y], output_gradients=x,
                             unconnected_gradients=sf.UnconnectedGradients.ZERO)

    gx, gy = f(sf.constant([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(gx.numpy(), [2.0, 8.0, 18.0])
    np.testing.assert_array_equal(gy.numpy(), [0.0, 0.0, 0.0])


def test_enum_values_and_a_bad_choice():
    assert sf.UnconnectedGradients("none") is sf.UnconnectedGradients.NONE
    assert sf.UnconnectedGradients.ZERO.value == "zero"
    x = sf.constant(1.0)
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = x + 1.0
    with pytest.raises(ValueError, match="unconnected_gradients must be.*'zeros'"):
        tape.gradient(y, x, unconnected_gradients="zeros")
