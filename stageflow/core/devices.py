"""Device names and the device scope (`sf.device`), below every layer that places work.

A device name is TensorFlow's: ``/job:NAME/task:N/device:TYPE:N``, where the job and task
are present only for devices of other processes. Users may write short forms
(``"cpu:1"``, ``"/gpu:0"``, ``"GPU"``, ``"/device:CPU:0"``); `canonical` turns every form
into the full one, so names compare equal whatever way they were written.

The scope is a per-thread stack. What devices exist is the runtime's business (it installs
`set_resolver`); this layer only parses names and keeps the stack, and it turns the eager
fast path off while a scope other than the default device is open, so that every op goes
through `Primitive.bind` and the eager executor can place it.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from stageflow.core import context

HOST = "/device:CPU:0"
TYPES = ("CPU", "GPU")

_NAME = re.compile(
    r"^/?(?:job:(?P<job>[A-Za-z0-9_.-]+)/)?(?:/?task:(?P<task>\d+)/)?"
    r"/?(?:device:)?(?P<type>[A-Za-z]+)(?::(?P<index>\d+))?$"
)


@dataclass(frozen=True)
class DeviceName:
    """A parsed device name: the device type and index, and for remote devices the job and
    task of the process that owns it."""

    type: str
    index: int
    job: str | None = None
    task: int | None = None

    def __str__(self) -> str:
        where = f"/job:{self.job}/task:{self.task}" if self.job is not None else ""
        return f"{where}/device:{self.type}:{self.index}"


def parse(name: str) -> DeviceName:
    """``"gpu:1"``, ``"/GPU:1"``, ``"/device:GPU:1"`` all give ``DeviceName("GPU", 1)``;
    ValueError for anything that is not a device name."""
    if not isinstance(name, str):
        raise TypeError(f"a device name is a string such as '/device:CPU:0', got "
                        f"{type(name).__name__}")
    match = _NAME.match(name.strip())
    kind = match and match["type"].upper()
    if match is None or kind not in TYPES or (match["task"] is not None) != (
            match["job"] is not None):
        raise ValueError(f"{name!r} is not a device name (write e.g. '/device:CPU:0', "
                         "'cpu:1', '/gpu:0' or '/job:worker/task:1/device:CPU:0')")
    task = match["task"]
    return DeviceName(kind, int(match["index"] or 0), match["job"],
                      None if task is None else int(task))


def canonical(name: str) -> str:
    """The full name of a device written in any accepted form."""
    return str(parse(name))


# The runtime's check that a device exists: canonical name in, the name back, or an error
# naming the device and listing the real ones.
_resolve: Callable[[str], str] = canonical


def _keep_here(variable: Any) -> None:
    """Until the runtime installs its hook: the variable keeps its value in this process."""


# The runtime's hook for a variable created on a device: it may keep the value there.
_variable_placed: Callable[[Any], None] = _keep_here


def set_variable_hook(hook: Callable[[Any], None]) -> None:
    """Install what runs when a variable is created on a device other than the host."""
    global _variable_placed
    _variable_placed = hook


def variable_placed(variable: Any) -> None:
    """Tell the runtime about a variable created on a device other than the host."""
    _variable_placed(variable)


def set_resolver(resolve: Callable[[str], str]) -> None:
    """Install the runtime's device lookup (used by `device` and `resolve`)."""
    global _resolve
    _resolve = resolve


def resolve(name: str) -> str:
    """The canonical name of an existing device, or ValueError/RuntimeError naming it."""
    return _resolve(canonical(name))


# The runtime's list of its devices' names (finding them first), for `sf.config`'s listings.
_lister: Callable[[], list[str]] = lambda: [HOST]  # noqa: E731 - replaced by the runtime's


def set_lister(lister: Callable[[], list[str]]) -> None:
    """Install the runtime's list of device names (used by `listed`)."""
    global _lister
    _lister = lister


def listed() -> list[str]:
    """The canonical names of the devices of this process and of connected workers."""
    return _lister()


class _Scopes(threading.local):
    def __init__(self) -> None:
        self.stack: list[str | None] = []


_scopes = _Scopes()
context.inherit_list_in_threads(_scopes, "stack")


def current() -> str | None:
    """The device the innermost `device` scope of this thread names; None outside any
    scope (or inside ``sf.device(None)``): ops then run where their inputs are."""
    stack = _scopes.stack
    return stack[-1] if stack else None


def depth() -> int:
    """How many scopes this thread has open (a trace records scopes opened inside it)."""
    return len(_scopes.stack)


@contextmanager
def device(name: str | None) -> Iterator[str | None]:
    """Place the ops and graph-function calls of the block on device `name` (any accepted
    form); ``None`` clears the placement of enclosing scopes. Yields the canonical name.

    >>> with sf.device("/cpu:0"):
    ...     y = sf.constant([1.0]) + 1.0
    >>> y
    sf.Tensor([2.], shape=(1,), dtype=float32)
    """
    full = None if name is None else placement(name)
    _scopes.stack.append(full)
    with context.slow_path() if full not in (None, HOST) else nullcontext():
        try:
            yield full
        finally:
            _scopes.stack.pop()


_soft_placement = True
_softly_placed: set[str] = set()  # the missing devices whose scopes were said to run here


def set_soft_device_placement(enabled: bool) -> None:
    """Whether a scope naming a GPU that does not exist (``sf.device("GPU:0")`` on a
    machine without one) places its ops on ``/device:CPU:0`` instead, with a warning the
    first time each name is met (True, the default, as in TensorFlow), or raises the
    ``ValueError`` that says why there is no such device (False). A CPU, or a device of
    another process, that does not exist is always an error.

    >>> sf.config.set_soft_device_placement(False)
    >>> sf.config.get_soft_device_placement()
    False
    >>> sf.config.set_soft_device_placement(True)
    """
    global _soft_placement
    _soft_placement = bool(enabled)


