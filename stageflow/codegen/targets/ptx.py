"""The PTX target: the CPU's kernels as CUDA ``.entry`` functions, through LLVM's NVPTX.

Kernel ABI (PTX parameters, in order)::

    .entry NAME(.param .u64 arg0, ..., .param .u64 dim0, ...)
        arg*: global-memory pointers to the inputs then the outputs (C-contiguous, outputs
        not overlapping anything); dim*: every argument's sizes, argument after argument,
        as in the CPU ABI. Launch any 1-D grid: each thread takes the elements
        ``blockIdx.x * blockDim.x + threadIdx.x`` plus multiples of the grid size (a
        grid-stride loop). If the dims are inconsistent every thread returns at once,
        having touched nothing (the host-side wrapper checks them first anyway).

The element computation, shape checks and loop structure are the CPU's (`kernels.loops`,
`kernels.rules`); only the driver differs: the flat loop strides over the grid, and the
broadcasting loop turns the flat index into a multi-index with divisions. Nothing goes
through libm: the NVPTX backend has no libm and LLVM *aborts the process* on an intrinsic
it cannot select (``llvm.exp``, ``llvm.sin``, ``llvm.tanh``...), so every transcendental
is `llvm.mathlib`'s expansion, and the optimised module is checked against an allow-list of
intrinsics before any machine code is generated. float ``mod``/``floordiv`` use ``frem``,
which NVPTX expands as ``x - y * trunc(x / y)``: exact only while the quotient is small.
"""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import llvmlite.binding as llvm
from llvmlite import ir
from xdsl.dialects.func import FuncOp

from stageflow.codegen.kernels.analysis import Kernel, analyse
from stageflow.codegen.kernels.layout import Address, Body, Layout, name_dims
from stageflow.codegen.kernels.loops import Driver, KernelBuilder
from stageflow.codegen.llvm.emitter import I32, I64
from stageflow.codegen.llvm.loops import counted_loop, fold_add, fold_mul

TRIPLE = "nvptx64-nvidia-cuda"
GLOBAL = 1  # NVPTX's global address space
ARCHES = ("sm_80", "sm_90")
# Intrinsics the NVPTX backend lowers to instructions (prefixes of declared names).
_LOWERABLE = ("llvm.nvvm.read.ptx.sreg.", "llvm.fma.", "llvm.sqrt.", "llvm.floor.",
              "llvm.ceil.", "llvm.roundeven.", "llvm.trunc.", "llvm.fabs.", "llvm.copysign.",
              "llvm.fptosi.sat.", "llvm.fptoui.sat.", "llvm.abs.", "llvm.smax.", "llvm.smin.",
              "llvm.umax.", "llvm.umin.", "llvm.maximum.", "llvm.minimum.", "llvm.maxnum.",
              "llvm.minnum.", "llvm.scmp.", "llvm.ucmp.", "llvm.assume", "llvm.lifetime.",
              "llvm.experimental.noalias.scope.decl", "llvm.is.fpclass.")

_INIT_LOCK = threading.Lock()
_initialised = False


def _initialise() -> None:
    global _initialised
    with _INIT_LOCK:
        if not _initialised:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _initialised = True


def entry_name(kernel: Kernel) -> str:
    """The kernel's ``.entry`` symbol: its name with every character PTX identifiers do
    not allow replaced by ``_`` (a function named ``<lambda>`` gives ``_lambda__kernel0``;
    NVPTX aborts the process on the name as it is)."""
    return re.sub(r"[^A-Za-z0-9_$]", "_", kernel.name)


def ptxas_path() -> Path | None:
    """ptxas from the ``nvidia-cuda-nvcc`` wheel (``nvidia/cu13/bin``), else from PATH."""
    try:
        import nvidia
    except ImportError:
        nvidia = None
    for root in getattr(nvidia, "__path__", []):
        for candidate in sorted(Path(root).glob("cu*/bin/ptxas"), reverse=True):
            if candidate.is_file():
                return candidate
    found = shutil.which("ptxas")
    return Path(found) if found else None


class GridDriver(Driver):
    """Grid-stride loops: thread t of T handles elements t, t + T, t + 2T, ..."""

    def reducing(self, b: ir.IRBuilder, layout: Layout, body: Body, address: Address) -> None:
        raise NotImplementedError(f"@{layout.kernel.name} ends in reductions; PTX kernels are "
                                  "elementwise (fuse with reductions=false for this target)")

    def _special(self, b: ir.IRBuilder, register: str) -> ir.Value:
        name = f"llvm.nvvm.read.ptx.sreg.{register}"
        function = b.module.globals.get(name)
        if function is None:
            function = ir.Function(b.module, ir.FunctionType(I32, []), name)
        return b.zext(b.call(function, []), I64)

    def grid(self, b: ir.IRBuilder) -> tuple[ir.Value, ir.Value]:
        """This thread's first element and the grid's stride."""
        block, threads = self._special(b, "ctaid.x"), self._special(b, "ntid.x")
        start = b.add(b.mul(block, threads), self._special(b, "tid.x"))
        return start, b.mul(threads, self._special(b, "nctaid.x"))

    def flat(self, b: ir.IRBuilder, layout: Layout, body: Body) -> None:
        start, step = self.grid(b)
        strides = layout.flat_strides()
        counted_loop(b, start, layout.total, step,
                     lambda i: body([i if s else ir.Constant(I64, 0) for s in strides]), "i")

    def broadcast(self, b: ir.IRBuilder, layout: Layout, body: Body) -> None:
        start, step = self.grid(b)
        strides = [layout.strides(index) for index in range(len(layout.kernel.args))]

        def element(flat: ir.Value) -> None:
            offsets = [ir.Constant(I64, 0)] * len(strides)
            rest = flat
            for axis in reversed(range(layout.kernel.rank)):
                size = layout.space[axis]
                index = b.urem(rest, size)
                rest = b.udiv(rest, size)
                offsets = [fold_add(b, o, fold_mul(b, index, s[axis]))
                           for o, s in zip(offsets, strides, strict=True)]
            body(offsets)

        counted_loop(b, start, layout.total, step, element, "i")


