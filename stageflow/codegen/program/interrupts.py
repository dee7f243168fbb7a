"""Ctrl-C inside a compiled loop: the check a JIT program's loops make, and the signal
handler that feeds it.

While a program runs, the interpreter's C-level SIGINT handler only records the signal; the
Python-level handler that raises ``KeyboardInterrupt`` runs once the foreign call returns,
which an endless loop never does. So the process gets a C-level handler of its own
(`handler_module`, installed by `runtime.interrupts`): it sets the flag `FLAG_SYMBOL` and
calls the handler it replaced, so that Python still records the signal as before.

Every loop of a JIT program loads the flag once per iteration (`flag_raised`: an atomic load
and a branch predicted not taken), and so does every py_func call before it enters Python
(where the interpreter would raise the ``KeyboardInterrupt`` as the callback starts, before
its ``try``, and ctypes would print and drop it). When it is set and the program runs on the
main thread (the only one Python raises ``KeyboardInterrupt`` in; `on_main_thread`), the
program stops with `INTERRUPTED` through the cleanup every failure takes: nothing but its
outputs was written, and variables take new values only after a successful call. A program
running on another thread carries on, as Python code on that thread would.

The flag and the main thread's id are memory of the Python process that `runtime.interrupts`
binds to their symbols before any program is linked. An ahead-of-time library has no check
(`ProgramBuilder(interruptible=False)`): it must not reference the Python process, and its
loops run to their end as any C loop does unless the caller's own handler ends the process.
"""

from __future__ import annotations

import signal

from llvmlite import ir

from stageflow.codegen.llvm.emitter import I32, I64
from stageflow.codegen.llvm.functions import declare, memset_zero
from stageflow.codegen.llvm.loops import i64
from stageflow.codegen.targets import cache

FLAG_SYMBOL = "sf.interrupt.flag"  # i32, non-zero once a SIGINT arrived since the last arm
MAIN_SYMBOL = "sf.interrupt.main"  # i64, the main thread's pthread_t
HANDLER_SYMBOL = f"sf.interrupt.handler.{cache.PLACEHOLDER}"
ARM_SYMBOL = f"sf.interrupt.arm.{cache.PLACEHOLDER}"
DISARM_SYMBOL = f"sf.interrupt.disarm.{cache.PLACEHOLDER}"

# glibc's ``struct sigaction`` on x86-64 and AArch64 Linux (`runtime.interrupts` installs
# nothing elsewhere): the handler first, then a 128-byte mask, then the flags.
SIGACTION_BYTES = 152
SIGACTION_FLAGS_OFFSET = 136
SA_SIGINFO = 4  # the handler takes (signal, siginfo_t *, ucontext *)
_PTR = ir.PointerType()


def _external(module: ir.Module, name: str, ty: ir.Type) -> ir.GlobalVariable:
    """The global `name` of `module`, declared (defined elsewhere) on first use."""
    existing = module.globals.get(name)
    if isinstance(existing, ir.GlobalVariable):
        return existing
    return ir.GlobalVariable(module, ty, name)


def flag_raised(b: ir.IRBuilder) -> ir.Value:
    """An i1: whether a SIGINT arrived since the last arm. Atomic, so that LLVM loads it at
    every iteration instead of hoisting the load out of a loop that writes no memory."""
    flag = b.load_atomic(_external(b.module, FLAG_SYMBOL, I32), "monotonic", 4,
                         typ=I32, name="interrupt.flag")
    return b.icmp_unsigned("!=", flag, ir.Constant(I32, 0))


def on_main_thread(b: ir.IRBuilder) -> ir.Value:
    """An i1: whether the calling thread is Python's main thread (``pthread_self``)."""
    thread = b.call(declare(b.module, "pthread_self", I64, []), [])
    main = b.load(_external(b.module, MAIN_SYMBOL, I64), typ=I64)
    return b.icmp_unsigned("==", thread, main)


def handler_module(triple: str) -> ir.Module:
    """The module of the process's SIGINT handler and the two functions that manage it:

    ``void HANDLER(int, siginfo_t *, void *)`` sets the flag, then calls the handler it
    replaced (given the same arguments: a one-argument handler ignores the others).

    ``int ARM(void)`` (called holding the GIL) installs HANDLER where the current handler is
    another function (Python's, normally: not SIG_DFL, SIG_IGN or HANDLER itself, so that a
    Python program that chose those keeps them), clears the flag, and returns
    ``PyErr_CheckSignals()``: a signal that arrived before the clear is raised now, in
    Python, rather than lost.

    ``void DISARM(void)`` puts back the replaced handler where HANDLER is installed."""
    module = ir.Module(name="sf.interrupt")
    module.triple = triple
    replaced = _Replaced(module)
    handler = ir.Function(module, _HANDLER_TYPE, HANDLER_SYMBOL)
    b = ir.IRBuilder(handler.append_basic_block("entry"))
    b.atomic_rmw("xchg", _external(module, FLAG_SYMBOL, I32), ir.Constant(I32, 1), "seq_cst")
    previous = b.load_atomic(replaced.handler, "monotonic", 8, typ=I64)
    chain = handler.append_basic_block("chain")
    done = handler.append_basic_block("done")
    b.cbranch(_is_function(b, previous), chain, done)
    b.position_at_end(chain)
    b.call(b.inttoptr(previous, ir.PointerType(_HANDLER_TYPE)), list(handler.args))
    b.branch(done)
    b.position_at_end(done)
    b.ret_void()
    _arm(module, handler, replaced)
    _disarm(module, handler, replaced)
    return module


