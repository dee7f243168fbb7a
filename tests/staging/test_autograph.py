"""AutoGraph: Python `if`, `while` and `for` on tensors inside `sf.function` become region
ops, traced once and equal to running the same Python eagerly; Python-valued conditions
trace exactly what they traced unconverted; errors point at the user's lines."""

from __future__ import annotations

import traceback

import numpy as np
import pytest

import stageflow as sf
from stageflow.staging.autograph import AutographWarning

MODES = [True, False]  # compiled, interpreted


def newton_sqrt(a):
    x = a
    while sf.abs(x * x - a) > 1e-6 * a:
        x = 0.5 * (x + a / x)
    return x


def piecewise(x):
    if x > 1.0:
        y = x * x
    elif x < -1.0:
        y = -x
    else:
        y = sf.constant(0.5) * x
    return y + 1.0


def first_sum_over(xs, n, limit):
    total = sf.constant(0.0)
    for i in sf.range(n):
        total += xs[i]
        if total > limit:
            break
    return total


def odd_rows(m):
    total = sf.zeros_like(m[0])
    count = 0
    for row in m:
        count += 1
        if count % 2 == 0:
            continue
        total = total + row
    return total


@pytest.mark.parametrize("jit", MODES)
def test_newton_while_traced_once(jit):
    f = sf.function(newton_sqrt, jit=jit)
    for value in (2.0, 9.0, 1e4, 0.25):
        got = float(f(sf.constant(value)))
        assert got == pytest.approx(float(newton_sqrt(sf.constant(value))), rel=1e-6)
        assert got == pytest.approx(np.sqrt(value), rel=1e-5)
    assert f.tracing_count == 1
    text = f.get_concrete_function(sf.constant(2.0)).ir()
    assert text.count("sf.while") == 1


@pytest.mark.parametrize("jit", MODES)
def test_if_elif_else_on_a_tensor(jit):
    f = sf.function(piecewise, jit=jit)
    for value in (3.0, -3.0, 0.5):
        assert float(f(sf.constant(value))) == pytest.approx(
            float(piecewise(sf.constant(value))))
    assert f.tracing_count == 1
    assert f.get_concrete_function(sf.constant(1.0)).ir().count("sf.cond") == 2


@pytest.mark.parametrize("jit", MODES)
def test_for_over_a_range_with_break(jit):
    f = sf.function(first_sum_over, jit=jit)
    xs = sf.constant([1.0, 2.0, 3.0, 4.0, 5.0])
    for n, limit, want in ((5, 4.0, 6.0), (2, 4.0, 3.0), (5, 100.0, 15.0), (0, 1.0, 0.0)):
        assert float(f(xs, sf.constant(n), sf.constant(limit))) == want
        assert float(first_sum_over(xs, sf.constant(n), sf.constant(limit))) == want
    assert f.tracing_count == 1


@pytest.mark.parametrize("jit", MODES)
def test_for_over_tensor_rows_with_continue(jit):
    m = sf.constant(np.arange(12, dtype=np.float32).reshape(4, 3))
    want = odd_rows(m).numpy()
    np.testing.assert_array_equal(sf.function(odd_rows, jit=jit)(m).numpy(), want)
    np.testing.assert_array_equal(want, m.numpy()[0] + m.numpy()[2])


def test_and_or_not_keep_python_short_circuits():
    calls = []

    def expensive():
        calls.append(1)
        return True

    @sf.function
    def f(x, flag):
        if flag and expensive():
            x = x + 1.0
        if not (x > 2.0) or x < 0.0:
            x = x * 10.0
        return x

    assert float(f(sf.constant(1.0), False)) == 10.0
    assert calls == []
    assert float(f(sf.constant(1.0), True)) == 20.0
    assert float(f(sf.constant(5.0), True)) == 6.0
    assert len(calls) == 1  # one trace with flag=True


def test_python_conditions_trace_the_same_graphs():
    def layer(x, training):
        if training:
            x = x * 0.5
        for _ in range(3):
            x = sf.tanh(x)
        n = 0
        while n < 2:
            x = x + 1.0
            n += 1
        return x

    x = sf.constant([1.0, 2.0])
    converted = sf.function(layer)
    plain = sf.function(layer, autograph=False)
    for training in (True, False):
        for stage in ("traced", "optimized"):
            assert (converted.get_concrete_function(x, training).ir(stage)
                    == plain.get_concrete_function(x, training).ir(stage))
    assert converted.tracing_count == plain.tracing_count == 2


