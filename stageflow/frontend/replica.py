"""The replica this thread computes for, while a distribution strategy runs a step.

`sf.distribute` (a higher layer) runs a step once per replica, each on a thread of its own,
and enters that replica's context here; the layers below it ask `current` where a replica's
work differs from a single process's: an optimizer sums the replicas' gradients before it
updates, a mirrored variable reads the replica's own copy. The strategy whose scope is open
(`scoped_strategy`) is kept here too: `Model.compile` in it makes `fit` distribute.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from stageflow.core import context


class Replica(Protocol):
    """What the layers below `sf.distribute` use of a replica context."""

    strategy: Any
    replica_index: int
    num_replicas_in_sync: int

    def all_reduce(self, reduce_op: Any, value: Any) -> Any: ...


class _Current(threading.local):
    def __init__(self) -> None:
        self.replica: Replica | None = None


_current = _Current()


def current() -> Replica | None:
    """The replica context of the step this thread runs for a strategy; None elsewhere."""
    return _current.replica


@contextmanager
def entered(replica: Replica | None) -> Iterator[None]:
    """Run the block as `replica`'s work (None: as no replica's, a cross-replica step)."""
    outer, _current.replica = _current.replica, replica
    try:
        yield
    finally:
        _current.replica = outer


class _Scopes(threading.local):
    def __init__(self) -> None:
        self.stack: list[Any] = []


_scopes = _Scopes()
context.inherit_list_in_threads(_scopes, "stack")


def scoped_strategy() -> Any | None:
    """The distribution strategy of the innermost open scope of this thread, if any."""
    return _scopes.stack[-1] if _scopes.stack else None


@contextmanager
def strategy_scope(strategy: Any) -> Iterator[None]:
    """Open `strategy`'s scope on this thread while the block runs."""
    _scopes.stack.append(strategy)
    try:
        yield
    finally:
        _scopes.stack.pop()
