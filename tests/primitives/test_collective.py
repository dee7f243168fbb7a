"""`all_reduce`, the collective a data-parallel step binds over its replicas' values: each
reduction against NumPy's elementwise folds, eager, staged-interpreted and staged-compiled
giving the same bits (the same order of additions everywhere), its kernel compiled for the
GPU (emulated grids, and PTX that ptxas assembles), its gradients against finite
differences, ties shared as `maximum`'s, and errors naming the op."""

from __future__ import annotations

import functools
import operator
import subprocess

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import arrays, numeric_gradient, shapes

import stageflow as sf
from stageflow.codegen.targets.emulated import EmulatedLaunch
from stageflow.codegen.targets.ptx import ARCHES, PTXTarget, ptxas_path
from stageflow.ir import parse_module
from stageflow.primitives.collective import all_reduce_p

REDUCTIONS = ("sum", "mean", "max", "min")
F16, BF16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
FLOATS = [F16, BF16, np.dtype(np.float32), np.dtype(np.float64)]
INTS = [np.dtype(t) for t in (np.int8, np.uint8, np.int32, np.uint32, np.int64)]
COMPLEX = [np.dtype(np.complex64), np.dtype(np.complex128)]


def taken(dtype: np.dtype) -> list[str]:
    """The reductions defined on `dtype`: a mean of floats, no order of complex numbers."""
    if dtype in COMPLEX:
        return ["sum", "mean"]
    return list(REDUCTIONS) if dtype in FLOATS else ["sum", "max", "min"]


def reference(xs: list[np.ndarray], reduction: str) -> np.ndarray:
    """NumPy's own ufuncs folded left to right; a mean divides the sum in its dtype."""
    fold = {"sum": np.add, "mean": np.add, "max": np.maximum, "min": np.minimum}[reduction]
    total = np.asarray(functools.reduce(fold, xs))
    if reduction == "mean":
        total = np.asarray(total / total.dtype.type(len(xs)))
    return total


def reduce(*xs, reduction):
    return all_reduce_p.bind(*xs, reduction=reduction)


def three_ways(xs: list[np.ndarray], reduction: str) -> list[np.ndarray]:
    """The op eagerly, staged and interpreted, staged and compiled."""
    f = functools.partial(reduce, reduction=reduction)
    args = [sf.constant(x) for x in xs]
    return [np.asarray(run(*args).numpy())
            for run in (f, sf.function(f, jit=False), sf.function(f))]


def bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view(np.uint8)


def assert_same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Equal dtype, shape and bytes, but for the payload and sign of NaNs."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
    if got.dtype.kind == "f" or got.dtype == BF16:
        nan = np.isnan(got.astype(np.float64))
        np.testing.assert_array_equal(nan, np.isnan(want.astype(np.float64)))
        got, want = np.where(nan, 0, got).astype(got.dtype), np.where(nan, 0, want).astype(
            want.dtype)
    np.testing.assert_array_equal(bits(got), bits(want))


@st.composite
def operands(draw: st.DrawFn) -> tuple[list[np.ndarray], str]:
    """1 to 5 values of one shape (0-d and empty ones too) and dtype, and a reduction."""
    dtype = draw(st.sampled_from(FLOATS + INTS + COMPLEX))
    shape = draw(shapes(max_dims=3))
    count = draw(st.integers(1, 5))
    if dtype == BF16:  # (no hypothesis strategy of bfloat16: float32s rounded to it)
        xs = [draw(arrays(np.float32, shape)).astype(BF16) for _ in range(count)]
    elif dtype in INTS:  # the whole range: sums wrap, as NumPy's do
        info = np.iinfo(dtype)
        xs = [draw(arrays(dtype, shape, lo=info.min, hi=info.max)) for _ in range(count)]
    else:
        xs = [draw(arrays(dtype, shape)) for _ in range(count)]
    return xs, draw(st.sampled_from(taken(dtype)))


@given(operands())
def test_eager_interpreted_and_compiled_give_numpys_folds_bit_for_bit(case):
    xs, reduction = case
    want = reference(xs, reduction)
    for got in three_ways(xs, reduction):
        assert_same_bits(got, want)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values_three_ways(dtype, reduction):
    """Infinities, NaNs (which win a max or min), signed zeros (a max or min keeps the
    first of equal ones, as the compiled loop does: -0 and +0 give the earlier), subnormals
    and values whose sum rounds differently in another order."""
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, 1.0, 1e8, -1e8, 3.0],
                       dtype)
    xs = [special, np.roll(special, 3), np.roll(special, 7)[::-1].copy()]
    want = reference(xs, reduction)
    results = three_ways(xs, reduction)
    with np.errstate(invalid="ignore"):
        for got in results:
            if reduction in ("sum", "mean"):
                assert_same_bits(got, want)
            np.testing.assert_array_equal(got, want)  # +0 == -0 and NaN == NaN here
    assert_same_bits(results[0], results[2])  # eager and compiled: the very same bits
    assert_same_bits(results[1], results[2])
    if reduction in ("max", "min"):
        first = three_ways([np.array([-0.0, 0.0], dtype), np.array([0.0, -0.0], dtype)],
                           reduction)
        for got in first:
            np.testing.assert_array_equal(np.signbit(got), [True, False])


