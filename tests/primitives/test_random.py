"""Tests for `sf.random`: Philox known answers, the stream layout, seeds, statistics, errors."""

from __future__ import annotations

import math
import threading

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import stageflow as sf
from stageflow.core import context
from stageflow.core.primitive import REGISTRY
from stageflow.frontend.ops import random as sf_random
from stageflow.primitives import random as rp

N = 100_000


@pytest.fixture(autouse=True)
def _isolated_global_state():
    """Each test starts from an unseeded module and leaves no seed behind."""
    saved = (sf_random._global_seed, sf_random._global_generator,
             dict(sf_random._op_generators))
    sf_random._global_seed = None
    sf_random._global_generator = None
    sf_random._op_generators.clear()
    yield
    sf_random._global_seed, sf_random._global_generator = saved[:2]
    sf_random._op_generators.clear()
    sf_random._op_generators.update(saved[2])


def _block(counter: list[int], key: list[int]) -> list[int]:
    words = rp.philox4x32(tuple(np.uint64(c) for c in counter),
                          tuple(np.uint64(k) for k in key))
    return [int(w) for w in words]


def _state(key0: int, key1: int, lo: int, hi: int) -> sf.Tensor:
    return sf.constant(np.array([key0, key1, lo, hi], dtype=np.uint32))


# --- Philox-4x32-10 itself -------------------------------------------------------------------

