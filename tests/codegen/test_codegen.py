"""Compiled elementwise kernels (CPU JIT, PTX) against the primitives' NumPy kernels.

Every elementwise primitive is compiled for every dtype it accepts and run on grids of
ordinary and special values (zeros, infinities, NaN, extremes); results must equal the
eager kernel (floats within a few ulps: rtol 1e-6 for f32, 1e-12 for f64; integers and
bools exactly). The math expansions the PTX target uses are checked on the CPU too
(`CPUTarget(libm=frozenset())`), since no GPU runs here; PTX text goes through ptxas.
"""

from __future__ import annotations

import functools
import platform
import re
import subprocess
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stageflow as sf
from stageflow.codegen import CPUTarget, PTXTarget, analyse, compile_kernel
from stageflow.codegen.targets.emulated import EmulatedLaunch
from stageflow.codegen.targets.indexed import gather_entry, reduce_entry, reduce_name
from stageflow.codegen.targets.ptx import ptxas_path
from stageflow.core import dtypes
from stageflow.core.primitive import REGISTRY, ShapedType
from stageflow.ir import parse_module
from stageflow.ir.types import tensor_type
from stageflow.primitives.elementwise import ElementwisePrimitive
from stageflow.primitives.reduction import MAX, MIN, PROD, SUM

F16, BF16, F32, F64 = dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64
I32, I64, U32, U64, BOOL = dtypes.int32, dtypes.int64, dtypes.uint32, dtypes.uint64, dtypes.bool_
C64, C128 = dtypes.complex64, dtypes.complex128
# (rtol, atol): a few ulps; atol only absorbs differences among subnormal results. Complex
# results are compared by the modulus of the difference (NumPy's allclose).
TOLERANCE = {F16: (2e-3, 1e-7), BF16: (8e-3, 1e-38), F32: (1e-6, 1.2e-38),
             F64: (1e-12, 2.3e-308), C64: (1e-6, 1.2e-38), C128: (1e-12, 2.3e-308)}
EXPANDED = CPUTarget(libm=frozenset())  # the math PTX runs, executed on the CPU
ELEMENTWISE = {name: p for name, p in REGISTRY.items() if isinstance(p, ElementwisePrimitive)}
UNARY = sorted(n for n, p in ELEMENTWISE.items() if p.shape_rule.__code__.co_argcount == 1)
BINARY = sorted(n for n, p in ELEMENTWISE.items() if p.shape_rule.__code__.co_argcount == 2)
TRANSCENDENTAL = ["exp", "expm1", "log", "log1p", "log2", "sin", "cos", "tanh", "logistic",
                  "erf", "atan", "asin", "acos", "erfinv", "lgamma", "digamma", "trigamma"]


def ir_type(shape: tuple[int | None, ...], dtype: np.dtype) -> str:
    return str(tensor_type(ShapedType(shape, dtype)))


def op_text(name: str, operands: list[tuple[tuple[int | None, ...], np.dtype]],
            params: dict | None = None, symbol: str | None = None) -> str:
    """A one-op kernel applying primitive `name`, its result type from the shape rule,
    named `symbol` (default ``NAME_kernel``)."""
    params = params or {}
    avals = [ShapedType(shape, dtype) for shape, dtype in operands]
    result = REGISTRY[name].shape_rule(*avals, **params)
    types = [ir_type(a.shape, a.dtype) for a in avals]
    out = ir_type(result.shape, result.dtype)
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(types))
    attrs = f" {{dtype = {ir_type((), params['dtype'])[7:-1]}}}" if "dtype" in params else ""
    uses = ", ".join(f"%a{i}" for i in range(len(types)))
    return (f"func.func @{symbol or f'{name}_kernel'}({args}) -> {out} {{\n"
            f"  %0 = sf.{name} {uses}{attrs} : ({', '.join(types)}) -> {out}\n"
            f"  func.return %0 : {out}\n}}")


def function(text: str):
    return parse_module(text).ops.first


@functools.cache
def compiled(text: str, target: CPUTarget | None = None):
    return (target or CPUTarget()).compile(function(text))


def reference(name: str, *arrays: np.ndarray, **params) -> np.ndarray:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return np.asarray(REGISTRY[name].kernel(*arrays, **params))


