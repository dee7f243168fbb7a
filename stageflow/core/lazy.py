"""Modules imported on first use: how the compiler stays unloaded until something compiles.

`import stageflow` and eager ops need NumPy and the op set only; the compiler (xDSL,
llvmlite, the IR, the passes, code generation, staging) takes longer to import than all of
that. A module that calls into the compiler only on some paths (an eager op compiling its
loop, the device table finding a GPU) names it at its top like any import, in this form::

    if TYPE_CHECKING:
        from stageflow.codegen.lowered import compile as lowered
    else:
        lowered = lazy.module("stageflow.codegen.lowered.compile")

so readers, type checkers and the layer contract (`lint-imports` counts type-checking
imports) see the dependency where imports stand, and the module is imported the first time
one of its attributes is read. `stageflow/__init__.py` does the same for the public names
that live above the compiler (`sf.function`, `sf.layers`, ...), through its `__getattr__`.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

__all__ = ["LazyModule", "module"]


class LazyModule:
    """Stands for the module `name` and imports it at the first attribute read."""

    __slots__ = ("_name", "_module")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attribute)

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<lazy module {self._name!r}, {state}>"


def module(name: str) -> Any:
    """The module `name`, imported when one of its attributes is first read."""
    return LazyModule(name)
