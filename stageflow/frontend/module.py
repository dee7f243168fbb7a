"""`sf.Module`: Python objects that own state, found through their attributes (the paper, 4.3).

A module holds its variables and sub-modules as ordinary attributes, directly or inside
lists, tuples and dicts. Nothing is registered: `variables` and `submodules` walk the
attributes when asked, depth first in attribute-assignment (and container) order, so the
order is deterministic and the same object is reported once however many paths reach it.
The attribute names along the way are the named edges of the paper's object graph
(`Module._flatten` yields them as paths), which checkpoints match state by.

A module with a `call` method is callable (`net(x)` runs `net.call(x)`), as Keras layers
and models are; `@sf.function` works on either method, and a `call` that creates variables
on its first call follows the state-creation rule: the function is then traced once more.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from stageflow.frontend.train import deferred
from stageflow.frontend.variables import Variable

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
        net.variables                  # [v, out.kernel, out.bias]
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

    # Attributes never walked: bookkeeping, and references to state owned by others.
    _TRACKING_IGNORED: frozenset[str] = frozenset({"_name"})

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
        super().__setattr__(name, value)
        deferred.attribute_set(self, name, value)  # a checkpoint's value waiting for it

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
        yield from _walk(self, (), predicate, recursive, seen)

    @property
    def variables(self) -> list[Variable]:
        """Every variable of this module and its sub-modules, each once, in walk order."""
        return [v for _, v in self._flatten(_is_variable)]

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
        for key, value in list(vars(obj).items()):
            if key not in ignored:
                yield key, value
    elif isinstance(obj, dict):
        yield from list(obj.items())
    elif isinstance(obj, list | tuple):
        yield from enumerate(list(obj))


def _walk(node: Any, path: Path, predicate: Callable[[Any], bool], recursive: bool,
          seen: set[int]) -> Iterator[tuple[Path, Any]]:
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
            yield from _walk(child, child_path, predicate, recursive, seen)


__all__ = ["Module", "camel_to_snake"]