def assert_same(got: np.ndarray, want: np.ndarray, atol: float | None = None) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype in TOLERANCE:
        rtol, default_atol = TOLERANCE[want.dtype]
        if want.dtype.kind == "c":  # finite values by their distance, the others by parts
            finite = np.isfinite(want)
            pairs = [(got[finite].astype(C128), want[finite].astype(C128))]
            pairs += [(part(got[~finite]), part(want[~finite])) for part in (np.real, np.imag)]
        else:
            pairs = [(got.astype(np.float64), want.astype(np.float64))]
        for have, expected in pairs:
            np.testing.assert_allclose(have, expected, rtol=rtol, equal_nan=True,
                                       atol=default_atol if atol is None else atol)
    else:
        np.testing.assert_array_equal(got, want)


def values(dtype: np.dtype, count: int = 400, seed: int = 0) -> np.ndarray:
    """Ordinary values and every special one the dtype has, as a 1-D array."""
    rng = np.random.default_rng(seed)
    if dtype == BOOL:
        return np.array([True, False, True, True, False] * 3)
    if dtype in dtypes.COMPLEX:  # each part ordinary or special, beside every other
        real, imag = (values(dtypes.real_dtype(dtype), count, seed + k) for k in (0, 1))
        parts = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 1e-30, np.inf, -np.inf, np.nan])
        grid = np.meshgrid(parts, parts)
        z = np.empty(len(real) + grid[0].size, dtype)
        z.real = np.concatenate([real, grid[0].ravel()])
        z.imag = np.concatenate([imag[::-1], grid[1].ravel()])
        return z
    if dtype in dtypes.INTEGER:
        info = np.iinfo(dtype)
        positive = dtype in (U32, U64)
        lo = 0 if positive else -1000
        extremes = [info.min, info.max, info.min + 1, 0, 1, 2, 7, info.max - 1]
        extremes += [] if positive else [-1, -2, -7]
        wrapped = np.array([v % 2**64 for v in extremes], np.uint64)  # two's complement
        return np.concatenate([rng.integers(lo, 1000, count).astype(dtype),
                               wrapped.astype(dtype)])
    wide = rng.uniform(-12, 12, count)
    special = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 3.0, np.inf, -np.inf, np.nan,
               1e-30, -1e-30, 1e-7, 100.0, -100.0, 88.5, -87.0, 30.0, 700.0, -740.0]
    with np.errstate(over="ignore"):
        return np.concatenate([wide, special]).astype(dtype)


def unary_cases() -> list[tuple[str, np.dtype]]:
    return [(n, d) for n in UNARY for d in dtypes.ALL if d in ELEMENTWISE[n].operand_dtypes]


def binary_cases() -> list[tuple[str, np.dtype]]:
    return [(n, d) for n in BINARY for d in dtypes.ALL if d in ELEMENTWISE[n].operand_dtypes]


@pytest.mark.parametrize(("name", "dtype"), unary_cases(), ids=str)
def test_unary_matches_numpy(name: str, dtype: np.dtype) -> None:
    kernel = compiled(op_text(name, [((None,), dtype)]))
    x = values(dtype)
    atol = 1e-7 if name in ("sin", "cos") and dtype == F32 else None  # near their zeros
    assert_same(kernel(x)[0], reference(name, x), atol=atol)


@pytest.mark.parametrize("name", TRANSCENDENTAL + ["pow", "atan2"])
@pytest.mark.parametrize("dtype", [F16, BF16, F32, F64], ids=str)
def test_expansions_match_numpy(name: str, dtype: np.dtype) -> None:
    """The instruction-level math (PTX's, and the CPU's for exp/tanh/...) without libm."""
    operands = [((None,), dtype)] * (2 if name in ("pow", "atan2") else 1)
    kernel = compiled(op_text(name, operands), EXPANDED)
    x = values(dtype, 2000)
    if name in ("sin", "cos"):
        x = np.concatenate([x, np.linspace(-1e4, 1e4, 3001).astype(dtype)])
    args = {"pow": pow_operands(dtype), "atan2": (x, x[::-1].copy())}.get(name, (x,))
    atol = {F32: 1e-7, F64: 1e-15}.get(dtype) if name in ("sin", "cos") else None
    assert_same(kernel(*args)[0], reference(name, *args), atol=atol)


