"""`fuse`: outline groups of elementwise ops, and the reductions they end in, into kernel
functions called from their place.

Elementwise ops are where an ML program spends its memory bandwidth: each one run alone
reads its operands from memory and writes its result back. Code generation compiles a
*kernel* (a function of elementwise ops, ending in reductions of their values or not, see
`stageflow.codegen.kernels.analysis`) into one loop nest that keeps every intermediate value in
registers. This pass makes those kernels: it partitions the elementwise ops of each
function into groups (`fuse_groups`), moves each group into a new ``func.func`` marked
``sf.kernel``, and replaces it by one ``sf.call``.
Every elementwise op the program runs then runs compiled, several to a loop where possible.
First, a matmul followed by a scaled add becomes one `matmul_add` (`fuse_matmul`): the BLAS
adds the addend itself, and what follows the add still fuses into a kernel.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriteWalker
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import IsTerminator

from stageflow.ir.attributes import SymbolRef
from stageflow.ir.builder import build_function, build_op, source_location
from stageflow.ir.control import ControlOp, nested_ops
from stageflow.ir.dialect import ConstantOp, ReductionOp
from stageflow.passes.fuse_groups import (
    IsEffect,
    Rejection,
    dependencies,
    find_groups,
    is_fusible_reduction,
    is_scalar_constant,
)
from stageflow.passes.fuse_matmul import MatmulEpilogue
from stageflow.passes.registry import register_pass
from stageflow.passes.support import callee_name, fresh_names, functions, is_stateful
from stageflow.primitives.functional import call_p

# The unit attribute marking a kernel function (``attributes {sf.kernel}``): code generation
# compiles it whole, and passes leave it alone (fuse never fuses into one).
KERNEL_ATTR = "sf.kernel"


def is_kernel(function: FuncOp) -> bool:
    """Whether `function` is a kernel that `fuse` outlined."""
    return KERNEL_ATTR in function.attributes


def kernel_ops(kernel: FuncOp) -> list[str]:
    """The names of the ops fused into `kernel`, in order (its return left out)."""
    return [op.name for op in kernel.body.block.ops if not op.has_trait(IsTerminator)]


def reduced_results(kernel: FuncOp) -> frozenset[int]:
    """The indices of the kernel's results that reductions compute: smaller than its
    iteration space, and written before its inputs are all read (no in-place writes)."""
    returned = kernel.body.block.last_op
    assert returned is not None
    return frozenset(j for j, value in enumerate(returned.operands)
                     if isinstance(value.owner, ReductionOp))


@register_pass
@dataclass(frozen=True)
class Fuse(ModulePass):
    """Outline each group of connected elementwise ops into a kernel function and call it.

    Before::

        func.func @f(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4xf32> {
          %h = sf.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
          %t = sf.tanh %h : (tensor<4x8xf32>) -> tensor<4x8xf32>
          %s = sf.reduce_sum %t {axes = [1], keepdims = false} : (tensor<4x8xf32>) -> tensor<4xf32>
          %c = sf.constant dense<2.0> : tensor<f32>
          %y = sf.multiply %s, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
          func.return %y : tensor<4xf32>
        }

    After (the reduction ends the kernel of the values it reduces, see `fuse_groups`)::

        func.func @f(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4xf32> {
          %s = sf.call %x, %b {callee = @f_kernel0} : (tensor<4x8xf32>, tensor<8xf32>) -> ...
          %y = sf.call %s {callee = @f_kernel1} : (tensor<4xf32>) -> tensor<4xf32>
          func.return %y : tensor<4xf32>
        }
        func.func @f_kernel0(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4xf32>
            attributes {sf.kernel} {
          %h = sf.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
          %t = sf.tanh %h : (tensor<4x8xf32>) -> tensor<4x8xf32>
          %s = sf.reduce_sum %t {axes = [1], keepdims = false} : (tensor<4x8xf32>) -> tensor<4xf32>
          func.return %s : tensor<4xf32>
        }
        func.func @f_kernel1(%s: tensor<4xf32>) -> tensor<4xf32> attributes {sf.kernel} {
          %c = sf.constant dense<2.0> : tensor<f32>
          %y = sf.multiply %s, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
          func.return %y : tensor<4xf32>
        }

    A kernel's arguments are the group's operands from outside it, in the order of first use
    (0-d and splat constants are cloned in instead); its results are the group's values used
    outside it, in the order of definition. Kernels are named ``@<caller>_kernel<N>`` and
    placed after their caller. Groups hold at most `max_ops` ops. The call replaces the
    group at its last op; ops between that used one of its values move after the call, the
    effects keeping their order. Kernels themselves are never fused again, so a second run
    changes nothing. The ops of each ``sf.cond`` and ``sf.while`` region are grouped on their
    own, block by block: a group never spans a region's boundary (a kernel call runs all
    of its ops, and a region's ops run only when, and as often as, the region does), and
    a region op is one node of its block's graph, reading what its regions read from
    above. Before grouping, ``alpha * (a @ b) + c`` becomes one ``sf.matmul_add``
    (`stageflow.passes.fuse_matmul`). With ``reductions=false`` (for targets whose kernels
    are elementwise only, PTX) reductions stay ops of their own. Values broadcast into a
    group that take more than one cheap op to compute are a kernel of their own, computed
    once (`fuse_groups._computed_once`); with ``recompute=true`` (PTX, where a launch
    costs more than the arithmetic) they join their users.
    """

    name = "fuse"

    max_ops: int = 256
    reductions: bool = True
    recompute: bool = False

    def __post_init__(self) -> None:
        if self.max_ops < 1:
            raise ValueError(f"max-ops must be >= 1, got {self.max_ops}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(MatmulEpilogue(), apply_recursively=False).rewrite_module(op)
        table = functions(op)
        kernels = {name for name, function in table.items() if is_kernel(function)}
        taken = set(table)

        def is_effect(o: Operation) -> bool:  # a call of a kernel is pure
            if isinstance(o, ControlOp):  # its contents' effects
                return any(is_effect(inner) for r in o.regions for inner in nested_ops(r))
            return is_stateful(o) and callee_name(o) not in kernels

        for caller, function in table.items():
            if caller in kernels or not function.body.blocks:
                continue
            names = fresh_names(f"{caller}_kernel", taken)
            blocks = [b for o in function.walk() for r in o.regions for b in r.blocks]
            outlined: list[FuncOp] = []
            for block in blocks:
                outlined += fuse_block(block, self.max_ops, is_effect, names, kernels,
                                       self.reductions, self.recompute)
            if outlined:
                Rewriter.insert_op(outlined, InsertPoint.after(function))


def fuse_block(
    block: Block, max_ops: int, is_effect: IsEffect, names: Iterator[str], kernels: set[str],
    reductions: bool = True, recompute: bool = False,
) -> list[FuncOp]:
    """Outline the fusion groups of `block`, adding their names to `kernels`; the kernels.
    Inside `fusion_notes`, why each kernel's neighbours stayed out of it is noted."""
    sink = _NOTES.get()
    rejected: list[Rejection] | None = [] if sink is not None else None
    groups = find_groups(block, max_ops, is_effect, reductions, rejected, recompute)
    named = [(group, next(names)) for group in groups]
    if sink is not None:
        sink.extend(_notes(named, rejected or [], reductions))
    outlined = []
    for group, name in named:
        kernel = outline(group, name)
        kernels.add(kernel.sym_name.data)
        outlined.append(kernel)
    if outlined:
        sort_block(block, is_effect)
    return outlined


@dataclass(frozen=True)
class FusionNote:
    """Why `neighbour` (an op, or another kernel's op) is not in kernel `kernel`."""

    kernel: str
    neighbour: str
    reason: str


_NOTES: ContextVar[list[FusionNote] | None] = ContextVar("fusion_notes", default=None)


@contextmanager
def fusion_notes() -> Iterator[list[FusionNote]]:
    """Collect, while the block runs, why `fuse` left each kernel's neighbours out of it:
    the merges it turned down (with their reason) and the ops next to a kernel that no
    kernel can hold (`stageflow report` shows them)."""
    notes: list[FusionNote] = []
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)


def _notes(named: list[tuple[list[Operation], str]], rejected: list[Rejection],
           reductions: bool) -> list[FusionNote]:
    kernel_of = {op: name for group, name in named for op in group}

    def describe(op: Operation) -> str:
        where = source_location(op)
        inside = f" (in @{kernel_of[op]})" if op in kernel_of else ""
        return f"{op.name}{inside}" + (f" at {where.filename}:{where.line}" if where else "")

    notes = []
    for a, b, why in rejected:
        if a not in kernel_of:  # a reduction left out of b's kernel
            a, b = b, a
        if kernel_of.get(a) != kernel_of.get(b):
            notes.append(FusionNote(kernel_of.get(a, describe(a)), describe(b), why))
    for group, name in named:
        members = set(group)
        seen: set[Operation] = set()
        neighbours = [v.owner for op in group for v in op.operands]
        neighbours += [use.operation for op in group for r in op.results for use in r.uses]
        for other in neighbours:
            if (isinstance(other, Operation) and other not in members and other not in seen
                    and other not in kernel_of and not other.has_trait(IsTerminator)):
                seen.add(other)
                why = _not_fusible(other, reductions)
                note = FusionNote(name, describe(other), why)
                if why and not any(n.kernel == name and n.neighbour == note.neighbour
                                   for n in notes):
                    notes.append(note)
    return notes


def _not_fusible(op: Operation, reductions: bool) -> str:
    """Why no kernel holds `op` ('' for a constant a kernel clones or an op noted already)."""
    if isinstance(op, ConstantOp):
        return "" if is_scalar_constant(op.results[0]) else "a constant: a kernel argument"
    if isinstance(op, ControlOp):
        return "a region op: a kernel never spans a region's boundary"
    if is_fusible_reduction(op):
        return ("a reduction ends only the kernel computing its operand" if reductions else
                "a reduction, and this target's kernels are elementwise")
    if isinstance(op, ReductionOp):
        return "a reduction of a kind or dtype kernels do not accumulate"
    if is_stateful(op):
        return "it has effects (state, randomness or a callback): it keeps its place"
    return f"{op.name} is not elementwise (kernels hold elementwise ops and their reductions)"


def outline(group: list[Operation], name: str) -> FuncOp:
    """Move `group` (ops of one block, in order) into the kernel ``@name`` and replace it
    by a call placed after its last op; the kernel. The caller may need `sort_block`."""
    members = set(group)
    args: dict[SSAValue, None] = {}
    constants: dict[SSAValue, None] = {}
    for op in group:
        for value in op.operands:
            if value.owner not in members:
                (constants if is_scalar_constant(value) else args)[value] = None
    outputs = [
        result
        for op in group
        for result in op.results
        if any(use.operation not in members for use in result.uses)
    ]
    kernel = build_function(name, [v.type for v in args], _body(group, list(args), outputs),
                            group[0].location)
    kernel.attributes[KERNEL_ATTR] = UnitAttr()
    call = build_op(call_p, list(args), {"callee": SymbolRef(name)}, [v.type for v in outputs])
    call.location = group[-1].location
    Rewriter.insert_op(call, InsertPoint.after(group[-1]))
    for old, new in zip(outputs, call.results, strict=True):
        new.name_hint = old.name_hint
        old.replace_all_uses_with(new)
    for op in reversed(group):
        Rewriter.erase_op(op)
    for constant in constants:  # the kernel has its own copy now
        owner = constant.owner
        if isinstance(owner, Operation) and not constant.uses and owner.parent is not None:
            Rewriter.erase_op(owner)
    return kernel


def _body(
    group: list[Operation], args: list[SSAValue], outputs: list[SSAValue]
) -> Callable[..., tuple[list[Operation], list[SSAValue]]]:
    """The `build_function` body of a kernel: `group` cloned, reading its block arguments
    for `args` and its own clones of the constants it reads, returning `outputs`."""

    def body(block_args: tuple[SSAValue, ...]) -> tuple[list[Operation], list[SSAValue]]:
        mapping: dict[SSAValue, SSAValue] = {}
        for value, arg in zip(args, block_args, strict=True):
            arg.name_hint = value.name_hint
            mapping[value] = arg
        ops: list[Operation] = []
        for op in group:
            for value in op.operands:
                if value not in mapping:  # a scalar constant, cloned before its first use
                    assert isinstance(value.owner, Operation)
                    ops.append(value.owner.clone(value_mapper=mapping))
            ops.append(op.clone(value_mapper=mapping))
        return ops, [mapping[v] for v in outputs]

    return body


def sort_block(block: Block, is_effect: IsEffect) -> None:
    """Order `block`'s ops so that each follows the ops it depends on and the effects keep
    their order, moving as few as possible (a stable topological sort by position)."""
    ops = list(block.ops)
    terminator = ops.pop() if ops and ops[-1].has_trait(IsTerminator) else None
    deps = dependencies(ops, is_effect)
    waiting = [len(d) for d in deps]
    users: list[list[int]] = [[] for _ in ops]
    for i, producers in enumerate(deps):
        for j in producers:
            users[j].append(i)
    ready = [i for i, count in enumerate(waiting) if count == 0]
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for user in users[i]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, user)
    if len(order) != len(ops):
        raise AssertionError("fusion left a cycle between a kernel call and its users")
    if order == sorted(order):
        return
    for op in ops:
        block.detach_op(op)
    sorted_ops = [ops[i] for i in order]
    if terminator is not None:
        block.insert_ops_before(sorted_ops, terminator)
    else:
        block.add_ops(sorted_ops)
