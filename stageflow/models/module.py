"""`sf.Module`: Python objects that own state, found through their attributes (the paper, 4.3).

A module holds its variables and sub-modules as ordinary attributes, directly or inside
lists, tuples and dicts. Nothing is registered: `variables` and `submodules` walk the
attributes when asked, depth first, attributes sorted by name as `tf.Module` sorts them (a
Keras-style `Layer`'s in the order they were assigned), containers in their own order, so the
order is deterministic and the same object is reported once however many paths reach it.
`variables` keeps its last walk while the structure is the same (`_WalkCache`): a training
step asks for `trainable_variables` every step, and walking a small ResNet's modules anew
each time cost a tenth of an eager step at batch 1.
The attribute names along the way are the named edges of the paper's object graph
(`Module._flatten` yields them as paths), which checkpoints match state by.

A module with a `call` method is callable (`net(x)` runs `net.call(x)`), as Keras layers
and models are; `@sf.function` works on either method, and a `call` that creates variables
on its first call follows the state-creation rule: the function is then traced once more.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Callable, Iterator
from typing import Any

from stageflow.frontend.variables import Variable
from stageflow.models.train import deferred

Path = tuple[str | int, ...]


def camel_to_snake(name: str) -> str:
    """``"MyDense2D"`` -> ``"my_dense2d"`` (the default module name, as in TensorFlow)."""
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


class Module:
    """A named container of variables and other modules, tracked through its attributes.

    The paper's listing 3::

        class Net(sf.Module):
            def __init__(self):
                super().__init__()
                self.v = sf.Variable(1.0)
                self.out = sf.layers.Dense(1)

            def call(self, x):
                return self.out(sf.nn.softplus(x * self.v))

        net = Net()
        y = net(sf.ones((2, 3)))       # or sf.function(net)(...): the same numbers
        net.variables                  # [out.kernel, out.bias, v]: by attribute name
        net.submodules                 # [out]

    >>> class Scale(sf.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.w = sf.Variable(2.0)
    ...     def __call__(self, x):
    ...         return self.w * x
    >>> m = Scale()
    >>> m(sf.constant([1.0, 2.0]))
    sf.Tensor([2., 4.], shape=(2,), dtype=float32)
    >>> len(m.trainable_variables)
    1
    """

    # The last `variables` walk (`_cached_variables`): a slot, never walked itself.
    __slots__ = ("__dict__", "__weakref__", "__walk")

    # Attributes never walked: bookkeeping, and references to state owned by others.
    _TRACKING_IGNORED: frozenset[str] = frozenset({"_name"})
    # TensorFlow's `tf.Module` walks its attributes sorted by name; Keras layers keep the
    # order they were assigned in (`Layer` sets this False).
    _WALK_SORTED: bool = True

    def __init__(self, name: str | None = None) -> None:
        if name is not None and not isinstance(name, str):
            raise TypeError(f"sf.Module: name must be a string, got {type(name).__name__}")
        self._name = name if name is not None else camel_to_snake(type(self).__name__)

    @property
    def name(self) -> str:
        """The module's name (the snake-cased class name unless one was given)."""
        name = self.__dict__.get("_name")  # a subclass may not have called __init__
        return name if name is not None else camel_to_snake(type(self).__name__)

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, _TRACKED) or isinstance(self.__dict__.get(name), _TRACKED):
            _Structure.changed()
        super().__setattr__(name, value)
        deferred.attribute_set(self, name, value)  # a checkpoint's value waiting for it

    def __delattr__(self, name: str) -> None:
        if isinstance(self.__dict__.get(name), _TRACKED):
            _Structure.changed()
        super().__delattr__(name)

    # -- tracking -----------------------------------------------------------------------

    def _flatten(self, predicate: Callable[[Any], bool], recursive: bool = True
                 ) -> Iterator[tuple[Path, Any]]:
        """``(path, object)`` for every object reachable from this module's attributes for
        which `predicate` holds, depth first, each object once (by identity).

        A path names the edges from this module: attribute names, list/tuple indices and
        dict keys, e.g. ``("layers", 0, "kernel")``. With ``recursive=False`` the walk does
        not enter sub-modules (their own attributes), only this module's containers.
        """
        seen: set[int] = {id(self)}
        yield from _walk(self, (), predicate, recursive, seen, None)

    @property
    def variables(self) -> list[Variable]:
        """Every variable of this module and its sub-modules, each once, in walk order."""
        return _cached_variables(self)

    @property
    def trainable_variables(self) -> list[Variable]:
        """The variables with ``trainable=True`` (what optimizers and tapes usually want)."""
        return [v for v in self.variables if v.trainable]

    @property
    def non_trainable_variables(self) -> list[Variable]:
        return [v for v in self.variables if not v.trainable]

    @property
    def submodules(self) -> list[Module]:
        """Every module reachable from this one (children, their children, ...), not
        including itself."""
        return [m for _, m in self._flatten(_is_module)]

    # -- calling ------------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        call = getattr(self, "call", None)
        if call is None:
            raise TypeError(f"sf.Module {self.name!r} ({type(self).__name__}) is not "
                            "callable: define a `call` (or `__call__`) method")
        return call(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _is_variable(obj: Any) -> bool:
    return isinstance(obj, Variable)


def _is_module(obj: Any) -> bool:
    return isinstance(obj, Module)


def _children(obj: Any) -> Iterator[tuple[str | int, Any]]:
    """The named edges out of a module or a container, in a fixed order."""
    if isinstance(obj, Module):
        ignored = type(obj)._TRACKING_IGNORED
        items = list(vars(obj).items())
        if type(obj)._WALK_SORTED:
            items.sort(key=lambda item: item[0])
        for key, value in items:
            if key not in ignored:
                yield key, value
    elif isinstance(obj, dict):
        yield from list(obj.items())
    elif isinstance(obj, list | tuple):
        yield from enumerate(list(obj))


def _walk(node: Any, path: Path, predicate: Callable[[Any], bool], recursive: bool,
          seen: set[int], mutable: list[tuple[Any, tuple]] | None
          ) -> Iterator[tuple[Path, Any]]:
    """`Module._flatten`'s walk; each list and dict it enters goes in `mutable` (where
    given) with its contents then (`_contents`)."""
    if mutable is not None and isinstance(node, list | dict):
        mutable.append((node, _contents(node)))
    for key, child in _children(node):
        if not isinstance(child, Variable | Module | list | tuple | dict):
            continue
        if id(child) in seen:  # shared objects once; cycles end here
            continue
        seen.add(id(child))
        child_path = (*path, key)
        if predicate(child):
            yield child_path, child
        if isinstance(child, Module) and not recursive:
            continue
        if not isinstance(child, Variable):
            yield from _walk(child, child_path, predicate, recursive, seen, mutable)


def _contents(container: list | dict) -> tuple:
    """What a walk read of a list or dict: its items (a dict's keys too), in order."""
    if isinstance(container, dict):
        return tuple(container), tuple(container.values())
    return tuple(container)


def _unchanged(container: list | dict, contents: tuple) -> bool:
    """Whether `container` holds the same objects (by identity) as when `_contents` read it."""
    if isinstance(container, dict):
        keys, values = contents
        return (len(container) == len(keys) and tuple(container) == keys
                and all(map(operator.is_, container.values(), values)))
    return len(container) == len(contents) and all(map(operator.is_, container, contents))


# What a walk enters: assigning or deleting an attribute holding one changes the structure.
_TRACKED = (Variable, Module, list, tuple, dict)


_WALK_SLOT = Module.__dict__["_Module__walk"]  # (a `__getattr__` of a subclass not asked)


class _Structure:
    """Numbers the changes of module attributes that involve a tracked object, in any
    module: a sub-module's new layer is seen by its parents' kept walks. Each change takes
    a number never used before (`next` on a counter is atomic under the GIL), so changes
    made by two threads at once cannot leave the number a walk was kept under."""

    generation = 0
    _numbers = itertools.count(1)

    @classmethod
    def changed(cls) -> None:
        cls.generation = next(cls._numbers)


def _cached_variables(module: Module) -> list[Variable]:
    """`module.variables`, walked again only when something the last walk read changed.

    A walk reads module attributes and the lists, dicts and tuples they hold. Attributes
    change through `Module.__setattr__` and `__delattr__` (`_Structure`); lists and dicts
    change in place, so the walk keeps what each held and compares it by identity (the
    small ResNet has two lists of three); tuples cannot change. The walk is kept in the
    module's own slot, so a module reachable from its walk (a parent held by a child) is
    garbage like any other cycle. Trainable flags are not kept: `trainable_variables`
    reads them at each call.
    """
    try:
        kept = _WALK_SLOT.__get__(module, Module)
    except AttributeError:  # not walked yet
        kept = None
    if kept is not None:
        generation, variables, mutable = kept
        if generation == _Structure.generation and all(
                _unchanged(c, contents) for c, contents in mutable):
            return list(variables)
    generation = _Structure.generation
    mutable: list[tuple[Any, tuple]] = []
    variables = [v for _, v in _walk(module, (), _is_variable, True, {id(module)}, mutable)]
    _WALK_SLOT.__set__(module, (generation, variables, mutable))
    return list(variables)


__all__ = ["Module", "camel_to_snake"]
