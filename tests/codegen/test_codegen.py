"""Compiled elementwise kernels (CPU JIT, PTX) against the primitives' NumPy kernels.

Representatives of the kernel matrix (`stageflow.testing.kernel_matrix`: every elementwise
primitive for every dtype it accepts, on ordinary and special values, against the eager
kernel; floats within a few ulps, integers and bools exactly), broadcasting, the C ABI's
checks, and PTX. The math expansions the PTX target uses are checked on the CPU too
(`CPUTarget(libm=frozenset())`), since no GPU runs here; PTX text goes through ptxas.
"""

from __future__ import annotations

import functools
import platform
import re
import subprocess
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
from stageflow.codegen.targets.indexed import gather_entry, put_entry, reduce_entry, reduce_name
from stageflow.codegen.targets.ptx import ptxas_path
from stageflow.core import dtypes
from stageflow.primitives.reduction import MAX, MIN, PROD, SUM
from stageflow.testing import kernel_matrix as km
from stageflow.testing.campaign import read_counts
from stageflow.testing.kernel_matrix import (
    BINARY,
    ELEMENTWISE,
    UNARY,
    assert_same,
    function,
    ir_type,
    op_text,
    pow_operands,
    reference,
    values,
)

F16, BF16, F32, F64 = dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64
I32, I64, U32, U64, BOOL = dtypes.int32, dtypes.int64, dtypes.uint32, dtypes.uint64, dtypes.bool_
EXPANDED = CPUTarget(libm=frozenset())  # the math PTX runs, executed on the CPU
TRANSCENDENTAL = ["exp", "expm1", "log", "log1p", "log2", "sin", "cos", "tanh", "logistic",
                  "erf", "atan", "asin", "acos", "erfinv", "lgamma", "digamma", "trigamma"]


@functools.cache
def compiled(text: str, target: CPUTarget | None = None):
    return (target or CPUTarget()).compile(function(text))


# Representatives of the kernel matrix (`stageflow.testing.kernel_matrix`, which runs all of
# it): each primitive on a dtype of each kind it accepts, each cast from every dtype to a
# dtype of each kind, compiled for the CPU and for the emulated GPU.
MATRIX = [pytest.param(target, case, id=f"{target}-{case}") for target in km.TARGETS
          for family in km.FAMILIES for case in km.representatives(km.cases(family, target))]


@pytest.mark.parametrize(("target", "case"), MATRIX)
def test_kernel_matches_numpy(target: str, case: km.Case) -> None:
    runner(target).check(case)


@functools.cache
def runner(target: str) -> km.Runner:
    return km.Runner(target)


def test_the_representatives_take_every_primitive_and_dtype_of_the_matrix() -> None:
    for target in km.TARGETS:
        for family in km.FAMILIES:
            matrix = km.cases(family, target)
            chosen = km.representatives(matrix)
            assert len(chosen) < len(matrix)
            if family == "casts":
                assert {(c.dtype, km.kind_of(c.target)) for c in chosen} == {
                    (c.dtype, km.kind_of(c.target)) for c in matrix}
                assert {c.target for c in chosen} == {c.target for c in matrix}
            else:
                assert {(c.primitive, km.kind_of(c.dtype)) for c in chosen} == {
                    (c.primitive, km.kind_of(c.dtype)) for c in matrix}
                assert {c.dtype for c in chosen} == {c.dtype for c in matrix}


