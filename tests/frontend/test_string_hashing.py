"""`sf.strings.to_hash_bucket_fast` and `sf.io.decode_raw`: bit-exact with TensorFlow's
numbers (hard-coded from TensorFlow 2), on string tensors and ragged tensors of strings."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf

# Strings across FarmHash's length classes (0-16, 17-32, 33-64, longer, several 64-byte
# blocks) and multi-byte UTF-8.
STRINGS = ["", "a", "ab", "abc", "hello", "Hello, World", "x" * 16, "x" * 17, "y" * 32,
           "y" * 33, "z" * 64, "z" * 65, "z" * 100, "q" * 128, "q" * 129, "ü", "日本語テキスト",
           "naïve café 🙂", "".join(chr(i) for i in range(32, 127)) * 3]
# tf.strings.to_hash_bucket_fast(STRINGS, 2**63 - 1) in TensorFlow 2.21
TF_BUCKETS = [1936946117179621456, 3694432073954588132, 3066228220894225695,
              2640714258260161385, 3786372426573024489, 4508847345234768385,
              3320895591121647644, 2082709914559524774, 6963001497674513743,
              8610735037765521150, 294799756062990872, 8299915583762718517,
              9220849947163966073, 7661176699498645130, 4765894331209010850,
              3883267778305733891, 1653575045406466613, 5253665231411449744,
              3521684350512196585]


def test_buckets_are_tensorflows():
    got = sf.strings.to_hash_bucket_fast(sf.constant(STRINGS), 2**63 - 1)
    assert got.dtype == sf.int64 and got.shape == (len(STRINGS),)
    assert got.numpy().tolist() == TF_BUCKETS


def test_fingerprint_of_the_empty_string_is_farmhash_k2():
    from stageflow.frontend.ops.fingerprint import fingerprint64
    assert fingerprint64(b"") == 0x9AE16A3B2F90404F


def test_small_bucket_counts_shapes_and_scalars():
    np.testing.assert_array_equal(
        sf.strings.to_hash_bucket_fast([["a", "b"], ["c", "d"]], 7).numpy(), [[5, 2], [5, 2]])
    assert sf.strings.to_hash_bucket_fast(["Hello", "TensorFlow", "2.x"], 3).numpy().tolist() \
        == [0, 2, 2]
    scalar = sf.strings.to_hash_bucket_fast("a", 3)
    assert scalar.shape == () and int(scalar.numpy()) == 0


def test_ragged_strings_keep_their_rows():
    queries = sf.ragged.constant([["Who", "is", "Dan", "Smith"], ["Pause"],
                                  ["Will", "it", "rain", "later", "today"]])
    buckets = sf.strings.to_hash_bucket_fast(queries, 1024)
    assert isinstance(buckets, sf.RaggedTensor)
    assert buckets.to_list() == [[633, 768, 237, 309], [28], [847, 998, 635, 20, 547]]


def test_hash_bucket_errors():
    with pytest.raises(sf.errors.InvalidArgumentError, match="num_buckets must be at least 1"):
        sf.strings.to_hash_bucket_fast(["a"], 0)
    with pytest.raises(TypeError, match="expected a string tensor"):
        sf.strings.to_hash_bucket_fast(sf.constant([1]), 3)
    with pytest.raises(TypeError, match="cannot stage"):
        sf.function(lambda s: sf.strings.to_hash_bucket_fast(s, 3))(sf.constant(["a"]))


def test_decode_raw_matches_tensorflow():
    duck = sf.io.decode_raw(sf.constant("Duck"), sf.uint8)
    assert duck.dtype == sf.uint8 and duck.numpy().tolist() == [68, 117, 99, 107]
    pair = sf.constant(["abcd", "efgh"])
    assert sf.io.decode_raw(pair, sf.int16).numpy().tolist() == [[25185, 25699], [26213, 26727]]
    assert sf.io.decode_raw(pair, sf.int16, little_endian=False).numpy().tolist() == \
        [[24930, 25444], [25958, 26472]]
    padded = sf.io.decode_raw(sf.constant(["abc", "defgh"]), sf.int16, fixed_length=4)
    assert padded.numpy().tolist() == [[25185, 99], [25956, 26470]]
    nested = sf.io.decode_raw(sf.constant([["ab"], ["cd"]]), sf.uint8)
    assert nested.shape == (2, 1, 2)
    assert sf.io.decode_raw(sf.constant(["\x02\x00"]), sf.bool).numpy().tolist() == \
        [[True, False]]
    one = np.float32(1.0).tobytes()
    assert sf.io.decode_raw(sf.constant([one]), sf.float32).numpy().tolist() == [[1.0]]
    assert sf.io.decode_raw(sf.constant(["", ""]), sf.float32).shape == (2, 0)


def test_decode_raw_errors():
    with pytest.raises(sf.errors.InvalidArgumentError, match="element 1 has size 3 != 4"):
        sf.io.decode_raw(sf.constant(["abcd", "efg"]), sf.uint8)
    with pytest.raises(sf.errors.InvalidArgumentError, match="not a multiple of 2"):
        sf.io.decode_raw(sf.constant(["abc"]), sf.int16)
    with pytest.raises(sf.errors.InvalidArgumentError, match="fixed_length .3. must be"):
        sf.io.decode_raw(sf.constant(["abc"]), sf.int16, fixed_length=3)
    with pytest.raises(TypeError, match="out_type must be one of"):
        sf.io.decode_raw(sf.constant(["ab"]), sf.string)
    with pytest.raises(TypeError, match="cannot stage"):
        sf.function(lambda s: sf.io.decode_raw(s, sf.uint8))(sf.constant(["a"]))
