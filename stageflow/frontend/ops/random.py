"""`sf.random`: seeds, generators and distributions over the counter-based `random_bits` op.

Every distribution is a composite of existing primitives applied to Philox bits (shifts,
casts, multiplies, ``log``/``sqrt``/``cos``/``sin``), so it traces and compiles like any other
op; only `random_bits` itself knows about Philox.

Streams. A `Generator` holds a ``uint32[4]`` state ``[key0, key1, counter_lo,
counter_hi]`` and draws TensorFlow's numbers for the same state (``tf.random.Generator``
with Philox, whose state ``[counter, 0, key]`` is the same words in 64-bit pieces):
``Generator.from_seed(s)`` starts the counter at the seed, key 0, as TensorFlow does; a draw
of n elements reads the Philox blocks from the counter on and then advances the counter by
``RESERVED_PER_ELEMENT * n`` (each element owns that many blocks of the stream, so a
distribution taking several words per element never reaches into the next draw's); the
words become values as TensorFlow's kernels make them (`_unit`, `_box_muller`), so code
ported from TensorFlow draws the numbers its outputs show.

Seed rule (TensorFlow's four cases, `tf.random.set_seed`):

1. no global seed, no op seed: the lazily created global generator, seeded from OS entropy,
   so unseeded programs differ from run to run;
2. ``set_seed(g)``, no op seed: the global generator is replaced by ``Generator.from_seed(g)``
   and draws continue its stream (the same program gives the same numbers);
3. and 4. an op seed ``s`` (with the global seed ``g``, or TensorFlow's default 87654321
   when none is set) selects a stream of its own, keyed by a Philox hash of ``(g, s)``. The
   stream is kept per ``s``, so repeated calls with the same op seed continue it (different
   numbers each call, the same sequence each run, as TensorFlow's per-op counters give);
   ``set_seed`` resets those streams.

A generator's state is an ``sf.Variable``, read and written only in
`Generator._read_state` / `Generator._write_state`: a staged function captures it by
reference, so it draws fresh numbers on every call, and ``set_seed`` resets the existing
generators in place, so functions traced before it see the reset too.
"""

from __future__ import annotations

import math
import operator
import secrets
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.core import context, dtypes
from stageflow.core.source import describe_location
from stageflow.frontend import replica
from stageflow.frontend.ops import elementwise as ew
from stageflow.frontend.ops.control import while_loop
from stageflow.frontend.ops.convert import convert_to_tensor, is_tensor
from stageflow.frontend.ops.creation import zeros
from stageflow.frontend.ops.math_ops import reduce_any
from stageflow.frontend.ops.reductions import argmax
from stageflow.frontend.ops.shape import concat, gather, reshape_to, split
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.variables import Variable
from stageflow.primitives import random as rp
from stageflow.primitives import structural as st
from stageflow.primitives.sorting import sort_p

__all__ = [
    "Generator",
    "RandomStreams",
    "categorical",
    "get_global_generator",
    "normal",
    "set_global_generator",
    "set_seed",
    "shuffle",
    "stateless_normal",
    "stateless_uniform",
    "truncated_normal",
    "uniform",
]

DEFAULT_GLOBAL_SEED = 87654321  # TensorFlow's DEFAULT_GRAPH_SEED, for op seeds without set_seed
_OP_SEED_DOMAIN = 1  # Philox counter word c2 for deriving op-seed keys (draws use c2 = 0)
_SEED_MIN, _SEED_LIMIT = -(1 << 63), 1 << 64
_FLOAT_OUT = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
_INT_OUT = (dtypes.int32, dtypes.int64)
# Bits of a word a [0, 1) uniform of each dtype takes (its low ones), as TensorFlow's
# kernels take them: the stored significand's width, so k * 2**-p is exact in the dtype.
_UNIT_BITS = {dtypes.float16: 10, dtypes.bfloat16: 7, dtypes.float32: 23}
RESERVED_PER_ELEMENT = 256  # Philox blocks of the stream each drawn element owns
# Box-Muller's floor under its first uniform, TensorFlow's, so that log never sees 0.
_BOX_MULLER_EPSILON = 1.0e-7


def _fail(op: str, message: str, error: type[Exception] = ValueError) -> Exception:
    return error(f"sf.random.{op}: {message}{describe_location()}")


def _seed_words(seed: Any, op: str) -> tuple[int, int]:
    """A seed as (lo32, hi32); any int in [-2**63, 2**64), negatives taken modulo 2**64."""
    if isinstance(seed, bool | np.bool_):
        raise _fail(op, f"a seed must be an int, got {seed!r}", TypeError)
    try:
        value = operator.index(seed)
    except TypeError:
        raise _fail(op, f"a seed must be an int, got {type(seed).__name__}", TypeError) from None
    if not _SEED_MIN <= value < _SEED_LIMIT:
        raise _fail(op, f"seed {value} does not fit in 64 bits")
    value %= _SEED_LIMIT
    return value & 0xFFFFFFFF, value >> 32


