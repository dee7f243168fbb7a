"""`sf.map_fn`, `sf.scan`, `sf.foldl` and `sf.foldr` against NumPy loops (TensorFlow's
documented results), eagerly, interpreted and compiled; nests, `reverse`, initializers,
output signatures, empty and unknown-length elems; gradients against finite differences;
errors naming the op and the user's line."""

from __future__ import annotations

import functools
import inspect

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import numeric_gradient, shapes

import stageflow as sf

MODES = ["eager", "interpreted", "compiled"]
rng = np.random.default_rng(7)


def run(mode: str, fn, *args):
    """`fn(*args)` eagerly, or staged and interpreted, or staged and compiled."""
    if mode != "eager":
        fn = sf.function(fn, jit=mode == "compiled")
    return _numpy(fn(*args))


def _numpy(result):
    if isinstance(result, tuple | list):
        return type(result)(_numpy(r) for r in result)
    if isinstance(result, dict):
        return {k: _numpy(v) for k, v in result.items()}
    return np.asarray(result)


def numpy_scan(fn, xs, init=None, reverse=False):
    order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    out = [None] * len(xs)
    acc = init
    for i in order:
        acc = xs[i] if acc is None else fn(acc, xs[i])
        out[i] = acc
    return np.stack(out)


# -- values -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_all_four_match_numpy(mode):
    xs = rng.standard_normal((5, 3)).astype(np.float32)

    def f(x):
        return (sf.map_fn(lambda r: r * r + 1.0, x),
                sf.scan(lambda a, r: a * 0.5 + r, x),
                sf.scan(lambda a, r: a * 0.5 + r, x, reverse=True),
                sf.scan(lambda a, r: a + sf.reduce_sum(r), x, initializer=sf.constant(2.0)),
                sf.foldl(lambda a, r: a * 0.5 - r, x),
                sf.foldr(lambda a, r: a * 0.5 - r, x),
                sf.foldl(lambda a, r: a + sf.reduce_max(r), x, initializer=sf.constant(1.0)))

    got = run(mode, f, sf.constant(xs))
    half = lambda a, r: a * np.float32(0.5) + r  # noqa: E731
    minus = lambda a, r: a * np.float32(0.5) - r  # noqa: E731
    want = (xs * xs + 1,
            numpy_scan(half, xs),
            numpy_scan(half, xs, reverse=True),
            numpy_scan(lambda a, r: a + r.sum(), xs, np.float32(2.0)),
            numpy_scan(minus, xs)[-1],
            numpy_scan(minus, xs, reverse=True)[0],
            np.float32(1.0) + xs.max(axis=1).sum())
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_nested_elems_and_results_and_output_signature(mode):
    a = rng.standard_normal((4, 2)).astype(np.float32)
    b = np.arange(4, dtype=np.int32)

    def f(x, k):
        mapped = sf.map_fn(lambda e: {"sum": sf.reduce_sum(e[0]) + sf.cast(e[1], sf.float32),
                                      "index": e[1] * 2},
                           (x, k), fn_output_signature={"sum": sf.float32, "index": sf.int32})
        scanned = sf.scan(lambda acc, e: (acc[0] + e["x"], acc[1] * e["k"]),
                          {"x": x, "k": k + 1},
                          initializer=(sf.zeros((2,)), sf.constant(1)))
        return mapped, scanned

    (mapped, scanned) = run(mode, f, sf.constant(a), sf.constant(b))
    np.testing.assert_allclose(mapped["sum"], a.sum(axis=1) + b, rtol=1e-6)
    np.testing.assert_array_equal(mapped["index"], b * 2)
    assert mapped["index"].dtype == np.int32
    np.testing.assert_allclose(scanned[0], np.cumsum(a, axis=0), rtol=1e-6)
    np.testing.assert_array_equal(scanned[1], np.cumprod(b + 1))


@pytest.mark.parametrize("mode", MODES)
def test_dtype_changes_need_the_signature_and_get_it(mode):
    xs = np.array([0.4, 1.6, -2.2], np.float32)

    def f(x):
        return (sf.map_fn(lambda v: sf.cast(sf.round(v), sf.int64), x,
                          fn_output_signature=sf.int64),
                sf.map_fn(lambda v: v > 0, x, dtype=sf.bool),
                sf.map_fn(lambda v: sf.stack([v, v]), x,
                          fn_output_signature=sf.TensorSpec([2], sf.float32)))

    rounded, positive, pairs = run(mode, f, sf.constant(xs))
    np.testing.assert_array_equal(rounded, np.round(xs).astype(np.int64))
    assert rounded.dtype == np.int64
    np.testing.assert_array_equal(positive, xs > 0)
    np.testing.assert_array_equal(pairs, np.stack([xs, xs], axis=1))


