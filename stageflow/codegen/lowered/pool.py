"""Worker threads kept between calls: the tasks of a split op run on threads started once.

Starting a POSIX thread per task cost about 35 us here, a tenth of the small ResNet's
training step at batch 8, which splits a few dozen ops. Each module that splits ops gets a
pool (`pool_run`): on its first use it starts one worker per CPU but the caller's, detached,
waiting on a condition variable; a call posts the job (the start routine, the first task's
record, the records' stride, the task count), wakes them, and takes tasks itself too. All
job state is read and written under one mutex, a task being claimed under it and run
outside it, so a worker that wakes late never runs a task of a finished job: it finds
every task claimed. The caller returns once every task has finished.

A call finding the pool in use (another thread's call, or a task splitting an op of its
own) gets false and starts threads of its own, as before. After a fork the child has none
of the parent's threads: an ``atfork`` handler (glibc's ``__register_atfork``, which its
``pthread_atfork`` wraps statically) zeroes the pool (PTHREAD_*_INITIALIZER are zeros in
glibc) so that the child's first call starts new ones.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from stageflow.codegen.llvm.emitter import I8, I32, I64
from stageflow.codegen.llvm.functions import declare, entry_alloca
from stageflow.codegen.llvm.loops import counted_loop, i64

_PTR = ir.PointerType()
_SYNC_BYTES = 64  # room for a pthread_mutex_t or pthread_cond_t (40 and 48 bytes on x86-64)
_SYNC = ("lock", "work", "done", "busy")
_WORDS = ("started", "generation", "next", "count", "remaining", "stride", "fn")
_POINTERS = ("base",)
_MAX_WORKERS = 63


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
    b.store(base, state.pointers["base"])
    b.store(stride, state.words["stride"])
    b.store(count, state.words["count"])
    b.store(i64(0), state.words["next"])
    b.store(count, state.words["remaining"])
    generation = state.words["generation"]
    b.store(b.add(b.load(generation, typ=I64), i64(1)), generation)
    cond = _function(module, "pthread_cond")
    b.call(cond("broadcast"), [state.sync["work"]])
    b.call(claim, [])
    _wait_while(b, state, lambda: b.icmp_signed(
        "!=", b.load(state.words["remaining"], typ=I64), i64(0)), "done")
    b.call(mutex("unlock"), [state.sync["lock"]])
    b.call(mutex("unlock"), [state.sync["busy"]])
    b.ret(ir.Constant(ir.IntType(1), 1))
    return run


class _State:
    """The pool's globals in a module: its mutexes and conditions, counters and job."""

    def __init__(self, module: ir.Module) -> None:
        self.sync = {}
        for name in _SYNC:
            variable = ir.GlobalVariable(module, ir.ArrayType(I8, _SYNC_BYTES),
                                         f"sf.pool.{name}")
            variable.initializer = ir.Constant(ir.ArrayType(I8, _SYNC_BYTES), None)
            variable.linkage = "internal"
            variable.align = 16
            self.sync[name] = variable
        self.words = {name: _global(module, f"sf.pool.{name}", I64, i64(0)) for name in _WORDS}
        self.pointers = {name: _global(module, f"sf.pool.{name}", _PTR,
                                       ir.Constant(_PTR, None)) for name in _POINTERS}


def _global(module: ir.Module, name: str, ty: ir.Type, value: ir.Constant) -> ir.GlobalVariable:
    variable = ir.GlobalVariable(module, ty, name)
    variable.initializer = value
    variable.linkage = "internal"
    return variable


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
    record = b.gep(b.load(state.pointers["base"], typ=_PTR), [offset], source_etype=I8)
    b.call(mutex("unlock"), [state.sync["lock"]])
    b.call(start, [record])
    b.call(mutex("lock"), [state.sync["lock"]])
    remaining = b.sub(b.load(state.words["remaining"], typ=I64), i64(1))
    b.store(remaining, state.words["remaining"])
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
    _wait_while(b, state, lambda: b.icmp_signed(
        "==", b.load(state.words["generation"], typ=I64), b.load(seen, typ=I64)), "work")
    b.store(b.load(state.words["generation"], typ=I64), seen)
    b.call(claim, [])
    b.branch(loop)
    return function


def _reset(module: ir.Module, state: _State) -> ir.Function:
    """``void sf.pool.reset()``: a fork's child starts with an empty, unlocked pool."""
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), []), "sf.pool.reset")
    function.linkage = "internal"
    b = ir.IRBuilder(function.append_basic_block("entry"))
    for variable in state.sync.values():
        b.store(ir.Constant(ir.ArrayType(I8, _SYNC_BYTES), None), variable)
    for variable in state.words.values():
        b.store(i64(0), variable)
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