def _seed_state(seed: Any, op: str) -> np.ndarray:
    """TensorFlow's Philox state for an int seed, as stageflow's words: the counter the
    seed modulo 2**64, the key 0, or all ones for a negative seed (TensorFlow chops the
    seed into 64-bit words, two's complement)."""
    lo, hi = _seed_words(seed, op)
    key = 0xFFFFFFFF if operator.index(seed) < 0 else 0
    return np.array([key, key, lo, hi], dtype=np.uint32)


def _shape(shape: Any, op: str) -> tuple[int, ...]:
    if isinstance(shape, Tensor):
        shape = [int(d) for d in shape.numpy().reshape(-1)]
    try:
        return rp.check_shape(shape)
    except (TypeError, ValueError) as error:
        raise _fail(op, str(error), type(error)) from None


def _out_dtype(dtype: Any, allowed: tuple[np.dtype, ...], op: str) -> np.dtype:
    dtype = dtypes.as_dtype(dtype)
    if dtype not in allowed:
        names = ", ".join(d.name for d in allowed)
        raise _fail(op, f"dtype {dtype.name} is not supported (use one of {names})", TypeError)
    return dtype


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """float16/bfloat16 results are computed in float32 and cast: precision and GPU support."""
    return dtypes.float64 if dtype == dtypes.float64 else dtypes.float32


