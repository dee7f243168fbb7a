"""`hoist-invariant`: what a function computes from variables it never writes, moved into
a function of its own whose results the runtime keeps until one of those variables changes.

A model called for inference reads its weights and, before using them, transforms them the
same way on every call: under the ``mixed_bfloat16`` policy each float32 kernel is cast to
bfloat16 (a ResNet-50 reads 100 MB and writes 50 MB for that alone), a batch norm turns its
four variables into a scale and a shift. `Function.freeze` removes that work by making the
weights constants, at the price of no longer seeing later writes. This pass removes it
while the variables stay variables: the ops of the entry block that depend only on reads of
variables the function does not write (and on constants), and whose results the rest of
the function uses, move into ``@<name>_invariant``, which takes those variables' handles and
returns the values; ``@<name>`` takes them as arguments after its own and names its
partner in ``sf.invariant`` (with the positions of the handles it passes it in
``sf.invariant_reads``). The runtime (`runtime.invariant`) calls the partner when a call
finds a variable holding another value than the last call did (every write replaces the
array a variable holds), and otherwise passes the values it kept.

A value moves only if computing it does work (not a bare read, nor only aliases of reads
such as reshapes: a transpose copies in a compiled program, as the layout `prepack` gives a
variable's filters does) and its bytes are at most those of the variables it is computed
from, so the values kept never outgrow the weights they come from (a cast to bfloat16
keeps half); of a larger one (a broadcast) what it is computed from moves instead. Reads
of a variable the function writes, ops inside regions, and functions holding a
``py_func`` (which may write any variable from Python) are left alone; so are functions
other ops call, whose signature their callers fix. Runs after `cse`, so that equal
transforms are one value, and after `prepack`, whose layouts of variables' filters it
keeps, and before `fuse`, which then makes kernels of both functions.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, ModuleOp, SymbolRefAttr, i64
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from stageflow.core.op_facts import Effect
from stageflow.ir.builder import build_function
from stageflow.ir.dialect import ConstantOp, SfOp
from stageflow.ir.types import ResourceTensorType, shaped_type
from stageflow.passes.fuse import is_kernel
from stageflow.passes.registry import register_pass
from stageflow.passes.support import callee_name, effects_of, fresh_names, functions, is_op
from stageflow.primitives.state import read_variable_p

INVARIANT_ATTR = "sf.invariant"  # on a function: its partner computing the hoisted values
READS_ATTR = "sf.invariant_reads"  # the positions of the handles the partner takes


@register_pass
@dataclass(frozen=True)
class HoistInvariant(ModulePass):
    """Move the weights' transforms of each entry function into its ``_invariant`` partner.

    Before::

        func.func @f(%x: tensor<2x8xbf16>, %w: !sf.resource<tensor<8x4xf32>>)
            -> tensor<2x4xbf16> {
          %r = sf.read_variable %w : (!sf.resource<tensor<8x4xf32>>) -> tensor<8x4xf32>
          %c = sf.cast %r {dtype = bf16} : (tensor<8x4xf32>) -> tensor<8x4xbf16>
          %y = sf.matmul %x, %c : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
          func.return %y : tensor<2x4xbf16>
        }

    After::

        func.func @f(%x: tensor<2x8xbf16>, %w: !sf.resource<tensor<8x4xf32>>,
                     %c: tensor<8x4xbf16>) -> tensor<2x4xbf16>
            attributes {sf.invariant = @f_invariant, sf.invariant_reads = array<i64: 1>} {
          %y = sf.matmul %x, %c : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
          func.return %y : tensor<2x4xbf16>
        }
        func.func @f_invariant(%w: !sf.resource<tensor<8x4xf32>>) -> tensor<8x4xbf16> {
          %r = sf.read_variable %w : (!sf.resource<tensor<8x4xf32>>) -> tensor<8x4xf32>
          %c = sf.cast %r {dtype = bf16} : (tensor<8x4xf32>) -> tensor<8x4xbf16>
          func.return %c : tensor<8x4xbf16>
        }
    """

    name = "hoist-invariant"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        taken = set(functions(op))
        for function in hoisted_functions(op):
            name = next(fresh_names(f"{function.sym_name.data}_invariant", taken, bare=True))
            partner = _hoist(function, name)
            if partner is not None:
                op.body.block.insert_op_after(partner, function)


def hoisted_functions(module: ModuleOp) -> list[FuncOp]:
    """The functions the pass gives partners: those no op calls, neither kernels nor
    partners, not given one already."""
    table = functions(module)
    called = {callee_name(inner) for inner in module.walk()}
    partners = {found[0] for f in table.values() if (found := invariant_partner(f))}
    return [function for name, function in table.items()
            if not (name in called or name in partners or is_kernel(function)
                    or not function.body.blocks or INVARIANT_ATTR in function.attributes)]


def invariant_ops(function: FuncOp) -> set[Operation]:
    """The ops of `function`'s entry block (not inside regions) computing from reads of
    variables it never writes and from constants only: what the pass may move; none in a
    function holding a callback."""
    if any(effects_of(inner) & Effect.CALLBACK for inner in function.body.ops):
        return set()
    block = function.body.blocks[0]
    return _invariant_ops(block, _unwritten_handles(block))


def _hoist(function: FuncOp, name: str) -> FuncOp | None:
    """Move `function`'s invariant values into ``@name``; that function, or None where
    nothing is worth moving."""
    block = function.body.blocks[0]
    handles = _unwritten_handles(block)
    invariant = invariant_ops(function)
    moved = list(dict.fromkeys(
        kept for v in _frontier(block, invariant) for kept in _kept_values(v)))
    if not moved:
        return None
    slice_ops = _producers(moved)
    read = {o.operands[0] for o in slice_ops if is_op(o, read_variable_p)}
    reads = [h for h in handles if h in read]

    def body(args):
        mapping: dict[SSAValue, SSAValue] = dict(zip(reads, args, strict=True))
        for handle, arg in mapping.items():
            arg.name_hint = handle.name_hint
        ops = [o.clone(mapping) for o in block.ops if o in slice_ops]
        return ops, [mapping[v] for v in moved]

    partner = build_function(name, [h.type for h in reads], body, function.location)
    for value in moved:
        argument = block.insert_arg(value.type, len(block.args))
        argument.name_hint = value.name_hint
        value.replace_all_uses_with(argument)
    for dead in reversed([o for o in block.ops if o in slice_ops]):
        if not any(r.uses for r in dead.results):
            Rewriter.erase_op(dead)
    function.update_function_type()
    function.attributes[INVARIANT_ATTR] = SymbolRefAttr(name)
    function.attributes[READS_ATTR] = DenseArrayBase.from_list(i64, [h.index for h in reads])
    return partner


def _unwritten_handles(block: Block) -> list[BlockArgument]:
    """The variables' handles among `block`'s arguments that only reads use."""
    return [arg for arg in block.args if isinstance(arg.type, ResourceTensorType)
            and all(is_op(use.operation, read_variable_p) for use in arg.uses)]


def _invariant_ops(block: Block, handles: list[BlockArgument]) -> set[Operation]:
    """The ops of `block` (not inside regions) computing from reads of `handles` and
    constants only, in one pass in order."""
    readable = set(handles)
    invariant: set[Operation] = set()
    for op in block.ops:
        if is_op(op, read_variable_p):
            if op.operands[0] in readable:
                invariant.add(op)
        elif (isinstance(op, SfOp) and not op.regions and not effects_of(op)
              and all(v.owner in invariant for v in op.operands)):
            invariant.add(op)
    return invariant


def _frontier(block: Block, invariant: set[Operation]) -> Iterator[SSAValue]:
    """The invariant ops' results that some other op (the return included) uses, in order."""
    for op in block.ops:
        if op in invariant:
            for result in op.results:
                if any(use.operation not in invariant for use in result.uses):
                    yield result