def test_the_order_of_additions_is_left_to_right():
    """In float32 (1e8 + -1e8) + 1 is 1, and (1 + -1e8) + 1e8 is 0 (1 is below 1e8's ulp):
    the result tells the orders apart, and every way of running adds left to right."""
    xs = [np.float32([1e8, 1.0]), np.float32([-1e8, -1e8]), np.float32([1.0, 1e8])]
    for got in three_ways(xs, "sum"):
        np.testing.assert_array_equal(got, np.float32([1.0, 0.0]))
    for got in three_ways(xs[::-1], "sum"):
        np.testing.assert_array_equal(got, np.float32([0.0, 1.0]))


def test_the_compiled_function_runs_it_in_the_kernel_of_the_update():
    """The strategy's step: the replicas' gradients reduced and the weights updated, one
    kernel; the numbers are the eager step's."""

    def step(w, g0, g1, g2):
        return w - 0.1 * reduce(g0 * 2.0, g1 * 2.0, g2 * 2.0, reduction="mean")

    rng = np.random.default_rng(0)
    args = [sf.constant(rng.standard_normal((4, 8)).astype(np.float32)) for _ in range(4)]
    compiled = sf.function(step)
    assert_same_bits(compiled(*args).numpy(), step(*args).numpy())
    stats = compiled.get_concrete_function(*args).stats()
    assert stats["kernels"] == 1, stats


def test_replicas_on_logical_devices_in_one_staged_function():
    """The strategy's shape: each replica's op placed on a logical CPU of its own, their
    values combined by one op of the graph."""

    @sf.function
    def step(*xs):
        grads = []
        for i, x in enumerate(xs):
            with sf.device(f"/device:CPU:{i}"):
                grads.append(x * 2.0)
        return reduce(*grads, reduction="mean")

    xs = [np.full((2, 2), float(i), np.float32) for i in range(3)]
    assert_same_bits(step(*xs).numpy(), np.full((2, 2), 2.0, np.float32))


# --------------------------------------------------------------------------------- GPU

KERNEL = """
func.func @update(%w: tensor<?xT>, %a: tensor<?xT>, %b: tensor<?xT>, %c: tensor<?xT>)
    -> tensor<?xT> attributes {sf.kernel} {
  %r = sf.all_reduce %a, %b, %c {reduction = "R"}
      : (tensor<?xT>, tensor<?xT>, tensor<?xT>) -> tensor<?xT>
  %y = sf.subtract %w, %r : (tensor<?xT>, tensor<?xT>) -> tensor<?xT>
  func.return %y : tensor<?xT>
}
"""
GPU_CASES = [("f32", np.float32, r) for r in REDUCTIONS] + [
    ("f16", np.float16, "mean"), ("i32", np.int32, "max"), ("complex<f64>", np.complex128,
                                                            "mean")]


def gpu_kernel(element: str, reduction: str):
    text = KERNEL.replace("xT>", f"x{element}>").replace('"R"', f'"{reduction}"')
    return parse_module(text).ops.first


@pytest.mark.parametrize(("element", "dtype", "reduction"), GPU_CASES)
def test_the_gpu_kernel_computes_the_eager_numbers(element, dtype, reduction):
    """The PTX kernel's code, over emulated grids (fewer threads than elements, and more),
    gives the eager results bit for bit."""
    rng = np.random.default_rng(1)
    n = 200
    values = [(rng.standard_normal(n) * 10 + (1j * rng.standard_normal(n)
                                              if dtype == np.complex128 else 0)).astype(dtype)
              for _ in range(4)]
    w, *xs = values
    want = np.asarray(w - all_reduce_p.kernel(*xs, reduction=reduction), dtype)
    kernel = EmulatedLaunch().compile(gpu_kernel(element, reduction))
    for grid, block in [(1, 1), (3, 32), (64, 128)]:
        out = np.full(n, 7, dtype)
        kernel.launch(values, [out], grid, block)
        assert_same_bits(out, want)


