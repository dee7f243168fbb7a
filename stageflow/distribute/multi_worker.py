"""`MultiWorkerMirroredStrategy`: one replica per Ray worker process, gradients all-reduced
worker to worker.

The strategy connects the workers (`sf.distribute.connect`), joins them into a collective
group (`worker_collectives`), and mirrors variables on them (each worker keeps its copy).
A staged step (`sf.function`) is traced once per worker (the replica's graph holds the
worker's copies of the variables and its collective calls), sent there as IR, and called
on every worker in turn without waiting: each worker runs it compiled and meets the others
inside it at each all-reduce. An eager step runs on a thread per replica at once, each
placing its ops on its worker. The coordinator only sends the shards and fetches what the
caller reads.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.core import context, devices, nest
from stageflow.distribute import cluster, replicas
from stageflow.distribute.remote import TIMEOUT, RemoteArray, RemoteDeviceError
from stageflow.distribute.strategy import MirroredStrategy, Strategy
from stageflow.distribute.worker_collectives import (
    BUCKET_BYTES,
    all_reduce_across_workers,
    declare,
)
from stageflow.frontend.tracer import GraphTrace
from stageflow.staging.function import Function


class MultiWorkerMirroredStrategy(MirroredStrategy):
    """Synchronous data parallelism over worker processes: one replica per task of `jobs`
    (default two workers), on a local Ray cluster or the one at `address` (TensorFlow's
    ``tf.distribute.MultiWorkerMirroredStrategy``, with Ray in place of a cluster spec).

    Connecting replaces the workers `sf.distribute.connect` made before. A worker that dies
    makes the step that needs it raise `RemoteDeviceError` naming its device; make the
    strategy again (new workers) and restore the last checkpoint to go on::

        strategy = sf.distribute.MultiWorkerMirroredStrategy(jobs={"worker": 2})
        with strategy.scope():
            model, optimizer = make_model(), sf.optimizers.SGD(0.1)
        for batch in strategy.experimental_distribute_dataset(dataset):
            losses = strategy.run(step, args=batch)  # step: an sf.function, run in the workers
            loss = strategy.reduce("SUM", losses, axis=None)

    `run` is called from Python, not inside an `sf.function`: decorate the step itself
    with ``@sf.function`` to have each worker run it compiled. Its collectives need Ray's
    CPU backend (``pip install 'stageflow[distributed]'``). It is a `MirroredStrategy`
    whose replicas are processes:

    >>> issubclass(sf.distribute.MultiWorkerMirroredStrategy, sf.distribute.MirroredStrategy)
    True
    """

    def __init__(self, jobs: dict[str, int] | None = None, address: str | None = None,
                 communication_options: Any = None) -> None:
        names = cluster.connect(jobs or {"worker": 2}, address)
        tasks = [name for name in names if name.endswith("/device:CPU:0")]
        super().__init__(tasks)
        # The collectives are gloo's whatever `sf.distribute.experimental.
        # CommunicationOptions` asks; its `bytes_per_pack` sizes the buckets of the steps
        # traced after it is set (0: the default).
        self.communication_options = communication_options
        self._group = f"g{uuid.uuid4().hex[:12]}"
        declare(self._group)
        ray = cluster.ray_module()
        joined = [actor.join_collective.remote(self._group, len(tasks), rank)
                  for rank, actor in enumerate(cluster.workers())]
        try:
            ray.get(joined, timeout=TIMEOUT)
        except ray.exceptions.GetTimeoutError:
            raise RemoteDeviceError(f"the workers did not form a collective group within "
                                    f"{TIMEOUT:.0f} s") from None

    def _combine(self, name: str, kind: str, values: list[Any]) -> list[Any]:
        """This replica's all-reduce: a collective call its worker makes with the others."""
        pack = getattr(self.communication_options, "bytes_per_pack", 0) or BUCKET_BYTES
        return all_reduce_across_workers(self._group, kind, values, pack)

    stages_each_replica = True

    def run(self, fn: Callable[..., Any], args: tuple | list = (),
            kwargs: dict | None = None) -> Any:
        """`fn` once per worker, all at once; returns once every worker finished its step,
        or raises `RemoteDeviceError` naming the first worker that died (the others wait
        for it inside the step's collectives)."""
        results = Strategy.run(self, fn, args, kwargs)
        self._wait_for(results)
        return results

    def _schedule(self, step: Callable[..., Any]) -> str:
        """A staged step's calls to the workers do not wait: made in turn from this thread;
        an eager one's ops wait for their worker, each of which waits for the others in
        the collectives: on threads at once."""
        return replicas.IN_TURN if isinstance(step, Function) else replicas.AT_ONCE

    def _wait_for(self, results: Any) -> None:
        """Wait for every result of a step, keeping its value (the caller reads it next:
        a loss to reduce), so that reading it fetches nothing more."""
        pending: dict[Any, Any] = {}
        tensors: dict[Any, list[Any]] = {}
        for leaf in nest.flatten(results, expand_composites=True)[0]:
            buffer = getattr(leaf, "_buffer", None)
            if isinstance(buffer, RemoteArray) and not isinstance(buffer.ref, np.ndarray):
                pending[buffer.ref] = buffer.device
                tensors.setdefault(buffer.ref, []).append(leaf)
        ray = cluster.ray_module()
        while pending:
            # One at a time: a dead worker's result is ready (an error) at once, while the
            # others wait for it inside their collectives.
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=TIMEOUT,
                                fetch_local=False)
            if not ready:
                names = sorted({device.name for device in pending.values()})
                raise RemoteDeviceError(f"{', '.join(names)} did not finish a step within "
                                        f"{TIMEOUT:.0f} s")
            for ref in ready:
                value = np.asarray(pending.pop(ref).wait(ref))  # raises if its worker died
                devices.COUNTERS.copied(value.nbytes)
                for tensor in tensors[ref]:
                    tensor._value = value

    def _step(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`fn` as it is: eagerly, each of a replica's ops is a call to its worker; an
        `sf.function` is traced once per worker and runs there compiled."""
        if isinstance(context.current_trace(), GraphTrace):
            raise RuntimeError(
                "MultiWorkerMirroredStrategy.run runs each replica's step in its worker "
                "process: call it from Python, not inside an sf.function, and decorate the "
                "step given to run with @sf.function to compile it")
        return fn
