"""`sf.debugging`: each check passes and fails alike eagerly, interpreted and compiled,
raising `sf.errors.InvalidArgumentError` that names the check, the values and the user's
line; static checks fail as the call is traced; gradients pass through."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf

WAYS = ["eager", "interpreted", "compiled"]


def run(way, f, *args):
    return (f if way == "eager" else sf.function(f, jit=way == "compiled"))(*args)


CHECKS = [  # (name, call, passing arguments, failing arguments)
    ("assert_equal", lambda x: sf.debugging.assert_equal(x, [1.0, 2.0]), [1.0, 2.0],
     [1.0, 3.0]),
    ("assert_none_equal", lambda x: sf.debugging.assert_none_equal(x, [1.0, 2.0]),
     [2.0, 1.0], [1.0, 1.0]),
    ("assert_less", lambda x: sf.debugging.assert_less(x, 2.0), [1.0, 1.5], [1.0, 2.0]),
    ("assert_less_equal", lambda x: sf.debugging.assert_less_equal(x, 2.0), [1.0, 2.0],
     [1.0, 2.5]),
    ("assert_greater", lambda x: sf.debugging.assert_greater(x, 0.0), [1.0, 2.0],
     [0.0, 1.0]),
    ("assert_greater_equal", lambda x: sf.debugging.assert_greater_equal(x, 0.0),
     [0.0, 1.0], [-1.0, 1.0]),
    ("assert_positive", lambda x: sf.debugging.assert_positive(x), [1.0, 2.0], [0.0, 1.0]),
    ("assert_negative", lambda x: sf.debugging.assert_negative(x), [-1.0, -2.0],
     [-1.0, 0.0]),
    ("assert_non_negative", lambda x: sf.debugging.assert_non_negative(x), [0.0, 1.0],
     [-1.0, 1.0]),
    ("assert_non_positive", lambda x: sf.debugging.assert_non_positive(x), [0.0, -1.0],
     [1.0, 0.0]),
    ("assert_near", lambda x: sf.debugging.assert_near(x, [1.0, 2.0]), [1.0, 2.0000001],
     [1.0, 2.001]),
    ("check_numerics", lambda x: sf.debugging.check_numerics(x, "activations"), [1.0, 2.0],
     [1.0, np.nan]),
    ("Assert", lambda x: sf.debugging.Assert(sf.reduce_all(x > 0.0), ["x was", x]),
     [1.0, 2.0], [1.0, -2.0]),
]


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("name, check, good, bad", CHECKS, ids=[c[0] for c in CHECKS])
def test_each_check_passes_and_fails_in_every_way(way, name, check, good, bad):
    def f(x):
        check(x)
        return x * 2.0

    np.testing.assert_array_equal(run(way, f, sf.constant(good)).numpy(),
                                  np.array(good, np.float32) * 2)
    with pytest.raises(sf.errors.InvalidArgumentError, match=f"^{name}: ") as caught:
        run(way, f, sf.constant(bad))
    assert "test_debugging.py" in str(caught.value)  # the user's line: in f, via CHECKS


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's, for the log of 0 and -1
@pytest.mark.parametrize("way", WAYS)
def test_check_numerics_names_nan_and_inf_and_returns_its_tensor(way):
    def f(x):
        return sf.debugging.check_numerics(sf.math.log(x), "log of x") + 1.0

    np.testing.assert_allclose(run(way, f, sf.constant([1.0])).numpy(), [1.0])
    with pytest.raises(sf.errors.InvalidArgumentError, match="log of x: Tensor had Inf"):
        run(way, f, sf.constant([0.0, 1.0]))
    with pytest.raises(sf.errors.InvalidArgumentError, match="Tensor had NaN values"):
        run(way, f, sf.constant([-1.0]))


def test_gradients_pass_through_checks():
    x = sf.constant([1.0, 2.0])

    @sf.function
    def loss(x):
        sf.debugging.assert_positive(x)
        return sf.reduce_sum(sf.debugging.check_numerics(x * x, "squares"))

    with sf.GradientTape() as tape:
        tape.watch(x)
        y = loss(x)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [2.0, 4.0])


def test_static_checks_fail_as_the_call_is_traced():
    with pytest.raises(ValueError, match="assert_rank: the tensor has rank 2, not 1"):
        sf.function(lambda x: sf.debugging.assert_rank(x, 1))(sf.zeros((2, 2)))
    with pytest.raises(TypeError, match="assert_type: the tensor is int32, not float32"):
        sf.debugging.assert_type(sf.constant([1]), sf.float32)
    with pytest.raises(TypeError, match="assert_equal: x is float32, y is int32"):
        sf.debugging.assert_equal(sf.constant([1.0]), sf.constant([1]))
    with pytest.raises(TypeError, match="check_numerics: needs a float or complex tensor"):
        sf.debugging.check_numerics(sf.constant([1]), "ints")


@pytest.fixture
def checking_numerics():
    sf.debugging.enable_check_numerics()
    try:
        yield
    finally:
        sf.debugging.disable_check_numerics()


@pytest.mark.parametrize("way", WAYS)
def test_enable_check_numerics_names_the_first_op_that_made_a_nan(way, checking_numerics):
    def f(x):
        scaled = x * 2.0
        logs = sf.math.log(scaled)  # the first NaN: the line named
        return sf.reduce_sum(logs * 3.0)

    assert float(run(way, f, sf.constant([1.0, 2.0]))) == pytest.approx(
        3 * (np.log(2.0) + np.log(4.0)), rel=1e-6)
    with pytest.raises(sf.errors.InvalidArgumentError) as caught:
        run(way, f, sf.constant([1.0, -2.0]))
    message = str(caught.value)
    assert message.startswith("check_numerics: the op 'log' made NaN in its output 0 "
                              "(shape (2,), float32)")
    assert "logs = sf.math.log(scaled)  # the first NaN" in message


def test_check_numerics_sees_infinities_in_gradients_and_stops_when_disabled():
    x = sf.constant([0.0, 1.0])
    sf.debugging.enable_check_numerics()
    try:
        with sf.GradientTape() as tape:
            tape.watch(x)
            y = sf.reduce_sum(sf.sqrt(x))
        with pytest.raises(sf.errors.InvalidArgumentError, match="made Inf"):
            tape.gradient(y, x)  # d sqrt(x)/dx at 0
    finally:
        sf.debugging.disable_check_numerics()
    with np.errstate(divide="ignore"):
        assert np.isinf(sf.math.log(sf.constant(0.0)).numpy())


def test_executing_eagerly_is_false_only_while_a_function_traces():
    assert sf.executing_eagerly()
    assert not bool(sf.function(lambda: sf.constant(sf.executing_eagerly()))())
    with sf.init_scope():
        assert sf.executing_eagerly()
