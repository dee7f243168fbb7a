"""TensorFlow's ``tf.nest`` functions (`sf.nest`), written over `stageflow.core.nest`.

The structures are those `nest.flatten` walks: lists, tuples, namedtuples and dicts (their
subclasses too), dict values in sorted key order, and with ``expand_composites=True`` the
tensors of composites (`sf.TensorArray`); anything else, None and NumPy arrays and tensors
included, is a leaf. So `sf.nest` and `sf.function` agree on what an argument holds. Other
sequences (ranges, ``collections.deque``, attrs classes) are leaves here, where TensorFlow
walks some of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from stageflow.core import nest

__all__ = ["assert_same_structure", "flatten", "flatten_with_joined_string_paths",
           "is_nested", "map_structure", "pack_sequence_as"]


def is_nested(seq: Any) -> bool:
    """Whether `seq` is a structure (a list, tuple, namedtuple or dict), not a leaf.

    >>> sf.nest.is_nested([1, 2]), sf.nest.is_nested({"a": 1}), sf.nest.is_nested("ab")
    (True, True, False)
    """
    return nest.flatten(seq)[1][0] is not None


def flatten(structure: Any, expand_composites: bool = False) -> list:
    """The leaves of `structure`, depth first: dict values by sorted key (an ``OrderedDict``'s
    too, as in TensorFlow), a leaf alone as ``[structure]``.

    expand_composites: the tensors of composites (`sf.TensorArray`) instead of the
    composite, as TensorFlow's.

    >>> sf.nest.flatten({"b": [1, 2], "a": (3, None)})
    [3, None, 1, 2]
    >>> sf.nest.flatten(5)
    [5]
    """
    return nest.flatten(structure, expand_composites)[0]


def pack_sequence_as(structure: Any, flat_sequence: Sequence[Any],
                     expand_composites: bool = False) -> Any:
    """`structure`'s shape holding the items of `flat_sequence` in `flatten` order.

    Raises ``ValueError`` when the counts differ, ``TypeError`` when `flat_sequence` is not
    a list or tuple.

    >>> sf.nest.pack_sequence_as({"b": 0, "a": [0, 0]}, [1, 2, 3])
    {'a': [1, 2], 'b': 3}
    """
    if not isinstance(flat_sequence, list | tuple):
        raise TypeError(f"pack_sequence_as: flat_sequence must be a list or tuple, got "
                        f"{type(flat_sequence).__name__}")
    leaves, treedef = nest.flatten(structure, expand_composites)
    if len(leaves) != len(flat_sequence):
        raise ValueError(f"pack_sequence_as: the structure has {len(leaves)} leaves, but "
                         f"flat_sequence has {len(flat_sequence)} items; structure: "
                         f"{structure!r}")
    return nest.unflatten(treedef, list(flat_sequence))


def assert_same_structure(nest1: Any, nest2: Any, check_types: bool = True,
                          expand_composites: bool = False) -> None:
    """Raise unless `nest1` and `nest2` nest alike: ``ValueError`` for a different nesting,
    length or set of dict keys, ``TypeError`` for different container types when
    `check_types` (a list is not a tuple, a dict not an ``OrderedDict``; namedtuples of the
    same name and fields match, as in TensorFlow). Leaves may differ in anything.

    >>> sf.nest.assert_same_structure([1, (2, 3)], ["a", ("b", "c")])
    >>> sf.nest.assert_same_structure([1, 2], (1, 2))
    Traceback (most recent call last):
    ...
    TypeError: The two structures don't have the same sequence type: list and tuple ...
    """
    first, second = (nest.flatten(n, expand_composites)[1] for n in (nest1, nest2))
    try:
        _compare(first, second, check_types)
    except (ValueError, TypeError) as error:
        raise type(error)(f"{error}\n\nFirst structure: {nest1!r}\n\nSecond structure: "
                          f"{nest2!r}") from None


def _kind_name(kind: Any) -> str:
    return "a leaf" if kind is None else kind.__name__


def _compare(first: tuple, second: tuple, check_types: bool) -> None:
    """Raise unless the two TreeDefs are alike (see `assert_same_structure`)."""
    kind1, kind2 = first[0], second[0]
    if (kind1 is None) != (kind2 is None):
        raise ValueError(f"The two structures don't have the same nested structure: "
                         f"{_kind_name(kind1)} where the other has {_kind_name(kind2)}")
    if kind1 is None:
        return
    mapping1, mapping2 = issubclass(kind1, dict), issubclass(kind2, dict)
    if check_types and kind1 is not kind2 and not _same_namedtuple(kind1, kind2):
        raise TypeError(f"The two structures don't have the same sequence type: "
                        f"{kind1.__name__} and {kind2.__name__}")
    if mapping1 != mapping2:
        raise ValueError(f"The two structures don't have the same nested structure: "
                         f"{kind1.__name__} and {kind2.__name__}")
    if mapping1 and set(first[1]) != set(second[1]):
        raise ValueError(f"The two dictionaries don't have the same set of keys: "
                         f"{list(first[1])} and {list(second[1])}")
    children1, children2 = _children(first)[1], _children(second)[1]
    if len(children1) != len(children2):
        raise ValueError(f"The two structures don't have the same nested structure: "
                         f"{kind1.__name__} of {len(children1)} items and "
                         f"{kind2.__name__} of {len(children2)}")
    for child1, child2 in zip(children1, children2, strict=True):
        _compare(child1, child2, check_types)


def _same_namedtuple(kind1: type, kind2: type) -> bool:
    fields1, fields2 = getattr(kind1, "_fields", None), getattr(kind2, "_fields", None)
    return (fields1 is not None and fields1 == fields2
            and kind1.__name__ == kind2.__name__)


def map_structure(func: Callable[..., Any], *structure: Any, check_types: bool = True,
                  expand_composites: bool = False) -> Any:
    """`func` applied to the leaves at each position of the structures (all alike, see
    `assert_same_structure`), in the first structure's shape.

    >>> sf.nest.map_structure(lambda a, b: a + b, {"x": [1, 2]}, {"x": [10, 20]})
    {'x': [11, 22]}
    """
    if not structure:
        raise ValueError("map_structure: give at least one structure")
    for other in structure[1:]:
        assert_same_structure(structure[0], other, check_types, expand_composites)
    treedef = nest.flatten(structure[0], expand_composites)[1]
    columns = [nest.flatten(s, expand_composites)[0] for s in structure]
    return nest.unflatten(treedef, [func(*leaves) for leaves in zip(*columns, strict=True)])


def flatten_with_joined_string_paths(structure: Any, separator: str = "/",
                                     expand_composites: bool = False) -> list[tuple[str, Any]]:
    """``(path, leaf)`` pairs in `flatten` order, each path the keys, indices or namedtuple
    fields that lead to the leaf, joined by `separator` (``""`` for a lone leaf).

    >>> sf.nest.flatten_with_joined_string_paths({"a": [5, 6], "b": 7})
    [('a/0', 5), ('a/1', 6), ('b', 7)]
    """
    leaves, treedef = nest.flatten(structure, expand_composites)
    paths = [separator.join(str(step) for step in path) for path in _paths(treedef, ())]
    return list(zip(paths, leaves, strict=True))


def _children(treedef: tuple) -> tuple[list, list]:
    """The steps (keys, indices, fields; None for a composite's components) and the child
    TreeDefs of a TreeDef that is not a leaf's."""
    kind = treedef[0]
    if issubclass(kind, dict):
        return list(treedef[1]), list(treedef[2])
    if hasattr(kind, "_nest_rebuild"):  # an expanded composite: (kind, aux, components)
        return [None], [treedef[2]]
    children = list(treedef[1])
    return list(getattr(kind, "_fields", None) or range(len(children))), children


def _paths(treedef: tuple, prefix: tuple) -> Iterator[tuple]:
    if treedef[0] is None:
        yield prefix
        return
    for step, child in zip(*_children(treedef), strict=True):
        yield from _paths(child, prefix if step is None else (*prefix, step))
