"""Registration by import, done one way: a package whose modules enter what they define in
a table imports every one of its modules when it is itself imported.

The primitives of `stageflow.primitives` enter `core.primitive.REGISTRY`, the passes of
`stageflow.passes` its pass registry, the rules of `stageflow.codegen.lowered` its
`rule.RULES`: each package's ``__init__`` calls ``import_modules(__name__, __path__)``. So a
table is complete as soon as anything of its package is imported, whatever else was
imported before or not at all, and a module is registered by being a file of its package:
there is no list of modules to keep, nor one to forget a module in. `stageflow/math.py` reads
the ops the modules of `stageflow.frontend.ops` mark for `sf.math` the same way, after
importing every one of them (there, not in that package's ``__init__``: modules below the
package, the tape among them, import its modules).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from types import ModuleType

__all__ = ["import_modules"]


def import_modules(package: str, path: Iterable[str]) -> tuple[ModuleType, ...]:
    """Import every module of the package named `package` whose ``__path__`` is `path`, its
    subpackages' modules included, in the order of their names; the modules, in that order."""
    found = sorted(info.name for info in pkgutil.walk_packages(path, f"{package}."))
    return tuple(importlib.import_module(name) for name in found)
