"""Single non-elementwise ops (reductions, data movement, random bits, matmul) as LLVM
functions with a plain C ABI, JIT-compiled together, and their Python call path.

C ABI of a lowered op (one per distinct op: same primitive, types and params)::

    i32 NAME(ptr data, ptr dims, ptr strides)
        data: the data pointers of the inputs, then of the outputs; dims: every argument's
        sizes (i64), argument after argument; strides: every input's strides in elements
        (i64, may be zero or negative: views are read in place, not copied). Outputs are
        C-contiguous, aligned and overlap nothing. Returns 0 after writing the outputs, or
        1 + the index of an argument whose dims do not fit the types, the other arguments
        or the op (a gather index out of range counts against the indices); then the
        outputs hold nothing meaningful, and nothing outside the arrays was touched.

    i32 NAME.py(PyArrayObject* arg0, ...)
        The same for NumPy arrays: data, rank, dims, byte strides and flags are read from
        NumPy's array struct (`codegen.llvm.numpy_abi`). Inputs must be
        aligned, outputs C-contiguous, aligned and writeable, every rank right.

This is what a whole-function lowering calls for each such op, and what the executable
calls now. Where the compiled code declines (a code other than 0: unusual strides for the
BLAS, an index out of range, an empty max), the op's NumPy kernel runs instead, so errors
read as they do eagerly. The families: `reduction`, `movement`, `scan`, `sorting`,
`random_bits`, `integer_power`, `matmul` (with `small_matmul`), `linalg` (LAPACK), `conv`
and `pooling`.

Compilation: every lowered op of a module goes in one LLVM module (one optimisation and
code generation run), named by its compilation-cache key as kernel modules are, at O2:
O1 compiles little faster but leaves row reductions unvectorised, and O3 compiles as long
for no faster code. Small and tiny ops, whose loops are too short to pay back LLVM's time,
take the kernels' lower levels (`cpu.levels`, a module per pair of levels).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
from llvmlite import ir
from xdsl.dialects.builtin import TensorType
from xdsl.dialects.func import FuncOp

from stageflow.codegen.llvm.emitter import I32, I64, storage_type
from stageflow.codegen.llvm.loops import i64
from stageflow.codegen.llvm.numpy_abi import (
    array_byte_strides,
    array_data,
    array_dims,
    array_ok,
)
from stageflow.codegen.lowered.rule import (
    RULES,
    Lowering,
    OpBuilder,
    OpSpec,
    generic_spec,
    load_operands,
)
from stageflow.codegen.targets import cache
from stageflow.codegen.targets.cpu import (
    Linked,
    ModuleJob,
    Prepared,
    building_shared,
    levels,
    process_jit,
)
from stageflow.core.primitive import ShapedType
from stageflow.ir.dialect import SfOp
from stageflow.ir.types import shaped_type

OPT_LEVEL = 2
SHAPES_KEPT = 64  # operand shapes whose result shapes a shape-generic op remembers


def op_spec(op: SfOp) -> OpSpec | None:
    """The `OpSpec` an `sf` op with ranked tensor operands and results compiles to (its
    dims erased where its lowering is shape-generic), else None."""
    values = list(op.operands) + list(op.results)
    if not all(isinstance(v.type, TensorType) for v in values):
        return None
    return generic_spec(OpSpec(op.primitive.name,
                               tuple(shaped_type(v.type) for v in op.operands),
                               tuple(shaped_type(v.type) for v in op.results), op.params()))


def rule_for(spec: OpSpec) -> Lowering | None:
    """The op's lowering, or None where it runs its NumPy kernel."""
    rule = RULES.get(spec.primitive)
    if rule is None:
        return None
    try:
        for ty in spec.inputs + spec.outputs:
            storage_type(ty.dtype)
    except NotImplementedError:
        return None
    return rule(spec)


# -- the LLVM functions ---------------------------------------------------------------------


def add_op_entry(module: ir.Module, spec: OpSpec, lowering: Lowering, symbol: str) -> None:
    pointer = ir.PointerType()
    function = ir.Function(module, ir.FunctionType(I32, [pointer] * 3), symbol)
    data, dims, strides = function.args
    data.name, dims.name, strides.name = "data", "dims", "strides"
    b = ir.IRBuilder(function.append_basic_block("entry"))
    operands, checks = load_operands(b, spec, data, dims, strides)
    ob = OpBuilder(b, spec, operands[:len(spec.inputs)], operands[len(spec.inputs):],
                   (data, dims, strides))
    for ok, index in checks:
        ob.fail_unless(ok, index)
    lowering.emit(ob)
    ob.b.ret(ir.Constant(I32, 0))


