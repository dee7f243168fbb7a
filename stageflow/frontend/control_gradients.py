"""Gradient rules of `cond`, `while` and `py_func`, registered on their primitives.

Every other gradient rule sits beside its primitive and binds primitives; these build
regions, which takes the tracing machinery of this layer (`sf.cond`, `sf.while_loop`,
`GradientTape`), so they are defined here and attached with `def_vjp` when the package is
imported. They only run while tracing: eagerly, control flow is Python and a tape records
the ops that actually ran.

- `cond`: the backward is a `cond` on the same index whose branch i replays branch i's
  graph under a tape and returns the gradients of its operands, so only the taken
  branch's backward runs, and a second derivative differentiates that `cond` again.
- `while`: the backward first runs the loop forward again, pushing every iteration's loop
  variables (but those the body only writes rows into, whose values no gradient reads)
  onto stacks (of `maximum_iterations` rows written in place when the loop has
  one, else a leading axis that grows, so its dim is unknown), then loops
  backwards over them: each step replays the body under a tape on that iteration's
  variables and carries the variables' cotangents back, summing those of the values the
  body reads from above. The forward pass thus runs twice (once in the forward function,
  once in the backward), and the stacks are the memory the forward would otherwise save.
- `py_func`: the backward is another `py_func` that runs the Python function eagerly under
  a tape (the paper's differentiable py_func); a `numpy_function` has no gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location
from stageflow.frontend.graph import Graph
from stageflow.frontend.ops.control import _Callback, cond, py_func, switch_case, while_loop
from stageflow.frontend.ops.creation import zeros, zeros_like
from stageflow.frontend.ops.elementwise import add, greater_equal, subtract
from stageflow.frontend.ops.shape import concat, dynamic_update_index, expand_dims, gather
from stageflow.frontend.replay import replay
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tape import GradientTape
from stageflow.frontend.tensor import Tensor
from stageflow.primitives.control import callback_of, cond_p, py_func_p, while_p
from stageflow.primitives.structural import update_index_p


def _differentiable(value: Any) -> bool:
    return isinstance(value, Tensor) and dtypes.is_inexact(value.dtype)


def _filled(cotangents: list, outputs: list) -> list:
    """Cotangents with zeros for unused float results (None stays for the others)."""
    return [zeros_like(y) if g is None and _differentiable(y) else g
            for g, y in zip(cotangents, outputs, strict=True)]


def _gradients(graph: Graph, arguments: list, above: list, wrt: list,
               cotangents: list) -> list:
    """Replay `graph` under a tape and differentiate its float results, weighted by
    `cotangents`, with respect to `wrt` (tensors among its arguments and operands); zeros
    where a value does not reach the results."""
    with GradientTape() as tape:
        tape.watch(wrt)
        results = replay(graph, arguments, above)
    pairs = [(y, g) for y, g in zip(results, cotangents, strict=True) if g is not None]
    grads = tape.gradient([y for y, _ in pairs], wrt, output_gradients=[g for _, g in pairs])
    return [zeros_like(x) if g is None else g for g, x in zip(grads, wrt, strict=True)]


@cond_p.def_vjp
def _cond_vjp(cotangents: list, inputs: list, outputs: list, *, branches: tuple) -> list:
    index, operands = inputs[0], list(inputs[1:])
    wrt = [position for position, x in enumerate(operands) if _differentiable(x)]
    if not wrt:
        return [None] * len(inputs)
    cotangents = _filled(cotangents, outputs)

    def backward(branch: Graph) -> Callable[[], list]:
        return lambda: _gradients(branch, [], operands, [operands[i] for i in wrt], cotangents)

    fns = [backward(branch) for branch in branches]
    if index.dtype == dtypes.bool_:
        grads = cond(index, fns[0], fns[1], name="cond_grad")
    else:
        grads = switch_case(index, fns, name="switch_case_grad")
    result: list = [None] * len(inputs)
    for position, grad in zip(wrt, grads, strict=True):
        result[1 + position] = grad
    return result


@while_p.def_vjp
def _while_vjp(cotangents: list, inputs: list, outputs: list, *, cond: Graph,
               body: Graph, maximum_iterations: int | None = None) -> list:
    count = len(body.inputs)
    inits, above = list(inputs[:count]), list(inputs[count:])
    carried_float = [k for k in range(count) if _differentiable(outputs[k])]
    above_float = [j for j, x in enumerate(above) if _differentiable(x)]
    if not carried_float and not above_float:
        return [None] * len(inputs)
    cotangents = _filled(cotangents, outputs)

    # -- forward again, counting iterations and pushing each one's loop variables (those
    # whose values the backward needs): into stacks of `maximum_iterations` rows where it
    # and the variables' shapes are known (static shapes: the loops compile, the rows
    # written in place), else growing ones
    written = _written_only(body)
    kept = [k for k in range(count) if k not in written]
    _refuse_changing_shapes(body, inits, kept)
    sized = maximum_iterations is not None and all(
        None not in inits[k].shape for k in kept)

    def push(trips: Any, *state: Any) -> list:
        carry, stacks = list(state[:count]), list(state[count:])
        if sized:
            stacks = [dynamic_update_index(s, carry[k], trips) for s, k in zip(stacks, kept,
                                                                                strict=True)]
        else:
            stacks = [concat([s, expand_dims(carry[k], 0)], 0)
                      for s, k in zip(stacks, kept, strict=True)]
        return [add(trips, 1), *replay(body, carry, above), *stacks]

    if sized:
        empty = [zeros([maximum_iterations, *inits[k].shape], inits[k].dtype) for k in kept]
    else:
        empty = [expand_dims(inits[k], 0)[:0] for k in kept]
    saved = while_loop(lambda trips, *state: replay(cond, list(state[:count]), above)[0],
                       push, [np.int64(0), *inits, *empty], name="while_grad_forward")
    trips, stacks = saved[0], saved[1 + count:]

    # -- backwards over the saved iterations
    def step(position: Any, *state: Any) -> list:
        grads, sums = list(state[:len(carried_float)]), list(state[len(carried_float):])
        carry = list(outputs)  # stands for the unsaved variables: their values are not read
        for k, stack in zip(kept, stacks, strict=True):
            carry[k] = gather(stack, position, axis=0)
        wrt = [carry[k] for k in carried_float] + [above[j] for j in above_float]
        weights: list = [None] * count
        for k, g in zip(carried_float, grads, strict=True):
            weights[k] = g
        new = _gradients(body, carry, above, wrt, weights)
        sums = [add(s, g) for s, g in zip(sums, new[len(carried_float):], strict=True)]
        return [subtract(position, 1), *new[:len(carried_float)], *sums]

    start = [cotangents[k] for k in carried_float] + [zeros_like(above[j]) for j in above_float]
    final = while_loop(lambda position, *_: greater_equal(position, 0), step,
                       [subtract(trips, 1), *start], name="while_grad")
    result: list = [None] * len(inputs)
    for k, g in zip(carried_float, final[1:1 + len(carried_float)], strict=True):
        result[k] = g
    for j, g in zip(above_float, final[1 + len(carried_float):], strict=True):
        result[count + j] = g
    return result


def _written_only(body: Graph) -> set[int]:
    """The loop variables the body only writes a row into (``update_index`` of the
    variable is its next value, and neither is used otherwise), as a `TensorArray` a loop
    fills: the gradient rule of that write reads no value of the variable, so the backward
    pass needs none of its per-iteration values, and saving a whole buffer per iteration
    would take memory quadratic in the trip count."""
    uses: dict[int, list[tuple[Any, int]]] = {}
    for eq in body.equations:
        for position, value in enumerate(eq.inputs):
            uses.setdefault(id(value), []).append((eq, position))
    returned = [id(v) for v in body.outputs]
    found = set()
    for k, value in enumerate(body.inputs):
        users = uses.get(id(value), [])
        if len(users) != 1 or id(value) in returned:
            continue
        eq, position = users[0]
        result = id(eq.outputs[0])
        if (eq.primitive is update_index_p and position == 0 and result not in uses
                and returned.count(result) == 1 and returned.index(result) == k):
            found.add(k)
    return found


def _refuse_changing_shapes(body: Graph, inits: list, kept: list[int]) -> None:
    """A saved loop variable whose dims change between iterations (tracing relaxed a known
    dim of its initial value) cannot be stacked per iteration: say so, naming the line."""
    for k in kept:
        have, inside = tuple(inits[k].shape), body.inputs[k].type.shape
        if any(a is not None and b is None for a, b in zip(have, inside, strict=True)):
            raise NotImplementedError(
                f"while_loop gradient: loop variable {k} changes shape between iterations "
                f"({format_shape(have)} on entry, {format_shape(inside)} in the loop; e.g. a "
                f"TensorArray with dynamic_size=True growing), so its values cannot be saved "
                f"for the backward pass; give it a fixed size{describe_location()}")


class _Gradient:
    """The callable of a py_func's gradient: the function under a tape, on eager tensors;
    its arguments are the function's, then the cotangents of its float results."""

    def __init__(self, func: Callable[..., Any], count: int, wrt: list[int]) -> None:
        self.func, self.count, self.wrt = func, count, wrt
        self.__qualname__ = f"grad({getattr(func, '__qualname__', repr(func))})"

    def __call__(self, *values: Any) -> list:
        args, cts = list(values[: self.count]), list(values[self.count:])
        xs = [args[i] for i in self.wrt]
        with GradientTape() as tape:
            tape.watch(xs)
            ys = self.func(*args)
        ys = [y for y in (ys if isinstance(ys, list | tuple) else [ys]) if _differentiable(y)]
        grads = tape.gradient(ys, xs, output_gradients=cts)
        return [zeros_like(x) if g is None else g for g, x in zip(grads, xs, strict=True)]


@py_func_p.def_vjp
def _py_func_vjp(cotangents: list, inputs: list, outputs: list, *, func: str,
                 shapes: tuple, dtypes: tuple, schedule: str = "") -> list:
    del shapes, dtypes, schedule
    callback = callback_of(func)
    wrt = [i for i, x in enumerate(inputs) if _differentiable(x)]
    if not wrt or not (isinstance(callback, _Callback) and callback.tensors):
        return [None] * len(inputs)  # numpy_function: NumPy code has no gradient
    cts = [g for g, y in zip(_filled(cotangents, outputs), outputs, strict=True)
           if _differentiable(y)]
    grads = py_func(_Gradient(callback.func, len(inputs), wrt), [*inputs, *cts],
                    [TensorSpec(inputs[i].shape, inputs[i].dtype) for i in wrt])
    result: list = [None] * len(inputs)
    for i, g in zip(wrt, grads, strict=True):
        result[i] = g
    return result
