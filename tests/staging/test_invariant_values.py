"""Values a staged function computes from variables it never writes (`hoist-invariant`),
kept between calls: the same numbers as the function compiled without the pass and as the
interpreter, computed again after every kind of write to one of those variables and only
then, and never for a variable the function writes itself. Among them the layouts
`prepack` gives a float32 model's filters and dense weights read from variables: the same
numbers as the function frozen, whose constants it packs at compile time."""

from __future__ import annotations

import threading

import ml_dtypes
import numpy as np
import pytest

import stageflow as sf
from stageflow.passes import LIBRARY_PIPELINE
from stageflow.staging import concrete

BF16 = ml_dtypes.bfloat16


def bits(x) -> np.ndarray:
    return np.asarray(x).view(np.uint16)


class Dense:
    """A mixed-precision dense layer written with plain ops: float32 variables cast to
    bfloat16 on every call, a float32 scale from two variables (as a batch norm's)."""

    def __init__(self, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.w = sf.Variable(rng.standard_normal((16, 8)).astype(np.float32), name="w")
        self.b = sf.Variable(rng.standard_normal(8).astype(np.float32), name="b")
        self.gamma = sf.Variable(rng.uniform(0.5, 2.0, 8).astype(np.float32), name="gamma")
        self.variance = sf.Variable(rng.uniform(0.5, 2.0, 8).astype(np.float32), name="var")

    def __call__(self, x):
        y = sf.matmul(x, sf.cast(self.w, sf.bfloat16)) + sf.cast(self.b, sf.bfloat16)
        scale = self.gamma * sf.math.rsqrt(self.variance + 1e-3)
        return sf.cast(sf.nn.relu(sf.cast(y, sf.float32) * scale), sf.bfloat16)


def without_hoisting(function, *args):
    """`function` staged and compiled (by a first call on `args`) without the pass (nor
    the layouts of variables' filters it would keep)."""
    staged = sf.function(function)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(concrete, "DEFAULT_PIPELINE", LIBRARY_PIPELINE)
        staged(*args)
    assert staged.get_concrete_function(*args).program.invariant is None
    return staged


def near(got, want) -> None:
    """bfloat16 results within a unit of the last place (the interpreter's NumPy matmul
    rounds its bfloat16 products otherwise than the compiled kernel)."""
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                               rtol=2 ** -7, atol=1e-6)


@pytest.fixture
def x():
    rng = np.random.default_rng(1)
    return sf.constant(rng.standard_normal((4, 16)).astype(BF16))


def test_the_casts_and_the_scale_are_computed_once_per_value_of_the_variables(x):
    layer = Dense()
    f = sf.function(layer)
    got = f(x).numpy()
    program = f.get_concrete_function(x).program
    assert program.invariant is not None and program.invariant.computed == 1
    optimized = f.get_concrete_function(x).ir("optimized")
    main = optimized.split("func.func @")[1]
    assert "sf.invariant = @" in main and "rsqrt" not in main
    for _ in range(3):
        np.testing.assert_array_equal(bits(f(x).numpy()), bits(got))
    assert program.invariant.computed == 1
    np.testing.assert_array_equal(bits(without_hoisting(layer, x)(x).numpy()), bits(got))
    near(sf.function(layer, jit=False)(x).numpy(), got)


def test_every_kind_of_write_is_seen_by_the_next_call(x, tmp_path):
    """Eager assignments, a compiled function's, an optimizer's update and a checkpoint's
    restore all reach the next call; a call after no write computes nothing again."""
    layer = Dense()
    f = sf.function(layer)
    reference = without_hoisting(layer, x)
    f(x)
    invariant = f.get_concrete_function(x).program.invariant
    checkpoint = sf.train.Checkpoint(w=layer.w)
    path = checkpoint.save(str(tmp_path / "ckpt"))

    @sf.function
    def scale_compiled():
        layer.variance.assign(layer.variance * 1.5)

    optimizer = sf.optimizers.SGD(0.5)
    writes = [
        lambda: layer.w.assign(layer.w.numpy() * 2.0),
        lambda: layer.b.assign_add(np.ones(8, np.float32)),
        lambda: layer.gamma.assign_sub(np.full(8, 0.25, np.float32)),
        scale_compiled,
        lambda: optimizer.apply_gradients([(sf.ones((16, 8)), layer.w)]),
        lambda: checkpoint.restore(path),
    ]
    computed = invariant.computed
    for write in writes:
        before = f(x).numpy()
        write()
        got = f(x).numpy()
        assert invariant.computed == computed + 1
        computed = invariant.computed
        assert not np.array_equal(bits(got), bits(before))
        np.testing.assert_array_equal(bits(got), bits(reference(x).numpy()))
        f(x)
        assert invariant.computed == computed


