"""`plan-buffers`: when each temporary tensor is live, which buffer holds it, and how many
bytes a call needs at its peak, written into the IR for the runtime and for people.

A compiled function allocates one array per op result; most die a few ops later. This pass
computes each temporary's live range (from the op that writes it to its last reader),
assigns temporaries to numbered buffers (a buffer is reused once every reader of its value
has run; an elementwise kernel writes in place into an input that dies at that call), and
records two figures: the bytes of those buffers (what a preallocated arena would need) and
the liveness lower bound (the most bytes live at any one op, which no assignment can beat).
The runtime drops each value after its last reader and honours the in-place decisions, so
what it holds at its peak is the lower bound; `ConcreteFunction.stats()` reports both.

What counts as a temporary: a tensor result of an op of the function. Not counted: the
function's arguments, ``sf.constant`` results (held by the executable), ``sf.read_variable``
results (a variable's storage), the returned values and the values stored into variables
(they outlive the call), and any value sharing memory with one of those: whatever the
primitive's `memory` fact calls external. Views (``sf.reshape``, ``sf.broadcast_to``,
``sf.transpose``, ``sf.slice``, ``sf.stop_gradient``: primitives whose `view` fact says their
kernels may return their operand's memory) are no allocation of their own: they keep
their operand's buffer live until their own last reader. Values with an unknown dim get a
buffer each, never shared, and are left out of both figures; ``sf.unsized_temporaries``
says how many there are. A call of another (non-kernel) function counts its results only;
its own temporaries are in that function's attributes. A region op (``sf.cond``,
``sf.while``) reads the values its regions use from above, so they live until it has run;
its results may be such values themselves, or views of them (a branch yielding its operand,
a loop running no iteration), so they are never overwritten in place, and what the op
reads lives as long as its results do (an in-place kernel call writing into a value the
op's result still shares would change that result too). The regions' own values are not
planned (they live as long as one run of the region) and carry no annotations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from stageflow.core.op_facts import Memory
from stageflow.ir.attributes import encode
from stageflow.ir.control import ControlOp, free_values
from stageflow.ir.dialect import ConstantOp, SfOp
from stageflow.ir.types import dtype_of
from stageflow.passes.fuse import is_kernel, reduced_results
from stageflow.passes.registry import register_pass
from stageflow.passes.support import callee_name, functions, is_op, static_size
from stageflow.primitives.functional import call_p
from stageflow.primitives.state import assign_variable_p

BUFFER_ATTR = "sf.buffer"  # per op: the buffer of its result (a list for several; -1: none)
IN_PLACE_ATTR = "sf.in_place"  # per kernel call: the operand each result overwrites, or -1
PEAK_ATTR = "sf.peak_bytes"
LOWER_BOUND_ATTR = "sf.lower_bound_bytes"
UNSIZED_ATTR = "sf.unsized_temporaries"


@dataclass(eq=False)
class Allocation:
    """The memory one op allocates and every value living in it (views, in-place results).

    `start` is the index of the allocating op (-1 for arguments), `end` of its last reader;
    `fresh` says the op surely returns new memory, so overwriting it harms nobody.
    """

    start: int
    size: int | None
    temporary: bool
    fresh: bool
    values: list[SSAValue] = field(default_factory=list)
    end: int = -1
    buffer: int = -1


@dataclass
class BufferPlan:
    """The plan of one function: buffer sizes, the lower bound, in-place choices."""

    buffer_sizes: list[int | None]
    lower_bound: int
    allocations: dict[SSAValue, Allocation]
    in_place: dict[Operation, list[int]]

    @property
    def peak(self) -> int:
        """Bytes of all sized buffers: what the plan needs at once."""
        return sum(size for size in self.buffer_sizes if size is not None)

    @property
    def unsized(self) -> int:
        return sum(size is None for size in self.buffer_sizes)


def static_bytes(value: SSAValue) -> int | None:
    """The bytes of a tensor value with static dims, else ``None``."""
    count = static_size(value.type)
    if count is None:
        return None
    assert isinstance(value.type, TensorType)
    return count * np.dtype(dtype_of(value.type.get_element_type())).itemsize


def _is_view_op(op: Operation) -> bool:
    """Whether `op`'s eager kernel may return (a view of) its operand, not new memory."""
    return isinstance(op, SfOp) and op.primitive.view


def _is_external(op: Operation) -> bool:
    """Whether `op`'s results are storage the call does not own."""
    return isinstance(op, SfOp) and op.primitive.memory is Memory.EXTERNAL


def _is_view(value: SSAValue) -> bool:
    return isinstance(value.owner, Operation) and _is_view_op(value.owner)


