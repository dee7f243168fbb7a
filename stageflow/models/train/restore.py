"""Restoring a checkpoint: greedy matching of its object graph against live objects.

The match starts at the root (the `Checkpoint`) and follows each saved edge to the live
object with the same edge name, breadth first, so it depends only on the objects being
restored (two copies of a model restore independently, whatever order they were created
in). An optimizer's slots are matched through the variables they belong to. A saved edge
whose object does not exist yet leaves a handler in `deferred`: the value is applied when
the object appears (a layer's variables on its first call, an optimizer's slots on its
first step).

Restoring is all or nothing: every matched object's value is checked first (kind, shape,
dtype) and only then are they all applied, so an error changes no variable. Values never
matched to an object are reported by the status, and by a warning when the restore is
dropped, unless `expect_partial()` said that is intended.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.frontend.variables import Variable
from stageflow.models.train import deferred
from stageflow.models.train.graph import (
    MAX_DEPTH,
    TENSOR,
    Commit,
    children,
    kind,
    prepare,
    slots,
    state,
    walk,
)


def encode(value: Any, key: str, tensors: dict[str, np.ndarray], depth: int = 0) -> Any:
    """A node's state as JSON, its arrays moved into `tensors` under keys from `key`; nested
    at most `MAX_DEPTH` deep, as a read accepts."""
    if isinstance(value, np.ndarray | np.generic):
        tensors[key] = _contiguous(value)
        return {TENSOR: key}
    if isinstance(value, dict | list | tuple) and depth >= MAX_DEPTH:
        raise TypeError(f"sf.train: checkpointed state at {key!r} nests deeper than "
                        f"{MAX_DEPTH} levels")
    if isinstance(value, dict):
        if TENSOR in value or not all(isinstance(k, str) for k in value):
            raise TypeError(f"sf.train: checkpointed state at {key!r} has a dict whose keys are "
                            f"not all strings (or one is {TENSOR!r})")
        return {k: encode(v, f"{key}.{k}", tensors, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v, f"{key}.{i}", tensors, depth + 1) for i, v in enumerate(value)]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"sf.train: cannot checkpoint a {type(value).__name__} at {key!r} (state "
                    "is NumPy arrays and JSON values: str, int, float, bool, None, lists, dicts)")


def decode(value: Any, tensors: dict[str, np.ndarray], where: str) -> Any:
    if isinstance(value, dict):
        if TENSOR in value:
            key = value[TENSOR]
            if key not in tensors:
                raise ValueError(f"{where}: the checkpoint has no tensor {key!r}")
            return tensors[key]
        return {k: decode(v, tensors, where) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v, tensors, where) for v in value]
    return value


def serialize(root: Any, value_of: Callable[[Any], Any] = state
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The tensors and the JSON graph saving everything reachable from `root`; `value_of`
    gives each node's state (a staged write passes the values its graph read)."""
    tensors: dict[str, np.ndarray] = {}
    saved = []
    for number, node in enumerate(walk(root)):
        key = node.path if node.path not in tensors else f"{node.path}#{number}"
        own = value_of(node.obj)
        if isinstance(node.obj, Variable):  # its tensor is named by its path alone
            tensors[key] = _contiguous(next(iter(own.values())))
            own = {k: {TENSOR: key} for k in own}
        elif own is not None:
            own = encode(own, key, tensors)
        saved.append({"kind": kind(node.obj), "type": type(node.obj).__qualname__,
                      "path": node.path, "children": node.children, "slots": node.slots,
                      "state": own})
    return tensors, {"nodes": saved}


