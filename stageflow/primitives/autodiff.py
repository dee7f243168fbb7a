"""Helpers shared by the gradient rules that sit beside each primitive family.

A rule is written with primitives, bound directly (as JAX writes its rules with `lax`, not
`jax.numpy`), so that a gradient traces into IR and can be differentiated again like any
other op. The public op functions cannot serve: they live in the frontend, above this
layer. A rule binds its own family's primitives directly (and those of a family its
module imports anyway, as conv does structural's); the functions here reach the others.
The families need each other's primitives (elementwise gradients are summed back with
`reduce_sum`, reduction gradients select and cast), so they cannot all import one another
without a cycle: these functions find each primitive by name in the registry when a rule
runs, by which time importing `stageflow.primitives` has defined every family. Each does
only the normalising the rules need: Python scalars become constants of the other
operand's dtype.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from stageflow.core import context, dtypes
from stageflow.core.primitive import REGISTRY
from stageflow.core.shapes import format_shape, reshape_param

# Primitives whose gradients the tape and function machinery provide, not a rule here:
# variable reads and writes (the tape maps reads back to their variables) and `call` (a
# staged function's backward pass is its own graph function, the paper's section 4.2).
HANDLED_BY_TAPE = frozenset({"read_variable", "assign_variable", "call"})


def _bind(name: str, *args: Any, **params: Any) -> Any:
    """Apply the primitive registered as `name` in the current trace."""
    return REGISTRY[name].bind(*args, **params)


def constant(value: Any, dtype: np.dtype) -> Any:
    """`value` as a tensor of `dtype` in the current trace (eager or staging)."""
    return context.current_trace().constant(np.asarray(value, dtype))


def _like(value: Any, other: Any) -> Any:
    """`value` itself, or, if it is a Python scalar, a constant of `other`'s dtype."""
    return constant(value, other.dtype) if isinstance(value, int | float) else value


def where(cond: Any, x: Any, y: Any) -> Any:
    """`select`: x where cond is true, else y (the primitive broadcasts all three)."""
    return _bind("select", cond, _like(x, y), _like(y, x))


def equal(x: Any, y: Any) -> Any:
    """x == y as a bool tensor."""
    return _bind("equal", x, _like(y, x))


def cast(x: Any, dtype: np.dtype) -> Any:
    """`x` converted to `dtype`."""
    return _bind("cast", x, dtype=dtype)


def conj(x: Any) -> Any:
    """The complex conjugate of a complex `x`; any other `x` itself, so a gradient rule
    written for complex operands binds nothing more for real ones."""
    return _bind("conj", x) if dtypes.is_complex(x.dtype) else x


def matmul(a: Any, b: Any, *, transpose_a: bool, transpose_b: bool) -> Any:
    """The batched matrix product of operands of rank >= 2."""
    return _bind("matmul", a, b, transpose_a=transpose_a, transpose_b=transpose_b)


class Needed(threading.local):
    """Which operands' cotangents the backward pass running on this thread uses: those on a
    path to a source (`GradientTape` knows them), set before each rule runs (None: all).
    Eagerly a rule computes what it returns at once, so the others would be work thrown
    away (a constant operand's share of a product, summed back to its shape); staged,
    pruning drops them anyway.

    `last` is the latest answer of `wanted`: (its operands, the mask, the answer).
    `floating_only` asks first, then a binary rule asks again for the same operands."""

    mask: Sequence[bool] | None = None
    last: tuple[Sequence[Any], Sequence[bool] | None, list[bool]] | None = None


NEEDED = Needed()


def wanted(inputs: Sequence[Any]) -> list[bool]:
    """Which operands of the rule running now get a cotangent: the floating and complex ones
    that the backward pass needs (`NEEDED`). Asked again for the very operands list under
    the very mask, the answer is the one computed before (copied)."""
    needed = NEEDED
    mask = needed.mask
    last = needed.last
    if last is not None and last[0] is inputs and last[1] is mask:
        return list(last[2])
    if mask is None or len(mask) != len(inputs):
        want = [x.dtype in dtypes.INEXACT for x in inputs]
    else:
        want = [m and x.dtype in dtypes.INEXACT for x, m in zip(inputs, mask, strict=True)]
    needed.last = (inputs, mask, want)
    return list(want)


def floating_only(rule: Callable[..., list]) -> Callable[..., list]:
    """Wrap a gradient rule: operands that are neither floating nor complex, or whose
    cotangent the backward pass does not need (`NEEDED`), get None.

    Integer and bool tensors carry no gradient (as in TensorFlow and JAX), so the rule is
    not even run when no operand is floating or complex, or every cotangent is None.
    """

    @functools.wraps(rule)
    def vjp(cotangents: list, inputs: list, outputs: list, **params: Any) -> list:
        want = wanted(inputs)
        if not any(want) or all(g is None for g in cotangents):
            return [None] * len(inputs)
        grads = rule(cotangents, inputs, outputs, **params)
        return [g if w else None for g, w in zip(grads, want, strict=True)]

    return vjp


def unbroadcast(g: Any, operand: Any) -> Any:
    """Sum `g`, shaped like a broadcast result, back down to `operand`'s shape.

    Sums the leading dims `operand` lacks and the dims where `operand` has size 1 but `g`
    does not. An unknown (None) operand dim is taken as not broadcast where `g`'s is unknown
    too; where `g`'s is known and not 1, the operand's may have been 1 at run time, and the
    gradient's shape would depend on it: that is refused (it once gave the result's shape).
    """
    shape = tuple(operand.shape)
    if tuple(g.shape) == shape:
        return g
    lead = g.ndim - len(shape)
    for axis, d in enumerate(shape):
        e = g.shape[lead + axis]
        if d is None and e is not None and e != 1:
            raise NotImplementedError(
                f"gradient: an operand of shape {format_shape(shape)} was broadcast to "
                f"{format_shape(tuple(g.shape))}, and whether its unknown dim {axis} was 1 "
                "is known only at run time; give that dim in the input_signature")
    if lead:
        g = _bind("reduce_sum", g, axes=tuple(range(lead)), keepdims=False)
    ones = tuple(i for i, (d, e) in enumerate(zip(shape, g.shape, strict=True))
                 if d == 1 and e != 1)
    return _bind("reduce_sum", g, axes=ones, keepdims=True) if ones else g


def reshape(g: Any, shape: Sequence[int | None]) -> Any:
    """`g` reshaped to `shape`, whose unknown dims (None) are `g`'s run-time dims
    (`core.shapes.reshape_param`)."""
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    try:
        param = reshape_param(g.shape, shape)
    except ValueError as error:
        raise NotImplementedError(f"gradient: {error}") from None
    return _bind("reshape", g, shape=param)


def broadcast_like(g: Any, x: Any) -> Any:
    """`g` broadcast to `x`'s shape (through a select on x when x's shape is not static)."""
    if tuple(g.shape) == tuple(x.shape):
        return g
    if None not in x.shape:
        return _bind("broadcast_to", g, shape=tuple(x.shape))
    return where(equal(x, x), g, g)  # both branches g: NaN in x does not matter


def zeros_like(x: Any) -> Any:
    """Zeros with x's shape and dtype, also when the shape is not static."""
    return broadcast_like(constant(0, x.dtype), x)


def product(dims: Sequence[int | None]) -> int | None:
    """The number of elements of `dims`, None if one is unknown."""
    return None if None in dims else math.prod(dims)