# Random123's kat_vectors for philox4x32_10: counter, key, expected output.
KNOWN_ANSWERS = [
    ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
     [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
]


@pytest.mark.parametrize(("counter", "key", "expected"), KNOWN_ANSWERS)
def test_philox_known_answers(counter, key, expected):
    assert _block(counter, key) == expected


def test_philox_is_vectorised_over_counters():
    counters = [np.array([kat[0][i] for kat in KNOWN_ANSWERS], dtype=np.uint32) for i in range(4)]
    keys = [np.array([kat[1][i] for kat in KNOWN_ANSWERS], dtype=np.uint32) for i in range(2)]
    words = rp.philox4x32(tuple(counters), tuple(keys))
    assert all(w.dtype == np.uint32 for w in words)
    for row, (_, _, expected) in enumerate(KNOWN_ANSWERS):
        assert [int(w[row]) for w in words] == expected


def test_primitive_is_registered_pure_and_multiple_results():
    assert REGISTRY["random_bits"] is rp.random_bits_p
    assert rp.random_bits_p.multiple_results
    assert not rp.random_bits_p.stateful


# --- the stream layout -----------------------------------------------------------------------

def test_element_i_is_word_i_mod_4_of_block_counter_plus_i_div_4():
    key0, key1, counter = 0x12345678, 0x9ABCDEF0, (7 << 32) | 0xFFFFFFFE  # lo carries into hi
    bits, new_state = rp.random_bits_p.bind(
        _state(key0, key1, counter & 0xFFFFFFFF, counter >> 32), shape=(2, 5))
    assert bits.dtype == sf.uint32 and bits.shape == (2, 5)
    flat = bits.numpy().reshape(-1)
    for i, value in enumerate(flat):
        block = counter + i // 4
        expected = _block([block & 0xFFFFFFFF, block >> 32, 0, 0], [key0, key1])
        assert int(value) == expected[i % 4]
    advanced = counter + 3  # ceil(10 / 4) blocks
    assert new_state.numpy().tolist() == [key0, key1, advanced & 0xFFFFFFFF, advanced >> 32]


def test_counter_wraps_modulo_2_to_the_64():
    bits, new_state = rp.random_bits_p.bind(
        _state(0, 0, 0xFFFFFFFF, 0xFFFFFFFF), shape=(8,))
    assert bits.numpy()[4:].tolist() == KNOWN_ANSWERS[0][2]  # block 2**64 is block 0
    assert new_state.numpy().tolist() == [0, 0, 1, 0]


def test_state_operand_is_not_modified():
    state = _state(1, 2, 3, 4)
    rp.random_bits_p.bind(state, shape=(9,))
    assert state.numpy().tolist() == [1, 2, 3, 4]


@settings(max_examples=50, deadline=None)
@given(hs.lists(hs.integers(0, 13), min_size=1, max_size=6))
def test_each_element_drawn_reserves_its_blocks(sizes):
    """TensorFlow's rule: a draw of n elements starts at the counter and moves it on by
    256 n blocks, where the next draw starts."""
    g = sf_random.Generator.from_seed(11)
    pieces = [g.bits((n,)).numpy() for n in sizes]
    starts = np.cumsum([11] + [sf_random.RESERVED_PER_ELEMENT * n for n in sizes])
    for piece, start, n in zip(pieces, starts, sizes, strict=False):
        replay = sf_random.Generator.from_state([0, 0, int(start), 0]).bits((n,)).numpy()
        np.testing.assert_array_equal(piece, replay)
    assert g.state.numpy().tolist()[2] == starts[-1]


def test_five_then_three_is_not_a_draw_of_eight():
    g = sf_random.Generator.from_seed(3)
    parts = np.concatenate([g.bits((5,)).numpy(), g.bits((3,)).numpy()])
    whole = sf_random.Generator.from_seed(3).bits((8,)).numpy()
    assert parts[:5].tolist() == whole[:5].tolist()
    assert parts[5:].tolist() != whole[5:].tolist()


def test_zero_size_draw_does_not_advance_the_counter():
    g = sf_random.Generator.from_seed(1)
    assert g.bits((0, 3)).shape == (0, 3)
    assert g.normal((2, 0)).shape == (2, 0)
    assert g.uniform((0,), dtype=sf.int64, maxval=4).shape == (0,)
    assert g.state.numpy().tolist() == [0, 0, 1, 0]


# --- seeds and streams -----------------------------------------------------------------------

def test_from_seed_puts_the_seed_in_the_counter():
    """As TensorFlow's ``Generator.from_seed``: state ``[seed, 0, 0]`` in 64-bit words."""
    assert sf_random.Generator.from_seed(0x1122334455667788).state.numpy().tolist() == [
        0, 0, 0x55667788, 0x11223344]
    assert sf_random.Generator.from_seed(-1).state.numpy().tolist() == [0xFFFFFFFF] * 4
    assert sf_random.Generator.from_state([0x1122334455667788, 0, 7]).state.numpy(
        ).tolist() == [7, 0, 0x55667788, 0x11223344]  # TensorFlow's form of a state
    with pytest.raises(ValueError, match="counter past 2"):
        sf_random.Generator.from_state([1, 1, 0])


def test_tensorflows_numbers_for_its_states():
    """Values TensorFlow's ``tf.random.Generator`` (Philox) gives for the same states."""
    np.testing.assert_allclose(sf_random.Generator.from_seed(1).normal([2, 3]).numpy(), [
        [0.43842274, -0.53439844, -0.07710262], [1.5658046, -0.1012345, -0.2744976]],
        rtol=1e-5)

    def g():
        return sf_random.Generator.from_state([5, 0, 7])

    np.testing.assert_allclose(g().uniform([4]).numpy(),
                               [0.36983442, 0.15459263, 0.56228673, 0.29551649], rtol=1e-6)
    np.testing.assert_allclose(g().normal([3], dtype=sf.float64).numpy(),
                               [0.00311308519048046, -0.2905084335666235, -0.41408499772837],
                               rtol=1e-12)
    np.testing.assert_allclose(g().uniform([3], dtype=sf.float64).numpy(),
                               [0.9586757051844013, 0.4982945626518065, 0.8812222175653592],
                               rtol=1e-15)
    assert g().uniform([5], 3, 20, dtype=sf.int32).numpy().tolist() == [11, 10, 19, 15, 7]
    assert g().uniform([3], -5, 1000, dtype=sf.int64).numpy().tolist() == [683, 315, 271]
    assert g().uniform_full_int([3], sf.int64).numpy().tolist() == [
        6202522875320030908, -5177499663224801021, 8633183481599236476]
    split = g()
    assert [int(c.state.numpy()[0]) + (int(c.state.numpy()[1]) << 32)
            for c in split.split(2)] == [6202522875320030908, 13269244410484750595]
    assert split.state.numpy().tolist() == [7, 0, 517, 0]


def test_same_seed_same_stream_different_seeds_differ():
    a, b, c = (sf_random.Generator.from_seed(s) for s in (42, 42, 43))
    for _ in range(3):
        x, y, z = a.normal((7,)), b.normal((7,)), c.normal((7,))
        np.testing.assert_array_equal(x.numpy(), y.numpy())
        assert not np.array_equal(x.numpy(), z.numpy())


def test_consecutive_calls_differ():
    g = sf_random.Generator.from_seed(0)
    assert not np.array_equal(g.uniform((16,)).numpy(), g.uniform((16,)).numpy())
    sf_random.set_seed(0)
    assert not np.array_equal(sf_random.normal((16,)).numpy(), sf_random.normal((16,)).numpy())


def test_set_seed_replays_the_global_stream_and_equals_from_seed():
    sf_random.set_seed(1234)
    first = [sf_random.normal((3,)).numpy(), sf_random.uniform((5,)).numpy()]
    sf_random.set_seed(1234)
    second = [sf_random.normal((3,)).numpy(), sf_random.uniform((5,)).numpy()]
    g = sf_random.Generator.from_seed(1234)
    third = [g.normal((3,)).numpy(), g.uniform((5,)).numpy()]
    for x, y, z in zip(first, second, third, strict=True):
        np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(x, z)


def test_state_round_trips_through_from_state():
    g = sf_random.Generator.from_seed(9)
    g.normal((5,))
    replay = sf_random.Generator.from_state(g.state)
    np.testing.assert_array_equal(g.uniform((6,)).numpy(), replay.uniform((6,)).numpy())
    assert sf_random.Generator([1, 2, 3, 4]).state.numpy().tolist() == [1, 2, 3, 4]


def test_unseeded_global_generators_differ():
    a = sf_random.normal((4,)).numpy()
    sf_random._global_generator = None  # a fresh process would create a fresh one
    b = sf_random.normal((4,)).numpy()
    assert not np.array_equal(a, b)
    assert sf_random.get_global_generator() is sf_random.get_global_generator()


def test_op_seed_streams_continue_and_reset_with_set_seed():
    sf_random.set_seed(7)
    first = [sf_random.uniform((4,), seed=1).numpy() for _ in range(2)]
    other = sf_random.uniform((4,), seed=2).numpy()
    plain = sf_random.uniform((4,)).numpy()
    assert not np.array_equal(first[0], first[1])  # the stream continues call to call
    assert not np.array_equal(first[0], other)
    assert not np.array_equal(first[0], plain)
    sf_random.set_seed(7)
    again = [sf_random.uniform((4,), seed=1).numpy() for _ in range(2)]
    for x, y in zip(first, again, strict=True):
        np.testing.assert_array_equal(x, y)
    sf_random.set_seed(8)  # the global seed takes part in the op seed's stream
    assert not np.array_equal(sf_random.uniform((4,), seed=1).numpy(), first[0])


def test_op_seed_without_global_seed_is_deterministic():
    a = sf_random.normal((4,), seed=5).numpy()
    sf_random._op_generators.clear()  # what a fresh process sees
    b = sf_random.normal((4,), seed=5).numpy()
    np.testing.assert_array_equal(a, b)
    sf_random.set_seed(sf_random.DEFAULT_GLOBAL_SEED)
    np.testing.assert_array_equal(sf_random.normal((4,), seed=5).numpy(), a)


def test_threads_never_share_numbers():
    g = sf_random.Generator.from_seed(0)
    results: list[np.ndarray] = []

    def draw() -> None:
        for _ in range(50):
            results.append(g.bits((4,)).numpy())

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({tuple(r.tolist()) for r in results}) == 200
    assert g.state.numpy().tolist()[2] == 200 * 4 * sf_random.RESERVED_PER_ELEMENT


# --- from bits to distributions --------------------------------------------------------------

def test_float32_uniform_is_the_low_23_bits():
    bits = sf_random.Generator.from_seed(2).bits((10,)).numpy()
    u = sf_random.Generator.from_seed(2).uniform((10,)).numpy()
    np.testing.assert_array_equal(u, (bits & 0x7FFFFF).astype(np.float32) * np.float32(2.0**-23))


def test_float64_uniform_uses_52_bits_of_two_words():
    bits = sf_random.Generator.from_seed(2).bits((10, 2)).numpy().astype(np.uint64)
    u = sf_random.Generator.from_seed(2).uniform((10,), dtype=sf.float64).numpy()
    expected = ((bits[:, 0] & np.uint64(0xFFFFF)) * 2**32 + bits[:, 1]) * 2.0**-52
    np.testing.assert_array_equal(u, expected)


def test_normal_is_box_muller_of_the_bits():
    """TensorFlow's ``BoxMullerFloat``: words (x0, x1) give sin(v) r and cos(v) r, v = 2 pi
    u(x1), r = sqrt(-2 log max(u(x0), 1e-7)); four normals a block."""
    bits = sf_random.Generator.from_seed(4).bits((2, 4)).numpy()
    z = sf_random.Generator.from_seed(4).normal((7,)).numpy()
    u = (bits & 0x7FFFFF).astype(np.float64) * 2.0**-23
    expected = []
    for block in u:
        for first, second in ((block[0], block[1]), (block[2], block[3])):
            r = np.sqrt(-2 * np.log(max(first, 1e-7)))
            expected += [np.sin(2 * np.pi * second) * r, np.cos(2 * np.pi * second) * r]
    np.testing.assert_allclose(z, expected[:7], rtol=1e-5, atol=1e-6)


def _ks_statistic(samples: np.ndarray, cdf) -> float:
    x = np.sort(samples.astype(np.float64))
    f = cdf(x)
    n = len(x)
    return float(max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n)))


