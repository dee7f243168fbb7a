"""sf.function: the trace cache, closures, variables, composition and staging errors."""

from __future__ import annotations

import collections
import re
import sys
import warnings

import numpy as np
import pytest

import stageflow as sf
from stageflow.staging import function as function_module


def test_select_listing_staged():
    @sf.function
    def select(vector):
        A = sf.constant([[1.0, 0.0]])
        return sf.matmul(A, vector)

    x = sf.constant([[2.0], [-2.0]])
    assert repr(select(x)) == "sf.Tensor([[2.]], shape=(1, 1), dtype=float32)"


def test_cache_hit_does_not_rerun_python():
    calls = []

    @sf.function
    def f(x):
        calls.append(1)
        return x * 2.0 + 1.0

    x = sf.constant([1.0, 2.0])
    for _ in range(3):
        np.testing.assert_allclose(f(x).numpy(), [3.0, 5.0])
    assert len(calls) == 1 and f.tracing_count == 1
    f(sf.constant([1.0, 2.0, 3.0]))
    f(sf.constant([1.0, 2.0], dtype=sf.float64))
    assert f.tracing_count == 3
    assert f.python_function(x).numpy().tolist() == [3.0, 5.0]


def test_python_values_are_part_of_the_key():
    """Listing 6: one graph function with dropout, one without."""

    @sf.function
    def lossy_matmul(W, x, training=True):
        outputs = sf.matmul(W, x)
        if training:
            outputs = sf.nn.dropout(outputs, 0.2)
        return outputs

    W = sf.random.normal((3, 5))
    x = sf.random.normal((5, 1))
    lossy_matmul(W, x, training=True)
    exact = lossy_matmul(W, x, training=False)
    assert lossy_matmul.tracing_count == 2
    # atol: the random inputs (whatever state the process's generator is in) can cancel
    np.testing.assert_allclose(exact.numpy(), W.numpy() @ x.numpy(), rtol=1e-5, atol=1e-6)
    lossy_matmul(W, x, False)  # positional or keyword: the same signature
    assert lossy_matmul.tracing_count == 2


def test_add_noise_numpy_is_baked_in_sf_random_is_fresh():
    @sf.function
    def add_noise():
        return sf.eye(5) + np.random.randn(5, 5).astype(np.float32)

    @sf.function
    def add_sf_noise():
        return sf.eye(5) + sf.random.normal((5, 5))

    assert np.array_equal(add_noise().numpy(), add_noise().numpy())
    assert not np.array_equal(add_sf_noise().numpy(), add_sf_noise().numpy())


def test_staged_random_matches_eager_stream():
    @sf.function
    def draw():
        return sf.random.uniform((4,))

    sf.random.set_seed(7)
    eager = [sf.random.uniform((4,)).numpy() for _ in range(3)]
    sf.random.set_seed(7)
    staged = [draw().numpy() for _ in range(3)]
    assert np.array_equal(eager, staged)


def test_variables_captured_by_reference_listing_7():
    v = sf.Variable(0.0)

    @sf.function
    def mutate():
        v.assign_add(1.0)
        return v.read_value()

    mutate()
    assert float(v.read_value()) == 1.0
    v.assign_add(1.0)
    assert float(v.read_value()) == 2.0
    mutate()
    assert float(v.read_value()) == 3.0


def test_tensors_captured_by_value():
    c = sf.constant([1.0, 2.0])

    @sf.function
    def f(x):
        return x + c

    f(sf.constant([0.0, 0.0]))
    c = sf.constant([10.0, 20.0])  # rebinding the name does not change the graph
    assert f(sf.constant([0.0, 0.0])).numpy().tolist() == [1.0, 2.0]
    assert len(f.get_concrete_function(sf.TensorSpec([2])).graph.captures) == 1


def test_composition_emits_a_call_listing_8():
    @sf.function
    def inner(a):
        return sf.nn.relu(a)

    @sf.function
    def outer(a, b):
        return inner(sf.matmul(a, b))

    result = outer(sf.eye(3), sf.diag([-1.0, 1.0, 2.0]))
    np.testing.assert_allclose(result.numpy(), np.diag([0.0, 1.0, 2.0]))
    graph = outer.get_concrete_function(sf.eye(3), sf.eye(3)).graph
    names = [eq.primitive.name for eq in graph.equations]
    assert names == ["matmul", "call"]
    assert graph.equations[1].params["callee"].name == "inner"


