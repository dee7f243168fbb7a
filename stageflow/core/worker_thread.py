"""One background thread running submitted work in order, that gives up the work still
queued once the program's main thread has finished.

The eager runners compile in the background (`runtime.eager_kernels`, `staging.background`):
a short script queues compiles of every new signature it meets, and a
`ThreadPoolExecutor` runs all of them before the interpreter may exit, so a script of a
second's work sat for seconds more compiling code it would never call. Here the thread
checks between items whether the main thread is still running: once it has finished, the
item under way completes (an LLVM compile is never cut short, the cache never left half
written) and the rest are answered None without running, which every caller takes as "not
built" (its ops then run one by one, as while a compile is under way). The thread is not a
daemon, so the interpreter waits for that item; while idle it wakes every `POLL_SECONDS`
to notice the end.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

__all__ = ["WorkerThread"]

POLL_SECONDS = 0.1


class WorkerThread:
    """A named worker thread, started by the first `submit`."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[tuple[Future, Callable[[], Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, work: Callable[[], Any]) -> Future:
        """Queue `work`; its future has its result or its exception, or None where the main
        thread finished before it started."""
        future: Future = Future()
        self._queue.put((future, work))
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self._name)
                self._thread.start()
        return future

    def _run(self) -> None:
        main = threading.main_thread()
        while True:
            try:
                future, work = self._queue.get(timeout=POLL_SECONDS)
            except queue.Empty:
                if not main.is_alive():
                    return
                continue
            if not main.is_alive():
                future.set_result(None)
                self._abandon_rest()
                return
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(work())
            except BaseException as error:  # noqa: BLE001 - the future carries it
                future.set_exception(error)

    def _abandon_rest(self) -> None:
        while True:
            try:
                future, _ = self._queue.get_nowait()
            except queue.Empty:
                return
            future.set_result(None)
