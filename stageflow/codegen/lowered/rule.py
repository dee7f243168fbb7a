"""What a lowering of one non-elementwise op sees: its operands as IR values, loop helpers.

Elementwise ops are lowered by table (`codegen.kernels.rules`) inside fused kernels; the
irregular ops (reductions, data movement, random bits, matmul, convolutions...) each get a
hand-written rule that emits the body of one LLVM function (see `codegen.lowered.compile`
for its C ABI). A rule is registered for its primitives with `lowering`
(``@lowering(sort_p)``), keyed by the primitive objects, in its family's module; it receives
an `OpSpec` (operand and result types, params) and returns an object whose ``emit(ob)``
writes the body, or ``None`` where it does not handle those dtypes or params (the op then
runs its NumPy kernel).

Inside ``emit`` every operand is an `Operand`: its data pointer, dims (static dims as
constants, already checked) and element strides (inputs may be any strided view with
non-negative or negative strides; outputs are C-contiguous). Rules check what the types do
not fix with `OpBuilder.fail_unless` before they touch memory, so no call reads or writes
outside the arrays it is given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.emitter import I1, I32, I64, storage_type
from stageflow.codegen.llvm.loops import (
    counted_loop,
    fold_add,
    fold_mul,
    fold_product,
    i64,
    return_unless,
)
from stageflow.core.primitive import REGISTRY, Primitive, ShapedType


@dataclass(frozen=True)
class OpSpec:
    """One op to lower: its primitive's name, operand and result types, params."""

    name: str
    inputs: tuple[ShapedType, ...]
    outputs: tuple[ShapedType, ...]
    params: dict[str, Any]

    @property
    def primitive(self) -> Primitive:
        """The op's primitive: what its rule (`RULES`) is found by."""
        return REGISTRY[self.name]

    @property
    def key(self) -> tuple:
        """Equal for ops that compile to the same code (one function serves them all)."""
        params = tuple(sorted((k, repr(v)) for k, v in self.params.items()))
        return (self.name, self.inputs, self.outputs, params)


@dataclass
class Operand:
    """An array argument inside the function: pointer, dims and element strides (IR)."""

    pointer: ir.Value
    dims: list[ir.Value]
    strides: list[ir.Value]
    dtype: np.dtype

    @property
    def element(self) -> ir.Type:
        return storage_type(self.dtype)

    def address(self, b: ir.IRBuilder, offset: ir.Value) -> ir.Value:
        return b.gep(self.pointer, [offset], source_etype=self.element)

    def offset(self, b: ir.IRBuilder, indices: Sequence[ir.Value],
               base: ir.Value | None = None) -> ir.Value:
        """``base + sum(indices[k] * strides[k])`` (constants folded)."""
        total = base if base is not None else i64(0)
        for index, stride in zip(indices, self.strides, strict=True):
            total = fold_add(b, total, fold_mul(b, index, stride))
        return total

    def size(self, b: ir.IRBuilder) -> ir.Value:
        return fold_product(b, self.dims)


class OpBuilder:
    """The builder positioned in the function body, the operands, and the checks."""

    def __init__(self, b: ir.IRBuilder, spec: OpSpec, inputs: list[Operand],
                 outputs: list[Operand], arguments: tuple[ir.Value, ...] = ()) -> None:
        self.b, self.spec = b, spec
        self.inputs, self.outputs = inputs, outputs
        self.arguments = arguments  # the entry's (data, dims, strides), as it was called

    def fail_unless(self, ok: ir.Value, argument: int) -> None:
        """Return ``1 + argument`` (its index among inputs then outputs) unless `ok`."""
        return_unless(self.b, ok, ir.Constant(I32, argument + 1))

    def expect_output(self, index: int, dims: Sequence[ir.Value]) -> None:
        """Fail unless output `index` has exactly `dims` (what the inputs imply)."""
        output = self.outputs[index]
        ok: ir.Value = ir.Constant(I1, 1)
        for have, want in zip(output.dims, dims, strict=True):
            if isinstance(have, ir.Constant) and isinstance(want, ir.Constant):
                if have.constant != want.constant:
                    ok = ir.Constant(I1, 0)
                continue
            ok = self.b.and_(ok, self.b.icmp_signed("==", have, want))
        self.fail_unless(ok, len(self.inputs) + index)

    def all_of(self, conditions: Sequence[ir.Value]) -> ir.Value:
        ok: ir.Value = ir.Constant(I1, 1)
        for condition in conditions:
            ok = self.b.and_(ok, condition)
        return ok

    def eq(self, x: ir.Value, y: ir.Value) -> ir.Value:
        if isinstance(x, ir.Constant) and isinstance(y, ir.Constant):
            return ir.Constant(I1, int(x.constant == y.constant))
        return self.b.icmp_signed("==", x, y)


def nest(b: ir.IRBuilder, dims: Sequence[ir.Value], body: Callable[[list[ir.Value]], None],
         name: str = "i") -> None:
    """Row-major loops over `dims`; ``body(indices)`` emits the innermost iteration."""

    def level(axis: int, indices: list[ir.Value]) -> None:
        if axis == len(dims):
            body(indices)
            return
        if isinstance(dims[axis], ir.Constant) and dims[axis].constant == 1:
            level(axis + 1, [*indices, i64(0)])
            return
        counted_loop(b, i64(0), dims[axis], i64(1),
                     lambda i: level(axis + 1, [*indices, i]), f"{name}{axis}")

    level(0, [])