class Restore:
    """One restore of one checkpoint into one root: the saved graph and values, what was
    matched, and what still waits for objects not created yet."""

    def __init__(self, path: str, graph: dict[str, Any], tensors: dict[str, np.ndarray],
                 root: Any) -> None:
        self.path = path
        self.nodes: list[dict[str, Any]] = graph["nodes"]
        self.tensors = tensors
        self.root = weakref.ref(root)
        # id(variable) -> (weak reference, node): finds a slot's variable node
        self._variables: dict[int, tuple[weakref.ref, int]] = {}
        self._objects: dict[int, Any] = {}  # id(object) -> node, for stateful objects
        # node -> path, for the saved values not restored yet; shared with the finalizer
        self._open = {number: node["path"] for number, node in enumerate(self.nodes)
                      if node["state"] is not None}
        self._matched: set[int] = set()
        self._flags = {"partial": False}
        self._slot_waits: dict[int, dict[tuple[int, str], int]] = {}  # id(opt) -> ...
        weakref.finalize(self, _report_unused, path, self._open, self._flags)

    # -- matching -------------------------------------------------------------------------

    def restore(self, node: int, obj: Any, holder: tuple[Any, str, int] | None = None) -> None:
        """Match the saved subgraph at `node` with `obj` and restore it, all or nothing
        (`holder`: the attribute edge that `obj` is the new value of)."""
        plan = _Plan()
        self._match(node, obj, plan, holder=holder)
        plan.run()
        self._matched_all(plan)

    def values_for(self, variables: list[Variable]) -> list[np.ndarray]:
        """The saved values of `variables` (a staged read), other state restored in Python;
        ValueError naming any variable the checkpoint does not hold."""
        self.expect_partial()  # one restore per run of the graph: nothing waits for later
        plan = _Plan()
        self._match(0, self.root(), plan, defer=False)
        values = []
        for variable in variables:
            node = plan.variables.get(id(variable))
            if node is None:
                raise ValueError(f"{self._where(None)}: the checkpoint holds no value for the "
                                 f"variable {variable.name!r}")
            values.append(plan.values[node])
        plan.run(variables=False)
        return values

    def _where(self, node: int | None) -> str:
        at = f"sf.train.Checkpoint.restore({self.path!r})"
        return at if node is None else f"{at}: {self.nodes[node]['path'] or '<root>'}"

    def _match(self, start: int, obj: Any, plan: _Plan, defer: bool = True,
               holder: tuple[Any, str, int] | None = None) -> None:
        # Each entry: the node, its live object, and the edge from the nearest object
        # that can be waited on (weakly referenced) to this one: a list has no hook, so a
        # value for an element appended later waits on the attribute holding the list,
        # and is restored when that attribute is assigned again (`Sequential.add`).
        queue: list[tuple[int, Any, tuple[Any, str, int] | None]] = [(start, obj, holder)]
        optimizers = []
        while queue:
            number, live, holder = queue.pop(0)
            if number in plan.nodes:
                continue
            saved = self.nodes[number]
            if number not in self._matched:  # else: matched before, only new edges now
                if saved["kind"] != kind(live):
                    raise ValueError(f"{self._where(number)} is a {saved['kind']} "
                                     f"({saved['type']}) in the checkpoint, the object is a "
                                     f"{type(live).__name__}")
                if isinstance(live, Variable):
                    plan.variables[id(live)] = number
                if saved["state"] is not None:
                    value = decode(saved["state"], self.tensors, self._where(number))
                    plan.values[number] = next(iter(value.values())) if isinstance(
                        live, Variable) else value
                    plan.commits.append((live, self._prepare(number, live, value)))
                if saved["slots"]:
                    optimizers.append((number, live))
            plan.nodes[number] = live
            edges = children(live)
            waitable = _weakrefable(live)
            for name, child in saved["children"]:
                if name in edges:
                    if child not in self._matched or self._unmatched_below(child):
                        queue.append((child, edges[name],
                                      (live, name, child) if waitable else holder))
                elif not defer:
                    continue
                elif waitable:
                    plan.waits.append((live, name, child))
                elif holder is not None:
                    plan.waits.append(holder)
        for number, optimizer in optimizers:
            existing = {(id(v), name): slot for v, name, slot in slots(optimizer)}
            for variable_node, name, slot_node in self.nodes[number]["slots"]:
                variable = self._variable_of(variable_node, plan)
                slot = None if variable is None else existing.get((id(variable), name))
                if slot is not None:
                    self._match(slot_node, slot, plan, defer)
                elif defer:
                    plan.slot_waits.append((optimizer, variable_node, name, slot_node))

    def _prepare(self, number: int, live: Any, value: Any) -> Commit:
        """`prepare` of a saved state; a state of another layout than the object's (a file
        written by other code, or edited) is a ValueError naming the checkpoint and the
        object, whatever error the object's check ran into."""
        where = self._where(number)
        try:
            return prepare(live, value, where)
        except (KeyError, IndexError, TypeError, AttributeError, OverflowError) as error:
            raise ValueError(f"{where}: the saved state does not fit this "
                             f"{type(live).__name__} ({type(error).__name__}: {error})"
                             ) from error

    def _unmatched_below(self, node: int) -> bool:
        """Whether a matched node has saved edges still unmatched (elements appended to a
        list after an earlier restore of it)."""
        return any(child not in self._matched for _, child in self.nodes[node]["children"])

    def _variable_of(self, node: int, plan: _Plan) -> Variable | None:
        if node in plan.nodes and isinstance(plan.nodes[node], Variable):
            return plan.nodes[node]
        for ref, number in self._variables.values():
            if number == node and ref() is not None:
                return ref()
        return None

    # -- bookkeeping after a successful match -----------------------------------------------

    def _matched_all(self, plan: _Plan) -> None:
        for number, live in plan.nodes.items():
            if number in self._matched:
                continue
            self._matched.add(number)
            self._open.pop(number, None)
            if isinstance(live, Variable):
                self._variables[id(live)] = (weakref.ref(live), number)
            if self.nodes[number]["state"] is not None:
                self._objects[id(live)] = number
        for parent, name, child in plan.waits:
            deferred.expect_attribute(parent, name, self._attribute_handler(parent, name, child))
        for optimizer, variable_node, name, slot_node in plan.slot_waits:
            waits = self._slot_waits.get(id(optimizer))
            if waits is None:
                waits = self._slot_waits[id(optimizer)] = {}
                deferred.expect_slots(optimizer, self._slot_handler(waits))
            waits[(variable_node, name)] = slot_node

    # The handlers hold the restore (and its values) as long as an object waiting for them
    # lives; the restore holds no object strongly, so nothing is kept alive in a cycle.

    def _attribute_handler(self, parent: Any, name: str, node: int) -> Callable[[Any], None]:
        owner = weakref.ref(parent)  # the handler lives in a dict keyed weakly by `parent`

        def restore_new(value: Any) -> None:
            self.restore(node, value, (owner(), name, node))
        return restore_new

    def _slot_handler(self, waits: dict[tuple[int, str], int]
                      ) -> Callable[[Any, str, Any], bool]:
        def restore_slot(variable: Any, name: str, slot: Any) -> bool:
            entry = self._variables.get(id(variable))
            if entry is None or entry[0]() is not variable:
                return False
            node = waits.pop((entry[1], name), None)
            if node is None:
                return False
            self.restore(node, slot)
            return True
        return restore_slot

    # -- reports ----------------------------------------------------------------------------

    def unused(self) -> list[str]:
        """Paths of saved values not restored into any object (yet)."""
        return [path or "<root>" for path in self._open.values()]

    def unmatched_objects(self) -> list[str]:
        """Paths of live objects with state that this restore gave no value. An object below
        the root may name edges it does not need restored (``_checkpoint_optional``): the
        `save_counter` of a `Checkpoint` nested in another is only the root's to restore."""
        root = self.root()
        if root is None:
            return []
        nodes = walk(root)
        optional = {id(nodes[child].obj) for node in nodes[1:] for name, child in node.children
                    if name in getattr(node.obj, "_checkpoint_optional", ())}
        return [node.path for node in nodes if state_holder(node.obj)
                and id(node.obj) not in self._objects and id(node.obj) not in optional]

    def expect_partial(self) -> None:
        self._flags["partial"] = True