KS_CRITICAL_1PCT = 1.63 / math.sqrt(N)
_erf = np.frompyfunc(math.erf, 1, 1)


def _normal_cdf(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + _erf(x / math.sqrt(2)).astype(np.float64))


@pytest.mark.parametrize("dtype", [sf.float32, sf.float64])
def test_uniform_statistics(dtype):
    u = sf_random.Generator.from_seed(100).uniform((N,), dtype=dtype).numpy()
    assert u.dtype == dtype
    assert u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 5 * math.sqrt(1 / 12 / N)
    assert abs(u.std() - math.sqrt(1 / 12)) < 0.005
    assert _ks_statistic(u, lambda x: x) < KS_CRITICAL_1PCT


@pytest.mark.parametrize("dtype", [sf.float32, sf.float64])
def test_normal_statistics(dtype):
    z = sf_random.Generator.from_seed(200).normal((N,), dtype=dtype).numpy()
    assert z.dtype == dtype and np.all(np.isfinite(z))
    assert abs(z.mean()) < 5 / math.sqrt(N)
    assert abs(z.std() - 1) < 5 / math.sqrt(2 * N)
    assert _ks_statistic(z, _normal_cdf) < KS_CRITICAL_1PCT
    assert np.abs(z).max() < (6.0 if dtype == sf.float32 else 9.0)


