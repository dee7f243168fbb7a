"""Holding the locks of the variables a compiled call assigns.

Compiled code runs without the GIL, so two threads calling a function that updates a
variable would both read its old value and one update would be lost. A call holds each
assigned variable's (reentrant) lock for its duration, all taken in one order (by
identity), so that two functions sharing variables cannot deadlock. The sorted locks are
kept while the variables stay the same, as they do call after call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any


class AssignedLocks:
    """The locks of one function's assigned variables, held together by `held`."""

    def __init__(self) -> None:
        self._key: tuple[int, ...] | None = None
        self._locks: list[Any] = []

    @contextlib.contextmanager
    def held(self, variables: Sequence[Any]) -> Iterator[None]:
        key = tuple(map(id, variables))
        if key != self._key:
            self._locks = [lock for _, lock in sorted({id(v): v._lock for v in variables}
                                                      .items())]
            self._key = key
        locks = self._locks
        for lock in locks:
            lock.acquire()
        try:
            yield
        finally:
            for lock in reversed(locks):
                lock.release()


__all__ = ["AssignedLocks"]