def test_float32_tanh_dense_bounds_and_signs() -> None:
    """float32 tanh is one rational on a clamped range (mathlib): its error bound in ulps over
    a dense grid, |tanh| <= 1 for every float where rounding could push it past 1, exact
    +-1 beyond the clamp and for infinities, -0.0 kept, NaN kept, exact oddness."""
    kernel = compiled(op_text("tanh", [((None,), F32)]), EXPANDED)
    top = np.float32(10.0).view(np.uint32)
    grid = np.arange(0, top, 257, dtype=np.uint32).view(np.float32)
    near_one = np.arange(np.float32(7.0).view(np.uint32), np.float32(9.1).view(np.uint32),
                         dtype=np.uint32).view(np.float32)
    x = np.concatenate([grid, near_one])
    got = kernel(x)[0]
    want = np.tanh(x.astype(np.float64))
    ulps = np.abs(got - want) / np.spacing(want.astype(np.float32)).astype(np.float64)
    assert ulps.max() < 6  # ~5.2 over every float in [0, 10]
    assert np.abs(got).max() == 1.0
    assert np.array_equal(kernel(-x)[0], -got)
    special = np.array([9.02, 9.5, 100.0, 3e38, np.inf, -np.inf, -100.0, -0.0, 0.0, -1e-45, np.nan],
                       np.float32)
    result = kernel(special)[0]
    assert np.array_equal(result[:7], [1, 1, 1, 1, 1, -1, -1])
    assert np.array_equal(np.signbit(result[7:10]), [True, False, True]) and result[9] == -1e-45
    assert np.isnan(result[10])


