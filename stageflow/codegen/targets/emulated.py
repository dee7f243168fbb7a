"""Emulated GPU launches: the PTX kernels' LLVM IR, compiled for this CPU, run over a grid.

No GPU is needed to test what the PTX target generates. `EmulatedLaunch` builds each kernel
exactly as `PTXTarget` does (the same `entry_function`, the same grid-stride driver, the
same math expansions without libm), with two differences: pointers are host pointers, and
the four special registers the driver reads (``%tid.x``, ``%ntid.x``, ``%ctaid.x``,
``%nctaid.x``) are globals of the module that a launch function sets while it loops over
every block and every thread of the grid, calling the kernel once per thread. The threads
of these kernels never communicate (they are elementwise; reductions stay ops of their own
on this target), so running them one after another in any order computes what the GPU
computes, and wrong indexing, a missed bounds check or a wrong dtype shows as a wrong
number here. One launch of a kernel at a time: the registers are the module's.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir
from xdsl.dialects.func import FuncOp

from stageflow.codegen.kernels.analysis import Kernel, analyse
from stageflow.codegen.llvm.emitter import I32, I64
from stageflow.codegen.llvm.loops import counted_loop
from stageflow.codegen.targets import cache
from stageflow.codegen.targets.cpu import Linked, ModuleJob, process_jit
from stageflow.codegen.targets.ptx import EntryBuilder, GridDriver, entry_function

REGISTERS = ("tid.x", "ntid.x", "ctaid.x", "nctaid.x")


class RegisterDriver(GridDriver):
    """The grid-stride driver reading its special registers from the launch's globals."""

    def __init__(self, registers: dict[str, ir.GlobalVariable]) -> None:
        self.registers = registers

    def _special(self, b: ir.IRBuilder, register: str) -> ir.Value:
        return b.zext(b.load(self.registers[register]), I64)


class EmulatedKernel:
    """A kernel launched on the CPU over a grid of the caller's choice (`launch`)."""

    def __init__(self, kernel: Kernel, linked: Linked, symbol: str, llvm_ir: str) -> None:
        self.kernel = kernel
        self.llvm_ir = llvm_ir
        count = len(kernel.args)
        num_dims = sum(arg.ndim for arg in kernel.args)
        self._call = linked.function(symbol, ctypes.CFUNCTYPE(
            None, *[ctypes.c_void_p] * count, *[ctypes.c_int64] * num_dims, ctypes.c_int32,
            ctypes.c_int32))

    def launch(self, inputs: list[np.ndarray], outputs: list[np.ndarray], grid: int,
               block: int) -> None:
        """Launch `grid` blocks of `block` threads on C-contiguous arrays, the outputs
        written in place (the caller allocates them, as a GPU runtime would)."""
        arrays = [np.asarray(a, order="C") for a in inputs] + list(outputs)
        if len(arrays) != len(self.kernel.args):
            raise TypeError(f"@{self.kernel.name} takes {len(self.kernel.args)} arrays, got "
                            f"{len(arrays)}")
        for out in outputs:
            if not (out.flags.c_contiguous and out.flags.writeable):
                raise ValueError("outputs must be writable C-contiguous arrays")
        if grid < 1 or block < 1:
            raise ValueError(f"a grid needs at least one block of one thread, got "
                             f"grid={grid}, block={block}")
        dims = [size for array, arg in zip(arrays, self.kernel.args, strict=True)
                for size in array.shape[:arg.ndim]]
        self._call(*[a.ctypes.data for a in arrays], *dims, grid, block)


@dataclass(frozen=True)
class EmulatedLaunch:
    """Compiles kernels as `PTXTarget` would, for this CPU, launched over emulated grids."""

    opt: int = 2

    def module(self, kernel: Kernel | FuncOp, symbol: str) -> ir.Module:
        """The llvmlite module: the kernel (internal) and ``symbol``, its grid launch."""
        kernel = kernel if isinstance(kernel, Kernel) else analyse(kernel)
        return self.entry_module(symbol, lambda module, name, driver, space:
                                 entry_function(module, kernel, name, driver, space))

    def entry_module(self, symbol: str, build: EntryBuilder) -> ir.Module:
        """The llvmlite module: the thread function `build` makes (internal) and
        ``symbol``, its launch over a grid (its arguments, then the grid and the block)."""
        module = ir.Module(name=symbol)
        module.triple = process_jit().triple
        registers = {}
        for register in REGISTERS:
            variable = ir.GlobalVariable(module, I32, f"{symbol}.{register}")
            variable.linkage = "internal"
            variable.initializer = ir.Constant(I32, 0)
            registers[register] = variable
        entry = build(module, f"{symbol}.thread", RegisterDriver(registers), 0)
        entry.linkage = "internal"
        launch = ir.Function(module, ir.FunctionType(
            ir.VoidType(), [*entry.function_type.args, I32, I32]), symbol)
        *args, grid, block = launch.args
        for arg, named in zip(args, entry.args, strict=True):
            arg.name = named.name
        grid.name, block.name = "grid", "block"
        b = ir.IRBuilder(launch.append_basic_block("entry"))
        b.store(grid, registers["nctaid.x"])
        b.store(block, registers["ntid.x"])
        one = ir.Constant(I64, 1)

        def blocks(index: ir.Value) -> None:
            b.store(b.trunc(index, I32), registers["ctaid.x"])
            counted_loop(b, ir.Constant(I64, 0), b.zext(block, I64), one, threads, "tid")

        def threads(index: ir.Value) -> None:
            b.store(b.trunc(index, I32), registers["tid.x"])
            b.call(entry, args)

        counted_loop(b, ir.Constant(I64, 0), b.zext(grid, I64), one, blocks, "ctaid")
        b.ret_void()
        return module

    def compile(self, kernel: Kernel | FuncOp) -> EmulatedKernel:
        """JIT-compile the kernel's emulated launch."""
        kernel = kernel if isinstance(kernel, Kernel) else analyse(kernel)
        symbol = f"{kernel.name}.launch.{cache.PLACEHOLDER}"
        job = ModuleJob.of(self.module(kernel, symbol), self.opt, 3)
        name = job.name(symbol)
        return EmulatedKernel(kernel, process_jit().link([job], [name]), name, job.text)

    def compile_entry(self, name: str, build: EntryBuilder,
                      arguments: list[Any]) -> Callable[..., None]:
        """JIT-compile the emulated launch of the entry `build` makes, whose arguments have
        the ctypes types `arguments`; ``launch(*args, grid, block)``."""
        symbol = f"{name}.launch.{cache.PLACEHOLDER}"
        job = ModuleJob.of(self.entry_module(symbol, build), self.opt, 3)
        linked = process_jit().link([job], [job.name(symbol)])
        return linked.function(job.name(symbol), ctypes.CFUNCTYPE(
            None, *arguments, ctypes.c_int32, ctypes.c_int32))