class _Plan:
    """What one match found, applied only when every value checked out."""

    def __init__(self) -> None:
        self.nodes: dict[int, Any] = {}
        self.variables: dict[int, int] = {}
        self.values: dict[int, Any] = {}
        self.commits: list[tuple[Any, Commit]] = []
        self.waits: list[tuple[Any, str, int]] = []
        self.slot_waits: list[tuple[Any, int, str, int]] = []

    def run(self, variables: bool = True) -> None:
        for live, commit in self.commits:
            if variables or not isinstance(live, Variable):
                commit()


def _contiguous(array: Any) -> np.ndarray:
    array = np.asarray(array)
    return array if array.flags.c_contiguous else array.copy()


def state_holder(obj: Any) -> bool:
    return isinstance(obj, Variable) or hasattr(obj, "_checkpoint_state")


def _weakrefable(obj: Any) -> bool:
    try:
        weakref.ref(obj)
    except TypeError:
        return False
    return True


def _report_unused(path: str, unused: dict[int, str], flags: dict[str, bool]) -> None:
    if unused and not flags["partial"]:
        shown = ", ".join(sorted(p or "<root>" for p in unused.values())[:20])
        warnings.warn(f"sf.train: values in the checkpoint {path!r} were never restored, no "
                      f"object was created for them: {shown} (call expect_partial() on the "
                      "status `restore` returned if that is intended)", stacklevel=1)


__all__ = ["Restore", "decode", "encode", "serialize", "state_holder"]