def test_state_creation_rule():
    class Net:
        def __init__(self):
            self.v = None

        @sf.function
        def __call__(self, x):
            if self.v is None:
                self.v = sf.Variable(sf.ones((2,)) * 3.0)
            return x * self.v

    net = Net()
    x = sf.constant([1.0, 2.0])
    assert net(x).numpy().tolist() == [3.0, 6.0]
    assert net(x).numpy().tolist() == [3.0, 6.0]
    assert Net.__call__.__get__(net).tracing_count == 2  # traced once more after creation
    other = Net()  # a new instance has its own first call
    assert other(x).numpy().tolist() == [3.0, 6.0]

    @sf.function
    def creates_every_time(x):
        return x + sf.Variable(1.0)

    # The first trace may create variables; the trace that follows it may not.
    with pytest.raises(ValueError, match="created on a call other than the first") as info:
        creates_every_time(sf.constant(1.0))
    assert "test_function.py" in str(info.value)


def test_variable_initial_value_from_arguments_is_an_error():
    @sf.function
    def f(x):
        return sf.Variable(x * 2.0)

    with pytest.raises(ValueError, match="depends on the function's arguments"):
        f(sf.constant(1.0))


def test_input_signature_with_unknown_dims():
    @sf.function(input_signature=[sf.TensorSpec([None, 2])])
    def row_sums(x):
        return sf.reduce_sum(x, axis=1)

    for batch in (1, 3, 7):
        np.testing.assert_allclose(row_sums(np.ones((batch, 2), np.float32)).numpy(),
                                   np.full(batch, 2.0))
    assert row_sums.tracing_count == 1
    with pytest.raises(ValueError, match=r"x has shape \(3, 3\).*\(\?, 2\)"):
        row_sums(sf.ones((3, 3)))
    with pytest.raises(TypeError, match="x has dtype float64"):
        row_sums(sf.ones((3, 2), dtype=sf.float64))
    cf = row_sums.get_concrete_function()
    assert cf.inputs[0].shape == (None, 2)
    assert cf.outputs[0].shape == (None,)


def test_input_signature_of_unknown_rank_takes_every_rank_one_trace_per_rank():
    """TensorFlow's ``input_signature=[tf.TensorSpec(shape=None)]``: any shape is accepted.
    The IR has ranked types, so each rank is traced once, its dims all unknown."""
    @sf.function(input_signature=[sf.TensorSpec(shape=None, dtype=sf.float32)])
    def total(x):
        return sf.reduce_sum(x * 2.0), sf.shape(x)

    for shape in [(2, 3), (4, 5), (3,), (), (1, 2, 3), (6,)]:
        value = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        got, dims = total(value)
        np.testing.assert_allclose(got.numpy(), value.sum() * 2.0)
        assert dims.numpy().tolist() == list(shape)
    assert total.experimental_get_tracing_count() == 4  # ranks 2, 1, 0 and 3
    assert total.get_concrete_function(sf.TensorSpec([None, None])).inputs[0].shape == (
        None, None)
    assert total.experimental_get_tracing_count() == 4
    assert total.get_concrete_function(sf.ones((2, 2, 2, 2))).inputs[0].shape == (None,) * 4
    with pytest.raises(TypeError, match="x has dtype int32, the signature expects float32"):
        total(sf.ones((2,), sf.int32))
    with pytest.raises(ValueError, match="'x' is TensorSpec.shape=<unknown>.*one function per "
                                         "rank"):
        total.get_concrete_function()