def pow_operands(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of special bases and exponents, then ordinary ones."""
    special = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 2.5, 10.0,
                        np.inf, -np.inf, np.nan])
    x, y = (a.ravel() for a in np.meshgrid(special, special))
    rng = np.random.default_rng(1)
    x = np.concatenate([x, rng.uniform(0, 20, 500), -rng.integers(1, 9, 100)])
    y = np.concatenate([y, rng.uniform(-6, 6, 500), rng.integers(-8, 9, 100)])
    return x.astype(dtype), y.astype(dtype)


def binary_operands(name: str, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    if name == "pow" and dtype in dtypes.FLOATING:
        return pow_operands(dtype)
    x, y = values(dtype, seed=1), values(dtype, seed=2)
    if name == "pow" and dtype in dtypes.INTEGER:
        x = x % 7 - (0 if dtype in (U32, U64) else 3)
        y = np.abs(y % 40)  # NumPy raises for negative integer powers
    if name == "shift_right_logical":
        y = np.abs(y % (8 * dtype.itemsize + 4)).astype(dtype)
    grid = np.meshgrid(x[-25:], y[-25:])  # every pair of the special values
    return (np.concatenate([x, grid[0].ravel()]).astype(dtype),
            np.concatenate([y, grid[1].ravel()]).astype(dtype))


@pytest.mark.parametrize(("name", "dtype"), binary_cases(), ids=str)
def test_binary_matches_numpy(name: str, dtype: np.dtype) -> None:
    kernel = compiled(op_text(name, [((None,), dtype)] * 2))
    x, y = binary_operands(name, dtype)
    assert_same(kernel(x, y)[0], reference(name, x, y))


@pytest.mark.parametrize(("name", "dtype"), [("add", F32), ("multiply", I32), ("mod", F64),
                                             ("floordiv", I64), ("less", F32),
                                             ("maximum", U32), ("logical_and", BOOL)],
                         ids=str)
@pytest.mark.parametrize(("xshape", "yshape"),
                         [((3, 4), (1, 4)), ((3, 1), (1, 4)), ((0, 4), (1, 4)),
                          ((2, 3), (2, 3)), ((1, 1), (5, 2)), ((4, 0), (4, 1))])
def test_broadcasting_binary(name, dtype, xshape, yshape) -> None:
    kernel = compiled(op_text(name, [((None, None), dtype)] * 2))
    x = values(dtype, 64, seed=3)[:int(np.prod(xshape))].reshape(xshape)
    y = values(dtype, 64, seed=4)[:int(np.prod(yshape))].reshape(yshape)
    assert_same(kernel(x, y)[0], reference(name, x, y))


@given(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=5),
       st.integers(0, 2**31))
def test_select_broadcasts_any_shapes(shapes, seed) -> None:
    cond_shape, x_shape, y_shape = shapes.input_shapes
    dynamic = [tuple([None] * len(s)) for s in (cond_shape, x_shape, y_shape)]
    # With an odd seed y is static: its dims are checked against the type, not the call.
    y_type = tuple(y_shape) if seed % 2 else dynamic[2]
    kernel = compiled(op_text("select", [(dynamic[0], BOOL), (dynamic[1], F32), (y_type, F32)]))
    rng = np.random.default_rng(seed)
    cond = rng.random(cond_shape) < 0.5
    x, y = (rng.standard_normal(s).astype(np.float32) for s in (x_shape, y_shape))
    assert_same(kernel(cond, x, y)[0], reference("select", cond, x, y))


@given(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4))
def test_add_broadcasts_any_shapes(shapes) -> None:
    xs, ys = shapes.input_shapes
    kernel = compiled(op_text("add", [(tuple([None] * len(xs)), I64),
                                      (tuple([None] * len(ys)), I64)]))
    x = np.arange(int(np.prod(xs)), dtype=np.int64).reshape(xs)
    y = (100 * np.arange(int(np.prod(ys)), dtype=np.int64)).reshape(ys)
    assert_same(kernel(x, y)[0], x + y)


def _around_2_63(x: np.ndarray) -> np.ndarray:
    """Floats for a uint64 cast: `x` and values on both sides of 2**63 (where x86 has no
    unsigned conversion), all finite and in (-2**63, 2**64), where NumPy's result is the
    value truncated (negatives wrapped as through int64)."""
    big = np.array([2.0**63 - 1024, 2.0**63, 2.0**63 + 2048, 1.8e19, 2.0**64 - 2048])
    with np.errstate(over="ignore"):
        x = np.concatenate([x, big.astype(x.dtype)])
    real = np.real(x).astype(np.float64)
    return x[np.isfinite(x) & (real > -2.0**63) & (real < 2.0**64)]


@pytest.mark.parametrize("source", dtypes.ALL, ids=str)
@pytest.mark.parametrize("target", dtypes.ALL, ids=str)
def test_cast_matches_numpy(source: np.dtype, target: np.dtype) -> None:
    kernel = compiled(op_text("cast", [((None,), source)], {"dtype": target}))
    x = values(source)
    if source in dtypes.FLOATING + dtypes.COMPLEX and target == dtypes.uint32:
        # Out of range, NumPy's uint32 result follows no rule: test in range only.
        x = x[np.isfinite(x) & (np.abs(np.real(x).astype(np.float64)) < 2e9)]
    if source in dtypes.FLOATING + dtypes.COMPLEX and target == U64:
        x = _around_2_63(x)
    # Signed targets are tested on everything: NaN, infinities and values out of range give
    # INT_MIN, as NumPy's cast does on x86 (eager results).
    if source in dtypes.INTEGER and target == BF16:
        x = x[np.abs(x.astype(np.float64)) < 2**24]  # exact in float32 (no double rounding)
    if source == F64 and target == F16:  # values that round differently through float32
        x = np.concatenate([x, [1 + 2**-11 + 2**-40, 1 + 2**-11 - 2**-40, 65519.99, 6e-8]])
    assert_same(kernel(x)[0], reference("cast", x, dtype=target))


@pytest.mark.parametrize("dtype", [F32, I32, BOOL, F16], ids=str)
def test_zero_dimensional_and_scalar_constants(dtype: np.dtype) -> None:
    t = ir_type((), dtype)
    text = (f"func.func @scalar(%x: {t}, %y: {t}) -> ({t}, {t}) {{\n"
            f"  %c = sf.constant dense<1> : tensor<4x{t[7:]}\n"
            f"  %0 = sf.equal %x, %y : ({t}, {t}) -> {ir_type((), BOOL)}\n"
            f"  %1 = sf.select %0, %x, %y : ({ir_type((), BOOL)}, {t}, {t}) -> {t}\n"
            f"  func.return %1, %x : {t}, {t}\n}}")
    kernel = compiled(text)
    x, y = np.array(values(dtype)[2]), np.array(values(dtype)[3])
    out, same = kernel(x, y)
    assert out.shape == () and same.shape == ()
    assert_same(out, np.where(x == y, x, y))
    assert_same(same, x)


def test_dynamic_dims_with_several_sizes() -> None:
    text = """func.func @affine(%x: tensor<?x4xf32>, %b: tensor<4xf32>) -> tensor<?x4xf32> {
      %c = sf.constant dense<2.5> : tensor<f32>
      %0 = sf.multiply %x, %c : (tensor<?x4xf32>, tensor<f32>) -> tensor<?x4xf32>
      %1 = sf.add %0, %b : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
      func.return %1 : tensor<?x4xf32>
    }"""
    kernel = compiled(text)
    b = np.array([1, -2, 3, -4], np.float32)
    for rows in (0, 1, 2, 7, 1000):
        x = np.random.default_rng(rows).standard_normal((rows, 4)).astype(np.float32)
        assert_same(kernel(x, b)[0], x * np.float32(2.5) + b)


def fused_gelu(x, w, b):
    """The benchmark's expression: gelu_tanh(x * w + b) * 0.5 + x."""
    c = float(np.sqrt(2.0 / np.pi))
    z = x * w + b
    tanh = sf.tanh if isinstance(z, sf.Tensor) else np.tanh
    return 0.5 * z * (1.0 + tanh(c * (z + 0.044715 * z * z * z))) * 0.5 + x


@pytest.mark.parametrize("target", [CPUTarget(), EXPANDED], ids=["cpu", "expanded"])
def test_traced_fused_chain(target: CPUTarget) -> None:
    spec = sf.TensorSpec([None], sf.float32)
    text = sf.function(fused_gelu).get_concrete_function(spec, spec, spec).ir("traced")
    kernel = target.compile(function(text))
    rng = np.random.default_rng(0)
    for n in (0, 1, 17, 100_003):
        x, w, b = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
        got = kernel(x, w, b)[0]
        np.testing.assert_allclose(got, fused_gelu(x, w, b), rtol=1e-5, atol=1e-6)


def test_static_broadcast_kernel_vectorises() -> None:
    text = op_text("multiply", [((64, 256), F32), ((256,), F32)])
    optimized = str(CPUTarget().optimized(function(text)))
    assert re.search(r"fmul <(4|8|16) x float>", optimized)
    if platform.machine() in ("x86_64", "AMD64"):
        assembly = CPUTarget().assembly(function(text))
        assert re.search(r"mulps\s+.*%[xyz]mm", assembly)
    kernel = compiled(text)
    x, y = np.ones((64, 256), np.float32) * 3, np.arange(256, dtype=np.float32)
    assert_same(kernel(x, y)[0], x * y)


def test_flat_loop_vectorises_with_dynamic_dims() -> None:
    optimized = str(CPUTarget().optimized(function(op_text("tanh", [((None,), F32)]))))
    assert re.search(r"<(4|8|16) x float>", optimized)
    assert "tanhf" not in optimized  # expanded inline, not a libm call per element


# -- wrong inputs: Python exceptions, never a crash ------------------------------------------

KERNEL = op_text("add", [((None, 4), F32), ((4,), F32)])


def test_wrong_dtype_names_the_argument() -> None:
    kernel = compiled(KERNEL)
    with pytest.raises(TypeError, match=r"argument %a1 .* expected dtype float32, got float64"):
        kernel(np.ones((2, 4), np.float32), np.ones(4))


def test_wrong_rank_and_dims_raise() -> None:
    kernel = compiled(KERNEL)
    with pytest.raises(ValueError, match="expected rank 2"):
        kernel(np.ones(4, np.float32), np.ones(4, np.float32))
    with pytest.raises(ValueError, match="dim 1 must be 4"):
        kernel(np.ones((2, 3), np.float32), np.ones(4, np.float32))
    with pytest.raises(TypeError, match="takes 2 arguments, got 1"):
        kernel(np.ones((2, 4), np.float32))


def test_inconsistent_broadcast_raises() -> None:
    kernel = compiled(op_text("add", [((None,), F32), ((None,), F32)]))
    with pytest.raises(ValueError, match=r"do not broadcast together: .*\(3,\).*\(4,\)"):
        kernel(np.ones(3, np.float32), np.ones(4, np.float32))


def test_strided_and_byteswapped_inputs_are_converted() -> None:
    kernel = compiled(KERNEL)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)[:, ::2]
    b = np.arange(4, dtype=">f4")
    assert_same(kernel(x, b)[0], x + b.astype(np.float32))
    with pytest.raises(TypeError, match="argument %a0 .* got float64"):
        kernel(x.tolist(), b)  # a list of Python floats is float64: no silent narrowing


