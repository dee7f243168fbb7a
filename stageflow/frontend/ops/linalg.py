"""Public linear algebra: `matmul` (NumPy's 1-D rules too), `tensordot`, two-operand `einsum`.

`tensordot` and `einsum` lower to transpose + reshape + one batched matmul, so the compiler
only ever sees the matmul primitive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from stageflow.core.source import describe_location
from stageflow.frontend.ops import reductions
from stageflow.frontend.ops.convert import binary_operands, convert_to_tensor
from stageflow.frontend.ops.shape import reshape_to, transpose
from stageflow.frontend.tensor import Tensor
from stageflow.primitives.linalg import matmul_p


def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False) -> Tensor:
    """Matrix product over the last two dims, broadcasting leading (batch) dims.

    A 1-D operand is a row (left) or column (right) vector whose dim is dropped from the
    result, as in NumPy.
    """
    a, b = binary_operands(a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: operands must not be scalars{describe_location()}")
    squeeze_rows, squeeze_cols = a.ndim == 1, b.ndim == 1
    if squeeze_rows:
        a = reshape_to(a, (1, a.shape[0]))
    if squeeze_cols:
        b = reshape_to(b, (b.shape[0], 1))
    out = matmul_p.bind(a, b, transpose_a=bool(transpose_a), transpose_b=bool(transpose_b))
    if squeeze_rows or squeeze_cols:
        shape = list(out.shape)
        if squeeze_cols:
            shape.pop(-1)
        if squeeze_rows:
            shape.pop(-1 if squeeze_cols else -2)
        out = reshape_to(out, shape)
    return out


def _product(dims: Sequence[int | None]) -> int | None:
    return None if None in dims else math.prod(dims)


def _contract(a: Tensor, b: Tensor, batch: list[str], a_free: list[str], b_free: list[str],
              summed: list[str], a_labels: str, b_labels: str) -> tuple[Tensor, list[str]]:
    """Contract `summed` labels with one matmul; returns the result and its labels."""
    size = {}
    for labels, t in ((a_labels, a), (b_labels, b)):
        size.update(zip(labels, t.shape, strict=True))
    a = transpose(a, [a_labels.index(c) for c in batch + a_free + summed])
    b = transpose(b, [b_labels.index(c) for c in batch + summed + b_free])
    batch_dims = [size[c] for c in batch]
    a = reshape_to(a, batch_dims + [_product([size[c] for c in a_free]),
                                    _product([size[c] for c in summed])])
    b = reshape_to(b, batch_dims + [_product([size[c] for c in summed]),
                                    _product([size[c] for c in b_free])])
    out = matmul_p.bind(a, b, transpose_a=False, transpose_b=False)
    out = reshape_to(out, batch_dims + [size[c] for c in a_free] + [size[c] for c in b_free])
    return out, batch + a_free + b_free


def einsum(equation: str, *operands: Any) -> Tensor:
    """Einstein summation for one or two operands (`"ij,jk->ik"`, `"bij,bjk->bik"`, ...)."""
    tensors = [convert_to_tensor(t) for t in operands]
    equation = equation.replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    specs = inputs.split(",")
    if len(specs) != len(tensors) or len(tensors) not in (1, 2):
        raise ValueError(f"einsum: {equation!r} needs one or two operands{describe_location()}")
    for spec, t in zip(specs, tensors, strict=True):
        if len(spec) != t.ndim or len(set(spec)) != len(spec):
            raise ValueError(
                f"einsum: {spec!r} does not fit shape {t.shape} (repeated labels are not "
                f"supported){describe_location()}"
            )
    if not arrow:
        counts = "".join(specs)
        output = "".join(sorted(c for c in set(counts) if counts.count(c) == 1))
    reduced = []
    for i, (spec, t) in enumerate(zip(specs, tensors, strict=True)):
        others = "".join(specs[:i] + specs[i + 1 :]) + output
        drop = [spec.index(c) for c in spec if c not in others]
        if drop:
            t = reductions.reduce_sum(t, tuple(drop))
            spec = "".join(c for c in spec if c in others)
        reduced.append((spec, t))
    if len(reduced) == 1:
        spec, t = reduced[0]
        return transpose(t, [spec.index(c) for c in output])
    (sa, a), (sb, b) = reduced
    batch = [c for c in sa if c in sb and c in output]
    summed = [c for c in sa if c in sb and c not in output]
    a_free = [c for c in sa if c not in sb]
    b_free = [c for c in sb if c not in sa]
    out, labels = _contract(a, b, batch, a_free, b_free, summed, sa, sb)
    return transpose(out, [labels.index(c) for c in output])


def tensordot(a: Any, b: Any, axes: int | Sequence[Sequence[int]] = 2) -> Tensor:
    """Sum products over the last `axes` dims of `a` and the first of `b` (or listed axes)."""
    a, b = binary_operands(a, b)
    if isinstance(axes, int):
        a_axes = list(range(a.ndim - axes, a.ndim))
        b_axes = list(range(axes))
    else:
        a_list, b_list = ([v] if isinstance(v, int) else list(v) for v in axes)
        a_axes = [int(i) % a.ndim for i in a_list]
        b_axes = [int(i) % b.ndim for i in b_list]
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    a_labels = letters[: a.ndim]
    b_list = list(letters[a.ndim : a.ndim + b.ndim])
    for i, j in zip(a_axes, b_axes, strict=True):
        b_list[j] = a_labels[i]
    b_labels = "".join(b_list)
    output = "".join(c for c in a_labels if c not in b_labels)
    output += "".join(c for c in b_labels if c not in a_labels)
    return einsum(f"{a_labels},{b_labels}->{output}", a, b)
