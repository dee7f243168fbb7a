"""Public linear algebra: `matmul` (NumPy's 1-D rules too), `tensordot`, n-ary `einsum`.

`tensordot` and `einsum` lower to transpose + reshape + one batched matmul, so the compiler
only ever sees the matmul primitive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from stageflow.core.source import describe_location
from stageflow.frontend.ops import reductions
from stageflow.frontend.ops.convert import binary_operands, matching_tensors
from stageflow.frontend.ops.creation import eye
from stageflow.frontend.ops.shape import reshape_to, transpose
from stageflow.frontend.tensor import Tensor
from stageflow.primitives.linalg import matmul_p


def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False) -> Tensor:
    """Matrix product over the last two dims, broadcasting leading (batch) dims.

    A 1-D operand is a row (left) or column (right) vector whose dim is dropped from the
    result, as in NumPy.

    a: [..., m, k], b: [..., k, n], of one int or float dtype; returns [..., m, n] of that dtype
    (also the `@` operator).

    >>> a = sf.constant([[1.0, 2.0], [3.0, 4.0]])
    >>> sf.matmul(a, [[1.0], [1.0]])
    sf.Tensor([[3.],
               [7.]], shape=(2, 1), dtype=float32)
    >>> sf.matmul(a, a, transpose_b=True)
    sf.Tensor([[ 5., 11.],
               [11., 25.]], shape=(2, 2), dtype=float32)
    >>> (sf.ones((5, 2, 3)) @ sf.ones((3, 4))).shape
    (5, 2, 4)
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
    """Einstein summation over any number of operands, as `np.einsum` and `tf.einsum`.

    ``sf.einsum("ij,jk->ik", a, b)`` is ``a @ b``; ``"bij,bjk->bik"`` a batched product;
    ``"ii->i"`` a diagonal, ``"ii"`` a trace; ``"...ij,...jk"`` broadcasts the leading dims
    (a dim of 1 against a larger one); ``"ij,jk,kl->il"`` a chain; without ``->`` the output
    is the ellipsis dims, then the labels used once, sorted. Operands of one dtype; the
    result has that dtype. A chain is contracted a pair at a time, always the pair whose
    result is smallest next (opt_einsum's greedy order), each pair as one batched matmul,
    so the compiler only ever sees transposes, reshapes, sums and matmuls.

    operands: tensors of one numeric dtype; returns that dtype, the shape the equation's output
    names.

    >>> a = sf.constant([[1.0, 2.0], [3.0, 4.0]])
    >>> sf.einsum("ij,jk->ik", a, sf.eye(2))
    sf.Tensor([[1., 2.],
               [3., 4.]], shape=(2, 2), dtype=float32)
    >>> sf.einsum("ii->", a)
    sf.Tensor(5., shape=(), dtype=float32)
    >>> sf.einsum("bij,bjk->bik", sf.ones((3, 2, 4)), sf.ones((3, 4, 5))).shape
    (3, 2, 5)
    """
    tensors = matching_tensors(list(operands))
    specs, output = _parse(equation, tensors)
    terms = [_diagonals(spec, t, equation) for spec, t in zip(specs, tensors, strict=True)]
    terms = _broadcast_ones(terms)
    terms = [_sum_private(i, terms, output) for i in range(len(terms))]
    while len(terms) > 1:
        i, j = _cheapest_pair(terms, output)
        (sa, a), (sb, b) = terms[i], terms[j]
        rest = [terms[k] for k in range(len(terms)) if k not in (i, j)]
        keep = set(output).union(*(spec for spec, _ in rest))
        batch = [c for c in sa if c in sb and c in keep]
        summed = [c for c in sa if c in sb and c not in keep]
        a_free = [c for c in sa if c not in sb]
        b_free = [c for c in sb if c not in sa]
        out, labels = _contract(a, b, batch, a_free, b_free, summed, sa, sb)
        terms = [*rest, ("".join(labels), out)]
    spec, t = _sum_private(0, terms, output)
    return transpose(t, [spec.index(c) for c in output])


# Labels the parser gives the dims an ellipsis stands for (never valid user labels).
_ELLIPSIS_LABELS = [chr(0x3B1 + k) for k in range(24)]