def _is_python_number(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


def _float_operand(value: Any, compute: np.dtype, name: str, op: str) -> Any:
    """A Python float, or a floating tensor cast to the computation dtype."""
    if _is_python_number(value):
        return float(value)
    tensor = convert_to_tensor(value)
    if not dtypes.is_floating(tensor.dtype):
        raise _fail(op, f"{name} must be a float or a floating tensor, got {tensor.dtype.name}",
                    TypeError)
    return ew.cast(tensor, compute)


def _affine(x: Tensor, scale: Any, offset: Any) -> Tensor:
    """x * scale + offset, skipping the identity parts (keeps traced graphs small)."""
    if not (isinstance(scale, float) and scale == 1.0):
        x = ew.multiply(x, scale)
    if not (isinstance(offset, float) and offset == 0.0):
        x = ew.add(x, offset)
    return x


def _unit(words: Tensor, dtype: np.dtype) -> Tensor:
    """[0, 1) uniforms from uint32 words as TensorFlow makes them (``Uint32ToFloat`` and
    its kin): the low ``p`` bits of a word as the significand of a number in [1, 2), minus
    1; of `dtype` float32-like (in float32: exact for the narrower ones) or float64, whose
    52 bits are the low 20 of the first word of a pair (the last axis of `words`) and all
    of the second."""
    if dtype != dtypes.float64:
        p = _UNIT_BITS[dtype]
        return ew.multiply(ew.cast(ew.mod(words, 1 << p), dtypes.float32), 2.0**-p)
    high, low = (reshape_to(w, words.shape[:-1]) for w in split(words, 2, axis=-1))
    high = ew.cast(ew.mod(high, 1 << 20), dtypes.float64)
    return ew.multiply(ew.add(ew.multiply(high, 2.0**32), ew.cast(low, dtypes.float64)),
                       2.0**-52)


def _wide(words: Tensor) -> Tensor:
    """uint64 values from pairs of words (the last axis): the first the low half."""
    low, high = (ew.cast(reshape_to(w, words.shape[:-1]), dtypes.uint64)
                 for w in split(words, 2, axis=-1))
    return ew.add(ew.multiply(high, np.uint64(1 << 32)), low)


def _box_muller(words: Tensor, dtype: np.dtype) -> Tensor:
    """Normals from blocks of four words (`words`: [blocks, 4]), TensorFlow's
    ``BoxMullerFloat``/``BoxMullerDouble``: a uniform u1 (floored at `_BOX_MULLER_EPSILON`)
    and an angle v = 2 pi u2 give ``sin(v) r`` and ``cos(v) r`` with ``r = sqrt(-2
    log(u1))``; float32 takes a word for each uniform (four normals a block), float64 a
    pair (two)."""
    if dtype == dtypes.float64:
        firsts, seconds = (reshape_to(w, (words.shape[0], 2)) for w in split(words, 2, axis=1))
        pairs = [(firsts, seconds)]
    else:
        x = split(words, 4, axis=1)
        pairs = [(x[0], x[1]), (x[2], x[3])]
    z = []
    for first, second in pairs:
        u1 = ew.maximum(_unit(first, dtype), _BOX_MULLER_EPSILON)
        angle = ew.multiply(_unit(second, dtype), 2.0 * math.pi)
        radius = ew.sqrt(ew.multiply(ew.log(u1), -2.0))
        z += [ew.multiply(ew.sin(angle), radius), ew.multiply(ew.cos(angle), radius)]
    return concat([reshape_to(v, (words.shape[0], 1)) for v in z], axis=1)


def _replica_keyed(state: Tensor, index: int) -> Tensor:
    """`state` with the key replica `index` draws with (TensorFlow's rule for a generator
    made in a strategy's scope): the first two words of the Philox block at counter
    ``index`` under the generator's key; the counter is the generator's."""
    key, counter = split(state, 2, axis=0)
    index_words = convert_to_tensor(np.array([index, 0], dtype=np.uint32))
    new_key, _ = rp.random_bits_p.bind(concat([key, index_words], axis=0), shape=(2,))
    return concat([new_key, counter], axis=0)


def _advanced(state: Tensor, blocks: int) -> Tensor:
    """`state` with its 64-bit counter advanced by `blocks` (modulo 2**64)."""
    key0, key1, low, high = split(state, 4, axis=0)
    step_low = np.uint32(blocks & 0xFFFFFFFF)
    step_high = np.uint32((blocks >> 32) & 0xFFFFFFFF)
    moved = ew.add(low, step_low)
    carry = ew.cast(ew.less(moved, low), dtypes.uint32)
    if step_high:
        high = ew.add(high, step_high)
    return concat([key0, key1, moved, ew.add(high, carry)], axis=0)


def _state_tensor(words: Any) -> Tensor:
    """A uint32 tensor from Python/NumPy words, each required to be in [0, 2**32)."""
    array = np.asarray(words)
    if array.dtype.kind not in "ui":
        raise _fail("Generator", f"state words must be ints, got {words!r}", TypeError)
    if array.size and (array.min() < 0 or array.max() > 0xFFFFFFFF):
        raise _fail("Generator", f"state words must be in [0, 2**32), got {words!r}")
    return convert_to_tensor(array.astype(np.uint32))


class Generator:
    """A Philox random stream: a ``uint32[4]`` state ``[key0, key1, counter_lo, counter_hi]``.

    Draws are pure functions of the state (`random_bits`); the generator replaces its state
    after each draw, so the next draw starts at the next unused counter. Thread-safe: a lock
    makes read-draw-write atomic, so two threads never get the same numbers.

    Construct it with `from_seed` (or `from_state`); its methods draw tensors of the shape asked
    for, float32 unless `dtype` says otherwise.

    >>> g = sf.random.Generator.from_seed(7)
    >>> x = g.normal((2, 3))
    >>> x.shape, x.dtype
    ((2, 3), dtype('float32'))
    >>> g.uniform((4,), maxval=10, dtype=sf.int32).dtype
    dtype('int32')
    >>> bool(sf.reduce_all(sf.random.Generator.from_seed(7).normal((2, 3)) == x))
    True
    """

    def __init__(self, state: Any) -> None:
        # The state is a variable, created eagerly even inside a trace: a staged function
        # reads and advances it at every call, so it draws fresh numbers each time.
        with context.init_scope():
            state = convert_to_tensor(state) if is_tensor(state) else _state_tensor(state)
            if state.dtype != dtypes.uint32:
                raise _fail("Generator", f"the state must be uint32, got {state.dtype.name}",
                            TypeError)
            if tuple(state.shape) != (rp.STATE_WORDS,):
                raise _fail("Generator", "the state must have shape (4,) = [key0, key1, "
                            f"counter_lo, counter_hi], got {tuple(state.shape)}")
            self._state = Variable(state, trainable=False, name="random_state")
        self._lock = threading.Lock()
        # Made in a distribution strategy's scope: each replica draws a stream of its own
        # (`_replica_keyed`), as TensorFlow's generators do there.
        self._per_replica = replica.scoped_strategy() is not None

    @classmethod
    def from_seed(cls, seed: int, alg: Any = None) -> Generator:
        """The stream for `seed`, TensorFlow's: the counter starts at the seed (taken
        modulo 2**64), the key is 0 (all ones for a negative seed, whose higher words
        TensorFlow fills with ones; its counter's upper half, ones too there, is not
        kept). `alg` is TensorFlow's choice of generator: Philox (``"philox"``, the
        default) is the one there is.

        >>> round(float(sf.random.Generator.from_seed(1).normal([])), 5)  # TensorFlow's too
        0.43842
        """
        _philox(alg, "Generator.from_seed")
        return cls(_seed_state(seed, "Generator.from_seed"))

    @classmethod
    def from_state(cls, state: Any, alg: Any = None) -> Generator:
        """A generator continuing from a saved `state`: stageflow's ``uint32[4]`` (see
        `Generator.state`), or TensorFlow's Philox state of three 64-bit words
        ``[counter, counter_high, key]`` (``counter_high`` 0: the counter is 64 bits
        here)."""
        _philox(alg, "Generator.from_state")
        if not is_tensor(state) and np.asarray(state).shape == (3,):
            counter, high, key = (int(w) % _SEED_LIMIT for w in np.asarray(state).tolist())
            if high:
                raise _fail("Generator.from_state", f"a counter past 2**64 (its upper "
                            f"word {high}) is not supported")
            state = [key & 0xFFFFFFFF, key >> 32, counter & 0xFFFFFFFF, counter >> 32]
        return cls(state)

    @classmethod
    def from_non_deterministic_state(cls, alg: Any = None) -> Generator:
        """A generator keyed from OS entropy (`secrets`), different in every run."""
        return cls.from_seed(secrets.randbits(64), alg)

    @property
    def state(self) -> Tensor:
        """The current ``uint32[4]`` state; `from_state` of it replays the same draws."""
        return self._read_state()

    def reset(self, seed: int) -> None:
        """Restart this generator (in place) as ``Generator.from_seed(seed)`` would start."""
        state = _seed_state(seed, "Generator.reset")
        with context.init_scope(), self._lock:
            self._state.assign(state)

    def reset_from_seed(self, seed: int) -> None:
        """`reset` (TensorFlow's name)."""
        self.reset(seed)

    def split(self, count: int = 1) -> list[Generator]:
        """`count` new generators, keyed by draws from this one (which advances), so that
        their streams are independent of it and of each other (TensorFlow's ``split``).

        >>> g = sf.random.Generator.from_seed(1)
        >>> a, b = g.split(2)
        >>> bool(sf.reduce_all(a.normal((3,)) == b.normal((3,))))
        False
        """
        keys = self.uniform_full_int((int(count),), dtypes.uint64).numpy()
        return [Generator(np.array([int(k) & 0xFFFFFFFF, int(k) >> 32, 0, 0], np.uint32))
                for k in keys]

    def make_seeds(self, count: int = 1) -> Tensor:
        """``int64[2, count]`` seeds for the stateless ops, drawn from this generator
        (TensorFlow's ``make_seeds``: a drawn key over a 0 in each column)."""
        keys = self.uniform_full_int((int(count),), dtypes.int64)
        return concat([reshape_to(keys, (1, int(count))),
                       zeros((1, int(count)), dtypes.int64)], axis=0)

    def _reset_words(self, key0: int, key1: int) -> None:
        with context.init_scope(), self._lock:
            self._state.assign(np.array([key0, key1, 0, 0], dtype=np.uint32))

    def _read_state(self) -> Tensor:
        return self._state.read_value()

    def _write_state(self, state: Tensor) -> None:
        self._state.assign(state)

    def bits(self, shape: Any) -> Tensor:
        """Raw uint32 Philox words of `shape` (element i: word i % 4 of block ctr + i // 4),
        each an element of the draw (`uniform_full_int` of uint32)."""
        shape = _shape(shape, "Generator.bits")
        return self._words(shape, math.prod(shape))

    def _words(self, shape: tuple[int, ...], elements: int) -> Tensor:
        """Words of `shape` from the counter on, the counter then advanced past the
        `elements` drawn (`RESERVED_PER_ELEMENT` blocks each)."""
        with self._lock:
            state = self._read_state()
            current = replica.current()
            keyed = (_replica_keyed(state, current.replica_index)
                     if self._per_replica and current is not None else state)
            bits, _ = rp.random_bits_p.bind(keyed, shape=shape)
            self._write_state(_advanced(state, RESERVED_PER_ELEMENT * elements))
        return bits

    def uniform_full_int(self, shape: Any, dtype: Any = dtypes.uint64) -> Tensor:
        """Integers over the whole range of `dtype` (TensorFlow's ``uniform_full_int``): a
        word each for 32 bits, a pair (the first the low half) for 64.

        >>> sf.random.Generator.from_seed(0).uniform_full_int([2], sf.uint32).numpy()
        array([1713891541, 3781805453], dtype=uint32)
        """
        shape = _shape(shape, "uniform_full_int")
        dtype = _out_dtype(dtype, (dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64),
                           "uniform_full_int")
        count = math.prod(shape)
        if dtype.itemsize == 4:
            return ew.cast(self._words(shape, count), dtype)
        return ew.cast(_wide(self._words(shape + (2,), count)), dtype)

    def uniform(self, shape: Any, minval: Any = 0.0, maxval: Any = None,
                dtype: Any = dtypes.float32) -> Tensor:
        """Uniform values in [minval, maxval).

        Floats: ``maxval`` defaults to 1.0; ``u * (maxval - minval) + minval`` with ``u`` in
        [0, 1) (`_unit`), so rounding may reach ``maxval`` for wide ranges, as in
        TensorFlow. Integers (int32, int64): ``maxval`` is required; ``minval + x %
        (maxval - minval)`` with ``x`` a word (int32) or a pair's 64 bits (int64),
        TensorFlow's rule, biased by at most ``(maxval - minval) / 2**32`` (``/ 2**64``).
        """
        shape = _shape(shape, "uniform")
        dtype = _out_dtype(dtype, _FLOAT_OUT + _INT_OUT, "uniform")
        if dtype in _INT_OUT:
            return self._uniform_int(shape, minval, maxval, dtype)
        compute = _compute_dtype(dtype)
        low = _float_operand(minval, compute, "minval", "uniform")
        high = _float_operand(1.0 if maxval is None else maxval, compute, "maxval", "uniform")
        words = shape + ((2,) if dtype == dtypes.float64 else ())
        unit = _unit(self._words(words, math.prod(shape)), dtype)  # in `compute`
        scale = high - low if isinstance(high, float) and isinstance(low, float) else (
            ew.subtract(high, low))
        return ew.cast(_affine(unit, scale, low), dtype)

    def _uniform_int(self, shape: tuple[int, ...], minval: Any, maxval: Any,
                     dtype: np.dtype) -> Tensor:
        if maxval is None:
            raise _fail("uniform", f"maxval is required for integer dtype {dtype.name}")
        info = np.iinfo(dtype)
        bounds = []
        for name, value in (("minval", minval), ("maxval", maxval)):
            if _is_python_number(value):
                if isinstance(value, float | np.floating) and not float(value).is_integer():
                    raise _fail("uniform", f"{name}={value!r} is not an integer", TypeError)
                value = int(value)
                if not info.min <= value <= info.max:
                    raise _fail("uniform", f"{name}={value} does not fit in {dtype.name}")
            else:
                value = ew.cast(convert_to_tensor(value, dtype), dtypes.int64)
            bounds.append(value)
        low, high = bounds
        if isinstance(low, int) and isinstance(high, int):
            if high <= low:
                raise _fail("uniform", f"needs minval < maxval, got [{low}, {high})")
            if high - low >= 1 << 63:
                raise _fail("uniform", f"the range [{low}, {high}) is wider than 2**63 - 1")
            width: Any = high - low
        else:
            width = ew.subtract(high, low)
        count = math.prod(shape)
        if dtype == dtypes.int32:
            value = ew.cast(self._words(shape, count), dtypes.int64)
        else:
            wide = width if isinstance(width, int) else ew.cast(width, dtypes.uint64)
            value = ew.cast(ew.mod(_wide(self._words(shape + (2,), count)),
                                   np.uint64(wide) if isinstance(wide, int) else wide),
                            dtypes.int64)
            width = None
        if width is not None:
            value = ew.mod(value, width)
        return ew.cast(ew.add(value, low), dtype)

    def normal(self, shape: Any, mean: Any = 0.0, stddev: Any = 1.0,
               dtype: Any = dtypes.float32) -> Tensor:
        """Normal values ``mean + stddev * z`` by the Box-Muller transform (`_box_muller`):
        four float32 normals from each Philox block, two float64 ones, in TensorFlow's
        order. float16/bfloat16 are computed in float32 and cast, as TensorFlow does.
        """
        shape = _shape(shape, "normal")
        dtype = _out_dtype(dtype, _FLOAT_OUT, "normal")
        compute = _compute_dtype(dtype)
        mean = _float_operand(mean, compute, "mean", "normal")
        stddev = _float_operand(stddev, compute, "stddev", "normal")
        count = math.prod(shape)
        if count == 0:
            return zeros(shape, dtype)
        per_block = 2 if compute == dtypes.float64 else 4
        blocks = -(-count // per_block)
        z = reshape_to(_box_muller(self._words((blocks, 4), count), compute),
                       (per_block * blocks,))
        if count != per_block * blocks:
            z = st.slice_p.bind(z, slices=((0, count, 1),))
        z = reshape_to(z, shape)
        return ew.cast(_affine(z, stddev, mean), dtype)

    def truncated_normal(self, shape: Any, mean: Any = 0.0, stddev: Any = 1.0,
                         dtype: Any = dtypes.float32) -> Tensor:
        """Normal values more than two standard deviations from the mean drawn again until
        none is (TensorFlow's rule): a `while_loop`, so a traced draw is one loop."""
        z = self.normal(shape, dtype=dtype)
        z = while_loop(lambda z: reduce_any(ew.greater(ew.abs(z), 2.0)),
                       lambda z: ew.where(ew.greater(ew.abs(z), 2.0),
                                          self.normal(shape, dtype=dtype), z), [z])[0]
        compute = _compute_dtype(z.dtype)
        return _affine(z, _float_operand(stddev, compute, "stddev", "truncated_normal"),
                       _float_operand(mean, compute, "mean", "truncated_normal"))

    def categorical(self, logits: Any, num_samples: int,
                    dtype: Any = dtypes.int64) -> Tensor:
        """`num_samples` class indices per row of ``[batch, classes]`` `logits`, drawn with
        probabilities ``softmax(logits)`` (the Gumbel-max trick: the argmax of the logits
        plus independent Gumbel noise)."""
        logits = convert_to_tensor(logits)
        if logits.ndim != 2 or None in logits.shape:
            raise _fail("categorical", f"logits must be [batch, classes] of known dims, got "
                        f"{logits.shape}")
        batch, classes = logits.shape
        tiny = float(np.finfo(_compute_dtype(logits.dtype)).tiny)
        u = self.uniform((batch, int(num_samples), classes), tiny, 1.0, dtype=logits.dtype)
        gumbel = ew.negative(ew.log(ew.negative(ew.log(u))))
        scores = ew.add(reshape_to(logits, (batch, 1, classes)), gumbel)
        return ew.cast(argmax(scores, axis=-1), dtype)

    def shuffle(self, value: Any) -> Tensor:
        """`value` with its rows (first axis) in a uniformly random order: the order that
        sorts one random 64-bit key per row (TensorFlow's `tf.random.shuffle`)."""
        value = convert_to_tensor(value)
        if value.ndim == 0 or value.shape[0] is None:
            raise _fail("shuffle", f"needs a tensor whose first dim is known, got shape "
                        f"{value.shape}")
        words = ew.cast(self.bits((value.shape[0], 2)), dtypes.int64)
        keys = ew.add(ew.multiply(words[:, 0], 2**32), words[:, 1])
        order = sort_p.bind(keys, axis=0, descending=False)[1]
        return gather(value, order, axis=0)

    def __repr__(self) -> str:
        words = ", ".join(f"{int(w):#010x}" for w in self._state.numpy())
        return f"sf.random.Generator(state=[{words}])"


_global_lock = threading.Lock()
_global_seed: int | None = None
_global_generator: Generator | None = None
_op_generators: dict[int, Generator] = {}


def set_seed(seed: int) -> None:
    """Make the global stream and every op-seeded stream deterministic, from `seed`.

    The global generator becomes ``Generator.from_seed(seed)`` and the per-op-seed streams
    start over, so the same program after ``set_seed(seed)`` draws the same numbers.

    >>> sf.random.set_seed(42)
    >>> a = sf.random.uniform((3,))
    >>> sf.random.set_seed(42)
    >>> bool(sf.reduce_all(sf.random.uniform((3,)) == a))
    True
    """
    global _global_seed, _global_generator
    _seed_words(seed, "set_seed")
    with _global_lock:
        _global_seed = operator.index(seed)
        if _global_generator is None:
            _global_generator = Generator.from_seed(seed)
        else:
            _global_generator.reset(seed)
        for op_seed, generator in _op_generators.items():
            generator._reset_words(*_derived_key(_global_seed, op_seed))


def get_global_generator() -> Generator:
    """The generator behind `normal`/`uniform` without an op seed (OS entropy if unseeded).

    >>> sf.random.set_seed(3)
    >>> g = sf.random.get_global_generator()
    >>> g.uniform((2,)).shape
    (2,)
    """
    global _global_generator
    with _global_lock:
        if _global_generator is None:
            _global_generator = Generator.from_non_deterministic_state()
        return _global_generator


def set_global_generator(generator: Generator) -> None:
    """Replace the global generator (as `tf.random.set_global_generator`).

    >>> sf.random.set_global_generator(sf.random.Generator.from_seed(5))
    >>> a = sf.random.uniform((3,))
    >>> sf.random.set_global_generator(sf.random.Generator.from_seed(5))
    >>> bool(sf.reduce_all(sf.random.uniform((3,)) == a))
    True
    """
    global _global_generator
    if not isinstance(generator, Generator):
        raise _fail("set_global_generator", "expected an sf.random.Generator", TypeError)
    with _global_lock:
        _global_generator = generator


class _Stateless(Generator):
    """Draws starting from a state made of the seed, kept in the object and not in a
    variable: TensorFlow's stateless ops, whose values are a function of their seed alone
    (one is made per op call, and a staged function may call them: no state is created)."""

    def __init__(self, seed: Any, op: str) -> None:
        words = ew.cast(convert_to_tensor(seed), dtypes.uint32)
        if tuple(words.shape) != (2,):
            raise _fail(op, f"seed must be a shape [2] integer tensor, got shape "
                            f"{tuple(words.shape)}")
        self._current = concat([words, zeros((2,), dtypes.uint32)], 0)
        self._lock = threading.Lock()
        self._per_replica = False

    def _read_state(self) -> Tensor:
        return self._current

    def _write_state(self, state: Tensor) -> None:
        self._current = state


def stateless_uniform(shape: Any, seed: Any, minval: Any = 0.0, maxval: Any = None,
                      dtype: Any = dtypes.float32, alg: Any = None) -> Tensor:
    """`uniform` as a function of `seed` (a pair of ints): the same seed, the same values.

    >>> a = sf.random.stateless_uniform((2,), seed=[1, 2])
    >>> bool(sf.reduce_all(a == sf.random.stateless_uniform((2,), seed=[1, 2])))
    True
    """
    _philox(alg, "stateless_uniform")
    return _Stateless(seed, "stateless_uniform").uniform(shape, minval, maxval, dtype)


def stateless_normal(shape: Any, seed: Any, mean: Any = 0.0, stddev: Any = 1.0,
                     dtype: Any = dtypes.float32, alg: Any = None) -> Tensor:
    """`normal` as a function of `seed` (a pair of ints).

    >>> sf.random.stateless_normal((2, 3), seed=[1, 2]).shape
    (2, 3)
    """
    _philox(alg, "stateless_normal")
    return _Stateless(seed, "stateless_normal").normal(shape, mean, stddev, dtype)


def _philox(alg: Any, op: str) -> None:
    """Refuse a generator algorithm other than Philox (TensorFlow's ``alg``)."""
    name = getattr(alg, "name", alg)
    if alg is not None and str(name).lower() not in ("philox", "1"):
        raise _fail(op, f"alg={alg!r}: only Philox ('philox') is implemented")


class RandomStreams:
    """Every random stream of the process as one checkpointable object: the global
    generator's state and each op-seeded stream's. A checkpoint holding it restores the
    draws to come, so that training resumed from it (`sf.keras.callbacks.BackupAndRestore`)
    drops out the same units as the run it continues. Op-seeded streams not drawn from yet
    in the restoring process are created by the restore.

    >>> import os, shutil, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> sf.random.set_seed(1)
    >>> path = sf.train.Checkpoint(random=sf.random.RandomStreams()).write(
    ...     os.path.join(directory, "rng"))
    >>> a = sf.random.uniform((2,), seed=3)
    >>> _ = sf.train.Checkpoint(random=sf.random.RandomStreams()).restore(path)
    >>> bool(sf.reduce_all(sf.random.uniform((2,), seed=3) == a))
    True
    >>> shutil.rmtree(directory)
    """

    def _checkpoint_state(self) -> dict[str, Any]:
        state = {"global": get_global_generator().state.numpy()}
        with _global_lock:
            seeded = dict(_op_generators)
            state["seed"] = _global_seed
        state["ops"] = {str(seed): g.state.numpy() for seed, g in sorted(seeded.items())}
        return state

    def _checkpoint_prepare(self, saved: Any, where: str) -> Callable[[], None]:
        if not isinstance(saved, dict) or set(saved) != {"global", "ops", "seed"}:
            raise ValueError(f"{where}: the saved random streams must be {{'global': state, "
                             f"'ops': {{seed: state}}, 'seed': global seed}}")
        seed = saved["seed"]
        if seed is not None:
            _seed_words(seed, where)
        states = {None: saved["global"], **{int(k): v for k, v in saved["ops"].items()}}
        for op_seed, value in states.items():
            value = np.asarray(value)
            if value.dtype != np.uint32 or value.shape != (rp.STATE_WORDS,):
                raise ValueError(f"{where}: a random stream's state must be uint32[4], got "
                                 f"{value.dtype}{list(value.shape)} for seed {op_seed}")

        def commit() -> None:
            global _global_seed
            with _global_lock:
                _global_seed = seed
                # A stream drawn from only after the save starts over, as it stood then.
                for op_seed, generator in _op_generators.items():
                    if op_seed not in states:
                        base = DEFAULT_GLOBAL_SEED if seed is None else seed
                        generator._reset_words(*_derived_key(base, op_seed))
            for op_seed, value in states.items():
                generator = _generator_for(op_seed, "RandomStreams")
                with context.init_scope(), generator._lock:
                    generator._state.assign(np.asarray(value))
        return commit


def _derived_key(global_seed: int, op_seed: int) -> tuple[int, int]:
    """A Philox hash of (global seed, op seed): the block at counter (op lo, op hi, 1, 0)."""
    key = _seed_words(global_seed, "set_seed")
    lo, hi = _seed_words(op_seed, "seed")
    words = rp.philox4x32(
        (np.uint64(lo), np.uint64(hi), np.uint64(_OP_SEED_DOMAIN), np.uint64(0)),
        (np.uint64(key[0]), np.uint64(key[1])),
    )
    return int(words[0]), int(words[1])


def _generator_for(seed: Any, op: str) -> Generator:
    if seed is None:
        return get_global_generator()
    _seed_words(seed, op)
    seed = operator.index(seed)
    with _global_lock:
        generator = _op_generators.get(seed)
        if generator is None:
            base = DEFAULT_GLOBAL_SEED if _global_seed is None else _global_seed
            key0, key1 = _derived_key(base, seed)
            generator = Generator(np.array([key0, key1, 0, 0], dtype=np.uint32))
            _op_generators[seed] = generator
        return generator


def normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0, dtype: Any = dtypes.float32,
           seed: int | None = None) -> Tensor:
    """Normal random values; `seed` selects an op-seeded stream (see the module's rule).

    shape: a list of ints; `mean` and `stddev` broadcast against it; returns `shape` of `dtype`
    (a float dtype, float32 by default). The same global and op seeds give the same values.

    >>> sf.random.set_seed(0)
    >>> x = sf.random.normal((2, 3), seed=1)
    >>> x.shape, x.dtype
    ((2, 3), dtype('float32'))
    >>> sf.random.set_seed(0)
    >>> bool(sf.reduce_all(sf.random.normal((2, 3), seed=1) == x))
    True
    """
    return _generator_for(seed, "normal").normal(shape, mean, stddev, dtype)


def uniform(shape: Any, minval: Any = 0.0, maxval: Any = None, dtype: Any = dtypes.float32,
            seed: int | None = None) -> Tensor:
    """Uniform random values in [minval, maxval) (see `Generator.uniform`).

    shape: a list of ints; returns `shape` of `dtype` (float32 by default; an int dtype needs
    `maxval`).

    >>> sf.random.set_seed(0)
    >>> x = sf.random.uniform((2, 2), minval=-1.0, maxval=1.0, seed=1)
    >>> x.shape, x.dtype
    ((2, 2), dtype('float32'))
    >>> bool(sf.reduce_all((x >= -1.0) & (x < 1.0)))
    True
    >>> sf.random.uniform((5,), maxval=3, dtype=sf.int32, seed=2).dtype
    dtype('int32')
    """
    return _generator_for(seed, "uniform").uniform(shape, minval, maxval, dtype)


def truncated_normal(shape: Any, mean: Any = 0.0, stddev: Any = 1.0,
                     dtype: Any = dtypes.float32, seed: int | None = None) -> Tensor:
    """Normal values within two standard deviations (see `Generator.truncated_normal`).

    shape: a list of ints; returns `shape` of `dtype` (a float dtype, float32 by default), every
    value within mean +- 2 stddev.

    >>> sf.random.set_seed(0)
    >>> x = sf.random.truncated_normal((1000,), seed=1)
    >>> x.shape, x.dtype
    ((1000,), dtype('float32'))
    >>> bool(sf.reduce_max(sf.abs(x)) <= 2.0)
    True
    """
    return _generator_for(seed, "truncated_normal").truncated_normal(shape, mean, stddev,
                                                                     dtype)


def shuffle(value: Any, seed: int | None = None) -> Tensor:
    """`value`'s rows in a random order (see `Generator.shuffle`); same shape and dtype.
    ``sf.random.shuffle(sf.range(5), seed=1)`` is a permutation of ``[0, 1, 2, 3, 4]``.

    value: tensor [n, ...] of any dtype; returns its shape and dtype.

    >>> sf.random.set_seed(0)
    >>> sf.sort(sf.random.shuffle(sf.range(5), seed=1))
    sf.Tensor([0, 1, 2, 3, 4], shape=(5,), dtype=int32)
    """
    return _generator_for(seed, "shuffle").shuffle(value)


def categorical(logits: Any, num_samples: int, dtype: Any = dtypes.int64,
                seed: int | None = None) -> Tensor:
    """Class indices drawn from ``softmax(logits)`` per row (see `Generator.categorical`).

    logits: float tensor [batch, classes]; returns [batch, num_samples] of `dtype` (int64 by
    default).

    >>> sf.random.set_seed(0)
    >>> sf.random.categorical([[0.0, 100.0], [100.0, 0.0]], 3, seed=1)
    sf.Tensor([[1, 1, 1],
               [0, 0, 0]], shape=(2, 3), dtype=int64)
    """
    return _generator_for(seed, "categorical").categorical(logits, num_samples, dtype)