def test_raw_abi_rejects_inconsistent_dims_without_touching_memory() -> None:
    kernel = compiled(op_text("add", [((None,), F32), ((None,), F32)]))
    x, y, out = (np.zeros(4, np.float32) for _ in range(3))
    assert kernel.raw([x, y, out], [4, 4, 4]) == 0
    assert kernel.raw([x, y, out], [3, 4, 4]) == 2  # arg 0 decides 3: arg 1 has 4
    assert kernel.raw([x, y, out], [4, 4, -1]) == 3
    assert kernel.raw([x, y, out], [1, 1, 1]) == 0
    static = compiled(KERNEL)
    assert static.raw([np.zeros((2, 4), np.float32), y, np.zeros((2, 4), np.float32)],
                      [2, 5, 4, 2, 4]) == 1


def test_kernels_with_unsupported_ops_are_rejected() -> None:
    reduce = """func.func @r(%x: tensor<4xf32>) -> tensor<i64> {
      %0 = sf.argmax %x {axis = 0} : (tensor<4xf32>) -> tensor<i64>
      func.return %0 : tensor<i64>
    }"""
    with pytest.raises(NotImplementedError, match="sf.argmax is not an elementwise op"):
        analyse(function(reduce))
    constant = """func.func @c(%x: tensor<2xf32>) -> tensor<2xf32> {
      %c = sf.constant dense<[1.0, 2.0]> : tensor<2xf32>
      %0 = sf.add %x, %c : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      func.return %0 : tensor<2xf32>
    }"""
    with pytest.raises(NotImplementedError, match="not 0-d or a splat"):
        analyse(function(constant))


