"""``sf.cond`` and ``sf.while`` in a program: branches and a loop of LLVM blocks.

Every value inside a region has static dims (`legality`), so its memory is placed with
the rest of the program's before anything runs (`placement`). A cond's results are
the memory of the values its taken branch yields, joined by phis; a loop's carried values
live in two buffers each that its iterations write in turn, so that nothing is copied
where the body computes the next value itself. In a JIT program, every iteration ends by
checking for a Ctrl-C (`interrupts`), which stops the program with `INTERRUPTED`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
from llvmlite import ir
from xdsl.ir import Operation, Region, SSAValue

from stageflow.codegen.llvm.emitter import I1, I8, I64
from stageflow.codegen.llvm.loops import i64
from stageflow.codegen.program.abi import INTERRUPTED, PTR, value_type
from stageflow.codegen.program.interrupts import flag_raised, on_main_thread
from stageflow.codegen.program.placement import Placement, owns_result
from stageflow.ir.control import CondOp, ControlOp, WhileOp, YieldOp
from stageflow.passes.support import is_op
from stageflow.primitives.structural import update_index_p


class RegionLowering(Placement, ABC):
    """The emission of region ops, for a program body that emits the ops inside."""

    @abstractmethod
    def emit_op(self, op: Operation, index: int) -> None:
        """Emit one op; `index` is the top-level op it is (or is inside), for status codes."""

    def emit_region(self, region: Region, index: int) -> list[ir.Value]:
        """Emit a region's ops at the current position; the storage of what it yields."""
        for op in region.block.ops:
            if not isinstance(op, YieldOp):
                self.emit_op(op, index)
        return [self.storage[value] for value in region.block.last_op.operands]

    def emit_cond(self, op: CondOp, index: int) -> None:
        """A branch per region; each result's storage is that of the value the taken
        region yields (a phi: nothing is copied)."""
        b = self.b
        selector = self.load_index(op.index, len(op.branches))
        merge = self.function.append_basic_block("cond.end")
        blocks = [self.function.append_basic_block(f"cond.{i}") for i in range(len(op.branches))]
        switch = b.switch(selector, blocks[-1])
        for position, block in enumerate(blocks[:-1]):
            switch.add_case(ir.Constant(I64, position), block)
        incoming: list[tuple[list[ir.Value], ir.Block]] = []
        for region, block in zip(op.branches, blocks, strict=True):
            b.position_at_end(block)
            self.emit_region(region, index)
            owned = _owned_inside(region)
            yielded = []
            for copy, value in zip(self.copies[op], region.block.last_op.operands, strict=True):
                if value not in owned:  # memory of something else: the result gets a copy
                    self.copy_into(copy, value)
                yielded.append(self.storage[value] if value in owned else copy)
            incoming.append((yielded, b.block))
            b.branch(merge)
        b.position_at_end(merge)
        for position, result in enumerate(op.results):
            phi = b.phi(PTR, name=f"cond.r{position}")
            for yielded, block in incoming:
                phi.add_incoming(yielded[position], block)
            self.storage[result] = phi

    def load_index(self, value: SSAValue, count: int) -> ir.Value:
        """The region an ``sf.cond`` operand selects, as an i64 (a bool: 0 when true)."""
        b = self.b
        ty = value_type(value)
        width = 8 * ty.dtype.itemsize
        loaded = b.load(self.storage[value], typ=ir.IntType(width))
        if ty.dtype == np.bool_:
            return b.select(b.icmp_unsigned("!=", loaded, ir.Constant(loaded.type, 0)),
                            i64(0), i64(1))
        position = b.sext(loaded, I64) if width < 64 else loaded
        inside = b.and_(b.icmp_signed(">=", position, i64(0)),
                        b.icmp_signed("<", position, i64(count)))
        return b.select(inside, position, i64(count - 1))

    def emit_while(self, op: WhileOp, index: int) -> None:
        """A loop whose carried values live in two buffers each, written in turn: the body
        computes the next value straight into the buffer the current one is not in (or
        copies it there when it is not computed by an op of the body), then the two
        swap. The first iteration reads the initial values where they are. A value the
        body only updates row by row (`update_index`) is copied once into the loop's
        buffer and updated there in place."""
        b = self.b
        inits = [self.storage[v] for v in op.operands]
        spares = self.spares[op]
        header = self.function.append_basic_block("while.cond")
        body = self.function.append_basic_block("while.body")
        done = self.function.append_basic_block("while.end")
        yielded = list(op.body_region.block.last_op.operands)
        in_place = _updated_in_place(op.body_region, yielded)
        for k in in_place:  # the loop's own copy, which the body then updates row by row
            self.copy_unless(ir.Constant(I1, 0), spares[k][0], inits[k],
                             self.nbytes(op.operands[k]))
        entry = b.block
        b.branch(header)
        b.position_at_end(header)
        current = [b.phi(PTR, name=f"while.v{k}") for k in range(len(inits))]
        spare = [b.phi(PTR, name=f"while.s{k}") for k in range(len(inits))]
        for k, (init, (first, second)) in enumerate(zip(inits, spares, strict=True)):
            current[k].add_incoming(first if k in in_place else init, entry)
            spare[k].add_incoming(second if k in in_place else first, entry)
        for arg, pointer in zip(op.cond_region.block.args, current, strict=True):
            self.storage[arg] = pointer
        (predicate,) = self.emit_region(op.cond_region, index)
        flag = b.load(predicate, typ=I8)
        b.cbranch(b.icmp_unsigned("!=", flag, ir.Constant(I8, 0)), body, done)
        b.position_at_end(body)
        for arg, pointer in zip(op.body_region.block.args, current, strict=True):
            self.storage[arg] = pointer
        direct = _written_in_place(op.body_region, yielded) - set(in_place)
        for k in direct:
            self.storage[yielded[k]] = spare[k]
        for k in in_place:
            self.storage[yielded[k]] = current[k]
        self.emit_region(op.body_region, index)
        for k, value in enumerate(yielded):
            if k not in direct and k not in in_place:
                self.copy_into(spare[k], value)
        self.check_interrupt()
        latch = b.block
        for k, ((init, (_, second)), pointer) in enumerate(
                zip(zip(inits, spares, strict=True), current, strict=True)):
            if k in in_place:
                current[k].add_incoming(pointer, latch)
                spare[k].add_incoming(spare[k], latch)
                continue
            current[k].add_incoming(spare[k], latch)
            was_init = b.icmp_unsigned("==", pointer, init)
            spare[k].add_incoming(b.select(was_init, second, pointer), latch)
        b.branch(header)
        b.position_at_end(done)
        for result, init, pointer, target in zip(op.results, inits, current, spare,
                                                 strict=True):
            # after no iteration a result would be its initial value's memory: a copy
            # keeps results the loop's own
            self.copy_unless(b.icmp_unsigned("!=", pointer, init), target, init,
                             self.nbytes(result))
            self.storage[result] = b.select(b.icmp_unsigned("==", pointer, init), target,
                                            pointer)

    def check_interrupt(self, where: str = "loop", then: str = "latch") -> None:
        """Where the program is `interruptible`: a branch, almost never taken, to a check
        (block ``WHERE.interrupt``) that stops the program with `INTERRUPTED` when a SIGINT
        arrived and this is the main thread; the builder continues in a block of its own
        (``WHERE.THEN``: a loop's latch by default)."""
        if not self.p.interruptible:
            return
        b = self.b
        check = self.function.append_basic_block(f"{where}.interrupt")
        go_on = self.function.append_basic_block(f"{where}.{then}")
        b.cbranch(flag_raised(b), check, go_on).set_weights([1, 1 << 20])
        b.position_at_end(check)
        self.fail_if(on_main_thread(b), INTERRUPTED)
        b.branch(go_on)
        b.position_at_end(go_on)


