"""The process's pool of worker threads, which the tasks of a split op run on: threads
started once and kept between calls, as starting a POSIX thread per task costs about as
much as a small convolution's task.

The process has one pool (`pool_run`), whose state is one block at `STATE_SYMBOL`: Python's
for the JIT, so that every module's split ops share the same workers; an ahead-of-time
library's own. Its first use starts one worker per CPU but the caller's, detached, waiting
on a condition variable; a call posts the job (the start routine, the first task's record,
the records' stride, the task count), wakes them, and takes tasks itself too. All job state
is written under one mutex, a task being claimed under it and run outside it, so a worker
that wakes late never runs a task of a finished job: it finds every task claimed. The
caller returns once every task has finished.

Waking a worker asleep on a condition variable costs tens of microseconds on a virtual
machine, more than a small convolution's split saves. So a worker that finishes a job
watches for the next one for `SPIN_CYCLES` before it sleeps, and the caller watches for
its tasks' end as long before it waits, yielding the core at each look (``sched_yield``)
so that a watching thread delays no other that could run there; the words watched (the
job's generation, the tasks remaining) are written and read atomically.

A call finding the pool in use (another thread's call, or a task splitting an op of its
own) gets false and starts threads of its own. After a fork the child has none of the
parent's threads: an ``atfork`` handler (glibc's ``__register_atfork``, which its
``pthread_atfork`` wraps statically) zeroes the pool (PTHREAD_*_INITIALIZER are zeros in
glibc) so that the child's first call starts new ones.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import llvmlite.binding as llvm
from llvmlite import ir

from stageflow.codegen.llvm.emitter import I8, I32, I64
from stageflow.codegen.llvm.functions import declare, entry_alloca
from stageflow.codegen.llvm.loops import counted_loop, i64
from stageflow.codegen.targets import platform

_PTR = ir.PointerType()
_SYNC_WORDS = 8  # room for a pthread_mutex_t or pthread_cond_t (40 and 48 bytes on x86-64)
_SYNC = ("lock", "work", "done", "busy")
_WORDS = ("started", "generation", "next", "count", "remaining", "stride", "fn", "base")
_MAX_WORKERS = 63
STATE_SYMBOL = "sf.pool.state"
STATE_TYPE = ir.ArrayType(I64, len(_SYNC) * _SYNC_WORDS + len(_WORDS))
_state = (ctypes.c_int64 * STATE_TYPE.count)()
# Known to the JIT from the import on: cached code declaring it may link before any module
# of this process is built (a shared function's, `cpu.shared_function`).
llvm.add_symbol(STATE_SYMBOL, ctypes.addressof(_state))
# How long an idle worker watches for the next job, and the caller for its tasks' end,
# before sleeping, in time-stamp counter cycles: under a millisecond, long enough to catch
# the next split op of a step, short enough that an idle process soon sleeps. Elsewhere than
# on x86 the cycle counter is not readable by programs (aarch64's traps): the steady
# counter is (aarch64's generic timer, at 1 GHz at most), for `SPIN_TICKS`.
SPIN_CYCLES = 1 << 21
SPIN_TICKS = 1 << 18


def pool_run(module: ir.Module, workers: Callable[[ir.IRBuilder], ir.Value]) -> ir.Function:
    """``i1 sf.pool.run(ptr start, ptr base, i64 stride, i64 count)`` of `module` (made
    once): run ``start(base + i * stride)`` for i in [0, count) on the pool and this
    thread; false, having run nothing, where the pool is busy or has no worker.
    `workers(b)` gives the number of CPUs (the pool starts one fewer)."""
    existing = module.globals.get("sf.pool.run")
    if isinstance(existing, ir.Function):
        return existing
    state = _State(module)
    claim = _claim(module, state)
    worker = _worker(module, state, claim)
    reset = _reset(module, state)
    run = ir.Function(module, ir.FunctionType(ir.IntType(1), [_PTR, _PTR, I64, I64]),
                      "sf.pool.run")
    run.linkage = "internal"
    start, base, stride, count = run.args
    b = ir.IRBuilder(run.append_basic_block("entry"))
    mutex = _function(module, "pthread_mutex")
    if_busy = b.icmp_signed("!=", b.call(mutex("trylock"), [state.sync["busy"]]),
                            ir.Constant(I32, 0))
    with b.if_then(if_busy):
        b.ret(ir.Constant(ir.IntType(1), 0))
    started = b.load(state.words["started"], typ=I64)
    with b.if_then(b.icmp_signed("==", started, i64(0))):
        _start_workers(b, state, worker, reset, workers(b))
    with b.if_then(b.icmp_signed("==", b.load(state.words["started"], typ=I64), i64(1))):
        b.call(mutex("unlock"), [state.sync["busy"]])  # no worker could start
        b.ret(ir.Constant(ir.IntType(1), 0))
    b.call(mutex("lock"), [state.sync["lock"]])
    b.store(b.ptrtoint(start, I64), state.words["fn"])
    b.store(b.ptrtoint(base, I64), state.words["base"])
    b.store(stride, state.words["stride"])
    b.store(count, state.words["count"])
    b.store(i64(0), state.words["next"])
    b.store(count, state.words["remaining"])
    generation = state.words["generation"]
    b.store_atomic(b.add(b.load(generation, typ=I64), i64(1)), generation, "monotonic", 8)
    cond = _function(module, "pthread_cond")
    b.call(cond("broadcast"), [state.sync["work"]])
    b.call(claim, [])

    def running() -> ir.Value:
        remaining = b.load_atomic(state.words["remaining"], "monotonic", 8, typ=I64)
        return b.icmp_signed("!=", remaining, i64(0))

    _spin_while(b, state, running)
    _wait_while(b, state, running, "done")
    b.call(mutex("unlock"), [state.sync["lock"]])
    b.call(mutex("unlock"), [state.sync["busy"]])
    b.ret(ir.Constant(ir.IntType(1), 1))
    return run


class _State:
    """The pool's state in a module: the process-wide block at `STATE_SYMBOL` (declared),
    read as its mutexes and conditions, counters and job (its pointers as integers)."""

    def __init__(self, module: ir.Module) -> None:
        block = pool_state(module)

        def at(word: int) -> ir.Constant:
            return block.gep([i64(0), i64(word)])

        self.block = block
        self.sync = {name: at(k * _SYNC_WORDS) for k, name in enumerate(_SYNC)}
        first = len(_SYNC) * _SYNC_WORDS
        self.words = {name: at(first + k) for k, name in enumerate(_WORDS)}  # pointers as ints


def pool_state(module: ir.Module) -> ir.GlobalVariable:
    """The process-wide pool state, declared in `module`: defined by Python's block for the
    JIT (its symbol added at import), by an ahead-of-time library itself."""
    existing = module.globals.get(STATE_SYMBOL)
    if isinstance(existing, ir.GlobalVariable):
        return existing
    return ir.GlobalVariable(module, STATE_TYPE, STATE_SYMBOL)


def _function(module: ir.Module, family: str) -> Callable[[str], ir.Function]:
    """``pthread_mutex_lock`` & co: the family's function of one pointer argument."""

    def get(operation: str) -> ir.Function:
        return declare(module, f"{family}_{operation}", I32, [_PTR])

    return get


