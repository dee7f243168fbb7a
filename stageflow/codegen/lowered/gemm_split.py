"""A gemm split over the cores, as tasks of the process's worker pool.

OpenBLAS threads a large gemm over a pool of its own whose threads spin while they wait
for each other: beside other busy processes (a data loader, a second job) a descheduled
thread stalls the rest, and a step of milliseconds took tens of them. Our worker pool
(`worker_pool`) yields the core while it watches and sleeps soon after. So compiled code
runs each gemm single-threaded (OpenBLAS's, in `matmul.single_threaded_blas`, or our own,
`own_blas`) on parts of C, one task per core: blocks of rows, or of columns where C is at
least as wide as it is tall (each task then packs only its part of B, where row blocks
would each pack all of it). A
product is split once it has `SPLIT_MACS` multiply-adds and each part would be at least
`min_part` wide.

A task is ``i32 NAME(ptr record, ptr)`` (`tasks.run_calls`'s entry): the record holds the
first and last row or column of its part and the product's words (sizes, pointers and
scalars as i64), which the task's body reads back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from llvmlite import ir

from stageflow.codegen.llvm.emitter import I32, I64
from stageflow.codegen.llvm.functions import entry_alloca
from stageflow.codegen.llvm.loops import i64
from stageflow.codegen.lowered.tasks import MAX_TASKS, cpu_count, run_calls
from stageflow.codegen.targets import platform
from stageflow.core.config_threading import SPLIT_MACS

_PTR = ir.PointerType()

# A task's body: the builder, its part's first and last index, the product's words (i64).
PartBody = Callable[[ir.IRBuilder, ir.Value, ir.Value, list[ir.Value]], None]


def split_task(module: ir.Module, symbol: str, words: int, body: PartBody) -> ir.Function:
    """``i32 SYMBOL(ptr record, ptr)``, made once per module: `body` on the record's part
    and its `words` words."""
    existing = module.globals.get(symbol)
    if isinstance(existing, ir.Function):
        return existing
    function = ir.Function(module, ir.FunctionType(I32, [_PTR, _PTR]), symbol)
    function.linkage = "internal"
    b = ir.IRBuilder(function.append_basic_block("entry"))
    record = function.args[0]
    first, last, *values = (b.load(b.gep(record, [i64(index)], source_etype=I64), typ=I64)
                            for index in range(2 + words))
    body(b, first, last, values)
    b.ret(ir.Constant(I32, 0))
    return function


def as_word(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """`value` as a record's i64 word: pointers as integers, floats as their bits."""
    if value.type == _PTR:
        return b.ptrtoint(value, I64)
    if isinstance(value.type, ir.FloatType):
        return b.bitcast(b.fpext(value, ir.DoubleType()), I64)
    if isinstance(value.type, ir.DoubleType):
        return b.bitcast(value, I64)
    return b.sext(value, I64) if value.type != I64 else value


def run_split(b: ir.IRBuilder, task: ir.Function, extent: ir.Value, macs: ir.Value,
              words: Sequence[ir.Value], min_part: int,
              may_split: ir.Value | None = None) -> None:
    """`task` over [0, `extent`) (C's rows or columns): split into one task per core (at
    most `MAX_TASKS`, each of `min_part` or more) where the platform has threads, the
    product has `SPLIT_MACS` multiply-adds and `may_split` holds; else one call on this
    thread."""
    records = entry_alloca(b, I64, MAX_TASKS * (2 + len(words)), "gemm.parts")
    stored = [as_word(b, w) for w in words]

    def fill(t: ir.Value, tasks: ir.Value) -> ir.Value:
        record = b.gep(records, [b.mul(t, i64(2 + len(words)))], source_etype=I64)
        bounds = [b.sdiv(b.mul(extent, u), tasks) for u in (t, b.add(t, i64(1)))]
        for index, word in enumerate([*bounds, *stored]):
            b.store(word, b.gep(record, [i64(index)], source_etype=I64))
        return record

    def whole() -> None:
        b.call(task, [fill(i64(0), i64(1)), ir.Constant(_PTR, None)])

    if not platform.current().threads:
        whole()
        return
    cores = cpu_count(b)
    most = b.sdiv(extent, i64(min_part))
    tasks = b.select(b.icmp_signed("<", cores, most), cores, most)
    tasks = b.select(b.icmp_signed(">", tasks, i64(MAX_TASKS)), i64(MAX_TASKS), tasks)
    split = b.and_(b.icmp_signed(">=", macs, i64(SPLIT_MACS)), b.icmp_signed(">", tasks, i64(1)))
    if may_split is not None:
        split = b.and_(split, may_split)
    with b.if_else(split) as (several, one):
        with one:
            whole()
        with several:
            run_calls(b, task, tasks, lambda t: (fill(t, tasks), ir.Constant(_PTR, None)))