def test_a_variable_the_function_writes_is_read_at_every_call(x):
    """The function doubles its own variable after using it: what depends on it is not
    kept (the partner reads the three others), and each call sees the previous write."""
    layer = Dense()

    @sf.function
    def step(x):
        y = layer(x)
        layer.gamma.assign(layer.gamma * 2.0)
        return y

    reference = without_hoisting(layer, x)
    for _ in range(3):
        want = reference(x).numpy()
        np.testing.assert_array_equal(bits(step(x).numpy()), bits(want))
    concrete_step = step.get_concrete_function(x)
    assert concrete_step.program.invariant.computed == 1
    main = concrete_step.ir("optimized").split("func.func @")[1]
    reads = main.split("sf.invariant_reads = array<i64: ")[1].split(">")[0]
    assert len(reads.split(",")) == 3


def test_gradients_through_kept_values_reach_the_variables(x):
    layer = Dense()
    functions = [sf.function(layer), without_hoisting(layer, x), sf.function(layer, jit=False)]
    grads = []
    for function in functions:
        with sf.GradientTape() as tape:
            loss = sf.reduce_sum(sf.cast(function(x), sf.float32))
        grads.append(tape.gradient(loss, [layer.w, layer.b, layer.gamma, layer.variance]))
    for got, plain, interpreted in zip(*grads, strict=True):
        np.testing.assert_array_equal(got.numpy(), plain.numpy())
        np.testing.assert_allclose(got.numpy(), interpreted.numpy(), rtol=2e-2, atol=1e-3)
        assert np.any(got.numpy() != 0)


def test_calls_from_threads_see_one_value_or_the_other(x):
    """Two threads call while the main thread alternates a variable between two values:
    every result is the one of either value, never a mix of kept values."""
    layer = Dense()
    f = sf.function(layer)
    values = [layer.w.numpy(), layer.w.numpy() * -3.0]
    expected = []
    for value in values:
        layer.w.assign(value)
        expected.append(bits(f(x).numpy()))
    results: list[np.ndarray] = []
    stop = threading.Event()

    def call():
        while not stop.is_set():
            results.append(bits(f(x).numpy()))

    threads = [threading.Thread(target=call) for _ in range(2)]
    for thread in threads:
        thread.start()
    for i in range(200):
        layer.w.assign(values[i % 2])
    stop.set()
    for thread in threads:
        thread.join()
    assert results
    for result in results:
        assert any(np.array_equal(result, e) for e in expected)


def test_the_step_plan_and_memory_tracking_take_the_kept_values_too():
    """A function of large tensors runs as the step plan (its kernels split over the
    cores), and `track_memory` replaces the run: both pass the kept values."""
    rng = np.random.default_rng(3)
    w = sf.Variable(rng.standard_normal(1 << 22).astype(np.float32))
    f = sf.function(lambda x: x * sf.exp(w))
    x = sf.constant(rng.standard_normal(1 << 22).astype(np.float32))
    want = x.numpy() * np.exp(w.numpy())
    np.testing.assert_allclose(f(x).numpy(), want, rtol=1e-6)
    program = f.get_concrete_function(x).program
    assert program.invariant is not None
    program.track_memory()
    np.testing.assert_allclose(f(x).numpy(), want, rtol=1e-6)
    w.assign(w.numpy() + 1.0)
    np.testing.assert_allclose(f(x).numpy(), x.numpy() * np.exp(w.numpy()), rtol=1e-6)
    program.track_memory(False)
    assert program.invariant.computed == 2


