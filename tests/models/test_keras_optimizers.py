"""Nadam, Adamax and Adadelta against NumPy versions of Keras' documented update rules, over
several steps, eagerly and staged, in float32 and float64; and the compile strings that make
them."""

import numpy as np
import pytest

import stageflow as sf

GRADS = [np.array([0.5, -1.0, 2.0]), np.array([-0.25, 0.5, 1.0]), np.array([1.0, 1.0, -3.0]),
         np.array([0.0, -2.0, 0.5]), np.array([0.3, 0.1, -0.2])]
START = np.array([1.0, -2.0, 0.5])


def nadam_reference(lr, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    """keras/optimizers/nadam.py: the momentum schedule u_t and its running product."""
    w, m, v, product, out = START.copy(), np.zeros(3), np.zeros(3), 1.0, []
    for t, g in enumerate(GRADS, 1):
        u_t = beta_1 * (1 - 0.5 * 0.96**t)
        u_next = beta_1 * (1 - 0.5 * 0.96 ** (t + 1))
        product *= u_t
        m = m + (g - m) * (1 - beta_1)
        v = v + (g * g - v) * (1 - beta_2)
        m_hat = u_next * m / (1 - product * u_next) + (1 - u_t) * g / (1 - product)
        v_hat = v / (1 - beta_2**t)
        w = w - lr * m_hat / (np.sqrt(v_hat) + epsilon)
        out.append(w.copy())
    return out


def adamax_reference(lr, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    """keras/optimizers/adamax.py."""
    w, m, u, out = START.copy(), np.zeros(3), np.zeros(3), []
    for t, g in enumerate(GRADS, 1):
        m = m + (g - m) * (1 - beta_1)
        u = np.maximum(beta_2 * u, np.abs(g))
        w = w - lr * m / ((1 - beta_1**t) * (u + epsilon))
        out.append(w.copy())
    return out


def adadelta_reference(lr, rho=0.95, epsilon=1e-7):
    """keras/optimizers/adadelta.py."""
    w, a, s, out = START.copy(), np.zeros(3), np.zeros(3), []
    for g in GRADS:
        a = rho * a + (1 - rho) * g * g
        delta = -np.sqrt(s + epsilon) * g / np.sqrt(a + epsilon)
        s = rho * s + (1 - rho) * delta * delta
        w = w + lr * delta
        out.append(w.copy())
    return out


OPTIMIZERS = {
    "nadam": (lambda: sf.keras.optimizers.Nadam(0.01), lambda: nadam_reference(0.01)),
    "nadam_betas": (lambda: sf.keras.optimizers.Nadam(0.1, beta_1=0.5, beta_2=0.9),
                    lambda: nadam_reference(0.1, 0.5, 0.9)),
    "adamax": (lambda: sf.keras.optimizers.Adamax(0.01), lambda: adamax_reference(0.01)),
    "adamax_eps": (lambda: sf.keras.optimizers.Adamax(0.1, beta_2=0.5, epsilon=0.1),
                   lambda: adamax_reference(0.1, beta_2=0.5, epsilon=0.1)),
    "adadelta": (lambda: sf.keras.optimizers.Adadelta(1.0), lambda: adadelta_reference(1.0)),
    "adadelta_rho": (lambda: sf.keras.optimizers.Adadelta(0.5, rho=0.5, epsilon=1e-3),
                     lambda: adadelta_reference(0.5, 0.5, 1e-3)),
}


@pytest.mark.parametrize("staged", [False, True], ids=["eager", "staged"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_updates_match_keras_rules(name, dtype, staged):
    make, reference = OPTIMIZERS[name]
    opt = make()
    var = sf.Variable(START.astype(dtype))

    def step(g):
        opt.apply_gradients([(g, var)])

    if staged:
        step = sf.function(step)
    rtol = 2e-5 if dtype == np.float32 else 1e-12
    for g, expected in zip(GRADS, reference(), strict=True):
        step(sf.constant(g.astype(dtype)))
        np.testing.assert_allclose(var.numpy(), expected, rtol=rtol, atol=rtol)
    assert int(opt.iterations) == len(GRADS)
    if staged:
        assert step.tracing_count == 2  # slots made on the first trace, then traced again


def test_nadam_schedule_product_advances_once_per_step_whatever_the_variables():
    opt = sf.optimizers.Nadam(0.01)
    a, b = sf.Variable(START.copy()), sf.Variable(START.astype(np.float32))
    for g in GRADS:
        opt.apply_gradients([(sf.constant(g), a), (sf.constant(g.astype(np.float32)), b)])
    np.testing.assert_allclose(a.numpy(), nadam_reference(0.01)[-1], rtol=1e-12)
    np.testing.assert_allclose(b.numpy(), nadam_reference(0.01)[-1], rtol=2e-5)
    product = np.prod([0.9 * (1 - 0.5 * 0.96**t) for t in range(1, len(GRADS) + 1)])
    np.testing.assert_allclose(float(opt.u_product), product, rtol=1e-12)


def test_minimize_with_each_reaches_the_minimum():
    for make in (lambda: sf.optimizers.Nadam(0.1), lambda: sf.optimizers.Adamax(0.1),
                 lambda: sf.optimizers.Adadelta(50.0)):
        w = sf.Variable([3.0, -2.0])
        opt = make()
        for _ in range(300):
            opt.minimize(lambda w=w: sf.reduce_sum(sf.square(w - 1.0)), [w])
        np.testing.assert_allclose(w.numpy(), [1.0, 1.0], atol=0.05)
