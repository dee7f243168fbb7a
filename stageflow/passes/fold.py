"""`fold`: compute ops on constants at compile time, with the primitives' own eager kernels.

Why the eager kernels: they are the definition of every op (the reference compiled code is
tested against), so a folded value is by construction the value the op would have computed
at run time; there is no second implementation of any op's arithmetic to keep in step.
Traced code folds more than one might think: captured NumPy arrays, Python scalars turned
into constants and shape arithmetic all arrive as ``sf.constant``s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from stageflow.ir.attributes import SymbolRef
from stageflow.ir.builder import build_constant
from stageflow.ir.control import CondOp
from stageflow.ir.dialect import ConstantOp, SfOp
from stageflow.ir.types import dtype_of
from stageflow.passes.registry import register_pass
from stageflow.passes.support import constant_array, erase_dead_producers, static_size
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
    most `max_elements` elements (so folding never turns a cheap ``sf.iota`` or broadcast
    into a huge literal) and its kernel succeeds (an out-of-range ``sf.gather`` is left to
    fail at run time, where the error belongs). Constants left unused are erased; results
    keep their declared types exactly. Calls are never folded; an ``sf.cond`` whose
    operand is a constant is replaced by the region it selects, inlined before it (where
    what that region yields has exactly the cond's result types).
    """

    name = "fold"

    max_elements: int = 1024

    def __post_init__(self) -> None:
        if self.max_elements < 0:
            raise ValueError(f"max-elements must be >= 0, got {self.max_elements}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for candidate in list(op.walk()):
            if candidate.parent is not None:
                self._fold(candidate)

    def _fold(self, op: Operation) -> None:
        if isinstance(op, CondOp):
            _select_branch(op)
            return
        if not isinstance(op, SfOp) or isinstance(op, ConstantOp) or op.primitive.stateful:
            return
        if op.regions:
            return
        sizes = [static_size(result.type) for result in op.results]
        if any(size is None or size > self.max_elements for size in sizes):
            return
        arrays = [constant_array(operand) for operand in op.operands]
        if any(array is None for array in arrays):
            return
        try:
            params = op.params()
            if any(isinstance(value, SymbolRef) for value in params.values()):
                return
            with np.errstate(all="ignore"):  # 1/0 folds to inf, as it runs
                outputs = op.primitive.kernel(*arrays, **params)
        except Exception:  # the op fails on these values: leave it to fail when it runs
            return
        if not op.primitive.multiple_results:
            outputs = (outputs,)
        constants = []
        for output, result in zip(outputs, op.results, strict=True):
            assert isinstance(result.type, TensorType)
            array = np.asarray(output)
            if array.shape != tuple(result.type.get_shape()):
                return
            constant = build_constant(array.astype(dtype_of(result.type.get_element_type())))
            constant.location = op.location
            constant.result.name_hint = result.name_hint
            if constant.result.type != result.type:
                return
            constants.append(constant)
        operands = list(op.operands)
        Rewriter.replace_op(op, constants, [c.result for c in constants])
        erase_dead_producers(operands)


def _select_branch(op: CondOp) -> None:
    """Inline the region a constant index selects in place of the cond."""
    index = constant_array(op.index)
    if index is None:
        return
    region = op.branches[branch_index(index, len(op.branches))]
    terminator = region.block.last_op
    yielded = list(terminator.operands)
    if [v.type for v in yielded] != [r.type for r in op.results]:
        return  # a result with an unknown dim would change type: the cond stays
    block = op.parent_block()
    for inner in list(region.block.ops)[:-1]:
        inner.detach()
        block.insert_op_before(inner, op)
    for result, value in zip(op.results, yielded, strict=True):
        result.replace_all_uses_with(value)
    operands = list(op.operands)
    Rewriter.erase_op(op)
    erase_dead_producers(operands)
