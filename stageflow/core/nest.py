"""Flattening nested Python structures (lists, tuples, dicts, namedtuples) to leaves.

A `TreeDef` is hashable, so it can be part of a trace-cache key, and rebuilds the same
structure from new leaves. Dict keys are sorted, as TensorFlow's `nest` sorts them (the
keys themselves; keys that do not compare, ``1`` beside ``"a"``, by their repr), and so are
the keys of dict subclasses (``OrderedDict``, ``defaultdict``), rebuilt as their own type.
Everything else, None included, is a leaf. `sf.nest` is the public face of this module.

A composite (an object whose class defines `_nest_components` and `_nest_rebuild`, such as
`sf.TensorArray`, `sf.RaggedTensor`, `sf.SparseTensor`) is one leaf unless
`expand_composites` asks for its tensors: a staged loop carries those tensors, and an
`sf.function` takes and returns them, as TensorFlow's `nest` expands composite tensors.
"""

from __future__ import annotations

from typing import Any

TreeDef = tuple


def _is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def is_composite(value: Any) -> bool:
    """Whether `value` is a composite: an object made of tensors that `flatten` can expand
    (its class defines ``_nest_components() -> (components, aux)``, a nest and a hashable
    description, and ``_nest_rebuild(aux, components)``)."""
    return hasattr(type(value), "_nest_components")


def sorted_keys(mapping: dict) -> list:
    """The keys of `mapping` in flattening order: sorted, or sorted by repr where they do not
    compare with each other."""
    try:
        return sorted(mapping)
    except TypeError:
        return sorted(mapping, key=repr)


def flatten(structure: Any, expand_composites: bool = False) -> tuple[list[Any], TreeDef]:
    """The leaves of `structure` in a fixed order, and its shape as a hashable TreeDef;
    composites are leaves, or with `expand_composites` their components' leaves."""
    leaves: list[Any] = []
    return leaves, _flatten(structure, leaves, expand_composites)


def _flatten(node: Any, leaves: list[Any], expand: bool) -> TreeDef:
    kind = type(node)
    if kind is list or kind is tuple:
        return (kind, tuple(_flatten(child, leaves, expand) for child in node))
    if kind is dict:
        keys = sorted_keys(node)
        return (dict, tuple(keys), tuple(_flatten(node[k], leaves, expand) for k in keys))
    if isinstance(node, dict):  # a subclass: rebuilt as one (a defaultdict with its factory)
        keys = sorted_keys(node)
        return (kind, tuple(keys), tuple(_flatten(node[k], leaves, expand) for k in keys),
                getattr(node, "default_factory", None))
    if _is_namedtuple(node):
        return (kind, tuple(_flatten(child, leaves, expand) for child in node))
    if expand and is_composite(node):
        components, aux = node._nest_components()
        return (kind, aux, _flatten(components, leaves, expand))
    leaves.append(node)
    return (None,)


def unflatten(treedef: TreeDef, leaves: list[Any]) -> Any:
    """The structure described by `treedef` holding `leaves` in order."""
    iterator = iter(leaves)
    return _build(treedef, iterator)


def _build(treedef: TreeDef, leaves) -> Any:
    kind = treedef[0]
    if kind is None:
        return next(leaves)
    if kind is dict:
        keys, children = treedef[1], treedef[2]
        return {k: _build(child, leaves) for k, child in zip(keys, children, strict=True)}
    if issubclass(kind, dict):
        keys, children, factory = treedef[1], treedef[2], treedef[3]
        mapping = kind(factory) if factory is not None else kind()
        for key, child in zip(keys, children, strict=True):
            mapping[key] = _build(child, leaves)
        return mapping
    if hasattr(kind, "_nest_rebuild"):
        return kind._nest_rebuild(treedef[1], _build(treedef[2], leaves))
    children = [_build(child, leaves) for child in treedef[1]]
    if kind is list:
        return children
    if kind is tuple:
        return tuple(children)
    return kind(*children)


def leaf_paths(structure: Any, prefix: str = "", expand_composites: bool = False) -> list[str]:
    """A readable path for each leaf, in `flatten` order (`x`, `batch['image']`, `args[1]`;
    a composite's tensors, where expanded, `rt.components[0]`...)."""
    kind = type(structure)
    if kind is list or kind is tuple or _is_namedtuple(structure):
        return [p for i, child in enumerate(structure)
                for p in leaf_paths(child, f"{prefix}[{i}]", expand_composites)]
    if isinstance(structure, dict):
        return [p for k in sorted_keys(structure)
                for p in leaf_paths(structure[k], f"{prefix}[{k!r}]", expand_composites)]
    if expand_composites and is_composite(structure):
        return leaf_paths(structure._nest_components()[0], f"{prefix}.components", True)
    return [prefix]
