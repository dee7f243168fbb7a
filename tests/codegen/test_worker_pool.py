"""The worker pool's choice between splitting a job and running it on the caller alone
(`stageflow.codegen.lowered.worker_pool`): a job runs on the caller's thread while the
cores are crowded or a back-off is under way, a job a slowed worker lost starts or doubles
the back-off, and one that paid halves it.

The jobs here are tasks that record the thread they ran on and sleep for as long as their
record asks (one time for the caller's thread, another for a worker's), so that a slowed
worker is a worker whose task sleeps. The pool's state is the process's (`_state`); each
test sets the words it depends on."""

from __future__ import annotations

import ctypes
import os
import resource

import pytest
from llvmlite import binding as llvm
from llvmlite import ir

from stageflow.codegen.llvm.emitter import I32, I64
from stageflow.codegen.llvm.functions import declare
from stageflow.codegen.llvm.loops import i64
from stageflow.codegen.lowered import worker_pool
from stageflow.codegen.lowered.tasks import affinity_count

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                                reason="one CPU: the pool has no worker")

_PTR = ir.PointerType()
_LIBC = ctypes.CDLL(None)
_LIBC.pthread_self.restype = ctypes.c_uint64


class Record(ctypes.Structure):
    """A task's record: the thread it ran on, and how long it sleeps on the caller's
    thread and on a worker's (microseconds)."""

    _fields_ = [("thread", ctypes.c_uint64), ("caller_us", ctypes.c_int64),
                ("worker_us", ctypes.c_int64), ("caller", ctypes.c_uint64)]


def _build() -> ctypes._CFuncPtr:
    """``i1 run(ptr records, i64 count)``: the records' tasks as one job of the pool."""
    module = ir.Module("pool_test")
    task = ir.Function(module, ir.FunctionType(_PTR, [_PTR]), "task")
    b = ir.IRBuilder(task.append_basic_block("entry"))
    (record,) = task.args

    def field(k: int) -> ir.Value:
        return b.gep(record, [i64(k)], source_etype=I64)

    me = b.call(declare(module, "pthread_self", I64, []), [])
    b.store(me, field(0))
    here = b.icmp_unsigned("==", me, b.load(field(3), typ=I64))
    sleep = b.select(here, b.load(field(1), typ=I64), b.load(field(2), typ=I64))
    b.call(declare(module, "usleep", I32, [I32]), [b.trunc(sleep, I32)])
    b.ret(ir.Constant(_PTR, None))
    run = ir.Function(module, ir.FunctionType(ir.IntType(1), [_PTR, I64]), "run")
    b = ir.IRBuilder(run.append_basic_block("entry"))
    pool = worker_pool.pool_run(module, affinity_count)
    b.ret(b.call(pool, [task, run.args[0], i64(ctypes.sizeof(Record)), run.args[1]]))
    machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(module)), machine)
    engine.finalize_object()
    _build.engine = engine  # kept alive with the code
    return ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_int64)(
        engine.get_function_address("run"))


_run = _build()


def word(name: str) -> int:
    first = len(worker_pool._SYNC) * worker_pool._SYNC_WORDS
    return worker_pool._state[first + worker_pool._WORDS.index(name)]


def set_words(**values: int) -> None:
    first = len(worker_pool._SYNC) * worker_pool._SYNC_WORDS
    for name, value in values.items():
        worker_pool._state[first + worker_pool._WORDS.index(name)] = value


def job(count: int, caller_us: int, worker_us: int) -> list[int]:
    """Run one job of `count` tasks; the threads they ran on."""
    records = (Record * count)()
    for record in records:
        record.caller_us, record.worker_us = caller_us, worker_us
        record.caller = _LIBC.pthread_self()
    assert _run(ctypes.addressof(records), count)
    return [record.thread for record in records]


def calm() -> None:
    """No back-off, and the crowding signal forgotten: the next job is split."""
    set_words(backoff=0, alone_until=0, caller=0, switched_at=0, switched_before=0,
              checked_at=0)


def shortest() -> int:
    x86 = llvm.get_process_triple().split("-")[0] in ("x86_64", "i386", "i686")
    return worker_pool.BACKOFF_CYCLES if x86 else worker_pool.BACKOFF_TICKS


def test_a_crowded_caller_runs_the_job_alone():
    """Where the caller was switched out for another thread twice lately (its involuntary
    context switches, as the kernel counts them for the thread, asked at most once in a
    while), every task runs on the caller's thread and no worker is woken; the count
    compared with is the thread's own.
    One switch is not enough: a kernel thread takes the core once in a while."""
    job(2, 0, 0)  # the pool started, this thread the caller on record
    for _ in range(3):
        calm()
        set_words(caller=_LIBC.pthread_self(), switches=-1)
        job(2, 0, 0)
        assert word("switched_before") == 0  # one switch on record
        set_words(switches=-1, checked_at=0)  # asked again at once
        generation, jobs = word("generation"), word("jobs")
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
        threads = job(4, 0, 0)
        after = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
        assert before <= word("switches") <= after
        if word("generation") == generation:  # else the two were too far apart to count
            break
    else:
        pytest.fail("two switches a moment apart did not make the next job run alone")
    assert threads == [_LIBC.pthread_self()] * 4
    assert word("jobs") == jobs + 1


def test_a_job_a_slowed_worker_lost_doubles_the_back_off_and_a_paying_one_halves_it():
    """A worker's task sleeping 60 ms against the caller's 5 ms loses the job (running both
    here would have taken 10 ms): the back-off doubles. While it lasts every task runs on
    the caller; a job whose tasks take as long on either thread halves it."""
    initial = 8 * shortest()
    for _ in range(5):
        calm()
        set_words(backoff=initial)
        if any(t != _LIBC.pthread_self() for t in job(2, 5_000, 60_000)):
            break  # a worker ran a task (else this thread claimed both before one woke)
    else:
        pytest.fail("no worker claimed a task in five jobs")
    assert word("backoff") == 2 * initial
    set_words(alone_until=(1 << 63) - 1)
    generation = word("generation")
    assert job(3, 0, 0) == [_LIBC.pthread_self()] * 3
    assert word("generation") == generation
    calm()
    set_words(backoff=initial)
    job(2, 20_000, 20_000)
    assert word("backoff") == initial // 2
    calm()
    set_words(backoff=shortest())
    job(2, 20_000, 20_000)
    assert word("backoff") == 0  # under the shortest back-off: none