def test_helper_functions_are_converted_library_ones_are_not():
    def clip_positive(v):
        if v < 0.0:
            v = v * 0.0
        return v

    @sf.function
    def f(x):
        return clip_positive(sf.reduce_sum(x)) + np.float32(1.0)

    assert float(f(sf.constant([-1.0, -2.0]))) == 1.0
    assert float(f(sf.constant([1.0, 2.0]))) == 4.0


def test_gradients_through_converted_code_match_finite_differences():
    @sf.function
    def loss(x):
        y = x
        steps = sf.constant(0)
        while sf.reduce_sum(y * y) < 10.0:
            y = y * 1.5
            steps += 1
        if sf.reduce_sum(y) > 0:
            z = sf.reduce_sum(sf.sin(y))
        else:
            z = sf.reduce_sum(y * y)
        return z

    x0 = np.array([0.3, 0.4])
    x = sf.constant(x0)
    with sf.GradientTape() as tape:
        tape.watch(x)
        value = loss(x)
    grad = tape.gradient(value, x).numpy()
    eps = 1e-6
    numeric = np.array([(float(loss(sf.constant(x0 + eps * e))) -
                         float(loss(sf.constant(x0 - eps * e)))) / (2 * eps)
                        for e in np.eye(2)])
    np.testing.assert_allclose(grad, numeric, rtol=1e-5)


def test_errors_point_at_the_original_lines():
    @sf.function
    def broken(x):
        if sf.reduce_sum(x) > 0:
            y = x + sf.constant([1.0, 2.0, 3.0])  # the shape error's line
        else:
            y = x
        return y

    with pytest.raises(ValueError) as caught:
        broken(sf.constant([1.0, 2.0]))
    frames = traceback.extract_tb(caught.value.__traceback__)
    assert any(f.filename == __file__ and "the shape error's line" in (f.line or "")
               for f in frames)
    assert "test_autograph.py" in str(caught.value)


def test_one_branch_assignments_need_a_definition_before():
    @sf.function
    def f(x):
        if sf.reduce_sum(x) > 0:
            y = x
        return y

    with pytest.raises(ValueError, match="'y' is assigned in only one branch"):
        f(sf.constant([1.0]))


def test_print_runs_as_it_traces_and_assert_when_the_graph_runs(capsys):
    """Python's ``print`` is a side effect of tracing (TensorFlow's too: it shows the
    traced tensor once); `sf.print` prints values at every call; ``assert`` on a tensor
    checks at every call."""
    @sf.function
    def f(x):
        print("traced with", x)
        sf.print("x is", x)
        assert sf.reduce_sum(x) > 0, "needs a positive sum"
        return x * 2.0

    f(sf.constant([1.0, 2.0]))
    f(sf.constant([3.0, 4.0]))
    out = capsys.readouterr().out
    assert out.count("traced with") == 1 and "(traced)" in out
    assert "x is [1. 2.]" in out and "x is [3. 4.]" in out
    with pytest.raises(AssertionError, match="needs a positive sum"):
        f(sf.constant([-1.0, -2.0]))


def test_converted_source_and_turning_it_off():
    f = sf.function(piecewise)
    source = f.converted_source()
    assert "ag__.if_stmt" in source and "def piecewise" in source
    with pytest.raises(ValueError, match="no converted source"):
        sf.function(piecewise, autograph=False).converted_source()

    plain = sf.function(piecewise, autograph=False)
    with pytest.raises(sf.errors.StagingError, match="sf.cond"):
        plain(sf.constant(2.0))


def test_functions_without_source_are_traced_with_a_notice():
    namespace: dict = {}
    exec("def double(x):\n    return x * 2.0\n", namespace)  # noqa: S102 - no source file
    f = sf.function(namespace["double"])
    with pytest.warns(AutographWarning, match="double is traced without AutoGraph"):
        assert float(f(sf.constant(2.0))) == 4.0


def early_returns(x):
    if x > 1.0:
        return x * 2.0
    elif x < -1.0:
        doubled = -x
        return doubled
    return x + 100.0


@pytest.mark.parametrize("jit", MODES)
def test_returns_inside_branches(jit):
    f = sf.function(early_returns, jit=jit)
    for value, want in ((3.0, 6.0), (-3.0, 3.0), (0.0, 100.0)):
        assert float(f(sf.constant(value))) == want
        assert float(early_returns(sf.constant(value))) == want
    assert f.tracing_count == 1


