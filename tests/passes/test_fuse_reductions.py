"""Reductions fused into the kernels of their elementwise producers: the IR after `fuse`
holds one kernel computing the elementwise ops and the reduction, and the compiled result
equals NumPy's, the eager one and the interpreter's (`jit=False`), for static and unknown
dims, keepdims or not, one axis or several, and under a gradient tape."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.func import FuncOp

import stageflow as sf
from stageflow.codegen import analyse
from stageflow.ir import parse_module
from stageflow.passes.fuse import is_kernel

RTOL = {np.float32: 1e-6, np.float64: 1e-12}


def _kernels(function, *args) -> list[FuncOp]:
    module = parse_module(function.get_concrete_function(*args).ir("optimized"))
    return [op for op in module.ops if isinstance(op, FuncOp) and is_kernel(op)]


def _reduction_names(kernel: FuncOp) -> list[str]:
    return [op.name for op in kernel.body.block.ops if op.name.startswith("sf.reduce_")]


def _check(f, reference, *args: np.ndarray, rtol: float | None = None) -> None:
    """Compiled, interpreted, eager and NumPy results agree."""
    dtype = args[0].dtype.type
    rtol = rtol if rtol is not None else RTOL.get(dtype, 0)
    expected = reference(*args)
    compiled = sf.function(f)(*args).numpy()
    interpreted = sf.function(f, jit=False)(*args).numpy()
    eager = f(*[sf.constant(a) for a in args]).numpy()
    for got in (compiled, interpreted, eager):
        assert got.shape == expected.shape and got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(compiled, eager, rtol=rtol, atol=rtol)


def _sum_of_squares(x):
    return sf.reduce_sum(x * x, axis=1)


def _max_of_tanh(x, b):
    return sf.reduce_max(sf.tanh(x) + b, axis=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_of_squares_is_one_kernel_and_matches_numpy(dtype) -> None:
    x = np.random.default_rng(0).standard_normal((37, 203)).astype(dtype)
    [kernel] = _kernels(sf.function(_sum_of_squares), x)
    assert _reduction_names(kernel) == ["sf.reduce_sum"]
    assert [op.name for op in kernel.body.block.ops][0] == "sf.multiply"
    _check(_sum_of_squares, lambda x: (x * x).sum(axis=1), x)


def test_max_over_the_leading_axis_is_one_kernel_and_matches_numpy() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 33)).astype(np.float32)
    b = rng.standard_normal(33).astype(np.float32)
    [kernel] = _kernels(sf.function(_max_of_tanh), x, b)
    assert _reduction_names(kernel) == ["sf.reduce_max"]
    _check(_max_of_tanh, lambda x, b: (np.tanh(x) + b).max(axis=0), x, b)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axes", [(0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)])
def test_keepdims_and_several_axes(keepdims, axes) -> None:
    x = np.random.default_rng(2).standard_normal((5, 6, 19))

    def f(x):
        return sf.reduce_sum(sf.exp(x) * 0.5 - x, axis=axes, keepdims=keepdims)

    [kernel] = _kernels(sf.function(f), x)
    assert _reduction_names(kernel) == ["sf.reduce_sum"]
    _check(f, lambda x: (np.exp(x) * 0.5 - x).sum(axis=axes, keepdims=keepdims), x)


def test_unknown_dims_compile_once_and_match_numpy() -> None:
    spec = sf.TensorSpec([None, 8], sf.float32)
    f = sf.function(_sum_of_squares, input_signature=[spec])
    [kernel] = _kernels(f, spec)
    assert _reduction_names(kernel) == ["sf.reduce_sum"]
    for rows in (0, 1, 3, 1000):
        x = np.random.default_rng(rows).standard_normal((rows, 8)).astype(np.float32)
        np.testing.assert_allclose(f(x).numpy(), (x * x).sum(axis=1), rtol=1e-6, atol=1e-6)


def test_a_reduced_value_with_other_users_keeps_its_reduction_a_step() -> None:
    def softmax(x):
        e = sf.exp(x - sf.reduce_max(x, axis=-1, keepdims=True))
        return e / sf.reduce_sum(e, axis=-1, keepdims=True)

    x = np.random.default_rng(3).standard_normal((16, 1000)).astype(np.float32)
    kernels = _kernels(sf.function(softmax), x)
    assert [_reduction_names(k) for k in kernels] == [[], []]  # exp's value is written

    def reference(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    _check(softmax, reference, x)


@pytest.mark.parametrize("rows", [3, 700])
def test_a_written_value_with_column_sums_is_one_kernel(rows) -> None:
    def f(x, m):
        g = x * m
        return g, sf.reduce_sum(g, axis=0)

    rng = np.random.default_rng(8)
    x, m = (rng.standard_normal((rows, 256)).astype(np.float32) for _ in range(2))
    [kernel] = _kernels(sf.function(f), x, m)
    assert _reduction_names(kernel) == ["sf.reduce_sum"]
    assert len(kernel.function_type.outputs.data) == 2
    for g, s in (sf.function(f)(x, m), sf.function(f, jit=False)(x, m)):
        np.testing.assert_array_equal(g.numpy(), x * m)
        np.testing.assert_allclose(s.numpy(), (x * m).sum(axis=0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch", [1, 6])
def test_reductions_of_several_values_of_one_group_are_one_kernel(batch) -> None:
    """Batch norm's backward sums: the gradient (written as well) and its product with the
    normalised input (only summed) reduced over N, H and W in one loop, beside a value the
    sums do not need."""
    def f(d, m, gamma, xhat):
        g = d * m
        gx = g * xhat
        return g * gamma, sf.reduce_sum(g, axis=[0, 1, 2]), sf.reduce_sum(gx, axis=[0, 1, 2])

    rng = np.random.default_rng(9)
    d, m, xhat = (rng.standard_normal((batch, 5, 7, 16)).astype(np.float32) for _ in range(3))
    gamma = rng.standard_normal(16).astype(np.float32)
    [kernel] = _kernels(sf.function(f), d, m, gamma, xhat)
    assert _reduction_names(kernel) == ["sf.reduce_sum", "sf.reduce_sum"]
    g = d * m
    want = (g * gamma, g.sum(axis=(0, 1, 2)), (g * xhat).sum(axis=(0, 1, 2)))
    for staged in (sf.function(f), sf.function(f, jit=False)):
        for got, expected in zip(staged(d, m, gamma, xhat), want, strict=True):
            np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("kind", ["sum", "prod", "max", "min"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint16, np.uint32, np.uint64])
def test_integer_and_bool_derived_reductions_are_exact(kind, dtype) -> None:
    x = np.random.default_rng(4).integers(0, 5, (9, 21)).astype(dtype)
    op = getattr(sf, f"reduce_{kind}")

    def f(x):
        return op(sf.cast(x > 2, x.dtype) + x, axis=1)

    [kernel] = _kernels(sf.function(f), x)
    assert _reduction_names(kernel) == [f"sf.reduce_{kind}"]
    _check(f, lambda x: getattr(np, kind)((x > 2).astype(dtype) + x, axis=1).astype(dtype), x,
           rtol=0)


def test_leading_axis_reductions_are_not_split_by_rows() -> None:
    """Large enough to run as row-parallel steps: the kernel that reduces rows into one
    row is compiled whole; the one reducing each row is split."""
    x = np.random.default_rng(5).standard_normal((4096, 600)).astype(np.float32)

    def f(x):
        return sf.reduce_sum(x * x, axis=0), sf.reduce_max(sf.abs(x) * 2.0, axis=1)

    columns, rows = sf.function(f)(x)
    np.testing.assert_allclose(columns.numpy(), (x * x).sum(axis=0), rtol=1e-5)
    np.testing.assert_allclose(rows.numpy(), (np.abs(x) * 2.0).max(axis=1), rtol=0)


def test_gradients_through_a_fused_reduction_match_eager() -> None:
    x = np.random.default_rng(6).standard_normal((8, 13)).astype(np.float64)

    def loss(x):
        return sf.reduce_sum(sf.reduce_max(sf.tanh(x) * x, axis=1) + sf.reduce_sum(x * x,
                                                                                   axis=1))

    staged = sf.function(loss)
    grads = []
    for function in (staged, loss):
        variable = sf.constant(x)
        with sf.GradientTape() as tape:
            tape.watch(variable)
            value = function(variable)
        grads.append((value.numpy(), tape.gradient(value, variable).numpy()))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-12)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-12)


def test_ptx_pipeline_keeps_reductions_out_of_kernels() -> None:
    artefact = sf.aot.compile(sf.function(_sum_of_squares),
                              sf.TensorSpec([None, 8], sf.float32), target="ptx")
    assert ".entry" in artefact.ptx


@st.composite
def _cases(draw):
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=rank, max_size=rank)))
    axes = tuple(sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1))))
    dtype = draw(st.sampled_from([np.float32, np.float64, np.int32, np.int64]))
    kind = draw(st.sampled_from(["sum", "max", "min"]))
    keepdims = draw(st.booleans())
    return shape, axes, dtype, kind, keepdims


@settings(max_examples=25, deadline=None)
@given(_cases(), st.integers(0, 2**16))
def test_random_shapes_axes_and_dtypes_match_numpy(case, seed) -> None:
    shape, axes, dtype, kind, keepdims = case
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    op = getattr(sf, f"reduce_{kind}")

    def f(x):
        return op(x * x - x, axis=axes, keepdims=keepdims)

    kernels = _kernels(sf.function(f), x)
    assert [_reduction_names(k) for k in kernels] == [[f"sf.reduce_{kind}"]]
    assert analyse(kernels[0]).reductions[0].axes == axes
    _check(f, lambda x: getattr(np, kind)(x * x - x, axis=axes, keepdims=keepdims).astype(dtype),
           x,
           rtol=1e-5 if dtype == np.float32 else 1e-12 if dtype == np.float64 else 0)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # NumPy's NaN in halves
@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("dtype", [sf.float16, sf.bfloat16])
def test_half_float_max_and_min_end_a_kernel_exactly(kind, dtype) -> None:
    """A half max or min (combined in float32, stored back exactly) ends the kernel of its
    producers, along the rows and across them; each element is rounded to the dtype as
    the eager ops round it, so the results are eager's, NaN and infinities among them."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((40, 75)).astype(dtype)
    b = rng.standard_normal(75).astype(dtype)
    x[3, 5], x[7, :], x[9, 70] = np.nan, np.inf, -np.inf
    op = getattr(sf, f"reduce_{kind}")
    for axis in (0, 1, (0, 1)):
        def f(x, b, axis=axis):
            return op(sf.abs(x) * 2.0 - b, axis=axis)

        [kernel] = _kernels(sf.function(f), x, b)
        assert _reduction_names(kernel) == [f"sf.reduce_{kind}"]
        want = f(sf.constant(x), sf.constant(b)).numpy()
        for got in (sf.function(f)(x, b).numpy(), sf.function(f, jit=False)(x, b).numpy()):
            assert got.dtype == dtype and got.shape == want.shape
            np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


@pytest.mark.parametrize("dtype", [sf.bfloat16, sf.float16])
@pytest.mark.parametrize("axes", [0, -1, (0, 1)])
def test_half_float_sums_accumulate_in_float32_in_one_program(dtype, axes) -> None:
    """A half-float sum is a float32 one between casts (`simplify`): the program compiles
    whole (it ran op by op, the sum having no lowering of its own), the cast in fuses with
    its producer and the sum, and the result is the eager sum's: float32 sums of the same
    elements rounded once to the half dtype, which summation order can move by one ulp."""
    x = sf.cast(sf.constant(np.random.default_rng(4).standard_normal((33, 50)) * 3), dtype)

    def f(x):
        return sf.reduce_sum(x * x, axes)

    staged = sf.function(f)
    assert staged.get_concrete_function(x).stats()["steps_reasons"] == {}
    assert any("sf.reduce_sum" in _reduction_names(k) for k in _kernels(staged, x))
    got, want = staged(x), f(x)
    assert got.dtype == want.dtype == dtype
    np.testing.assert_allclose(got.numpy().astype(np.float32),
                               want.numpy().astype(np.float32), rtol=2**-7)
