"""Splitting one lowered op over the cores: its units of work as tasks on threads.

A whole-function program is one call on one thread. The BLAS threads its own gemm calls,
but the rest of a convolution (copying windows in and adding them back) ran on one core,
and OpenBLAS's threading of a convolution's small block gemms made a step's time bimodal,
depending on where its threads slept. Here an op splits its units (image rows of a
convolution) into one task per core, run by the process's pool of worker threads and the
calling thread (`codegen.lowered.worker_pool`: threads started once, as starting a thread
per call costs as much as a small task's work); where the pool is busy, the entry starts a
thread per task after the first, runs the first itself, and joins them. Only work worth
several times a thread's start is split.

A task is a function of its own (`task_function`): it loads the op's operands again from
the entry's ``(data, dims, strides)``, so the op's code needs nothing passed but its range
of units and the task's number, and it returns a status as the entry does (the first
failing task's is the op's). Where a thread cannot be started its task runs on the
calling thread. The number of tasks is the number of CPUs the process may run on
(``sched_getaffinity``), read once per module.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import llvmlite.binding as llvm
from llvmlite import ir

from stageflow.codegen.llvm.emitter import I8, I32, I64
from stageflow.codegen.llvm.functions import declare, entry_alloca
from stageflow.codegen.llvm.loops import counted_loop, i64
from stageflow.codegen.lowered.rule import OpBuilder, load_operands, smaller
from stageflow.codegen.lowered.worker_pool import pool_run
from stageflow.codegen.targets import platform
from stageflow.core import config_threading

MAX_TASKS = 64
# Known to the JIT from the import on (cached code declaring it may link first).
llvm.add_symbol(config_threading.INTRA_OP_SYMBOL, ctypes.addressof(config_threading.INTRA_OP))
_PTR = ir.PointerType()
# A task's record, an i64 per field (pointers as integers): data, dims, strides, first
# unit, last unit, task number, private memory, status.
_FIELDS = [_PTR, _PTR, _PTR, I64, I64, I64, _PTR, I32]
_AFFINITY_BYTES = 128  # a glibc cpu_set_t: 1024 CPUs

# The body of a task: the builder positioned in the task's function (its operands loaded),
# its first and last unit, its number (0 runs on the calling thread) and its private memory.
TaskBody = Callable[[OpBuilder, ir.Value, ir.Value, ir.Value, ir.Value], None]


def intra_op_limit(module: ir.Module) -> ir.GlobalVariable:
    """`sf.config.threading`'s intra-op count (0: no limit), declared in `module`: Python's
    word for the JIT (its symbol added at import), an ahead-of-time library's own zero."""
    existing = module.globals.get(config_threading.INTRA_OP_SYMBOL)
    if isinstance(existing, ir.GlobalVariable):
        return existing
    return ir.GlobalVariable(module, I64, config_threading.INTRA_OP_SYMBOL)


def cpu_count(b: ir.IRBuilder) -> ir.Value:
    """The CPUs this process may run on (at least 1, asked once and kept in a global), or
    fewer where `sf.config.threading` sets a lower intra-op count (read at each call); 1
    where the platform has no threads."""
    if not platform.current().threads:
        return i64(1)
    cores = affinity_count(b)
    limit = b.load(intra_op_limit(b.module), typ=I64)
    lower = b.and_(b.icmp_signed(">", limit, i64(0)), b.icmp_signed("<", limit, cores))
    return b.select(lower, limit, cores)


def task_count(b: ir.IRBuilder, units: ir.Value, work: ir.Value, per_task: int) -> ir.Value:
    """How many tasks to split `units` into: one per CPU (`cpu_count`), no more than there
    are units, and few enough that each gets at least `per_task` of the `work` (less than
    one means one task)."""
    return smaller(b, smaller(b, cpu_count(b), units), b.sdiv(work, i64(per_task)))


