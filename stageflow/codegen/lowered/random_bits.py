"""Lowering of `random_bits`: Philox-4x32-10 blocks at consecutive counters, in LLVM IR.

The same arithmetic as the eager kernel (`stageflow.primitives.random`, which
documents the state and stream layout) on i32/i64 values: a 32x32->64-bit multiply gives
both halves of each Philox product, the key is bumped between rounds, and the 64-bit block
counter wraps modulo 2**64. The bits are therefore identical, not merely close. Full
blocks run in one loop (each iteration independent, so it vectorises); the words of a last
partial block are stored one by one.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from stageflow.codegen.llvm.emitter import I32, I64
from stageflow.codegen.llvm.loops import counted_loop, i64
from stageflow.codegen.lowered.rule import OpBuilder, OpSpec, lowering
from stageflow.primitives.random import (
    PHILOX_M0,
    PHILOX_M1,
    PHILOX_ROUNDS,
    PHILOX_W0,
    PHILOX_W1,
    WORDS_PER_BLOCK,
    random_bits_p,
)


def _i32(value: int) -> ir.Constant:
    return ir.Constant(I32, value - (1 << 32) if value >= 1 << 31 else value)


def _mulhilo(b: ir.IRBuilder, multiplier: int, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    product = b.mul(b.zext(x, I64), i64(multiplier))
    return b.trunc(b.lshr(product, i64(32)), I32), b.trunc(product, I32)


def philox(b: ir.IRBuilder, counter: list[ir.Value], key: list[ir.Value]) -> list[ir.Value]:
    """The four output words of the Philox-4x32-10 block function (i32 values)."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for round_index in range(PHILOX_ROUNDS):
        if round_index:
            k0, k1 = b.add(k0, _i32(PHILOX_W0)), b.add(k1, _i32(PHILOX_W1))
        hi0, lo0 = _mulhilo(b, PHILOX_M0, c0)
        hi1, lo1 = _mulhilo(b, PHILOX_M1, c2)
        c0, c1, c2, c3 = b.xor(b.xor(hi1, c1), k0), lo1, b.xor(b.xor(hi0, c3), k1), lo0
    return [c0, c1, c2, c3]


@dataclass(frozen=True)
class RandomBits:
    count: int  # elements of `bits` (its shape is static)

    def emit(self, ob: OpBuilder) -> None:
        b = ob.b
        state = ob.inputs[0]
        bits, new_state = ob.outputs
        words = [b.load(state.address(b, state.offset(b, [i64(i)])), typ=I32) for i in range(4)]
        key = words[:2]
        counter = b.or_(b.zext(words[2], I64), b.shl(b.zext(words[3], I64), i64(32)))
        full, rest = divmod(self.count, WORDS_PER_BLOCK)

        def block(index: ir.Value, used: int) -> None:
            at = b.add(counter, index)
            out = philox(b, [b.trunc(at, I32), b.trunc(b.lshr(at, i64(32)), I32),
                             _i32(0), _i32(0)], key)
            first = b.mul(index, i64(WORDS_PER_BLOCK))
            for word in range(used):
                b.store(out[word], bits.address(b, b.add(first, i64(word))))

        counted_loop(b, i64(0), i64(full), i64(1), lambda i: block(i, WORDS_PER_BLOCK),
                     "block")
        if rest:
            block(i64(full), rest)
        advanced = b.add(counter, i64(full + (1 if rest else 0)))
        values = [*key, b.trunc(advanced, I32), b.trunc(b.lshr(advanced, i64(32)), I32)]
        for i, value in enumerate(values):
            b.store(value, new_state.address(b, i64(i)))


@lowering(random_bits_p)
def _random_bits(spec: OpSpec) -> RandomBits:
    count = 1
    for d in spec.outputs[0].shape:
        count *= d  # type: ignore[operator]
    return RandomBits(count)
