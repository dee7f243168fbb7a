"""Kernels: the elementwise `func.func`s that code generation compiles, analysed once.

A *kernel* is a ``func.func`` whose body holds only elementwise `sf` ops (unary, binary,
comparisons, logic, ``sf.select``, ``sf.cast``), ``sf.constant`` of 0-d or splat values,
reductions (``sf.reduce_sum``, ``_prod``, ``_max``, ``_min``) of values over the whole
iteration space whose results are only returned, and ``func.return``. Arguments and
results are ranked tensors with static or ``?`` dims; binary and select ops broadcast like
NumPy. A fusion pass outlines such functions; this module turns one into a `Kernel`: the
op list in SSA order with value numbers, its reductions, and the *iteration space*, the
broadcast shape of every value in it but the reductions' results (for a kernel without
dead values, the broadcast shape of its unreduced results and reduced operands). Each
argument is read or written at its own broadcast strides: stride 0 on dims where it has
size 1, so a ``tensor<8xf32>`` bias added to a ``tensor<?x8xf32>`` is read again for
every row; a reduction's result is combined into at stride 0 on its reduced axes.

Dims are *specs*: an ``int`` when the types fix it, else the tuple of ``(argument, axis)``
pairs whose run-time sizes decide it (the first that is not 1, as broadcasting does).
The compiled wrapper sizes outputs from these specs without re-running any shape rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import SSAValue

from stageflow.codegen.kernels.rules import RULES
from stageflow.core.op_facts import ReductionKind
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.ir.builder import constant_value
from stageflow.ir.dialect import ConstantOp, ElementwiseOp, ReductionOp
from stageflow.ir.types import shaped_type

Sources = tuple[tuple[int, int], ...]  # (input index, axis) pairs deciding a dynamic dim
DimSpec = int | Sources


@dataclass(frozen=True)
class Step:
    """One op: ``values[result] = primitive(values[operands], **params)``."""

    primitive: Primitive
    operands: tuple[int, ...]
    result: int
    dtypes: tuple[np.dtype, ...]
    result_dtype: np.dtype
    params: dict[str, Any]


@dataclass(frozen=True)
class Reduction:
    """``values[result]`` is ``values[operand]`` combined by `kind` (the primitive's
    reduction kind: sum, prod, max, min) over `axes` of the iteration space (the operand
    spans it), kept as 1 with `keepdims`."""

    kind: ReductionKind
    operand: int
    result: int
    axes: tuple[int, ...]
    keepdims: bool
    dtype: np.dtype

    def reduced_spec(self, spec: tuple[DimSpec, ...]) -> tuple[DimSpec, ...]:
        """The dims of the result of reducing a value of dims `spec`."""
        if self.keepdims:
            return tuple(1 if a in self.axes else d for a, d in enumerate(spec))
        return tuple(d for a, d in enumerate(spec) if a not in self.axes)


@dataclass(frozen=True)
class Arg:
    """A kernel argument (an input, or an output the kernel writes)."""

    name: str
    type: ShapedType
    is_output: bool

    @property
    def shape(self) -> tuple[int | None, ...]:
        return self.type.shape

    @property
    def ndim(self) -> int:
        return len(self.type.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.type.dtype

    @property
    def is_static_scalar(self) -> bool:
        """One element whatever the call: read (or written) at stride 0 everywhere."""
        return all(d == 1 for d in self.shape)


@dataclass(frozen=True)
class Kernel:
    """An analysed kernel. Value numbers: inputs first, then one per op result."""

    name: str
    inputs: tuple[Arg, ...]
    outputs: tuple[Arg, ...]
    steps: tuple[Step, ...]
    results: tuple[int, ...]  # the value number each output takes
    shape: tuple[DimSpec, ...]  # the iteration space
    output_shapes: tuple[tuple[DimSpec, ...], ...]
    used_inputs: frozenset[int]
    reductions: tuple[Reduction, ...] = ()
    # called inside a loop: run many times, so worth optimising whatever its size
    repeated: bool = False

    @property
    def args(self) -> tuple[Arg, ...]:
        return self.inputs + self.outputs

    @property
    def rank(self) -> int:
        return len(self.shape)

    def is_live(self, index: int) -> bool:
        """Whether argument `index` is read or written (unused inputs are only checked)."""
        return index >= len(self.inputs) or index in self.used_inputs


def _combine(specs: list[DimSpec]) -> DimSpec:
    """The broadcast of dim specs: a static non-1 dim wins, else the union of sources."""
    sources: list[tuple[int, int]] = []
    for spec in specs:
        if isinstance(spec, int):
            if spec != 1:
                return spec
        else:
            sources.extend(s for s in spec if s not in sources)
    return tuple(sources) if sources else 1


def _aligned(specs: list[tuple[DimSpec, ...]], rank: int) -> list[DimSpec]:
    """Broadcast several shapes' specs, right-aligned to `rank` axes."""
    result = []
    for axis in range(rank):
        column = [s[axis - rank + len(s)] for s in specs if axis - rank + len(s) >= 0]
        result.append(_combine(column))
    return result


