"""The random primitive: `random_bits`, counter-based Philox-4x32-10 bits from an explicit state.

Why counter-based: a counter-based generator (Salmon, Moraes, Dror, Shaw, "Parallel random
numbers: as easy as 1, 2, 3", SC 2011; the Random123 library) is a pure function
``block = philox(counter, key)``. There is no hidden state to thread through the IR, every
output element can be computed independently (one GPU thread per element, one SIMD lane on
the CPU), and the same arithmetic on 32/64-bit integers gives bit-identical results in NumPy,
LLVM IR and PTX. TensorFlow's stateless random ops and JAX's ``rbg`` use the same generator.

State layout (a ``uint32[4]`` tensor)::

    state = [key0, key1, counter_lo, counter_hi]

``random_bits(state, shape=S)`` returns ``(bits, new_state)``: ``bits`` is ``uint32[S]`` and
``new_state`` is ``state`` with the 64-bit counter ``counter_hi * 2**32 + counter_lo``
advanced by the number of Philox blocks consumed, ``ceil(n / 4)`` for ``n`` elements
(modulo 2**64). Consecutive calls therefore never reuse a counter.

Stream layout: element ``i`` (row-major) of ``bits`` is word ``i % 4`` of the Philox block
for the 128-bit counter ``(c0, c1, c2, c3) = (lo32(ctr + i // 4), hi32(ctr + i // 4), 0, 0)``
and key ``(key0, key1)``. A call whose size is not a multiple of 4 discards the unused words
of its last block, so ``4 * k`` values drawn in pieces of multiples of 4 equal one draw of
``4 * k``, while 5 then 3 values do not equal one draw of 8 (the second call starts at a
fresh block).

The primitive is pure (no `effects`): it may be folded or pruned like any other op;
statefulness lives in whoever holds the state (`sf.random.Generator`).
"""

from __future__ import annotations

import numpy as np

from stageflow.core import dtypes
from stageflow.core.op_facts import Cost, Family, LoweredBy
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.shapes import format_shape

# Philox-4x32 constants (Random123, philox.h): the round multipliers and the Weyl sequence
# increments that bump the key between rounds (golden ratio and sqrt(3) - 1, times 2**32).
PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
PHILOX_ROUNDS = 10

WORDS_PER_BLOCK = 4
STATE_WORDS = 4

_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)


def _mulhilo(multiplier: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """High and low 32-bit halves of ``multiplier * x`` for 32-bit values held in uint64.

    The product of two 32-bit numbers fits in 64 bits, so one 64-bit multiply gives both
    halves: in LLVM IR ``zext i32 -> i64; mul i64; lshr 32; trunc``, in PTX ``mul.hi.u32`` and
    ``mul.lo.u32``.
    """
    product = np.uint64(multiplier) * x
    return product >> _SHIFT32, product & _MASK32


def philox4x32(
    counter: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    key: tuple[np.ndarray, np.ndarray],
    rounds: int = PHILOX_ROUNDS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The Philox-4x32 block function on arrays of counters, vectorised over any shape.

    ``counter`` is four arrays of 32-bit words (c0, c1, c2, c3), ``key`` two (k0, k1); the
    arrays broadcast against each other and may hold their values in any unsigned dtype.
    Returns the four output words as uint32 arrays. One round is::

        hi0, lo0 = mulhilo(M0, c0)
        hi1, lo1 = mulhilo(M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0,  lo1,  hi0 ^ c3 ^ k1,  lo0

    and between two rounds the key is bumped: ``k0 += W0; k1 += W1`` (mod 2**32), so ten
    rounds use nine bumps. All arithmetic is on 32-bit values kept in uint64 arrays (masked
    after each addition), which is exactly what a lowering to LLVM or PTX emits.
    """
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in counter)
    k0, k1 = (np.asarray(k, dtype=np.uint64) for k in key)
    for round_index in range(rounds):
        if round_index:
            k0 = (k0 + np.uint64(PHILOX_W0)) & _MASK32
            k1 = (k1 + np.uint64(PHILOX_W1)) & _MASK32
        hi0, lo0 = _mulhilo(PHILOX_M0, c0)
        hi1, lo1 = _mulhilo(PHILOX_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return tuple(np.asarray(c, dtype=np.uint32) for c in (c0, c1, c2, c3))


def _num_blocks(count: int) -> int:
    return -(-count // WORDS_PER_BLOCK)


def _random_bits(state: np.ndarray, *, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The eager kernel: ``ceil(n / 4)`` Philox blocks at consecutive counters, row-major."""
    key0, key1, counter_lo, counter_hi = (int(w) for w in np.asarray(state, dtype=np.uint32))
    counter = (counter_hi << 32) | counter_lo
    count = int(np.prod(shape, dtype=np.int64))
    blocks = _num_blocks(count)
    # Block counters wrap modulo 2**64, as the 64-bit add in compiled code does.
    offsets = np.arange(blocks, dtype=np.uint64)
    block_counters = offsets + np.uint64(counter)
    zero = np.zeros((), dtype=np.uint64)
    words = philox4x32(
        (block_counters & _MASK32, block_counters >> _SHIFT32, zero, zero),
        (np.uint64(key0), np.uint64(key1)),
    )
    bits = np.stack(words, axis=-1).reshape(-1)[:count].reshape(shape)
    advanced = (counter + blocks) % (1 << 64)
    new_state = np.array(
        [key0, key1, advanced & 0xFFFFFFFF, advanced >> 32], dtype=np.uint32
    )
    return bits, new_state


def check_shape(shape: object) -> tuple[int, ...]:
    """A static shape as a tuple of non-negative Python ints, or a clear error."""
    if isinstance(shape, int | np.integer) and not isinstance(shape, bool | np.bool_):
        shape = (shape,)
    try:
        dims = tuple(shape)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    result = []
    for dim in dims:
        if isinstance(dim, bool | np.bool_) or not isinstance(dim, int | np.integer):
            raise TypeError(f"shape {dims!r} has a dim that is not an int: {dim!r}")
        if dim < 0:
            raise ValueError(f"shape {dims!r} has a negative dim")
        result.append(int(dim))
    return tuple(result)


def _random_bits_rule(state: ShapedType, *, shape: tuple[int, ...]) -> tuple[ShapedType, ...]:
    if state.dtype != dtypes.uint32:
        raise TypeError(f"the state must be a uint32 tensor, got {state.dtype.name}")
    if tuple(state.shape) != (STATE_WORDS,):
        raise ValueError(
            f"the state must have shape ({STATE_WORDS},) = [key0, key1, counter_lo, "
            f"counter_hi], got {format_shape(state.shape)}"
        )
    shape = check_shape(shape)
    return ShapedType(shape, dtypes.uint32), ShapedType((STATE_WORDS,), dtypes.uint32)


random_bits_p = Primitive(
    "random_bits",
    shape_rule=_random_bits_rule,
    kernel=_random_bits,
    summary=(
        "uint32 Philox-4x32-10 bits of `shape` from state [key0, key1, ctr_lo, ctr_hi]; "
        "element i is word i % 4 of block ctr + i // 4; also returns the state with the "
        "counter advanced by ceil(n / 4)"
    ),
    multiple_results=True,
    family=Family.RANDOM, cost=Cost.RANDOM, lowered_by=LoweredBy.OP_RULE,
)
random_bits_p.def_nondifferentiable()