def test_kernels_of_the_same_name_do_not_clash() -> None:
    first = compile_kernel(function(op_text("negative", [((None,), F32)])))
    text = op_text("negative", [((None,), F32)]).replace("sf.negative", "sf.abs")
    second = compile_kernel(function(text))
    x = np.array([-1.0, 2.0], np.float32)
    assert_same(first(x)[0], -x)
    assert_same(second(x)[0], np.abs(x))


def test_bfloat16_rounds_to_nearest_even() -> None:
    kernel = compiled(op_text("add", [((None,), BF16)] * 2))
    x = np.array([1, 1, 256, 3e38, np.nan], dtype=ml_dtypes.bfloat16)
    y = np.array([2**-8, 3 * 2**-8, 1, 3e38, 0], dtype=ml_dtypes.bfloat16)
    assert_same(kernel(x, y)[0], reference("add", x, y))


# -- PTX -------------------------------------------------------------------------------------

PTX_FAMILIES = {
    "unary_f32": [(n, [((None,), F32)]) for n in UNARY if F32 in ELEMENTWISE[n].operand_dtypes],
    "unary_f64": [(n, [((None,), F64)]) for n in TRANSCENDENTAL + ["round", "sqrt", "sign"]],
    "unary_int": [(n, [((None,), d)]) for n in UNARY for d in dtypes.INTEGER
                  if d in ELEMENTWISE[n].operand_dtypes],
    "half": [(n, [((None,), d)]) for n in ("tanh", "exp", "erf") for d in (F16, BF16)],
    "binary_f32": [(n, [((None, 8), F32), ((8,), F32)]) for n in BINARY
                   if F32 in ELEMENTWISE[n].operand_dtypes],
    "binary_int": [(n, [((None,), d)] * 2) for n in BINARY for d in dtypes.INTEGER
                   if d in ELEMENTWISE[n].operand_dtypes],
    "logic": [(n, [((None,), BOOL)] * 2) for n in ("logical_and", "logical_or", "equal")],
    "select": [("select", [((None, None), BOOL), ((None, None), F32), ((), F32)])],
    "cast": [("cast", [((4,), s)]) for s in dtypes.ALL],
}


def ptx_kernels(family: str) -> list[str]:
    """The family's kernels, each named after its op and its index in the family, so that
    they are distinct ``.entry`` functions of one PTX module."""
    texts = []
    for name, operands in PTX_FAMILIES[family]:
        for params in ([{"dtype": t} for t in dtypes.ALL] if name == "cast" else [None]):
            texts.append(op_text(name, operands, params, f"{name}_kernel{len(texts)}"))
    return texts


def assembles(ptx: str, arch: str, folder: Path) -> subprocess.CompletedProcess:
    """ptxas on `ptx` for `arch` (one process for a whole module)."""
    ptxas = ptxas_path()
    assert ptxas is not None, "ptxas not found: install the test extra (nvidia-cuda-nvcc)"
    source = folder / f"module_{arch}.ptx"
    source.write_text(ptx)
    return subprocess.run([str(ptxas), f"-arch={arch}", str(source), "-o",
                           str(source.with_suffix(".cubin"))], capture_output=True, text=True)


