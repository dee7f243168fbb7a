"""The collectives of replicas in one process: each position's values combined by one op.

`all_reduce_values` takes every replica's list of tensors (in replica order) and gives the
list of their combinations, one `all_reduce` op per position: eagerly it runs at once,
staged it is one op of the step's graph, fused with the update that reads it. Positions are
not packed into buckets here: in one process a bucket would only add a concatenation and a
split around ops that fusion already merges.
"""

from __future__ import annotations

from typing import Any

from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.primitives.collective import all_reduce_p


def all_reduce_values(reduction: str, payloads: list[list[Any]]) -> list[Any]:
    """For each position, the `reduction` ("sum", "mean", "max", "min") of the replicas'
    tensors at that position; one replica's values are their own reduction."""
    if len(payloads) == 1:
        return [convert_to_tensor(value) for value in payloads[0]]
    return [all_reduce_p.bind(*[convert_to_tensor(v) for v in values], reduction=reduction)
            for values in zip(*payloads, strict=True)]