def collatz_steps(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
        if steps >= 100:
            break
    return steps


@pytest.mark.parametrize("jit", MODES)
def test_while_with_nested_if_and_break(jit):
    f = sf.function(collatz_steps, jit=jit)
    for start, want in ((1, 0), (6, 8), (27, 100)):
        assert int(f(sf.constant(start))) == want == collatz_steps(start)
    assert f.tracing_count == 1


def triangle(n):
    total = sf.constant(0)
    for i in sf.range(n):
        for j in sf.range(i):
            if (i + j) % 3 == 0:
                continue
            total += 1
    return total


@pytest.mark.parametrize("jit", MODES)
def test_nested_loops_with_continue(jit):
    f = sf.function(triangle, jit=jit)
    for n in (0, 4, 7):
        want = sum(1 for i in range(n) for j in range(i) if (i + j) % 3)
        assert int(f(sf.constant(n))) == want
    assert f.tracing_count == 1


def find_first(xs, n, target):
    for i in sf.range(n):
        if xs[i] > target:
            return xs[i] * 10.0
    return sf.constant(-1.0)


@pytest.mark.parametrize("jit", MODES)
def test_returns_inside_loops(jit):
    f = sf.function(find_first, jit=jit)
    xs = sf.constant([1.0, 5.0, 3.0, 8.0])
    for target, want in ((2.0, 50.0), (6.0, 80.0), (9.0, -1.0)):
        assert float(f(xs, sf.constant(4), sf.constant(target))) == want
        assert float(find_first(xs, sf.constant(4), sf.constant(target))) == want
    assert f.tracing_count == 1


def test_a_value_first_computed_in_a_loop_is_used_after_it():
    @sf.function
    def last_and_positive(xs, n):
        last = sf.constant(0.0)
        i = 0
        while i < n:
            v = xs[i]
            if v > 0:
                last = v
            i += 1
        return last, v

    last, v = last_and_positive(sf.constant([1.0, -2.0, 3.0, -4.0]), sf.constant(4))
    assert (float(last), float(v)) == (3.0, -4.0)


def test_attributes_assigned_in_branches_and_loops():
    class Accumulator(sf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.step = 0.5

        @sf.function
        def __call__(self, x):
            if sf.reduce_sum(x) > 0:
                self.direction = x
            else:
                self.direction = -x
            while sf.reduce_max(x) < 4.0:
                x = x + self.direction * self.step
            return x

    accumulator = Accumulator()
    np.testing.assert_allclose(accumulator(sf.constant([1.0, 2.0])).numpy(), [2.0, 4.0])
    np.testing.assert_allclose(accumulator(sf.constant([-1.0, -2.0])).numpy(), [2.0, 4.0])
    assert Accumulator.__call__.tracing_count <= 2


def test_an_attribute_set_on_one_path_only_stays_unset():
    class Flags:
        pass

    @sf.function
    def mark(flags, x):
        if x:  # a Python value: Python semantics, nothing assigned on the false path
            flags.seen = True
        return sf.constant(1.0)

    flags = Flags()
    mark(flags, False)
    assert not hasattr(flags, "seen")
    mark(flags, True)
    assert flags.seen is True


@sf.function
def power_of(x, n):
    """Calls itself by its global name (a function defined in a test would by a closure
    cell): the converted function once bound that name in a cell of its own (KeyError)."""
    if n == 0:
        return sf.ones_like(x)
    return x * power_of(x, n - 1)


@pytest.mark.parametrize("autograph", [True, False])
@pytest.mark.parametrize("jit", [True, False])
def test_a_function_calling_itself_on_python_values(jit, autograph):
    """A recursion the arguments' Python values end traces one function per depth, with
    AutoGraph as without, by a global name or an enclosing one."""
    @sf.function(jit=jit, autograph=autograph)
    def power(x, n):
        if n == 0:
            return sf.ones_like(x)
        return x * power(x, n - 1)

    for f in (power, sf.function(power_of.python_function, jit=jit, autograph=autograph)):
        np.testing.assert_allclose(f(sf.constant([2.0, 3.0]), 3).numpy(), [8.0, 27.0])
    if autograph:
        assert power_of.converted_source().startswith("def power_of(x, n):")


def test_a_function_calling_itself_on_tensors_names_the_recursion():
    """A recursion on tensor values has no end a trace can reach: a clear error naming the
    function and the user's line, not Python's recursion limit."""
    @sf.function
    def countdown(n):
        if n <= 0:
            return n
        return countdown(n - 1)

    with pytest.raises(RecursionError, match=r"countdown calls itself with the arguments it "
                       r"is being traced for(.|\n)*sf.while_loop(.|\n)*return countdown"):
        countdown(sf.constant(3.0))
