"""Work across a vector's lanes: the mask of its first lanes (a run's last, partial vector),
a square of vectors transposed in registers, and float32 lanes rounded to bfloat16.

The square is how an operand stored transposed (a weight matrix in PyTorch's ``(out, in)``
layout read as ``(in, out)``) is packed. Read element by element, or by gathers, it costs
a cache line per element, or a gather per vector, each waiting on as many lines. Loading
`lanes` vectors (each a run of one row of the storage) and transposing them in registers
costs `lanes` loads and ``lanes * log2(lanes)`` two-source shuffles, one instruction each
on x86 (``vpermt2ps``).
"""

from __future__ import annotations

from llvmlite import ir


def lanes_below(b: ir.IRBuilder, count: ir.Value, lanes: int) -> ir.Value:
    """The mask of a `lanes`-wide vector's lanes below `count` (an i64)."""
    i64 = ir.IntType(64)
    lane = ir.Constant(ir.VectorType(i64, lanes), list(range(lanes)))
    bound = b.shuffle_vector(
        b.insert_element(ir.Constant(ir.VectorType(i64, lanes), None), count,
                         ir.Constant(i64, 0)),
        ir.Constant(ir.VectorType(i64, lanes), None),
        ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes))
    return b.icmp_signed("<", lane, bound)


def transpose_square(b: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
    """The transpose of `rows`, as many vectors as each has lanes (a power of two): result
    r, lane c is rows[c], lane r. By halves, then quarters...: at each distance d, rows r
    and r + d (bit d of r clear) swap the off-diagonal blocks of their d-wide squares, so
    the blocks of side 2d are transposed once those of side d are."""
    lanes = len(rows)
    assert lanes & (lanes - 1) == 0 and all(r.type.count == lanes for r in rows)
    rows = list(rows)
    index = ir.VectorType(ir.IntType(32), lanes)
    distance = lanes // 2
    while distance:
        low = ir.Constant(index, [c if c & distance == 0 else lanes + c - distance
                                  for c in range(lanes)])
        high = ir.Constant(index, [c + distance if c & distance == 0 else lanes + c
                                   for c in range(lanes)])
        for r in range(lanes):
            if r & distance == 0:
                x, y = rows[r], rows[r + distance]
                rows[r] = b.shuffle_vector(x, y, low)
                rows[r + distance] = b.shuffle_vector(x, y, high)
        distance //= 2
    return rows


def widened_bfloat16(b: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    """A vector of bfloat16 bit patterns (i16) as the float32 values they are (exact)."""
    lanes = bits.type.count
    words = ir.VectorType(ir.IntType(32), lanes)
    return b.bitcast(b.shl(b.zext(bits, words), ir.Constant(words, [16] * lanes)),
                     ir.VectorType(ir.FloatType(), lanes))


def nearest_bfloat16(b: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """A vector of float32 rounded to bfloat16, as i16 bit patterns: to nearest even, NaNs
    kept and made quiet (as the emitter's scalar conversion and ml_dtypes do), subnormals
    kept; integer arithmetic on the lanes' bits."""
    lanes = value.type.count
    words = ir.VectorType(ir.IntType(32), lanes)

    def splat(constant: int) -> ir.Constant:
        return ir.Constant(words, [constant] * lanes)

    bits = b.bitcast(value, words)
    high = b.lshr(bits, splat(16))
    lsb = b.and_(high, splat(1))
    rounded = b.lshr(b.add(bits, b.add(lsb, splat(0x7FFF))), splat(16))
    quiet_nan = b.or_(high, splat(0x40))
    nearest = b.select(b.fcmp_unordered("uno", value, value), quiet_nan, rounded)
    return b.trunc(nearest, ir.VectorType(ir.IntType(16), lanes))