def test_normal_and_uniform_scale_and_shift():
    g = sf_random.Generator.from_seed(300)
    z = g.normal((N,), mean=3.0, stddev=0.5).numpy()
    assert abs(z.mean() - 3) < 0.01 and abs(z.std() - 0.5) < 0.01
    u = g.uniform((N,), minval=-2.0, maxval=6.0).numpy()
    assert u.min() >= -2 and u.max() < 6 and abs(u.mean() - 2) < 0.05
    per_column = g.uniform((1000, 2), minval=sf.constant([0.0, 10.0]), maxval=20.0).numpy()
    assert per_column[:, 0].min() >= 0 and per_column[:, 1].min() >= 10


def test_uniform_float64_has_more_than_24_bits():
    u = sf_random.Generator.from_seed(1).uniform((1000,), dtype=sf.float64).numpy()
    assert np.mean(u * 2**24 != np.floor(u * 2**24)) > 0.99


@pytest.mark.parametrize("dtype", [sf.int32, sf.int64])
def test_int_uniform_in_range_and_evenly_spread(dtype):
    x = sf_random.Generator.from_seed(400).uniform((N,), minval=-3, maxval=7, dtype=dtype).numpy()
    assert x.dtype == dtype
    assert x.min() == -3 and x.max() == 6
    counts = np.bincount(x + 3, minlength=10)
    chi2 = float(np.sum((counts - N / 10) ** 2 / (N / 10)))
    assert chi2 < 30  # 9 degrees of freedom: p < 0.001 above 27.9


