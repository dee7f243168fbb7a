"""Dataset elements: nests (tuples, lists, dicts) of NumPy arrays inside the pipeline,
eager tensors where the user receives them.

The pipeline keeps NumPy arrays between its stages (no tensor per stage, no dispatch), and
converts at the two edges (ragged and sparse leaves are the arrays of
`composite_elements`): `to_tensors` where an element leaves an iterator or enters a
`map` function, `to_arrays` where a function or generator hands one back. `pack` and
`unpack` store a list of elements (a shuffle or prefetch buffer) as one stacked array per
leaf when their shapes agree, so a checkpoint holds a few large tensors, not many small.

A `window` element is a nest of `Window`s (the rows of each leaf) inside the pipeline, and
of datasets where it reaches the user: its spec is a `DatasetSpec`, and buffers save a
window's rows as they save elements.

A stage that computes ahead (prefetch, parallel map) keeps what an element's computation
raised as a `Failure` in that element's place, so that the error reaches the consumer at the
element's position, and a checkpoint saves it there too (as its type and arguments: a
checkpoint holds no pickles).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from stageflow.core import nest
from stageflow.core.errors import OutOfRangeError, StagingError
from stageflow.data.composite_elements import (
    COMPOSITE_ARRAYS,
    composite_array,
    leaf_spec,
    stack_composites,
)
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tensor import Tensor, to_array, wrap
from stageflow.frontend.variables import Variable

Element = Any  # a nest of np.ndarray (and `Window`s, in a `window` stage's elements)


class Window:
    """The rows one leaf of a `window` element holds: a dataset's elements, kept as arrays
    until the window reaches the user (`Dataset.window` makes a dataset of them there)."""

    __slots__ = ("rows", "spec")

    def __init__(self, rows: list[Element], spec: Any) -> None:
        self.rows, self.spec = rows, spec


class DatasetSpec:
    """The spec of an element that is a dataset (`Dataset.window`'s elements): the spec of
    that dataset's elements (TensorFlow's ``tf.data.DatasetSpec``).

    >>> windows = sf.data.Dataset.range(5).window(2)
    >>> windows.element_spec
    DatasetSpec(TensorSpec(shape=(), dtype=int64))
    """

    def __init__(self, element_spec: Any) -> None:
        self.element_spec = element_spec

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DatasetSpec) and other.element_spec == self.element_spec

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        return f"DatasetSpec({self.element_spec!r})"


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


def _array(leaf: Any) -> Any:
    composite = composite_array(leaf)
    if composite is not None:
        return composite
    if isinstance(leaf, Tensor):
        return np.asarray(leaf._value)
    if isinstance(leaf, Variable):
        return leaf.numpy()
    return to_array(leaf)


def to_tensors(element: Element) -> Any:
    """The element as the user sees it: eager tensors in the same nest (a `Window` stays,
    for the dataset stage to make a dataset of)."""
    leaves, treedef = nest.flatten(element)
    return nest.unflatten(treedef, [leaf if isinstance(leaf, Window) else leaf.tensor()
                                    if isinstance(leaf, COMPOSITE_ARRAYS) else wrap(leaf)
                                    for leaf in leaves])


def spec_of(element: Element) -> Any:
    """The `sf.TensorSpec` nest describing `element` (a `DatasetSpec` for a `Window`)."""
    leaves, treedef = nest.flatten(element)
    return nest.unflatten(treedef, [DatasetSpec(a.spec) if isinstance(a, Window)
                                    else leaf_spec(a) for a in leaves])


def stack(elements: list[Element]) -> Element:
    """Elements of one structure stacked leaf by leaf along a new leading axis."""
    flat = [nest.flatten(e) for e in elements]
    treedef = flat[0][1]
    if any(other != treedef for _, other in flat[1:]):
        raise ValueError("Dataset.batch: elements of different structures cannot be batched")
    columns = zip(*(leaves for leaves, _ in flat), strict=True)
    try:
        return nest.unflatten(treedef, [
            stack_composites(list(column)) if any(
                isinstance(leaf, COMPOSITE_ARRAYS) for leaf in column) else np.stack(column)
            for column in columns])
    except ValueError as error:
        shapes = [[a.shape for a in leaves] for leaves, _ in flat[:4]]
        raise ValueError(f"Dataset.batch: elements of different shapes cannot be stacked "
                         f"({error}); shapes of the first elements: {shapes}") from None


class Failure:
    """What computing one element raised, held in the element's place in a buffer of
    elements computed ahead: raising it when the consumer reaches that place keeps the
    error where the element was, neither earlier (when it was computed) nor never."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def raise_error(self) -> NoReturn:
        raise self.error


