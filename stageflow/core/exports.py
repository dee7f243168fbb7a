"""`dir()` of a public namespace lists its API only.

Some namespaces are not facades that star-import their API (as `sf.nn` is): `sf.config`
is the module whose settings the compiler reads, so ``sf.config.dump_dir = ...`` must set
that module's attribute; `sf.errors` and `sf.optimizers.schedules` are the modules that
define their classes, beside the imports and internal helpers (`located_error`) those
need; `sf.data`, `sf.aot`, `sf.saved` and `sf.distribute` are packages, whose submodules
the import system makes attributes of them. Such a module sets
``__dir__ = public_dir(globals())`` (PEP 562): its imports, helpers and submodules stay
reachable by name, for the code that uses them, but out of `dir()`, and so out of
completion.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def public_dir(namespace: dict[str, Any]) -> Callable[[], list[str]]:
    """A module-level ``__dir__`` for the module whose `globals()` are `namespace`: the
    names in its ``__all__`` and its dunder names (``__doc__``, ``__all__``...), sorted."""
    def __dir__() -> list[str]:
        exported = set(namespace["__all__"])
        return sorted(name for name in namespace
                      if name in exported or name.startswith("__"))
    return __dir__
