"""Op functions that take composite tensors too (TensorFlow's ``dispatch_for_api``):
``sf.reduce_sum(ragged, axis=1)`` or ``sf.concat([ragged, ragged], 0)`` run the version
the composite's module registers, so that one public name serves both.

The ops marked `for_composites` look (an operand's type is one dictionary lookup), and
so do the binary elementwise ops (``sf.add(ragged, 3)``), off their fast path for eager
tensors, so that Python's operators on tensors, which they are, cost nothing more.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["for_composites", "register"]

Op = TypeVar("Op", bound=Callable[..., Any])


def for_composites(op: Op | None = None, *, operand: int = 0) -> Any:
    """Mark `op` as one whose operand at position `operand` (the first by default; an
    element of it, where it is a list of operands, as `concat`'s) may be a composite with
    a registered version (``@for_composites`` or ``@for_composites(operand=1)``)."""
    if op is None:
        return functools.partial(for_composites, operand=operand)
    versions: dict[type, Callable[..., Any]] = {}
    name = list(inspect.signature(op).parameters)[operand]

    @functools.wraps(op)
    def dispatching(*args: Any, **kwargs: Any) -> Any:
        if versions:
            x = args[operand] if len(args) > operand else kwargs.get(name)
            kinds = (type(v) for v in x) if type(x) is list or type(x) is tuple else (type(x),)
            version = next((versions[kind] for kind in kinds if kind in versions), None)
            if version is not None:
                return version(*args, **kwargs)
        return op(*args, **kwargs)

    dispatching._versions = versions  # type: ignore[attr-defined]
    return dispatching


def register(op: Callable[..., Any], kind: type, version: Callable[..., Any]) -> None:
    """Run `version` for `op` when an operand is a `kind` (a composite's module calls this
    for each op it serves)."""
    versions = getattr(op, "_versions", None)
    if versions is None:
        raise TypeError(f"{op.__name__} takes no composites")
    versions[kind] = version