def test_input_signature_mixing_unknown_rank_and_ranked_specs():
    @sf.function(input_signature=[sf.TensorSpec([None]), sf.TensorSpec(None)])
    def scaled(weights, x):
        return x * sf.reduce_sum(weights)

    np.testing.assert_allclose(scaled(sf.ones((3,)), sf.ones((2, 2))).numpy(), np.full((2, 2), 3))
    np.testing.assert_allclose(scaled(sf.ones((2,)), sf.constant(1.5)).numpy(), 3.0)
    with pytest.raises(ValueError, match=r"weights has shape \(2, 2\)"):
        scaled(sf.ones((2, 2)), sf.ones((2,)))


def test_nested_arguments_and_results():
    Pair = collections.namedtuple("Pair", "a b")

    @sf.function
    def f(batch, pair):
        total = batch["x"] + batch["y"][0]
        return {"sum": total, "pair": Pair(pair.a * 2.0, pair.b), "tag": "ok"}

    out = f({"x": sf.constant(1.0), "y": [sf.constant(2.0)]},
            Pair(sf.constant(3.0), sf.constant(4.0)))
    assert float(out["sum"]) == 3.0 and out["tag"] == "ok"
    assert isinstance(out["pair"], Pair) and float(out["pair"].a) == 6.0