_HANDLER_TYPE = ir.FunctionType(ir.VoidType(), [I32, _PTR, _PTR])


class _Replaced:
    """The handler word and flags word of the action HANDLER replaced (module-private)."""

    def __init__(self, module: ir.Module) -> None:
        self.handler = ir.GlobalVariable(module, I64, "sf.interrupt.previous")
        self.flags = ir.GlobalVariable(module, I64, "sf.interrupt.previous_flags")
        for variable in (self.handler, self.flags):
            variable.initializer = i64(0)
            variable.linkage = "internal"


def _arm(module: ir.Module, handler: ir.Function, replaced: _Replaced) -> None:
    arm = ir.Function(module, ir.FunctionType(I32, []), ARM_SYMBOL)
    b = ir.IRBuilder(arm.append_basic_block("entry"))
    action = _Action(b)
    current = action.handler()
    ours = b.ptrtoint(handler, I64)
    install = arm.append_basic_block("install")
    armed = arm.append_basic_block("armed")
    b.cbranch(b.and_(_is_function(b, current), b.icmp_unsigned("!=", current, ours)),
              install, armed)
    b.position_at_end(install)
    flags = action.flags()
    b.store(current, replaced.handler)  # before sigaction (an external call) installs ours
    b.store(flags, replaced.flags)
    action.set(ours, b.or_(flags, i64(SA_SIGINFO)))
    b.branch(armed)
    b.position_at_end(armed)
    # seq_cst: the clear is visible before the interpreter's own record is read below
    b.atomic_rmw("xchg", _external(module, FLAG_SYMBOL, I32), ir.Constant(I32, 0), "seq_cst")
    b.ret(b.call(declare(module, "PyErr_CheckSignals", I32, []), []))


def _disarm(module: ir.Module, handler: ir.Function, replaced: _Replaced) -> None:
    disarm = ir.Function(module, ir.FunctionType(ir.VoidType(), []), DISARM_SYMBOL)
    b = ir.IRBuilder(disarm.append_basic_block("entry"))
    action = _Action(b)
    restore = disarm.append_basic_block("restore")
    kept = disarm.append_basic_block("kept")
    b.cbranch(b.icmp_unsigned("==", action.handler(), b.ptrtoint(handler, I64)), restore, kept)
    b.position_at_end(restore)
    action.set(b.load(replaced.handler, typ=I64), b.load(replaced.flags, typ=I64))
    b.branch(kept)
    b.position_at_end(kept)
    b.ret_void()


class _Action:
    """SIGINT's current ``struct sigaction``, read into the stack as 64-bit words (zeroed
    first: where the call fails, the handler reads as SIG_DFL, and nothing is installed).
    The flags are the low half of their word (both targets are little-endian; the high half
    is padding). Made at the start of a function's entry block."""

    def __init__(self, b: ir.IRBuilder) -> None:
        self.b = b
        self.words = b.alloca(I64, SIGACTION_BYTES // 8, name="action")
        self.sigaction = declare(b.module, "sigaction", I32, [I32, _PTR, _PTR])
        self.signal = ir.Constant(I32, int(signal.SIGINT))
        memset_zero(b, self.words, i64(SIGACTION_BYTES))
        b.call(self.sigaction, [self.signal, ir.Constant(_PTR, None), self.words])

    def _word(self, offset: int) -> ir.Value:
        return self.b.gep(self.words, [i64(offset // 8)], source_etype=I64)

    def handler(self) -> ir.Value:
        return self.b.load(self._word(0), typ=I64)

    def flags(self) -> ir.Value:
        return self.b.load(self._word(SIGACTION_FLAGS_OFFSET), typ=I64)

    def set(self, handler: ir.Value, flags: ir.Value) -> None:
        """Install the action with `handler` and `flags` instead (mask and the rest kept)."""
        b = self.b
        b.store(handler, self._word(0))
        b.store(flags, self._word(SIGACTION_FLAGS_OFFSET))
        b.call(self.sigaction, [self.signal, self.words, ir.Constant(_PTR, None)])


def _is_function(b: ir.IRBuilder, handler: ir.Value) -> ir.Value:
    """Whether a handler word is a function, not SIG_DFL (0) or SIG_IGN (1)."""
    return b.icmp_unsigned(">", handler, i64(1))