def _updated_in_place(body: Region, yielded: list[SSAValue]) -> set[int]:
    """The positions whose next value the body computes by an `update_index` of the
    current one, which nothing else in the body reads: the row is written into the loop's
    buffer itself, and the rest is not copied at every iteration."""
    found: set[int] = set()
    for k, (arg, value) in enumerate(zip(body.block.args, yielded, strict=True)):
        owner = value.owner
        if (is_op(owner, update_index_p) and owner.parent_block() is body.block
                and owner.operands[0] is arg and len(list(arg.uses)) == 1
                and yielded.count(value) == 1):
            found.add(k)
    return found


def _owned_inside(region: Region) -> set[SSAValue]:
    """The values of `region` whose memory is the region's own: results of its ops that
    compute into memory of their own, and of its region ops (whose results are theirs)."""
    return {r for op in region.block.ops if owns_result(op) or isinstance(op, ControlOp)
            for r in op.results}


def _written_in_place(body: Region, yielded: list[SSAValue]) -> set[int]:
    """The positions of the yielded values a loop body's own ops compute into memory of
    their own, each yielded once: those can be computed straight into a carried buffer."""
    owned = {r for op in body.block.ops if owns_result(op) for r in op.results}
    return {k for k, value in enumerate(yielded)
            if value in owned and yielded.count(value) == 1}
