"""A program's temporaries in one block of memory kept from call to call.

A program needs the same buffers at every call of the same sizes. Allocated per call, each
large buffer came from fresh pages: glibc gives blocks above its mmap threshold their own
mappings, and trims the heap's top once more than twice that threshold is free, so a step
whose temporaries total more than that (the small ResNet's training step at batch 32: 46
MB) page-faulted through all of them at every call, and ran much faster with the trimming
disabled; keeping the block does the same without changing how the rest of the process
allocates.

So every buffer of a program is an offset into one *workspace*, 64-byte aligned. The
block is cached in a global of the program's module: a call takes it (an atomic exchange
with null), reuses it when it is large enough or replaces it with one that is, and puts it
back at the end (a compare-and-swap from null). A call running while another holds the
block allocates its own and frees whichever cannot be put back, so concurrent calls never
share memory. ``NAME.release`` frees the cached block (the JIT calls it when the program
is collected).

A block is `HEADER` bytes of bookkeeping (its capacity) and then the buffers.
"""

from __future__ import annotations

from llvmlite import ir

from stageflow.codegen.llvm.emitter import I8, I64
from stageflow.codegen.llvm.functions import declare
from stageflow.codegen.llvm.loops import i64

ALIGNMENT = 64  # bytes: a cache line, and any vector the kernels load
HEADER = ALIGNMENT
_PTR = ir.PointerType()


class Workspace:
    """The cached block of the program `symbol` in `module`, and the code that uses it."""

    def __init__(self, module: ir.Module, symbol: str) -> None:
        self.cached = ir.GlobalVariable(module, _PTR, f"{symbol}.workspace")
        self.cached.initializer = ir.Constant(_PTR, None)
        self.cached.linkage = "internal"
        self._alloc = declare(module, "aligned_alloc", _PTR, [I64, I64])
        self._free = declare(module, "free", ir.VoidType(), [_PTR])
        self._release_function(module, symbol)

    def acquire(self, b: ir.IRBuilder, size: ir.Value) -> ir.Value:
        """The buffers' memory (`size` bytes, `ALIGNMENT`-aligned), or null where the
        allocation failed."""
        null = ir.Constant(_PTR, None)
        cached = b.atomic_rmw("xchg", self.cached, null, "acq_rel")
        has = b.icmp_unsigned("!=", cached, null)
        with b.if_else(has) as (then, otherwise):
            with then:
                capacity = b.load(cached, typ=I64)
                loaded = b.block
            with otherwise:
                empty = b.block
        room = b.phi(I64)
        room.add_incoming(capacity, loaded)
        room.add_incoming(i64(-1), empty)
        with b.if_else(b.icmp_signed(">=", room, size)) as (keep, replace):
            with keep:
                kept = b.block
            with replace:
                self._free_block(b, cached)
                rounded = b.and_(b.add(size, i64(HEADER + ALIGNMENT - 1)), i64(-ALIGNMENT))
                fresh = b.call(self._alloc, [i64(ALIGNMENT), rounded])
                with b.if_then(b.icmp_unsigned("!=", fresh, null)):
                    b.store(size, fresh)
                replaced = b.block
        block = b.phi(_PTR)
        block.add_incoming(cached, kept)
        block.add_incoming(fresh, replaced)
        return b.select(b.icmp_unsigned("==", block, null), null,
                        b.gep(block, [i64(HEADER)], source_etype=I8))

    def release(self, b: ir.IRBuilder, memory: ir.Value) -> None:
        """Give back what `acquire` returned (null: nothing): cache it, or free it where
        another call's block is cached meanwhile."""
        null = ir.Constant(_PTR, None)
        with b.if_then(b.icmp_unsigned("!=", memory, null)):
            block = b.gep(memory, [i64(-HEADER)], source_etype=I8)
            swapped = b.cmpxchg(self.cached, null, block, "acq_rel", "monotonic")
            with b.if_then(b.not_(b.extract_value(swapped, 1))):
                b.call(self._free, [block])

    def _free_block(self, b: ir.IRBuilder, block: ir.Value) -> None:
        with b.if_then(b.icmp_unsigned("!=", block, ir.Constant(_PTR, None))):
            b.call(self._free, [block])

    def _release_function(self, module: ir.Module, symbol: str) -> None:
        function = ir.Function(module, ir.FunctionType(ir.VoidType(), []), f"{symbol}.release")
        b = ir.IRBuilder(function.append_basic_block("entry"))
        self._free_block(b, b.atomic_rmw("xchg", self.cached, ir.Constant(_PTR, None),
                                         "acq_rel"))
        b.ret_void()
