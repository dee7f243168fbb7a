"""Conversions of the narrow floats (ml_dtypes' 8- and 4-bit floats) to and from float32, as
tables computed from ml_dtypes itself.

A narrow float has at most 256 values, so its decoding is one load from a table of their
float32s. Its encoding is a step function of the float32's value: the code stays the same
from one *breakpoint* to the next (near each midpoint between two neighbouring values, and
where the range overflows into infinity, NaN or the largest value). The breakpoints are
found by bisection against ml_dtypes' own conversion, over float32s ordered as integers, so
the compiled cast agrees with the eager one (ml_dtypes) on every float32 by construction,
whatever each format does at overflow, at zero or at NaN (the six formats differ in all
three), and one mechanism serves every format: a branchless binary search over at most 512
breakpoints, nine compares, where a formula per format would need its own special cases.

The tables are private constants of the module that uses them, one set per dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import ml_dtypes
import numpy as np
from llvmlite import ir

_I8, _I32 = ir.IntType(8), ir.IntType(32)
_F32 = ir.FloatType()


def ordered_keys(values: np.ndarray) -> np.ndarray:
    """float32 values as int32 keys that order as the values do (-0 just below +0), NaN
    aside: the bits of a positive float, and those of a negative one with every bit but the
    sign flipped."""
    bits = np.ascontiguousarray(values, np.float32).view(np.int32)
    return np.where(bits >= 0, bits, bits ^ np.int32(0x7FFFFFFF))


def _from_keys(keys: np.ndarray) -> np.ndarray:
    keys = np.asarray(keys, np.int32)
    return np.where(keys >= 0, keys, keys ^ np.int32(0x7FFFFFFF)).view(np.float32)


@dataclass(frozen=True)
class NarrowTables:
    """What the compiled conversions of one narrow float dtype read."""

    values: np.ndarray  # float32 of each code (2**bits of them)
    breakpoints: np.ndarray  # int32 keys, sorted, padded with INT32_MAX to 2**k - 1
    codes: np.ndarray  # uint8: the code of the keys below breakpoints[0], then after each
    nan_codes: tuple[int, int]  # what NaN and -NaN encode to


def _encode(dtype: np.dtype, keys: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):  # overflow and NaN are what is being tabulated
        return _from_keys(keys).astype(dtype).view(np.uint8)


@cache
def tables(dtype: np.dtype) -> NarrowTables:
    """The decoding and encoding tables of narrow float `dtype`, from ml_dtypes."""
    values = np.arange(1 << ml_dtypes.finfo(dtype).bits, dtype=np.uint8).view(dtype)
    values = values.astype(np.float32)
    finite = np.unique(ordered_keys(values[~np.isnan(values)]))
    anchors = np.concatenate([ordered_keys(np.float32([-np.inf])), finite,
                              ordered_keys(np.float32([np.inf]))]).astype(np.int64)
    anchors = np.unique(anchors)
    low, high = anchors[:-1], anchors[1:]
    changes = _encode(dtype, low) != _encode(dtype, high)
    low, high = low[changes], high[changes]
    target = _encode(dtype, high)
    while np.any(high - low > 1):  # the first key of each gap that encodes as its top
        middle = (low + high) // 2
        same = _encode(dtype, middle) == target
        high, low = np.where(same, middle, high), np.where(same, low, middle)
    start = _encode(dtype, anchors[:1])
    size = 1 << int(len(high) + 1).bit_length()
    padded = np.full(size - 1, np.iinfo(np.int32).max, np.int32)
    padded[:len(high)] = high
    codes = np.zeros(size, np.uint8)
    codes[0], codes[1:len(high) + 1] = start[0], target
    nans = np.float32([np.nan, -np.nan]).astype(dtype).view(np.uint8)
    return NarrowTables(values, padded, codes, (int(nans[0]), int(nans[1])))


def _table(module: ir.Module, name: str, element: ir.Type, data: np.ndarray) -> ir.Value:
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    ty = ir.ArrayType(element, len(data))
    table = ir.GlobalVariable(module, ty, name)
    table.global_constant = True
    table.linkage = "private"
    if isinstance(element, ir.FloatType):
        table.initializer = ir.Constant(ty, [ir.Constant(element, float(v))
                                             for v in data.astype(np.float32)])
    else:
        table.initializer = ir.Constant(ty, [int(v) for v in data])
    return table


def _element(b: ir.IRBuilder, table: ir.Value, index: ir.Value, element: ir.Type) -> ir.Value:
    pointer = b.gep(table, [ir.Constant(_I32, 0), index], inbounds=True,
                    source_etype=table.value_type)
    return b.load(pointer, typ=element)


def decode(b: ir.IRBuilder, raw: ir.Value, dtype: np.dtype) -> ir.Value:
    """The float32 of the stored byte `raw` (its unused high bits ignored)."""
    t = tables(dtype)
    index = b.and_(b.zext(raw, _I32), ir.Constant(_I32, len(t.values) - 1))
    values = _table(b.module, f"sf.{dtype.name}.values", _I32, t.values.view(np.int32))
    return b.bitcast(_element(b, values, index, _I32), _F32)


def encode(b: ir.IRBuilder, x: ir.Value, dtype: np.dtype) -> ir.Value:
    """The byte of narrow float `dtype` that ml_dtypes converts float32 `x` to."""
    t = tables(dtype)
    module = b.module
    breakpoints = _table(module, f"sf.{dtype.name}.breakpoints", _I32, t.breakpoints)
    codes = _table(module, f"sf.{dtype.name}.codes", _I8, t.codes)
    bits = b.bitcast(x, _I32)
    negative = b.icmp_signed("<", bits, ir.Constant(_I32, 0))
    key = b.select(negative, b.xor(bits, ir.Constant(_I32, 0x7FFFFFFF)), bits)
    index: ir.Value = ir.Constant(_I32, 0)
    step = len(t.codes) // 2
    while step:
        probe = b.add(index, ir.Constant(_I32, step - 1))
        below = b.icmp_signed("<=", _element(b, breakpoints, probe, _I32), key)
        index = b.select(below, b.add(index, ir.Constant(_I32, step)), index)
        step //= 2
    code = _element(b, codes, index, _I8)
    nan = b.select(negative, ir.Constant(_I8, t.nan_codes[1]), ir.Constant(_I8, t.nan_codes[0]))
    return b.select(b.fcmp_unordered("uno", x, x), nan, code)