def _allocations(block: Block, kernels: set[str]) -> dict[SSAValue, Allocation]:
    """Every value's allocation, with live ranges and what escapes the call."""
    allocations: dict[SSAValue, Allocation] = {}

    def new(value: SSAValue, allocation: Allocation) -> None:
        allocation.values.append(value)
        allocations[value] = allocation

    for arg in block.args:
        new(arg, Allocation(-1, None, temporary=False, fresh=False))
    region_ops: list[tuple[list[Allocation], list[SSAValue]]] = []
    for index, op in enumerate(block.ops):
        reads = [*op.operands, *free_values(op)] if isinstance(op, ControlOp) else op.operands
        for operand in reads:
            allocation = allocations[operand]
            allocation.end = max(allocation.end, index)
        if isinstance(op, ControlOp):
            region_ops.append(([allocations[v] for v in reads], list(op.results)))
        escaping = op.operands if isinstance(op, ReturnOp) else ()
        if is_op(op, assign_variable_p):  # the value now held by the variable
            escaping = op.operands[1:]
        for value in escaping:
            allocations[value].temporary = False
        for result in op.results:
            if _is_view_op(op):
                new(result, allocations[op.operands[0]])
                continue
            tensor = isinstance(result.type, TensorType)
            kernel_call = is_op(op, call_p) and callee_name(op) in kernels
            # A region op's result may be memory it read (never fresh: not an SfOp).
            fresh = kernel_call or (isinstance(op, SfOp) and not op.primitive.stateful)
            allocation = Allocation(index, static_bytes(result),
                                    temporary=tensor and not _is_external(op),
                                    fresh=fresh and not isinstance(op, ConstantOp))
            allocation.end = index
            new(result, allocation)
    # What a result may share lives as long as it; the last region op first, so that a
    # result another region op reads (and may pass on) has its full range already.
    for read, results in reversed(region_ops):
        end = max(allocations[r].end for r in results) if results else -1
        for allocation in read:
            allocation.end = max(allocation.end, end)
    return allocations


def _in_place(op: Operation, index: int, allocations: dict[SSAValue, Allocation],
              reduced: frozenset[int]) -> list[int]:
    """For each result of a kernel call, the operand whose memory it may take, or -1.

    An operand qualifies if it is the allocation's own value (not a view), a temporary that
    surely owns new memory, of exactly the result's static type, read by no later op and by
    no other operand of this call, and the result spans the kernel's whole iteration space
    (a result smaller than it, broadcast inside the kernel, is written again and again
    while the operand is still being read) and is not computed by a reduction (`reduced`:
    its results are initialised before the loop reads anything). The kernel reads each
    element of the operand before writing the same element of the result, so the
    overwrite is safe.
    """
    choices = []
    taken: set[int] = set()
    operand_allocations = [allocations[v] for v in op.operands]
    space = _iteration_space(op, reduced)
    for j, result in enumerate(op.results):
        mine = allocations[result]
        choice = -1
        if (mine.temporary and mine.size is not None and _shape(result) == space
                and j not in reduced):
            for k, operand in enumerate(op.operands):
                theirs = operand_allocations[k]
                if (k not in taken and theirs.temporary and theirs.fresh
                        and theirs.end == index and not _is_view(operand)
                        and operand.type == result.type
                        and operand_allocations.count(theirs) == 1):
                    choice = k
                    break
        if choice >= 0:
            taken.add(choice)
            theirs = operand_allocations[choice]
            theirs.end = mine.end
            for value in mine.values:
                theirs.values.append(value)
                allocations[value] = theirs
        choices.append(choice)
    return choices


def _shape(value: SSAValue) -> tuple[int, ...] | None:
    ty = value.type
    if not isinstance(ty, TensorType) or not ty.has_static_shape():
        return None
    return tuple(ty.get_shape())


def _iteration_space(op: Operation, reduced: frozenset[int]) -> tuple[int, ...] | None:
    """The broadcast shape of a kernel call's operands and unreduced results (None if not
    static)."""
    results = [v for j, v in enumerate(op.results) if j not in reduced]
    shapes = [_shape(v) for v in [*op.operands, *results]]
    if any(shape is None for shape in shapes):
        return None
    return tuple(np.broadcast_shapes(*shapes))


def _assign_buffers(temporaries: list[Allocation]) -> list[int | None]:
    """Give each temporary a buffer; the buffer sizes. Allocations come in order of `start`.

    A value takes the smallest free buffer that holds it, unless that is over twice its size
    (a small value would tie up a large buffer); else the largest free buffer smaller than
    itself, grown; else a new buffer."""
    sizes: list[int | None] = []
    free: dict[int, int] = {}  # buffer -> size, of the sized buffers nobody holds now
    active: list[Allocation] = []
    for allocation in temporaries:
        for done in [a for a in active if a.end < allocation.start]:
            active.remove(done)
            size = sizes[done.buffer]
            if size is not None:
                free[done.buffer] = size
        need = allocation.size
        fits = [b for b, size in free.items() if need is not None and need <= size <= 2 * need]
        small = [b for b, size in free.items() if need is not None and size < need]
        if need is not None and (fits or small):
            best = min(fits, key=free.__getitem__) if fits else max(small, key=free.__getitem__)
            allocation.buffer = best
            sizes[best] = max(free.pop(best), need)
        else:
            allocation.buffer = len(sizes)
            sizes.append(need)
        active.append(allocation)
    return sizes


