"""Control-flow ONNX ops: If, Loop and Scan, on `sf.cond` and `sf.while_loop`.

A subgraph (a branch, a loop body) runs through `node.run_subgraph`, in the scope of the
node's graph: it reads the enclosing graphs' values by name, which become the region's
captures. An If whose condition is known at import runs its taken branch alone; otherwise
each subgraph is traced once into a region of one sf op, whatever the trip count.

A loop's scan outputs (one row per iteration) are loop variables too: for Scan, whose trip
count is the sequence length, a buffer of that many rows written in place
(`sf.dynamic_update_index`); for Loop, which may stop early, a tensor that grows by a row
per iteration (its first dim unknown). Either starts from the rows' type, found by tracing
the body once into a region that is then dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import onnx

import stageflow as sf
from stageflow.core import context, nest
from stageflow.core.primitive import ShapedType
from stageflow.frontend.regions import trace_regions
from stageflow.frontend.tracer import GraphTrace
from stageflow.onnx.converters import Node, Value, converts


def _tensor(value: Value) -> sf.Tensor:
    return sf.convert_to_tensor(value)


def _scalar(node: Node, value: Value, what: str) -> sf.Tensor:
    """A one-element tensor as a scalar (ONNX's conditions and trip counts may be [1])."""
    if int(np.prod(value.shape)) != 1:
        raise node.error(f"{what} must hold one element, got shape {tuple(value.shape)}")
    return sf.reshape(value, ())


def _run(node: Node, graph: onnx.GraphProto, inputs: Sequence[Value]) -> list[Value]:
    assert node.run_subgraph is not None, "subgraphs run under evaluate.run_graph"
    return list(node.run_subgraph(graph, list(inputs)))


@converts("If")
def if_(node: Node, condition: Value) -> list[Value]:
    then_graph, else_graph = node.attr("then_branch"), node.attr("else_branch")
    if isinstance(condition, np.ndarray):
        if condition.size != 1:
            raise node.error(f"the condition must hold one element, got shape "
                             f"{condition.shape}")
        return _run(node, then_graph if bool(condition.reshape(())) else else_graph, [])
    predicate = _scalar(node, condition, "the condition")
    if predicate.dtype != sf.bool:
        raise node.error(f"the condition must be bool, got {predicate.dtype.name}")
    try:
        return list(sf.cond(predicate, lambda: _run(node, then_graph, []),
                            lambda: _run(node, else_graph, [])))
    except TypeError as error:  # branches of different ranks or dtypes
        first = str(error).splitlines()[0]
        raise node.error(f"{first}; stageflow needs both branches to return outputs of the "
                         f"same dtypes and ranks") from None


def _row_types(node: Node, step: Callable[..., list[Value]], values: Sequence[sf.Tensor],
               first: int) -> list[ShapedType]:
    """The types of `step`'s results from position `first` on (the scan outputs' rows),
    from a trace of `step` on `values`' types that is dropped (eagerly: from one call)."""
    if isinstance(context.current_trace(), GraphTrace):
        leaves, treedef = nest.flatten(tuple(values))
        types = [ShapedType(tuple(v.shape), v.dtype) for v in leaves]
        region, = trace_regions([step], types, treedef, [f"{node.op_type}_rows"],
                                node.op_type)
        rows = [v.type for v in region.graph.outputs[first:]]
    else:
        rows = [ShapedType(tuple(r.shape), np.dtype(r.dtype))
                for r in map(_tensor, step(*values)[first:])]
    return rows


def _static_rows(node: Node, rows: Sequence[ShapedType]) -> None:
    """An error unless every row's dims are known (Scan writes its rows into a buffer)."""
    for index, row in enumerate(rows):
        if any(d is None for d in row.shape):
            raise node.error(f"scan output {index} has rows of type {row}, with dims known "
                             f"only when the model runs; give the model's inputs static "
                             f"shapes (sf.onnx.load(..., input_shapes={{name: shape}}))")


def _grown(i: sf.Tensor, stack: sf.Tensor, row: Value) -> sf.Tensor:
    """`stack` with `row` after its rows. A row of dims known only at run time (a Slice of
    bounds the loop computes) starts the stack at the first iteration, as the empty stack
    the loop starts from cannot have those dims."""
    row = sf.expand_dims(_tensor(row), 0)
    if None not in row.shape[1:]:
        return sf.concat([stack, row], 0)
    return sf.cond(sf.equal(i, np.int64(0)), lambda: row, lambda: sf.concat([stack, row], 0))


@converts("Loop")
def loop(node: Node, trip_count: Value | None, condition: Value | None,
         *initial: Value) -> list[Value]:
    body = node.attr("body")
    carried = len(initial)
    scanned = len(body.output) - 1 - carried
    if scanned < 0:
        raise node.error(f"the body returns {len(body.output)} values, fewer than the "
                         f"condition and the {carried} loop-carried ones")
    limit = None if trip_count is None else sf.cast(_scalar(node, trip_count,
                                                            "the trip count M"), sf.int64)
    go = sf.constant(True) if condition is None else _scalar(node, condition,
                                                            "the condition input")

    def step(i: sf.Tensor, go: sf.Tensor, *state: sf.Tensor) -> list[Value]:
        results = _run(node, body, [i, go, *state])
        return [sf.reshape(results[0], ()), *results[1:]]

    def more(i: sf.Tensor, go: sf.Tensor, *_: sf.Tensor) -> sf.Tensor:
        return go if limit is None else sf.logical_and(go, sf.less(i, limit))

    start = [sf.constant(np.int64(0)), go, *(_tensor(v) for v in initial)]
    rows = _row_types(node, step, start, 1 + carried)
    # A dim known only at run time is 0 here: no iteration, no rows to say what it is.
    growing = [sf.zeros((0, *(0 if d is None else d for d in row.shape)), row.dtype)
               for row in rows]

    def body_step(i: sf.Tensor, go: sf.Tensor, *values: sf.Tensor) -> tuple:
        state, stacks = values[:carried], values[carried:]
        results = step(i, go, *state)
        grown = [_grown(i, stack, row)
                 for stack, row in zip(stacks, results[1 + carried:], strict=True)]
        return (sf.add(i, np.int64(1)), results[0], *results[1:1 + carried], *grown)

    final = sf.while_loop(more, body_step, (*start, *growing))
    return list(final[2:])


def _axes(node: Node, name: str, count: int, ranks: Sequence[int]) -> list[int]:
    axes = list(node.attr(name, [0] * count))
    if len(axes) != count:
        raise node.error(f"{name} has {len(axes)} entries for {count} tensors")
    for position, (axis, rank) in enumerate(zip(axes, ranks, strict=True)):
        if not -rank <= axis < rank:
            raise node.error(f"{name}[{position}] = {axis} is out of range for rank {rank}")
    return [axis % rank for axis, rank in zip(axes, ranks, strict=True)]


@converts("Scan")
def scan(node: Node, *inputs: Value) -> list[Value]:
    body = node.attr("body")
    scanned = node.attr("num_scan_inputs")
    carried = len(inputs) - scanned
    state = [_tensor(v) for v in inputs[:carried]]
    sequences = [_tensor(v) for v in inputs[carried:]]
    outputs = len(body.output) - carried
    in_axes = _axes(node, "scan_input_axes", scanned, [s.ndim for s in sequences])
    in_reversed = list(node.attr("scan_input_directions", [0] * scanned))
    out_reversed = list(node.attr("scan_output_directions", [0] * outputs))
    lengths = {s.shape[a] for s, a in zip(sequences, in_axes, strict=True)}
    if len(lengths) > 1 and None not in lengths:
        raise node.error(f"the scan inputs have different lengths {sorted(lengths)} along "
                         f"their scan axes")
    static = next(iter(lengths)) if len(lengths) == 1 and None not in lengths else None
    length = (sf.constant(np.int64(static)) if static is not None else
              sf.cast(sf.shape(sequences[0])[in_axes[0]], sf.int64))

    def rows_at(i: sf.Tensor) -> list[sf.Tensor]:
        last = sf.subtract(sf.subtract(length, i), np.int64(1))
        return [sf.gather(s, last if backwards else i, axis=axis)
                for s, axis, backwards in zip(sequences, in_axes, in_reversed, strict=True)]

    def step(i: sf.Tensor, *values: sf.Tensor) -> list[Value]:
        return _run(node, body, [*values, *rows_at(i)])

    zero = sf.constant(np.int64(0))
    rows = _row_types(node, step, [zero, *state], carried)
    _static_rows(node, rows)
    if static is not None:
        stacks = [sf.zeros((static, *row.shape), row.dtype) for row in rows]
    else:
        stacks = [sf.zeros((0, *row.shape), row.dtype) for row in rows]

    def body_step(i: sf.Tensor, *values: sf.Tensor) -> tuple:
        results = step(i, *values[:carried])
        last = sf.subtract(sf.subtract(length, i), np.int64(1))
        written = []
        for stack, row, backwards in zip(values[carried:], results[carried:], out_reversed,
                                         strict=True):
            if static is not None:
                written.append(sf.dynamic_update_index(stack, row, last if backwards else i))
            else:
                row = sf.expand_dims(_tensor(row), 0)
                written.append(sf.concat([row, stack] if backwards else [stack, row], 0))
        return (sf.add(i, np.int64(1)), *results[:carried], *written)

    final = sf.while_loop(lambda i, *_: sf.less(i, length), body_step, (zero, *state, *stacks))
    stacked = list(final[1 + carried:])
    out_axes = _axes(node, "scan_output_axes", outputs, [len(r.shape) + 1 for r in rows])
    moved = [sf.transpose(s, [*range(1, axis + 1), 0, *range(axis + 1, s.ndim)])
             if axis else s for s, axis in zip(stacked, out_axes, strict=True)]
    return [*final[1:1 + carried], *moved]
