"""Matrix products: Gemm, MatMul (NumPy's matmul: batched, broadcasting, 1-D operands),
MatMulInteger and Einsum.

Gemm's transposes are sf.matmul's flags, not transposes of the operands, so a (N, K)
weight stays as it is stored and the BLAS reads it transposed; alpha and beta multiply
only when they are not 1, and a known bias is scaled at import.
"""

from __future__ import annotations

import numpy as np

import stageflow as sf
from stageflow.onnx.converters import Node, Value, converts


@converts("Gemm")
def gemm(node: Node, a: Value, b: Value, c: Value | None = None) -> Value:
    if a.ndim != 2 or b.ndim != 2:
        raise node.error(f"A and B must be matrices, got shapes {a.shape} and {b.shape}")
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    y = sf.matmul(a, b, transpose_a=bool(node.attr("transA", 0)),
                  transpose_b=bool(node.attr("transB", 0)))
    if alpha != 1.0:
        y = y * alpha
    if c is None or beta == 0.0:
        return y
    if beta != 1.0:
        c = (c * np.asarray(beta, c.dtype)).astype(c.dtype) if isinstance(c, np.ndarray) \
            else c * beta
    return y + c


@converts("MatMul")
def matmul(node: Node, a: Value, b: Value) -> Value:
    return sf.matmul(a, b)


@converts("MatMulInteger")
def matmul_integer(node: Node, a: Value, b: Value, a_zero_point: Value | None = None,
                   b_zero_point: Value | None = None) -> Value:
    """(a - a_zero_point) @ (b - b_zero_point) in int32; a's zero point is a scalar or one
    per row, b's a scalar or one per column."""
    a, b = sf.cast(a, sf.int32), sf.cast(b, sf.int32)
    if a_zero_point is not None:
        point = sf.cast(a_zero_point, sf.int32)
        a = a - (sf.reshape(point, (-1, 1)) if point.ndim == 1 else point)
    if b_zero_point is not None:
        b = b - sf.cast(b_zero_point, sf.int32)
    return sf.matmul(a, b)


@converts("Einsum")
def einsum(node: Node, *operands: Value) -> Value:
    equation = node.attr("equation").replace(" ", "")
    return sf.einsum(equation, *operands)
