"""sf.strings' reduce_join, regex_replace, unsorted_segment_join, unicode_encode and
to_hash_bucket_strong, against values TensorFlow 2.21 gave; refused when staged."""

import pytest

import stageflow as sf

CUBE = [[["a", "b"], ["c", "d"]], [["e", "f"], ["g", "h"]]]


def _list(tensor):
    return tensor.numpy().tolist()


def test_reduce_join_orders_as_tensorflow():
    assert sf.strings.reduce_join(CUBE, separator=".").numpy() == b"a.b.c.d.e.f.g.h"
    assert _list(sf.strings.reduce_join(CUBE, axis=[1, 2], separator=".")) == [
        b"a.c.b.d", b"e.g.f.h"]
    assert _list(sf.strings.reduce_join(CUBE, axis=[-1, 1], separator=".")) == [
        b"a.b.c.d", b"e.f.g.h"]
    assert _list(sf.strings.reduce_join(CUBE, axis=[0, 2], separator=".", keepdims=True)) == [
        [[b"a.e.b.f"], [b"c.g.d.h"]]]
    assert _list(sf.strings.reduce_join([["a", "b"], ["c", "d"]], axis=-2)) == [b"ac", b"bd"]


def test_regex_replace():
    got = sf.strings.regex_replace(["aXbXc", "hello world"], r"(\w)X", r"<\1\0>",
                                   replace_global=False)
    assert _list(got) == [b"<aaX>bXc", b"hello world"]
    assert _list(sf.strings.regex_replace(["aXbXc"], "X", "")) == [b"abc"]


def test_unsorted_segment_join():
    got = sf.strings.unsorted_segment_join([["a", "b"], ["c", "d"], ["e", "f"]], [2, 0, 2], 3,
                                           separator=":")
    assert _list(got) == [[b"c", b"d"], [b"", b""], [b"a:e", b"b:f"]]
    with pytest.raises(sf.errors.InvalidArgumentError, match="segment ids"):
        sf.strings.unsorted_segment_join(["a"], [-1], 2)


def test_unicode_encode():
    got = sf.strings.unicode_encode([[104, -5, 0x110000], [233, 0x1F600, 0]], "UTF-16-BE")
    assert _list(got) == [b"\x00h\xff\xfd\xff\xfd", b"\x00\xe9\xd8=\xde\x00\x00\x00"]
    got = sf.strings.unicode_encode([[104, -5, 0x110000]], "UTF-8", errors="ignore")
    assert _list(got) == [b"h"]
    ragged = sf.ragged.constant([[104, 105], [33]])
    assert _list(sf.strings.unicode_encode(ragged, "UTF-8")) == [b"hi", b"!"]
    with pytest.raises(sf.errors.InvalidArgumentError):
        sf.strings.unicode_encode([-1], "UTF-8", errors="strict")


def test_to_hash_bucket_strong_is_tensorflows():
    strings = ["", "a", "abcdefgh", "abcdefghijklmnopq", "x" * 100]
    got = sf.strings.to_hash_bucket_strong(strings, 1000003, [123456789, -5])
    assert _list(got) == [723761, 623968, 818627, 185646, 908287]
    assert _list(sf.strings.to_hash_bucket_strong(["Hello", "TF"], 3, [1, 2])) == [2, 0]


@pytest.mark.parametrize("op", [
    lambda x: sf.strings.reduce_join(x),
    lambda x: sf.strings.regex_replace(x, "a", "b"),
    lambda x: sf.strings.to_hash_bucket_strong(x, 3, [1, 2]),
])
def test_refused_when_staged(op):
    with pytest.raises(TypeError, match="cannot stage"):
        sf.function(op)(sf.constant(["a"]))
