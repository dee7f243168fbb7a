"""`sf.vectorized_map(fn, elems)`: per-example code run as one batched graph (TensorFlow's
name; JAX's `vmap` idea).

`fn` is traced once on one example's types, then its graph is replayed with every value
that depends on the examples carrying a leading batch dim: each primitive applies its
batching rule (`RULES`, by op family: elementwise ops align ranks, reductions and structural
ops shift their axes, matmuls broadcast their batch dims), so per-example code becomes
one op per op, not one per example. An op without a rule, or a batching it does not cover
(a gather at per-example indices, control flow), runs in a `while_loop` over the examples,
writing each result row in place, as TensorFlow's ``fallback_to_while_loop`` does: the
result is the same, and only that op loses the batching.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stageflow.core import nest
from stageflow.core.op_facts import Family
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.shapes import same_dim_reference
from stageflow.core.source import describe_location
from stageflow.frontend.ops.control import while_loop
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import zeros
from stageflow.frontend.ops.elementwise import add, less
from stageflow.frontend.ops.shape import broadcast_to, dynamic_update_index, reshape_to
from stageflow.frontend.regions import share_captures, trace_regions
from stageflow.frontend.replay import replay, replay_control
from stageflow.frontend.tensor import Tensor
from stageflow.primitives import linalg, reduction, scan, sorting, structural
from stageflow.primitives.control import cond_p, while_p
from stageflow.primitives.functional import call_p

__all__ = ["vectorized_map"]

Batched = tuple[list[Any], list[bool]]  # results and whether each has the batch dim


def vectorized_map(fn: Callable[..., Any], elems: Any,
                   fallback_to_while_loop: bool = True) -> Any:
    """``fn`` applied to each slice of `elems` along its first dim, the results stacked
    (as ``sf.stack([fn(x) for x in elems])``, computed as one batched graph).

    `elems` is a tensor or a nest of tensors with one leading dim; `fn` takes one example
    (the same nest, each leaf without that dim) and returns a tensor or a nest. Works eagerly
    and inside `sf.function`. ``sf.vectorized_map(lambda x: sf.reduce_sum(x * x), xs)`` is
    the row norms squared of ``xs``.

    >>> rows = sf.constant([[1.0, 2.0], [3.0, 4.0]])
    >>> sf.vectorized_map(lambda row: sf.reduce_sum(row * row), rows)
    sf.Tensor([ 5., 25.], shape=(2,), dtype=float32)
    """
    leaves = nest.flatten(elems)[0]
    leaves = [convert_to_tensor(leaf) for leaf in leaves]
    sizes = {leaf.shape[0] if leaf.ndim else "scalar" for leaf in leaves}
    if not leaves or "scalar" in sizes or len(sizes) != 1:
        raise ValueError(f"vectorized_map: elems must be tensors with one leading dim, got "
                         f"shapes {[leaf.shape for leaf in leaves]}{describe_location()}")
    count = sizes.pop()
    types = [ShapedType(leaf.shape[1:], leaf.dtype) for leaf in leaves]
    one_argument = nest.flatten((elems,))[1]  # fn takes the example as one argument
    (region,) = trace_regions([fn], types, one_argument, ["vectorized_map_fn"],
                              "vectorized_map")
    if region.assigns:
        raise ValueError(f"vectorized_map: fn assigns variables; it must be a function of "
                         f"its example{describe_location()}")
    captured = share_captures([region.graph])
    graph = region.graph
    env: dict[int, tuple[Any, bool]] = {id(v): (x, True) for v, x in zip(graph.inputs, leaves,
                                                                        strict=True)}
    env.update((id(c.value), (s, False)) for c, s in zip(graph.captures, captured, strict=True))
    for eq in graph.equations:
        operands = [env[id(v)] for v in eq.inputs]
        values, batched = [o[0] for o in operands], [o[1] for o in operands]
        if not any(batched):
            results, flags = _apply(eq, values), None
        else:
            rule = _rule_for(eq.primitive)
            outcome = (rule(values, batched, eq.params, eq.primitive) if rule is not None
                       else None)
            if outcome is None:
                if not fallback_to_while_loop:
                    raise NotImplementedError(
                        f"vectorized_map: no batching rule for sf.{eq.primitive.name} with "
                        f"these operands{describe_location()}")
                outcome = _loop(eq, values, batched, count)
            results, flags = outcome
        flags = flags if flags is not None else [False] * len(results)
        env.update((id(v), (r, f)) for v, r, f in zip(eq.outputs, results, flags, strict=True))
    outputs = []
    for value in graph.outputs:
        result, batched_output = env[id(value)]
        if not batched_output:  # does not depend on the examples: the same for each
            result = broadcast_to(result, (count, *result.shape))
        outputs.append(result)
    return region.structure(outputs)


def _apply(eq: Any, values: list) -> list:
    """The equation's op on these operands in the current trace."""
    if eq.primitive is call_p:
        return replay(eq.params["callee"].graph, values)
    if eq.primitive in (cond_p, while_p):
        return replay_control(eq.primitive, values, eq.params)
    result = eq.primitive.bind(*values, **eq.params)
    return list(result) if eq.primitive.multiple_results else [result]


