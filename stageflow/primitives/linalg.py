"""The matmul primitives: batched, broadcasting leading dims, optional transposes; their
gradients. `matmul_add` (``alpha * a @ b + c``, the BLAS's gemm with beta 1) is what the
`fuse` pass makes of a matmul and the scaled add that follows it: the BLAS then writes the
sum where it would have written the product, one pass over the result fewer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.dims import PYTHON, D, DimArith, broadcast_dims
from stageflow.core.op_facts import Cost, Family, LoweredBy
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.shapes import check_broadcast, format_shape
from stageflow.primitives.autodiff import conj, floating_only, product, reshape, unbroadcast


def _matmul_dims(d: DimArith[D, Any], operands: Sequence[Sequence[D]], *,
                 transpose_a: bool, transpose_b: bool, **_: object) -> list[D]:
    """The broadcast batch dims, then a's rows and b's columns (matmul_add's addend, a third
    operand, takes the product's shape)."""
    a, b = operands[:2]
    batch = broadcast_dims(d, [a[:-2], b[:-2]])
    return [*batch, a[-1] if transpose_a else a[-2], b[-2] if transpose_b else b[-1]]


def _matmul_rule(
    a: ShapedType, b: ShapedType, *, transpose_a: bool, transpose_b: bool
) -> ShapedType:
    if a.dtype != b.dtype:
        raise TypeError(f"operands have different dtypes {a.dtype.name} and {b.dtype.name}")
    if a.dtype == dtypes.bool_:
        raise TypeError("bool operands are not supported")
    if dtypes.is_narrow(a.dtype):
        raise TypeError(dtypes.refusal(a.dtype, (*dtypes.FLOATING, *dtypes.INTEGER,
                                                 *dtypes.COMPLEX)))
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError("operands must have rank >= 2")
    k = a.shape[-2] if transpose_a else a.shape[-1]
    k2 = b.shape[-1] if transpose_b else b.shape[-2]
    if k is not None and k2 is not None and k != k2:
        raise ValueError(
            f"contracting dims differ: {format_shape(a.shape)} @ {format_shape(b.shape)} "
            f"(transpose_a={transpose_a}, transpose_b={transpose_b})"
        )
    shape = _matmul_dims(PYTHON, [a.shape, b.shape], transpose_a=transpose_a,
                         transpose_b=transpose_b)
    check_broadcast([a.shape[:-2], b.shape[:-2]], shape[:-2])
    return ShapedType(tuple(shape), a.dtype)


def _matmul(a, b, *, transpose_a, transpose_b):
    # Eager, interpreted and compiled code all call NumPy's bundled OpenBLAS here: it runs
    # near the cores' peak from n = 512 (`benchmarks/matmul.py`), so a generated kernel has
    # to beat that before replacing it.
    if transpose_a:
        a = np.swapaxes(a, -1, -2)
    if transpose_b:
        b = np.swapaxes(b, -1, -2)
    # NumPy multiplies bfloat16 into float32; the result keeps the operands' dtype.
    return np.matmul(a, b).astype(a.dtype, copy=False)


matmul_p = Primitive(
    "matmul",
    shape_rule=_matmul_rule,
    kernel=_matmul,
    dims=_matmul_dims,
    summary="batched matrix product over the last two dims, broadcasting the leading dims",
    family=Family.LINALG, cost=Cost.MATMUL, lowered_by=LoweredBy.OP_RULE,
)


@matmul_p.def_vjp
@floating_only
def _matmul_vjp(cotangents, inputs, outputs, *, transpose_a, transpose_b):
    return _product_vjp(cotangents[0], *inputs, transpose_a, transpose_b)


def _product_vjp(g, a, b, transpose_a: bool, transpose_b: bool) -> list:
    inputs_a = a
    # out = A @ B with A = a or a^T, B = b or b^T: dA = g @ B^T, dB = A^T @ g, transposed
    # back where the operand was; batch dims broadcast, so sum them back. Complex operands
    # enter conjugated (dA = g @ B^H, TensorFlow's adjoints).
    if transpose_a:
        ga = matmul_p.bind(conj(b), g, transpose_a=transpose_b, transpose_b=True)
    else:
        ga = matmul_p.bind(g, conj(b), transpose_a=False, transpose_b=not transpose_b)
    rows = product(a.shape[:-1])
    if len(b.shape) == 2 and len(a.shape) > 2 and not transpose_a and None not in (
            a.shape[-1], g.shape[-1]) and (rows is not None or 0 not in (a.shape[-1],
                                                                         g.shape[-1])):
        # A single matrix b applied to a batch: its cotangent sums over the batch, which one
        # product of the stacked rows does (not a product per batch, then a sum). (Their
        # count is given where known: next to an empty row, no count can be inferred.)
        a, g = reshape(a, (rows, a.shape[-1])), reshape(g, (rows, g.shape[-1]))
    if transpose_b:
        gb = matmul_p.bind(g, conj(a), transpose_a=True, transpose_b=transpose_a)
    else:
        gb = matmul_p.bind(conj(a), g, transpose_a=not transpose_a, transpose_b=False)
    return [unbroadcast(ga, inputs_a), unbroadcast(gb, b)]


def _matmul_add_rule(a: ShapedType, b: ShapedType, c: ShapedType, *, alpha: float,
                     transpose_a: bool, transpose_b: bool) -> ShapedType:
    product = _matmul_rule(a, b, transpose_a=transpose_a, transpose_b=transpose_b)
    if c.dtype != product.dtype:
        raise TypeError(f"addend dtype {c.dtype.name} differs from the product's "
                        f"{product.dtype.name}")
    if c.ndim > product.ndim or any(
            d is not None and p is not None and d not in (1, p)
            for d, p in zip(c.shape[::-1], product.shape[::-1], strict=False)):
        raise ValueError(f"addend {format_shape(c.shape)} does not broadcast to the product "
                         f"{format_shape(product.shape)}")
    return product


def _matmul_add(a, b, c, *, alpha, transpose_a, transpose_b):
    product = _matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b)
    return (product * product.dtype.type(alpha) + c).astype(product.dtype, copy=False)


matmul_add_p = Primitive(
    "matmul_add",
    shape_rule=_matmul_add_rule,
    kernel=_matmul_add,
    dims=_matmul_dims,
    summary="alpha * matmul(a, b) + c, c broadcast to the product (a fused matmul epilogue)",
    family=Family.LINALG, cost=Cost.MATMUL, lowered_by=LoweredBy.OP_RULE,
)


@matmul_add_p.def_vjp
@floating_only
def _matmul_add_vjp(cotangents, inputs, outputs, *, alpha, transpose_a, transpose_b):
    (g,), (a, b, c) = cotangents, inputs
    return [*_product_vjp(g * alpha, a, b, transpose_a, transpose_b), unbroadcast(g, c)]