Outcome = Any  # an Element, or a Failure in its place

# The exception types a restored checkpoint rebuilds by name: built-in ones and stageflow's.
# Other names are never imported (a checkpoint must not choose what code runs).
_REBUILT: dict[str, type[Exception]] = {
    **{f"builtins.{name}": kind for name, kind in vars(builtins).items()
       if isinstance(kind, type) and issubclass(kind, Exception)},
    **{f"{kind.__module__}.{kind.__qualname__}": kind
       for kind in (OutOfRangeError, StagingError)},
}
_JSON_SCALARS = (str, int, float, bool, type(None))


def settle(outcome: Outcome) -> Element:
    """The element, or its error raised."""
    if isinstance(outcome, Failure):
        outcome.raise_error()
    return outcome


def error_record(error: BaseException) -> dict[str, Any]:
    """An element's error as checkpoint state: its type's name, its arguments (as its
    message where they are not JSON values) and its notes."""
    kind = type(error)
    args = list(error.args) if all(isinstance(a, _JSON_SCALARS) for a in error.args) \
        else [str(error)]
    return {"type": f"{kind.__module__}.{kind.__qualname__}", "args": args,
            "notes": [str(note) for note in getattr(error, "__notes__", ())]}


def rebuilt_error(record: dict[str, Any]) -> Exception:
    """The error `error_record` saved: of its type where that is a built-in or stageflow
    exception, else a RuntimeError naming the type (its class is not imported)."""
    name, args, notes = record["type"], record["args"], record.get("notes", [])
    if not isinstance(name, str) or not isinstance(args, list) or not isinstance(notes, list):
        raise ValueError(f"a saved element error must have a type name and lists of "
                         f"arguments and notes, got {record!r}")
    error: Exception | None = None
    if name in _REBUILT:
        try:
            error = _REBUILT[name](*args)
        except Exception:  # noqa: BLE001 - arguments the type no longer takes
            error = None
    if error is None:
        message = str(args[0]) if len(args) == 1 else str(tuple(args))
        error = RuntimeError(f"{name}: {message}")
        error.add_note("an element's error saved in a checkpoint; its type is rebuilt "
                       "only when it is a built-in or stageflow exception")
    for note in notes:
        error.add_note(str(note))
    return error


def pack(outcomes: list[Outcome]) -> dict[str, Any]:
    """A buffer of elements (and failures in their places) as checkpoint state, the
    elements stacked when their shapes agree."""
    if not outcomes:
        return {"count": 0}
    state: dict[str, Any] = {"count": len(outcomes)}
    failures = [{"at": i, **error_record(o.error)} for i, o in enumerate(outcomes)
                if isinstance(o, Failure)]
    if failures:
        state["failures"] = failures
    elements = [o for o in outcomes if not isinstance(o, Failure)]
    if any(isinstance(leaf, Window) for e in elements for leaf in flat_leaves(e)):
        state["elements"] = [[{"window": pack(leaf.rows)} if isinstance(leaf, Window)
                              else leaf for leaf in flat_leaves(e)] for e in elements]
    elif elements:
        try:
            state["stacked"] = flat_leaves(stack(elements))
        except ValueError:
            state["elements"] = [flat_leaves(e) for e in elements]
    return state