@pytest.mark.parametrize("mode", MODES)
def test_empty_elems(mode):
    def f(x):
        return (sf.map_fn(lambda r: sf.concat([r, r], 0), x),
                sf.scan(lambda a, r: a + r, x, initializer=sf.zeros((3,))),
                sf.foldl(lambda a, r: a + r, x, initializer=sf.ones((3,))))

    mapped, scanned, folded = run(mode, f, sf.zeros((0, 3)))
    assert mapped.shape == (0, 6) and scanned.shape == (0, 3)
    np.testing.assert_array_equal(folded, np.ones(3, np.float32))


@pytest.mark.parametrize("mode", ["interpreted", "compiled"])
def test_unknown_number_of_elements(mode):
    """Under an input signature with an unknown first dim the results grow as written."""
    signature = [sf.TensorSpec([None, 2])]

    @functools.partial(sf.function, input_signature=signature, jit=mode == "compiled")
    def f(x):
        return sf.map_fn(lambda r: r * 3.0, x), sf.scan(lambda a, r: a + r, x)

    for rows in (1, 4):
        xs = rng.standard_normal((rows, 2)).astype(np.float32)
        mapped, scanned = f(sf.constant(xs))
        np.testing.assert_allclose(mapped.numpy(), xs * 3, rtol=1e-6)
        np.testing.assert_allclose(scanned.numpy(), np.cumsum(xs, axis=0), rtol=1e-5)
    assert f.tracing_count == 1


@given(shape=shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), reverse=st.booleans(),
       staged=st.booleans())
def test_scan_and_map_match_numpy_for_any_shape(shape, reverse, staged):
    xs = np.random.default_rng(sum(shape)).standard_normal(shape)

    def f(x):
        return (sf.scan(lambda a, r: a * 0.9 + sf.sin(r), x, reverse=reverse),
                sf.map_fn(lambda r: sf.reduce_sum(r * r), x, fn_output_signature=sf.float64))

    scanned, mapped = run("interpreted" if staged else "eager", f, sf.constant(xs))
    np.testing.assert_allclose(scanned, numpy_scan(lambda a, r: a * 0.9 + np.sin(r), xs,
                                                   reverse=reverse), rtol=1e-12)
    np.testing.assert_allclose(mapped, (xs * xs).reshape(shape[0], -1).sum(axis=1), rtol=1e-12)


def test_back_prop_false_stops_gradients():
    x = sf.constant([1.0, 2.0])
    with sf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        kept = sf.reduce_sum(sf.map_fn(lambda v: v * v, x))
        stopped = sf.reduce_sum(sf.map_fn(lambda v: v * v, x, back_prop=False))
    np.testing.assert_allclose(tape.gradient(kept, x).numpy(), [2.0, 4.0])
    assert tape.gradient(stopped, x) is None


def test_staged_loop_holds_fn_once():
    f = sf.function(lambda x: sf.map_fn(lambda r: sf.tanh(r) * 2.0, x))
    text = f.get_concrete_function(sf.zeros((50, 3))).ir()
    assert text.count("sf.tanh") == 1 and "sf.while" in text


# -- gradients ------------------------------------------------------------------------------


def chain(x, w):
    """All four ops on one path: the loss depends on `x` through every one of them."""
    mapped = sf.map_fn(lambda r: sf.sin(r) * w, x)
    scanned = sf.scan(lambda a, r: a * w + r * r, mapped, reverse=True)
    folded = sf.foldl(lambda a, r: a * 0.5 + sf.tanh(r), scanned,
                      initializer=sf.zeros_like(x[0]))
    return sf.reduce_sum(folded) + sf.reduce_sum(sf.foldr(lambda a, r: a * r, x))


