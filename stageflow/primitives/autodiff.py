"""Helpers shared by the gradient rules that sit beside each primitive family.

The rules are written with the public op functions (`sf.multiply`, `sf.reduce_sum`, ...) so
that a gradient traces into IR and can be differentiated again. The op modules import the
primitive modules, so the rules reach the op functions through `sf`, a lazy handle on the
`stageflow` package that imports it on first use.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

from stageflow.core import dtypes

# Primitives whose gradients the tape and function machinery provide, not a rule here:
# variable reads and writes (the tape maps reads back to their variables) and `call` (a
# staged function's backward pass is its own graph function, the paper's section 4.2).
HANDLED_BY_TAPE = frozenset({"read_variable", "assign_variable", "call"})


class _LazyStageflow:
    """`sf.<name>` for the gradient rules, importing `stageflow` on first use."""

    def __getattr__(self, name: str) -> Any:
        import stageflow

        return getattr(stageflow, name)


sf: Any = _LazyStageflow()


def floating_only(rule: Callable[..., list]) -> Callable[..., list]:
    """Wrap a gradient rule: operands that are not floating get None.

    Integer and bool tensors carry no gradient (as in TensorFlow and JAX), so the rule is
    not even run when no operand is floating or every cotangent is None.
    """

    @functools.wraps(rule)
    def vjp(cotangents: list, inputs: list, outputs: list, **params: Any) -> list:
        wanted = [dtypes.is_floating(x.dtype) for x in inputs]
        if not any(wanted) or all(g is None for g in cotangents):
            return [None] * len(inputs)
        grads = rule(cotangents, inputs, outputs, **params)
        return [g if w else None for g, w in zip(grads, wanted, strict=True)]

    return vjp


def unbroadcast(g: Any, operand: Any) -> Any:
    """Sum `g`, shaped like a broadcast result, back down to `operand`'s shape.

    Sums the leading dims `operand` lacks and the dims where `operand` has size 1 but `g`
    does not. An unknown (None) operand dim is taken as not broadcast: a traced operand
    whose unknown dim is 1 at run time while the result's is larger is not supported.
    """
    shape = tuple(operand.shape)
    if tuple(g.shape) == shape:
        return g
    lead = g.ndim - len(shape)
    if lead:
        g = sf.reduce_sum(g, tuple(range(lead)))
    ones = tuple(i for i, (d, e) in enumerate(zip(shape, g.shape, strict=True))
                 if d == 1 and e != 1)
    return sf.reduce_sum(g, ones, keepdims=True) if ones else g


def reshape(g: Any, shape: Sequence[int | None]) -> Any:
    """`g` reshaped to `shape`, in which at most one dim may be unknown (None)."""
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    if sum(d is None for d in shape) > 1:
        raise NotImplementedError(f"gradient: cannot reshape to {shape} with more than one "
                                  "unknown dim")
    return sf.reshape(g, [-1 if d is None else d for d in shape])


def broadcast_like(g: Any, x: Any) -> Any:
    """`g` broadcast to `x`'s shape (through a select on x when x's shape is not static)."""
    if tuple(g.shape) == tuple(x.shape):
        return g
    if None not in x.shape:
        return sf.broadcast_to(g, x.shape)
    return sf.where(sf.equal(x, x), g, g)  # both branches g: NaN in x does not matter


def zeros_like(x: Any) -> Any:
    """Zeros with x's shape and dtype, also when the shape is not static."""
    if None not in x.shape:
        return sf.zeros(x.shape, x.dtype)
    zero = sf.convert_to_tensor(0, x.dtype)
    return sf.where(sf.equal(x, x), zero, zero)


def product(dims: Sequence[int | None]) -> int | None:
    """The number of elements of `dims`, None if one is unknown."""
    return None if None in dims else math.prod(dims)
