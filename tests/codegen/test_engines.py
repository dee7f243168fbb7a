"""Engines as generations: machine code is freed with the last caller of its engine, code
still callable never is (a concrete function its trace cache dropped keeps running), code
running outside its calls is kept for good, and a link call's modules share one engine."""

from __future__ import annotations

import gc
import warnings
import weakref

import numpy as np
from llvmlite import ir

import stageflow as sf
from stageflow.codegen import CPUTarget
from stageflow.codegen.targets import cache, cpu
from stageflow.codegen.targets.cpu import ModuleJob, process_jit
from stageflow.ir import parse_module
from stageflow.staging import function as staged_function


def _scale_kernel(scale: float):
    """A one-kernel function multiplying by `scale`: its module is new for a new scale."""
    return parse_module(f"""func.func @scale(%x: tensor<4xf32>) -> tensor<4xf32> {{
      %c = sf.constant dense<{scale!r}> : tensor<4xf32>
      %0 = sf.multiply %x, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      func.return %0 : tensor<4xf32>
    }}""").ops.first


def _linked(scale: float):
    """The compiled kernel, the Linked it was made from and its module's cache key."""
    prepared = CPUTarget().prepare_many([_scale_kernel(scale)])
    linked = process_jit().link(prepared.jobs, prepared.symbols)
    return prepared.make(linked)[0], linked, prepared.jobs[0].entry


X = np.arange(4, dtype=np.float32)


def test_an_engine_no_longer_current_is_freed_with_its_last_caller(monkeypatch) -> None:
    monkeypatch.setattr(cpu, "GENERATION_MODULES", 1)
    kernel, linked, entry = _linked(1.0625)
    engine = weakref.ref(linked.engine)
    del linked
    other, _, _ = _linked(1.1875)  # a new generation: the first engine was full
    assert process_jit().current is not engine()
    np.testing.assert_array_equal(kernel(X)[0], X * 1.0625)
    gc.collect()
    assert engine() is not None and process_jit().is_linked(entry)  # the kernel holds it
    del kernel
    gc.collect()
    assert engine() is None
    assert not process_jit().is_linked(entry)
    np.testing.assert_array_equal(other(X)[0], X * 1.1875)


def test_a_link_call_never_spans_engines(monkeypatch) -> None:
    """A module linked into an older engine is linked again beside new ones (a program
    finds the kernels it calls by name in its own engine)."""
    monkeypatch.setattr(cpu, "GENERATION_MODULES", 1)
    first, linked, entry = _linked(1.3125)
    old = linked.engine
    same = CPUTarget().prepare_many([_scale_kernel(1.3125)])
    new = CPUTarget().prepare_many([_scale_kernel(1.4375)])
    assert same.jobs[0].entry == entry
    both = process_jit().link(same.jobs + new.jobs, same.symbols + new.symbols)
    assert both.engine is not old
    assert {entry, new.jobs[0].entry} <= both.engine.loaded
    again, other = same.make(both)[0], new.make(both)[0]
    np.testing.assert_array_equal(again(X)[0], X * 1.3125)
    np.testing.assert_array_equal(other(X)[0], X * 1.4375)
    np.testing.assert_array_equal(first(X)[0], X * 1.3125)
    assert process_jit().link(same.jobs, []).engine in (old, both.engine)  # not again


def test_a_held_concrete_function_runs_after_its_trace_is_evicted(monkeypatch) -> None:
    monkeypatch.setattr(cpu, "GENERATION_MODULES", 2)
    monkeypatch.setattr(staged_function, "CACHE_SIZE", 4)

    @sf.function
    def f(x, k):
        return sf.tanh(x * (float(k) + 0.03125) + 1.0)

    x = np.linspace(-1.0, 1.0, 8, dtype=np.float32)
    held = f.get_concrete_function(sf.constant(x), -1)
    np.testing.assert_allclose(held(x).numpy(), np.tanh(x * -0.96875 + 1.0), rtol=1e-6)
    made: list[weakref.ref] = []
    new_engine = cpu.JIT._new_engine

    def counted(jit: cpu.JIT) -> cpu.Engine:
        engine = new_engine(jit)
        made.append(weakref.ref(engine))
        return engine

    monkeypatch.setattr(cpu.JIT, "_new_engine", counted)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sf.RetracingWarning)
        for k in range(40):
            np.testing.assert_allclose(f(x, k).numpy(), np.tanh(x * (k + 0.03125) + 1.0),
                                       rtol=1e-6)
    gc.collect()
    assert len(made) >= 20  # generations came and went
    alive = [ref for ref in made if ref() is not None]
    assert len(alive) <= staged_function.CACHE_SIZE + 1  # the cached functions', the current
    np.testing.assert_allclose(held(x).numpy(), np.tanh(x * -0.96875 + 1.0), rtol=1e-6)


def test_code_running_outside_its_calls_is_never_freed(monkeypatch) -> None:
    """A module that may leave detached threads or fork handlers behind (the op pools)
    goes to an engine that is never freed."""
    monkeypatch.setattr(cpu, "GENERATION_MODULES", 1)
    module = ir.Module(name="detaches")
    module.triple = process_jit().triple
    i32, i64 = ir.IntType(32), ir.IntType(64)
    detach = ir.Function(module, ir.FunctionType(i32, [i64]), "pthread_detach")
    symbol = f"detaches.{cache.PLACEHOLDER}"
    entry = ir.Function(module, ir.FunctionType(i32, [i64]), symbol)
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    b.ret(b.call(detach, [entry.args[0]]))
    job = ModuleJob.of(module, 0, 3)
    engine = weakref.ref(process_jit().link([job], [job.name(symbol)]).engine)
    _linked(1.5625)  # a new generation
    gc.collect()
    assert engine() is not None and engine() is not process_jit().current