def _py_entry(module: ir.Module, spec: OpSpec, raw: ir.Function, symbol: str) -> None:
    pointer = ir.PointerType()
    types = spec.inputs + spec.outputs
    function = ir.Function(module, ir.FunctionType(I32, [pointer] * len(types)), f"{symbol}.py")
    b = ir.IRBuilder(function.append_basic_block("entry"))
    ob = OpBuilder(b, spec, [], [])
    total_dims = sum(ty.ndim for ty in types)
    total_strides = sum(ty.ndim for ty in spec.inputs)
    data = b.alloca(pointer, len(types), name="data")
    dims = b.alloca(I64, max(total_dims, 1), name="dims")
    strides = b.alloca(I64, max(total_strides, 1), name="strides")
    for index, (obj, ty) in enumerate(zip(function.args, types, strict=True)):
        obj.name = f"array{index}"
        is_output = index >= len(spec.inputs)  # inputs may be strided, outputs are written
        ob.fail_unless(array_ok(b, obj, ty.ndim, contiguous=is_output, writeable=is_output),
                       index)
    position = stride_position = 0
    for index, (obj, ty) in enumerate(zip(function.args, types, strict=True)):
        b = ob.b
        b.store(array_data(b, obj), b.gep(data, [i64(index)], source_etype=pointer))
        for size in array_dims(b, obj, ty.ndim):
            b.store(size, b.gep(dims, [i64(position)], source_etype=I64))
            position += 1
        if index < len(spec.inputs):
            for stride in array_byte_strides(b, obj, ty.ndim):
                element = b.sdiv(stride, i64(ty.dtype.itemsize))
                b.store(element, b.gep(strides, [i64(stride_position)], source_etype=I64))
                stride_position += 1
    ob.b.ret(ob.b.call(raw, [data, dims, strides]))


# -- the Python call path -------------------------------------------------------------------


