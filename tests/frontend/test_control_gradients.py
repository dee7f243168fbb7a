"""Reverse mode through `cond`, `switch_case`, `while_loop` and `py_func`: equal to finite
differences eagerly, interpreted and compiled, with the tape outside the staged function
and inside it, and to second order through `cond`."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf

MODES = ["eager", "interpreted", "compiled"]


def staged(mode: str, fn):
    return fn if mode == "eager" else sf.function(fn, jit=mode == "compiled")


def numeric(fn, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar `fn` at `x` (float64)."""
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[index] += eps
        down[index] -= eps
        grad[index] = (fn(up) - fn(down)) / (2 * eps)
    return grad


def piecewise(x, p):
    return sf.cond(p > 0, lambda: sf.sin(x) * x, lambda: x * x * 3.0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("p", [1.0, -1.0])
def test_cond_gradient_tape_outside(mode, p):
    fn = staged(mode, piecewise)
    x0 = np.array([0.3, -0.7])
    pred = sf.constant(p, dtype=sf.float64)
    x = sf.constant(x0)
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = sf.reduce_sum(fn(x, pred))
    want = numeric(lambda v: float(sf.reduce_sum(piecewise(sf.constant(v), pred))), x0)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("mode", MODES)
def test_gradients_of_variables_read_in_branches_tape_inside(mode):
    w = sf.Variable(np.array([[0.5, -1.0], [2.0, 0.25]]))
    b = sf.Variable(np.array([0.1, 0.2]))

    def step(x, p):
        with sf.GradientTape() as tape:
            y = sf.cond(p, lambda: sf.reduce_sum(sf.tanh(sf.matmul(x, w.read_value()))),
                        lambda: sf.reduce_sum(b.read_value() * x))
        return tape.gradient(y, [w, b])

    x = sf.constant(np.array([[1.0, 2.0]]))
    fn = staged(mode, step)
    gw, gb = fn(x, sf.constant(True))
    want = numeric(lambda v: float(np.tanh(x.numpy() @ v).sum()), w.numpy())
    np.testing.assert_allclose(gw.numpy(), want, rtol=1e-6)
    assert gb is None or not np.any(gb.numpy())
    gw, gb = fn(x, sf.constant(False))
    assert gw is None or not np.any(gw.numpy())
    np.testing.assert_allclose(gb.numpy(), x.numpy()[0])


@pytest.mark.parametrize("mode", MODES)
def test_switch_case_gradient(mode):
    def f(x, i):
        return sf.switch_case(i, [lambda: x * 2.0, lambda: x * x, lambda: sf.exp(x)])

    fn = staged(mode, f)
    x = sf.constant(np.array([0.5, 1.5]))
    for i, want in [(0, [2.0, 2.0]), (1, [1.0, 3.0]), (2, np.exp([0.5, 1.5]))]:
        with sf.GradientTape() as tape:
            tape.watch(x)
            y = sf.reduce_sum(fn(x, sf.constant(i)))
        np.testing.assert_allclose(tape.gradient(y, x).numpy(), want, rtol=1e-7)


@pytest.mark.parametrize("mode", MODES)
def test_second_order_through_cond(mode):
    def second(x):
        with sf.GradientTape() as outer:
            outer.watch(x)
            with sf.GradientTape() as inner:
                inner.watch(x)
                y = sf.cond(x > 0, lambda: x ** 3, lambda: sf.sin(x))
            g = inner.gradient(y, x)
        return g, outer.gradient(g, x)

    fn = staged(mode, second)
    g, h = fn(sf.constant(2.0, dtype=sf.float64))
    assert (float(g), float(h)) == pytest.approx((12.0, 12.0))
    g, h = fn(sf.constant(-1.0, dtype=sf.float64))
    assert (float(g), float(h)) == pytest.approx((np.cos(-1.0), -np.sin(-1.0)))


def rnn_numpy(w: np.ndarray, h: np.ndarray, xs: np.ndarray, n: int) -> float:
    for t in range(n):
        h = np.tanh(h @ w + xs[t])
    return float(h.sum())


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [0, 1, 4])
def test_rnn_over_a_variable_trip_count_matches_finite_differences(mode, n):
    rng = np.random.default_rng(0)
    w = sf.Variable(rng.normal(size=(3, 3)) * 0.5)
    xs = sf.constant(rng.normal(size=(5, 1, 3)))

    def rnn(h, length):
        def body(t, h):
            return t + 1, sf.tanh(sf.matmul(h, w) + xs[t])
        return sf.reduce_sum(sf.while_loop(lambda t, h: t < length, body, (0, h))[1])

    fn = staged(mode, rnn)
    h0 = sf.constant(rng.normal(size=(1, 3)))
    with sf.GradientTape() as tape:
        tape.watch(h0)
        y = fn(h0, sf.constant(n))
    gw, gh = tape.gradient(y, [w, h0])
    assert float(y) == pytest.approx(rnn_numpy(w.numpy(), h0.numpy(), xs.numpy(), n))
    want_w = numeric(lambda v: rnn_numpy(v, h0.numpy(), xs.numpy(), n), w.numpy())
    want_h = numeric(lambda v: rnn_numpy(w.numpy(), v, xs.numpy(), n), h0.numpy())
    np.testing.assert_allclose(0 if gw is None else gw.numpy(), want_w, atol=1e-8)
    np.testing.assert_allclose(gh.numpy(), want_h, atol=1e-8)


