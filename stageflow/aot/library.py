"""Ahead-of-time compilation: a concrete function as a shared library with a C header, or
as PTX with a JSON manifest (`sf.aot.compile`, ``stageflow compile``).

The CPU artefact is the JIT's whole-function program (`program`) with its kernels and
lowered ops in one LLVM module, optimised for this machine's CPU and compiled as
position-independent object code, plus exported C entry points that `header` documents.
With ``freeze=True`` the variables the function reads become constants of the library
before the compiler's passes (`Function.freeze`), so that what depends on them only is
folded and convolution filters are packed, as in an imported model (a function that
assigns one is refused); with ``freeze=False`` they live in a state
object that the library creates with their current values and that every call reads and
updates, so a C program can keep training state. Captured tensors are always constants.

The GPU artefact holds the fused kernels only (matmul, reductions and the other lowered
ops have no PTX lowering yet): one ``.ptx`` module with every kernel as an ``.entry`` and
a manifest naming each kernel's parameters and launch geometry.

A library's loops do not check for Ctrl-C as the JIT's do (`codegen.program.interrupts`):
that check reads a flag the Python process owns and that a handler it installs sets. A loop
of a library runs to its end, as a loop of the C program calling it would; SIGINT's
default action, or the caller's own handler, decides what a Ctrl-C does meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from typing import Any

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir
from xdsl.dialects.func import FuncOp
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from stageflow.aot import wasm
from stageflow.aot.header import header_text
from stageflow.codegen.kernels.analysis import analyse
from stageflow.codegen.llvm.emitter import I32, I64
from stageflow.codegen.llvm.functions import declare
from stageflow.codegen.llvm.loops import return_unless
from stageflow.codegen.lowered import matmul, own_blas, worker_pool
from stageflow.codegen.lowered.compile import op_spec, rule_for
from stageflow.codegen.program.abi import NO_MEMORY, NULL_POINTER, ProgramSignature
from stageflow.codegen.program.embedded import embedded_constant
from stageflow.codegen.program.legality import supported
from stageflow.codegen.program.module import whole_function_module
from stageflow.codegen.targets import platform
from stageflow.codegen.targets.ptx import PTXTarget, entry_name
from stageflow.core import config_threading
from stageflow.core.config_threading import openblas_libraries
from stageflow.core.errors import StagingError
from stageflow.frontend.variables import Variable
from stageflow.ir.builder import build_constant
from stageflow.ir.dialect import SfOp
from stageflow.ir.types import ResourceTensorType
from stageflow.passes import LIBRARY_PIPELINE, PTX_PIPELINE
from stageflow.passes.fuse import is_kernel
from stageflow.passes.support import is_op
from stageflow.primitives.functional import call_p
from stageflow.primitives.state import read_variable_p
from stageflow.staging.compiler import Compilation
from stageflow.staging.function import function as staged_function

TARGETS = ("cpu", "ptx", *platform.TARGETS)
_PTR = ir.PointerType()
# The C compilers that build for each target, the first found on PATH used.
C_COMPILERS = {"x86_64-linux-gnu": ("x86_64-linux-gnu-gcc", "cc", "gcc", "clang"),
               "aarch64-linux-gnu": ("aarch64-linux-gnu-gcc",)}


def c_compiler(target: str) -> str:
    """The path of a C compiler for `target` (`C_COMPILERS`); a RuntimeError naming them
    where none is on PATH."""
    names = C_COMPILERS.get(target, ())
    found = next(filter(None, map(shutil.which, names)), None)
    if found is None:
        raise RuntimeError(f"sf.aot: building for {target} needs a C compiler "
                           f"({' or '.join(names) or 'none known'}) on PATH")
    return found


@dataclass
class CPUArtefact:
    """A compiled library: object code, its C header, and what it links to.

    `sf.aot.compile` makes it; the header declares ``NAME(inputs, dims, outputs)`` over
    C-contiguous buffers of the specs' dtypes, the unknown dims passed in `dims`. With
    ``freeze=True`` (the default) the variables' current values are constants of the
    library; with ``freeze=False`` they are state that ``NAME_state_new`` creates:

    >>> import os, shutil, tempfile
    >>> w = sf.Variable([1.0, 2.0, 3.0], name="w")
    >>> predict = sf.function(lambda x: sf.reduce_sum(x * w, axis=1))
    >>> spec = sf.TensorSpec([None, 3], sf.float32)
    >>> lib = sf.aot.compile(predict, spec, name="predict")
    >>> for line in lib.header.splitlines():
    ...     if line.startswith("int32_t predict("):
    ...         print(line)
    int32_t predict(const void *const *inputs, const int64_t *dims, void *const *outputs);
    >>> stateful = sf.aot.compile(predict, spec, name="predict", freeze=False)
    >>> "predict_state *predict_state_new(void);" in stateful.header
    True
    >>> directory = tempfile.mkdtemp()
    >>> _ = lib.save(os.path.join(directory, "predict.o"))   # to link into a program
    >>> sorted(os.listdir(directory))
    ['predict.h', 'predict.o']
    >>> shutil.rmtree(directory)
    """

    name: str
    object_code: bytes
    header: str
    signature: ProgramSignature
    libraries: list[str] = field(default_factory=list)
    platform: platform.Platform = field(default_factory=platform.host)

    @property
    def target(self) -> str:
        """The target it was compiled for (``x86_64-linux-gnu``, ``aarch64-linux-gnu``...)."""
        return self.platform.name

    def save(self, path: str | os.PathLike, header: str | os.PathLike | None = None) -> str:
        """Write ``OUT.so`` (linked with the target's C compiler: ``cc`` here,
        ``aarch64-linux-gnu-gcc`` for aarch64), ``OUT.o`` (object code to link into a
        program), or for ``wasm32`` ``OUT.wasm`` with its ES module ``OUT.mjs`` (`wasm`);
        and the header (default: beside it, ``OUT.h``); the library's path. A ``.so``
        that calls the BLAS gets NumPy's bundled OpenBLAS (and the libraries it needs)
        copied beside it and finds them there (``RUNPATH $ORIGIN``), so the directory
        moves as a whole: nothing of the build environment is needed to load it."""
        path = os.fspath(path)
        kinds = (".wasm", ".o") if self.platform.wasm else (".so", ".o")
        if not path.endswith(kinds):
            raise ValueError(f"sf.aot: write a {' or a '.join(kinds)} for target "
                             f"{self.target}, not {path!r}")
        header = os.fspath(header) if header is not None else os.path.splitext(path)[0] + ".h"
        with open(header, "w", encoding="utf-8") as file:
            file.write(self.header)
        if path.endswith(".o"):
            with open(path, "wb") as file:
                file.write(self.object_code)
            return path
        if self.platform.wasm:
            return wasm.save(self, path)
        try:
            cc = c_compiler(self.target)
        except RuntimeError as error:
            raise RuntimeError(f"{error}; save a .o instead") from None
        with tempfile.TemporaryDirectory() as scratch:
            obj = os.path.join(scratch, f"{self.name}.o")
            with open(obj, "wb") as file:
                file.write(self.object_code)
            links = [_beside(library, path) for library in self.libraries]
            if links:
                links.append("-Wl,-rpath,$ORIGIN")  # (no shell: $ORIGIN reaches the linker)
            result = subprocess.run([cc, "-shared", "-o", path, obj, *links, "-lm"],
                                    capture_output=True, text=True)
        if result.returncode:
            raise RuntimeError(f"sf.aot: linking {path} failed: {result.stderr.strip()}")
        return path


def _beside(library: str, output: str) -> str:
    """Copy `library` and the shared libraries of its directory it may need (NumPy's
    wheel keeps OpenBLAS's gfortran and quadmath there) next to `output`, unless the same
    files are there already; the copy of `library`."""
    target = os.path.dirname(os.path.abspath(output))
    source = os.path.dirname(library)
    for name in os.listdir(source):
        original, copy = os.path.join(source, name), os.path.join(target, name)
        if ".so" in name and not (os.path.exists(copy)
                                  and os.path.getsize(copy) == os.path.getsize(original)):
            shutil.copy2(original, copy)
    return os.path.join(target, os.path.basename(library))


@dataclass
class PTXArtefact:
    """PTX text with every fused kernel, and the manifest describing how to launch them:
    each kernel's parameters (pointers of the given dtypes and shapes, then every dim),
    iteration space and launch geometry; `host_ops` are the ops left for the host (those
    without a PTX lowering yet). Compiling PTX needs no GPU.

    >>> import os, shutil, tempfile
    >>> affine = sf.function(lambda x: x * 2.0 + 1.0)
    >>> ptx = sf.aot.compile(affine, sf.TensorSpec([1024], sf.float32), target="ptx",
    ...                      arch="sm_90", name="affine")
    >>> kernel = ptx.manifest["kernels"][0]
    >>> kernel["name"], kernel["iteration_space"], ptx.manifest["host_ops"]
    ('affine_kernel0', [1024], [])
    >>> [(p["role"], p["dtype"], p["shape"]) for p in kernel["params"][:2]]
    [('input', 'float32', [1024]), ('output', 'float32', [1024])]
    >>> ".target sm_90" in ptx.ptx
    True
    >>> directory = tempfile.mkdtemp()
    >>> _ = ptx.save(os.path.join(directory, "affine.ptx"))
    >>> sorted(os.listdir(directory))
    ['affine.json', 'affine.ptx']
    >>> shutil.rmtree(directory)
    """

    name: str
    ptx: str
    manifest: dict[str, Any]

    def save(self, path: str | os.PathLike) -> str:
        """Write ``OUT.ptx`` and ``OUT.json`` (the manifest); the PTX file's path."""
        path = os.fspath(path)
        if not path.endswith(".ptx"):
            raise ValueError(f"sf.aot: write a .ptx file, not {path!r}")
        with open(path, "w", encoding="utf-8") as file:
            file.write(self.ptx)
        with open(os.path.splitext(path)[0] + ".json", "w", encoding="utf-8") as file:
            json.dump(self.manifest, file, indent=2)
        return path


def compile_function(function: Any, *specs: Any, target: str = "cpu", name: str | None = None,
                     freeze: bool = True, arch: str = "sm_80", cpu: str | None = None,
                     self_contained: bool = False) -> CPUArtefact | PTXArtefact:
    """Compile `function` (an `sf.function`, a concrete function, or a plain Python
    function, which is staged as `sf.function` would) for the inputs `specs` ahead of
    time: a library and header for a CPU, PTX for ``"ptx"``.

    `target`: ``"cpu"`` (this machine) or a machine of `platform.TARGETS`:
    ``"x86_64-linux-gnu"``, ``"aarch64-linux-gnu"``, ``"wasm32"``; `cpu` is LLVM's name of
    the CPU to optimise for (default: this one for the host's target, the target's
    baseline for another, such as aarch64's NEON; ``cpu="neoverse-v1"`` adds SVE). The
    header and the C ABI are the same on every target. A library for another machine, or
    one built with `self_contained`, carries its own gemm (`codegen.lowered.own_blas`)
    instead of linking NumPy's OpenBLAS, and runs its ops' tasks without threads on
    WebAssembly; ops that call LAPACK are refused there.

    `specs` are one `sf.TensorSpec` per argument; a None dim is given at each call (the
    C function's `dims`), so one library serves every batch size. The library needs
    neither Python nor stageflow: here ctypes stands in for a C program.

    >>> import ctypes, os, shutil, tempfile
    >>> affine = sf.function(lambda x: x * 2.0 + 1.0)
    >>> lib = sf.aot.compile(affine, sf.TensorSpec([None], sf.float32), name="affine")
    >>> directory = tempfile.mkdtemp()
    >>> path = lib.save(os.path.join(directory, "libaffine.so"))
    >>> sorted(os.listdir(directory))                    # the library and its header
    ['libaffine.h', 'libaffine.so']
    >>> x, y = np.array([1.0, 2.0, 3.0], np.float32), np.empty(3, np.float32)
    >>> buffers = ctypes.c_void_p * 1
    >>> dims = (ctypes.c_int64 * 1)(3)                   # the unknown dim: 3
    >>> ctypes.CDLL(path).affine(buffers(x.ctypes.data), dims, buffers(y.ctypes.data))
    0
    >>> y
    array([3., 5., 7.], dtype=float32)
    >>> shutil.rmtree(directory)

    For another machine, the same function's object code (``.o``; ``.so`` with the
    target's C compiler, ``.wasm`` and its ES module for WebAssembly):

    >>> board = sf.aot.compile(affine, sf.TensorSpec([None], sf.float32), name="affine",
    ...                        target="aarch64-linux-gnu")
    >>> board.target, board.object_code[1:4], board.libraries   # an ELF object
    ('aarch64-linux-gnu', b'ELF', [])
    """
    if target not in TARGETS:
        raise ValueError(f"sf.aot.compile: target must be one of {TARGETS}, got {target!r}")
    machine = (platform.for_target(platform.host_target() if target == "cpu" else target, cpu,
                                   self_contained) if target != "ptx" else None)
    if not hasattr(function, "get_concrete_function") and not hasattr(function, "graph"):
        if not callable(function):
            raise TypeError(f"sf.aot.compile: expected a function to compile, got "
                            f"{type(function).__name__}")
        function = staged_function(function)
    concrete = (function.get_concrete_function(*specs)
                if hasattr(function, "get_concrete_function") else function)
    if freeze and hasattr(function, "freeze"):
        # A function that writes a variable cannot be frozen: `_freeze_captures` refuses it
        # below, naming freeze=False.
        with contextlib.suppress(StagingError):
            concrete = function.freeze(*specs)
    callback = concrete.graph.python_callback()
    if callback is not None:
        raise NotImplementedError(
            f"sf.aot.compile: {concrete.name} holds a py_func (at {callback.location}), "
            "which calls a Python function of this process: a library cannot; compute it "
            "with sf ops, or call it outside the compiled function")
    symbol = _c_name(name or concrete.name)
    compilation = Compilation.of_graphs(symbol, [(concrete.graph, symbol)])
    compilation.run_passes(PTX_PIPELINE if target == "ptx" else LIBRARY_PIPELINE)
    functions = compilation.functions
    entry = functions[symbol]
    variables = _freeze_captures(entry, concrete, freeze)
    kernels = sum(is_kernel(f) for f in functions.values())
    if machine is None:
        artefact: CPUArtefact | PTXArtefact = _ptx_artefact(symbol, functions, arch)
    else:
        try:
            with platform.building_for(machine):
                artefact = _cpu_artefact(symbol, entry, functions, variables)
        except NotImplementedError as error:
            raise NotImplementedError(f"sf.aot.compile: {error}"
                                      f"{_only_here(machine, symbol, functions)}") from None
    compilation.finished(f"{kernels} kernels into a {machine.name if machine else target} "
                         "library")
    return artefact


# -- the IR ---------------------------------------------------------------------------------


def _only_here(machine: platform.Platform, symbol: str, functions: dict[str, FuncOp]) -> str:
    """What to add to a refusal for `machine` that a library for this machine would not
    meet (an op that calls OpenBLAS or LAPACK here): that the target is the reason."""
    if machine == platform.host() or supported(
            functions[symbol], functions,
            lambda op: rule_for(op_spec(op)) if op_spec(op) is not None else None):
        return ""
    return (f"; a library for this machine ({platform.host().name}) has one, calling "
            f"OpenBLAS or LAPACK, which a library for {machine.name} does not carry")


def _c_name(name: str) -> str:
    cleaned = re.sub(r"\W", "_", name)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"f_{cleaned}"


def _freeze_captures(entry: FuncOp, concrete: Any, freeze: bool) -> list[Variable]:
    """Captured tensors become constants; so do variables with `freeze` (their current
    values), whose arguments are then removed; without it, variables stay arguments: the
    variables kept, in argument order."""
    block = entry.body.block
    n_args = len(concrete.graph.inputs)
    if any(isinstance(a.type, ResourceTensorType) for a in block.args[:n_args]):
        raise NotImplementedError("sf.aot.compile: variables passed as arguments; capture "
                                  "them in the function instead")
    kept: list[Variable] = []
    captured = list(zip(block.args[n_args:], concrete.graph.captures, strict=True))
    for arg, capture in captured:
        source = capture.source
        if isinstance(arg.type, ResourceTensorType):
            if not freeze:
                kept.append(source)
                continue
            for use in list(arg.uses):
                op = use.operation
                if not is_op(op, read_variable_p):
                    raise ValueError(
                        f"sf.aot.compile: @{entry.sym_name.data} writes variable "
                        f"{getattr(source, 'name', '?')!r} ({op.name}); compile it with "
                        "freeze=False to keep variables as state")
                _replace_by_constant(op.results[0], source.numpy(), op)
        else:
            value = source.numpy() if isinstance(source, Variable) else np.asarray(
                getattr(source, "_value", source))
            _replace_by_constant(arg, value, block.first_op)
        if not arg.uses:
            block.erase_arg(arg)
    entry.update_function_type()
    return kept


def _replace_by_constant(value: SSAValue, array: np.ndarray, before: Any) -> None:
    constant = build_constant(np.asarray(array))
    Rewriter.insert_op(constant, InsertPoint.before(before))
    value.replace_all_uses_with(constant.results[0])
    if before is not None and before is value.owner and not value.uses:
        Rewriter.erase_op(before)


# -- the CPU library ------------------------------------------------------------------------


def _cpu_artefact(symbol: str, entry: FuncOp, functions: dict[str, FuncOp],
                  variables: list[Variable]) -> CPUArtefact:
    module, program, shapes, signature = whole_function_module(symbol, functions,
                                                                interruptible=False)
    # The state entries exactly where the header declares them: with variables to keep (a
    # freeze=False function that reads none is called as a frozen one is).
    state = _StateEntries(module, symbol, signature, variables) if variables else None
    _c_entries(module, symbol, signature, program, shapes, state)
    for name in (matmul.GUARD_SYMBOL, worker_pool.STATE_SYMBOL,
                 config_threading.INTRA_OP_SYMBOL, own_blas.REGIONS_SYMBOL):
        block = module.globals.get(name)
        if block is not None:  # the library's own: the JIT's is Python's
            block.initializer = ir.Constant(block.value_type, None)
            block.linkage = "internal"
    for function in module.functions:
        if not function.is_declaration and not function.name.startswith(f"{symbol}_") \
                and function.name != symbol:
            function.linkage = "internal"
    text = str(module)
    # Every symbol of NumPy's OpenBLAS carries its ``scipy_`` prefix: gemms and LAPACK alike.
    libraries = openblas_libraries() if re.search(r'@"?scipy_', text) else []
    machine = platform.current()
    return CPUArtefact(symbol, _object_code(text, machine),
                       header_text(symbol, signature, variables, libraries), signature, libraries,
                       machine)


def _object_code(text: str, machine: platform.Platform) -> bytes:
    """Position-independent object code for `machine`, optimised at O3."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    target = llvm.Target.from_triple(machine.triple).create_target_machine(
        cpu=machine.cpu, features=machine.features, opt=3, reloc="pic", codemodel="default")
    module = llvm.parse_assembly(text)
    module.triple = machine.triple
    module.data_layout = str(target.target_data)
    if machine.wasm:
        wasm.adapt(module)
    module.verify()
    options = llvm.create_pipeline_tuning_options(speed_level=3)
    options.loop_vectorization = options.slp_vectorization = True
    passes = llvm.create_pass_builder(target, options)
    passes.getModulePassManager().run(module, passes)
    return bytes(target.emit_object(module))


class _StateEntries:
    """``NAME_state_new/free/variable``: the variables of a ``freeze=False`` library, each
    in memory of its own, initialised from their values at compile time."""

    def __init__(self, module: ir.Module, symbol: str, signature: ProgramSignature,
                 variables: list[Variable]) -> None:
        self.positions = [i for i, is_resource in enumerate(signature.resources) if is_resource]
        self.initial = [np.ascontiguousarray(v.numpy()) for v in variables]
        self.module, self.symbol = module, symbol
        self.malloc = declare(module, "malloc", _PTR, [I64])
        self.free = declare(module, "free", ir.VoidType(), [_PTR])
        self.memcpy = declare(module, "llvm.memcpy.p0.p0.i64", ir.VoidType(),
                               [_PTR, _PTR, I64, ir.IntType(1)])
        self._new()
        self._free()
        self._variable()

    def _new(self) -> None:
        count = len(self.positions)
        function = ir.Function(self.module, ir.FunctionType(_PTR, []), f"{self.symbol}_state_new")
        b = ir.IRBuilder(function.append_basic_block("entry"))
        state = b.call(self.malloc, [ir.Constant(I64, 8 * max(count, 1))])
        fail = function.append_basic_block("fail")
        for index, value in enumerate(self.initial):
            initial = embedded_constant(self.module, f"{self.symbol}.initial{index}", value)
            memory = b.call(self.malloc, [ir.Constant(I64, max(value.nbytes, 1))])
            ok = function.append_basic_block("ok")
            b.cbranch(b.icmp_unsigned("==", memory, ir.Constant(_PTR, None)), fail, ok)
            b.position_at_end(ok)
            b.call(self.memcpy, [memory, initial, ir.Constant(I64, value.nbytes),
                                 ir.Constant(ir.IntType(1), 0)])
            b.store(memory, b.gep(state, [ir.Constant(I64, index)], source_etype=_PTR))
        b.ret(state)
        b.position_at_end(fail)
        b.ret(ir.Constant(_PTR, None))

    def _free(self) -> None:
        function = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [_PTR]),
                               f"{self.symbol}_state_free")
        b = ir.IRBuilder(function.append_basic_block("entry"))
        (state,) = function.args
        given, done = function.append_basic_block("given"), function.append_basic_block("done")
        b.cbranch(b.icmp_unsigned("==", state, ir.Constant(_PTR, None)), done, given)
        b.position_at_end(done)
        b.ret_void()  # free(NULL) does nothing; neither does this
        b.position_at_end(given)
        for index in range(len(self.positions)):
            slot = b.gep(state, [ir.Constant(I64, index)], source_etype=_PTR)
            b.call(self.free, [b.load(slot, typ=_PTR)])
        b.call(self.free, [state])
        b.ret_void()

    def _variable(self) -> None:
        function = ir.Function(self.module, ir.FunctionType(_PTR, [_PTR, I32]),
                               f"{self.symbol}_state_variable")
        b = ir.IRBuilder(function.append_basic_block("entry"))
        state, index = function.args
        inside = b.and_(b.icmp_signed(">=", index, ir.Constant(I32, 0)),
                        b.icmp_signed("<", index, ir.Constant(I32, len(self.positions))))
        inside = b.and_(inside, b.icmp_unsigned("!=", state, ir.Constant(_PTR, None)))
        good, bad = function.append_basic_block("good"), function.append_basic_block("bad")
        b.cbranch(inside, good, bad)
        b.position_at_end(good)
        slot = b.gep(state, [b.sext(index, I64)], source_etype=_PTR)
        b.ret(b.load(slot, typ=_PTR))
        b.position_at_end(bad)
        b.ret(ir.Constant(_PTR, None))


def _c_entries(module: ir.Module, symbol: str, signature: ProgramSignature,
               program: ir.Function, shapes: ir.Function, state: _StateEntries | None) -> None:
    """``NAME([state,] inputs, dims, outputs)`` and ``NAME_output_dims(dims, out)``: the
    program with only the unknown dims given, in order (the static ones are filled in);
    ``NAME_release()``: the program's release of the memory it keeps between calls."""
    user = [i for i, is_resource in enumerate(signature.resources) if not is_resource]

    def full_dims(b: ir.IRBuilder, given: ir.Value) -> ir.Value:
        total = sum(len(t.shape) for t in signature.inputs)
        dims = b.alloca(I64, max(total, 1), name="all_dims")
        position = unknown = 0
        for ty in signature.inputs:
            for size in ty.shape:
                if size is None:
                    value = b.load(b.gep(given, [ir.Constant(I64, unknown)], source_etype=I64),
                                   typ=I64)
                    unknown += 1
                else:
                    value = ir.Constant(I64, size)
                b.store(value, b.gep(dims, [ir.Constant(I64, position)], source_etype=I64))
                position += 1
        return dims

    unknown = sum(d is None for ty in signature.inputs for d in ty.shape)
    n_outputs = len(signature.outputs)

    def not_null(b: ir.IRBuilder, pointer: ir.Value) -> ir.Value:
        return b.icmp_unsigned("!=", pointer, ir.Constant(_PTR, None))

    def require(b: ir.IRBuilder, conditions: list[ir.Value]) -> None:
        """Return NULL_POINTER unless every condition holds (before touching memory)."""
        ok: ir.Value = ir.Constant(ir.IntType(1), 1)
        for condition in conditions:
            ok = b.and_(ok, condition)
        return_unless(b, ok, ir.Constant(I32, NULL_POINTER))

    def array_pointers(b: ir.IRBuilder, array: ir.Value, count: int) -> list[ir.Value]:
        """The array itself and each of its `count` pointers non-NULL."""
        require(b, [not_null(b, array)])
        return [not_null(b, b.load(b.gep(array, [ir.Constant(I64, i)], source_etype=_PTR),
                                   typ=_PTR)) for i in range(count)]

    function = ir.Function(module, ir.FunctionType(ir.VoidType(), []), f"{symbol}_release")
    b = ir.IRBuilder(function.append_basic_block("entry"))
    b.call(module.get_global(f"{program.name}.release"), [])
    b.ret_void()

    function = ir.Function(module, ir.FunctionType(I32, [_PTR, _PTR]),
                           f"{symbol}_output_dims")
    given, out = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    require(b, [not_null(b, out)] + ([not_null(b, given)] if unknown else []))
    b.ret(b.call(shapes, [full_dims(b, given), out]))

    params = ([_PTR] if state is not None else []) + [_PTR, _PTR, _PTR]
    function = ir.Function(module, ir.FunctionType(I32, params), symbol)
    b = ir.IRBuilder(function.append_basic_block("entry"))
    inputs, given, outputs = function.args[-3:]
    checks = [not_null(b, given)] if unknown else []
    if state is not None:
        checks.append(not_null(b, function.args[0]))
    require(b, checks)
    if user:
        require(b, array_pointers(b, inputs, len(user)))
    if n_outputs:
        require(b, array_pointers(b, outputs, n_outputs))
    if state is None:
        b.ret(b.call(program, [inputs, full_dims(b, given), outputs,
                               ir.Constant(_PTR, None)]))
        return
    handle = function.args[0]
    _stateful_call(b, function, state, signature, user, handle, inputs, full_dims(b, given),
                   outputs, program)


def _stateful_call(b: ir.IRBuilder, function: ir.Function, state: _StateEntries,
                   signature: ProgramSignature, user: list[int], handle: ir.Value,
                   inputs: ir.Value, dims: ir.Value, outputs: ir.Value,
                   program: ir.Function) -> None:
    """Run the program on the user's inputs and the state's variables, writing the new
    values of assigned variables to fresh memory that replaces the old on success."""
    count = len(signature.inputs)
    everything = b.alloca(_PTR, max(count, 1), name="inputs")
    user_slot = 0
    for position in range(count):
        if position in user:
            pointer = b.load(b.gep(inputs, [ir.Constant(I64, user_slot)], source_etype=_PTR),
                             typ=_PTR)
            user_slot += 1
        else:
            slot = state.positions.index(position)
            pointer = b.load(b.gep(handle, [ir.Constant(I64, slot)], source_etype=_PTR),
                             typ=_PTR)
        b.store(pointer, b.gep(everything, [ir.Constant(I64, position)], source_etype=_PTR))
    n_out = len(signature.outputs)
    results = b.alloca(_PTR, max(n_out + len(signature.assigned), 1), name="outputs")
    for index in range(n_out):
        pointer = b.load(b.gep(outputs, [ir.Constant(I64, index)], source_etype=_PTR),
                         typ=_PTR)
        b.store(pointer, b.gep(results, [ir.Constant(I64, index)], source_etype=_PTR))
    fresh = []
    failed: ir.Value = ir.Constant(ir.IntType(1), 0)
    for index, position in enumerate(signature.assigned):
        ty = signature.inputs[position]
        size = int(np.prod(ty.shape, dtype=np.int64)) * np.dtype(ty.dtype).itemsize
        memory = b.call(state.malloc, [ir.Constant(I64, max(size, 1))])
        failed = b.or_(failed, b.icmp_unsigned("==", memory, ir.Constant(_PTR, None)))
        fresh.append((position, memory))
        b.store(memory, b.gep(results, [ir.Constant(I64, n_out + index)], source_etype=_PTR))
    code = b.select(failed, ir.Constant(I32, NO_MEMORY),
                    b.call(program, [everything, dims, results, ir.Constant(_PTR, None)]))
    ok = b.icmp_signed("==", code, ir.Constant(I32, 0))
    keep, drop = function.append_basic_block("keep"), function.append_basic_block("drop")
    b.cbranch(ok, keep, drop)
    b.position_at_end(keep)
    for position, memory in fresh:
        slot = b.gep(handle, [ir.Constant(I64, state.positions.index(position))],
                     source_etype=_PTR)
        b.call(state.free, [b.load(slot, typ=_PTR)])
        b.store(memory, slot)
    b.ret(code)
    b.position_at_end(drop)
    for _, memory in fresh:
        b.call(state.free, [memory])
    b.ret(code)


# -- PTX ------------------------------------------------------------------------------------


def _ptx_artefact(symbol: str, functions: dict[str, FuncOp], arch: str) -> PTXArtefact:
    kernels = [analyse(f) for f in functions.values() if is_kernel(f)]
    if not kernels:
        raise NotImplementedError(f"sf.aot.compile: @{symbol} has no fused kernels to "
                                  "emit as PTX")
    ptx = PTXTarget(arch=arch).compile_many(kernels)
    manifest = {
        "format": 1,
        "function": symbol,
        "arch": arch,
        "kernels": [_kernel_manifest(kernel) for kernel in kernels],
        "host_ops": [op.name for op in functions[symbol].body.block.ops
                     if isinstance(op, SfOp) and op.primitive is not call_p],
    }
    return PTXArtefact(symbol, ptx, manifest)


def _kernel_manifest(kernel: Any) -> dict[str, Any]:
    def dims(shape: tuple) -> list[Any]:
        return [d if isinstance(d, int) else [{"argument": a, "axis": x} for a, x in d]
                for d in shape]

    params = [{"name": f"arg{i}", "type": "u64", "role": "output" if arg.is_output else "input",
               "dtype": np.dtype(arg.dtype).name,
               "shape": [d if d is not None else "?" for d in arg.shape]}
              for i, arg in enumerate(kernel.args)]
    params += [{"name": f"arg{i}.d{axis}", "type": "u64", "role": "dim"}
               for i, arg in enumerate(kernel.args) for axis in range(arg.ndim)]
    return {
        "name": entry_name(kernel),
        "params": params,
        "iteration_space": dims(kernel.shape),
        "launch": {"block": [256, 1, 1],
                   "grid": "[min(ceil(elements / 256), 65535), 1, 1], elements = the product "
                           "of iteration_space (any grid is correct: grid-stride loop)"},
    }