def _loop(eq: Any, values: list, batched: list[bool], count: int) -> Batched:
    """The op once per example in a `while_loop`, each result written into its row."""
    def example(i: Tensor) -> list:
        return _apply(eq, [v[i] if b else v for v, b in zip(values, batched, strict=True)])

    first = example(convert_to_tensor(0))
    buffers = [zeros((count, *r.shape), r.dtype) for r in first]

    def body(i: Tensor, *rows: Tensor) -> tuple:
        return (add(i, 1), *(dynamic_update_index(buffer, result, i)
                             for buffer, result in zip(rows, example(i), strict=True)))

    _, *results = while_loop(lambda i, *_: less(i, count), body,
                             [convert_to_tensor(0), *buffers], maximum_iterations=count)
    return results, [True] * len(results)


# -- batching rules: (operands, which are batched, params) -> (results, which are batched),
#    or None where the rule does not cover these operands ---------------------------------


def _rank(value: Any, batched: bool) -> int:
    """The rank of one example's value."""
    return len(value.shape) - (1 if batched else 0)


def _aligned(values: list, batched: list[bool], rank: int) -> list:
    """Batched operands with ones inserted after the batch dim up to `rank` per example, so
    that right-aligned broadcasting matches example dims with example dims."""
    out = []
    for value, b in zip(values, batched, strict=True):
        missing = rank - _rank(value, b)
        if b and missing > 0:
            value = reshape_to(value, (value.shape[0], *([1] * missing), *value.shape[1:]))
        out.append(value)
    return out


def _elementwise(values: list, batched: list[bool], params: dict, primitive: Any) -> Batched:
    """An elementwise op: example ranks aligned, the batch dim broadcast like any other."""
    rank = max(_rank(v, b) for v, b in zip(values, batched, strict=True))
    return [primitive.bind(*_aligned(values, batched, rank), **params)], [True]


def _reduce(values: list, batched: list[bool], params: dict, primitive: Any) -> Batched:
    axes = tuple(a + 1 for a in params["axes"])
    return [primitive.bind(values[0], axes=axes, keepdims=params["keepdims"])], [True]


def _arg_reduce(values: list, batched: list[bool], params: dict, primitive: Any) -> Batched:
    return [primitive.bind(values[0], **{**params, "axis": params["axis"] + 1})], [True]


def _matmul(values: list, batched: list[bool], params: dict, primitive: Any) -> Batched:
    """The batch dim is one more leading (broadcast) dim of the product: every batched
    operand gets the example rank of the larger of a and b, so their own batch dims align."""
    rank = max(_rank(values[0], batched[0]), _rank(values[1], batched[1]))
    return [primitive.bind(*_aligned(values, batched, rank), **params)], [True]


