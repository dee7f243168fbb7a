"""NumPy's array struct as the ``NAME.py`` entry points read it: data pointer, rank, dims,
strides and flags at fixed offsets of ``PyArrayObject_fields`` (NumPy's ABI on 64-bit
platforms), so that a compiled entry takes ``ndarray`` objects from ctypes' ``py_object``
without Python unpacking them. `array_layout_matches` checks the offsets against this
NumPy once; where they do not hold, the entries are not used.
"""

from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.emitter import I8, I32, I64

DATA, NDIM, DIMS, STRIDES, FLAGS = 16, 24, 32, 40, 64
C_CONTIGUOUS, ALIGNED, WRITEABLE = 0x1, 0x100, 0x400
_POINTER = ir.PointerType()


def array_layout_matches() -> bool:
    """Whether this NumPy lays out arrays at the offsets above (checked, not assumed)."""
    a = np.empty((3, 5), np.float32)
    base = id(a)
    dims_at = ctypes.c_void_p.from_address(base + DIMS).value
    strides_at = ctypes.c_void_p.from_address(base + STRIDES).value
    return (
        ctypes.c_void_p.from_address(base + DATA).value == a.ctypes.data
        and ctypes.c_int.from_address(base + NDIM).value == 2
        and dims_at is not None and strides_at is not None
        and list((ctypes.c_int64 * 2).from_address(dims_at)) == [3, 5]
        and list((ctypes.c_int64 * 2).from_address(strides_at)) == [20, 4]
        and ctypes.c_int.from_address(base + FLAGS).value & 0x501 == 0x501
    )


def _load_at(b: ir.IRBuilder, base: ir.Value, offset: int, ty: ir.Type) -> ir.Value:
    return b.load(b.gep(base, [ir.Constant(I64, offset)], source_etype=I8), typ=ty)


def array_ok(b: ir.IRBuilder, array: ir.Value, ndim: int, *, contiguous: bool,
             writeable: bool) -> ir.Value:
    """i1: the array is aligned, of rank `ndim`, and C-contiguous and writeable where asked
    (the conditions under which compiled code may read or write its memory directly)."""
    required = ALIGNED | (C_CONTIGUOUS if contiguous else 0) | (WRITEABLE if writeable else 0)
    flags = _load_at(b, array, FLAGS, I32)
    flags_ok = b.icmp_signed("==", b.and_(flags, ir.Constant(I32, required)),
                             ir.Constant(I32, required))
    rank_ok = b.icmp_signed("==", _load_at(b, array, NDIM, I32), ir.Constant(I32, ndim))
    return b.and_(flags_ok, rank_ok)


def array_data(b: ir.IRBuilder, array: ir.Value) -> ir.Value:
    """The array's data pointer."""
    return _load_at(b, array, DATA, _POINTER)


def array_dims(b: ir.IRBuilder, array: ir.Value, ndim: int) -> list[ir.Value]:
    """The array's `ndim` dims as i64 values."""
    if not ndim:
        return []
    shape = _load_at(b, array, DIMS, _POINTER)
    return [b.load(b.gep(shape, [ir.Constant(I64, axis)], source_etype=I64), typ=I64)
            for axis in range(ndim)]


def array_byte_strides(b: ir.IRBuilder, array: ir.Value, ndim: int) -> list[ir.Value]:
    """The array's `ndim` strides in bytes as i64 values."""
    if not ndim:
        return []
    strides = _load_at(b, array, STRIDES, _POINTER)
    return [b.load(b.gep(strides, [ir.Constant(I64, axis)], source_etype=I64), typ=I64)
            for axis in range(ndim)]
