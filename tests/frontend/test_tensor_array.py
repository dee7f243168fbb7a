"""`sf.TensorArray` against a Python list of NumPy arrays (TensorFlow's documented
behaviour): every method eagerly and staged, carried through `sf.while_loop` and AutoGraph
loops (fixed and growing size, element shape learned from the body), interpreted and
compiled alike; gradients through a loop against finite differences; errors naming the
method and the user's line; and the AutoGraph error for a Python list grown in a loop."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given
from strategies import numeric_gradient, shapes

import stageflow as sf

MODES = ["eager", "interpreted", "compiled"]
STAGED = ["interpreted", "compiled"]
rng = np.random.default_rng(3)


def staged(mode: str, fn):
    return fn if mode == "eager" else sf.function(fn, jit=mode == "compiled")


def _line_of(fn, text: str) -> str:
    """`file:line` of the line of `fn`'s source holding `text`."""
    lines, first = inspect.getsourcelines(fn)
    offset = next(i for i, line in enumerate(lines) if text in line)
    return f"{inspect.getsourcefile(fn)}:{first + offset}"


# -- the methods --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_methods_match_a_list(mode):
    rows = rng.standard_normal((4, 3)).astype(np.float32)

    def f(x):
        ta = sf.TensorArray(sf.float32, size=4)
        for i in range(4):
            ta = ta.write(i, x[3 - i] * 2.0)
        other = sf.TensorArray(sf.float32, size=4).unstack(x)
        scattered = sf.TensorArray(sf.float32, size=5, element_shape=(3,)).scatter([4, 0], x[:2])
        return (ta.stack(), ta.read(1), ta.gather([3, 0, 3]), ta.size(), other.stack(),
                other.concat(), scattered.stack(), ta.identity().read(0))

    stack, read, gathered, size, unstacked, concat, scattered, first = (
        np.asarray(v) for v in staged(mode, f)(sf.constant(rows)))
    want = rows[::-1] * 2
    np.testing.assert_allclose(stack, want)
    np.testing.assert_allclose(read, want[1])
    np.testing.assert_allclose(gathered, want[[3, 0, 3]])
    assert size == 4 and size.dtype == np.int32
    np.testing.assert_allclose(unstacked, rows)
    np.testing.assert_allclose(concat, rows.reshape(-1))
    np.testing.assert_allclose(scattered, np.stack([rows[1], *np.zeros((3, 3)), rows[0]]))
    np.testing.assert_allclose(first, want[0])


@pytest.mark.parametrize("mode", MODES)
def test_traced_indices_scatter_gather_and_write(mode):
    rows = rng.standard_normal((2, 3)).astype(np.float32)

    def f(indices, i, x):
        ta = sf.TensorArray(sf.float32, size=4, element_shape=(3,)).scatter(indices, x)
        grown = sf.TensorArray(sf.float32, size=1, dynamic_size=True).write(i, x[0])
        return ta.stack(), ta.gather(indices[::-1]), ta.read(i), grown.stack(), grown.size()

    stack, gathered, read, grown, size = staged(mode, f)(
        sf.constant([3, 1]), sf.constant(3), sf.constant(rows))
    want = np.zeros((4, 3), np.float32)
    want[[3, 1]] = rows
    np.testing.assert_allclose(stack.numpy(), want)
    np.testing.assert_allclose(gathered.numpy(), want[[1, 3]])
    np.testing.assert_allclose(read.numpy(), want[3])
    np.testing.assert_allclose(grown.numpy(), np.stack([*np.zeros((3, 3)), rows[0]]))
    assert int(size) == 4


def test_properties_and_eager_writes_change_the_array_in_place():
    ta = sf.TensorArray(sf.int32, size=2, element_shape=[None])
    assert ta.dtype == sf.int32 and ta.element_shape == (None,) and not ta.dynamic_size
    same = ta.write(0, [1, 2])
    assert same is ta and ta.element_shape == (2,)  # TensorFlow's eager arrays
    np.testing.assert_array_equal(ta.stack().numpy(), [[1, 2], [0, 0]])  # unwritten: zeros
    grown = sf.TensorArray(sf.float32, dynamic_size=True).write(2, 1.0)
    np.testing.assert_array_equal(grown.stack().numpy(), [0.0, 0.0, 1.0])
    assert int(grown.size()) == 3
    assert ta.close() is None


@pytest.mark.parametrize("mode", STAGED)
def test_a_staged_function_returns_an_array(mode):
    def f(x):
        return {"ta": sf.TensorArray(sf.float32, size=3).write(1, x), "x": x}

    out = staged(mode, f)(sf.constant([1.0, 2.0]))
    ta = out["ta"]
    assert isinstance(ta, sf.TensorArray) and ta.element_shape == (2,)
    assert ta.write(2, [3.0, 4.0]) is ta  # an eager array again
    np.testing.assert_allclose(ta.stack().numpy(), [[0.0, 0.0], [1.0, 2.0], [3.0, 4.0]])