class CompiledOp:
    """A lowered op: ``op(*arrays)`` returns its result (a tuple for several), computed by
    the compiled function, or by the primitive's NumPy kernel where that declines."""

    def __init__(self, spec: OpSpec, raw: Any, py: Any, module_ir: str, symbol: str = "") -> None:
        self.spec = spec
        self._module_ir = module_ir
        self.symbol = symbol  # of the ``NAME(data, dims, strides)`` entry
        self._raw, self._py = raw, py
        primitive = spec.primitive
        self._kernel, self._rule = primitive.kernel, primitive.shape_rule
        self._single = not primitive.multiple_results
        self._dtypes = [ty.dtype for ty in spec.inputs]
        self._out_dtypes = [ty.dtype for ty in spec.outputs]
        static = all(d is not None for ty in spec.outputs for d in ty.shape)
        self._static_shapes = [tuple(ty.shape) for ty in spec.outputs] if static else None
        # A shape-generic op's result shapes by operand shapes: an eager convolution asks
        # again at every step, and the shape rule costs more than a small one's kernel.
        self._shapes_of: dict[tuple, list[tuple[int, ...]] | None] = {}

    def __repr__(self) -> str:
        return f"<CompiledOp sf.{self.spec.name}>"

    @functools.cached_property
    def llvm_ir(self) -> str:
        """Its module's LLVM IR text, then that of each shared function the module calls
        (`with_shared`), built on first read: a shared function's code may have come from
        the disk cache without its IR."""
        return process_jit().with_shared(self._module_ir)

    def __call__(self, *arrays: Any) -> Any:
        """The fast path: arrays of the op's dtypes whose result shapes are known (static,
        or remembered for these operand shapes by `_output_shapes`), straight to the
        compiled entry; anything else, or a call it declines, takes `_slow`. The eager
        small ResNet's convolutions are shape-generic, and through `_slow` each call would
        run the shape rule again, a large share of a small convolution's time."""
        py = self._py
        if py is None or len(arrays) != len(self._dtypes):
            return self._slow(arrays)
        for a, dtype in zip(arrays, self._dtypes, strict=True):
            if type(a) is not np.ndarray or a.dtype is not dtype or not a.flags.aligned:
                return self._slow(arrays)
        shapes = self._static_shapes
        if shapes is None:  # (a key remembered has every operand's rank right)
            shapes = self._shapes_of.get(tuple([a.shape for a in arrays]))
            if shapes is None:
                return self._slow(arrays)
        outputs = [np.empty(s, d) for s, d in zip(shapes, self._out_dtypes, strict=True)]
        if py(*arrays, *outputs):
            return self._slow(arrays)
        return outputs[0] if self._single else tuple(outputs)

    def _numpy(self, arrays: Sequence[Any]) -> Any:
        return self._kernel(*arrays, **self.spec.params)

    def _output_shapes(self, arrays: list[np.ndarray]) -> list[tuple[int, ...]] | None:
        if self._static_shapes is not None:
            return self._static_shapes
        key = tuple(a.shape for a in arrays)
        try:
            return self._shapes_of[key]
        except KeyError:
            if len(self._shapes_of) >= SHAPES_KEPT:
                self._shapes_of.clear()
            shapes = self._shapes_of[key] = self._infer_shapes(arrays)
            return shapes

    def _infer_shapes(self, arrays: list[np.ndarray]) -> list[tuple[int, ...]] | None:
        try:
            inferred = self._rule(*[ShapedType(a.shape, a.dtype) for a in arrays],
                                  **self.spec.params)
        except (ValueError, TypeError):
            return None
        types = inferred if isinstance(inferred, tuple) else (inferred,)
        shapes = [tuple(ty.shape) for ty in types]
        return None if any(d is None for s in shapes for d in s) else shapes  # type: ignore

    def _slow(self, values: Sequence[Any]) -> Any:
        """Convert what converts exactly, run compiled; anything else: the NumPy kernel."""
        if len(values) != len(self._dtypes):
            return self._numpy(values)
        arrays = [np.asarray(v) for v in values]
        if any(a.dtype != d or a.ndim != len(ty.shape) or a.dtype.byteorder == ">"
               for a, d, ty in zip(arrays, self._dtypes, self.spec.inputs, strict=True)):
            return self._numpy(values)
        arrays = [a if a.flags.aligned else np.array(a) for a in arrays]
        shapes = self._output_shapes(arrays)
        if shapes is None:
            return self._numpy(values)
        outputs = [np.empty(s, d) for s, d in zip(shapes, self._out_dtypes, strict=True)]
        if self.call(arrays, outputs):
            # An op that declines strided views (the convolutions: a tape's seed cotangent
            # is a broadcast view) runs on contiguous copies: a copy costs a fraction of the
            # NumPy kernel (an order of magnitude slower for a convolution's gradient).
            if all(a.flags.c_contiguous for a in arrays) or self.call(
                    [np.ascontiguousarray(a) for a in arrays], outputs):
                return self._numpy(values)
        return outputs[0] if self._single else tuple(outputs)

    def call(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> int:
        """Run on arrays as they are (outputs C-contiguous); the status code."""
        if self._py is not None:
            return int(self._py(*inputs, *outputs))
        everything = list(inputs) + list(outputs)
        data = (ctypes.c_void_p * len(everything))(*[a.ctypes.data for a in everything])
        sizes = [d for a in everything for d in a.shape]
        steps = [s // a.itemsize for a in inputs for s in a.strides]
        dims = (ctypes.c_int64 * max(len(sizes), 1))(*sizes)
        strides = (ctypes.c_int64 * max(len(steps), 1))(*steps)
        return int(self._raw(data, dims, strides))


def _static_size(spec: OpSpec) -> float:
    """The most elements an operand or result of the op holds, infinity if a dim is unknown."""
    size = 0.0
    for ty in spec.inputs + spec.outputs:
        if None in ty.shape:
            return float("inf")
        size = max(size, float(np.prod(ty.shape, dtype=np.int64)))
    return size


def compile_ops(specs: Sequence[OpSpec], py_entries: bool = True) -> list[CompiledOp | None]:
    """Compile the ops that have a lowering (see `prepare_ops`); None for the others."""
    compiled = prepare_ops(specs, py_entries).finish()
    return [compiled.get(spec.key) for spec in specs]


def prepare_ops(specs: Sequence[OpSpec],
                py_entries: bool = True) -> Prepared[dict[tuple, CompiledOp]]:
    """Start compiling the distinct ops that have a lowering, one LLVM module per pair of
    levels (`cpu.levels` by the op's static size, `OPT_LEVEL` for large ops; a lowering
    whose work is in the functions it calls says ``optimize_loops = False`` and gets the
    tiny ops' levels); the entries and the result are keyed by `OpSpec.key`. Without
    `py_entries` (ops only compiled code calls) there is no ``NAME.py`` to compile, and
    Python calls take the slower ctypes path."""
    groups: dict[tuple[int, int], dict[tuple, tuple[OpSpec, Lowering]]] = {}
    for spec in specs:
        lowering = rule_for(spec)
        if lowering is not None:
            size = _static_size(spec) if getattr(lowering, "optimize_loops", True) else 0
            group = groups.setdefault(levels(size, OPT_LEVEL), {})
            group.setdefault(spec.key, (spec, lowering))
    ordered = [group for _, group in sorted(groups.items())]
    built = [_module(list(group.values()), py_entries, level, codegen)
             for (level, codegen), group in sorted(groups.items())]
    names = [n for _, symbols in built for s in symbols
             for n in ((s, f"{s}.py") if py_entries else (s,))]
    entries = {key: symbol for group, (_, symbols) in zip(ordered, built, strict=True)
               for key, symbol in zip(group, symbols, strict=True)}

    def make(linked: Linked) -> dict[tuple, CompiledOp]:
        pointer = ctypes.c_void_p
        layout_ok = process_jit().layout_ok
        compiled: dict[tuple, CompiledOp] = {}
        for group, (job, symbols) in zip(ordered, built, strict=True):
            for (spec, _), symbol in zip(group.values(), symbols, strict=True):
                raw = linked.function(symbol, ctypes.CFUNCTYPE(
                    ctypes.c_int32, pointer, pointer, pointer))
                n = len(spec.inputs) + len(spec.outputs)
                py = (linked.function(f"{symbol}.py", ctypes.CFUNCTYPE(
                    ctypes.c_int32, *[ctypes.py_object] * n))
                    if layout_ok and py_entries else None)
                compiled[spec.key] = CompiledOp(spec, raw, py, job.text, symbol)
        return compiled

    return Prepared([job for job, _ in built], names, entries, make)


def _module(ops: list[tuple[OpSpec, Lowering]], py_entries: bool, level: int,
            codegen: int) -> tuple[ModuleJob, list[str]]:
    """Distinct ops as one LLVM module to compile at the levels given; their symbols."""
    module = ir.Module(name="ops")
    module.triple = process_jit().triple
    symbols = []
    with building_shared():
        for index, (spec, lowering) in enumerate(ops):
            symbol = f"{spec.name}.op{index}.{cache.PLACEHOLDER}"
            add_op_entry(module, spec, lowering, symbol)
            if py_entries:
                _py_entry(module, spec, module.get_global(symbol), symbol)
            symbols.append(symbol)
    job = ModuleJob.of(module, level, codegen)
    return job, [job.name(s) for s in symbols]


def module_text(specs: Sequence[OpSpec]) -> str:
    """The LLVM IR of the ops' functions before optimisation (for tests and dumps)."""
    module = ir.Module(name="ops")
    for spec in specs:
        lowering = rule_for(spec)
        if lowering is None:
            raise NotImplementedError(f"sf.{spec.name} has no lowering for {spec}")
        symbol = spec.name
        add_op_entry(module, spec, lowering, symbol)
        _py_entry(module, spec, module.get_global(symbol), symbol)
    return str(module)


def lower_functions(functions: Sequence[FuncOp],
                    py_entries: bool = True) -> Prepared[dict[SfOp, CompiledOp]]:
    """Start compiling every op of `functions` that has a lowering; the result maps op ->
    its compiled form, the entries op -> its symbol."""
    ops = [op for f in functions for op in f.body.walk()
           if isinstance(op, SfOp) and op.primitive in RULES]
    specs = [op_spec(op) for op in ops]
    chosen = [(op, spec) for op, spec in zip(ops, specs, strict=True) if spec is not None]
    prepared = prepare_ops([spec for _, spec in chosen], py_entries)
    lowered = [(op, spec.key) for op, spec in chosen if spec.key in prepared.entries]

    def make(linked: Linked) -> dict[SfOp, CompiledOp]:
        compiled = prepared.make(linked)
        return {op: compiled[key] for op, key in lowered}

    return Prepared(prepared.jobs, prepared.symbols,
                    {op: prepared.entries[key] for op, key in lowered}, make)
