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

A split pays only where the workers run when the caller does. Beside other busy processes
a worker may be switched out in the middle of its task for a whole time slice
(milliseconds) while the caller waits for it, which costs far more than the split saves;
and a worker that watches for work takes its share of a core from the threads that have
some. So the caller runs a job's tasks one after another on its own thread, without
waking the workers, in two cases:
- it was itself switched out for another thread twice (involuntary context switches,
  ``getrusage(RUSAGE_THREAD)``), less than `CROWDED_CYCLES` apart and the second as
  recently: the cores are crowded, which the kernel tells at the cost of a system call
  a job;
- a back-off is under way: the caller judges each job it split when it ends, and a job
  that took half as long again as running every task itself would have (its own tasks'
  average time times the task count) starts a back-off or doubles it (`BACKOFF_CYCLES`
  to `BACKOFF_MAX_CYCLES`), a job that paid halves it. This catches what the kernel does
  not see, a hypervisor running another guest on the core. While a back-off lasts the
  threads do not watch: they sleep at once.
A late worker cannot lose a job: a task no worker has claimed yet is the caller's to
claim, so only a worker slowed in the middle of its task counts against the pool.

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
from stageflow.codegen.lowered.rule import larger, smaller
from stageflow.codegen.targets import platform

_PTR = ir.PointerType()
_START = ir.PointerType(ir.FunctionType(_PTR, [_PTR]))  # a task's start routine
_SYNC_WORDS = 8  # room for a pthread_mutex_t or pthread_cond_t (40 and 48 bytes on x86-64)
_SYNC = ("lock", "work", "done", "busy")
_WORDS = ("started", "generation", "next", "count", "remaining", "stride", "fn", "base",
          "jobs", "alone_until", "backoff", "caller", "switches", "switched_at", "switched_before",
          "checked_at")
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
# How long the caller runs jobs alone after a job the pool lost (module docstring): the
# first back-off about a millisecond, the longest tens of them, in the same counter's units.
BACKOFF_CYCLES, BACKOFF_MAX_CYCLES = 1 << 21, 1 << 27
BACKOFF_TICKS, BACKOFF_MAX_TICKS = 1 << 18, 1 << 24
# How close the caller's two last switches for another thread, and the last to a job, make
# the cores crowded: longer than the time slices of a few threads sharing a core
# (milliseconds each).
CROWDED_CYCLES, CROWDED_TICKS = 1 << 26, 1 << 23
# How often at most the caller asks the kernel for its switches (a system call).
CHECK_CYCLES, CHECK_TICKS = 1 << 20, 1 << 17
_RUSAGE_THREAD, _RUSAGE_WORDS, _NIVCSW = 1, 18, 17  # struct rusage: ru_nivcsw is its last long


def pool_run(module: ir.Module, workers: Callable[[ir.IRBuilder], ir.Value]) -> ir.Function:
    """``i1 sf.pool.run(ptr start, ptr base, i64 stride, i64 count)`` of `module` (made
    once): run ``start(base + i * stride)`` for i in [0, count) on the pool and this
    thread, or on this thread alone during a back-off; false, having run nothing, where
    the pool is busy or has no worker. `workers(b)` gives the number of CPUs (the pool
    starts one fewer)."""
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
    b.store(b.add(b.load(state.words["jobs"], typ=I64), i64(1)), state.words["jobs"])
    posted = b.call(_clock(module), [])
    alone = b.or_(b.icmp_unsigned("<", posted, b.load(state.words["alone_until"], typ=I64)),
                  _crowded(b, state, posted))
    with b.if_then(alone):
        task = b.inttoptr(b.ptrtoint(start, I64), _START)
        counted_loop(b, i64(0), count, i64(1),
                     lambda t: b.call(task, [b.gep(base, [b.mul(t, stride)], source_etype=I8)]),
                     "alone")
        b.call(mutex("unlock"), [state.sync["busy"]])
        b.ret(ir.Constant(ir.IntType(1), 1))
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
    ran = b.call(claim, [])
    own = b.sub(b.call(_clock(module), []), posted)

    def running() -> ir.Value:
        remaining = b.load_atomic(state.words["remaining"], "monotonic", 8, typ=I64)
        return b.icmp_signed("!=", remaining, i64(0))

    _spin_while(b, state, lambda: b.and_(running(), _calm(b, state)))
    _wait_while(b, state, running, "done")
    b.call(mutex("unlock"), [state.sync["lock"]])
    _judge(b, state, ran, count, own, b.sub(b.call(_clock(module), []), posted))
    b.call(mutex("unlock"), [state.sync["busy"]])
    b.ret(ir.Constant(ir.IntType(1), 1))
    return run


