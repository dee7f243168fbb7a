"""Exceptions that are stageflow's own (shape and dtype errors are ValueError/TypeError), and
how a kernel's error is re-raised naming the op and the user's line."""

from typing import Any

# What an eager kernel raises on bad values; re-raised by `located_error`, never swallowed.
KERNEL_ERRORS = (ValueError, TypeError, IndexError, OverflowError)


class StagingError(Exception):
    """A symbolic tensor was asked for a concrete value while a function was being traced."""


def located_error(name: str, location: Any, error: Exception) -> Exception:
    """`error` again, naming the op and the user's line it was traced from."""
    where = f"\n  at {location}" if location is not None else ""
    return type(error)(f"{name}: {error}{where}")
