"""Dataset elements: nests (tuples, lists, dicts) of NumPy arrays inside the pipeline,
eager tensors where the user receives them.

The pipeline keeps NumPy arrays between its stages (no tensor per stage, no dispatch), and
converts at the two edges: `to_tensors` where an element leaves an iterator or enters a
`map` function, `to_arrays` where a function or generator hands one back. `pack` and
`unpack` store a list of elements (a shuffle or prefetch buffer) as one stacked array per
leaf when their shapes agree, so a checkpoint holds a few large tensors, not many small.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core import nest
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tensor import Tensor, to_array, wrap
from stageflow.frontend.variables import Variable

Element = Any  # a nest of np.ndarray


def to_arrays(structure: Any) -> Element:
    """A nest of tensors, arrays or Python values as a nest of NumPy arrays of stageflow
    dtypes (Python floats become float32, ints int32, as `sf.constant` makes them). As in
    `tf.data`, tuples and dicts are structure and a list is one tensor (its values stacked)."""
    if isinstance(structure, list):
        if any(isinstance(item, Tensor | Variable | np.ndarray) for item in structure):
            return np.stack([_array(item) for item in structure])
        return to_array(structure)
    if isinstance(structure, dict):
        return {key: to_arrays(value) for key, value in structure.items()}
    if isinstance(structure, tuple):
        items = [to_arrays(value) for value in structure]
        return type(structure)(*items) if hasattr(structure, "_fields") else tuple(items)
    return _array(structure)


def _array(leaf: Any) -> np.ndarray:
    if isinstance(leaf, Tensor):
        return np.asarray(leaf._value)
    if isinstance(leaf, Variable):
        return leaf.numpy()
    return to_array(leaf)


def to_tensors(element: Element) -> Any:
    """The element as the user sees it: eager tensors in the same nest."""
    leaves, treedef = nest.flatten(element)
    return nest.unflatten(treedef, [wrap(leaf) for leaf in leaves])


def spec_of(element: Element) -> Any:
    """The `sf.TensorSpec` nest describing `element`."""
    leaves, treedef = nest.flatten(element)
    return nest.unflatten(treedef, [TensorSpec(a.shape, a.dtype) for a in leaves])


def stack(elements: list[Element]) -> Element:
    """Elements of one structure stacked leaf by leaf along a new leading axis."""
    flat = [nest.flatten(e) for e in elements]
    treedef = flat[0][1]
    if any(other != treedef for _, other in flat[1:]):
        raise ValueError("Dataset.batch: elements of different structures cannot be batched")
    columns = zip(*(leaves for leaves, _ in flat), strict=True)
    try:
        return nest.unflatten(treedef, [np.stack(column) for column in columns])
    except ValueError as error:
        shapes = [[a.shape for a in leaves] for leaves, _ in flat[:4]]
        raise ValueError(f"Dataset.batch: elements of different shapes cannot be stacked "
                         f"({error}); shapes of the first elements: {shapes}") from None


def pack(elements: list[Element]) -> dict[str, Any]:
    """A buffer of elements as checkpoint state (stacked when the shapes agree)."""
    if not elements:
        return {"count": 0}
    try:
        return {"count": len(elements), "stacked": flat_leaves(stack(elements))}
    except ValueError:
        return {"count": len(elements), "elements": [flat_leaves(e) for e in elements]}


def unpack(state: dict[str, Any], structure: Any) -> list[Element]:
    """The elements `pack` stored, in the nest `structure` (a spec of one element)."""
    treedef = nest.flatten(structure)[1]
    count = int(state["count"])
    if "stacked" in state:
        columns = state["stacked"]
        return [nest.unflatten(treedef, [np.asarray(c[i]) for c in columns])
                for i in range(count)]
    return [nest.unflatten(treedef, [np.asarray(a) for a in leaves])
            for leaves in state.get("elements", [])]


def flat_leaves(element: Element) -> list[np.ndarray]:
    return nest.flatten(element)[0]


__all__ = ["Element", "flat_leaves", "pack", "spec_of", "stack", "to_arrays",
           "to_tensors", "unpack"]
