"""The same programs eagerly, staged-interpreted (`jit=False`) and staged-compiled (`jit=True`)
must give the same numbers; random ops bit-identical."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stageflow as sf
from stageflow.core import nest


def gelu_tanh(x, w, b):
    return sf.nn.gelu(x * w + b, approximate=True) * 0.5 + x


def mlp(x, w1, w2):
    h = sf.nn.relu(x @ w1 + 0.1)
    return sf.nn.log_softmax(h @ w2, axis=-1)


def normalise(x, w, b):
    mean = sf.reduce_mean(x, axis=1, keepdims=True)
    var = sf.reduce_mean(sf.square(x - mean), axis=1, keepdims=True)
    return (x - mean) * sf.rsqrt(var + 1e-5) * w + b


def mixed(x, w, b):
    y = sf.where(x > 0, sf.exp(-x), sf.sin(x) * w)
    z = sf.reshape(sf.transpose(y), (-1,))
    return sf.reduce_max(y, axis=0) + sf.cast(sf.cast(b * 10.0, sf.int32) % 3, x.dtype), z


PROGRAMS = {
    "gelu_tanh": (gelu_tanh, [(64, 32), (32,), (32,)]),
    "mlp": (mlp, [(16, 8), (8, 12), (12, 5)]),
    "normalise": (normalise, [(6, 10), (10,), (10,)]),
    "mixed": (mixed, [(5, 7), (7,), (7,)]),
}


def run_three_ways(f, args):
    eager = f(*args)
    interpreted = sf.function(f, jit=False)(*args)
    compiled_fn = sf.function(f)
    compiled = compiled_fn(*args)
    return eager, interpreted, compiled, compiled_fn


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eager_interpreted_compiled_agree(name, dtype):
    f, shapes = PROGRAMS[name]
    rng = np.random.default_rng(0)
    args = [sf.constant(rng.standard_normal(s).astype(dtype)) for s in shapes]
    eager, interpreted, compiled, compiled_fn = run_three_ways(f, args)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    flat = [nest.flatten(r)[0] for r in (eager, interpreted, compiled)]
    for e, i, c in zip(*flat, strict=True):
        assert e.dtype == i.dtype == c.dtype and e.shape == i.shape == c.shape
        np.testing.assert_allclose(i.numpy(), e.numpy(), rtol=rtol, atol=rtol)
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=rtol, atol=rtol)
    stats = compiled_fn.get_concrete_function(*args).stats()
    assert stats["kernels"] >= 1  # elementwise work ran as machine code


def test_random_ops_are_bit_identical_three_ways():
    """Random bits and uniforms (exact arithmetic) are bit-identical; normals go through
    log/cos/sin, which compiled code computes to within a few ulps."""

    def draw(x):
        return sf.random.uniform(x.shape) * x, sf.random.normal(x.shape)

    x = sf.ones((5, 3))
    results = []
    for f in (draw, sf.function(draw, jit=False), sf.function(draw)):
        sf.random.set_seed(11)
        results.append([t.numpy() for t in f(x) + f(x)])
    for uniform_a, uniform_b, normal_a, normal_b in (
            (results[0][i], results[k][i], results[0][i + 1], results[k][i + 1])
            for k in (1, 2) for i in (0, 2)):
        assert np.array_equal(uniform_a, uniform_b)
        np.testing.assert_allclose(normal_b, normal_a, rtol=1e-6, atol=1e-6)


def test_compiled_function_with_unknown_batch_dim():
    @sf.function(input_signature=[sf.TensorSpec([None, 4])])
    def f(x):
        return sf.tanh(x) * 2.0 + sf.reduce_sum(x, axis=1, keepdims=True)

    for batch in (1, 3, 17):
        x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
        expected = np.tanh(x) * 2.0 + x.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(f(x).numpy(), expected, rtol=1e-5)
    assert f.tracing_count == 1


UNARY = ["exp", "tanh", "sigmoid", "sin", "cos", "negative", "abs", "square", "erf", "softplus"]
BINARY = ["add", "subtract", "multiply", "maximum", "minimum"]


@st.composite
def programs(draw):
    """A random chain of elementwise ops on two inputs, with broadcasting."""
    steps = draw(st.lists(st.tuples(st.sampled_from(UNARY + BINARY), st.integers(0, 10)),
                          min_size=1, max_size=8))
    rows = draw(st.integers(1, 6))
    cols = draw(st.integers(1, 6))
    broadcast_y = draw(st.booleans())
    return steps, (rows, cols), ((1, cols) if broadcast_y else (rows, cols))


def _apply(steps, x, y):
    values = [x, y]
    for name, pick in steps:
        a = values[pick % len(values)]
        if name in UNARY:
            fn = getattr(sf.nn, name) if name == "softplus" else getattr(sf, name)
            values.append(fn(sf.clip_by_value(a, -5.0, 5.0)))
        else:
            values.append(getattr(sf, name)(a, values[(pick + 1) % len(values)]))
    return values[-1]


@settings(max_examples=15)
@given(programs())
def test_random_programs_agree_three_ways(program):
    steps, shape_x, shape_y = program
    rng = np.random.default_rng(len(steps))
    x = sf.constant(rng.standard_normal(shape_x).astype(np.float32))
    y = sf.constant(rng.standard_normal(shape_y).astype(np.float32))

    def f(a, b):
        return _apply(steps, a, b)

    eager, interpreted, compiled, _ = run_three_ways(f, [x, y])
    np.testing.assert_allclose(interpreted.numpy(), eager.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(compiled.numpy(), eager.numpy(), rtol=1e-5, atol=1e-6)


def test_a_graph_the_compiler_cannot_handle_runs_interpreted_with_a_warning(monkeypatch):
    import stageflow.codegen.targets.cpu as cpu

    def unsupported(self, kernels):
        raise NotImplementedError("float16 kernels need a CPU with F16C")

    monkeypatch.setattr(cpu.CPUTarget, "prepare_many", unsupported)
    f = sf.function(lambda x: sf.tanh(x) + 1.0)
    with pytest.warns(UserWarning, match="runs interpreted: float16 kernels need"):
        result = f(sf.ones((2,)))
    np.testing.assert_allclose(result.numpy(), np.tanh(1.0) + 1.0, rtol=1e-6)


def test_kernel_stages_llvm_asm_ptx():
    spec = sf.TensorSpec([None, 8])
    cf = sf.function(gelu_tanh).get_concrete_function(spec, sf.TensorSpec([8]),
                                                      sf.TensorSpec([8]))
    llvm_ir = cf.ir("llvm")
    assert llvm_ir.startswith("; kernel @gelu_tanh_kernel") and "define" in llvm_ir
    assert "fmul" in llvm_ir
    asm = cf.ir("asm")
    assert "vmul" in asm or "mulps" in asm or "mulss" in asm
    ptx = cf.ir("ptx")
    assert ptx.startswith("// kernel @gelu_tanh_kernel") and ".entry" in ptx


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_integers_to_negative_powers_raise_numpys_error_every_way(dtype):
    """NumPy raises for a negative integer exponent; so do eager execution, the interpreter
    and the compiled program (whose pow runs by a lowering that refuses it, not in a kernel),
    with or without unknown dims; other exponents broadcast and wrap as NumPy's do."""
    x = np.array([[2, 3, -2]], dtype)
    good, bad = np.array([[3], [0]], dtype), np.array([2, -1, 1], dtype)

    def f(a, b):
        return (a * 2) ** b + 1

    unknown = [sf.TensorSpec([None, None], dtype)] * 2
    ways = [lambda a, b: f(sf.constant(a), sf.constant(b)), sf.function(f),
            sf.function(f, jit=False), sf.function(f, input_signature=unknown)]
    for way in ways:
        np.testing.assert_array_equal(way(x, good).numpy(), (x * 2) ** good + 1)
        with pytest.raises(ValueError, match="Integers to negative integer powers"):
            way(x, bad if way is not ways[-1] else bad[None])
    assert sf.function(f).get_concrete_function(x, good).program is not None


def test_a_value_returned_beside_an_empty_broadcast_is_written():
    """Found by the 10,000-program campaign: sign(a) and pow(sign(a), g) shared a kernel
    (equal static shapes (3, ?)); at run time a's unknown dim was 1 and g's 0, the kernel's
    space empty, and the returned sign(a) was never written."""
    def f(a, g):
        s = sf.sign(a)
        return sf.pow(s, g), s

    a, g = np.array([[-2.0], [0.5], [-1.0]]), np.zeros((1, 0))
    spec = [sf.TensorSpec([3, None], sf.float64), sf.TensorSpec([1, None], sf.float64)]
    p, s = sf.function(f, input_signature=spec)(a, g)
    assert p.shape == (3, 0)
    np.testing.assert_array_equal(s.numpy(), np.sign(a))