def _transpose(values: list, batched: list[bool], params: dict, primitive: Any) -> Batched:
    perm = (0, *(p + 1 for p in params["perm"]))
    return [structural.transpose_p.bind(values[0], perm=perm)], [True]


def _reshape(values: list, batched: list[bool], params: dict, primitive: Any
             ) -> Batched:
    x = values[0]
    batch = same_dim_reference(0) if x.shape[0] is None else x.shape[0]
    shape = (batch, *(n - 1 if n <= -2 else n for n in params["shape"]))
    return [structural.reshape_p.bind(x, shape=shape)], [True]


def _broadcast(values: list, batched: list[bool], params: dict, primitive: Any
               ) -> Batched:
    x = values[0]
    shape = params["shape"]
    x = _aligned([x], [True], len(shape))[0]
    return [structural.broadcast_to_p.bind(x, shape=(x.shape[0], *shape))], [True]


def _slice(values: list, batched: list[bool], params: dict, primitive: Any
           ) -> Batched:
    slices = ((None, None, 1), *params["slices"])
    return [structural.slice_p.bind(values[0], slices=slices)], [True]


def _pad(values: list, batched: list[bool], params: dict, primitive: Any
         ) -> Batched:
    pads = ((0, 0), *params["pads"])
    return [structural.pad_p.bind(values[0], pads=pads, value=params["value"])], [True]


def _concat(values: list, batched: list[bool], params: dict, primitive: Any
            ) -> Batched:
    count = next(v.shape[0] for v, b in zip(values, batched, strict=True) if b)
    parts = [v if b else broadcast_to(v, (count, *v.shape))
             for v, b in zip(values, batched, strict=True)]
    return [structural.concat_p.bind(*parts, axis=params["axis"] + 1)], [True]


def _gather(values: list, batched: list[bool], params: dict, primitive: Any
            ) -> Batched | None:
    if batched[1]:
        return None  # per-example indices: the loop
    return [structural.gather_p.bind(values[0], values[1], axis=params["axis"] + 1)], [True]


def _along_axis(values: list, batched: list[bool], params: dict, primitive: Any) -> Batched:
    """Ops over one `axis` of operands of one shape (sorting with payloads, scans): the
    unbatched operands broadcast to the batch, the axis one further."""
    count = next(v.shape[0] for v, b in zip(values, batched, strict=True) if b)
    operands = [v if b else broadcast_to(v, (count, *v.shape))
                for v, b in zip(values, batched, strict=True)]
    result = primitive.bind(*operands, **{**params, "axis": params["axis"] + 1})
    results = list(result) if primitive.multiple_results else [result]
    return results, [True] * len(results)


Rule = Callable[[list, list[bool], dict, Any], Batched | None]
RULES: dict[Primitive, Rule] = {
    **dict.fromkeys([reduction.reduce_sum_p, reduction.reduce_prod_p, reduction.reduce_max_p,
                     reduction.reduce_min_p], _reduce),
    reduction.argmax_p: _arg_reduce, reduction.argmin_p: _arg_reduce,
    linalg.matmul_p: _matmul, linalg.matmul_add_p: _matmul,
    structural.transpose_p: _transpose, structural.reshape_p: _reshape,
    structural.broadcast_to_p: _broadcast, structural.slice_p: _slice,
    structural.pad_p: _pad, structural.concat_p: _concat, structural.gather_p: _gather,
    **dict.fromkeys([sorting.sort_p, scan.cumsum_p, scan.cumprod_p], _along_axis),
}


def _rule_for(primitive: Any) -> Rule | None:
    """The primitive's batching rule: its own, else its family's (elementwise ops)."""
    rule = RULES.get(primitive)
    if rule is None and primitive.family is Family.ELEMENTWISE:
        return _elementwise
    return rule
