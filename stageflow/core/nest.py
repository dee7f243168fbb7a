"""Flattening nested Python structures (lists, tuples, dicts, namedtuples) to leaves.

A `TreeDef` is hashable, so it can be part of a trace-cache key, and rebuilds the same
structure from new leaves. Dict keys are sorted, as TensorFlow's `nest` does.

A composite (an object whose class defines `_nest_components` and `_nest_rebuild`, such as
`sf.TensorArray`) is one leaf unless `expand_composites` asks for its tensors: a staged
loop carries those tensors, as TensorFlow's `nest` expands composite tensors for its loops.
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
        keys = sorted(node, key=repr)
        return (dict, tuple(keys), tuple(_flatten(node[k], leaves, expand) for k in keys))
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
    if hasattr(kind, "_nest_rebuild"):
        return kind._nest_rebuild(treedef[1], _build(treedef[2], leaves))
    children = [_build(child, leaves) for child in treedef[1]]
    if kind is list:
        return children
    if kind is tuple:
        return tuple(children)
    return kind(*children)


def leaf_paths(structure: Any, prefix: str = "") -> list[str]:
    """A readable path for each leaf, in `flatten` order (`x`, `batch['image']`, `args[1]`)."""
    kind = type(structure)
    if kind is list or kind is tuple or _is_namedtuple(structure):
        return [p for i, child in enumerate(structure) for p in leaf_paths(child, f"{prefix}[{i}]")]
    if kind is dict:
        return [p for k in sorted(structure, key=repr)
                for p in leaf_paths(structure[k], f"{prefix}[{k!r}]")]
    return [prefix]