def test_int_uniform_extreme_bounds():
    g = sf_random.Generator.from_seed(5)
    x = g.uniform((1000,), minval=-(2**31), maxval=2**31 - 1, dtype=sf.int32).numpy()
    assert x.min() < -(2**30) and x.max() > 2**30
    y = g.uniform((1000,), minval=-(2**62), maxval=2**62 - 1, dtype=sf.int64).numpy()
    assert y.min() >= -(2**62) and y.max() < 2**62 and y.max() > 2**61
    tensors = g.uniform((100,), minval=sf.constant(5), maxval=sf.constant(8), dtype=sf.int32)
    assert set(tensors.numpy().tolist()) == {5, 6, 7}


@pytest.mark.parametrize("dtype", [sf.float16, sf.bfloat16])
def test_low_precision_floats(dtype):
    g = sf_random.Generator.from_seed(6)
    u = g.uniform((N,), dtype=dtype)
    assert u.dtype == dtype
    values = u.numpy().astype(np.float32)
    assert values.min() >= 0 and values.max() < 1  # float32 * cast would round up to 1.0
    assert abs(values.mean() - 0.5) < 0.01
    z = g.normal((N,), dtype=dtype)
    assert z.dtype == dtype
    values = z.numpy().astype(np.float32)
    assert np.all(np.isfinite(values)) and abs(values.mean()) < 0.02
    assert abs(values.std() - 1) < 0.02


@pytest.mark.parametrize("dtype", [sf.float16, sf.bfloat16, sf.float32, sf.float64])
def test_scalar_shapes(dtype):
    g = sf_random.Generator.from_seed(0)
    for value in (g.normal((), dtype=dtype), g.uniform([], dtype=dtype)):
        assert value.shape == () and value.dtype == dtype
    assert g.uniform((), maxval=3, dtype=sf.int64).shape == ()
    assert sf_random.normal(3).shape == (3,)
    assert sf_random.uniform(np.array([2, 3])).shape == (2, 3)


@settings(max_examples=40, deadline=None)
@given(hs.lists(hs.integers(0, 5), max_size=4),
       hs.sampled_from([sf.float16, sf.bfloat16, sf.float32, sf.float64]))
def test_shapes_property(shape, dtype):
    g = sf_random.Generator.from_seed(len(shape))
    n = math.prod(shape)
    u = g.uniform(shape, dtype=dtype)
    z = g.normal(tuple(shape), dtype=dtype)
    i = g.uniform(shape, maxval=5, dtype=sf.int32)
    for t in (u, z, i):
        assert t.shape == tuple(shape)
    assert u.dtype == dtype and z.dtype == dtype
    values = u.numpy().astype(np.float64)
    assert np.all((values >= 0) & (values < 1))
    assert np.all(np.isfinite(z.numpy().astype(np.float64)))
    assert np.all((i.numpy() >= 0) & (i.numpy() < 5))
    # three draws of n elements from the seed's counter, each element its blocks
    assert g.state.numpy().tolist()[2] == len(shape) + 3 * sf_random.RESERVED_PER_ELEMENT * n


