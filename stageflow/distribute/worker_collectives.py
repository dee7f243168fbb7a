"""All-reduce between worker processes, worker to worker, through Ray's collective library.

A `MultiWorkerMirroredStrategy` has one replica per worker process. Each worker joins a
collective group (`join`: Ray's ``ray.util.collective`` with its CPU backend, gloo, which
Ray runs on ``torch.distributed``): gloo's ring and tree all-reduce over TCP between the
workers, so the gradients never pass through the coordinator. It is the library Ray's
own training stack uses on CPUs, and the only CPU backend Ray's collectives have.

In a replica's staged step an all-reduce is a `py_func` op calling a callback that every
worker of the group registered under one name (`register_named`), so the graph function
still runs after travelling to the worker as IR text, compiled, with the collective as
one call back into Python. The values of one all-reduce are packed into buckets (one
flat buffer per dtype, up to `BUCKET_ELEMENTS`): a few collective calls per step, not one
per variable.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np

from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.shape import concat, reshape
from stageflow.primitives.control import py_func_p, register_named

KINDS = ("sum", "mean", "max", "min")
BUCKET_ELEMENTS = 1 << 22  # elements packed into one collective call at most
_ops = itertools.count()


def callback_name(group: str, kind: str) -> str:
    return f"sf.distribute.{group}.all_reduce.{kind}"


def _collective() -> Any:
    try:
        import ray.util.collective as collective  # noqa: PLC0415 - optional, in workers
        import torch  # noqa: F401, PLC0415 - gloo runs on torch.distributed
    except ImportError:
        raise ImportError("MultiWorkerMirroredStrategy needs Ray's collectives and their "
                          "CPU backend: pip install 'stageflow[distributed]'") from None
    return collective


def join(group: str, world_size: int, rank: int) -> None:
    """Join this worker to collective `group` as `rank` of `world_size`, and register the
    callbacks a replica's graph calls for it (runs in the worker)."""
    collective = _collective()
    collective.init_collective_group(world_size, rank, backend="gloo", group_name=group)
    for kind in KINDS:
        register_named(callback_name(group, kind),
                       functools.partial(_all_reduce, group, kind, world_size))


def declare(group: str) -> None:
    """Register `group`'s callback names in the coordinator, so that a replica's graph
    naming them may travel to the workers; called here, they say where they run."""
    for kind in KINDS:
        register_named(callback_name(group, kind), functools.partial(_elsewhere, group))


def _elsewhere(group: str, *_: Any) -> None:
    raise RuntimeError(f"collective group {group} meets in the strategy's worker processes; "
                       "its step runs there, through strategy.run")


def leave(group: str) -> None:
    """Leave collective `group` (runs in the worker)."""
    collective = _collective()
    if collective.is_group_initialized(group):
        collective.destroy_collective_group(group)


def _all_reduce(group: str, kind: str, world_size: int, value: np.ndarray) -> np.ndarray:
    """This worker's part of one all-reduce: the group's values combined, in place of a
    copy of `value`."""
    import torch  # noqa: PLC0415 - in workers only

    collective = _collective()
    from ray.util.collective.types import ReduceOp  # noqa: PLC0415 - in workers only

    operation = {"max": ReduceOp.MAX, "min": ReduceOp.MIN}.get(kind, ReduceOp.SUM)
    array = np.array(value, copy=True, order="C")
    collective.allreduce(torch.from_numpy(array), group_name=group, op=operation)
    if kind == "mean":
        array /= np.asarray(world_size, array.dtype)
    return array


def all_reduce_across_workers(group: str, kind: str, values: list[Any]) -> list[Any]:
    """The group's all-reduce of `values` (this replica's tensors), as ops of the step the
    replica stages: the values packed into buckets by dtype, one collective call each."""
    tensors = [convert_to_tensor(value) for value in values]
    results: list[Any] = [None] * len(tensors)
    for bucket in _buckets(tensors):
        parts = [tensors[index] for index in bucket]
        sizes = [int(np.prod(part.shape)) for part in parts]
        flat = concat([reshape(part, [-1]) for part in parts], 0) if len(parts) > 1 \
            else reshape(parts[0], [-1])
        (reduced,) = py_func_p.bind(
            flat, func=f"{callback_name(group, kind)}#{next(_ops)}",
            shapes=((sum(sizes),),), dtypes=(flat.dtype,))
        start = 0
        for index, part, size in zip(bucket, parts, sizes, strict=True):
            results[index] = reshape(reduced[start:start + size], list(part.shape))
            start += size
    return results


def _buckets(tensors: list[Any]) -> list[list[int]]:
    """Indices of `tensors` grouped by dtype, in order, each group at most
    `BUCKET_ELEMENTS` elements (a larger tensor alone)."""
    open_buckets: dict[Any, tuple[list[int], int]] = {}
    buckets: list[list[int]] = []
    for index, tensor in enumerate(tensors):
        size = int(np.prod(tensor.shape))
        indices, filled = open_buckets.get(tensor.dtype, ([], 0))
        if indices and filled + size > BUCKET_ELEMENTS:
            buckets.append(indices)
            indices, filled = [], 0
        open_buckets[tensor.dtype] = (indices + [index], filled + size)
    buckets.extend(indices for indices, _ in open_buckets.values())
    return sorted(buckets)
