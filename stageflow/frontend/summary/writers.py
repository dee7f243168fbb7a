"""Summary writers and what summaries read when they are made: the default writer, the
step and whether to record, per thread, as TensorFlow keeps them.

A writer owns one event file in its log directory (`events.out.tfevents.*.v2`), written by
the `tensorboard` package's `EventFileWriter` (a queue and a thread that flushes it).
`as_default` makes it the writer summaries go to, optionally with a step, for a block; a
staged function takes the writer that was the default when it was traced.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from stageflow.core import context, lazy
from stageflow.core.source import describe_location

if TYPE_CHECKING:
    from stageflow.frontend.summary import events
else:
    events = lazy.module("stageflow.frontend.summary.events")

__all__ = ["SummaryWriter", "create_file_writer", "create_noop_writer", "flush", "get_step",
           "record_if", "set_step", "should_record_summaries"]


class _State(threading.local):
    """The default writer, the step and the recording condition of this thread."""

    def __init__(self) -> None:
        self.writer: SummaryWriter | None = None
        self.step: Any = None
        self.condition: Any = True


_state = _State()


def _capture_state() -> Callable[[], None]:
    writer, step, condition = _state.writer, _state.step, _state.condition

    def install() -> None:
        _state.writer, _state.step, _state.condition = writer, step, condition

    return install


context.inherit_in_threads(_capture_state)


class SummaryWriter:
    """Writes summaries to an event file of a log directory, for TensorBoard.

    Made by `sf.summary.create_file_writer`; summaries write to it while it is the default
    (`as_default`, `set_as_default`). Events are queued and written by a thread, at the
    latest `flush_millis` after they were queued, when the queue holds `max_queue`, at
    `flush` and at `close`.

    >>> import tempfile
    >>> writer = sf.summary.create_file_writer(tempfile.mkdtemp())
    >>> with writer.as_default(step=3):
    ...     sf.summary.scalar("loss", 0.25)
    True
    >>> writer.close()
    """

    def __init__(self, logdir: str | os.PathLike, max_queue: int, flush_millis: int,
                 filename_suffix: str) -> None:
        self.logdir = os.fspath(logdir)
        self._file = events.EventFileWriter(self.logdir, max_queue_size=max_queue,
                                            flush_secs=flush_millis / 1000,
                                            filename_suffix=filename_suffix)
        self._closed = False
        self._lock = threading.Lock()

    @contextmanager
    def as_default(self, step: Any = None) -> Iterator[SummaryWriter]:
        """Make this the default writer in the block (and `step`, unless None, the default
        step), then flush it, as TensorFlow does."""
        writer, old_step = _state.writer, _state.step
        _state.writer = self
        if step is not None:
            _state.step = step
        try:
            yield self
            self.flush()
        finally:
            _state.writer = writer
            if step is not None:
                _state.step = old_step

    def set_as_default(self, step: Any = None) -> None:
        """Make this the default writer of this thread from now on (and `step`, unless
        None, the default step)."""
        _state.writer = self
        if step is not None:
            _state.step = step

    def write(self, summary: events.Summary, step: int) -> None:
        """Queue `summary` at `step` (summaries call this, eagerly or when a graph runs)."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"sf.summary: the writer of {self.logdir!r} is closed; a "
                                   f"function traced while it was the default still writes "
                                   f"to it: trace it again under an open writer")
            self._file.add_event(events.event(step, summary))

    def flush(self) -> None:
        """Write what is queued to the event file."""
        with self._lock:
            if not self._closed:
                self._file.flush()

    def close(self) -> None:
        """Flush and close the event file; summaries written to this writer then raise."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._file.close()


class _NoopWriter(SummaryWriter):
    """A writer that writes nothing: `as_default` leaves the default writer as it is."""

    def __init__(self) -> None:
        self.logdir = ""

    @contextmanager
    def as_default(self, step: Any = None) -> Iterator[SummaryWriter]:
        yield self

    def set_as_default(self, step: Any = None) -> None:
        return None

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None


def create_file_writer(logdir: str | os.PathLike, max_queue: int | None = None,
                       flush_millis: int | None = None, filename_suffix: str | None = None,
                       name: str | None = None) -> SummaryWriter:
    """A writer of a new event file in `logdir` (made if missing), TensorFlow's defaults:
    at most 10 events queued, flushed every 2 minutes, file names ending in ``.v2``.

    Needs the `tensorboard` package (``pip install 'stageflow[summary]'``).

    >>> import os, tempfile
    >>> logdir = tempfile.mkdtemp()
    >>> writer = sf.summary.create_file_writer(logdir)
    >>> [f.startswith("events.out.tfevents.") for f in os.listdir(logdir)]
    [True]
    >>> writer.close()
    """
    del name
    return SummaryWriter(logdir, 10 if max_queue is None else max_queue,
                         120_000 if flush_millis is None else flush_millis,
                         ".v2" if filename_suffix is None else filename_suffix)


def create_noop_writer() -> SummaryWriter:
    """A writer that writes nothing, for code that takes a writer where none is wanted.

    >>> with sf.summary.create_noop_writer().as_default():
    ...     sf.summary.scalar("loss", 0.25, step=0)
    False
    """
    return _NoopWriter()


def flush(writer: SummaryWriter | None = None, name: str | None = None) -> None:
    """Flush `writer`, by default the default writer (nothing without one).

    >>> sf.summary.flush()
    """
    del name
    writer = writer if writer is not None else _state.writer
    if writer is not None:
        writer.flush()


def default_writer() -> SummaryWriter | None:
    """The default writer of this thread, if any."""
    return _state.writer


def set_step(step: Any) -> None:
    """Set the default step of summaries (an int, a tensor or a variable, e.g. an
    optimizer's ``iterations``) in this thread; None unsets it.

    >>> sf.summary.experimental.set_step(5)
    >>> sf.summary.experimental.get_step()
    5
    >>> sf.summary.experimental.set_step(None)
    """
    _state.step = step


def get_step() -> Any:
    """The default step of summaries in this thread, or None.

    >>> sf.summary.experimental.get_step() is None
    True
    """
    return _state.step


def resolve_step(step: Any, what: str) -> Any:
    """`step`, or the default step; a ValueError, as TensorFlow's, where neither is set."""
    step = step if step is not None else _state.step
    if step is None:
        raise ValueError(f"{what}: no step: pass step=, or set a default with "
                         f"sf.summary.experimental.set_step or writer.as_default(step=)"
                         f"{describe_location()}")
    return step


@contextmanager
def record_if(condition: bool | Any | Callable[[], Any]) -> Iterator[None]:
    """Record summaries in the block only where `condition` holds: a bool, a boolean
    tensor (in a staged function, its value at each call), or a callable returning one,
    called as each summary is made.

    >>> with sf.summary.record_if(False):
    ...     sf.summary.should_record_summaries()
    False
    """
    old = _state.condition
    _state.condition = condition
    try:
        yield
    finally:
        _state.condition = old


def recording_condition() -> Any:
    """The recording condition now: True, False, or a boolean tensor."""
    condition = _state.condition
    return condition() if callable(condition) else condition


def should_record_summaries() -> Any:
    """Whether summaries made now are recorded: a default writer is set and the
    `record_if` condition holds (a boolean tensor where that is one).

    >>> sf.summary.should_record_summaries()
    False
    """
    if _state.writer is None:
        return False
    return recording_condition()