def test_eager_and_staged_on_the_gpu_device():
    """On the suite's emulated GPU device an eager all_reduce and a staged function using
    one run there, and give the host's bits."""
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((5, 7)).astype(np.float32) for _ in range(3)]
    step = sf.function(lambda a, b, c: reduce(a, b, c, reduction="max") - a)
    with sf.device("/device:GPU:0"):
        ts = [sf.constant(x) for x in xs]
        mean, stepped = reduce(*ts, reduction="mean"), step(*ts)
    assert mean.device == stepped.device == "/device:GPU:0"
    assert_same_bits(mean.numpy(), all_reduce_p.kernel(*xs, reduction="mean"))
    assert_same_bits(stepped.numpy(), all_reduce_p.kernel(*xs, reduction="max") - xs[0])


def test_ptxas_assembles_the_kernels(tmp_path):
    ptxas = ptxas_path()
    assert ptxas is not None, "ptxas (pip nvidia-cuda-nvcc) is part of the test extra"
    kernels = [gpu_kernel(element, reduction) for element, _, reduction in GPU_CASES]
    for index, kernel in enumerate(kernels):
        kernel.sym_name = type(kernel.sym_name)(f"update{index}")
    for arch in ARCHES:
        ptx = PTXTarget(arch).compile_many(kernels)
        assert ptx.count(".entry") == len(kernels)
        source = tmp_path / f"{arch}.ptx"
        source.write_text(ptx)
        result = subprocess.run([str(ptxas), f"-arch={arch}", str(source), "-o",
                                 str(source.with_suffix(".cubin"))],
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr


# --------------------------------------------------------------------------- gradients


def tape_gradients(xs: list[np.ndarray], reduction: str, cotangent: np.ndarray):
    inputs = [sf.constant(x) for x in xs]
    with sf.GradientTape() as tape:
        tape.watch(inputs)
        y = sf.reduce_sum(reduce(*inputs, reduction=reduction) * sf.constant(cotangent))
    return [g.numpy() for g in tape.gradient(y, inputs)]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@given(count=st.integers(1, 4), shape=shapes(max_dims=2), seed=st.integers(0, 2**32 - 1))
def test_gradients_match_finite_differences(reduction, count, shape, seed):
    """Generic values (no ties): each operand's gradient by central differences of
    sum(cotangent * all_reduce(...)) through the NumPy kernel."""
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(shape) for _ in range(count)]
    cotangent = rng.standard_normal(shape)
    grads = tape_gradients(xs, reduction, cotangent)
    for i, grad in enumerate(grads):
        def f(x, i=i):
            values = [*xs[:i], x, *xs[i + 1:]]
            return np.sum(cotangent * all_reduce_p.kernel(*values, reduction=reduction))

        assert grad.shape == shape and grad.dtype == np.float64
        np.testing.assert_allclose(grad, numeric_gradient(f, xs[i]), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("reduction", ["max", "min"])
def test_tied_operands_share_the_gradient_evenly(reduction):
    """Where k operands equal the result each gets 1/k of the cotangent (`maximum` gives
    half to each of two equal operands, as JAX); operands below (above) it get none, and
    no operand gets any where the result is NaN."""
    xs = [np.array([1.0, 2.0, 5.0, np.nan]), np.array([1.0, 2.0, 0.0, 1.0]),
          np.array([1.0, 0.0, 0.0, 2.0])]
    if reduction == "min":
        xs = [-x for x in xs]
    cotangent = np.array([3.0, 3.0, 3.0, 3.0])
    grads = tape_gradients(xs, reduction, cotangent)
    np.testing.assert_allclose(grads, [[1.0, 1.5, 3.0, 0.0], [1.0, 1.5, 0.0, 0.0],
                                       [1.0, 0.0, 0.0, 0.0]])
    pair = [sf.constant(x[:3]) for x in xs[:2]]
    with sf.GradientTape() as tape:
        tape.watch(pair)
        binary = (sf.maximum if reduction == "max" else sf.minimum)(*pair)
    np.testing.assert_allclose(tape_gradients([x[:3] for x in xs[:2]], reduction,
                                              np.ones(3)),
                               [g.numpy() for g in tape.gradient(binary, pair)])


def test_a_mean_of_complex_values_passes_g_over_n_and_integers_get_none():
    z = [sf.constant(np.array([1 + 2j, 3 - 1j])) for _ in range(4)]
    with sf.GradientTape() as tape:
        tape.watch(z)
        y = sf.reduce_sum(sf.math.real(reduce(*z, reduction="mean")))
    for g in tape.gradient(y, z):
        np.testing.assert_array_equal(g.numpy(), np.full(2, 0.25 + 0j))
    ints = [sf.constant(np.arange(3, dtype=np.int32)) for _ in range(2)]
    rule = all_reduce_p.vjp([sf.constant(np.ones(3, np.int32))], ints,
                            [reduce(*ints, reduction="sum")], reduction="sum")
    assert rule == [None, None]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_gradients_trace_and_differentiate_again(reduction):
    """The rule staged gives the eager gradient, and a second derivative is taken through
    it (that of a sum of squares: 2 * cotangent, summed over the replicas)."""
    rng = np.random.default_rng(5)
    xs = [sf.constant(rng.standard_normal((2, 3))) for _ in range(3)]

    def gradient(*xs):
        with sf.GradientTape() as tape:
            tape.watch(xs)
            y = sf.reduce_sum(reduce(*xs, reduction=reduction) ** 2)
        return tape.gradient(y, xs)

    eager = gradient(*xs)
    for staged in (sf.function(gradient, jit=False)(*xs), sf.function(gradient)(*xs)):
        for got, want in zip(staged, eager, strict=True):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    with sf.GradientTape() as outer:
        outer.watch(xs)
        total = functools.reduce(operator.add, [sf.reduce_sum(g) for g in gradient(*xs)])
    # d/dx_k of sum_i <1, dy/dx_i>: 2n for a sum, 2/n for a mean, 2 where x_k is the max
    # (min) for those (the selection itself has no derivative)
    result = reduce(*xs, reduction=reduction).numpy()
    for g, x in zip(outer.gradient(total, xs), xs, strict=True):
        want = {"sum": np.full((2, 3), 6.0), "mean": np.full((2, 3), 2.0 / 3)}.get(
            reduction, 2.0 * (x.numpy() == result))
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-12)


