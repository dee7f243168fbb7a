"""`sf.nest` follows TensorFlow's documented `tf.nest` rules: dict values by sorted key
(OrderedDicts too), None a leaf, namedtuples kept, structures compared with and without
their container types."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import stageflow as sf

Point = collections.namedtuple("Point", ["x", "y"])


def test_flatten_orders_dict_values_by_sorted_key_as_tensorflow_documents():
    # tf.nest.flatten's documented examples.
    assert sf.nest.flatten({"key3": "value3", "key1": "value1", "key2": "value2"}) == [
        "value1", "value2", "value3"]
    assert sf.nest.flatten(((1.0, 2.0), (3.0, 4.0, 5.0), 6.0)) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    nested = {"key3": {"c": (1.0, 2.0), "a": 3.0}, "key1": {"m": "val1", "g": "val2"}}
    assert sf.nest.flatten(nested) == ["val2", "val1", 3.0, 1.0, 2.0]
    # Keys sort as values (9 before 10), not as their text.
    assert sf.nest.flatten({10: "ten", 9: "nine", 1: "one"}) == ["one", "nine", "ten"]


def test_ordered_dicts_sort_too_and_repack_as_their_type():
    ordered = collections.OrderedDict([("b", 1), ("a", 2)])
    assert sf.nest.flatten(ordered) == [2, 1]
    packed = sf.nest.pack_sequence_as(ordered, [5, 6])
    assert type(packed) is collections.OrderedDict and packed == {"a": 5, "b": 6}
    counts = collections.defaultdict(list, {"k": 1})
    doubled = sf.nest.map_structure(lambda v: v * 2, counts)
    assert type(doubled) is collections.defaultdict and doubled.default_factory is list
    assert dict(doubled) == {"k": 2}


def test_none_arrays_tensors_and_strings_are_leaves():
    t = sf.constant([1.0, 2.0])
    array = np.ones((2, 2))
    leaves = sf.nest.flatten([None, array, t, "ab"])
    assert leaves[0] is None and leaves[1] is array and leaves[2] is t and leaves[3] == "ab"
    assert sf.nest.flatten(None) == [None]
    assert sf.nest.flatten(5) == [5]
    assert not sf.nest.is_nested(t) and not sf.nest.is_nested("ab")
    assert not sf.nest.is_nested(None)
    assert sf.nest.is_nested([]) and sf.nest.is_nested(Point(1, 2))
    assert sf.nest.is_nested(collections.OrderedDict())


def test_pack_sequence_as_inverts_flatten():
    structure = {"b": [1, (2, Point(3, 4))], "a": None}
    flat = sf.nest.flatten(structure)
    assert flat == [None, 1, 2, 3, 4]
    rebuilt = sf.nest.pack_sequence_as(structure, [f"v{i}" for i in range(5)])
    assert rebuilt == {"a": "v0", "b": ["v1", ("v2", Point("v3", "v4"))]}
    assert type(rebuilt["b"][1][1]) is Point
    assert sf.nest.pack_sequence_as(7, ["only"]) == "only"
    with pytest.raises(ValueError, match="has 5 leaves, but flat_sequence has 4"):
        sf.nest.pack_sequence_as(structure, [1, 2, 3, 4])
    with pytest.raises(TypeError, match="must be a list or tuple"):
        sf.nest.pack_sequence_as([1], 1)


def test_map_structure_applies_to_matching_leaves_and_keeps_the_first_shape():
    out = sf.nest.map_structure(lambda a, b: a + b, {"x": [1, 2], "y": Point(3, 4)},
                                {"x": [10, 20], "y": Point(30, 40)})
    assert out == {"x": [11, 22], "y": Point(33, 44)} and type(out["y"]) is Point
    tensors = sf.nest.map_structure(sf.constant, (1.0, [2, 3]))
    assert tensors[0].dtype == sf.float32 and tensors[1][1].numpy() == 3
    with pytest.raises(TypeError, match="same sequence type: list and tuple"):
        sf.nest.map_structure(lambda a, b: a, [1, 2], (1, 2))
    assert sf.nest.map_structure(lambda a, b: a + b, [1, 2], (3, 4),
                                 check_types=False) == [4, 6]
    with pytest.raises(ValueError, match="at least one structure"):
        sf.nest.map_structure(lambda: 0)


def test_assert_same_structure_raises_as_tensorflow_does():
    sf.nest.assert_same_structure([1, (2, 3)], ["a", ("b", "c")])  # leaves may differ
    with pytest.raises(ValueError, match="a leaf where the other has list"):
        sf.nest.assert_same_structure({"a": 1}, {"a": [1, 2]}, check_types=False)
    with pytest.raises(ValueError, match="don't have the same nested structure"):
        sf.nest.assert_same_structure([1, [2]], [1, 2])
    with pytest.raises(ValueError, match="2 items and list of 3"):
        sf.nest.assert_same_structure([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="same set of keys"):
        sf.nest.assert_same_structure({"a": 1}, {"b": 1})
    with pytest.raises(TypeError, match="same sequence type") as raised:
        sf.nest.assert_same_structure({"a": 1}, collections.OrderedDict(a=1))
    assert "First structure: {'a': 1}" in str(raised.value)
    sf.nest.assert_same_structure({"a": 1}, collections.OrderedDict(a=1), check_types=False)
    # namedtuples of the same name and fields match, as in TensorFlow
    other_point = collections.namedtuple("Point", ["x", "y"])
    sf.nest.assert_same_structure(Point(1, 2), other_point(3, 4))
    with pytest.raises(TypeError):
        sf.nest.assert_same_structure(Point(1, 2), (1, 2))


def test_flatten_with_joined_string_paths_names_keys_indices_and_fields():
    pairs = sf.nest.flatten_with_joined_string_paths(
        {"b": Point(1, [2, 3]), "a": 0})
    assert pairs == [("a", 0), ("b/x", 1), ("b/y/0", 2), ("b/y/1", 3)]
    assert sf.nest.flatten_with_joined_string_paths([4, 5], separator=".") == [
        ("0", 4), ("1", 5)]
    assert sf.nest.flatten_with_joined_string_paths(9) == [("", 9)]


def test_sf_function_flattens_ordered_dict_arguments_like_sf_nest():
    @sf.function
    def weighted(inputs):
        return inputs["a"] * 2.0 + inputs["b"]

    args = collections.OrderedDict([("b", sf.constant(1.0)), ("a", sf.constant(3.0))])
    assert float(weighted(args)) == 7.0


def test_composites_are_leaves_unless_expanded():
    """`sf.TensorArray` is a composite: one leaf, or with expand_composites its tensors,
    repacked into a TensorArray, as TensorFlow's nest treats composite tensors."""
    written = sf.TensorArray(sf.float32, size=2).write(0, 1.0).write(1, 2.0)
    assert sf.nest.flatten({"a": written}) == [written]
    assert not sf.nest.is_nested(written)
    leaves = sf.nest.flatten({"a": written, "b": 1}, expand_composites=True)
    assert len(leaves) == 2 and leaves[1] == 1
    np.testing.assert_array_equal(leaves[0].numpy(), [1.0, 2.0])
    doubled = sf.nest.map_structure(lambda t: t * 2.0, {"a": written}, expand_composites=True)
    assert isinstance(doubled["a"], sf.TensorArray)
    np.testing.assert_array_equal(doubled["a"].stack().numpy(), [2.0, 4.0])
    other = sf.TensorArray(sf.float32, size=2).write(0, 5.0).write(1, 6.0)
    sf.nest.assert_same_structure(written, other, expand_composites=True)
    with pytest.raises(TypeError, match="same sequence type: TensorArray and list"):
        sf.nest.assert_same_structure(written, [leaves[0]], expand_composites=True)