def plan_block(block: Block, kernels: dict[str, frozenset[int]]) -> BufferPlan:
    """The buffer plan of a function body; `kernels` maps the kernel functions' names to
    their `reduced_results`."""
    allocations = _allocations(block, set(kernels))
    in_place = {}
    for index, op in enumerate(block.ops):
        name = callee_name(op) if is_op(op, call_p) else None
        if name in kernels:
            choices = _in_place(op, index, allocations, kernels[name])
            if any(choice >= 0 for choice in choices):
                in_place[op] = choices
    unique = {id(a): a for a in allocations.values()}.values()
    temporaries = sorted((a for a in unique if a.temporary), key=lambda a: a.start)
    sizes = _assign_buffers(temporaries)
    live = [0] * (len(block.ops) + 1)
    for allocation in temporaries:
        if allocation.size is not None:
            live[allocation.start] += allocation.size
            live[allocation.end + 1] -= allocation.size
    lower_bound = running = 0
    for delta in live:
        running += delta
        lower_bound = max(lower_bound, running)
    return BufferPlan(sizes, lower_bound, allocations, in_place)


def annotate(function: FuncOp, plan: BufferPlan) -> None:
    """Write `plan` into `function`'s attributes and its ops' (replacing earlier ones)."""
    block = function.body.blocks[0]
    for op in function.body.walk():  # inside regions too: nothing there is planned
        op.attributes.pop(BUFFER_ATTR, None)
        op.attributes.pop(IN_PLACE_ATTR, None)
    for op in block.ops:
        allocations = [plan.allocations[r] for r in op.results]
        buffers = [a.buffer if a.temporary else -1 for a in allocations]
        if any(b >= 0 for b in buffers):
            op.attributes[BUFFER_ATTR] = encode(buffers[0] if len(buffers) == 1 else buffers)
        if op in plan.in_place:
            op.attributes[IN_PLACE_ATTR] = encode(plan.in_place[op])
    function.attributes[PEAK_ATTR] = encode(plan.peak)
    function.attributes[LOWER_BOUND_ATTR] = encode(plan.lower_bound)
    function.attributes.pop(UNSIZED_ATTR, None)
    if plan.unsized:
        function.attributes[UNSIZED_ATTR] = encode(plan.unsized)


@register_pass
@dataclass(frozen=True)
class PlanBuffers(ModulePass):
    """Plan the temporary buffers of every non-kernel function and annotate the IR.

    Before::

        func.func @f(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<f32> {
          %a = sf.call %x {callee = @f_kernel0} : (tensor<4x4xf32>) -> tensor<4x4xf32>
          %b = sf.call %a {callee = @f_kernel1} : (tensor<4x4xf32>) -> tensor<4x4xf32>
          %m = sf.matmul %w, %b {...} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
          %s = sf.reduce_sum %m {axes = [0, 1], keepdims = false} : ... -> tensor<f32>
          func.return %s : tensor<f32>
        }

    After (kernels unchanged)::

        func.func @f(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<f32>
            attributes {sf.peak_bytes = 128 : i64, sf.lower_bound_bytes = 128 : i64} {
          %a = sf.call %x {callee = @f_kernel0, sf.buffer = 0} : ...
          %b = sf.call %a {callee = @f_kernel1, sf.buffer = 0, sf.in_place = [0]} : ...
          %m = sf.matmul %w, %b {..., sf.buffer = 1} : ...
          %s = sf.reduce_sum %m {axes = [0, 1], keepdims = false} : ...
          func.return %s : tensor<f32>
        }

    ``sf.buffer`` numbers the buffer each result lives in (a list for several results; -1
    for a result that is no temporary); ``sf.in_place`` gives, per result of a kernel call,
    the operand whose buffer the kernel overwrites (-1: a buffer of its own). The returned
    ``%s`` is no temporary, so ``sf.reduce_sum`` has no buffer.
    """

    name = "plan-buffers"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        table = functions(op)
        kernels = {name: reduced_results(function) for name, function in table.items()
                   if is_kernel(function)}
        for name, function in table.items():
            if name in kernels or len(function.body.blocks) != 1:
                continue
            annotate(function, plan_block(function.body.blocks[0], kernels))