def test_ragged_elements_concat_without_infer_shape():
    ta = sf.TensorArray(sf.float32, size=2, infer_shape=False)
    ta = ta.write(0, [1.0]).write(1, [2.0, 3.0])
    np.testing.assert_array_equal(ta.concat().numpy(), [1.0, 2.0, 3.0])


@given(shape=shapes(min_dims=1, max_dims=3, min_side=0, max_side=3))
def test_unstack_then_stack_is_the_identity(shape):
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    ta = sf.TensorArray(sf.float64, size=shape[0]).unstack(x)
    np.testing.assert_array_equal(ta.stack().numpy(), x)
    f = sf.function(lambda v: sf.TensorArray(sf.float64, size=shape[0]).unstack(v).stack(),
                    jit=False)
    np.testing.assert_array_equal(f(sf.constant(x)).numpy(), x)


# -- carried through loops ---------------------------------------------------------------


def squares(n, x):
    """A while_loop writing row i = x * i**2; the array's element shape comes from the body."""
    ta = sf.TensorArray(sf.float32, size=5)

    def body(i, ta):
        scale = sf.cast(i * i, sf.float32)
        return i + 1, ta.write(i, x * scale)

    _, ta = sf.while_loop(lambda i, _: i < n, body, (sf.constant(0), ta))
    return ta.stack(), ta.read(n - 1)


@pytest.mark.parametrize("mode", MODES)
def test_while_loop_carries_the_array(mode):
    x = np.array([1.0, -2.0], np.float32)
    stack, last = staged(mode, squares)(sf.constant(3), sf.constant(x))
    want = np.array([x * i * i for i in range(3)] + [np.zeros(2)] * 2, np.float32)
    np.testing.assert_allclose(stack.numpy(), want)
    np.testing.assert_allclose(last.numpy(), x * 4)


@pytest.mark.parametrize("mode", MODES)
def test_a_dynamic_array_grows_in_a_loop_of_unknown_trip_count(mode):
    def f(n, x):
        ta = sf.TensorArray(sf.float32, size=0, dynamic_size=True)
        for i in sf.range(n):
            ta = ta.write(i, x + sf.cast(i, sf.float32))
        return ta.stack(), ta.size()

    fn = staged(mode, f)
    for n in (0, 1, 4):
        stack, size = fn(sf.constant(n), sf.constant([1.0, 2.0]))
        want = np.array([[1.0 + i, 2.0 + i] for i in range(n)], np.float32).reshape(n, 2)
        if n == 0 and mode == "eager":  # nothing written: TensorFlow's eager shape (0,)
            want = want.reshape(0)
        np.testing.assert_array_equal(stack.shape, want.shape)
        np.testing.assert_allclose(stack.numpy(), want)
        assert int(size) == n


