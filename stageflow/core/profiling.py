"""The profiler's recorder: timed spans of what ran, kept until the trace is written.

The layers above report here what they run (eager ops, staged function calls and their
steps, compile stages, copies between devices); each tests `state.session` (one attribute
load) before it reports anything, so that nothing is paid while no trace is recorded.
Times are `time.perf_counter()` seconds, the clock the compile statistics already read, so
a stage's span and its figure in `ConcreteFunction.stats()` come from the same readings.

A span's arguments are kept as they come (shapes, dtypes, source locations) and made JSON
(as text, where JSON has no such value) only when the trace is written: recording an op
costs its clock readings and finding the user's line, no formatting. `Session.write` writes
the trace in the Trace Event Format, the JSON that Perfetto and ``chrome://tracing`` open:
one complete event (``"ph": "X"``) per span, ``ts`` and ``dur`` in microseconds since the
session began, on the thread that ran it (``tid``), and metadata events (``"ph": "M"``)
naming the process and its threads.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Session", "begin", "complete", "end", "span", "state"]

class _State:
    """What the hot paths read: the session recording (None while none is), and whether
    staged programs run their steps one by one so that each kernel is timed."""

    __slots__ = ("session", "steps")

    def __init__(self) -> None:
        self.session: Session | None = None
        self.steps = False


state = _State()
_lock = threading.Lock()


class Session:
    """The spans of one recording, from any thread, in the order they ended."""

    def __init__(self) -> None:
        self.origin = time.perf_counter()
        self.events: list[tuple[int, float, float, str, str, dict | None]] = []
        self.threads: dict[int, str] = {}

    def add(self, name: str, category: str, start: float, end: float,
            args: dict | None = None) -> None:
        """One span of the calling thread (list appends hold the GIL: no lock needed)."""
        tid = threading.get_native_id()
        if tid not in self.threads:
            self.threads[tid] = threading.current_thread().name
        self.events.append((tid, start, end, name, category, args))

    def document(self) -> dict[str, Any]:
        """The trace's events (their arguments as recorded: `write` makes them JSON): per
        thread, spans in the order they began (an enclosing span before the spans inside
        it), each timestamp rounded to the nanosecond once so that spans nested when
        measured stay nested."""
        pid = os.getpid()
        recorded = list(self.events)  # (then the threads: each span's is named by then)
        threads = dict(self.threads)
        spans = []
        for tid, start, end, name, category, args in recorded:
            if start < self.origin:  # begun before the recording did
                continue
            begin_ns = round((start - self.origin) * 1e9)
            end_ns = max(round((end - self.origin) * 1e9), begin_ns)
            spans.append((tid, begin_ns, -end_ns, name, category, args))
        spans.sort(key=lambda s: s[:3])
        events: list[dict[str, Any]] = [
            {"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
             "args": {"name": f"stageflow (pid {pid})"}}]
        events += [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                    "args": {"name": name}} for tid, name in sorted(threads.items())]
        for tid, begin_ns, neg_end_ns, name, category, args in spans:
            events.append({"ph": "X", "name": name, "cat": category, "pid": pid, "tid": tid,
                           "ts": begin_ns / 1e3, "dur": (-neg_end_ns - begin_ns) / 1e3,
                           "args": args or {}})
        return {"traceEvents": events, "displayTimeUnit": "ns"}

    def write(self, logdir: str) -> str:
        """Write the trace as ``LOGDIR/HOST.PID.TIME.trace.json``; its path."""
        os.makedirs(logdir, exist_ok=True)
        stamp = time.strftime("%Y%m%d_%H%M%S") + f"_{time.time_ns() % 1_000_000_000:09d}"
        path = os.path.join(logdir, f"{socket.gethostname()}.{os.getpid()}.{stamp}.trace.json")
        with open(path, "w", encoding="utf-8") as file:
            json.dump(self.document(), file, default=str)
        return path


def begin(steps: bool = False) -> Session:
    """Start recording (RuntimeError while a recording runs already: one at a time)."""
    with _lock:
        if state.session is not None:
            raise RuntimeError("a profiler trace is being recorded already: stop it first "
                               "(sf.profiler.experimental.stop())")
        session = Session()
        state.steps = steps
        state.session = session
    return session


def end() -> None:
    """Stop recording."""
    with _lock:
        state.session = None
        state.steps = False


def complete(name: str, category: str, start: float, end: float | None = None,
             args: dict | None = None) -> None:
    """Record a span that ran from `start` to `end` (now when None) on this thread, if a
    session records."""
    session = state.session
    if session is not None:
        session.add(name, category, start, time.perf_counter() if end is None else end, args)


@contextmanager
def span(name: str, category: str, args: dict | None = None) -> Iterator[dict]:
    """Record the block as a span, if a session records; yields its `args`, which the
    block may fill in until it ends (what a call ran as is known after it ran)."""
    args = {} if args is None else args
    start = time.perf_counter()
    try:
        yield args
    finally:
        complete(name, category, start, None, args)
