"""Builds on a worker thread for the eager runners (composites, optimizer steps, tapes'
backward passes): a staged function traced and compiled while the eager code goes on
without it, so an eager step never waits for LLVM, and a program that ends leaves the
builds it queued (`core.worker_thread`).

A build that raises answers None (its caller keeps running ops one by one) and keeps its
error for `settle`, which waits for the builds under way and raises the first error since
the last `settle` (tests and benchmarks).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from stageflow.core.worker_thread import WorkerThread

__all__ = ["BackgroundBuilds"]

T = TypeVar("T")


class BackgroundBuilds:
    """One worker thread (started on the first build), the builds under way, their errors."""

    def __init__(self, thread_name: str) -> None:
        self._worker = WorkerThread(thread_name)
        self._pending: list[Future] = []
        self._errors: list[Exception] = []
        self._lock = threading.Lock()

    def submit(self, build: Callable[[], T]) -> Future[T | None]:
        """Run `build` on the worker thread; its result, or None where it raised."""

        def run() -> T | None:
            try:
                return build()
            except Exception as error:  # noqa: BLE001 - kept for `settle`; the ops still run
                with self._lock:
                    self._errors.append(error)
                return None

        with self._lock:
            future = self._worker.submit(run)
            self._pending = [f for f in self._pending if not f.done()] + [future]
        return future

    def settle(self) -> None:
        """Wait for the builds under way; raise the first error of one that failed since
        the last `settle`."""
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            future.result()
        with self._lock:
            errors, self._errors = self._errors, []
        if errors:
            raise errors[0]