@pytest.mark.parametrize("tape_inside", [False, True], ids=["tape_outside", "tape_inside"])
@pytest.mark.parametrize("mode", MODES)
def test_gradients_match_finite_differences(mode, tape_inside):
    x0 = rng.standard_normal((4, 2))
    w0 = np.float64(0.7)

    def grads(x, w):
        with sf.GradientTape() as tape:
            tape.watch([x, w])
            y = chain(x, w)
        return tape.gradient(y, [x, w])

    if tape_inside:
        gx, gw = run(mode, grads, sf.constant(x0), sf.constant(w0))
    else:
        fn = chain if mode == "eager" else sf.function(chain, jit=mode == "compiled")
        x, w = sf.constant(x0), sf.constant(w0)
        with sf.GradientTape() as tape:
            tape.watch([x, w])
            y = fn(x, w)
        gx, gw = (g.numpy() for g in tape.gradient(y, [x, w]))
    want_x = numeric_gradient(lambda v: float(chain(sf.constant(v), sf.constant(w0))), x0)
    want_w = numeric_gradient(lambda v: float(chain(sf.constant(x0), sf.constant(v))),
                              np.array(w0))
    np.testing.assert_allclose(gx, want_x, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gw, want_w, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("mode", ["interpreted", "compiled"])
def test_gradients_with_an_unknown_number_of_elements(mode):
    @functools.partial(sf.function, input_signature=[sf.TensorSpec([None, 2], sf.float64)],
                       jit=mode == "compiled")
    def grads(x):
        with sf.GradientTape() as tape:
            tape.watch(x)
            y = sf.reduce_sum(sf.scan(lambda a, r: a * sf.sin(r), sf.map_fn(sf.exp, x)))
        return tape.gradient(y, x)

    def value(v):
        return float(sf.reduce_sum(sf.scan(lambda a, r: a * sf.sin(r), sf.map_fn(sf.exp, v))))

    for rows in (1, 3):
        x0 = rng.standard_normal((rows, 2))
        np.testing.assert_allclose(grads(sf.constant(x0)).numpy(),
                                   numeric_gradient(value, x0), rtol=1e-6, atol=1e-9)


def test_the_backward_saves_no_copy_of_the_results_per_iteration():
    """The loop writes one row of its results per iteration; the backward pass, which runs
    the loop again saving what the gradients need, must not save the whole results at each
    iteration (a [16, 16, 8] stack: memory quadratic in the number of elements)."""
    @sf.function
    def grads(x):
        with sf.GradientTape() as tape:
            tape.watch(x)
            y = sf.reduce_sum(sf.map_fn(sf.sin, x))
        return tape.gradient(y, x)

    x0 = rng.standard_normal((16, 8)).astype(np.float32)
    assert "16x16x8" not in grads.get_concrete_function(sf.constant(x0)).ir("traced")
    np.testing.assert_allclose(grads(sf.constant(x0)).numpy(), np.cos(x0), rtol=1e-6)


# -- errors ---------------------------------------------------------------------------------


def _line(fn) -> str:
    """`file:line` of the last line of `fn`'s source (where the failing call stands)."""
    lines, first = inspect.getsourcelines(fn)
    return f"{inspect.getsourcefile(fn)}:{first + len(lines) - 1}"


@pytest.mark.parametrize("staged", [False, True], ids=["eager", "staged"])
def test_a_result_that_differs_from_the_signature_is_refused(staged):
    def structure(x):
        return sf.map_fn(lambda v: (v, v), x)

    def dtype(x):
        return sf.map_fn(lambda v: sf.cast(v, sf.int32), x)

    for fn, error, words in ((structure, TypeError, "structure differs"),
                             (dtype, TypeError, "result 0 of fn is int32")):
        call = sf.function(fn) if staged else fn
        with pytest.raises(error, match=words) as info:
            call(sf.constant([1.0, 2.0]))
        assert "map_fn" in str(info.value) and "fn_output_signature" in str(info.value)
        assert _line(fn) in str(info.value)


def test_elems_errors_name_the_op():
    with pytest.raises(ValueError, match="map_fn: the tensors of elems must have the same "
                                         "first dim"):
        sf.map_fn(lambda e: e[0], (sf.zeros((2,)), sf.zeros((3,))))
    with pytest.raises(ValueError, match="scan: elems must be tensors with a first dim"):
        sf.scan(lambda a, x: a + x, sf.constant(1.0))
    with pytest.raises(ValueError, match="foldl: elems is empty and there is no initializer"):
        sf.foldl(lambda a, x: a + x, sf.zeros((0, 2)))