def _tensor_type(value: SSAValue, what: str,
                 rows: tuple[int, int] | None = None) -> ShapedType:
    """The value's type; with `rows` (rank, leading dim) of a row-split kernel, a value of
    that rank and leading dim gets its leading dim unknown (one broadcast along the rows
    keeps its type)."""
    if not isinstance(value.type, TensorType):
        raise NotImplementedError(f"{what} has type {value.type}; kernels take ranked tensors")
    ty = shaped_type(value.type)
    if rows is not None and len(ty.shape) == rows[0] and ty.shape[0] == rows[1]:
        return ShapedType((None, *ty.shape[1:]), ty.dtype)
    return ty


def split_rows(function: FuncOp) -> tuple[int, int] | None:
    """(rank, leading dim) where the kernel may run on blocks of rows, else None: the values
    of its highest rank share one leading dim (not 1), every other value broadcasts along
    it (a lower rank, or a leading dim of 1), and no reduction reduces the leading axis
    (each row of the iteration space then reduces into the same row of its results, which
    are left out). Constants must be 0-d: a splat would pin the leading dim."""
    block = function.body.block
    reductions = [op for op in block.ops if isinstance(op, ReductionOp)]
    if any(0 in op.params()["axes"] for op in reductions):
        return None
    reduced = {r for op in reductions for r in op.results}
    values = list(block.args) + [r for op in block.ops for r in op.results if r not in reduced]
    shapes = [v.type.get_shape() for v in values if isinstance(v.type, TensorType)]
    if len(shapes) != len(values):
        return None
    constants = {r for op in block.ops if isinstance(op, ConstantOp) for r in op.results}
    if any(s for v, s in zip(values, shapes, strict=True) if v in constants):
        return None
    varying = [tuple(s) for v, s in zip(values, shapes, strict=True) if v not in constants]
    rank = max((len(s) for s in varying), default=0)
    leads = {s[0] for s in varying if len(s) == rank and rank >= 1 and s[0] != 1}
    if len(leads) != 1:
        return None
    return rank, leads.pop()


def leading_dim_splittable(function: FuncOp) -> bool:
    """Whether the kernel may run on blocks of rows (`split_rows`) with every value of
    one rank (no broadcast operand): what the step plan splits, checking at run time that
    the arrays' shapes are all equal."""
    rows = split_rows(function)
    if rows is None:
        return False
    block = function.body.block
    constants = {r for op in block.ops if isinstance(op, ConstantOp) for r in op.results}
    reduced = {r for op in block.ops if isinstance(op, ReductionOp) for r in op.results}
    values = list(block.args) + [r for op in block.ops for r in op.results
                                 if r not in reduced and r not in constants]
    return all(len(v.type.get_shape()) == rows[0] and v.type.get_shape()[0] == rows[1]
               for v in values)


def _constant_params(op: ConstantOp) -> dict[str, Any]:
    value = constant_value(op)
    flat = value.reshape(-1)
    if flat.size == 0 or not np.all(flat.view(np.uint8).reshape(flat.size, -1)
                                    == flat[:1].view(np.uint8)):
        raise NotImplementedError(
            f"sf.constant of type {op.value.type} is not 0-d or a splat; kernels take only "
            "scalar constants (pass other tensors as arguments)"
        )
    return {"value": flat[:1]}


