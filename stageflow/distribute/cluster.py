"""Connecting to a Ray cluster: one `Worker` actor per task of each job, their devices
added to the runtime's (the paper's single coordinator, section 4.5).

With no address, `connect` starts a local Ray cluster on this machine (for development and
tests); ``address="auto"`` or ``"ray://host:port"`` joins a running one (``ray start
--head`` on the head node, ``ray start --address=...`` on the others). Connecting again
replaces the workers: their devices are listed anew and the old ones' tensors are lost.
"""

from __future__ import annotations

import threading
from typing import Any

from stageflow.distribute.remote import TIMEOUT, RemoteDevice, RemoteDeviceError
from stageflow.distribute.worker import Worker
from stageflow.runtime import devices as runtime_devices

_lock = threading.Lock()
_state: dict[str, Any] = {"actors": [], "devices": [], "started": False}


def ray_module() -> Any:
    """Ray, imported on first use (an optional dependency)."""
    try:
        import ray  # noqa: PLC0415 - an optional dependency, imported when used
    except ImportError:
        raise ImportError("sf.distribute needs Ray: pip install 'stageflow[distributed]'") \
            from None
    return ray


def connect(jobs: dict[str, int] | None = None, address: str | None = None) -> list[str]:
    """Start (or join, with `address`) a Ray cluster and one worker per task of `jobs`
    (default ``{"worker": 1}``); the names of the devices they add.

    Each worker is a process running a stageflow runtime; its devices are named
    ``/job:JOB/task:TASK/device:CPU:0``... Ops and staged functions placed there with
    `sf.device` run in that process, and their results (tensors of the dtypes and shapes
    the ops give) stay there until fetched::

        names = sf.distribute.connect(jobs={"worker": 2})  # a local cluster: seconds
        # ['/job:worker/task:0/device:CPU:0', '/job:worker/task:1/device:CPU:0']
        with sf.device(names[1]):
            y = sf.constant([1.0, 2.0]) * 3.0    # runs in worker 1; y stays there
        y.numpy()                                 # fetched: array([3., 6.], dtype=float32)
        sf.distribute.shutdown()

    Starting Ray takes seconds, so the example below stays in this process: the same
    placement syntax names this process's (logical) devices, a worker's device exists
    only once `connect` made it, and `jobs` is checked before Ray starts.

    >>> with sf.device("/device:CPU:1"):
    ...     y = sf.constant([1.0, 2.0]) * 3.0
    >>> y.device, y.numpy()
    ('/device:CPU:1', array([3., 6.], dtype=float32))
    >>> sf.constant(1.0).to("/job:worker/task:0/device:CPU:0")
    Traceback (most recent call last):
    ...
    ValueError: no device /job:worker/task:0/device:CPU:0: no worker of that job and task ...
    >>> sf.distribute.connect(jobs={"worker": 0})
    Traceback (most recent call last):
    ...
    ValueError: jobs must map job names to task counts >= 1, got {'worker': 0}
    """
    jobs = {"worker": 1} if jobs is None else dict(jobs)
    if not jobs or any(not isinstance(n, int) or n < 1 for n in jobs.values()):
        raise ValueError(f"jobs must map job names to task counts >= 1, got {jobs!r}")
    ray = ray_module()
    with _lock:
        _release(kill=True)
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, logging_level="ERROR",
                     log_to_driver=False)
            _state["started"] = address is None
        actor_class = ray.remote(num_cpus=0)(Worker)
        created = []
        for job, count in jobs.items():
            for task in range(count):
                created.append(actor_class.remote(job, task))
        names: list[str] = []
        for actor in created:
            try:
                found = ray.get(actor.devices.remote(), timeout=TIMEOUT)
            except ray.exceptions.GetTimeoutError:
                raise RemoteDeviceError(f"a worker did not start within {TIMEOUT:.0f} s") \
                    from None
            for name in found:
                runtime_devices.register(RemoteDevice(name, actor, ray))
                names.append(name)
        _state["actors"], _state["devices"] = created, names
        return names


def _release(kill: bool) -> None:
    runtime_devices.unregister(_state["devices"])
    if kill:
        ray = ray_module()
        for actor in _state["actors"]:
            ray.kill(actor)
    _state["actors"], _state["devices"] = [], []


def shutdown() -> None:
    """Stop the workers (and the local cluster `connect` started); their devices go, and
    their tensors with them (fetch what is needed first). Without a connection it does
    nothing, so a program may call it on every exit path::

        sf.distribute.connect(jobs={"worker": 2})
        try:
            ...
        finally:
            sf.distribute.shutdown()

    >>> sf.distribute.shutdown()          # nothing connected: nothing to stop
    >>> sf.distribute.workers()
    []
    """
    with _lock:
        if not _state["actors"] and not _state["started"]:
            return
        ray = ray_module()
        _release(kill=True)
        if _state["started"]:
            ray.shutdown()
            _state["started"] = False


def workers() -> list[Any]:
    """The connected workers' actors, in the order of their devices' tasks: Ray actor
    handles, for asking a worker directly what it ran
    (``ray.get(sf.distribute.workers()[0].stats.remote())``: its process id and counts of
    ops and calls). None before `connect` and after `shutdown`:

    >>> sf.distribute.workers()
    []
    """
    return list(_state["actors"])