def _judge(b: ir.IRBuilder, state: _State, ran: ir.Value, count: ir.Value, own: ir.Value,
           took: ir.Value) -> None:
    """After a job that took `took` counter units, this thread having run `ran` of its
    `count` tasks in `own`: where the job lost by the module docstring's rule
    (``2 took ran > 3 own count``), start or double the back-off, else halve it (under
    `BACKOFF_CYCLES`, none); the caller then runs jobs alone for that long."""
    shortest = _units(BACKOFF_CYCLES, BACKOFF_TICKS)
    longest = _units(BACKOFF_MAX_CYCLES, BACKOFF_MAX_TICKS)
    lost = b.and_(b.icmp_signed(">", ran, i64(0)),
                  b.icmp_signed(">", b.mul(b.mul(took, ran), i64(2)),
                                b.mul(b.mul(own, count), i64(3))))
    before = b.load(state.words["backoff"], typ=I64)
    backoff = larger(b, i64(shortest), smaller(b, b.shl(before, i64(1)), i64(longest)))
    calmer = b.lshr(before, i64(1))
    calmer = b.select(b.icmp_signed("<", calmer, i64(shortest)), i64(0), calmer)
    backoff = b.select(lost, backoff, calmer)
    b.store_atomic(backoff, state.words["backoff"], "monotonic", 8)
    b.store(b.add(b.call(_clock(b.module), []), backoff), state.words["alone_until"])


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
    clock = _clock(module)
    yield_core = declare(module, "sched_yield", I32, [])
    b.call(mutex("unlock"), [state.sync["lock"]])
    deadline = b.add(b.call(clock, []), i64(_units(SPIN_CYCLES, SPIN_TICKS)))
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


def _crowded(b: ir.IRBuilder, state: _State, now: ir.Value) -> ir.Value:
    """Whether this thread was switched out for another twice (its involuntary context
    switches, ``getrusage(RUSAGE_THREAD)``, asked at most once per `CHECK_CYCLES`), each
    less than `CROWDED_CYCLES` before the next or `now`: then other threads want the
    cores, and a worker may be switched out in the middle of a task. (Once in a while a
    kernel thread takes the core on a quiet machine too.) A new caller thread only sets
    the count compared with."""
    module = b.module
    check, window = _units(CHECK_CYCLES, CHECK_TICKS), _units(CROWDED_CYCLES, CROWDED_TICKS)
    usage = entry_alloca(b, I64, _RUSAGE_WORDS, "usage")
    stale = b.icmp_unsigned(">=", b.sub(now, b.load(state.words["checked_at"], typ=I64)),
                            i64(check))
    with b.if_then(stale):
        b.store(now, state.words["checked_at"])
        b.call(declare(module, "getrusage", I32, [I32, _PTR]),
               [ir.Constant(I32, _RUSAGE_THREAD), usage])
        switches = b.load(b.gep(usage, [i64(_NIVCSW)], source_etype=I64), typ=I64)
        thread = b.call(declare(module, "pthread_self", I64, []), [])
        same = b.icmp_unsigned("==", thread, b.load(state.words["caller"], typ=I64))
        switched = b.and_(same, b.icmp_unsigned("!=", switches,
                                                b.load(state.words["switches"], typ=I64)))
        last = b.load(state.words["switched_at"], typ=I64)
        before = b.select(switched, last, b.load(state.words["switched_before"], typ=I64))
        b.store(before, state.words["switched_before"])
        b.store(b.select(switched, now, last), state.words["switched_at"])
        b.store(switches, state.words["switches"])
        b.store(thread, state.words["caller"])
    before = b.load(state.words["switched_before"], typ=I64)
    at = b.load(state.words["switched_at"], typ=I64)
    return b.and_(b.icmp_unsigned("!=", before, i64(0)),
                  b.and_(b.icmp_unsigned("<", b.sub(now, at), i64(window)),
                         b.icmp_unsigned("<", b.sub(at, before), i64(window))))


def _calm(b: ir.IRBuilder, state: _State) -> ir.Value:
    """Whether no back-off is under way (module docstring): only then is watching worth
    the core, which beside busy processes is taken from the threads that have work."""
    backoff = b.load_atomic(state.words["backoff"], "monotonic", 8, typ=I64)
    return b.icmp_signed("==", backoff, i64(0))


def _x86() -> bool:
    return platform.current().arch in ("x86_64", "i386", "i686")


def _clock(module: ir.Module) -> ir.Function:
    """The counter the pool's waits and back-offs are timed by: the time-stamp counter on
    x86, the steady counter elsewhere (module docstring)."""
    return declare(module, "llvm.readcyclecounter" if _x86() else "llvm.readsteadycounter",
                   I64, [])


def _units(cycles: int, ticks: int) -> int:
    """A duration in `_clock`'s units: `cycles` of the time-stamp counter on x86, `ticks`
    of the steady counter elsewhere."""
    return cycles if _x86() else ticks


def _claim(module: ir.Module, state: _State) -> ir.Function:
    """``i64 sf.pool.claim()``, the lock held: take tasks while any is left, each run
    with the lock released; the last to finish wakes the caller. Returns how many this
    thread ran."""
    function = ir.Function(module, ir.FunctionType(I64, []), "sf.pool.claim")
    function.linkage = "internal"
    b = ir.IRBuilder(function.append_basic_block("entry"))
    ran = b.alloca(I64, name="ran")
    b.store(i64(0), ran)
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
    b.store(b.add(b.load(ran, typ=I64), i64(1)), ran)
    start = b.inttoptr(b.load(state.words["fn"], typ=I64), _START)
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
    b.ret(b.load(ran, typ=I64))
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

    _spin_while(b, state, lambda: b.and_(idle(), _calm(b, state)))
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