def analyse(function: FuncOp, dynamic_leading: bool = False, repeated: bool = False) -> Kernel:
    """The `Kernel` of an elementwise ``func.func``; ``NotImplementedError`` names what is
    not supported (a non-elementwise op, a non-splat constant, an unranked type).

    ``dynamic_leading=True`` (for a `leading_dim_splittable` kernel) compiles the leading
    dim as unknown, so that the same code runs on any block of rows; ``repeated=True``
    marks a kernel a loop calls (see `Kernel.repeated`)."""
    name = function.sym_name.data
    block = function.body.block
    rows = split_rows(function) if dynamic_leading else None
    numbers: dict[SSAValue, int] = {}
    specs: list[tuple[DimSpec, ...]] = []
    types: list[ShapedType] = []
    inputs = []
    for index, value in enumerate(block.args):
        ty = _tensor_type(value, f"argument #{index} of @{name}", rows)
        label = f"%{value.name_hint}" if value.name_hint else f"#{index}"
        inputs.append(Arg(f"argument {label}", ty, False))
        numbers[value] = index
        specs.append(tuple(d if d is not None else ((index, axis),)
                           for axis, d in enumerate(ty.shape)))
        types.append(ty)
    steps: list[Step] = []
    reductions: list[Reduction] = []
    results: tuple[int, ...] = ()
    for op in block.ops:
        if isinstance(op, ReturnOp):
            results = tuple(numbers[v] for v in op.operands)
            break
        if isinstance(op, ReductionOp) and op.primitive.reduction is not None:
            reduction = _reduction(op, numbers, len(specs), name)
            numbers[op.results[0]] = reduction.result
            specs.append(reduction.reduced_spec(specs[reduction.operand]))
            ty = _tensor_type(op.results[0], f"the result of {op.name}")
            if types[reduction.operand].shape[:1] == (None,) and ty.shape:
                ty = ShapedType((None, *ty.shape[1:]), ty.dtype)  # the rows it keeps
            types.append(ty)
            reductions.append(reduction)
            continue
        if not isinstance(op, ElementwiseOp | ConstantOp) or len(op.results) != 1:
            raise NotImplementedError(f"{op.name} is not an elementwise op; @{name} is not a "
                                      "kernel")
        primitive = op.primitive
        if primitive not in RULES:
            raise NotImplementedError(f"codegen has no lowering for {op.name}")
        params = _constant_params(op) if isinstance(op, ConstantOp) else op.params()
        ty = _tensor_type(op.results[0], f"the result of {op.name}",
                          None if isinstance(op, ConstantOp) else rows)
        operands = tuple(numbers[v] for v in op.operands)
        operand_specs = [specs[i] for i in operands]
        rank = len(ty.shape)
        combined = _aligned(operand_specs, rank) if operands else [1] * rank
        spec = tuple(d if d is not None else combined[axis] for axis, d in enumerate(ty.shape))
        numbers[op.results[0]] = len(specs)
        steps.append(Step(primitive, operands, len(specs),
                          tuple(types[i].dtype for i in operands), ty.dtype, params))
        specs.append(spec)
        types.append(ty)
    outputs = tuple(Arg(f"result #{j}", types[v], True) for j, v in enumerate(results))
    used = frozenset(i for step in steps for i in step.operands if i < len(inputs))
    used |= {v for v in results if v < len(inputs)}
    used |= {r.operand for r in reductions if r.operand < len(inputs)}
    reduced = {r.result for r in reductions}
    # Unused arguments are only checked against their own types, never iterated over.
    live = [spec for v, spec in enumerate(specs)
            if (v >= len(inputs) or v in used) and v not in reduced]
    rank = max((len(s) for s in live), default=0)
    shape = tuple(_aligned(live, rank))
    for reduction in reductions:
        _check_reduction(reduction, specs[reduction.operand], shape, steps, name)
    return Kernel(
        name=name,
        inputs=tuple(inputs),
        outputs=outputs,
        steps=tuple(steps),
        results=results,
        shape=shape,
        output_shapes=tuple(specs[v] for v in results),
        used_inputs=used,
        reductions=tuple(reductions),
        repeated=repeated,
    )


def _reduction(op: ReductionOp, numbers: dict[SSAValue, int], result: int,
               name: str) -> Reduction:
    """The `Reduction` an ``sf.reduce_*`` op of @`name` computes into value `result`."""
    kind = op.primitive.reduction
    assert kind is not None
    dtype = shaped_type(op.results[0].type).dtype
    if dtype not in kind.native_dtypes:
        raise NotImplementedError(f"{op.name} of {dtype} is not a reduction kernels compute "
                                  f"(@{name})")
    params = op.params()
    return Reduction(kind, numbers[op.operands[0]], result, tuple(params["axes"]),
                     bool(params["keepdims"]), dtype)


def _check_reduction(reduction: Reduction, operand: tuple[DimSpec, ...],
                     space: tuple[DimSpec, ...], steps: list[Step], name: str) -> None:
    """A reduction's operand must span the iteration space (each of its elements is then
    visited once), and its result must only be returned (the loop that computes it is the
    kernel's own)."""
    same = len(operand) == len(space) and all(
        d == s if isinstance(d, int) or isinstance(s, int) else set(d) == set(s)
        for d, s in zip(operand, space, strict=True))
    if not same:
        raise NotImplementedError(f"a reduction of @{name} does not span its iteration space")
    if any(reduction.result in step.operands for step in steps):
        raise NotImplementedError(f"a reduction's result is used inside @{name}")
