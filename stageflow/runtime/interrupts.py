"""Ctrl-C in compiled code, from Python: the process's interrupt flag, the SIGINT handler
that sets it, the call of a program whose loops check it, and the step plan's rollback.

A compiled loop runs inside one foreign call, during which the interpreter cannot run its
Python-level SIGINT handler: it only records the signal. A program's loops therefore check
a flag of their own (`codegen.program.interrupts`), set by a C-level handler that then calls
the interpreter's, so that Python still sees the signal. Here that flag and the main
thread's id are bound to the symbols the programs name (at import, before any program is
linked: an unresolved symbol aborts the process), and the handler is linked on the first
call of a program with a loop or a py_func from the main thread.

`interruptible` calls such a program (or one with a py_func) on the main thread as follows:
arm (install the handler where a function handles SIGINT, the interpreter's normally; clear
the flag; raise what a signal received before then raises), call. A call its loop stopped
(`INTERRUPTED`) wrote nothing, and arming again runs Python's handler, which raises
``KeyboardInterrupt`` once; where a handler of the user's returns instead, the call runs
again from its start. So does a call that failed while the flag got set: its py_func ran
Python's handler, whose ``KeyboardInterrupt`` is the py_func's error, or was dropped by
ctypes (the call must not then run again as Python steps, which would run the loop without
end). Arming reads the kernel's current action each time, so a handler Python installs later
(``signal.signal``) is chained to as well, and SIG_IGN or SIG_DFL set from Python are left
alone. On other threads a program runs as before: Python raises ``KeyboardInterrupt`` in the
main thread only.

The step plan (a function that is no single program, or a program's fallback) runs as
Python steps, which Ctrl-C interrupts between any two of them; `run_or_roll_back` gives the
variables it assigns their values from before the call back, so that an interrupted call
leaves the same state whether it ran as one program or as steps.

The handler and the flag exist on x86-64 and AArch64 Linux (`SUPPORTED`: glibc's
``struct sigaction``); elsewhere the flag is never set and loops run to their end.
"""

from __future__ import annotations

import atexit
import ctypes
import platform
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import llvmlite.binding as llvm

from stageflow.codegen.program.abi import INTERRUPTED
from stageflow.codegen.program.interrupts import (
    ARM_SYMBOL,
    DISARM_SYMBOL,
    FLAG_SYMBOL,
    MAIN_SYMBOL,
    handler_module,
)
from stageflow.codegen.targets.cpu import ModuleJob, process_jit
from stageflow.runtime.callbacks import take_error

SUPPORTED = sys.platform.startswith("linux") and platform.machine() in ("x86_64", "aarch64")
# The handler is three tiny functions: the program's own levels (no optimisation to pay for).
_OPT_LEVEL, _CODEGEN_LEVEL = 0, 0

_MAIN_THREAD = threading.main_thread().ident
_FLAG = ctypes.c_int32(0)
_MAIN = ctypes.c_uint64(_MAIN_THREAD or 0)  # Python's thread ident: the pthread_t on Linux
llvm.add_symbol(FLAG_SYMBOL, ctypes.addressof(_FLAG))
llvm.add_symbol(MAIN_SYMBOL, ctypes.addressof(_MAIN))


class _Handler:
    """The linked handler module's ``arm``, made on first use (from the main thread only,
    so never twice at once)."""

    def __init__(self) -> None:
        self._arm: Callable[[], int] | None = None

    def arm(self) -> None:
        """Install the handler where needed, clear the flag, and raise what the signals
        received so far raise (`codegen.program.interrupts.handler_module`)."""
        if self._arm is None:
            self._arm = self._link()
        self._arm()

    @staticmethod
    def _link() -> Callable[[], int]:
        jit = process_jit()
        job = ModuleJob.of(handler_module(jit.triple), _OPT_LEVEL, _CODEGEN_LEVEL)
        arm, disarm = job.name(ARM_SYMBOL), job.name(DISARM_SYMBOL)
        linked = jit.link([job], [arm, disarm])
        # The interpreter's API convention: a -1 with an exception set raises it here.
        entry = linked.function(arm, ctypes.PYFUNCTYPE(ctypes.c_int32))
        # The handler's code is freed with its engine when the interpreter tears its modules
        # down: put the replaced handler back first (exit handlers run before that).
        atexit.register(linked.function(disarm, ctypes.CFUNCTYPE(None)))
        return entry  # type: ignore[no-any-return]


_HANDLER = _Handler()


def interruptible(entry: Callable[..., int]) -> Callable[..., int]:
    """`entry` (a program's ctypes entry, its loops checking the flag, or its py_funcs
    running Python code where a Ctrl-C may land) called so that Ctrl-C stops it on the main
    thread with ``KeyboardInterrupt`` raised once, nothing written by the stopped call."""
    if not SUPPORTED:
        return entry

    def call(*arguments: Any) -> int:
        if threading.get_ident() != _MAIN_THREAD:
            return entry(*arguments)
        while True:
            _HANDLER.arm()  # raises a pending KeyboardInterrupt, before anything runs
            status = entry(*arguments)
            if status == 0 or (status != INTERRUPTED and not _FLAG.value):
                return status
            _interrupt()  # returns where a handler of the user's did: then run again

    return call


def _interrupt() -> None:
    """After a call a SIGINT stopped (`INTERRUPTED`), or that failed while one arrived:
    raise the KeyboardInterrupt once. Python's handler ran already where the call ran a
    py_func: its KeyboardInterrupt is the py_func's error (`callbacks`), or was dropped by
    ctypes where it was raised before the callback's ``try`` (the call then failed, or its
    loop saw the flag); else it runs now. Where that handler is not the default one and
    returns, so does this."""
    error = take_error()  # also so that no later call finds it
    if isinstance(error, KeyboardInterrupt):
        raise error
    _HANDLER.arm()
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        raise KeyboardInterrupt


def run_or_roll_back(run: Callable[[list[Any]], list[Any]], values: list[Any],
                     variables: Sequence[Any]) -> list[Any]:
    """``run(values)``; where Ctrl-C interrupts it (``KeyboardInterrupt``), `variables` (those
    the run assigns) get back the values they had before, and the interrupt goes on. Values
    are replaced, never changed in place, so keeping the old ones costs a reference each."""
    before = [variable._value for variable in variables]
    try:
        return run(values)
    except KeyboardInterrupt:
        for variable, value in zip(variables, before, strict=True):
            variable._value = value
        raise