def _parse(equation: str, tensors: list[Tensor]) -> tuple[list[str], str]:
    """Each operand's labels and the output's, ellipses expanded to labels of their own."""
    equation = equation.replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    specs = inputs.split(",")
    if len(specs) != len(tensors) or not tensors:
        raise ValueError(f"einsum: {equation!r} names {len(specs)} operands, "
                         f"{len(tensors)} given{describe_location()}")
    labels = set("".join(specs).replace(".", "") + output.replace(".", ""))
    if not all(c.isalpha() and c.isascii() for c in labels):
        raise ValueError(f"einsum: {equation!r}: labels are ASCII letters (and '...')"
                         f"{describe_location()}")
    ellipsis_dims = 0
    for spec, t in zip(specs, tensors, strict=True):
        named = len(spec.replace("...", ""))
        if ("..." in spec and named > t.ndim) or ("..." not in spec and named != t.ndim):
            raise ValueError(f"einsum: {spec!r} does not fit an operand of shape {t.shape}"
                             f"{describe_location()}")
        if "..." in spec:
            ellipsis_dims = max(ellipsis_dims, t.ndim - named)
    broadcast = "".join(_ELLIPSIS_LABELS[:ellipsis_dims])
    expanded = [spec.replace("...", broadcast[ellipsis_dims - (t.ndim - len(spec) + 3):])
                if "..." in spec else spec for spec, t in zip(specs, tensors, strict=True)]
    if arrow:
        output = output.replace("...", broadcast)
        if len(set(output)) != len(output) or not set(output) <= set("".join(expanded)):
            raise ValueError(f"einsum: the output {output!r} repeats a label or names one no "
                             f"operand has{describe_location()}")
    else:
        counts = "".join(expanded)
        output = broadcast + "".join(sorted(c for c in set(counts) if counts.count(c) == 1
                                            and c not in broadcast))
    return expanded, output


def _diagonals(spec: str, t: Tensor, equation: str) -> tuple[str, Tensor]:
    """An operand with a label repeated (``ii``) reduced to its diagonal along those dims."""
    while len(set(spec)) != len(spec):
        label = next(c for c in spec if spec.count(c) > 1)
        first = spec.index(label)
        second = spec.index(label, first + 1)
        n = t.shape[first]
        if n is None or t.shape[second] != n:
            raise ValueError(f"einsum: {equation!r}: the dims labelled {label!r} must be equal "
                             f"and known, got shape {t.shape}{describe_location()}")
        shape = [1] * t.ndim
        shape[first] = shape[second] = n
        mask = reshape_to(eye(n, dtype=t.dtype), shape)
        t = reductions.reduce_sum(t * mask, (second,))
        spec = spec[:second] + spec[second + 1:]
    return spec, t


def _broadcast_ones(terms: list[tuple[str, Tensor]]) -> list[tuple[str, Tensor]]:
    """Drop a dim of 1 an operand has where another operand's same label is larger (the
    broadcasting of ellipsis dims), so that each label has one size."""
    sizes: dict[str, set] = {}
    for spec, t in terms:
        for c, d in zip(spec, t.shape, strict=True):
            sizes.setdefault(c, set()).add(d)
    result = []
    for spec, t in terms:
        drop = [k for k, (c, d) in enumerate(zip(spec, t.shape, strict=True))
                if d == 1 and sizes[c] - {1}]
        if drop:
            t = reshape_to(t, [d for k, d in enumerate(t.shape) if k not in drop])
            spec = "".join(c for k, c in enumerate(spec) if k not in drop)
        result.append((spec, t))
    return result


def _sum_private(index: int, terms: list[tuple[str, Tensor]], output: str
                 ) -> tuple[str, Tensor]:
    """Operand `index` with the labels no other operand nor the output has summed out."""
    spec, t = terms[index]
    others = set(output).union(*(s for k, (s, _) in enumerate(terms) if k != index))
    drop = [k for k, c in enumerate(spec) if c not in others]
    if not drop:
        return spec, t
    return ("".join(c for c in spec if c in others), reductions.reduce_sum(t, tuple(drop)))


def _cheapest_pair(terms: list[tuple[str, Tensor]], output: str) -> tuple[int, int]:
    """The pair of operands whose contraction gives the smallest result (unknown dims
    counted as 64), ties to the leftmost pair."""
    size = {c: (d if d is not None else 64) for spec, t in terms
            for c, d in zip(spec, t.shape, strict=True)}
    best = None
    for i in range(len(terms)):
        for j in range(i + 1, len(terms)):
            rest = set(output).union(*(s for k, (s, _) in enumerate(terms) if k not in (i, j)))
            kept = (set(terms[i][0]) | set(terms[j][0])) & rest
            cost = math.prod(size[c] for c in kept)
            if best is None or cost < best[0]:
                best = (cost, i, j)
    return best[1], best[2]


def tensordot(a: Any, b: Any, axes: int | Sequence[Sequence[int]] = 2) -> Tensor:
    """Sum products over the last `axes` dims of `a` and the first of `b` (or listed axes).

    a, b: tensors of one numeric dtype; returns a.shape[:-axes] + b.shape[axes:] of that dtype.

    >>> a = sf.ones((2, 3, 4))
    >>> sf.tensordot(a, sf.ones((3, 4, 5)), axes=2).shape
    (2, 5)
    >>> sf.tensordot(a, sf.ones((2, 5)), axes=[[0], [0]]).shape
    (3, 4, 5)
    >>> sf.tensordot([1.0, 2.0], [3.0, 4.0], axes=1)
    sf.Tensor(11., shape=(), dtype=float32)
    """
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