def _producers(values: list[SSAValue]) -> set[Operation]:
    """The ops `values` are computed by, transitively."""
    ops: set[Operation] = set()
    stack = [v.owner for v in values]
    while stack:
        op = stack.pop()
        if isinstance(op, Operation) and op not in ops:
            ops.add(op)
            stack.extend(v.owner for v in op.operands)
    return ops


def _kept_values(value: SSAValue) -> list[SSAValue]:
    """What to keep for `value`: itself if computing it costs work (an op beyond reads,
    constants and aliases such as reshapes: a transpose or a slice copies in a compiled
    program) from at least one variable and it takes no more bytes than the variables it
    reads; where it is larger (a broadcast), what it is computed from."""
    ops = _producers([value])
    reads = [o for o in ops if is_op(o, read_variable_p)]
    working = [o for o in ops if not is_op(o, read_variable_p) and not isinstance(o, ConstantOp)
               and not (isinstance(o, SfOp) and o.primitive.aliases)]
    if not reads or not working:
        return []
    read_bytes = [_bytes(o.results[0]) for o in reads]
    size = _bytes(value)
    if size is None or None in read_bytes:
        return []
    if size <= sum(read_bytes):
        return [value]
    owner = value.owner
    assert isinstance(owner, Operation)
    return [kept for operand in owner.operands for kept in _kept_values(operand)]


def _bytes(value: SSAValue) -> int | None:
    """The bytes of a tensor value of static shape, else None."""
    try:
        aval = shaped_type(value.type)
    except TypeError:
        return None
    if None in aval.shape:
        return None
    return int(np.prod(aval.shape, dtype=np.int64)) * np.dtype(aval.dtype).itemsize


def invariant_partner(function: FuncOp) -> tuple[str, tuple[int, ...]] | None:
    """The partner this pass gave `function` and the positions of the handles it passes
    it, or None where it has none."""
    partner = function.attributes.get(INVARIANT_ATTR)
    if not isinstance(partner, SymbolRefAttr):
        return None
    reads = function.attributes[READS_ATTR]
    assert isinstance(reads, DenseArrayBase)
    return partner.root_reference.data, tuple(reads.get_values())