class ConvNet:
    """A float32 block reading its weights as variables: a 3x3 convolution into 64
    channels (the gemm's, packed), a batch norm's scale, a pointwise one into 32 (the
    direct loops', left unpacked), and a classifier of 16 rows by `x @ w` (packed) and of
    2 rows by `x @ w.T` (few rows: read in place)."""

    def __init__(self, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)

        def variable(*shape):
            return sf.Variable(rng.standard_normal(shape).astype(np.float32) / 8)

        self.conv, self.point = variable(3, 3, 8, 96), variable(1, 1, 96, 32)
        self.gamma, self.variance = variable(96), sf.Variable(np.ones(96, np.float32))
        self.dense, self.head = variable(32, 64), variable(10, 32)

    def __call__(self, x):
        y = sf.nn.conv2d(x, self.conv, strides=1, padding="SAME")
        y = sf.nn.relu(y * (self.gamma * sf.math.rsqrt(self.variance + 1e-3)))
        rows = sf.reshape(sf.nn.conv2d(y, self.point, strides=1, padding="VALID"), (-1, 32))
        return sf.matmul(rows, self.dense), sf.matmul(rows[:2], self.head, transpose_b=True)


def test_filters_read_from_variables_are_packed_once_per_value():
    """The gemm's filters and the dense weights read from variables are laid out in the
    partner, kept, and read by packed convolutions: bit-identical to the function frozen
    (its constants packed at compile time; its head reads a transposed copy, and so rounds
    otherwise), within rounding of the unpacked function, and laid out again after a
    write."""
    model = ConvNet()
    x = sf.constant(np.random.default_rng(2).standard_normal((1, 4, 4, 8)).astype(np.float32))
    f = sf.function(model)
    got = [t.numpy() for t in f(x)]
    optimized = f.get_concrete_function(x).ir("optimized")
    main, partner = optimized.split("func.func @")[1:3]
    assert main.count("packed = true") + main.count("sf.conv2d_prepacked") == 2
    assert "transpose_b = true" in main and partner.count("sf.transpose") == 2
    # kept: the two layouts and the batch norm's scale, a copy of what they come from
    kept = model.conv.numpy().nbytes + model.dense.numpy().nbytes + model.gamma.numpy().nbytes
    assert f.get_concrete_function(x).stats()["kept_bytes"] == kept
    def same_as_frozen(got):
        frozen = [t.numpy() for t in f.freeze(x)(x)]
        np.testing.assert_array_equal(got[0], frozen[0])
        np.testing.assert_allclose(got[1], frozen[1], rtol=1e-5, atol=1e-6)

    same_as_frozen(got)
    for want, plain in zip(got, without_hoisting(model, x)(x), strict=True):
        np.testing.assert_allclose(want, plain.numpy(), rtol=1e-5, atol=1e-6)
    model.conv.assign(model.conv.numpy() * -2.0)
    model.dense.assign(model.dense.numpy() + 1.0)
    again = [t.numpy() for t in f(x)]
    assert not np.allclose(again[0], got[0])
    same_as_frozen(again)
    assert f.get_concrete_function(x).program.invariant.computed == 2


def test_gradients_reach_variables_read_as_packed_panels():
    model = ConvNet()
    x = sf.constant(np.random.default_rng(4).standard_normal((1, 4, 4, 8)).astype(np.float32))
    grads = []
    variables = [model.conv, model.point, model.gamma, model.dense, model.head]
    for function in (sf.function(model), without_hoisting(model, x)):
        with sf.GradientTape() as tape:
            a, b = function(x)
            loss = sf.reduce_sum(a * a) + sf.reduce_sum(b)
        grads.append(tape.gradient(loss, variables))
    for got, plain in zip(*grads, strict=True):
        np.testing.assert_allclose(got.numpy(), plain.numpy(), rtol=1e-4, atol=1e-5)
        assert np.any(got.numpy() != 0)


def test_numpy_cannot_change_a_variable_in_place(x):
    """A variable's value reaches NumPy read-only (a copy where asked): a write in place
    would leave the values kept from it stale."""
    layer = Dense()
    f = sf.function(layer)
    want = bits(f(x).numpy())
    with pytest.raises(ValueError, match="read-only"):
        np.asarray(layer.w)[0, 0] = 5.0
    copied = np.array(layer.w)
    copied[0, 0] = 5.0
    layer.w.numpy()[0, 0] = 5.0
    np.testing.assert_array_equal(bits(f(x).numpy()), want)
    assert f.get_concrete_function(x).program.invariant.computed == 1