def affinity_count(b: ir.IRBuilder) -> ir.Value:
    """The CPUs of the process's affinity mask (at least 1), asked once per module."""
    module = b.module
    cached = module.globals.get("sf.cpus")
    if cached is None:
        cached = ir.GlobalVariable(module, I64, "sf.cpus")
        cached.initializer = i64(0)
        cached.linkage = "internal"
    known = b.load(cached, typ=I64)
    with b.if_then(b.icmp_signed("==", known, i64(0))):
        mask = entry_alloca(b, ir.ArrayType(I64, _AFFINITY_BYTES // 8))
        affinity = declare(module, "sched_getaffinity", I32, [I32, I64, _PTR])
        ok = b.icmp_signed("==", b.call(affinity, [ir.Constant(I32, 0), i64(_AFFINITY_BYTES),
                                                    mask]), ir.Constant(I32, 0))
        popcount = module.declare_intrinsic("llvm.ctpop", [I64])
        total: ir.Value = i64(0)
        for word in range(_AFFINITY_BYTES // 8):
            bits = b.load(b.gep(mask, [i64(0), i64(word)], source_etype=mask.allocated_type),
                          typ=I64)
            total = b.add(total, b.call(popcount, [bits]))
        count = b.select(ok, total, i64(1))
        b.store(b.select(b.icmp_signed("<", count, i64(1)), i64(1), count), cached)
    return b.load(cached, typ=I64)


# Emits code around the region where several tasks run (`single_threaded_blas`).
Guard = Callable[[ir.IRBuilder, Callable[[], None]], None]


def run_tasks(ob: OpBuilder, name: str, units: ir.Value, tasks: ir.Value, body: TaskBody,
              private: Callable[[ir.IRBuilder, ir.Value], ir.Value] | None = None,
              merge: Callable[[ir.IRBuilder, ir.Value], None] | None = None,
              guard: Guard | None = None) -> None:
    """Run `body` over units [0, `units`) split evenly into `tasks` tasks (1 to
    `MAX_TASKS`; clamped), the first on this thread. With `private`, each task after the
    first gets the memory it returns (``private(b, task)``, null where it failed: the op
    then returns its argument count + 1) and, once every task is done, `merge` folds it
    into the result and frees it; the first task gets null. `guard` wraps the tasks.
    Returns from the entry with the first failing task's status."""
    assert (private is None) == (merge is None), "private memory needs its merge"
    b = ob.b
    function = task_function(ob, name, body)
    tasks = b.select(b.icmp_signed("<", tasks, i64(1)), i64(1), tasks)
    tasks = b.select(b.icmp_signed(">", tasks, i64(MAX_TASKS)), i64(MAX_TASKS), tasks)
    records = entry_alloca(b, I64, MAX_TASKS * len(_FIELDS), f"{name}.records")
    trampoline = _trampoline(b.module, function)
    data, dims, strides = ob.arguments
    no_memory = ir.Constant(I32, len(ob.inputs) + len(ob.outputs) + 1)

    def record(t: ir.Value) -> ir.Value:
        return b.gep(records, [b.mul(t, i64(len(_FIELDS)))], source_etype=I64)

    def fill(t: ir.Value) -> None:
        at = record(t)
        first = b.sdiv(b.mul(units, t), tasks)
        last = b.sdiv(b.mul(units, b.add(t, i64(1))), tasks)
        for index, value in enumerate([data, dims, strides, first, last, t,
                                       ir.Constant(_PTR, None), ir.Constant(I32, 0)]):
            _store(b, at, index, value)
        if private is not None:
            with b.if_then(b.icmp_signed(">", t, i64(0))):
                _store(b, at, 6, private(b, t))

    counted_loop(b, i64(0), tasks, i64(1), fill, "task.fill")
    if private is not None:
        slot = entry_alloca(b, ir.IntType(1), 1, f"{name}.missing")
        b.store(ir.Constant(ir.IntType(1), 0), slot)

        def check(t: ir.Value) -> None:
            memory = _load(b, record(t), 6)
            null = b.icmp_unsigned("==", memory, ir.Constant(_PTR, None))
            b.store(b.or_(b.load(slot, typ=ir.IntType(1)), null), slot)

        counted_loop(b, i64(1), tasks, i64(1), check, "task.check")
        failed = b.load(slot, typ=ir.IntType(1))
        with b.if_then(failed):
            counted_loop(b, i64(1), tasks, i64(1), lambda t: _free(b, record(t)), "task.free")
            b.ret(no_memory)

    def together() -> None:
        _on_threads(b, tasks, record, trampoline, function)

    if guard is None:
        together()
    else:
        guard(b, together)
    status = entry_alloca(b, I32, 1, f"{name}.status")
    b.store(ir.Constant(I32, 0), status)

    def collect(t: ir.Value) -> None:
        code = _load(b, record(t), 7)
        first_failure = b.and_(b.icmp_signed("==", b.load(status, typ=I32), ir.Constant(I32, 0)),
                               b.icmp_signed("!=", code, ir.Constant(I32, 0)))
        b.store(b.select(first_failure, code, b.load(status, typ=I32)), status)
        if merge is not None and private is not None:
            with b.if_then(b.icmp_signed(">", t, i64(0))):
                merge(b, _load(b, record(t), 6))
                _free(b, record(t))

    counted_loop(b, i64(0), tasks, i64(1), collect, "task.collect")
    code = b.load(status, typ=I32)
    with b.if_then(b.icmp_signed("!=", code, ir.Constant(I32, 0))):
        b.ret(code)


def task_function(ob: OpBuilder, name: str, body: TaskBody) -> ir.Function:
    """``void NAME(ptr record)``: the task of `record` (its status stored there), with the
    op's operands loaded from the entry's arguments as the entry loads them."""
    module = ob.b.module
    symbol = f"{ob.b.function.name}.{name}"
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [_PTR]), symbol)
    function.linkage = "internal"
    (at,) = function.args
    inner = ir.Function(module, ir.FunctionType(I32, [_PTR, _PTR, _PTR, I64, I64, I64, _PTR]),
                        f"{symbol}.body")
    inner.linkage = "internal"
    b = ir.IRBuilder(inner.append_basic_block("entry"))
    data, dims, strides, first, last, task, memory = inner.args
    for argument, label in zip(inner.args, ("data", "dims", "strides", "first", "last", "task",
                                            "private"), strict=True):
        argument.name = label
    at.name = "record"
    operands, _ = load_operands(b, ob.spec, data, dims, strides)
    spec = ob.spec
    tb = OpBuilder(b, spec, operands[:len(spec.inputs)], operands[len(spec.inputs):],
                   (data, dims, strides))
    body(tb, first, last, task, memory)
    tb.b.ret(ir.Constant(I32, 0))
    b = ir.IRBuilder(function.append_basic_block("entry"))
    values = [_load(b, at, index) for index in range(7)]
    _store(b, at, 7, b.call(inner, values))
    b.ret_void()
    return function


def _trampoline(module: ir.Module, function: ir.Function) -> ir.Function:
    """``ptr NAME.thread(ptr record)``: `function` as a POSIX thread's start routine."""
    thread = ir.Function(module, ir.FunctionType(_PTR, [_PTR]), f"{function.name}.thread")
    thread.linkage = "internal"
    b = ir.IRBuilder(thread.append_basic_block("entry"))
    b.call(function, [thread.args[0]])
    b.ret(ir.Constant(_PTR, None))
    return thread


def _store(b: ir.IRBuilder, record: ir.Value, index: int, value: ir.Value) -> None:
    ty = _FIELDS[index]
    word = (b.ptrtoint(value, I64) if ty is _PTR
            else b.sext(value, I64) if ty is I32 else value)
    b.store(word, b.gep(record, [i64(index)], source_etype=I64))


def _load(b: ir.IRBuilder, record: ir.Value, index: int) -> ir.Value:
    ty = _FIELDS[index]
    word = b.load(b.gep(record, [i64(index)], source_etype=I64), typ=I64)
    return (b.inttoptr(word, _PTR) if ty is _PTR
            else b.trunc(word, I32) if ty is I32 else word)


def _free(b: ir.IRBuilder, record: ir.Value) -> None:
    memory = _load(b, record, 6)
    with b.if_then(b.icmp_unsigned("!=", memory, ir.Constant(_PTR, None))):
        b.call(declare(b.module, "free", ir.VoidType(), [_PTR]), [memory])


def run_calls(b: ir.IRBuilder, entry: ir.Function, tasks: ir.Value,
              arguments: Callable[[ir.Value], tuple[ir.Value, ir.Value]]) -> ir.Value:
    """Call ``i32 entry(ptr, ptr)`` once per task in [0, `tasks`) (at most `MAX_TASKS`), on
    a thread each but the first, with the two arguments `arguments(task)` builds; the first
    nonzero status, else 0."""
    trampoline = _call_thread(b.module)
    records = entry_alloca(b, I64, MAX_TASKS * _CALL_WORDS, "call.records")
    status = entry_alloca(b, I64, 1, "call.status")

    def record(t: ir.Value) -> ir.Value:
        return b.gep(records, [b.mul(t, i64(_CALL_WORDS))], source_etype=I64)

    def word(at: ir.Value, k: int) -> ir.Value:
        return b.gep(at, [i64(k)], source_etype=I64)

    def fill(t: ir.Value) -> None:
        at = record(t)
        first, second = arguments(t)
        for k, value in enumerate((entry, first, second)):
            b.store(b.ptrtoint(value, I64), word(at, k))
        b.store(i64(0), word(at, 3))

    def collect(t: ir.Value) -> None:
        code = b.load(word(record(t), 3), typ=I64)
        now = b.load(status, typ=I64)
        b.store(b.select(b.icmp_signed("==", now, i64(0)), code, now), status)

    b.store(i64(0), status)
    counted_loop(b, i64(0), tasks, i64(1), fill, "call.fill")
    _on_threads(b, tasks, record, trampoline, trampoline)
    counted_loop(b, i64(0), tasks, i64(1), collect, "call.collect")
    return b.trunc(b.load(status, typ=I64), I32)


_CALL_WORDS = 4  # entry, its two arguments, its status


def _call_thread(module: ir.Module) -> ir.Function:
    """``ptr sf.call.thread(ptr record)``: the record's entry called with its arguments,
    the status stored after them (a POSIX thread's start routine)."""
    existing = module.globals.get("sf.call.thread")
    if isinstance(existing, ir.Function):
        return existing
    thread = ir.Function(module, ir.FunctionType(_PTR, [_PTR]), "sf.call.thread")
    thread.linkage = "internal"
    b = ir.IRBuilder(thread.append_basic_block("entry"))
    (record,) = thread.args
    words = [b.load(b.gep(record, [i64(k)], source_etype=I64), typ=I64) for k in range(3)]
    callee = b.inttoptr(words[0], ir.PointerType(ir.FunctionType(I32, [_PTR, _PTR])))
    code = b.call(callee, [b.inttoptr(w, _PTR) for w in words[1:]])
    b.store(b.sext(code, I64), b.gep(record, [i64(3)], source_etype=I64))
    b.ret(ir.Constant(_PTR, None))
    return thread


def _on_threads(b: ir.IRBuilder, tasks: ir.Value, record: Callable[[ir.Value], ir.Value],
                thread: ir.Function, here: ir.Function) -> None:
    """Every task (`thread`, a start routine, given the task's record) run on the process's
    pool of worker threads and this thread (`codegen.lowered.worker_pool`); where the pool
    is busy, tasks 1 to `tasks` - 1 on a POSIX thread each, task 0 on this thread
    (`here`), then each thread joined, a task whose thread did not start run here. Where
    the platform has no threads, every task runs here, one after another."""
    if not platform.current().threads:
        counted_loop(b, i64(0), tasks, i64(1), lambda t: b.call(here, [record(t)]), "task.here")
        return
    module = b.module
    base = record(i64(0))
    stride = b.sub(b.ptrtoint(record(i64(1)), I64), b.ptrtoint(base, I64))
    pooled = b.call(pool_run(module, affinity_count), [thread, base, stride, tasks])
    with b.if_then(b.not_(pooled)):
        _start_and_join(b, tasks, record, thread, here)


def _start_and_join(b: ir.IRBuilder, tasks: ir.Value, record: Callable[[ir.Value], ir.Value],
                    thread: ir.Function, here: ir.Function) -> None:
    """`_on_threads` with threads of its own (the pool was busy or could not start)."""
    module = b.module
    create = declare(module, "pthread_create", I32, [_PTR, _PTR, _PTR, _PTR])
    join = declare(module, "pthread_join", I32, [I64, _PTR])
    threads = entry_alloca(b, I64, MAX_TASKS, "threads")
    started = entry_alloca(b, I8, MAX_TASKS, "started")

    def start(t: ir.Value) -> None:
        code = b.call(create, [b.gep(threads, [t], source_etype=I64), ir.Constant(_PTR, None),
                               thread, record(t)])
        b.store(b.zext(b.icmp_signed("==", code, ir.Constant(I32, 0)), I8),
                b.gep(started, [t], source_etype=I8))

    def finish(t: ir.Value) -> None:
        ran = b.icmp_unsigned("!=", b.load(b.gep(started, [t], source_etype=I8), typ=I8),
                              ir.Constant(I8, 0))
        with b.if_else(ran) as (threaded, unstarted):
            with threaded:
                b.call(join, [b.load(b.gep(threads, [t], source_etype=I64), typ=I64),
                              ir.Constant(_PTR, None)])
            with unstarted:
                b.call(here, [record(t)])

    counted_loop(b, i64(1), tasks, i64(1), start, "task.start")
    b.call(here, [record(i64(0))])
    counted_loop(b, i64(1), tasks, i64(1), finish, "task.join")
