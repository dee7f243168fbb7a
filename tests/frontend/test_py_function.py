"""`sf.py_function` (TensorFlow 2's eager py_func: tensors in, tensors or arrays out,
differentiable) and TensorFlow's dtype form of `Tout` inside staged functions (no shape:
the result's rank is learned by calling the function once while tracing, its dims unknown),
eager, interpreted and compiled."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf

MODES = ["eager", "interpreted", "compiled"]


def staged(mode: str, fn, **kwargs):
    return fn if mode == "eager" else sf.function(fn, jit=mode == "compiled", **kwargs)


@pytest.mark.parametrize("mode", MODES)
def test_the_function_gets_tensors_and_returns_tensors_or_arrays(mode):
    seen = []

    def moments(a):
        seen.append(type(a))
        return sf.reduce_mean(a), np.var(a.numpy()).astype(np.float32)

    def f(x):
        mean, var = sf.py_function(moments, [x], [sf.float32, sf.float32])
        return mean + 0.0, var

    mean, var = staged(mode, f)(sf.constant([1.0, 2.0, 6.0]))
    assert float(mean) == 3.0 and float(var) == pytest.approx(np.var([1.0, 2.0, 6.0]))
    assert seen and all(kind is sf.Tensor for kind in seen)


@pytest.mark.parametrize("mode", MODES)
def test_gradient_flows_through_it(mode):
    # TensorFlow: py_function's gradient is its function's, taken by a tape.
    def poly(a, b):
        return a * a * b + sf.sin(a)

    def f(x, y):
        with sf.GradientTape() as tape:
            tape.watch([x, y])
            z = sf.reduce_sum(sf.py_function(poly, [x, y], sf.float32))
        return tape.gradient(z, [x, y])

    x, y = sf.constant([0.5, -1.0]), sf.constant([2.0, 3.0])
    gx, gy = staged(mode, f)(x, y)
    np.testing.assert_allclose(gx.numpy(), 2 * x.numpy() * y.numpy() + np.cos(x.numpy()),
                               rtol=1e-6)
    np.testing.assert_allclose(gy.numpy(), x.numpy() ** 2, rtol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
def test_gradient_of_a_staged_function_taken_outside(jit):
    f = sf.function(lambda x: sf.py_function(lambda a: sf.exp(a) * 2.0, [x], sf.float32),
                    jit=jit)
    x = sf.constant([0.0, 1.0])
    with sf.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), 2 * np.exp([0.0, 1.0]), rtol=1e-6)


@pytest.mark.parametrize("mode", ["interpreted", "compiled"])
@pytest.mark.parametrize("api", ["py_func", "numpy_function", "py_function"])
def test_a_dtype_tout_inside_a_function_has_the_probed_rank_and_unknown_dims(mode, api):
    calls = []

    def positives(a):
        calls.append(np.shape(a))
        values = np.asarray(a)
        return values[values > 0], np.int64(values.size)

    def f(x):
        kept, count = getattr(sf, api)(positives, [x], [sf.float32, sf.int64])
        return kept * 2.0, count

    fn = staged(mode, f)
    kept, count = fn(sf.constant([1.0, -2.0, 3.0]))
    np.testing.assert_array_equal(kept.numpy(), [2.0, 6.0])
    assert count.dtype == sf.int64 and int(count) == 3
    assert calls == [(3,), (3,)]  # once while tracing (on zeros), once when run
    outputs = fn.get_concrete_function(sf.constant([1.0, -2.0, 3.0])).outputs
    assert [o.shape for o in outputs] == [(None,), ()]
    kept, _ = fn(sf.constant([-1.0, -2.0, 3.0]))  # no retrace: the same graph
    np.testing.assert_array_equal(kept.numpy(), [6.0])
    assert len(calls) == 3


@pytest.mark.parametrize("mode", ["interpreted", "compiled"])
def test_a_single_dtype_with_unknown_input_dims(mode):
    calls = []

    def outer(a, b):
        calls.append((a.shape, b.shape))
        return np.multiply.outer(a, b)

    fn = staged(mode, lambda x, y: sf.numpy_function(outer, [x, y], sf.float64),
                input_signature=[sf.TensorSpec([None], sf.float64),
                                 sf.TensorSpec([None, 2], sf.float64)])
    result = fn(sf.constant([1.0, 2.0], sf.float64), sf.constant([[1.0, 2.0]], sf.float64))
    assert result.shape == (2, 1, 2)
    np.testing.assert_array_equal(result.numpy(), [[[1.0, 2.0]], [[2.0, 4.0]]])
    assert calls[0] == ((1,), (1, 2))  # unknown dims probed as 1


def test_a_function_that_cannot_take_zeros_says_to_pass_a_spec():
    def inverse_checked(a):
        if np.any(a == 0):
            raise ZeroDivisionError("zero")
        return 1.0 / a

    @sf.function
    def f(x):
        return sf.numpy_function(inverse_checked, [x], sf.float32)

    with pytest.raises(TypeError, match=r"(?s)called once while tracing.*ZeroDivisionError: "
                                        r"zero.*sf.TensorSpec\(shape, dtype\).*test_py_function"):
        f(sf.constant([2.0]))

    @sf.function
    def g(x):
        return sf.numpy_function(inverse_checked, [x], sf.TensorSpec([None], sf.float32))

    np.testing.assert_array_equal(g(sf.constant([2.0, 4.0])).numpy(), [0.5, 0.25])


def test_a_wrong_number_of_results_is_named():
    @sf.function
    def f(x):
        return sf.py_function(lambda a: (a, a), [x], [sf.float32])

    with pytest.raises(ValueError, match="returned 2 values, Tout declares 1"):
        f(sf.constant(1.0))


def test_eager_results_keep_their_shapes():
    result = sf.py_function(lambda a: np.stack([a.numpy()] * 2), [sf.constant([1, 2])],
                            sf.int32)
    assert result.shape == (2, 2) and result.dtype == sf.int32


@pytest.mark.parametrize("mode", MODES)
def test_stateful_false_is_accepted_and_every_call_runs(mode):
    calls = []

    def double(a):
        calls.append(1)
        return a * 2

    def f(x):
        first = sf.numpy_function(double, [x], sf.TensorSpec([1]), stateful=False)
        second = sf.py_func(double, [x], sf.TensorSpec([1]), stateful=False, name="twice")
        return first + second

    np.testing.assert_array_equal(staged(mode, f)(sf.constant([1.5])).numpy(), [6.0])
    assert len(calls) == 2  # two identical pure calls, not merged into one
