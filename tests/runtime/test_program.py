"""Whole functions as one compiled program: the same numbers and the same state changes as
the interpreter, unknown dims, errors that name the op, and when the step plan is kept."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.runtime import compiled_program
from stageflow.runtime.compiled_program import PROGRAM_MAX_KERNEL_ELEMENTS


def program_of(function, *args):
    """The compiled program of `function`'s concrete function for `args` (None if it runs
    as a step plan)."""
    return function.get_concrete_function(*args).program.program


def both(python_function, **options):
    return sf.function(python_function, **options), sf.function(python_function, jit=False,
                                                                **options)


def test_a_training_step_matches_the_interpreter_and_updates_variables():
    rng = np.random.default_rng(0)
    shapes = [(8, 16), (16,), (16, 4), (4,)]
    initial = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    compiled_vars = [sf.Variable(v) for v in initial]
    interpreted_vars = [sf.Variable(v) for v in initial]

    def make(params):
        def step(x, y):
            with sf.GradientTape() as tape:
                h = sf.nn.relu(sf.matmul(x, params[0]) + params[1])
                logits = sf.matmul(h, params[2]) + params[3]
                loss = sf.reduce_mean(sf.nn.softmax_cross_entropy_with_logits(y, logits))
            for p, g in zip(params, tape.gradient(loss, params), strict=True):
                p.assign_sub(0.1 * g)
            return loss

        return step

    compiled = sf.function(make(compiled_vars))
    interpreted = sf.function(make(interpreted_vars), jit=False)
    x = sf.constant(rng.standard_normal((5, 8)).astype(np.float32))
    y = sf.constant(np.eye(4, dtype=np.float32)[[0, 1, 2, 3, 0]])
    assert program_of(compiled, x, y) is not None
    for _ in range(3):
        a, b = compiled(x, y), interpreted(x, y)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5)
    for v, w in zip(compiled_vars, interpreted_vars, strict=True):
        np.testing.assert_allclose(v.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)


def test_reads_after_writes_and_aliased_outputs():
    v = sf.Variable(np.ones(3, np.float32))

    @sf.function
    def f(x):
        before = v.read_value()
        v.assign(before * 2.0 + x)
        after = v.read_value()
        v.assign_add(x)
        return x, after, after, before, sf.reshape(after, [3, 1])

    x = sf.constant(np.arange(3, dtype=np.float32))
    assert program_of(f, x) is not None
    old_value = v._value
    tensors = f(x)
    assert tensors[0]._value is x._value  # returned arguments are not copied
    assert tensors[3]._value is old_value  # nor variables read before any write
    v.assign(np.ones(3, np.float32))
    results = [t.numpy() for t in f(x)]
    np.testing.assert_array_equal(results[0], [0, 1, 2])
    np.testing.assert_array_equal(results[1], [2, 3, 4])
    np.testing.assert_array_equal(results[2], [2, 3, 4])
    np.testing.assert_array_equal(results[3], [1, 1, 1])
    np.testing.assert_array_equal(results[4], [[2], [3], [4]])
    np.testing.assert_array_equal(v.numpy(), [2, 4, 6])
    assert results[1] is not results[2]


signature = [sf.TensorSpec([None, 3], sf.float32), sf.TensorSpec([None, 3], sf.float32)]


def mixed(a, b):
    s = sf.concat([a, b], axis=0)
    t = sf.transpose(s)[:, ::-1]
    return sf.tanh(a) + b, sf.reduce_max(a, axis=1), sf.matmul(t, s), sf.nn.softmax(s)


@settings(max_examples=10)
@given(st.integers(0, 6))
def test_unknown_dims_are_sized_at_run_time(rows):
    compiled, interpreted = both(mixed, input_signature=signature)
    rng = np.random.default_rng(rows)
    a = sf.constant(rng.standard_normal((rows, 3)).astype(np.float32))
    b = sf.constant(rng.standard_normal((rows, 3)).astype(np.float32))
    assert program_of(compiled, *signature) is not None
    for x, y in zip(compiled(a, b), interpreted(a, b), strict=True):
        assert x.shape == y.shape
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-5, atol=1e-6)


def test_one_workspace_serves_calls_of_growing_and_shrinking_sizes():
    """The temporaries' block kept between calls is replaced when a call needs more and
    reused when it needs less: every call still gets its own numbers."""
    compiled, interpreted = both(mixed, input_signature=signature)
    rng = np.random.default_rng(0)
    for rows in (3, 50, 2, 0, 200, 7, 200):
        a, b = (sf.constant(rng.standard_normal((rows, 3)).astype(np.float32))
                for _ in range(2))
        for x, y in zip(compiled(a, b), interpreted(a, b), strict=True):
            np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-5, atol=1e-4)


def test_concurrent_calls_never_share_temporaries():
    """Calls running at once each take the cached block or allocate their own (compiled code
    runs without the GIL), so threads of different sizes get their own numbers."""
    compiled = sf.function(mixed, input_signature=signature)
    rng = np.random.default_rng(1)
    cases = []
    for rows in (1, 300, 17, 1000):
        a, b = (sf.constant(rng.standard_normal((rows, 3)).astype(np.float32))
                for _ in range(2))
        cases.append((a, b, [t.numpy() for t in compiled(a, b)]))

    def repeat(case) -> bool:
        a, b, want = case
        return all(all(np.array_equal(x.numpy(), y) for x, y in
                       zip(compiled(a, b), want, strict=True)) for _ in range(200))

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(repeat, cases))


def test_inconsistent_unknown_dims_raise_naming_the_op_and_line():
    compiled = sf.function(mixed, input_signature=signature)
    a = sf.constant(np.ones((5, 3), np.float32))
    with pytest.raises(ValueError, match=r"(?s)\(5, 3\).*\(4, 3\).*test_program.py"):
        compiled(a, sf.constant(np.ones((4, 3), np.float32)))
    assert compiled(a, a)[0].shape == (5, 3)  # and the function still works


def test_random_numbers_are_those_of_eager_execution():
    """The bits are Philox's in both; the normal transform's math may differ by an ulp."""
    def draw(x):
        return x + sf.random.normal([4, 3]), sf.random.uniform([2])

    compiled = sf.function(draw)
    x = sf.constant(np.zeros((4, 3), np.float32))
    sf.random.set_seed(7)
    staged = [t.numpy() for t in compiled(x)]
    assert program_of(compiled, x) is not None
    sf.random.set_seed(7)
    eager = [t.numpy() for t in draw(x)]
    np.testing.assert_array_equal(staged[1], eager[1])  # the same bits, the same floats
    np.testing.assert_allclose(staged[0], eager[0], rtol=1e-6)  # through log, sqrt, cos


def test_large_elementwise_kernels_keep_the_parallel_step_plan():
    f = sf.function(lambda x: sf.tanh(x) * 2.0 + 1.0)
    assert program_of(f, sf.constant(np.ones((4, 4), np.float32))) is not None
    assert program_of(f, sf.constant(np.ones((512, 512), np.float32))) is not None
    rows = PROGRAM_MAX_KERNEL_ELEMENTS // 1024
    assert program_of(f, sf.constant(np.ones((rows, 1024), np.float32))) is None
    # a kernel ending in a reduction writes little but reads much: its size is its input's
    g = sf.function(lambda x: sf.reduce_sum(x * x, axis=1))
    assert program_of(g, sf.constant(np.ones((rows, 1024), np.float32))) is None


def test_large_calls_of_a_program_with_unknown_dims_run_on_the_parallel_step_plan():
    f = sf.function(lambda x: sf.tanh(x) * 2.0 + 1.0,
                    input_signature=[sf.TensorSpec([None], sf.float32)])
    program = f.get_concrete_function().program.program
    assert program is not None
    planned = []
    step_plan = program._step_plan
    program._step_plan = lambda values: planned.append(len(values)) or step_plan(values)
    small = np.linspace(-2, 2, 100, dtype=np.float32)
    large = np.linspace(-2, 2, PROGRAM_MAX_KERNEL_ELEMENTS, dtype=np.float32)
    np.testing.assert_allclose(f(sf.constant(small)).numpy(), np.tanh(small) * 2 + 1,
                               rtol=1e-6, atol=1e-6)
    assert planned == []
    np.testing.assert_allclose(f(sf.constant(large)).numpy(), np.tanh(large) * 2 + 1,
                               rtol=1e-6, atol=1e-6)
    assert planned == [1]


def test_non_contiguous_arguments_are_read_correctly():
    f = sf.function(lambda x: sf.reduce_sum(x * x, axis=0))
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = base[:, ::2]
    result = f(sf.constant(view))
    np.testing.assert_allclose(result.numpy(), (view * view).sum(0))


def test_non_contiguous_variables_are_read_beside_scalars_and_assigned():
    """The compiled entry refuses a non-contiguous argument before it runs anything; the
    call is made again with contiguous copies of those only (a 0-d scalar stays 0-d)."""
    v = sf.Variable(sf.zeros((4,)))  # a broadcast zero: stride 0
    assert v.numpy().strides == (4,) and not np.asarray(v._value).flags.c_contiguous
    calls = []

    @sf.function
    def step(x, scale):
        calls.append(1)
        v.assign_add(x[:, 1] * scale)
        return v.read_value() + scale

    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    program = program_of(step, sf.constant(x), sf.constant(2.0))
    planned = []
    fallback = program._step_plan
    program._step_plan = lambda values: planned.append(1) or fallback(values)
    for expected in ([4.0, 8.0, 12.0, 16.0], [6.0, 14.0, 22.0, 30.0]):
        result = step(sf.constant(x), sf.constant(2.0))
        np.testing.assert_array_equal(v.numpy(), np.subtract(expected, 2.0))
        np.testing.assert_array_equal(result.numpy(), expected)
    assert len(calls) == 1 and not planned  # the program ran, not the step plan


def test_the_lowered_stage_shows_the_program_or_why_there_is_none():
    f = sf.function(lambda x: sf.reduce_max(sf.exp(x), axis=0))
    text = f.get_concrete_function(sf.TensorSpec([None, 4], sf.float32)).ir("lowered")
    assert 'define i32 @"<lambda>.program"' in text and '@"aligned_alloc"' in text

    def printing(x):
        sf.print("x is", x)
        return x * 2.0

    text = sf.function(printing).get_concrete_function(sf.constant([1.0])).ir("lowered")
    assert text.startswith("; not one program (@printing: sf.print runs on the host only: "
                           "it prints from Python when the op runs (at ")


def test_large_kernels_split_their_rows_over_threads_with_broadcast_operands():
    """A kernel of 2^18 elements or more with operands broadcast along its rows (a bias, a
    row of scales) runs in a program as one call per core, each over a block of rows; the
    broadcast operands are passed whole. Odd row counts and several results included."""
    rng = np.random.default_rng(4)

    def f(x, bias, scale):
        y = sf.tanh(x * scale + bias)
        return y, y * 2.0 + x

    for rows in (601, 1024):
        x = rng.standard_normal((rows, 512)).astype(np.float32)
        bias = rng.standard_normal(512).astype(np.float32)
        scale = rng.standard_normal((1, 512)).astype(np.float32)
        staged = sf.function(f)
        concrete = staged.get_concrete_function(x, bias, scale)
        assert 'call ptr @"sf.call.thread"' in concrete.program.program.llvm_ir
        got = staged(x, bias, scale)
        want = f(*(sf.constant(a) for a in (x, bias, scale)))
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)


def test_a_kernel_error_names_its_op_once():
    """Found by the bad-inputs campaign: NumPy's matmul names itself, and the interpreter's
    error read 'matmul: matmul: Input operand 1 has a mismatch ...'."""
    interpreted = sf.function(lambda x, w: sf.matmul(x, w), jit=False,
                              input_signature=[sf.TensorSpec([None, None])] * 2)
    with pytest.raises(ValueError, match=r"^matmul: (?!matmul:)(?s:.*)test_program.py"):
        interpreted(sf.ones((2, 0)), sf.ones((3, 5)))


def test_the_step_plan_a_program_falls_back_to_reads_stride_0_slots_as_the_program_does(
        monkeypatch):
    """Adam's slots start as broadcast zeros (stride 0). Where every function is a program,
    kernels have no NumPy entry and the step plan calls their raw entry, which reads every
    array as C-contiguous: a kernel updating a slot in place must refuse such a view (then
    run on contiguous copies) rather than read past its one element."""

    def losses(plan: bool) -> list[float]:
        if plan:
            monkeypatch.setattr(compiled_program.CompiledProgram, "run",
                                lambda self, values: self._step_plan(values))
        sf.random.set_seed(0)
        w = sf.Variable(sf.random.normal((8, 4)))
        optimizer = sf.optimizers.Adam(0.01)

        @sf.function
        def step(x):
            with sf.GradientTape() as tape:
                loss = sf.reduce_mean(sf.matmul(x, w) ** 2)
            optimizer.apply_gradients([(tape.gradient(loss, w), w)])
            return loss

        x = sf.constant(np.linspace(-1.0, 1.0, 48, dtype=np.float32).reshape(6, 8))
        return [float(step(x)) for _ in range(4)] + list(w.numpy().ravel())

    compiled = losses(plan=False)
    planned = losses(plan=True)
    assert np.all(np.isfinite(planned))
    np.testing.assert_allclose(planned, compiled, rtol=1e-6)


def test_large_constants_are_host_memory_the_program_names_and_libraries_embed(tmp_path):
    rng = np.random.default_rng(3)
    weights = rng.standard_normal((256, 128)).astype(np.float32)  # 128 KiB: not embedded
    small = rng.standard_normal(128).astype(np.float32)

    def layer(x):
        return sf.nn.relu(sf.matmul(x, sf.constant(weights)) + sf.constant(small))

    x = rng.standard_normal((4, 256)).astype(np.float32)
    staged = sf.function(layer)
    assert program_of(staged, x) is not None
    expected = np.maximum(x @ weights + small, 0)
    np.testing.assert_allclose(staged(x).numpy(), expected, rtol=1e-5, atol=1e-5)
    # Equal weights in another function share the host array: one symbol, found again.
    again = sf.function(lambda x: sf.matmul(x, sf.constant(weights.copy())))
    np.testing.assert_allclose(again(x).numpy(), x @ weights, rtol=1e-5, atol=1e-5)
    text = program_of(staged, x).llvm_ir
    external = [line for line in text.splitlines() if line.startswith("@\"sf.const.")]
    assert len(external) == 1 and "external constant [131072 x i8]" in external[0]
    lib = sf.aot.compile(sf.function(layer), sf.TensorSpec([4, 256], sf.float32))
    assert b"sf.const." not in lib.object_code


def test_a_scalar_that_an_eager_op_left_as_a_numpy_scalar_is_read_by_the_program():
    f = sf.function(lambda x, s: x * s)
    x = sf.constant(np.arange(4, dtype=np.float32))
    s = sf.reduce_sum(x)  # NumPy's reduction gives a np.float32, not a 0-d array
    assert type(s._value) is np.float32
    program = program_of(f, x, s)
    planned = []
    step_plan = program._step_plan
    program._step_plan = lambda values: planned.append(1) or step_plan(values)
    np.testing.assert_array_equal(f(x, s).numpy(), np.arange(4, dtype=np.float32) * 6)
    assert planned == []
