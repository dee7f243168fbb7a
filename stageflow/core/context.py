"""The current trace: eager execution by default, a staging trace while `sf.function` traces.

Each thread has a stack of traces; `Primitive.bind` hands every op to the top one. The
bottom (eager) trace and the tape recorder live in higher layers and install themselves
here, so that this layer imports nothing of theirs. The
flag `state.eager_fast` is true while no thread has anything but the plain eager
trace active (no staging trace, no tape): the op functions then take a short path straight
to the NumPy kernel, which is what keeps eager dispatch within a few hundred nanoseconds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol


class Trace(Protocol):
    """What a context provides: apply a primitive to its arguments (for `Primitive.bind`),
    and make a tensor of a NumPy array (for constants, in op functions and gradient rules;
    on `device`, or where the device scope says, so that it needs no copy there)."""

    def process(self, primitive: Any, args: tuple, params: dict) -> Any: ...

    def constant(self, array: Any, device: str | None = None) -> Any: ...


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.stack: list[Trace] = []


class _GlobalState:
    """Process-wide flags read on the eager hot path (one attribute load each)."""

    __slots__ = ("eager_fast", "non_eager_active", "op_observer", "tape_count")

    def __init__(self) -> None:
        self.eager_fast = True
        self.non_eager_active = 0
        self.tape_count = 0
        # Called by `Primitive.bind` with each applied op and its result, when set
        # (`set_op_observer`: `sf.debugging.enable_check_numerics`).
        self.op_observer: Callable[[Any, Any], None] | None = None


_thread = _ThreadState()
_lock = threading.Lock()
_eager_trace: Trace | None = None
_tape_recorder: Callable[[Any, tuple, dict, Any], None] | None = None

state = _GlobalState()


def set_eager_trace(trace: Trace) -> None:
    """Install the bottom-of-stack trace (the runtime's eager executor)."""
    global _eager_trace
    _eager_trace = trace


def set_tape_recorder(record: Callable[[Any, tuple, dict, Any], None]) -> None:
    """Install what `Primitive.bind` calls while a tape is active (the frontend's tapes)."""
    global _tape_recorder
    _tape_recorder = record


def set_op_observer(observer: Callable[[Any, Any], None] | None) -> None:
    """Have `Primitive.bind` call ``observer(primitive, result)`` after every op (None: no
    more), eager ops included: while one is set they take `bind`'s path, not the short one."""
    with _lock:
        was = state.op_observer is not None
        state.op_observer = observer
        state.non_eager_active += (observer is not None) - was
        state.eager_fast = state.non_eager_active == 0


def record_on_tapes(primitive: Any, args: tuple, params: dict, result: Any) -> None:
    """Offer an applied op to the active gradient tapes (called by `bind`)."""
    _tape_recorder(primitive, args, params, result)


# What each module that keeps per-thread scopes registers (`inherit_in_threads`): called in a
# thread, it returns what installs the same scopes in another.
_inherited: list[Callable[[], Callable[[], None]]] = []


def inherit_in_threads(capture: Callable[[], Callable[[], None]]) -> None:
    """Register a per-thread scope (device scopes, tapes, training mode, ...) that a thread
    working on another's behalf takes over: ``capture()`` runs in the parent thread and
    returns what installs a copy of its state in the worker thread."""
    _inherited.append(capture)


def inherit_list_in_threads(state: threading.local, attribute: str) -> None:
    """Register the per-thread list ``state.<attribute>`` (a stack of scopes) as a state
    that a thread working on another's behalf takes a copy of (`inherit_in_threads`)."""

    def capture() -> Callable[[], None]:
        copied = list(getattr(state, attribute, ()))
        return lambda: setattr(state, attribute, list(copied))

    inherit_in_threads(capture)


def thread_state() -> Callable[[], None]:
    """What installs this thread's traces and registered scopes in another thread, so that
    work handed to it (a distribution strategy's replica) stages into the same function,
    under the same scopes, as it would here. The parent keeps its scopes open meanwhile."""
    stack = list(_thread.stack)
    installers = [capture() for capture in _inherited]

    def install() -> None:
        _thread.stack[:] = stack
        for installer in installers:
            installer()

    return install


def current_trace() -> Trace:
    stack = _thread.stack
    return stack[-1] if stack else _eager_trace


def executing_eagerly() -> bool:
    """Whether ops run at once on this thread (TensorFlow's ``tf.executing_eagerly``):
    outside any function being traced, or inside `init_scope`.

    >>> sf.executing_eagerly()
    True
    >>> sf.function(lambda: sf.constant(sf.executing_eagerly()))()
    sf.Tensor(False, shape=(), dtype=bool)
    """
    return current_trace() is _eager_trace


def _count_active(delta: int) -> None:
    with _lock:
        state.non_eager_active += delta
        state.eager_fast = state.non_eager_active == 0


@contextmanager
def push_trace(trace: Trace) -> Iterator[Trace]:
    """Make `trace` current for this thread while the block runs."""
    _thread.stack.append(trace)
    _count_active(1)
    try:
        yield trace
    finally:
        _thread.stack.pop()
        _count_active(-1)


@contextmanager
def init_scope() -> Iterator[None]:
    """Run the block eagerly, even inside a trace (the paper's `tf.init_scope`).

    >>> @sf.function
    ... def step(x):
    ...     with sf.init_scope():
    ...         sf.print("runs eagerly, once per trace")
    ...     return x + 1.0
    >>> step(sf.constant(1.0))
    runs eagerly, once per trace
    sf.Tensor(2., shape=(), dtype=float32)
    >>> step(sf.constant(2.0))
    sf.Tensor(3., shape=(), dtype=float32)
    """
    with push_trace(_eager_trace):
        yield


@contextmanager
def slow_path(tapes: int = 0) -> Iterator[None]:
    """Send every op through `Primitive.bind` while the block runs (tapes need to see
    them); `tapes=1` also counts an active gradient tape."""
    _count_active(1)
    state.tape_count += tapes
    try:
        yield
    finally:
        state.tape_count -= tapes
        _count_active(-1)