def unpack(state: dict[str, Any], structure: Callable[[], Any]) -> list[Outcome]:
    """The buffer `pack` stored. `structure()` gives the spec of one element of the stage
    restoring it (asked only when there are elements): each saved element must have its
    leaves, dtypes and ranks, so that a buffer of another pipeline is refused rather than
    handed out as elements of the wrong type."""
    count = int(state["count"])
    failures: dict[int, Failure] = {}
    for record in state.get("failures", []):
        at = int(record["at"])
        if not 0 <= at < count or at in failures:
            raise ValueError(f"a saved element error is at position {at} of a buffer of "
                             f"{count} elements")
        failures[at] = Failure(rebuilt_error(record))
    rows = _saved_rows(state, count - len(failures))
    elements: list[Element] = []
    if rows:
        specs, treedef = nest.flatten(structure())
        for leaves in rows:
            leaves = [_saved_window(leaf, spec) if isinstance(leaf, dict) else leaf
                      for leaf, spec in zip(leaves, specs, strict=False)]
            _check_leaves(leaves, specs)
            elements.append(nest.unflatten(treedef, leaves))
    remaining = iter(elements)
    return [failures[i] if i in failures else next(remaining) for i in range(count)]


def _saved_window(saved: dict[str, Any], spec: Any) -> Window:
    """A window `pack` saved, where the pipeline's element has one (else refused)."""
    if not isinstance(spec, DatasetSpec) or "window" not in saved:
        raise ValueError(f"a saved element holds a window where the pipeline's element is "
                         f"{describe(spec)}")
    return Window(unpack(saved["window"], lambda: spec.element_spec), spec.element_spec)


def _saved_rows(state: dict[str, Any], count: int) -> list[list[np.ndarray]]:
    """The leaves of each of the `count` elements a buffer's state holds."""
    if "stacked" in state:
        columns = [np.asarray(c) for c in state["stacked"]]
        if any(c.ndim == 0 or c.shape[0] != count for c in columns):
            raise ValueError(f"a saved buffer of {count} elements has stacked leaves of "
                             f"shapes {[c.shape for c in columns]}")
        return [[np.asarray(c[i]) for c in columns] for i in range(count)]
    rows = [[a if isinstance(a, dict) else np.asarray(a) for a in leaves]
            for leaves in state.get("elements", [])]
    if len(rows) != count:
        raise ValueError(f"a saved buffer holds {len(rows)} elements where its count says "
                         f"{count}")
    return rows


def _check_leaves(leaves: list[Any], specs: list[Any]) -> None:
    if len(leaves) != len(specs) or any(
            spec_of(a) != s if isinstance(a, Window) or isinstance(s, DatasetSpec)
            else a.dtype != s.dtype or a.ndim != len(s.shape)
            for a, s in zip(leaves, specs, strict=True)):
        saved = ", ".join(_leaf_text(spec_of(a)) for a in leaves)
        raise ValueError(f"a saved element is {saved}, the pipeline's elements are "
                         f"{', '.join(_leaf_text(s) for s in specs)} here")


class _Shown(str):
    """A spec's short text, shown without quotes inside the nest's repr."""

    def __repr__(self) -> str:
        return str(self)


def describe(spec: Any) -> str:
    """A spec nest in short: ``(float32[?,2], int64[])``."""
    leaves, treedef = nest.flatten(spec)
    return repr(nest.unflatten(treedef, [_Shown(_leaf_text(s)) for s in leaves]))


def _leaf_text(spec: TensorSpec | DatasetSpec) -> str:
    if isinstance(spec, DatasetSpec):
        return f"dataset of {describe(spec.element_spec)}"
    return f"{spec.dtype.name}[{','.join('?' if d is None else str(d) for d in spec.shape)}]"


def flat_leaves(element: Element) -> list[np.ndarray]:
    return nest.flatten(element)[0]


__all__ = ["DatasetSpec", "Element", "Failure", "Outcome", "Window", "describe", "error_record",
           "flat_leaves", "pack", "rebuilt_error", "settle", "spec_of", "stack", "to_arrays",
           "to_tensors", "unpack"]