# Every family for sm_90 (H100, H200); for sm_80 the families of half-precision arithmetic
# and of conversions, where the two instruction sets differ: elsewhere LLVM emits the same
# PTX for both but for its header.
PTX_CASES = [(family, "sm_90") for family in sorted(PTX_FAMILIES)]
PTX_CASES += [("cast", "sm_80"), ("half", "sm_80")]


@pytest.mark.parametrize(("family", "arch"), PTX_CASES)
def test_ptx_assembles(family: str, arch: str, tmp_path: Path) -> None:
    """Every kernel of the family as one PTX module (one LLVM pipeline, one ptxas process):
    an ``.entry`` each, each reading its thread index, and ptxas accepts them all."""
    texts = ptx_kernels(family)
    ptx = PTXTarget(arch).compile_many([function(text) for text in texts])
    assert f".target {arch}" in ptx
    entries = dict(re.findall(r"\.entry (\w+)\((.*?)\n}", ptx, re.DOTALL))
    assert sorted(entries) == sorted(function(text).sym_name.data for text in texts)
    for name, body in entries.items():
        assert "%tid.x" in body, name
    result = assembles(ptx, arch, tmp_path)
    assert result.returncode == 0, result.stderr


def test_ptx_uses_global_loads_and_the_kernel_annotation() -> None:
    text = op_text("multiply", [((None,), F32)] * 2)
    llvm_ir = PTXTarget().emit(function(text))
    assert "ptx_kernel" in llvm_ir and '!"kernel"' in llvm_ir and "nvvm.annotations" in llvm_ir
    ptx = PTXTarget().compile(function(text))
    assert "ld.global" in ptx and "st.global" in ptx and "mul.rn.f32" in ptx
    assert "%ctaid.x" in ptx and "%ntid.x" in ptx and "%nctaid.x" in ptx


def test_ptx_rejects_unknown_arch() -> None:
    with pytest.raises(ValueError, match="sm_80, sm_90"):
        PTXTarget("sm_70")


# -- emulated GPU launches --------------------------------------------------------------------
# The LLVM IR each PTX kernel is made from, compiled for this CPU and launched over grids of
# blocks and threads (`EmulatedLaunch`): every elementwise op, every dtype, and broadcasting
# must give eager's numbers however the grid is cut (one thread for everything, a grid
# smaller than the array so that threads loop, more threads than elements).

GRIDS = [(1, 1), (3, 32), (64, 128)]


@functools.cache
def emulated(text: str):
    return EmulatedLaunch().compile(function(text))


def launch(kernel, inputs: list[np.ndarray], like: np.ndarray) -> list[np.ndarray]:
    """The kernel's output on every grid of `GRIDS` (outputs start as garbage)."""
    results = []
    for grid, block in GRIDS:
        out = np.full(like.shape, 7, like.dtype)
        kernel.launch(inputs, [out], grid, block)
        results.append(out)
    return results


@pytest.mark.parametrize(("name", "dtype"), unary_cases(), ids=str)
def test_emulated_unary_matches_eager(name: str, dtype: np.dtype) -> None:
    x = values(dtype)
    want = reference(name, x)
    atol = {F32: 1e-7, F64: 1e-15}.get(dtype) if name in ("sin", "cos") else None
    for got in launch(emulated(op_text(name, [((None,), dtype)])), [x], want):
        assert_same(got, want, atol=atol)


@pytest.mark.parametrize(("name", "dtype"), binary_cases(), ids=str)
def test_emulated_binary_matches_eager(name: str, dtype: np.dtype) -> None:
    x, y = binary_operands(name, dtype)
    want = reference(name, x, y)
    for got in launch(emulated(op_text(name, [((None,), dtype)] * 2)), [x, y], want):
        assert_same(got, want)


@pytest.mark.parametrize("source", dtypes.ALL, ids=str)
@pytest.mark.parametrize("target", [F16, BF16, F32, I32, U32, U64, BOOL], ids=str)
def test_emulated_cast_matches_eager(source: np.dtype, target: np.dtype) -> None:
    x = values(source)
    if source in dtypes.FLOATING + dtypes.COMPLEX and target == U32:
        x = x[np.isfinite(x) & (np.abs(np.real(x).astype(np.float64)) < 2e9)]
    if source in dtypes.FLOATING + dtypes.COMPLEX and target == U64:
        x = _around_2_63(x)
    if source in dtypes.INTEGER and target == BF16:
        x = x[np.abs(x.astype(np.float64)) < 2**24]
    want = reference("cast", x, dtype=target)
    kernel = emulated(op_text("cast", [((None,), source)], {"dtype": target}))
    for got in launch(kernel, [x], want):
        assert_same(got, want)