@pytest.mark.parametrize("mode", MODES)
def test_while_gradient_tape_inside_and_fori_loop(mode):
    def power(x, n):
        with sf.GradientTape() as tape:
            tape.watch(x)
            y = sf.fori_loop(0, n, lambda i, acc: acc * x, sf.ones_like(x))
        return y, tape.gradient(y, x)

    y, g = staged(mode, power)(sf.constant(np.array([1.5, 2.0])), sf.constant(3))
    np.testing.assert_allclose(y.numpy(), [1.5 ** 3, 8.0])
    np.testing.assert_allclose(g.numpy(), [3 * 1.5 ** 2, 12.0])


@pytest.mark.parametrize("mode", MODES)
def test_py_func_gradient_runs_the_function_under_a_tape(mode):
    def f(x):
        return sf.py_func(lambda a: sf.exp(a) * 2.0, [x], sf.TensorSpec([None], sf.float64))

    x = sf.constant(np.array([0.5, 1.0]))
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = sf.reduce_sum(staged(mode, f)(x))
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), 2 * np.exp([0.5, 1.0]))


def test_numpy_function_has_no_gradient():
    @sf.function
    def f(x):
        return sf.numpy_function(np.exp, [x], sf.TensorSpec([2], sf.float64))

    x = sf.constant(np.array([0.5, 1.0]))
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = sf.reduce_sum(f(x))
    assert tape.gradient(y, x) is None


def test_a_bounded_loop_saves_its_iterations_in_fixed_stacks_and_compiles():
    """With a Python-int `maximum_iterations` the backward's stacks have static shapes:
    the whole gradient is one compiled program, and still exact."""
    w = sf.Variable(np.random.default_rng(5).normal(size=(3, 3)) * 0.5)
    xs = sf.constant(np.random.default_rng(6).normal(size=(6, 1, 3)))

    @sf.function
    def gradient(h, length):
        with sf.GradientTape() as tape:
            tape.watch(h)
            final = sf.while_loop(lambda t, h: t < length,
                                  lambda t, h: (t + 1, sf.tanh(sf.matmul(h, w) + xs[t])),
                                  (0, h), maximum_iterations=6)[1]
            loss = sf.reduce_sum(final)
        return tape.gradient(loss, [w, h])

    h0 = sf.constant(np.random.default_rng(7).normal(size=(1, 3)))
    gw, gh = gradient(h0, sf.constant(4))
    assert gradient.get_concrete_function(h0, sf.constant(4)).stats()["steps_reasons"] == {}
    want_w = numeric(lambda v: rnn_numpy(v, h0.numpy(), xs.numpy(), 4), w.numpy())
    want_h = numeric(lambda v: rnn_numpy(w.numpy(), v, xs.numpy(), 4), h0.numpy())
    np.testing.assert_allclose(gw.numpy(), want_w, atol=1e-8)
    np.testing.assert_allclose(gh.numpy(), want_h, atol=1e-8)
