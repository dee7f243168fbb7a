"""Optimisation and code generation levels chosen by static size: small and tiny kernels
and ops compile at lower levels, in modules of their own, and compute what the large ones
do."""

from __future__ import annotations

import numpy as np

from stageflow.codegen.lowered.compile import OPT_LEVEL, compile_ops
from stageflow.codegen.lowered.rule import OpSpec
from stageflow.codegen.targets import cache
from stageflow.codegen.targets.cpu import SMALL_KERNEL_ELEMENTS, TINY_KERNEL_ELEMENTS, levels
from stageflow.core.primitive import ShapedType


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
