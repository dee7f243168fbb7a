"""Constants of a module that a system linker loads (an ahead-of-time library), not the JIT.

Their bytes are the file's, except for large splats (every element the same: the
constant-filled weights of ONNX's light models, zero buffers, ``sf.ones`` of a large
shape), which would fill a library with one value: such a constant is zero-initialised
storage, which object files keep as a size (``.bss``), and unless it is zero a constructor
of the library (``llvm.global_ctors``, run as the library loads) writes its value, one
element then doubling copies. The JIT links no constructors, and keeps large constants in
host memory anyway (`host_constants`).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.emitter import I8, I32, I64
from stageflow.codegen.llvm.functions import declare
from stageflow.codegen.program.placement import constant_bytes

# Smaller splats are embedded as they are: at most 64 KiB of the file each.
SPLAT_MIN_BYTES = 1 << 16
_FILLS = "sf.fill_splats"  # the module's constructor: a call per splat to fill
_PTR = ir.PointerType()


def embedded_constant(module: ir.Module, name: str, array: np.ndarray) -> ir.GlobalVariable:
    """A 64-byte aligned global holding `array`'s bytes (C order) when the module loads."""
    data = np.ascontiguousarray(array)
    if data.nbytes < SPLAT_MIN_BYTES or not is_splat(data):
        return constant_bytes(module, name, data)
    ty = ir.ArrayType(I8, data.nbytes)
    variable = ir.GlobalVariable(module, ty, name)
    variable.initializer = ir.Constant(ty, None)  # zeros, kept as a size
    variable.linkage = "private"
    variable.align = 64
    element = data.reshape(-1)[:1]
    if element.view(np.uint8).any():
        _fill_at_load(module, variable, constant_bytes(module, f"{name}.element", element),
                      element.nbytes, data.nbytes)
    return variable


def is_splat(data: np.ndarray) -> bool:
    """Whether every element of `data` has the first one's bytes (so -0.0 and 0.0 differ,
    and NaNs of one payload match)."""
    if data.size == 0:
        return False
    rows = data.reshape(-1).view(np.uint8).reshape(data.size, data.itemsize)
    return bool((rows == rows[0]).all())


def _fill_at_load(module: ir.Module, target: ir.GlobalVariable, element: ir.GlobalVariable,
                  itemsize: int, total: int) -> None:
    """Add to the module's constructor a fill of `target` (`total` bytes) with `element`:
    one copy of the element, then copies of what is filled, each doubling it."""
    memcpy = declare(module, "llvm.memcpy.p0.p0.i64", ir.VoidType(),
                     [_PTR, _PTR, I64, ir.IntType(1)])
    fill = ir.Function(module, ir.FunctionType(ir.VoidType(), []), f"{target.name}.fill")
    fill.linkage = "private"
    entry, loop, done = (fill.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    no = ir.Constant(ir.IntType(1), 0)
    b.call(memcpy, [target, element, ir.Constant(I64, itemsize), no])
    b.branch(loop)
    b.position_at_end(loop)
    filled = b.phi(I64, name="filled")
    filled.add_incoming(ir.Constant(I64, itemsize), entry)
    left = b.sub(ir.Constant(I64, total), filled)
    size = b.select(b.icmp_unsigned("<", filled, left), filled, left)
    b.call(memcpy, [b.gep(target, [filled], source_etype=I8), target, size, no])
    now = b.add(filled, size)
    filled.add_incoming(now, loop)
    b.cbranch(b.icmp_unsigned("<", now, ir.Constant(I64, total)), loop, done)
    b.position_at_end(done)
    b.ret_void()
    b = ir.IRBuilder()
    b.position_before(_constructor(module).entry_basic_block.instructions[-1])
    b.call(fill, [])


def _constructor(module: ir.Module) -> ir.Function:
    """The module's constructor, made and registered on first use (it returns at once)."""
    try:
        return module.get_global(_FILLS)
    except KeyError:
        pass
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), []), _FILLS)
    function.linkage = "private"
    ir.IRBuilder(function.append_basic_block("entry")).ret_void()
    entry = ir.LiteralStructType([I32, _PTR, _PTR])
    ctors = ir.GlobalVariable(module, ir.ArrayType(entry, 1), "llvm.global_ctors")
    ctors.linkage = "appending"
    ctors.initializer = ir.Constant(ir.ArrayType(entry, 1), [
        ir.Constant(entry, [ir.Constant(I32, 65535), function, ir.Constant(_PTR, None)])])
    return function