# Builds ``void symbol(...)`` into a module: (module, symbol, driver, address space) -> it.
EntryBuilder = Callable[[ir.Module, str, GridDriver, int], ir.Function]


def entry_function(module: ir.Module, kernel: Kernel, symbol: str, driver: GridDriver,
                   address_space: int) -> ir.Function:
    """``void symbol(arg..., dim...)``: check the dims, then run this thread's elements
    (see the module docstring). The PTX ``.entry`` and the emulated launch's kernel."""
    builder = KernelBuilder(kernel, module, symbol, frozenset(), address_space)
    check, run = builder.build_check(), builder.build_run(driver)
    pointer = ir.PointerType(addrspace=address_space)
    num_dims = sum(arg.ndim for arg in kernel.args)
    entry = ir.Function(module, ir.FunctionType(ir.VoidType(), [pointer] * len(kernel.args)
                                                + [I64] * num_dims), symbol)
    for index, arg in enumerate(entry.args[:len(kernel.args)]):
        arg.name = f"arg{index}"
    name_dims(kernel, entry.args[len(kernel.args):])
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    code = b.call(check, list(entry.args[len(kernel.args):]))
    go, stop = entry.append_basic_block("run"), entry.append_basic_block("exit")
    b.cbranch(b.icmp_signed("==", code, ir.Constant(I32, 0)), go, stop)
    b.position_at_end(go)
    b.call(run, list(entry.args))
    b.ret_void()
    b.position_at_end(stop)
    b.ret_void()
    return entry


@dataclass(frozen=True)
class PTXTarget:
    """Emits kernels as PTX for `arch` (``sm_80`` or ``sm_90``)."""

    arch: str = "sm_80"
    opt: int = 3
    name: str = field(default="ptx", init=False)

    def __post_init__(self) -> None:
        if self.arch not in ARCHES:
            raise ValueError(f"arch must be one of {', '.join(ARCHES)}, got {self.arch!r}")

    def module(self, kernel: Kernel | FuncOp) -> ir.Module:
        """The llvmlite module with the ``.entry`` function (unoptimised)."""
        kernel = kernel if isinstance(kernel, Kernel) else analyse(kernel)
        return self.entry_module(entry_name(kernel), lambda module, symbol, driver, space:
                                 entry_function(module, kernel, symbol, driver, space))

    def entry_module(self, name: str, build: EntryBuilder) -> ir.Module:
        """The llvmlite module with the ``.entry`` that `build` makes, named `name`."""
        module = ir.Module(name=name)
        module.triple = TRIPLE
        entry = build(module, name, GridDriver(), GLOBAL)
        entry.calling_convention = "ptx_kernel"
        # Older NVVM readers find kernels by this annotation; LLVM 22 by the calling convention.
        annotation = module.add_metadata([entry, ir.MetaDataString(module, "kernel"),
                                          ir.Constant(I32, 1)])
        module.add_named_metadata("nvvm.annotations", annotation)
        return module

    def emit(self, kernel: Kernel | FuncOp) -> str:
        """The kernel's LLVM IR for NVPTX, before optimisation."""
        return str(self.module(kernel))

    def _machine(self) -> llvm.TargetMachine:
        _initialise()
        return llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=self.arch,
                                                                     opt=self.opt)

    def compile(self, kernel: Kernel | FuncOp) -> str:
        """The kernel as PTX assembly text."""
        return self.compile_many([kernel])

    def compile_many(self, kernels: list[Kernel | FuncOp]) -> str:
        """Several kernels as one PTX module (one ``.entry`` each)."""
        return self.assemble([self.emit(kernel) for kernel in kernels])

    def compile_entry(self, name: str, build: EntryBuilder) -> str:
        """The ``.entry`` `build` makes as PTX assembly text."""
        return self.assemble([str(self.entry_module(name, build))])

    def assemble(self, texts: list[str]) -> str:
        """LLVM modules for NVPTX (text), linked, optimised and emitted as one PTX module."""
        machine = self._machine()
        module = llvm.parse_assembly(texts[0])
        for text in texts[1:]:
            module.link_in(llvm.parse_assembly(text))
        module.data_layout = str(machine.target_data)
        module.verify()
        options = llvm.create_pipeline_tuning_options(speed_level=self.opt)
        builder = llvm.create_pass_builder(machine, options)
        builder.getModulePassManager().run(module, builder)
        for function in module.functions:
            if function.is_declaration and not function.name.startswith(_LOWERABLE):
                raise NotImplementedError(
                    f"PTX: {function.name} cannot be lowered by the NVPTX backend")
        return machine.emit_assembly(module)