def _wait_while(b: ir.IRBuilder, state: _State, condition: Callable[[], ir.Value],
                on: str) -> None:
    """``while condition(): pthread_cond_wait(on, lock)`` (the lock held)."""
    wait = declare(b.module, "pthread_cond_wait", I32, [_PTR, _PTR])
    head = b.append_basic_block(f"wait.{on}.head")
    body = b.append_basic_block(f"wait.{on}.body")
    end = b.append_basic_block(f"wait.{on}.end")
    b.branch(head)
    b.position_at_end(head)
    b.cbranch(condition(), body, end)
    b.position_at_end(body)
    b.call(wait, [state.sync[on], state.sync["lock"]])
    b.branch(head)
    b.position_at_end(end)


def _spin_while(b: ir.IRBuilder, state: _State, condition: Callable[[], ir.Value]) -> None:
    """With the lock held: release it and watch `condition` (reading atomics) for up to
    `SPIN_CYCLES`, yielding the core at each look; take the lock again."""
    module = b.module
    mutex = _function(module, "pthread_mutex")
    x86 = platform.current().arch in ("x86_64", "i386", "i686")
    clock = declare(module, "llvm.readcyclecounter" if x86 else "llvm.readsteadycounter",
                    I64, [])
    yield_core = declare(module, "sched_yield", I32, [])
    b.call(mutex("unlock"), [state.sync["lock"]])
    deadline = b.add(b.call(clock, []), i64(SPIN_CYCLES if x86 else SPIN_TICKS))
    head = b.append_basic_block("spin.head")
    body = b.append_basic_block("spin.body")
    end = b.append_basic_block("spin.end")
    b.branch(head)
    b.position_at_end(head)
    watching = b.and_(condition(), b.icmp_unsigned("<", b.call(clock, []), deadline))
    b.cbranch(watching, body, end)
    b.position_at_end(body)
    b.call(yield_core, [])
    b.branch(head)
    b.position_at_end(end)
    b.call(mutex("lock"), [state.sync["lock"]])


