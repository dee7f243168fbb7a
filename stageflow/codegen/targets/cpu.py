"""The CPU target: kernels to LLVM IR, optimised and JIT-compiled for this machine.

Kernel ABI (both entry points are in the module `CPUTarget.emit` returns)::

    i32 NAME(ptr args, ptr dims)
        args: the data pointers of the inputs then the outputs (C-contiguous, aligned,
              outputs not overlapping anything); dims: every argument's sizes (i64),
              argument after argument. Returns 0 after computing the outputs, or 1 + the
              index of the first argument whose dims do not fit its type or broadcast to
              the iteration space; then nothing was read or written.

    i32 NAME.py(PyArrayObject* arg0, ...)
        The same for NumPy arrays passed as ``ctypes.py_object``: data pointer, rank, dims
        and flags are read from NumPy's array struct (its ABI: data at +16, nd at +24,
        dimensions at +32, flags at +64; checked against this NumPy at start-up). Returns
        1 + the argument index also for a wrong rank, a non-contiguous or misaligned array,
        or a read-only output. This is the fast path: no per-argument ctypes conversion.

Compilation: the host CPU's name and features, the new pass manager at O2 with loop and
SLP vectorisation (less for small and tiny kernels, see `levels`; O3 took half as long again
to compile a ResNet step's kernels and ran them no faster), and
every kernel module added as object code to an MCJIT engine (`Engine`). Symbols are
suffixed with the module's cache key (a hash of its IR text and the target), so kernels of
the same name never clash in an engine and a module compiled once is reused: in this
process, and in later ones through the on-disk cache (`stageflow.codegen.targets.cache`).
libm is loaded into LLVM's symbol search (for ``sinf``, ``powf``, ``fmodf``...): MCJIT
aborts the process on an unresolved symbol.

Engines are generations, so that code nobody can call any more is freed: MCJIT frees an
object's memory only with its engine. Modules are linked into the current engine until it
holds `GENERATION_MODULES`, then into a new one; every callable made from linked code holds
its engine (`Linked.function`), and an engine no longer current is freed with its last
caller. One link call's modules always share an engine (a program calls the kernels linked
with it, resolved by name inside the engine); a module already linked into a live engine
is reused where the whole call's modules are there, else linked again. Each engine owns a
target machine of its own (llvmlite's engine takes ownership of its machine: sharing one
crashed the process). A retrace of a small function links two modules: it grew the process
by ~29 KB per retrace with one engine for the process, ~9 KB with generations (what is
left is LLVM's: each optimisation run leaks llvmlite's pass instrumentation callbacks).
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import ctypes.util
import re
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

import llvmlite.binding as llvm
from llvmlite import ir
from xdsl.dialects.func import FuncOp

from stageflow.codegen.kernels.analysis import Kernel, analyse
from stageflow.codegen.kernels.loops import Driver, KernelBuilder
from stageflow.codegen.kernels.wrapper import CompiledKernel
from stageflow.codegen.llvm.emitter import I32, I64
from stageflow.codegen.llvm.loops import return_unless
from stageflow.codegen.llvm.numpy_abi import array_data, array_dims, array_layout_matches, array_ok
from stageflow.codegen.targets import cache
from stageflow.codegen.targets.compile_server import CompileServer, can_serve
from stageflow.codegen.targets.llvm_pipeline import MachineSpec, Pipeline
from stageflow.core import config

# sin, cos and pow go to libm by default: its range reduction (sin, cos of huge arguments)
# and special cases (pow) are exact, where the expansions are accurate for moderate
# arguments only; the price is a scalar call per element. Everything else is expanded, and
# so is a float32 pow (`mathlib.pow_`: in float64, exact enough for float32).
DEFAULT_LIBM = frozenset({"sin", "cos", "pow"})

_LIBM_SYMBOLS = ("sinf", "sin", "cosf", "cos", "powf", "pow", "fmodf", "fmod", "expm1",
                 "log1p")


T = TypeVar("T")

# Modules linked into one engine before the next one is made: a new engine costs about a
# millisecond (its target machine, its first finalisation, its disposal), a module a few
# kilobytes of memory kept until the last caller of anything in its generation is gone.
GENERATION_MODULES = 64

SMALL_KERNEL_ELEMENTS = 4096
TINY_KERNEL_ELEMENTS = 1024


def levels(size: float, opt: int) -> tuple[int, int]:
    """LLVM's optimisation and code generation levels for code over `size` elements (its
    static size, infinity if unknown), `opt` for large code. Small code cannot pay back
    vectorisation (O1 from `SMALL_KERNEL_ELEMENTS` down), tiny code not even LLVM's loop
    optimisations: the cleanup pipeline (`_JIT.optimize` at 0) optimises an MLP training
    step's tiny kernels an order of magnitude faster than O1, and HMC over 16 chains
    samples as fast. Code generation stays at O3: O0 (fast instruction selection and
    register allocation) emits several times faster, but its code runs slower, a kernel of
    transcendentals and arithmetic by a fifth."""
    if size < TINY_KERNEL_ELEMENTS:
        return 0, 3
    return (min(opt, 1), 3) if size < SMALL_KERNEL_ELEMENTS else (opt, 3)


def _structure(kernel: Kernel, index: int) -> str:
    """What the kernel computes, its name aside: kernels of one structure compile once. A
    training step repeats its fused expressions on equal shapes (the updates of same-shaped
    variables, the batch norms of one width): the small ResNet step's 100 kernels are 58
    distinct ones, and their LLVM time and IR building shrank in proportion. A repr that
    NumPy abbreviated (a large array in a step's params) could hide a difference: such a
    kernel keys by its index, shared with none."""
    text = repr(replace(kernel, name=""))
    return f"#{index}" if "..." in text else text


def _static_size(kernel: Kernel) -> float:
    """Elements the kernel iterates over when its types fix them all, else infinity (also
    for a kernel a loop calls: its calls add up to as many elements as the loop runs)."""
    if kernel.repeated:
        return float("inf")
    size = 1
    for spec in kernel.shape:
        if not isinstance(spec, int):
            return float("inf")
        size *= spec
    return size


@dataclass(frozen=True)
class CPUTarget:
    """Compiles kernels for this CPU; `libm` names the math functions left to libm. Without
    `py_entries` (for kernels only compiled code calls) `compile_many` emits no ``NAME.py``,
    LLVM time saved, and Python calls of the kernels take the slower ctypes path."""

    libm: frozenset[str] = DEFAULT_LIBM
    opt: int = 2
    py_entries: bool = True
    name: str = field(default="cpu", init=False)

    def module(self, kernel: Kernel | FuncOp, symbol: str | None = None) -> ir.Module:
        """The llvmlite module with the kernel's entry points (unoptimised)."""
        kernel = kernel if isinstance(kernel, Kernel) else analyse(kernel)
        symbol = symbol or kernel.name
        module = ir.Module(name=symbol)
        module.triple = process_jit().triple
        builder = KernelBuilder(kernel, module, symbol, self.libm)
        check, run = builder.build_check(), builder.build_run(Driver())
        _py_entry(module, kernel, symbol, add_kernel_entry(module, kernel, symbol, check, run))
        return module

    def emit(self, kernel: Kernel | FuncOp) -> str:
        """The kernel's LLVM IR, before optimisation."""
        return str(self.module(kernel))

    def optimized(self, kernel: Kernel | FuncOp) -> llvm.ModuleRef:
        return process_jit().optimize(str(self.module(kernel)), self.opt)

    def assembly(self, kernel: Kernel | FuncOp) -> str:
        """Host assembly of the optimised kernel (to see what vectorised)."""
        return process_jit().pipeline.machine.emit_assembly(self.optimized(kernel))

    def compile(self, kernel: Kernel | FuncOp) -> CompiledKernel:
        """JIT-compile; the result calls the kernel on NumPy arrays."""
        return self.compile_many([kernel])[0]

    def compile_many(self, kernels: list[Kernel | FuncOp]) -> list[CompiledKernel]:
        """JIT-compile several kernels (see `prepare_many`)."""
        return self.prepare_many(kernels).finish()

    def prepare_many(self, kernels: list[Kernel | FuncOp]) -> Prepared[list[CompiledKernel]]:
        """Start compiling several kernels, one LLVM module per pair of `levels` (small and
        tiny static kernels, where vectorised loops cannot pay back LLVM's O2 time, at lower
        ones): one optimisation and code generation run per module, not per kernel. Kernels
        differing only in name (`_structure`) are built once and share their entry. The
        entries are the kernels' indices."""
        kernels = [k if isinstance(k, Kernel) else analyse(k) for k in kernels]
        first: dict[str, int] = {}
        same_as = [first.setdefault(_structure(k, i), i) for i, k in enumerate(kernels)]
        chosen_levels = {i: levels(_static_size(kernels[i]), self.opt) for i in first.values()}
        groups = [[i for i, lv in chosen_levels.items() if lv == level]
                  for level in sorted(set(chosen_levels.values()))]
        built = [self._module([kernels[i] for i in group], *chosen_levels[group[0]])
                 for group in groups]
        names = [n for job, symbols in built for s in symbols
                 for n in ((s, f"{s}.py") if self.py_entries else (s,))]
        built_entries = {i: symbol for group, (_, symbols) in zip(groups, built, strict=True)
                         for i, symbol in zip(group, symbols, strict=True)}
        built_jobs = {i: job for group, (job, _) in zip(groups, built, strict=True)
                      for i in group}
        entries = {i: built_entries[same_as[i]] for i in range(len(kernels))}
        job_of = {i: built_jobs[same_as[i]] for i in range(len(kernels))}

        def make(linked: Linked) -> list[CompiledKernel]:
            layout_ok = process_jit().layout_ok
            compiled = []
            for i, kernel in enumerate(kernels):
                symbol = entries[i]
                raw = linked.function(symbol, ctypes.CFUNCTYPE(
                    ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p))
                py = None
                if layout_ok and self.py_entries:
                    py = linked.function(f"{symbol}.py", ctypes.CFUNCTYPE(
                        ctypes.c_int32, *[ctypes.py_object] * len(kernel.args)))
                compiled.append(CompiledKernel(kernel, raw, py, llvm_ir=job_of[i].text,
                                               symbol=symbol))
            return compiled

        return Prepared([job for job, _ in built], names, entries, make)

    def _module(self, kernels: list[Kernel], level: int,
                codegen: int) -> tuple[ModuleJob, list[str]]:
        """`kernels` as one LLVM module to optimise at `level` and generate at `codegen`,
        and the kernels' symbols."""
        module = ir.Module(name=kernels[0].name)
        module.triple = process_jit().triple
        symbols = []
        for index, kernel in enumerate(kernels):
            symbol = f"{kernel.name}.k{index}.{cache.PLACEHOLDER}"
            builder = KernelBuilder(kernel, module, symbol, self.libm)
            check, run = builder.build_check(), builder.build_run(Driver())
            raw = add_kernel_entry(module, kernel, symbol, check, run)
            if self.py_entries:
                _py_entry(module, kernel, symbol, raw)
            symbols.append(symbol)
        job = ModuleJob.of(module, level, codegen)
        return job, [job.name(s) for s in symbols]


@dataclass(frozen=True)
class ModuleJob:
    """An LLVM module to link: its IR text, the levels it is compiled at, and its
    compilation-cache entry. Symbols in the module carry `cache.PLACEHOLDER`, replaced in
    `text` by the start of the entry: kernels of the same name never clash in the engine,
    and the same module gets the same symbols in every process, so cached code links.
    A `private` module (built from patched code generators, `cpu.private`) gets an engine
    of its own."""

    text: str
    level: int
    codegen: int
    entry: str
    private: bool = False

    @classmethod
    def of(cls, module: ir.Module, level: int, codegen: int, entry: str | None = None
           ) -> ModuleJob:
        """The job of `module`, its object code already being made on the JIT's compiler
        thread (see `JIT.schedule`); cached under `entry`, by default its text's key."""
        jit = process_jit()
        text = str(module)
        entry = entry or cache.key(text, level, jit.target_id, codegen)
        job = cls(text.replace(cache.PLACEHOLDER, entry[:16]), level, codegen, entry,
                  _PRIVATE.get())
        jit.schedule(job)
        return job

    def name(self, symbol: str) -> str:
        """`symbol` as this module defines it (its placeholder replaced)."""
        return symbol.replace(cache.PLACEHOLDER, self.entry[:16])


@dataclass(frozen=True)
class Prepared(Generic[T]):
    """Modules whose object code is being made, and what to make of their symbols' addresses
    once linked: `entries` maps each compiled item (a kernel's index, a lowered op) to its
    symbol, known before linking, so that a program calling them can be built meanwhile."""

    jobs: list[ModuleJob]
    symbols: list[str]
    entries: dict[Any, str]
    make: Callable[[Linked], T]

    def finish(self) -> T:
        """Link the modules and make the result."""
        return self.make(process_jit().link(self.jobs, self.symbols))


class Engine:
    """An MCJIT execution engine and the modules linked into it (by cache key). Its code
    lives as long as it does: whatever calls the code holds it (`Linked.function`)."""

    def __init__(self, machine: llvm.TargetMachine) -> None:
        backing = llvm.parse_assembly("")
        backing.triple = llvm.get_process_triple()
        self.engine = llvm.create_mcjit_compiler(backing, machine)  # owns `machine`
        self.loaded: set[str] = set()


@dataclass(frozen=True)
class Linked:
    """The addresses of linked symbols and the engine their code lives in."""

    addresses: dict[str, int]
    engine: Engine

    def function(self, symbol: str, prototype: type) -> Any:
        """`symbol` as a ctypes function of `prototype` (a ``ctypes.CFUNCTYPE``), holding
        the engine: its code is not freed while the function can be called."""
        function = prototype(self.addresses[symbol])
        function.engine = self.engine
        return function


def link_all(prepared: Sequence[Prepared]) -> list[Any]:
    """Link several prepared sets of modules with one engine finalisation; their results."""
    jobs = [job for p in prepared for job in p.jobs]
    addresses = process_jit().link(jobs, [s for p in prepared for s in p.symbols])
    return [p.make(addresses) for p in prepared]


def add_kernel_entry(module: ir.Module, kernel: Kernel, symbol: str, check: ir.Function,
               run: ir.Function) -> ir.Function:
    pointer = ir.PointerType()
    function = ir.Function(module, ir.FunctionType(I32, [pointer, pointer]), symbol)
    args, dims = function.args
    args.name, dims.name = "args", "dims"
    b = ir.IRBuilder(function.append_basic_block("entry"))
    pointers = [b.load(b.gep(args, [ir.Constant(I64, i)], source_etype=pointer), typ=pointer)
                for i in range(len(kernel.args))]
    total = sum(arg.ndim for arg in kernel.args)
    sizes = [b.load(b.gep(dims, [ir.Constant(I64, i)], source_etype=I64), typ=I64)
             for i in range(total)]
    code = b.call(check, sizes)
    return_unless(b, b.icmp_signed("==", code, ir.Constant(I32, 0)), code)
    b.call(run, pointers + sizes)
    b.ret(ir.Constant(I32, 0))
    return function


def _py_entry(module: ir.Module, kernel: Kernel, symbol: str, raw: ir.Function) -> None:
    """``NAME.py``: checks NumPy's array structs, gathers their pointers and dims and calls
    ``NAME`` (one copy of the loops per kernel, not one per entry: LLVM time goes with the
    amount of loop code, and a call costs nanoseconds)."""
    pointer = ir.PointerType()
    function = ir.Function(module, ir.FunctionType(I32, [pointer] * len(kernel.args)),
                           f"{symbol}.py")
    b = ir.IRBuilder(function.append_basic_block("entry"))
    for index, (obj, arg) in enumerate(zip(function.args, kernel.args, strict=True)):
        obj.name = f"array{index}"
        ok = array_ok(b, obj, arg.ndim, contiguous=True, writeable=arg.is_output)
        return_unless(b, ok, ir.Constant(I32, index + 1))
    data = b.alloca(pointer, max(len(kernel.args), 1), name="data")
    dims = b.alloca(I64, max(sum(arg.ndim for arg in kernel.args), 1), name="dims")
    position = 0
    for index, (obj, arg) in enumerate(zip(function.args, kernel.args, strict=True)):
        b.store(array_data(b, obj), b.gep(data, [ir.Constant(I64, index)],
                                          source_etype=pointer))
        for size in array_dims(b, obj, arg.ndim):
            b.store(size, b.gep(dims, [ir.Constant(I64, position)], source_etype=I64))
            position += 1
    b.ret(b.call(raw, [data, dims]))


class JIT:
    """The process's execution engines (`Engine`, as generations), a target machine for
    optimising, and compiler threads making object code.

    LLVM's optimisation and code generation run in llvmlite calls that release the GIL, so
    a module handed to the compiler threads (`schedule`) compiles while Python builds the
    next module's IR; `link` waits for them. One thread compiles in this process; with a
    `CompileServer` (a process started at the first module not in the disk cache, on
    machines of more than one core, unless ``STAGEFLOW_PARALLEL_COMPILE=0``) a second one
    hands modules to it, so two modules compile at once: llvmlite runs one LLVM call at a
    time per process.
    """

    def __init__(self) -> None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.load_library_permanently(ctypes.util.find_library("m"))
        missing = [s for s in _LIBM_SYMBOLS if not llvm.address_of_symbol(s)]
        if missing:
            raise RuntimeError(f"libm symbols {missing} are not loadable; the CPU JIT needs them")
        self.cpu_name = llvm.get_host_cpu_name()
        self.features = llvm.get_host_cpu_features().flatten()
        if "+avx512f" in self.features.split(","):
            # LLVM prefers 256-bit vectors on AVX-512 CPUs; 512-bit ones run fused kernels
            # of transcendentals (a gelu's) faster on data in cache.
            self.features += ",-prefer-256-bit"
        self.triple = llvm.get_process_triple()  # read once: builders must not wait for
        # the compiler thread's lock to learn it
        self.pipeline = Pipeline(MachineSpec(self.cpu_name, self.features, self.triple))
        self.lock = threading.Lock()  # held while linking: engines and what they hold
        self._engines: weakref.WeakSet[Engine] = weakref.WeakSet()
        self.current = self._new_engine()
        # Code that runs outside the calls of it (detached threads, fork handlers) is never
        # freed: its link calls go to this engine, made on first need and kept.
        self._permanent: Engine | None = None
        self.target_id = f"{self.triple} {self.cpu_name} {self.features}"
        # The compile server starts at the first module this process must compile: a
        # process whose modules all come from the disk cache starts none (the server's
        # start-up takes a core for about a second, from the calls it would run beside).
        self._serving = config.parallel_compile and can_serve()
        self._server: CompileServer | None = None
        self._server_lock = threading.Lock()
        self._here = threading.Lock()  # held while this process compiles a module
        self._compiler = ThreadPoolExecutor(max_workers=2 if self._serving else 1,
                                            thread_name_prefix="stageflow-llvm")
        self._pending: dict[str, Future[bytes]] = {}
        # Functions every module calling them declares (`shared_function`), by symbol, and
        # those linked (into the permanent engine).
        self._shared: dict[str, SharedFunction] = {}
        self._shared_linked: set[str] = set()
        self._shared_lock = threading.Lock()
        self._pending_lock = threading.Lock()
        self.layout_ok = array_layout_matches()
        self.has_f16c = "+f16c" in self.features.split(",")

    def _start_server(self) -> CompileServer | None:
        """The compile server, started on first need (spawned: this call does not wait for
        it to be ready); None where it cannot start here (this process compiles all)."""
        with self._server_lock:
            if self._server is None and self._serving:
                try:
                    self._server = CompileServer(self.pipeline.spec)
                except OSError:  # no second process here
                    self._serving = False
            return self._server

    def _new_engine(self) -> Engine:
        # The engine owns the machine it is given: never reuse one (FACTS: segfault).
        engine = Engine(self.pipeline.new_machine(jit=True))
        self._engines.add(engine)
        return engine

    def engines(self) -> list[Engine]:
        """The engines alive: current, permanent, or held by a caller of their code."""
        return list(self._engines)

    def is_linked(self, entry: str) -> bool:
        """Whether the module of cache key `entry` is linked into a live engine."""
        return any(entry in engine.loaded for engine in self.engines())

    def optimize(self, text: str, level: int) -> llvm.ModuleRef:
        """The module parsed and optimised at `level` (`llvm_pipeline.Pipeline.optimize`)."""
        return self.pipeline.optimize(text, level)

    def schedule(self, job: ModuleJob) -> None:
        """Start making `job`'s object code on the compiler thread (once per module)."""
        with self._pending_lock:
            if job.entry not in self._pending and not self.is_linked(job.entry):
                self._pending[job.entry] = self._compiler.submit(self._object_code, job)

    def _object_code(self, job: ModuleJob) -> bytes:
        """`job`'s object code: from the disk cache, else optimised and generated (and
        then cached)."""
        code = cache.load(job.entry) if cache.enabled() else None
        if code is not None and not cache.usable(code, _defined_functions(job.text), _resolvable):
            cache.quarantine(job.entry)
            cache.stats.corrupt += 1
            code = None
        if code is None:
            self._start_server()
            code = self._make(job)
            if cache.enabled():
                cache.store(job.entry, code)
        return code

    def _make(self, job: ModuleJob) -> bytes:
        """Compile `job` here, or in the server while this process compiles another."""
        server = self._server
        if server is None:
            return self._compile_here(job.text, job.level, job.codegen)
        if not self._here.acquire(blocking=False):
            code = server.compile(job.text, job.level, job.codegen)
            return code if code is not None else self._compile_here(
                job.text, job.level, job.codegen)
        try:
            return self._compile_here(job.text, job.level, job.codegen)
        finally:
            self._here.release()

    def _compile_here(self, text: str, level: int, codegen: int) -> bytes:
        return self.pipeline.object_code(text, level, codegen)

    def link(self, jobs: list[ModuleJob], symbols: list[str]) -> Linked:
        """Link the modules into one engine (`engine_for`), each module's object code once
        per engine, finalising the engine once for them all; the addresses of `symbols`."""
        if not self.has_f16c and any(" half" in job.text for job in jobs):
            raise NotImplementedError("float16 kernels need a CPU with F16C on this JIT")
        for job in jobs:
            self.schedule(job)
        with self.lock:
            self._link_shared()
            engine = self._engine_for(jobs)
            added = False
            for job in jobs:
                if job.entry in engine.loaded:
                    continue
                with self._pending_lock:
                    future = self._pending.pop(job.entry, None)
                # without a future, the module is linked into another engine: made again
                # (from the disk cache where it is on)
                code = future.result() if future is not None else self._object_code(job)
                engine.engine.add_object_file(llvm.ObjectFileRef.from_data(code))
                engine.loaded.add(job.entry)
                added = True
            if added:
                engine.engine.finalize_object()
            return Linked({s: engine.engine.get_function_address(s) for s in symbols}, engine)

    def shared(self, symbol: str, signature: ir.FunctionType,
               define: Callable[[ir.Module], ir.Function]) -> None:
        """Make the function `symbol` once in this process, unless done: its object code
        from the disk cache, else compiled (`define` builds it into a module of its own),
        linked and its address given to LLVM under its name before the next link call's
        modules, which declare it."""
        with self._shared_lock:
            if symbol in self._shared:
                return
            level, codegen = levels(0, 3)
            # Keyed by the sources that build it, so that its IR is built only to compile it
            # (our gemm's was most of a warm process's first call) or to be read.
            entry = cache.key(f"{symbol}: {signature}\n{cache.sources_digest()}", level,
                              self.target_id, codegen)
            function = SharedFunction(symbol, signature, define, self.triple, entry)
            code = cache.load(entry) if cache.enabled() else None
            if code is not None and cache.usable(code, {symbol}, _resolvable):
                function.code = code
            else:
                # at the levels of the ops calling it, whose work is in the code it calls:
                # written as it should run, it gets the cleanup pipeline
                function.job = ModuleJob.of(function.module(), level, codegen, entry)
            self._shared[symbol] = function

    def with_shared(self, text: str) -> str:
        """A module's IR text, then that of each shared function it declares: the whole
        code of what it runs, to read (a module built without sharing defines its own copy
        under the same name)."""
        declared = set(_DECLARED.findall(text))
        with self._shared_lock:
            found = [f for symbol, f in self._shared.items() if symbol in declared]
        return "\n".join([text, *(function.text() for function in found)])

    def _link_shared(self) -> None:
        """Link the shared functions not yet linked into the permanent engine (the lock
        held), each module's object code once, and add their addresses to LLVM's symbols."""
        with self._shared_lock:
            waiting = [f for symbol, f in self._shared.items()
                       if symbol not in self._shared_linked]
        if not waiting:
            return
        if self._permanent is None:
            self._permanent = self._new_engine()
        engine = self._permanent
        for function in waiting:
            code, job = function.code, function.job
            if job is not None:
                with self._pending_lock:
                    future = self._pending.pop(job.entry, None)
                code = future.result() if future is not None else self._object_code(job)
            engine.engine.add_object_file(llvm.ObjectFileRef.from_data(code))
            engine.loaded.add(function.entry)
        engine.engine.finalize_object()
        for function in waiting:
            llvm.add_symbol(function.symbol, engine.engine.get_function_address(function.symbol))
            self._shared_linked.add(function.symbol)

    def _engine_for(self, jobs: list[ModuleJob]) -> Engine:
        """Where a link call's modules go: the permanent engine for code running outside
        its calls; a live engine holding them all already; else the current one, a new
        generation begun when it is full. Private modules get a new engine."""
        if any(job.private for job in jobs):
            return self._new_engine()
        if any(_outlives_calls(job.text) for job in jobs):
            if self._permanent is None:
                self._permanent = self._new_engine()
            return self._permanent
        entries = {job.entry for job in jobs}
        for engine in (self.current, *self.engines()):
            if entries <= engine.loaded:
                return engine
        if len(self.current.loaded) >= GENERATION_MODULES:
            self.current = self._new_engine()
        return self.current


@dataclass
class SharedFunction:
    """A function that every module calling it declares (`shared_function`), made once in
    the process: its object code from the disk cache (`code`), else compiled from the
    module `define` builds (`job`). Its IR text is built on demand to be read."""

    symbol: str
    signature: ir.FunctionType
    define: Callable[[ir.Module], ir.Function]
    triple: str
    entry: str  # its disk cache entry
    code: bytes | None = None
    job: ModuleJob | None = None
    _text: str | None = None

    def module(self) -> ir.Module:
        """A module of its own defining the function; what that calls in turn, it defines
        itself."""
        library = ir.Module(name=self.symbol)
        library.triple = self.triple
        token = _SHARING.set(False)
        try:
            function = self.define(library)
        finally:
            _SHARING.reset(token)
        assert function.name == self.symbol and function.type.pointee == self.signature
        return library

    def text(self) -> str:
        """Its module's IR text (built once, where its code came from the cache)."""
        if self._text is None:
            self._text = self.job.text if self.job is not None else str(self.module())
        return self._text


_DECLARED = re.compile(r'^declare [^@]*@"([^"]+)"\(', re.MULTILINE)
_JIT_INSTANCE: JIT | None = None
_JIT_LOCK = threading.Lock()


def process_jit() -> JIT:
    global _JIT_INSTANCE
    with _JIT_LOCK:
        if _JIT_INSTANCE is None:
            _JIT_INSTANCE = JIT()
        return _JIT_INSTANCE


_DEFAULT = CPUTarget()
_RAW_ONLY = CPUTarget(py_entries=False)


def compile_kernel(function: FuncOp | Kernel) -> CompiledKernel:
    """Compile an elementwise kernel for this CPU: ``f(*arrays) -> tuple of arrays``."""
    return _DEFAULT.compile(function)


def compile_kernels(functions: list[FuncOp | Kernel],
                    py_entries: bool = True) -> list[CompiledKernel]:
    """Compile several kernels (see `CPUTarget.prepare_many`)."""
    return prepare_kernels(functions, py_entries).finish()


def prepare_kernels(functions: list[FuncOp | Kernel],
                    py_entries: bool = True) -> Prepared[list[CompiledKernel]]:
    """Start compiling several kernels (see `CPUTarget.prepare_many`)."""
    return (_DEFAULT if py_entries else _RAW_ONLY).prepare_many(functions)


_DEFINE = re.compile(r'^define (?!internal |private )[^@\n]*@"?([^"(\s]+)"?\(',
                     re.MULTILINE)
_SIBLING = re.compile(r"[0-9a-f]{16}")  # stageflow's symbols carry their module's cache key
# Code calling these runs outside the calls of it: detached threads and fork handlers (the
# worker pool of `stageflow.codegen.lowered.worker_pool`), which must never find it freed.
# (Found by substring: a regular expression over a training step's IR is slow.)
_OUTLIVES_CALLS = ("@\"pthread_detach\"", "@pthread_detach(", "@\"__register_atfork\"",
                   "@__register_atfork(")


def _outlives_calls(text: str) -> bool:
    return any(name in text for name in _OUTLIVES_CALLS)


def _defined_functions(text: str) -> set[str]:
    """The functions an LLVM module's text exports (its object code must define them)."""
    return set(_DEFINE.findall(text))


def _resolvable(name: str) -> int:
    """An undefined symbol of cached object code: found in this process (libc, libm, the
    BLAS, py_func entries), another stageflow module's, linked beside it, or a shared
    function's (linked before the module)."""
    if _SIBLING.search(name) or (_JIT_INSTANCE is not None and name in _JIT_INSTANCE._shared):
        return 1
    return llvm.address_of_symbol(name) or 0


# Set while the JIT builds a module of ops (`building_shared`): large functions that many
# modules call (our own gemm) are then declared and compiled once in the process
# (`shared_function`); elsewhere (an ahead-of-time library, an IR dump) each module
# defines its own.
_SHARING: contextvars.ContextVar[bool] = contextvars.ContextVar("stageflow_sharing",
                                                               default=False)
# Set while the JIT builds modules from code generators patched at run time (`private`).
_PRIVATE: contextvars.ContextVar[bool] = contextvars.ContextVar("stageflow_private",
                                                                default=False)


@contextlib.contextmanager
def building_shared() -> Iterator[None]:
    """Build modules for this process's JIT: functions made by `shared_function` are
    declared in them, compiled once."""
    token = _SHARING.set(True)
    try:
        yield
    finally:
        _SHARING.reset(token)


@contextlib.contextmanager
def private() -> Iterator[None]:
    """Build and link modules for this process's JIT from code generators patched at run
    time (a test's spy): each module defines its own copy of the shared functions it calls,
    and is linked into an engine of its own. MCJIT resolves a module's declaration by name
    to any symbol of the engine, internal ones of other modules included, so a patched copy
    linked beside other modules would serve their calls."""
    token = _PRIVATE.set(True)
    try:
        yield
    finally:
        _PRIVATE.reset(token)


def shares_code() -> bool:
    """Whether the module being built declares shared functions (`building_shared`, not
    `private`)."""
    return _SHARING.get() and not _PRIVATE.get()


def shared_function(module: ir.Module, symbol: str, signature: ir.FunctionType,
                    define: Callable[[ir.Module], ir.Function]) -> ir.Function:
    """`symbol` declared in `module`, its code compiled once in this process from
    `define(a module of its own)` and linked before the module. Without it, each module
    calling our own gemm carried a copy: its IR built, printed, hashed and compiled per
    module (the matmul lowering tests took five times as long).

    Its code is taken to follow from stageflow's sources and the JIT's target alone (its
    disk cache entry's key): code generators patched at run time (a test's spy) must not
    build it, or every later process sharing the cache links what they built. Tests that
    patch them build their modules `private`."""
    existing = module.globals.get(symbol)
    if isinstance(existing, ir.Function):
        return existing
    process_jit().shared(symbol, signature, define)
    return ir.Function(module, signature, symbol)