def test_bfloat16_is_the_ml_dtypes_type():
    assert sf_random.uniform((2,), dtype=sf.bfloat16).numpy().dtype == ml_dtypes.bfloat16


# --- bad arguments ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: sf_random.normal((2, -1)), ValueError, "negative"),
        (lambda: sf_random.uniform((2.5,)), TypeError, "not an int"),
        (lambda: sf_random.uniform("abc"), TypeError, "not an int"),
        (lambda: sf_random.uniform(None), TypeError, "shape"),
        (lambda: sf_random.normal((2,), dtype=sf.int32), TypeError, "int32"),
        (lambda: sf_random.uniform((2,), dtype=sf.bool), TypeError, "bool"),
        (lambda: sf_random.uniform((2,), dtype="complex64"), TypeError, "complex64"),
        (lambda: sf_random.uniform((2,), dtype=sf.int32), ValueError, "maxval is required"),
        (lambda: sf_random.uniform((2,), 5, 5, dtype=sf.int32), ValueError, "minval < maxval"),
        (lambda: sf_random.uniform((2,), 0, 2**40, dtype=sf.int32), ValueError, "fit"),
        (lambda: sf_random.uniform((2,), 0.5, 3, dtype=sf.int32), TypeError, "not an integer"),
        (lambda: sf_random.uniform((2,), -(2**63), 2**63 - 1, dtype=sf.int64), ValueError,
         "wider"),
        (lambda: sf_random.normal((2,), mean=sf.constant(1)), TypeError, "mean"),
        (lambda: sf_random.set_seed(1.5), TypeError, "seed"),
        (lambda: sf_random.set_seed(True), TypeError, "seed"),
        (lambda: sf_random.set_seed(2**64), ValueError, "64 bits"),
        (lambda: sf_random.normal((2,), seed="x"), TypeError, "seed"),
        (lambda: sf_random.Generator.from_seed(-(2**63) - 1), ValueError, "64 bits"),
        (lambda: sf_random.Generator([1, 2, 3]), ValueError, r"shape \(4,\)"),
        (lambda: sf_random.Generator(sf.constant([1, 2, 3, 4])), TypeError, "uint32"),
        (lambda: sf_random.Generator([1, 2, 3, -4]), ValueError, "2\\*\\*32"),
        (lambda: sf_random.Generator([1.0, 2, 3, 4]), TypeError, "ints"),
        (lambda: sf_random.set_global_generator(object()), TypeError, "Generator"),
    ],
)
def test_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_primitive_checks_its_state():
    with pytest.raises(ValueError, match=r"random_bits.*shape \(4,\)"):
        rp.random_bits_p.bind(sf.constant(np.zeros((2, 2), dtype=np.uint32)), shape=(3,))
    with pytest.raises(TypeError, match="random_bits.*uint32"):
        rp.random_bits_p.bind(sf.constant([0, 0, 0, 0]), shape=(3,))
    with pytest.raises(ValueError, match="negative"):
        rp.random_bits_p.bind(_state(0, 0, 0, 0), shape=(-1,))


def test_the_bind_path_gives_the_same_numbers():
    """Tapes and tracing send every op through `Primitive.bind`; the numbers must not change."""
    def draw() -> list[np.ndarray]:
        g = sf_random.Generator.from_seed(77)
        return [g.uniform((5,)).numpy(), g.normal((3,), dtype=sf.float64).numpy(),
                g.uniform((4,), maxval=9, dtype=sf.int32).numpy(),
                g.normal((2,), dtype=sf.bfloat16).numpy()]

    fast = draw()
    with context.slow_path():
        slow = draw()
    for x, y in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(x, y)