def smaller(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """The smaller of two signed integers."""
    return b.select(b.icmp_signed("<", x, y), x, y)


def larger(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """The larger of two signed integers."""
    return b.select(b.icmp_signed(">", x, y), x, y)


def is_row_major(ob: OpBuilder, x: Operand) -> ir.Value:
    """Whether `x`'s strides are those of a row-major array of its dims (any stride on a
    dim of 1)."""
    b = ob.b
    ok: ir.Value = ir.Constant(I1, 1)
    expected: ir.Value = i64(1)
    for d, stride in zip(reversed(x.dims), reversed(x.strides), strict=True):
        ok = b.and_(ok, b.or_(ob.eq(stride, expected), b.icmp_signed("<=", d, i64(1))))
        expected = fold_mul(b, expected, d)
    return ok


def row_major(ob: OpBuilder, index: int) -> Operand:
    """Input `index`, failing unless it is C-contiguous (any stride on a dim of 1), with
    the strides its dims imply: constants where the dims are static, so that loops over it
    have constant steps (and trip counts) for LLVM to vectorise."""
    x = ob.inputs[index]
    ob.fail_unless(is_row_major(ob, x), index)
    return Operand(x.pointer, x.dims, contiguous_strides(ob.b, x.dims), x.dtype)


def contiguous_strides(b: ir.IRBuilder, dims: Sequence[ir.Value]) -> list[ir.Value]:
    """Row-major element strides of `dims`."""
    strides: list[ir.Value] = []
    stride: ir.Value = i64(1)
    for d in reversed(dims):
        strides.append(stride)
        stride = fold_mul(b, stride, d)
    return strides[::-1]


def dot(b: ir.IRBuilder, indices: Sequence[ir.Value], strides: Sequence[ir.Value]) -> ir.Value:
    """``sum(indices[k] * strides[k])``, constants folded."""
    total: ir.Value = i64(0)
    for index, stride in zip(indices, strides, strict=True):
        total = fold_add(b, total, fold_mul(b, index, stride))
    return total


class Lowering(Protocol):
    def emit(self, ob: OpBuilder) -> None: ...


Rule = Callable[[OpSpec], Lowering | None]
RULES: dict[Primitive, Rule] = {}
# Primitives whose ops compile shape-generic (`lowering`), by the static size from which
# they do (0: always).
GENERIC: dict[Primitive, int] = {}


def lowering(*primitives: Primitive, generic: bool = False,
             generic_from: int | None = None) -> Callable[[Rule], Rule]:
    """Register a rule for `primitives` (used as a decorator). With `generic`, the
    ops are compiled with every dim unknown (`generic_spec`): one function serves every
    shape, where a static dim saves little and each specialisation costs a compile. With
    `generic_from`, only ops of static shapes and at least that many elements are: small
    ones keep their static shapes and the cheap levels of small code, and ones with an
    unknown dim already serve every size along it."""

    def register(rule: Rule) -> Rule:
        for primitive in primitives:
            RULES[primitive] = rule
            if generic or generic_from is not None:
                GENERIC[primitive] = 0 if generic else int(generic_from or 0)
        return rule

    return register


def generic_spec(spec: OpSpec) -> OpSpec:
    """`spec` with every dim unknown where its primitive's rule is generic at its size."""
    threshold = GENERIC.get(spec.primitive)
    if threshold is None:
        return spec
    types = spec.inputs + spec.outputs
    if threshold and (any(d is None for ty in types for d in ty.shape)
                      or max(math.prod(ty.shape) for ty in types) < threshold):
        return spec

    def erased(types: tuple[ShapedType, ...]) -> tuple[ShapedType, ...]:
        return tuple(ShapedType((None,) * ty.ndim, ty.dtype) for ty in types)

    return OpSpec(spec.name, erased(spec.inputs), erased(spec.outputs), spec.params)


def load_operands(b: ir.IRBuilder, spec: OpSpec, data: ir.Value, dims: ir.Value,
                  strides: ir.Value) -> tuple[list[Operand], list[tuple[ir.Value, int]]]:
    """The operands of an op's C entry ``i32 (ptr data, ptr dims, ptr strides)``: per input
    then output, its data pointer, dims (static ones as constants) and element strides
    (given for inputs, C-contiguous for outputs); and the checks that the given dims match
    the static ones, with the index of the operand each one is about."""
    pointer = ir.PointerType()
    types = spec.inputs + spec.outputs
    position = stride_position = 0
    operands: list[Operand] = []
    checks: list[tuple[ir.Value, int]] = []
    for index, ty in enumerate(types):
        base = b.load(b.gep(data, [i64(index)], source_etype=pointer), typ=pointer)
        base.name = f"arg{index}"
        given = []
        for axis in range(ty.ndim):
            size = b.load(b.gep(dims, [i64(position)], source_etype=I64), typ=I64)
            size.name = f"arg{index}.d{axis}"
            given.append(size)
            position += 1
        ok: ir.Value | None = None
        for size, static in zip(given, ty.shape, strict=True):
            fits = (b.icmp_signed(">=", size, i64(0)) if static is None
                    else b.icmp_signed("==", size, i64(static)))
            ok = fits if ok is None else b.and_(ok, fits)
        if ok is not None:
            checks.append((ok, index))
        known = [size if static is None else i64(static)
                 for size, static in zip(given, ty.shape, strict=True)]
        if index < len(spec.inputs):
            element_strides = []
            for axis in range(ty.ndim):
                stride = b.load(b.gep(strides, [i64(stride_position)], source_etype=I64),
                                typ=I64)
                stride.name = f"arg{index}.s{axis}"
                element_strides.append(stride)
                stride_position += 1
        else:
            element_strides = contiguous_strides(b, known)
        operands.append(Operand(base, known, element_strides, ty.dtype))
    return operands, checks
