"""Running campaign cases in child processes, so that a crash or a hang is counted, not fatal.

A campaign hands `run_isolated` a worker (a module-level function, so that a ``spawn``ed
child can import it) and a list of items. One child at a time runs a batch of items and
sends each result back as soon as it has it; when the child dies (a signal, an abort, an
exit) the item it was running is the culprit, and it is run once more alone in a fresh
child to say whether it crashes by itself or only after the items before it. An item that
gives no result within `timeout` seconds is a hang, and its child is killed. The rest of
the batch goes on in a new child. Each child's address space is capped
(``RLIMIT_AS``), so an input that asks for gigabytes fails with a ``MemoryError`` instead
of taking the machine's memory.
"""

from __future__ import annotations

import multiprocessing
import resource
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

MEMORY_LIMIT = 2 << 30


@dataclass(frozen=True)
class Died:
    """An item whose child died: how (``exit code N`` or ``signal N``) and whether it dies
    alone too (else only after the items run before it in the same child)."""

    how: str
    alone: bool


@dataclass(frozen=True)
class Hung:
    """An item that gave no result within the timeout."""

    seconds: float


def _child(worker: Callable[[Any], Any], items: list[Any], connection: Connection,
           memory_limit: int, setup: Callable[[], None] | None) -> None:
    """A child's whole life: cap memory, set up, then one result per item, in order."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    if setup is not None:
        setup()
    for item in items:
        connection.send(worker(item))
    connection.close()


def _describe_exit(code: int | None) -> str:
    return f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"


def _run_batch(worker: Callable[[Any], Any], items: list[Any], timeout: float,
               memory_limit: int, setup: Callable[[], None] | None
               ) -> tuple[list[Any], Died | Hung | None]:
    """Results of a prefix of `items` from one child, and why it stopped early, if it did."""
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(worker, items, send, memory_limit, setup),
                              daemon=True)
    process.start()
    send.close()
    results: list[Any] = []
    stopped: Died | Hung | None = None
    while len(results) < len(items):
        if not receive.poll(timeout):
            process.kill()
            stopped = Hung(timeout)
            break
        try:
            results.append(receive.recv())
        except EOFError:
            process.join()
            stopped = Died(_describe_exit(process.exitcode), alone=True)
            break
    process.join()
    receive.close()
    return results, stopped


def run_isolated(worker: Callable[[Any], Any], items: Iterable[Any], *, batch: int = 200,
                 timeout: float = 120.0, memory_limit: int = MEMORY_LIMIT,
                 setup: Callable[[], None] | None = None,
                 progress: Callable[[int], None] | None = None) -> list[Any]:
    """`worker(item)` for every item, in order, each run in a child process: its result, or
    `Died` or `Hung` where the child did not give one. `setup()` runs first in every child;
    `progress(n)` is called with the number of items done after each batch."""
    pending = list(items)
    done: list[Any] = []
    while pending:
        chunk = pending[:batch]
        results, stopped = _run_batch(worker, chunk, timeout, memory_limit, setup)
        done.extend(results)
        if isinstance(stopped, Died) and results:
            # Others ran before the culprit in its child: does it die by itself?
            alone_results, alone = _run_batch(worker, chunk[len(results):len(results) + 1],
                                              timeout, memory_limit, setup)
            stopped = Died(stopped.how, alone=not alone_results and isinstance(alone, Died))
        if stopped is not None:
            done.append(stopped)
        pending = pending[len(results) + (stopped is not None):]
        if progress is not None:
            progress(len(done))
    return done
