"""`sf.strings` gives the results of the examples in TensorFlow's `tf.strings` documentation
(`split` of more than a scalar an `sf.RaggedTensor`, as TensorFlow's), and refuses bad
input naming the op."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf


def _list(t):
    return t.numpy().tolist()


def test_split():
    assert _list(sf.strings.split("hello world")) == [b"hello", b"world"]
    assert _list(sf.strings.split("  a \t b  ")) == [b"a", b"b"]  # whitespace runs
    assert _list(sf.strings.split("1<>2<>3", sep="<>")) == [b"1", b"2", b"3"]
    assert _list(sf.strings.split("1<>2<>3", sep="<>", maxsplit=1)) == [b"1", b"2<>3"]
    assert _list(sf.strings.split("a,,b", sep=",")) == [b"a", b"", b"b"]
    rows = sf.strings.split(["hello world", "a b c"])
    assert isinstance(rows, sf.RaggedTensor) and rows.to_list() == [
        [b"hello", b"world"], [b"a", b"b", b"c"]]
    assert rows.shape == (2, None) and rows.dtype == sf.string
    nested = sf.strings.split([["x y"], ["z"]])
    assert nested.to_list() == [[[b"x", b"y"]], [[b"z"]]] and nested.shape == (2, None, None)
    assert sf.strings.split(["", " "]).to_list() == [[], []]
    # TensorFlow's guide (tensor.ipynb): splitting a tensor of strings gives ragged rows.
    words = sf.strings.split(sf.constant(["Gray wolf", "Quick brown fox", "Lazy dog"]))
    assert str(words) == ("<sf.RaggedTensor [[b'Gray', b'wolf'], [b'Quick', b'brown', b'fox'], "
                          "[b'Lazy', b'dog']]>")


def test_join():
    assert sf.strings.join(["abc", "def"]).numpy() == b"abcdef"
    joined = sf.strings.join([["abc", "123"], ["def", "456"]], separator=" ")
    assert _list(joined) == [b"abc def", b"123 456"]
    assert _list(sf.strings.join([["a", "b"], "!"])) == [b"a!", b"b!"]
    with pytest.raises(ValueError, match=r"sf.strings.join: the inputs' shapes \(2,\), \(3,\) "
                                         r"do not broadcast"):
        sf.strings.join([["a", "b"], ["c", "d", "e"]])


def test_length_in_bytes_and_characters():
    words = sf.constant(["Hello", "TensorFlow", "\U0001F642"])
    out = sf.strings.length(words)
    assert out.dtype == sf.int32 and _list(out) == [5, 10, 4]
    assert _list(sf.strings.length(words, unit="UTF8_CHAR")) == [5, 10, 1]
    with pytest.raises(ValueError, match="unit must be one of"):
        sf.strings.length(words, unit="CHAR")


def test_case_and_strip():
    assert sf.strings.lower("CamelCase string and ALL CAPS").numpy() == (
        b"camelcase string and all caps")
    assert sf.strings.upper("CamelCase").numpy() == b"CAMELCASE"
    assert sf.strings.upper("é").numpy() == "é".encode()  # ASCII only by default
    assert sf.strings.upper("é", encoding="utf-8").numpy() == "É".encode()
    assert _list(sf.strings.strip([" \tHello", "World "])) == [b"Hello", b"World"]


def test_to_number():
    out = sf.strings.to_number("1.55")
    assert out.dtype == sf.float32 and float(out) == pytest.approx(1.55)
    ints = sf.strings.to_number(["3", "-7"], out_type=sf.int32)
    assert ints.dtype == sf.int32 and _list(ints) == [3, -7]
    assert sf.strings.to_number("1e300", sf.float64).numpy() == 1e300
    with pytest.raises(sf.errors.InvalidArgumentError,
                       match=r"to_number: cannot convert b'1.5' to int32\n  at .*"
                             r"test_strings_namespace.py"):
        sf.strings.to_number(["1", "1.5"], sf.int32)
    with pytest.raises(sf.errors.InvalidArgumentError, match="b'abc'"):
        sf.strings.to_number("abc")
    with pytest.raises(sf.errors.InvalidArgumentError, match="to int32"):
        sf.strings.to_number("3000000000", sf.int32)
    with pytest.raises(TypeError, match="out_type must be one of float32, float64, int32, "
                                        "int64, got bool"):
        sf.strings.to_number("1", sf.bool)


def test_as_string_formats_as_printf():
    assert _list(sf.strings.as_string([3, 2])) == [b"3", b"2"]
    assert _list(sf.strings.as_string([3.1415926, 2.71828], precision=2)) == [b"3.14", b"2.72"]
    assert sf.strings.as_string(3.5).numpy() == b"3.500000"
    assert sf.strings.as_string(1234.5, scientific=True, precision=2).numpy() == b"1.23e+03"
    assert sf.strings.as_string(0.5, shortest=True).numpy() == b"0.5"
    assert sf.strings.as_string(7, width=3, fill="0").numpy() == b"007"
    assert sf.strings.as_string(7, width=3).numpy() == b"  7"
    assert _list(sf.strings.as_string([True, False])) == [b"true", b"false"]
    assert sf.strings.as_string(sf.constant(1 + 2j), precision=1).numpy() == b"(1.0,2.0)"
    assert sf.strings.as_string("kept").numpy() == b"kept"
    with pytest.raises(ValueError, match="precision, scientific and shortest are for floats"):
        sf.strings.as_string(3, precision=2)


def test_regex_full_match():
    out = sf.strings.regex_full_match(["TF lib", "lib TF"], ".*lib$")
    assert out.dtype == sf.bool and _list(out) == [True, False]
    assert _list(sf.strings.regex_full_match(["abc", "abcd"], "abc")) == [True, False]
    with pytest.raises(sf.errors.InvalidArgumentError, match="invalid pattern '\\('"):
        sf.strings.regex_full_match("a", "(")


def test_substr():
    assert _list(sf.strings.substr(["Hello", "World"], 1, 3)) == [b"ell", b"orl"]
    assert sf.strings.substr("Hello", -3, 2).numpy() == b"ll"
    assert sf.strings.substr("Hello", 3, 10).numpy() == b"lo"  # as many as there are
    assert sf.strings.substr("Hello", 5, 1).numpy() == b""
    assert _list(sf.strings.substr(["Hello", "World"], [0, 1], [1, 2])) == [b"H", b"or"]
    smile = "a\U0001F642b"
    assert sf.strings.substr(smile, 1, 1, unit="UTF8_CHAR").numpy() == "\U0001F642".encode()
    with pytest.raises(sf.errors.InvalidArgumentError,
                       match=r"pos 6 is out of range for b'Hello'"):
        sf.strings.substr("Hello", 6, 1)


def test_format():
    out = sf.strings.format("tensor: {}, suffix", sf.range(5))
    assert out.dtype == sf.string and out.numpy() == b"tensor: [0 1 2 3 4], suffix"
    assert sf.strings.format("{}", sf.range(10), summarize=2).numpy() == b"[0 1 ... 8 9]"
    assert sf.strings.format("tensor: {}, suffix", sf.range(10)).numpy() == (
        b"tensor: [0 1 2 ... 7 8 9], suffix")
    assert sf.strings.format("a: {}, b: {}, suffix", (sf.range(2), sf.range(1, 4, 2))
                             ).numpy() == b"a: [0 1], b: [1 3], suffix"
    assert sf.strings.format("{} / {}", [sf.constant(["a", "b"]), 3]).numpy() == (
        b'["a" "b"] / 3')
    with pytest.raises(ValueError, match="the template has 2 placeholders '{}' for 1 inputs"):
        sf.strings.format("{} {}", [1])


def test_ops_on_numbers_name_the_op_and_point_to_as_string():
    with pytest.raises(TypeError, match=r"sf.strings.length: expected a string tensor, got "
                                        r"float32\(2,\) \(sf.strings.as_string formats "
                                        r"numbers\)\n  at .*test_strings_namespace.py"):
        sf.strings.length(np.ones(2, np.float32))


def test_bytes_and_unicode_splits_as_tensorflows_guide_shows_them():
    duck = sf.constant("アヒル 🦆")
    chars = sf.strings.unicode_split(duck, "UTF-8")
    assert chars.numpy().tolist() == [c.encode() for c in "アヒル 🦆"]
    assert sf.strings.unicode_decode(duck, "UTF-8").numpy().tolist() == [
        12450, 12498, 12523, 32, 129414]
    assert sf.strings.bytes_split(sf.constant("Duck")).numpy().tolist() == [
        b"D", b"u", b"c", b"k"]
    rows = sf.strings.bytes_split(sf.constant(["ab", "c"]))
    assert isinstance(rows, sf.RaggedTensor) and rows.to_list() == [[b"a", b"b"], [b"c"]]
    assert sf.strings.unicode_decode(sf.constant(["añ", ""])).to_list() == [[97, 241], []]
    with pytest.raises(ValueError, match="only UTF-8"):
        sf.strings.unicode_split(duck, "UTF-16")
