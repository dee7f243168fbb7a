"""Running a step once per replica, in lockstep, with collectives between the replicas.

`run_replicas` runs ``fn`` once per replica, each on a thread of its own that takes over the
caller's traces and scopes (`context.thread_state`) and places its ops on the replica's
device. Only one replica runs at a time: each runs until it reaches a collective (an
all-reduce, a merge call) or returns, then the next; once all have reached the collective,
the calling thread computes it from the values every replica brought and hands each its
part. Eagerly that is the ops of one replica after another; inside `sf.function` it stages
every replica's ops into the one graph the caller traces, each collective one op over the
replicas' values (`all_reduce`), so the passes fuse it with what follows, like any op. This
is TensorFlow's design for `MirroredStrategy` (one thread per replica, `merge_call`), which
a replica's Python code needs, as it cannot be suspended at an arbitrary depth otherwise.

A single replica runs on the calling thread, its collectives computed at once.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from stageflow.core import context, devices
from stageflow.frontend import replica as replica_state


class ReplicaError(RuntimeError):
    """The replicas of one step did not make the same collective calls.

    >>> strategy = sf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
    >>> def step():
    ...     ctx = sf.distribute.get_replica_context()
    ...     if ctx.replica_index == 0:
    ...         ctx.all_reduce("SUM", sf.constant(1.0))
    >>> strategy.run(step)
    Traceback (most recent call last):
    ...
    stageflow.distribute.replicas.ReplicaError: the replicas of a step must make the same ...
    """


class _Aborted(BaseException):
    """Unwinds a replica's thread when another replica failed (never seen by users)."""


# A collective's computation: given every replica's payload (in replica order), each
# replica's result.
Merge = Callable[[list[Any]], list[Any]]


class _ReplicaThread(threading.Thread):
    def __init__(self, index: int, work: Callable[[], Any]) -> None:
        super().__init__(name=f"stageflow replica {index}", daemon=True)
        self.index = index
        self.work = work
        self.resume = threading.Event()
        self.paused = threading.Event()
        self.aborted = False
        self.request: tuple[str, Merge, Any] | None = None
        self.reply: Any = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False
        self.finished: queue.SimpleQueue | None = None  # told at the end, when free-running

    def run(self) -> None:
        try:
            self._wait_for_turn()
            self.result = self.work()
        except _Aborted:
            pass
        except BaseException as error:  # noqa: BLE001 - raised by the calling thread
            self.error = error
        self.done = True
        self.request = None
        self.paused.set()
        if self.finished is not None:
            self.finished.put(self)

    def _wait_for_turn(self) -> None:
        self.resume.wait()
        self.resume.clear()
        if self.aborted:
            raise _Aborted

    def sync(self, name: str, merge: Merge, payload: Any) -> Any:
        """Pause at collective `name` until every replica reached it; its result here."""
        self.request = (name, merge, payload)
        self.paused.set()
        self._wait_for_turn()
        return self.reply

    def step(self) -> None:
        """Let this replica run until its next collective or its end."""
        self.resume.set()
        self.paused.wait()
        self.paused.clear()


_running = threading.local()  # the replica thread this thread is, if any


def sync(name: str, merge: Merge, payload: Any) -> Any:
    """Bring `payload` to collective `name` of the step this replica runs in; its share of
    ``merge(every replica's payload)``. Outside a replica thread (a single replica, run on
    the calling thread) the collective has one participant and is computed at once."""
    thread = getattr(_running, "thread", None)
    if thread is None:
        return merge([payload])[0]
    return thread.sync(name, merge, payload)


LOCKSTEP, AT_ONCE, IN_TURN = "lockstep", "at once", "in turn"


def run_replicas(fn: Callable[..., Any], per_replica_args: Sequence[tuple[tuple, dict]],
                 replica_devices: Sequence[str], contexts: Sequence[replica_state.Replica],
                 schedule: str = LOCKSTEP) -> list[Any]:
    """``fn(*args, **kwargs)`` once per replica; the results in replica order.

    `LOCKSTEP`: threads meeting here at each collective; a replica's exception is raised
    once every replica stopped. The others are for replicas whose collectives meet in the
    worker processes their work runs in: `AT_ONCE` runs them on threads at once (eager
    steps, which wait for their workers), the first exception raised as soon as it happens,
    as the other replicas may wait for the failed one's workers; `IN_TURN` calls them one
    after another on this thread (staged steps, whose calls to workers do not wait)."""
    if len(contexts) == 1 or schedule == IN_TURN:
        results = []
        for args_kwargs, device, replica in zip(per_replica_args, replica_devices, contexts,
                                                strict=True):
            with devices.device(device), replica_state.entered(replica):
                results.append(fn(*args_kwargs[0], **args_kwargs[1]))
        return results
    install = context.thread_state()

    def work_of(index: int) -> Callable[[], Any]:
        args, kwargs = per_replica_args[index]

        def work() -> Any:
            install()
            _running.thread = threads[index]
            with devices.device(replica_devices[index]), \
                    replica_state.entered(contexts[index]):
                return fn(*args, **kwargs)

        return work

    threads = [_ReplicaThread(index, work_of(index)) for index in range(len(contexts))]
    for thread in threads:
        thread.start()
    if schedule == AT_ONCE:
        return _free_running(threads)
    try:
        _lockstep(threads)
    finally:
        for thread in threads:
            if not thread.done:
                thread.aborted = True
                thread.resume.set()
        for thread in threads:
            thread.join()
    return [thread.result for thread in threads]


def _free_running(threads: list[_ReplicaThread]) -> list[Any]:
    """Let every replica run to its end at once; their results, or the first error."""
    finished: queue.SimpleQueue[_ReplicaThread] = queue.SimpleQueue()
    for thread in threads:
        thread.finished = finished
        thread.resume.set()
    for _ in threads:
        thread = finished.get()
        if thread.error is not None:
            raise thread.error
    return [thread.result for thread in threads]


def _lockstep(threads: list[_ReplicaThread]) -> None:
    """Step every replica to its next collective, compute it, until all returned."""
    while True:
        for thread in threads:
            if not thread.done:
                thread.step()
        failed = next((t for t in threads if t.error is not None), None)
        if failed is not None:
            raise failed.error
        if all(thread.done for thread in threads):
            return
        names = [thread.request[0] if thread.request else "the end of the step"
                 for thread in threads]
        if len(set(names)) > 1:
            called = ", ".join(f"replica {t.index} reached {name}"
                               for t, name in zip(threads, names, strict=True))
            raise ReplicaError(f"the replicas of a step must make the same collective calls "
                               f"in the same order: {called}")
        merge = threads[0].request[1]
        replies = merge([thread.request[2] for thread in threads])
        for thread, reply in zip(threads, replies, strict=True):
            thread.reply = reply