def test_the_matrix_command_prints_its_table_and_fails_on_a_wrong_kernel(capsys, monkeypatch):
    assert km.main(["--targets", "cpu", "--families", "unary,casts",
                    "--only", "^(abs-int8|cast-bool->float16)$"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert read_counts(lines[1:], 2) == {"unary cpu": [1, 0], "casts cpu": [1, 0],
                                         "total": [2, 0]}
    monkeypatch.setitem(km.REGISTRY["abs"].__dict__, "kernel", lambda x: x)  # a wrong NumPy
    assert km.main(["--targets", "emulated", "--families", "unary", "--only", "^abs-int8$"]) == 1
    out = capsys.readouterr().out
    assert "emulated abs-int8: " in out and "unary emulated" in out


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


@pytest.mark.parametrize("dtype", [BF16, F16], ids=str)
def test_half_float_ops_that_keep_a_value_match_numpy_to_the_bit(dtype: np.dtype) -> None:
    """relu, negative, abs, maximum, minimum and select of half floats give one of their
    operands' values (or its negation), which needs no rounding: the kernel skips it, and
    stores a bfloat16 it holds exactly by its high half. Bit for bit as NumPy (ml_dtypes)
    computes them op by op (see below for float16's zeros): signed zeros, infinities, the
    largest and the subnormal values, and NaNs (a signaling one stored back quiet, as
    rounding makes it), beside a sum that still rounds, over values drawn at random too."""
    t, bt = ir_type((None,), dtype), ir_type((None,), BOOL)
    text = (f"func.func @keep(%x: {t}, %y: {t}, %c: {bt}) -> ({t}, {t}, {t}) {{\n"
            f"  %0 = sf.negative %x : ({t}) -> {t}\n"
            f"  %1 = sf.relu %0 : ({t}) -> {t}\n"
            f"  %2 = sf.abs %y : ({t}) -> {t}\n"
            f"  %3 = sf.maximum %1, %2 : ({t}, {t}) -> {t}\n"
            f"  %4 = sf.minimum %x, %y : ({t}, {t}) -> {t}\n"
            f"  %5 = sf.select %c, %3, %4 : ({bt}, {t}, {t}) -> {t}\n"
            f"  %6 = sf.add %5, %y : ({t}, {t}) -> {t}\n"
            f"  func.return %5, %6, %x : {t}, {t}, {t}\n}}")
    kernel = compiled(text)
    info = ml_dtypes.finfo(dtype)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, info.max, -info.max, info.tiny,
               -info.smallest_subnormal, info.smallest_subnormal, 1.0, -3.5]
    noise = np.random.default_rng(5).standard_normal(2000)
    x = np.concatenate([special * len(special), noise[:1000]]).astype(dtype)
    y = np.concatenate([np.repeat(special, len(special)), noise[1000:]]).astype(dtype)
    bits = x.view(np.uint16).copy()
    bits[4] = 0x7F81 if dtype == BF16 else 0x7C01  # a signaling NaN
    x = bits.view(dtype)
    c = np.arange(x.size) % 3 != 0
    # (float16's maximum and minimum in NumPy keep the first of two equal zeros where its
    # float32 ones, ml_dtypes' bfloat16 ones and these kernels keep the second: float16's
    # values kept are computed in float32, exactly)
    wide = x.astype(np.float32) if dtype == F16 else x
    wide_y = y.astype(np.float32) if dtype == F16 else y
    with np.errstate(all="ignore"):
        kept = np.where(c, np.maximum(np.maximum(-wide, wide.dtype.type(0)), np.abs(wide_y)),
                        np.minimum(wide, wide_y)).astype(dtype)
        summed = kept + y
    got_kept, got_sum, got_x = kernel(x, y, c)
    for got, want in ((got_kept, kept), (got_sum, summed), (got_x, x)):
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
    quiet = 0x0040 if dtype == BF16 else 0x0200
    for got in (got_kept, got_sum):  # computed, not passed through
        assert np.all(got.view(np.uint16)[np.isnan(got)] & quiet)


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


def cast_targets(source: np.dtype) -> list[np.dtype]:
    """Every dtype, for a source of the wide dtypes; a narrow dtype's casts (one table
    lookup or search, whatever the other side) to and from float32 only."""
    if source in dtypes.NARROW:
        return [F32]
    return [t for t in dtypes.ALL if t not in dtypes.NARROW or source == F32]


def ptx_kernels(family: str) -> list[str]:
    """The family's kernels, each named after its op and its index in the family, so that
    they are distinct ``.entry`` functions of one PTX module."""
    texts = []
    for name, operands in PTX_FAMILIES[family]:
        targets = cast_targets(operands[0][1]) if name == "cast" else [None]
        for params in ([{"dtype": t} for t in targets] if name == "cast" else [None]):
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
# blocks and threads (`EmulatedLaunch`, `km.GRIDS`): broadcasting must give eager's numbers
# however the grid is cut (the matrix's representatives above run on the same grids).

@functools.cache
def emulated(text: str):
    return EmulatedLaunch().compile(function(text))


@given(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=5),
       st.integers(0, 2**31), st.sampled_from(km.GRIDS))
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


@pytest.mark.parametrize("arch", ["sm_90"])  # sm_80's PTX is the same but for its header
def test_ptxas_accepts_the_index_map_kernels(arch: str, tmp_path: Path) -> None:
    """The gather and put kernels for every element width and the reduce kernel's pass,
    through an index map and in order, for every kind and native dtype
    (`stageflow.codegen.targets.indexed`), all as one PTX module (one ptxas process)."""
    target = PTXTarget(arch)
    builders = [(f"{name}_i{bits}", entry(bits)) for bits in (8, 16, 32, 64)
                for name, entry in (("gather", gather_entry), ("put", put_entry))]
    builders += [(reduce_name(kind, dtype, mapped), reduce_entry(kind, dtype, mapped))
                 for kind in (SUM, PROD, MAX, MIN)
                 for dtype in sorted(kind.native_dtypes, key=str) for mapped in (True, False)]
    ptx = target.assemble([str(target.entry_module(name, build)) for name, build in builders])
    assert sorted(re.findall(r"\.entry (\w+)\(", ptx)) == sorted(name for name, _ in builders)
    result = assembles(ptx, arch, tmp_path)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("exponent", [-3.5, -2.0, -1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5,
                                      0.75, 1.0, 1.25, 2.0, 2.5, 3.0, 3.75, 4.0])
def test_float32_constant_quarter_powers_match_libm(exponent: float) -> None:
    """A constant float32 exponent of whole quarters takes products and square roots
    (`mathlib`): within one ulp of NumPy's power over a dense grid of positive floats
    (subnormals and the largest included), and IEEE pow's special cases exactly (negative
    bases of whole exponents among them), signed zeros too."""
    text = ("func.func @quarter(%a0: tensor<?xf32>) -> tensor<?xf32> {\n"
            f"  %c = sf.constant dense<{exponent!r}> : tensor<f32>\n"
            "  %0 = sf.pow %a0, %c : (tensor<?xf32>, tensor<f32>) -> tensor<?xf32>\n"
            "  func.return %0 : tensor<?xf32>\n}")
    kernel = compiled(text)
    grid = np.arange(1, np.float32(np.finfo(np.float32).max).view(np.uint32), 65_521,
                     dtype=np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        want = np.power(grid, np.float32(exponent))
    got = kernel(grid)[0]
    finite = np.isfinite(want) & (want != 0)
    spacing = np.spacing(np.abs(want[finite])).astype(np.float64)
    assert (np.abs(got[finite].astype(np.float64) - want[finite]) <= spacing).all()
    assert np.array_equal(got[~finite], want[~finite])
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -2.5, 1.0, -1e-45],
                       np.float32)
    with np.errstate(all="ignore"):
        want = np.power(special, np.float32(exponent))
    got = kernel(special)[0]
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))
