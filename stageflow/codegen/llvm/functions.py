"""Module- and function-level helpers every LLVM builder here needs: declaring an external
function once per module, stack memory in a function's entry block, and LLVM's memcpy and
memset intrinsics."""

from __future__ import annotations

from llvmlite import ir

_PTR = ir.PointerType()


def declare(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    """The function `name` of `module`, declared on first use (malloc, free, memcpy)."""
    existing = module.globals.get(name)
    if isinstance(existing, ir.Function):
        return existing
    return ir.Function(module, ir.FunctionType(ret, args), name)


def entry_alloca(b: ir.IRBuilder, ty: ir.Type, count: int = 1, name: str = "") -> ir.Value:
    """Stack memory in the entry block of `b`'s function: an alloca where `b` is (in a loop)
    would take new stack space at every iteration. Where `b` is in the entry block itself,
    the alloca is its next instruction (another builder's insertion at the block's start
    would move `b`'s instructions after the block's end)."""
    if b.block is b.function.entry_basic_block:
        return b.alloca(ty, count, name=name)
    entry = ir.IRBuilder(b.function.entry_basic_block)
    entry.position_at_start(b.function.entry_basic_block)
    return entry.alloca(ty, count, name=name)


def memcpy(b: ir.IRBuilder, target: ir.Value, source: ir.Value, size: ir.Value) -> None:
    """Copy `size` bytes from `source` to `target` (not overlapping)."""
    copy = b.module.declare_intrinsic("llvm.memcpy", [_PTR, _PTR, ir.IntType(64)])
    b.call(copy, [target, source, size, ir.Constant(ir.IntType(1), 0)])


def memset_zero(b: ir.IRBuilder, target: ir.Value, size: ir.Value) -> None:
    """Zero `size` bytes from `target`."""
    zero = b.module.declare_intrinsic("llvm.memset", [_PTR, ir.IntType(64)])
    b.call(zero, [target, ir.Constant(ir.IntType(8), 0), size, ir.Constant(ir.IntType(1), 0)])
