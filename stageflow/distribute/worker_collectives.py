"""All-reduce between worker processes, worker to worker, through Ray's collective library.

A `MultiWorkerMirroredStrategy` has one replica per worker process. Each worker joins a
collective group (`join`: Ray's ``ray.util.collective`` with its CPU backend, gloo, which
Ray runs on ``torch.distributed``): gloo's ring and tree all-reduce over TCP between the
workers, so the gradients never pass through the coordinator. It is the library Ray's
own training stack uses on CPUs, and the only CPU backend Ray's collectives have.

In a replica's staged step an all-reduce is two `py_func` ops calling callbacks that every
worker of the group registered under one name (`register_named`), so the graph function
still runs after travelling to the worker as IR text, compiled, with the collective as
calls back into Python. The values of one all-reduce are packed into buckets (one flat
buffer per dtype, up to `BUCKET_BYTES` or the strategy's ``bytes_per_pack``, the last values
first: a backward pass computes the last layers' gradients first): a few collective calls
per step, not one per variable.

Each bucket's collective runs in the background, overlapping the step's other work: its
start (a py_func the `schedule` pass runs as soon as the bucket's values are computed)
copies them and hands them to the group's collective thread, and its wait (one the pass
runs as late as the results' users allow) takes them back reduced. One thread per group
makes the collectives in the order the starts ran, the same in every worker, as gloo
needs; Ray's collectives have no asynchronous calls of their own.
"""

from __future__ import annotations

import concurrent.futures
import functools
import itertools
from typing import Any

import numpy as np

from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.shape import concat, reshape
from stageflow.primitives.control import py_func_p, register_named

KINDS = ("sum", "mean", "max", "min")
BUCKET_BYTES = 4 << 20  # bytes packed into one collective call at most, by default
_ops = itertools.count()


def start_name(group: str, kind: str) -> str:
    """The callback that starts one of `group`'s all-reduces of `kind`."""
    return f"sf.distribute.{group}.all_reduce.{kind}"


def wait_name(group: str) -> str:
    """The callback that waits for one of `group`'s all-reduces."""
    return f"sf.distribute.{group}.all_reduce.wait"


class _Collectives:
    """A group's collective thread in this worker, and the all-reduces started on it and
    not yet waited for, by ticket."""

    def __init__(self) -> None:
        self.thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="collective")
        self.started: dict[int, concurrent.futures.Future] = {}
        self.tickets = itertools.count()


_groups: dict[str, _Collectives] = {}


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
    _groups[group] = _Collectives()
    for kind in KINDS:
        register_named(start_name(group, kind),
                       functools.partial(_start, group, kind, world_size))
    register_named(wait_name(group), functools.partial(_wait, group))


def declare(group: str) -> None:
    """Register `group`'s callback names in the coordinator, so that a replica's graph
    naming them may travel to the workers; called here, they say where they run."""
    for name in [*(start_name(group, kind) for kind in KINDS), wait_name(group)]:
        register_named(name, functools.partial(_elsewhere, group))


def _elsewhere(group: str, *_: Any) -> None:
    raise RuntimeError(f"collective group {group} meets in the strategy's worker processes; "
                       "its step runs there, through strategy.run")


def leave(group: str) -> None:
    """Leave collective `group` (runs in the worker)."""
    collective = _collective()
    pending = _groups.pop(group, None)
    if pending is not None:
        pending.thread.shutdown(wait=True, cancel_futures=True)
    if collective.is_group_initialized(group):
        collective.destroy_collective_group(group)


def _start(group: str, kind: str, world_size: int, value: np.ndarray) -> np.ndarray:
    """Start this worker's part of one all-reduce of `value` (copied: the program may
    reuse its buffer once the call returns) on the group's thread; its ticket, for
    `_wait`."""
    pending = _groups[group]
    ticket = next(pending.tickets)
    array = np.array(value, copy=True, order="C")
    pending.started[ticket] = pending.thread.submit(_all_reduce, group, kind, world_size, array)
    return np.asarray(ticket, np.int64)


def _wait(group: str, ticket: np.ndarray) -> np.ndarray:
    """The group's values combined, of the all-reduce `ticket` started; what it raised,
    if it failed (a worker that died)."""
    return _groups[group].started.pop(int(ticket)).result()


def _all_reduce(group: str, kind: str, world_size: int, array: np.ndarray) -> np.ndarray:
    """This worker's part of one all-reduce: the group's values combined into `array`."""
    import torch  # noqa: PLC0415 - in workers only

    collective = _collective()
    from ray.util.collective.types import ReduceOp  # noqa: PLC0415 - in workers only

    operation = {"max": ReduceOp.MAX, "min": ReduceOp.MIN}.get(kind, ReduceOp.SUM)
    collective.allreduce(torch.from_numpy(array), group_name=group, op=operation)
    if kind == "mean":
        array /= np.asarray(world_size, array.dtype)
    return array


def all_reduce_across_workers(group: str, kind: str, values: list[Any],
                              bucket_bytes: int = BUCKET_BYTES) -> list[Any]:
    """The group's all-reduce of `values` (this replica's tensors), as ops of the step the
    replica stages: the values packed into buckets of at most `bucket_bytes` by dtype,
    each bucket's collective started in the background and waited for (the `schedule`
    pass places the two)."""
    tensors = [convert_to_tensor(value) for value in values]
    results: list[Any] = [None] * len(tensors)
    for bucket in _buckets(tensors, bucket_bytes):
        parts = [tensors[index] for index in bucket]
        sizes = [int(np.prod(part.shape)) for part in parts]
        flat = concat([reshape(part, [-1]) for part in parts], 0) if len(parts) > 1 \
            else reshape(parts[0], [-1])
        (ticket,) = py_func_p.bind(
            flat, func=f"{start_name(group, kind)}#{next(_ops)}", shapes=((),),
            dtypes=(np.dtype(np.int64),), schedule="early")
        (reduced,) = py_func_p.bind(
            ticket, func=f"{wait_name(group)}#{next(_ops)}", shapes=((sum(sizes),),),
            dtypes=(flat.dtype,), schedule="late")
        start = 0
        for index, part, size in zip(bucket, parts, sizes, strict=True):
            whole = len(parts) == 1
            results[index] = reshape(reduced if whole else reduced[start:start + size],
                                     list(part.shape))
            start += size
    return results


def _buckets(tensors: list[Any], bucket_bytes: int) -> list[list[int]]:
    """Indices of `tensors` grouped by dtype, from the last (a backward pass computes the
    last layers' gradients first), each group at most `bucket_bytes` (a larger tensor
    alone), the groups in the order they close."""
    open_buckets: dict[Any, tuple[list[int], int]] = {}
    buckets: list[list[int]] = []
    for index, tensor in reversed(list(enumerate(tensors))):
        size = int(np.prod(tensor.shape)) * tensor.dtype.itemsize
        indices, filled = open_buckets.get(tensor.dtype, ([], 0))
        if indices and filled + size > bucket_bytes:
            buckets.append(indices)
            indices, filled = [], 0
        open_buckets[tensor.dtype] = (indices + [index], filled + size)
    buckets.extend(indices for indices, _ in open_buckets.values())
    return buckets