def test_retracing_warning_names_the_argument():
    @sf.function
    def f(x, n):
        return x * float(n)

    x = sf.constant(1.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(6):
            f(x, n)
    messages = [str(w.message) for w in caught if issubclass(w.category, sf.RetracingWarning)]
    assert len(messages) == 1
    assert "'n'" in messages[0] and "Python value changed" in messages[0]
    assert "input_signature" in messages[0]


def test_reduce_retracing_relaxes_dims():
    @sf.function(reduce_retracing=True)
    def f(x):
        return x * 2.0

    for n in (2, 3, 4, 5):
        np.testing.assert_allclose(f(sf.ones((n,))).numpy(), np.full(n, 2.0))
    assert f.tracing_count == 2
    f(sf.ones((2, 2)))
    assert f.tracing_count == 3


def test_trace_cache_is_bounded():
    @sf.function
    def f(x, k):
        return x + 1.0

    x = sf.constant(1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(function_module.CACHE_SIZE + 10):
            f(x, k)
    assert len(f._cache) == function_module.CACHE_SIZE


def test_staging_errors_point_at_the_user_line():
    @sf.function(autograph=False)  # converted, the if would be an sf.cond
    def branchy(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(sf.errors.StagingError, match="sf.cond") as info:
        branchy(sf.constant(1.0))
    assert "test_function.py" in str(info.value) and "if x > 0" in str(info.value)

    @sf.function
    def to_numpy(x):
        return x.numpy()

    with pytest.raises(sf.errors.StagingError):
        to_numpy(sf.constant(1.0))

    @sf.function(input_signature=[sf.TensorSpec([None])])
    def iterate(x):
        return [y for y in x]

    with pytest.raises(sf.errors.StagingError, match="unknown dim"):
        iterate(sf.ones((3,)))


def test_shape_errors_while_tracing_name_op_and_line():
    @sf.function
    def bad(x, y):
        return x + y

    with pytest.raises(ValueError, match=r"add.*\(3,\) and \(4,\)") as info:
        bad(sf.ones((3,)), sf.ones((4,)))
    assert "return x + y" in str(info.value)


def test_python_loops_are_unrolled():
    @sf.function
    def power(x, n):
        result = sf.ones_like(x)
        for _ in range(n):
            result = result * x
        return result

    assert float(power(sf.constant(2.0), 5)) == 32.0
    cf = power.get_concrete_function(sf.constant(2.0), 5)
    assert sum(eq.primitive.name == "multiply" for eq in cf.graph.equations) == 5


def test_large_trace_warns_once_naming_the_line():
    @sf.function
    def unrolled(x):
        for _ in range(5001):
            x = x * 1.0 + 0.0
        return x

    line = unrolled.python_function.__code__.co_firstlineno + 3
    # Tracing is all the warning needs: the concrete function compiles only when called.
    with pytest.warns(UserWarning, match=r"traced 1000\d ops") as record:
        unrolled.get_concrete_function(sf.constant(1.0))
    large = [w for w in record if "traced" in str(w.message)]
    assert len(large) == 1
    assert re.search(rf"1000\d of them come from {re.escape(__file__)}:{line} ",
                     str(large[0].message))


def test_init_scope_runs_eagerly():
    seen = []

    @sf.function
    def f(x):
        with sf.init_scope():
            seen.append(type(sf.constant(1.0) + 1.0).__name__)
        return x

    f(sf.constant(1.0))
    assert seen == ["Tensor"]


def test_print_runs_with_the_graph(capsys):
    @sf.function
    def f(x):
        sf.print("value:", x)
        return x + 1.0

    f(sf.constant([1.0, 2.0]))
    f(sf.constant([3.0, 4.0]))
    assert capsys.readouterr().out == "value: [1. 2.]\nvalue: [3. 4.]\n"
    sf.print("eager", sf.constant(5))
    assert capsys.readouterr().out == "eager 5\n"


def test_variable_arguments_are_passed_by_reference():
    @sf.function
    def bump(v, amount):
        v.assign_add(amount)
        return v.read_value()

    a, b = sf.Variable(1.0), sf.Variable(10.0)
    bump(a, sf.constant(1.0))
    bump(b, sf.constant(1.0))
    bump(a, sf.constant(1.0))
    assert float(a.read_value()) == 3.0 and float(b.read_value()) == 11.0
    assert bump.tracing_count == 2  # variables key the cache by identity


def test_aliased_variable_arguments_are_not_confused():
    @sf.function
    def total(p, q):
        return p + q

    x = sf.Variable([1, 2], dtype=sf.int32)
    y = sf.Variable([10, 20], dtype=sf.int32)
    assert total(x, x).numpy().tolist() == [2, 4]
    assert total(x, y).numpy().tolist() == [11, 22]
    assert total(y, x).numpy().tolist() == [11, 22]

    g = sf.Variable(1.0)

    @sf.function
    def plus_g(v):
        return v + g

    assert float(plus_g(g)) == 2.0
    assert float(plus_g(sf.Variable(100.0))) == 101.0


def test_concrete_function_checks_its_arguments():
    @sf.function
    def f(x):
        return x * 2.0

    cf = f.get_concrete_function(sf.TensorSpec([2], sf.float32))
    assert cf(sf.constant([1.0, 2.0])).numpy().tolist() == [2.0, 4.0]
    with pytest.raises(ValueError, match="shape"):
        cf(sf.constant([1.0, 2.0, 3.0]))
    with pytest.raises(TypeError, match="dtype"):
        cf(sf.constant([1, 2]))


def test_runtime_errors_name_the_op_and_traced_line():
    @sf.function(input_signature=[sf.TensorSpec([None], sf.int32)])
    def pick(i):
        return sf.gather(sf.constant([1.0, 2.0]), i)

    with pytest.raises(IndexError, match="gather.*out of range") as info:
        pick(sf.constant([5]))
    assert "sf.gather(sf.constant" in str(info.value)


def test_a_signature_with_unknown_dims_is_called_from_a_static_trace():
    @sf.function(input_signature=[sf.TensorSpec([None, 3], sf.float32)])
    def inner(x):
        return x * 2.0

    @sf.function
    def outer(x):
        return inner(x) + 1.0

    x = sf.constant(np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(outer(x).numpy(), np.full((2, 3), 3.0, np.float32))
    with pytest.raises(ValueError, match=r"inner: x has shape \(2, 4\)"):
        sf.function(lambda y: inner(y))(sf.constant(np.ones((2, 4), np.float32)))


def test_a_staged_call_under_a_tape_inside_a_trace_is_differentiated():
    # The paper stages the model call and the training step: the tape inside the step's
    # trace must see the model's ops, and the model's state update must happen once.
    w = sf.Variable(np.ones((3, 2), np.float32))
    moving = sf.Variable(np.zeros(2, np.float32), trainable=False)

    @sf.function
    def model(x):
        y = x @ w
        moving.assign(moving * 0.5 + sf.reduce_mean(y, 0) * 0.5)
        return y

    @sf.function
    def step(x):
        with sf.GradientTape() as tape:
            loss = sf.reduce_sum(model(x) ** 2)
        return tape.gradient(loss, w)

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(step(sf.constant(x)).numpy(), 2 * x.T @ (x @ np.ones((3, 2))))
    np.testing.assert_allclose(moving.numpy(), [3.75, 3.75])


@pytest.mark.parametrize("jit", [True, False], ids=["compiled", "interpreted"])
def test_an_integer_index_past_an_unknown_dim_raises_as_eagerly(jit):
    """Once a slice of an unknown dim (empty when out of range): now checked at run time."""
    spec = [sf.TensorSpec([None, None], sf.float32)]
    rows = sf.function(lambda x: x[2] + x[-1], input_signature=spec, jit=jit)
    columns = sf.function(lambda x: x[:, -3], input_signature=spec, jit=jit)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(rows(x).numpy(), x[2] + x[-1])
    np.testing.assert_array_equal(columns(x).numpy(), x[:, -3])
    with pytest.raises(IndexError, match="out of range"):
        rows(np.ones((1, 3), np.float32))
    with pytest.raises(IndexError, match="out of range"):
        columns(np.ones((4, 2), np.float32))
    with pytest.raises(IndexError):
        x[:, -4]


def test_input_signature_arguments_are_converted_to_its_dtypes():
    """A list, a NumPy scalar or an object with __array__ where the signature has a spec
    (once: 'expected 2 tensor arguments, got 1')."""
    take = sf.function(lambda x, i: sf.gather(x, i),
                       input_signature=[sf.TensorSpec([None, None], sf.float32),
                                        sf.TensorSpec([], sf.int32)])

    class ArrayLike:
        def __array__(self, dtype=None, copy=None):
            return np.array([[5.0, 6.0]], np.float32)

    assert take([[1.0, 2.0], [3.0, 4.0]], np.int32(1)).numpy().tolist() == [3.0, 4.0]
    assert take(ArrayLike(), 0).numpy().tolist() == [5.0, 6.0]
    with pytest.raises(TypeError, match="cannot be converted to a tensor"):
        take("rows", 0)


def test_get_concrete_function_of_specs_is_traced_for_those_specs():
    """After calls relaxed a dim to unknown, asking for specs [8] gives a function of shape
    [8] (once the relaxed [None] one came back), while calls keep using the relaxed one."""
    f = sf.function(lambda x: x * 2.0, reduce_retracing=True)
    for n in (3, 4, 5):
        f(np.ones(n, np.float32))
    assert f.get_concrete_function(sf.TensorSpec([8], sf.float32)).inputs[0].shape == (8,)
    assert f.get_concrete_function(sf.TensorSpec([None], sf.float32)).inputs[0].shape == (None,)
    count = f.tracing_count
    assert f(np.ones(11, np.float32)).shape == (11,)
    assert f.tracing_count == count


@pytest.mark.parametrize("name", ["bad\nname } ; define void @evil()", 'quote"d', "back\\slash",
                                  "tab\tname"])
def test_hostile_function_names_compile(name):
    """A function name is quoted in IR and LLVM symbols; a newline once ended the module."""
    def f(x):
        return x * 2.0

    f.__name__ = f.__qualname__ = name
    staged = sf.function(f, autograph=False)
    np.testing.assert_array_equal(staged(np.ones(3, np.float32)).numpy(), [2.0, 2.0, 2.0])
    assert "\n" not in staged.name and '"' not in staged.name


# Found by the bad-inputs campaign (`stageflow.testing.bad_inputs`).

def test_an_argument_the_signature_leaves_out_cannot_change_silently():
    """A keyword the input_signature has no spec for was traced with its default; another
    value was once ignored (the call returned x * 2.0 for scale=5.0)."""
    scaled = sf.function(lambda x, *, scale=2.0: x * scale,
                         input_signature=[sf.TensorSpec([2], sf.float32)])
    assert scaled(sf.ones((2,)), scale=2.0).numpy().tolist() == [2.0, 2.0]
    with pytest.raises(TypeError, match="argument 'scale' is 5.0.*traced with 2.0"):
        scaled(sf.ones((2,)), scale=5.0)
    with pytest.raises(TypeError, match="argument 'scale' is a tensor float32"):
        scaled(sf.ones((2,)), scale=sf.constant(5.0))


def test_none_for_a_signature_spec_is_refused_not_made_nan():
    f = sf.function(lambda x: x + 1.0, input_signature=[sf.TensorSpec([], sf.float32)])
    with pytest.raises(TypeError, match="argument 'x'.*holds None"):
        f(None)


@pytest.mark.parametrize("call", [lambda f: f(1, 2, 3), lambda f: f(1, 2, c=3),
                                  lambda f: f(1, a=2)])
def test_a_call_that_does_not_bind_names_the_function_and_its_parameters(call):
    def add(a, b):
        return a + b

    with pytest.raises(TypeError, match=r"^add\(a, b\): "):
        call(sf.function(add))


def test_an_array_that_cannot_be_a_tensor_names_its_argument():
    """Once 'cannot make a tensor of dtype float128', naming no argument."""
    f = sf.function(lambda x, y: x + y)
    with pytest.raises(TypeError, match="argument 'y': cannot make a tensor of dtype float128"):
        f(np.ones(2, np.float32), np.ones(2, np.float128))


def test_a_function_named_in_letters_beyond_ascii_compiles():
    """Python names may be any letters; LLVM's symbol lookup and PTX take ASCII only (a
    compiled call of ``def été`` raised UnicodeEncodeError)."""
    def été(x):
        return sf.exp(x) * 2.0

    staged = sf.function(été)
    np.testing.assert_allclose(staged(sf.constant([0.0, 1.0])).numpy(), [2.0, 2 * np.e],
                               rtol=1e-6)
    assert "u00e9" in staged.name and staged.name.isascii()


def test_tensorflow_s_keywords_for_compiling_and_relaxing_shapes():
    """``jit_compile`` is `jit`, ``experimental_relax_shapes`` is `reduce_retracing`."""
    def f(x):
        return x * 2.0

    assert sf.function(f, jit_compile=True).jit and not sf.function(f, jit_compile=False).jit
    relaxed = sf.function(jit_compile=False, experimental_relax_shapes=True)(f)
    assert not relaxed.jit and relaxed.reduce_retracing
    for n in (2, 3, 4):
        np.testing.assert_array_equal(relaxed(sf.ones([n])).numpy(), np.full(n, 2.0))
    assert relaxed.tracing_count == 2  # the second shape relaxed the dim to unknown


@pytest.mark.parametrize("jit", [True, False])
def test_print_to_stderr_and_to_a_file_eagerly_and_staged(jit, capsys, tmp_path):
    """TensorFlow's `output_stream` (and `end`): sys.stderr, or appended to file://PATH."""
    log = tmp_path / "printed.txt"

    def f(x):
        sf.print("x =", x, output_stream=sys.stderr)
        sf.print("logged", x, output_stream=f"file://{log}", end=";\n")
        return x + 1.0

    f(sf.constant(1.0))
    staged = sf.function(f, jit=jit)
    staged(sf.constant(2.0))
    staged(sf.constant(3.0))
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "x = 1.\nx = 2.\nx = 3.\n"
    assert log.read_text() == "logged 1.;\nlogged 2.;\nlogged 3.;\n"
    with pytest.raises(ValueError, match="output_stream must be sys.stdout"):
        sf.print("x", output_stream=open)


def test_run_functions_eagerly_calls_the_python_function_op_by_op():
    """TensorFlow's debugging switch: the body runs eagerly (a breakpoint or a print sees
    values), methods included, with the staged numbers; off again, the staged graph runs."""
    seen = []

    class Scale(sf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = sf.Variable(3.0)

        @sf.function
        def __call__(self, x):
            seen.append(type(x).__name__)
            return x * self.w

    scale = Scale()
    staged = float(scale(sf.constant(2.0)))
    try:
        sf.config.run_functions_eagerly(True)
        assert sf.config.functions_run_eagerly()
        assert float(scale(sf.constant(2.0))) == staged == 6.0
        assert seen[-1] == "Tensor"
    finally:
        sf.config.run_functions_eagerly(False)
    count = len(seen)
    assert float(scale(sf.constant(2.0))) == 6.0 and len(seen) == count  # the cached graph
