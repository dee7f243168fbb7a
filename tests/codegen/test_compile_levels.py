"""Optimisation and code generation levels chosen by static size: small and tiny kernels
and ops compile at lower levels, in modules of their own, and compute what the large ones
do; kernels that differ only in name compile once."""

from __future__ import annotations

import numpy as np

from stageflow.codegen.kernels.analysis import analyse
from stageflow.codegen.lowered.compile import OPT_LEVEL, compile_ops
from stageflow.codegen.lowered.rule import OpSpec
from stageflow.codegen.targets import cache
from stageflow.codegen.targets.cpu import (
    SMALL_KERNEL_ELEMENTS,
    TINY_KERNEL_ELEMENTS,
    CPUTarget,
    levels,
)
from stageflow.core.primitive import ShapedType
from stageflow.ir import parse_module


def test_levels_by_size() -> None:
    assert levels(16, 3) == (0, 3)
    assert levels(TINY_KERNEL_ELEMENTS - 1, 3) == (0, 3)
    assert levels(TINY_KERNEL_ELEMENTS, 3) == (1, 3)
    assert levels(SMALL_KERNEL_ELEMENTS - 1, 2) == (1, 3)
    assert levels(SMALL_KERNEL_ELEMENTS, 3) == (3, 3)
    assert levels(float("inf"), OPT_LEVEL) == (OPT_LEVEL, 3)


def test_code_generation_level_is_part_of_the_cache_key() -> None:
    assert cache.key("ir", 1, "cpu a", 0) != cache.key("ir", 1, "cpu a", 3)


def _row_sum(rows: int, cols: int) -> OpSpec:
    return OpSpec("reduce_sum", (ShapedType((rows, cols), np.dtype(np.float32)),),
                  (ShapedType((rows,), np.dtype(np.float32)),), {"axes": (1,), "keepdims": False})


def test_tiny_small_and_large_ops_compile_in_separate_modules_and_agree() -> None:
    shapes = [(4, 8), (32, 64), (128, 64)]  # tiny, small, large
    compiled = compile_ops([_row_sum(*shape) for shape in shapes])
    assert all(op is not None for op in compiled)
    assert len({op.llvm_ir for op in compiled}) == 3
    rng = np.random.default_rng(0)
    for op, shape in zip(compiled, shapes, strict=True):
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(op(x), x.sum(axis=1), rtol=1e-5, atol=1e-5)


def _kernel(name: str, scale: float, size: int):
    t = f"tensor<{size}xf32>"
    return analyse(parse_module(f"""func.func @{name}(%x: {t}) -> {t} {{
      %c = sf.constant dense<{scale!r}> : {t}
      %0 = sf.multiply %x, %c : ({t}, {t}) -> {t}
      func.return %0 : {t}
    }}""").ops.first)


def test_kernels_differing_only_in_name_compile_once() -> None:
    kernels = [_kernel("a", 2.0, 8), _kernel("b", 3.0, 8), _kernel("c", 2.0, 8),
               _kernel("d", 2.0, 16)]
    prepared = CPUTarget().prepare_many(kernels)
    assert prepared.entries[0] == prepared.entries[2]
    assert len(set(prepared.entries.values())) == 3
    assert sum(job.text.count("\ndefine ") for job in prepared.jobs) == 3 * 4  # each: 4 defs
    compiled = prepared.finish()
    for kernel, scale, size in zip(compiled, (2.0, 3.0, 2.0, 2.0), (8, 8, 8, 16), strict=True):
        x = np.arange(size, dtype=np.float32)
        np.testing.assert_array_equal(kernel(x)[0], x * scale)