def get_soft_device_placement() -> bool:
    """Whether soft device placement is on (see `set_soft_device_placement`).

    >>> sf.config.get_soft_device_placement()
    True
    """
    return _soft_placement


def placement(name: str) -> str:
    """The device a scope naming `name` places its ops on: that device, or the host where
    it is a missing GPU and soft placement is on."""
    try:
        return resolve(name)
    except ValueError as error:
        parsed = parse(canonical(name))
        if not _soft_placement or parsed.type != "GPU" or parsed.job is not None:
            raise
        full = str(parsed)
        if full not in _softly_placed:
            _softly_placed.add(full)
            warnings.warn(f"{error}; soft device placement runs the ops of "
                          f"sf.device({name!r}) on {HOST} "
                          "(sf.config.set_soft_device_placement(False) makes it an error)",
                          RuntimeWarning, stacklevel=4)
        return HOST


# -- what the runtime is configured to create, and what it counts ---------------------------

_logical_counts = {"CPU": 1}
_started: list[str] = []  # the devices the runtime made (none yet: the counts may change)


def set_logical_device_count(kind: str, count: int) -> None:
    """Split the host's `kind` (``"CPU"``) into `count` devices ``/device:CPU:0`` ...
    ``/device:CPU:{count-1}``, each with its own memory accounting and worker thread. Only
    before the devices are first used (TensorFlow's logical devices have the same rule).
    So placement, and the copies between devices it causes, can be tried on one machine.

    >>> sf.config.set_logical_device_count("CPU", 4)     # before the devices are used
    >>> with sf.device("/device:CPU:3"):
    ...     y = sf.constant([1.0, 2.0]) * 2.0
    >>> y.device
    '/device:CPU:3'
    >>> sf.config.set_logical_device_count("CPU", 2)     # too late: they exist
    Traceback (most recent call last):
    ...
    RuntimeError: the logical device count can only be set before the devices are first ...
    """
    kind = str(kind).upper()
    if kind != "CPU":
        raise ValueError(f"logical devices can be made of the CPU only, not {kind!r}")
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"the logical device count must be a positive int, got {count!r}")
    if _started and count != _logical_counts[kind]:
        raise RuntimeError("the logical device count can only be set before the devices are "
                           f"first used (they are {', '.join(_started)})")
    _logical_counts[kind] = count


def logical_device_count(kind: str) -> int:
    """How many devices the host's `kind` (``"CPU"``) is split into (1 unless
    `set_logical_device_count` said otherwise).

    >>> sf.config.set_logical_device_count("CPU", 4)
    >>> sf.config.logical_device_count("CPU")
    4
    >>> sf.list_devices()[:4]
    ['/device:CPU:0', '/device:CPU:1', '/device:CPU:2', '/device:CPU:3']
    """
    return _logical_counts[kind.upper()]


_emulated_gpus = 0


def set_emulated_gpu_count(count: int) -> None:
    """Add `count` emulated GPUs after the real ones: devices whose memory is host memory
    and whose kernels are the PTX kernels' LLVM IR launched on the CPU over an emulated
    grid (slow: for testing GPU code paths without a GPU). Only before first use.

    >>> sf.config.set_emulated_gpu_count(1)              # before the devices are used
    >>> gpu = [name for name in sf.list_devices() if "GPU" in name][-1]  # after real ones
    >>> with sf.device(gpu):
    ...     y = sf.constant([1.0, 2.0]) * 2.0 + 1.0      # one fused kernel, emulated
    >>> y.device == gpu, y.numpy()
    (True, array([3., 5.], dtype=float32))
    """
    global _emulated_gpus
    if not isinstance(count, int) or count < 0:
        raise ValueError(f"the emulated GPU count must be an int >= 0, got {count!r}")
    if _started and count != _emulated_gpus:
        raise RuntimeError("the emulated GPU count can only be set before the devices are "
                           f"first used (they are {', '.join(_started)})")
    _emulated_gpus = count


def emulated_gpu_count() -> int:
    """How many emulated GPUs `set_emulated_gpu_count` asked for (0 by default).

    >>> sf.config.set_emulated_gpu_count(1)
    >>> sf.config.emulated_gpu_count()
    1
    """
    return _emulated_gpus


def mark_started(names: list[str]) -> None:
    """Called by the runtime once it has created its devices: the counts are fixed now."""
    _started[:] = names


class Counters:
    """What placement did since the last reset: copies between devices and their bytes,
    ops placed on a GPU that ran on the host instead (no kernel of the GPU's for them), and
    per device the bytes its tensors hold now and at most (`sf.config` reads them)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.copies = 0
        self.copy_bytes = 0
        self.host_fallbacks = 0
        self.memory: dict[str, list[int]] = {}

    def copied(self, nbytes: int) -> None:
        with self.lock:
            self.copies += 1
            self.copy_bytes += nbytes

    def fell_back(self) -> None:
        with self.lock:
            self.host_fallbacks += 1

    def allocated(self, device: str, nbytes: int) -> None:
        with self.lock:
            usage = self.memory.setdefault(device, [0, 0])
            usage[0] += nbytes
            usage[1] = max(usage[1], usage[0])

    def freed(self, device: str, nbytes: int) -> None:
        with self.lock:
            self.memory[device][0] -= nbytes


COUNTERS = Counters()
