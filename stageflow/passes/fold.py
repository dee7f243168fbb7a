"""`fold`: compute ops on constants at compile time, with the primitives' own eager kernels.

Why the eager kernels: they are the definition of every op (the reference compiled code is
tested against), so a folded value is by construction the value the op would have computed
at run time; there is no second implementation of any op's arithmetic to keep in step.
Traced code folds more than one might think: captured NumPy arrays, Python scalars turned
into constants and shape arithmetic all arrive as ``sf.constant``s.

Region ops are never given to a kernel (``cond``'s and ``while``'s kernels run frontend
graphs, which the IR does not have): an ``sf.cond`` whose index is a constant is replaced by
the region it would run, and an ``sf.while`` whose condition is false on its initial
values by those values. Ops inside regions fold like any other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from stageflow.ir.attributes import SymbolRef
from stageflow.ir.builder import build_constant, constant_value
from stageflow.ir.control import CondOp, WhileOp, free_values, nested_ops
from stageflow.ir.dialect import ConstantOp, SfOp
from stageflow.ir.types import dtype_of
from stageflow.passes.registry import register_pass
from stageflow.passes.support import (
    constant_array,
    erase_dead_producers,
    is_stateful,
    same_type,
    static_size,
)
from stageflow.primitives.control import branch_index


@register_pass
@dataclass(frozen=True)
class Fold(ModulePass):
    """Replace an op whose operands are all constants by constants of its results.

    Before::

        %0 = sf.constant dense<[1.0, 2.0]> : tensor<2xf32>
        %1 = sf.constant dense<3.0> : tensor<f32>
        %2 = sf.multiply %0, %1 : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>

    After::

        %2 = sf.constant dense<[3.0, 6.0]> : tensor<2xf32>

    The op is folded only if it is not stateful, every result has a static type with at
    most `max_elements` elements or no more than its largest operand (so folding never
    turns a cheap ``sf.iota`` or broadcast into a huge literal, while a frozen model's
    batch norm of 2048 channels, its scale ``gamma * rsqrt(var + eps)``, folds as a small
    one does) and its kernel succeeds (an out-of-range ``sf.gather`` is left to
    fail at run time, where the error belongs). Constants left unused are erased; results
    keep their declared types exactly. Calls are never folded.

    An ``sf.cond`` whose index is a constant becomes the ops of the region it selects
    (moved before it, effects included: they run exactly when the cond would have run
    them) and its results the values that region yields; an ``sf.while`` whose condition
    region computes false from the constant values it starts with (evaluated like any
    folded op) runs no iteration, and its results are its operands. Either only when the
    replacing values have exactly the results' types.
    """

    name = "fold"

    max_elements: int = 1024

    def __post_init__(self) -> None:
        if self.max_elements < 0:
            raise ValueError(f"max-elements must be >= 0, got {self.max_elements}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # Pre-order: an index or a loop's initial values are folded before their region op,
        # and the ops a folded cond moves out are visited after it.
        for candidate in list(op.walk()):
            if not _inside(candidate, op):  # erased with a region that was not taken
                continue
            if isinstance(candidate, CondOp):
                _fold_cond(candidate)
            elif isinstance(candidate, WhileOp):
                self._fold_while(candidate)
            else:
                self._fold(candidate)

    def _fold(self, op: Operation) -> None:
        if not isinstance(op, SfOp) or isinstance(op, ConstantOp) or op.regions:
            return
        arrays = [constant_array(operand) for operand in op.operands]
        if any(array is None for array in arrays):
            return
        constants = self._evaluate(op, arrays)  # type: ignore[arg-type]
        if constants is None:
            return
        operands = list(op.operands)
        Rewriter.replace_op(op, constants, [c.result for c in constants])
        erase_dead_producers(operands)

    def _evaluate(self, op: SfOp, arrays: list[np.ndarray]) -> list[ConstantOp] | None:
        """Unattached constants of `op`'s results on `arrays` by its kernel, each of exactly
        its result's type; None where the op must not fold (stateful, too large, failing,
        a call)."""
        if op.primitive.stateful:
            return None
        sizes = [static_size(result.type) for result in op.results]
        limit = max([self.max_elements, *(array.size for array in arrays)])
        if any(size is None or size > limit for size in sizes):
            return None
        try:
            params = op.params()
            if any(isinstance(value, SymbolRef) for value in params.values()):
                return None
            with np.errstate(all="ignore"):  # 1/0 folds to inf, as it runs
                outputs = op.primitive.kernel(*arrays, **params)
        except Exception:  # the op fails on these values: leave it to fail when it runs
            return None
        if not op.primitive.multiple_results:
            outputs = (outputs,)
        constants = []
        for output, result in zip(outputs, op.results, strict=True):
            assert isinstance(result.type, TensorType)
            array = np.asarray(output)
            if array.shape != tuple(result.type.get_shape()):
                return None
            constant = build_constant(array.astype(dtype_of(result.type.get_element_type())))
            constant.location = op.location
            constant.result.name_hint = result.name_hint
            if constant.result.type != result.type:
                return None
            constants.append(constant)
        return constants

    def _fold_while(self, op: WhileOp) -> None:
        """Replace `op` by its operands if its condition is false on them (and has no
        effects: it runs once even then)."""
        if not all(same_type(init, result)
                   for init, result in zip(op.operands, op.results, strict=True)):
            return
        if any(is_stateful(inner) for inner in nested_ops(op.cond_region)):
            return
        block = op.cond_region.block
        known: dict[SSAValue, np.ndarray] = {}
        for arg, init in zip(block.args, op.operands, strict=True):
            if (array := constant_array(init)) is not None:
                known[arg] = array
        for inner in block.ops:
            if isinstance(inner, ConstantOp):
                known[inner.result] = constant_value(inner)
                continue
            arrays = [known.get(v, constant_array(v)) for v in inner.operands]
            if not isinstance(inner, SfOp) or inner.regions or any(a is None for a in arrays):
                continue  # unknown: only matters if the predicate depends on it
            constants = self._evaluate(inner, arrays)  # type: ignore[arg-type]
            if constants is not None:
                known.update((result, constant_value(constant))
                             for result, constant in zip(inner.results, constants, strict=True))
        predicate = known.get(op.yields(op.cond_region).operands[0])
        if predicate is not None and not bool(predicate):
            above = free_values(op)
            Rewriter.replace_op(op, [], list(op.operands))
            erase_dead_producers(above)


def _fold_cond(op: CondOp) -> None:
    """Replace `op` by the region its constant index selects, if it has one."""
    index_value = op.index
    index = constant_array(index_value)
    if index is None:
        return
    region = op.branches[branch_index(index, len(op.branches))]
    yielded = op.yields(region)
    values = list(yielded.operands)
    if not all(same_type(value, result)
               for value, result in zip(values, op.results, strict=True)):
        return
    above = [index_value, *free_values(op)]
    moved = [inner for inner in region.block.ops if inner is not yielded]
    for inner in moved:
        inner.detach()
    Rewriter.insert_op(moved, InsertPoint.before(op))
    Rewriter.replace_op(op, [], values)
    erase_dead_producers(above)


def _inside(op: Operation, module: ModuleOp) -> bool:
    """Whether `op` is still in `module` (not erased with an enclosing op)."""
    parent: Operation | None = op
    while parent is not None and parent is not module:
        parent = parent.parent_op()
    return parent is module
