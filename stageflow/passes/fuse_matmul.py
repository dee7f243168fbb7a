"""Matmul epilogues that the BLAS computes itself: ``alpha * (a @ b) + c`` as one gemm.

A gemm computes ``C := alpha * A @ B + beta * C``. With ``beta = 0`` (a plain matmul)
OpenBLAS first zeroes C and then accumulates the product into it; an elementwise kernel
then reads the product back to add a bias or to take an SGD step. Writing the addend into
C first and calling the gemm with ``beta = 1`` does the zeroing's pass with the addend
instead, and the kernel's pass over the product disappears. In an MLP training step every
layer has one such epilogue forward (``x @ w + b``) and one backward
(``w - lr * (x^T @ g)``); on a 784x256 weight the second saves two passes over 800 KB.

`fuse` applies these patterns before it forms kernels, so whatever follows the add (a
ReLU, say) is still fused into a kernel that reads the gemm's result. The matched forms,
with ``m = matmul(a, b)`` used only there and ``s`` a scalar constant (either operand
order where the op commutes)::

    m + c        ->  matmul_add(a, b, c) {alpha = 1}
    c - m        ->  matmul_add(a, b, c) {alpha = -1}
    m * s + c    ->  matmul_add(a, b, c) {alpha = s}
    c - m * s    ->  matmul_add(a, b, c) {alpha = -s}

``c`` must broadcast to the product's shape (the sum has the product's type): a bias, or
a full matrix. Floating dtypes only; the forms are exact rewrites up to the rounding of
``alpha * sum`` inside the gemm.
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from stageflow.core import dtypes
from stageflow.ir.builder import build_op
from stageflow.ir.dialect import SfOp
from stageflow.ir.types import shaped_type
from stageflow.passes.support import (
    erase_dead_producers,
    is_op,
    only_user,
    same_type,
    splat_of,
)
from stageflow.primitives.elementwise import add_p, multiply_p, subtract_p
from stageflow.primitives.linalg import matmul_add_p, matmul_p


def _scaled_product(value: SSAValue) -> tuple[SfOp, float] | None:
    """(the matmul, alpha) if `value` is ``m`` or ``m * s`` (or ``s * m``) for a matmul
    ``m`` used only there, with the scale applied in the product's type."""
    owner = value.owner
    if is_op(owner, matmul_p):
        return owner, 1.0
    if not is_op(owner, multiply_p) or not same_type(owner.results[0], value):
        return None
    for product, scale in (owner.operands, owner.operands[::-1]):
        alpha = splat_of(scale)
        if (alpha is not None and is_op(product.owner, matmul_p)
                and same_type(product, value) and only_user(product) is owner):
            return product.owner, float(alpha)
    return None


class MatmulEpilogue(RewritePattern):
    """``alpha * (a @ b) + c`` (the forms in the module docstring) as one `matmul_add`."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not (is_op(op, add_p) or is_op(op, subtract_p)):
            return
        result = op.results[0]
        if not dtypes.is_floating(shaped_type(result.type).dtype):
            return
        left, right = op.operands
        subtract = is_op(op, subtract_p)
        orders = [(right, left)] if subtract else [(left, right), (right, left)]
        for product, addend in orders:
            if only_user(product) is not op or not same_type(product, result):
                continue
            found = _scaled_product(product)
            if found is None:
                continue
            matmul, alpha = found
            params = {"alpha": -alpha if subtract else alpha, **matmul.params()}
            fused = build_op(matmul_add_p, [*matmul.operands, addend], params, result.type,
                             op.location)
            rewriter.replace(op, fused)
            erase_dead_producers([product], rewriter)  # the matmul, the scale
            return
