"""`sf.cond`, `sf.switch_case`, `sf.while_loop`, `sf.fori_loop`: the same results eagerly,
interpreted and compiled; one trace whatever the predicate; effects of the taken branch
only; a loop's body traced once; clear errors."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf

MODES = ["eager", "interpreted", "compiled"]


def run(mode: str, fn, *args):
    """`fn(*args)` eagerly or as a staged function (interpreted or compiled)."""
    if mode == "eager":
        return fn(*args)
    return sf.function(fn, jit=mode == "compiled")(*args)


def values(result):
    leaves = result if isinstance(result, list | tuple) else [result]
    return [np.asarray(leaf) for leaf in leaves]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("p", [2.0, -2.0])
def test_cond_picks_the_branch(mode, p):
    x = sf.constant(np.arange(4, dtype=np.float32))

    def f(x, p):
        return sf.cond(p > 0, lambda: (sf.exp(x), {"s": sf.reduce_sum(x)}),
                       lambda: (x * 2.0, {"s": sf.constant(1.0)}))

    y, d = run(mode, f, x, sf.constant(p))
    want = np.exp(x.numpy()) if p > 0 else x.numpy() * 2
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
    assert float(d["s"]) == (6.0 if p > 0 else 1.0)


def test_predicate_value_never_retraces_and_branches_are_regions():
    @sf.function
    def f(x, p):
        return sf.cond(p, lambda: x + 1.0, lambda: x - 1.0)

    x = sf.constant([1.0])
    assert float(f(x, sf.constant(True))[0]) == 2.0
    assert float(f(x, sf.constant(False))[0]) == 0.0
    assert f.tracing_count == 1
    text = f.get_concrete_function(x, sf.constant(True)).ir()
    assert text.count("sf.cond") == 1 and text.count("sf.yield") == 2


def test_branches_of_different_dims_give_an_unknown_dim():
    @sf.function
    def f(x, p):
        return sf.cond(p, lambda: x, lambda: sf.concat([x, x], 0))

    x = sf.constant([1.0, 2.0])
    assert f(x, sf.constant(True)).shape == (2,)
    assert f(x, sf.constant(False)).shape == (4,)
    assert "-> tensor<?xf32>" in f.get_concrete_function(x, sf.constant(True)).ir()


def test_branch_structure_mismatch_names_cond_both_structures_and_the_line():
    @sf.function
    def f(x, p):
        return sf.cond(p, lambda: (x, x), lambda: x)

    with pytest.raises(TypeError, match=r"(?s)cond: true_fn returns \(float32\[2\], float32\[2\]\) "
                                        r"but false_fn returns float32\[2\].*test_control_flow"):
        f(sf.constant([1.0, 2.0]), sf.constant(True))

    @sf.function
    def g(x, p):
        return sf.cond(p, lambda: x, lambda: sf.cast(x, sf.int32))

    with pytest.raises(TypeError, match="cond: true_fn returns float32"):
        g(sf.constant([1.0, 2.0]), sf.constant(True))


@pytest.mark.parametrize("mode", MODES)
def test_only_the_taken_branch_has_effects(mode, capsys):
    v = sf.Variable(0.0)

    def f(p):
        def yes():
            v.assign_add(1.0)
            sf.print("yes")
            return v.read_value() * 10.0  # reads the value the branch just wrote

        def no():
            sf.print("no")
            return v.read_value()

        return sf.cond(p, yes, no)

    staged = f if mode == "eager" else sf.function(f, jit=mode == "compiled")
    assert float(staged(sf.constant(True))) == 10.0
    assert float(staged(sf.constant(False))) == 1.0
    assert float(staged(sf.constant(True))) == 20.0
    assert v.numpy() == 2.0
    assert capsys.readouterr().out.split() == ["yes", "no", "yes"]


@pytest.mark.parametrize("mode", MODES)
def test_switch_case_with_default_and_out_of_range(mode):
    def f(i):
        return sf.switch_case(i, {0: lambda: sf.constant(10.0), 1: lambda: sf.constant(11.0)},
                              default=lambda: sf.constant(-1.0))

    got = [float(run(mode, f, sf.constant(i))) for i in (0, 1, 2, -3)]
    assert got == [10.0, 11.0, -1.0, -1.0]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [0, 1, 7])
def test_while_loop_trip_count_from_a_tensor(mode, n):
    def f(n):
        return sf.while_loop(lambda i, s: i < n,
                             lambda i, s: (i + 1, s + sf.cast(i, sf.float32)), (0, 0.0))

    i, s = run(mode, f, sf.constant(n))
    assert int(i) == n and float(s) == sum(range(n))


def test_a_loop_body_is_traced_once_whatever_the_trip_count():
    @sf.function
    def f(x, n):
        return sf.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, sf.tanh(x) * 2.0),
                             (0, x))[1]

    x = sf.constant([0.5])
    for n in (1, 10, 100):
        want = 0.5
        for _ in range(n):
            want = np.tanh(want) * 2.0
        np.testing.assert_allclose(f(x, sf.constant(n)).numpy(), [want], rtol=1e-5)
    assert f.tracing_count == 1
    assert f.get_concrete_function(x, sf.constant(1)).ir().count("sf.tanh") == 1


@pytest.mark.parametrize("mode", MODES)
def test_loop_variable_dims_are_relaxed(mode):
    def f(n):
        return sf.while_loop(lambda i, x: i < n,
                             lambda i, x: (i + 1, sf.concat([x, x + 1.0], 0)),
                             (0, sf.zeros([1])))[1]

    got = run(mode, f, sf.constant(3)).numpy()
    np.testing.assert_array_equal(got, [0, 1, 1, 2, 1, 2, 2, 3])


@pytest.mark.parametrize("mode", MODES)
def test_maximum_iterations_and_nests(mode):
    def f(x):
        state = {"x": x, "k": sf.constant(0)}
        out = sf.while_loop(lambda s: sf.reduce_sum(s["x"]) < 1e9,
                            lambda s: {"x": s["x"] * 2.0, "k": s["k"] + 1}, [state],
                            maximum_iterations=5)
        return out[0]["x"], out[0]["k"]

    x, k = run(mode, f, sf.constant([1.0, 2.0]))
    np.testing.assert_array_equal(x.numpy(), [32.0, 64.0])
    assert int(k) == 5


@pytest.mark.parametrize("mode", MODES)
def test_nested_loops_and_conditions(mode):
    def f(n):
        def outer(i, total):
            def inner(j, t):
                return j + 1, sf.cond(j % 2 == 0, lambda: t + 1.0, lambda: t)
            _, total = sf.while_loop(lambda j, t: j < i, inner, (0, total))
            return i + 1, total

        return sf.while_loop(lambda i, t: i < n, outer, (0, 0.0))[1]

    want = sum((i + 1) // 2 for i in range(6))
    assert float(run(mode, f, sf.constant(6))) == want


@pytest.mark.parametrize("mode", MODES)
def test_fori_loop_and_print_once_per_iteration(mode, capsys):
    def f(x):
        def body(i, acc):
            sf.print("step", i)
            return acc + x * sf.cast(i, sf.float32)
        return sf.fori_loop(0, 3, body, sf.zeros_like(x))

    np.testing.assert_array_equal(run(mode, f, sf.constant([1.0, 2.0])).numpy(), [3.0, 6.0])
    assert capsys.readouterr().out.splitlines() == ["step 0", "step 1", "step 2"]


def test_loop_body_errors_are_clear():
    @sf.function
    def wrong_dtype(x):
        return sf.while_loop(lambda x: sf.reduce_sum(x) < 10.0, lambda x: (sf.cast(x, sf.int32),),
                             (x,))

    with pytest.raises(TypeError, match="loop variable 0 enters as float32.*int32"):
        wrong_dtype(sf.constant([1.0]))

    @sf.function
    def wrong_structure(x):
        return sf.while_loop(lambda x, y: sf.reduce_sum(x) < 10.0, lambda x, y: (x,), (x, x))

    with pytest.raises(TypeError, match=r"body returns \(float32\[1\],\) but loop_vars"):
        wrong_structure(sf.constant([1.0]))


def test_variables_cannot_be_created_in_a_branch():
    @sf.function
    def f(p):
        return sf.cond(p, lambda: sf.Variable(1.0).read_value(), lambda: sf.constant(0.0))

    with pytest.raises(ValueError, match="cannot be created inside a control-flow branch"):
        f(sf.constant(True))


@pytest.mark.parametrize("mode", MODES)
def test_random_draws_only_in_the_taken_branch(mode):
    def f(p, g):
        return sf.cond(p, lambda: g.normal([2]), lambda: sf.zeros([2]))

    g = sf.random.Generator.from_seed(3)
    staged = (lambda p: f(p, g)) if mode == "eager" else sf.function(
        lambda p: f(p, g), jit=mode == "compiled")
    staged(sf.constant(False))
    first = staged(sf.constant(True)).numpy()
    reference = sf.random.Generator.from_seed(3).normal([2]).numpy()
    np.testing.assert_allclose(first, reference)


@pytest.mark.parametrize("mode", MODES)
def test_tensor_indexing_inside_a_loop(mode):
    def f(xs, n):
        return sf.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + xs[i]),
                             (0, sf.zeros([2])))[1]

    xs = sf.constant(np.arange(8, dtype=np.float32).reshape(4, 2))
    np.testing.assert_array_equal(run(mode, f, xs, sf.constant(3)).numpy(), [6.0, 9.0])