def _claim(module: ir.Module, state: _State) -> ir.Function:
    """``void sf.pool.claim()``, the lock held: take tasks while any is left, each run
    with the lock released; the last to finish wakes the caller."""
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), []), "sf.pool.claim")
    function.linkage = "internal"
    b = ir.IRBuilder(function.append_basic_block("entry"))
    mutex = _function(module, "pthread_mutex")
    cond = _function(module, "pthread_cond")
    head = b.append_basic_block("claim.head")
    body = b.append_basic_block("claim.body")
    end = b.append_basic_block("claim.end")
    b.branch(head)
    b.position_at_end(head)
    taken = b.load(state.words["next"], typ=I64)
    b.cbranch(b.icmp_signed("<", taken, b.load(state.words["count"], typ=I64)), body, end)
    b.position_at_end(body)
    b.store(b.add(taken, i64(1)), state.words["next"])
    start = b.inttoptr(b.load(state.words["fn"], typ=I64),
                       ir.PointerType(ir.FunctionType(_PTR, [_PTR])))
    offset = b.mul(taken, b.load(state.words["stride"], typ=I64))
    base = b.inttoptr(b.load(state.words["base"], typ=I64), _PTR)
    record = b.gep(base, [offset], source_etype=I8)
    b.call(mutex("unlock"), [state.sync["lock"]])
    b.call(start, [record])
    b.call(mutex("lock"), [state.sync["lock"]])
    remaining = b.sub(b.load(state.words["remaining"], typ=I64), i64(1))
    b.store_atomic(remaining, state.words["remaining"], "monotonic", 8)
    with b.if_then(b.icmp_signed("==", remaining, i64(0))):
        b.call(cond("broadcast"), [state.sync["done"]])
    b.branch(head)
    b.position_at_end(end)
    b.ret_void()
    return function


def _worker(module: ir.Module, state: _State, claim: ir.Function) -> ir.Function:
    """``ptr sf.pool.worker(ptr)``: wait for a new job, claim its tasks, forever."""
    function = ir.Function(module, ir.FunctionType(_PTR, [_PTR]), "sf.pool.worker")
    function.linkage = "internal"
    b = ir.IRBuilder(function.append_basic_block("entry"))
    seen = b.alloca(I64, name="seen")
    b.store(i64(0), seen)
    b.call(_function(module, "pthread_mutex")("lock"), [state.sync["lock"]])
    loop = b.append_basic_block("job")
    b.branch(loop)
    b.position_at_end(loop)

    def idle() -> ir.Value:
        generation = b.load_atomic(state.words["generation"], "monotonic", 8, typ=I64)
        return b.icmp_signed("==", generation, b.load(seen, typ=I64))

    _spin_while(b, state, idle)
    _wait_while(b, state, idle, "work")
    b.store(b.load(state.words["generation"], typ=I64), seen)
    b.call(claim, [])
    b.branch(loop)
    return function


def _reset(module: ir.Module, state: _State) -> ir.Function:
    """``void sf.pool.reset()``: a fork's child starts with an empty, unlocked pool."""
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), []), "sf.pool.reset")
    function.linkage = "internal"
    b = ir.IRBuilder(function.append_basic_block("entry"))
    b.store(ir.Constant(STATE_TYPE, None), state.block)
    b.ret_void()
    return function


def _start_workers(b: ir.IRBuilder, state: _State, worker: ir.Function, reset: ir.Function,
                   cpus: ir.Value) -> None:
    """Start one detached worker per CPU but this one (at most `_MAX_WORKERS`); `started`
    becomes the number started plus one, so that a pool is set up once."""
    module = b.module
    create = declare(module, "pthread_create", I32, [_PTR, _PTR, _PTR, _PTR])
    detach = declare(module, "pthread_detach", I32, [I64])
    # (glibc's pthread_atfork is a static wrapper of this one, which the JIT cannot find)
    atfork = declare(module, "__register_atfork", I32, [_PTR, _PTR, _PTR, _PTR])
    wanted = b.sub(cpus, i64(1))
    wanted = b.select(b.icmp_signed(">", wanted, i64(_MAX_WORKERS)), i64(_MAX_WORKERS), wanted)
    handle = entry_alloca(b, I64, 1, "pool.thread")
    created = entry_alloca(b, I64, 1, "pool.created")
    b.store(i64(0), created)

    def start(_: ir.Value) -> None:
        code = b.call(create, [handle, ir.Constant(_PTR, None), worker,
                               ir.Constant(_PTR, None)])
        with b.if_then(b.icmp_signed("==", code, ir.Constant(I32, 0))):
            b.call(detach, [b.load(handle, typ=I64)])
            b.store(b.add(b.load(created, typ=I64), i64(1)), created)

    counted_loop(b, i64(0), wanted, i64(1), start, "pool.start")
    null = ir.Constant(_PTR, None)
    b.call(atfork, [null, null, reset, null])
    b.store(b.add(b.load(created, typ=I64), i64(1)), state.words["started"])