# ------------------------------------------------------------------------------ errors


def test_operands_of_different_shapes_or_dtypes_are_refused_naming_them():
    x = sf.constant(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"all_reduce\(float32\[2, 3\], float32\[3\]\): "
                                         r"operand 1 has shape \(3,\) and operand 0 \(2, 3\)"
                                         r".*does not broadcast") as error:
        reduce(x, sf.constant(np.zeros(3, np.float32)), reduction="sum")
    assert "test_collective.py" in str(error.value)  # the user's line
    with pytest.raises(TypeError, match=r"all_reduce\(.*\): operand 2 has dtype int32 and "
                                        r"operand 0 float32"):
        reduce(x, x, sf.constant(np.zeros((2, 3), np.int32)), reduction="sum")
    with pytest.raises(ValueError, match=r"all_reduce\(\): it takes one value per replica"):
        reduce(reduction="sum")


def test_a_reduction_it_does_not_know_or_a_dtype_it_does_not_take_is_refused():
    x = sf.constant(np.zeros(2, np.float32))
    with pytest.raises(ValueError, match=r"all_reduce\(float32\[2\]\): reduction must be one "
                                         r"of 'sum', 'mean', 'max', 'min', got 'prod'"):
        reduce(x, reduction="prod")
    ints = sf.constant(np.zeros(2, np.int32))
    with pytest.raises(TypeError, match=r"reduction 'mean': dtype int32 is not supported"):
        reduce(ints, ints, reduction="mean")
    z = sf.constant(np.zeros(2, np.complex64))
    with pytest.raises(TypeError, match=r"reduction 'max': dtype complex64 is not supported"):
        reduce(z, z, reduction="max")
    with pytest.raises(TypeError, match=r"reduction 'sum': dtype bool is not supported"):
        reduce(sf.constant([True]), reduction="sum")


def test_errors_while_staging_name_the_users_line():
    f = sf.function(lambda x, y: reduce(x, y, reduction="sum"))
    with pytest.raises(ValueError, match=r"(?s)all_reduce\(float32\[\?, 3\], float32\[\?, 4\]"
                                         r"\).*test_collective.py"):
        f.get_concrete_function(sf.TensorSpec([None, 3], sf.float32),
                                sf.TensorSpec([None, 4], sf.float32))


def test_unknown_dims_take_the_known_ones_and_must_agree_when_it_runs():
    """A dim one operand knows is the result's; values whose dims differ when the
    interpreter runs them are refused there, naming the op."""
    f = sf.function(lambda x, y: reduce(x, y, reduction="sum"), jit=False)
    concrete = f.get_concrete_function(sf.TensorSpec([None, 3], sf.float32),
                                       sf.TensorSpec([2, None], sf.float32))
    assert concrete.graph.outputs[0].type.shape == (2, 3)
    g = sf.function(lambda x, y: reduce(x, y, reduction="sum"), jit=False,
                    input_signature=[sf.TensorSpec([None], sf.float32)] * 2)
    with pytest.raises(ValueError, match=r"all_reduce.*different shapes \[\(1,\), \(3,\)\]"):
        g(np.ones(1, np.float32), np.ones(3, np.float32))