@given(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=5),
       st.integers(0, 2**31), st.sampled_from(GRIDS))
def test_emulated_select_broadcasts_any_shapes(shapes, seed, grid) -> None:
    cond_shape, x_shape, y_shape = shapes.input_shapes
    dynamic = [tuple([None] * len(s)) for s in (cond_shape, x_shape, y_shape)]
    kernel = emulated(op_text("select", [(dynamic[0], BOOL), (dynamic[1], F32),
                                         (dynamic[2], F32)]))
    rng = np.random.default_rng(seed)
    cond = rng.random(cond_shape) < 0.5
    x, y = (rng.standard_normal(s).astype(np.float32) for s in (x_shape, y_shape))
    want = reference("select", cond, x, y)
    out = np.full(want.shape, np.nan, np.float32)
    kernel.launch([cond, x, y], [out], *grid)
    assert_same(out, want)


def test_emulated_launch_of_inconsistent_dims_writes_nothing() -> None:
    kernel = emulated(op_text("add", [((None,), F32)] * 2))
    out = np.full(3, 7.0, np.float32)
    kernel.launch([np.ones(3, np.float32), np.ones(4, np.float32)], [out], 2, 8)
    assert np.array_equal(out, [7.0, 7.0, 7.0])  # every thread returned at once


def test_emulated_launch_checks_its_arguments() -> None:
    kernel = emulated(op_text("add", [((None,), F32)] * 2))
    with pytest.raises(TypeError, match="takes 3 arrays, got 2"):
        kernel.launch([np.ones(3, np.float32)], [np.empty(3, np.float32)], 1, 1)
    with pytest.raises(ValueError, match="at least one block"):
        kernel.launch([np.ones(3, np.float32)] * 2, [np.empty(3, np.float32)], 0, 1)
    with pytest.raises(ValueError, match="C-contiguous"):
        kernel.launch([np.ones(3, np.float32)] * 2, [np.empty(6, np.float32)[::2]], 1, 1)


def test_emulated_kernels_are_the_ptx_kernels() -> None:
    """The emulated module holds the same thread function as the PTX one: same checks,
    same loop, same math (no libm), only the registers and address space differ."""
    text = op_text("tanh", [((None,), F32)])
    ptx_ir = PTXTarget().emit(function(text))
    host_ir = str(EmulatedLaunch().module(analyse(function(text)), "tanh_launch"))
    assert "llvm.nvvm.read.ptx.sreg" in ptx_ir and "llvm.nvvm" not in host_ir
    assert "tanhf" not in host_ir
    assert ptx_ir.count("fmul") == host_ir.count("fmul")


def test_ptx_entry_names_are_identifiers(tmp_path: Path) -> None:
    """A kernel of a lambda is named ``<lambda>_kernel0``: as a PTX symbol NVPTX would abort
    the process on it, so the entry gets a sanitised name, which ptxas accepts."""
    text = op_text("exp", [((None,), F32)]).replace("@exp_kernel", '@"<lambda>_kernel0"')
    ptx = PTXTarget().compile(function(text))
    assert ".entry _lambda__kernel0(" in ptx
    result = assembles(ptx, "sm_80", tmp_path)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptxas_accepts_the_index_map_kernels(arch: str, tmp_path: Path) -> None:
    """The gather kernel for every element width and the reduce kernel's pass, through an
    index map and in order, for every kind and native dtype
    (`stageflow.codegen.targets.indexed`), all as one PTX module (one ptxas process)."""
    target = PTXTarget(arch)
    builders = [(f"gather_i{bits}", gather_entry(bits)) for bits in (8, 16, 32, 64)]
    builders += [(reduce_name(kind, dtype, mapped), reduce_entry(kind, dtype, mapped))
                 for kind in (SUM, PROD, MAX, MIN)
                 for dtype in sorted(kind.native_dtypes, key=str) for mapped in (True, False)]
    ptx = target.assemble([str(target.entry_module(name, build)) for name, build in builders])
    assert sorted(re.findall(r"\.entry (\w+)\(", ptx)) == sorted(name for name, _ in builders)
    result = assembles(ptx, arch, tmp_path)
    assert result.returncode == 0, result.stderr
