"""`sf.profiler.experimental`: TensorFlow's names for recording a trace (`start`, `stop`,
`Profile`, `Trace`, `ProfilerOptions`).

Recording turns the eager fast path off (every op then goes through `Primitive.bind`) and
puts `stageflow.runtime.eager.RecordingTrace` at the bottom of the trace stack; stopping
puts the plain eager trace back, so that eager code pays nothing once the recording ends.
The spans themselves are kept by `stageflow.core.profiling`.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from stageflow.core import context, profiling
from stageflow.core.exports import public_dir
from stageflow.runtime import eager

__all__ = ["Profile", "ProfilerOptions", "Trace", "start", "stop"]
__dir__ = public_dir(globals())


@dataclass(frozen=True)
class ProfilerOptions:
    """What a recording holds, as TensorFlow's options say it.

    ``host_tracer_level=2`` (the default) records eager ops, staged function calls as
    they run (a function compiled into one program is one span, its kernels and their
    fused ops listed in its arguments; a function run as steps or interpreted has a span
    per step), compile stages and copies between devices. ``3`` also runs each compiled
    program as its steps, so that every kernel gets a span of its own, at the cost of a
    Python call per step.

    >>> sf.profiler.experimental.ProfilerOptions(host_tracer_level=3)
    ProfilerOptions(host_tracer_level=3)
    """

    host_tracer_level: int = 2

    def __post_init__(self) -> None:
        if self.host_tracer_level not in (2, 3):
            raise ValueError(f"ProfilerOptions: host_tracer_level is 2 (ops, calls, "
                             f"compiles, copies) or 3 (also each kernel of a compiled "
                             f"program), not {self.host_tracer_level!r}")


class _Recording:
    """The one recording under way: its directory and what `stop` undoes."""

    def __init__(self, logdir: str, options: ProfilerOptions) -> None:
        self.logdir = logdir
        self.undo = ExitStack()
        profiling.begin(steps=options.host_tracer_level >= 3)
        self.undo.callback(profiling.end)
        self.undo.enter_context(context.slow_path())
        context.set_eager_trace(eager.RecordingTrace(eager.EAGER))
        self.undo.callback(context.set_eager_trace, eager.EAGER)


_recording: _Recording | None = None


def start(logdir: str, options: ProfilerOptions | None = None) -> None:
    """Start recording a trace of what runs, in every thread, until `stop`.

    logdir: the directory `stop` writes the trace into (created if missing). One
    recording at a time: RuntimeError while one runs.

    >>> import tempfile
    >>> sf.profiler.experimental.start(tempfile.mkdtemp())
    >>> y = sf.constant([1.0, 2.0]) * 2.0
    >>> sf.profiler.experimental.stop()
    '...trace.json'
    """
    global _recording
    _recording = _Recording(str(logdir), options or ProfilerOptions())


def stop() -> str:
    """Stop recording and write the trace, ``LOGDIR/HOST.PID.TIME.trace.json`` in the
    Trace Event Format (Perfetto's https://ui.perfetto.dev and ``chrome://tracing`` open
    it); its path. RuntimeError when nothing records.

    >>> import tempfile
    >>> sf.profiler.experimental.start(tempfile.mkdtemp())
    >>> sf.profiler.experimental.stop()
    '...trace.json'
    """
    global _recording
    recording, _recording = _recording, None
    if recording is None:
        raise RuntimeError("no profiler trace is being recorded "
                           "(sf.profiler.experimental.start(logdir) starts one)")
    session = profiling.state.session
    recording.undo.close()
    return session.write(recording.logdir)


class Profile:
    """`start` and `stop` as a context manager; the trace's path is `path` afterwards.

    >>> import tempfile
    >>> with sf.profiler.experimental.Profile(tempfile.mkdtemp()) as profile:
    ...     y = sf.reduce_sum(sf.ones((2, 3)))
    >>> profile.path
    '...trace.json'
    """

    def __init__(self, logdir: str, options: ProfilerOptions | None = None) -> None:
        self.logdir = logdir
        self.options = options
        self.path: str | None = None

    def __enter__(self) -> Profile:
        start(self.logdir, self.options)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.path = stop()


class Trace:
    """A span of your own in the trace (a training step, a data pipeline stage), around
    the block; its keyword arguments are kept as the span's arguments (``step_num=N``,
    TensorFlow's way to number training steps, among them). Costs nearly nothing while no
    trace is recorded.

    >>> import tempfile
    >>> with sf.profiler.trace(tempfile.mkdtemp()) as profile:
    ...     for step in range(2):
    ...         with sf.profiler.experimental.Trace("train", step_num=step):
    ...             loss = sf.reduce_mean(sf.ones((4,)))
    >>> profile.path
    '...trace.json'
    """

    def __init__(self, name: str, **kwargs: Any) -> None:
        self.name = name
        self.args = kwargs
        self._start = 0.0

    def __enter__(self) -> Trace:
        self._start = time.perf_counter()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if profiling.state.session is not None:
            profiling.complete(self.name, "user", self._start, None, dict(self.args))