@pytest.mark.parametrize("mode", STAGED)
def test_autograph_loops_and_branches_carry_the_array(mode):
    def f(xs):
        ta = sf.TensorArray(sf.float32, size=xs.shape[0])
        i = 0
        for row in xs:
            if sf.reduce_sum(row) > 0:
                ta = ta.write(i, row)
            else:
                ta = ta.write(i, -row * 10.0)
            i += 1
        return ta.stack()

    xs = rng.standard_normal((5, 2)).astype(np.float32)
    want = np.where(xs.sum(axis=1, keepdims=True) > 0, xs, -xs * 10)
    np.testing.assert_allclose(staged(mode, f)(sf.constant(xs)).numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(f(sf.constant(xs)).numpy(), want, rtol=1e-6)  # eagerly


@pytest.mark.parametrize("mode", MODES)
def test_gradient_through_a_loop_matches_finite_differences(mode):
    def loss(x):
        ta = sf.TensorArray(sf.float64, size=4)

        def body(i, h, ta):
            h = sf.tanh(h * x[i] + 0.5)
            return i + 1, h, ta.write(i, h * h)

        _, _, ta = sf.while_loop(lambda i, *_: i < 4, body, (0, sf.ones((2,), sf.float64), ta))
        return sf.reduce_sum(ta.stack() * sf.constant(np.arange(8.0).reshape(4, 2)))

    def grad(x):
        with sf.GradientTape() as tape:
            tape.watch(x)
            y = loss(x)
        return tape.gradient(y, x)

    x0 = rng.standard_normal((4, 2))
    got = staged(mode, grad)(sf.constant(x0)).numpy()
    want = numeric_gradient(lambda v: float(loss(sf.constant(v))), x0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def test_gradient_through_a_growing_array_is_refused_clearly():
    def f(x, n):
        with sf.GradientTape() as tape:
            tape.watch(x)
            ta = sf.TensorArray(sf.float64, size=0, dynamic_size=True)
            for i in sf.range(n):
                ta = ta.write(i, x * sf.cast(i, sf.float64))
            y = sf.reduce_sum(ta.stack())
        return tape.gradient(y, x)

    with pytest.raises(NotImplementedError, match="changes shape between iterations") as info:
        sf.function(f)(sf.constant(np.array([1.0, 2.0])), sf.constant(3))
    assert "dynamic_size=True" in str(info.value)
    assert _line_of(f, "tape.gradient") in str(info.value)
    eager = f(sf.constant(np.array([1.0, 2.0])), sf.constant(3))
    np.testing.assert_allclose(eager.numpy(), [3.0, 3.0])


# -- errors ---------------------------------------------------------------------------------


def test_eager_errors_name_the_method_and_line():
    def out_of_range():
        ta = sf.TensorArray(sf.float32, size=2)
        return ta.read(2)

    def write_past_the_end():
        return sf.TensorArray(sf.float32, size=2).write(5, 1.0)

    def mismatched_shape():
        ta = sf.TensorArray(sf.float32, size=2).write(0, [1.0, 2.0])
        return ta.write(1, [1.0, 2.0, 3.0])

    def wrong_dtype():
        return sf.TensorArray(sf.float32, size=2).write(0, sf.constant([1, 2]))

    def unknown_shape():
        return sf.TensorArray(sf.float32, size=2).stack()

    cases = [(out_of_range, IndexError, "TensorArray.read: index 2 is out of range", "read"),
             (write_past_the_end, IndexError, "TensorArray.write: index 5 is out of range",
              ".write(5"),
             (mismatched_shape, ValueError, r"TensorArray.write: the value has shape \(3,\) "
              r"but the elements have shape \(2,\)", "3.0"),
             (wrong_dtype, TypeError, "TensorArray.write: the array holds float32, the value "
              "is int32", "sf.constant([1, 2])"),
             (unknown_shape, ValueError, "TensorArray.stack: the element shape is unknown",
              ".stack()")]
    for fn, error, words, marker in cases:
        for call in (fn, sf.function(fn)):
            with pytest.raises(error, match=words) as info:
                call()
            assert _line_of(fn, marker) in str(info.value)


@pytest.mark.parametrize("mode", STAGED)
def test_a_traced_index_out_of_range_fails_when_the_function_runs(mode):
    def f(i):
        ta = sf.TensorArray(sf.float32, size=3).unstack(sf.constant([1.0, 2.0, 3.0]))
        return ta.read(i)

    fn = staged(mode, f)
    assert float(fn(sf.constant(2))) == 3.0
    with pytest.raises(IndexError, match="out of range") as info:
        fn(sf.constant(7))
    assert _line_of(f, "ta.read(i)") in str(info.value)


def test_a_size_computed_from_arguments_is_refused_when_traced():
    @sf.function
    def f(n):
        return sf.TensorArray(sf.float32, size=n).size()

    with pytest.raises(ValueError, match="TensorArray: size must be known when the function "
                                         "is traced"):
        f(sf.constant(3))


# -- Python lists in loops over tensors ----------------------------------------------------


def test_a_list_grown_in_a_tensor_loop_names_the_append_and_tensor_array():
    def f(x, n):
        out = []
        for i in sf.range(n):
            out.append(x * sf.cast(i, sf.float32))
        return sf.stack(out)

    with pytest.raises(ValueError, match="'out' is a Python list grown in a loop over tensors"
                       ) as info:
        sf.function(f)(sf.constant(1.0), sf.constant(3))
    message = str(info.value)
    assert "sf.TensorArray" in message and "ta = ta.write(i, x)" in message
    assert "another function" not in message
    assert _line_of(f, "out.append") in message
    np.testing.assert_allclose(f(sf.constant(1.0), 3).numpy(), [0.0, 1.0, 2.0])  # eagerly


def test_a_list_rebound_in_a_tensor_while_loop_is_refused_too():
    def f(x):
        parts = [x]
        while sf.reduce_sum(x) < 10.0:
            x = x * 2.0
            parts = parts + [x]
        return parts

    with pytest.raises(ValueError, match="'parts' is a Python list grown") as info:
        sf.function(f)(sf.constant([1.0]))
    assert _line_of(f, "while") in str(info.value)


def test_a_write_not_assigned_back_in_a_tensor_loop_is_refused():
    """Eagerly `write` changes the array (TensorFlow's eager arrays), so forgetting to
    assign it works there; a staged loop would drop the writes, and says so instead."""
    def f(x, n):
        ta = sf.TensorArray(sf.float32, size=3)
        for i in sf.range(n):
            ta.write(i, x)
        return ta.stack()

    np.testing.assert_allclose(f(sf.constant(2.0), 3).numpy(), [2.0, 2.0, 2.0])
    with pytest.raises(ValueError, match="'ta' is written in a loop over tensors that does "
                                         "not assign it") as info:
        sf.function(f)(sf.constant(2.0), sf.constant(3))
    assert "ta = ta.write(i, x)" in str(info.value)
    assert _line_of(f, "ta.write(i, x)") in str(info.value)
