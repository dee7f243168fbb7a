"""Exceptions that are stageflow's own (shape and dtype errors are ValueError/TypeError), and
how a kernel's error is re-raised naming the op and the user's line."""

from typing import Any


class StagingError(Exception):
    """A symbolic tensor was asked for a concrete value while a function was being traced."""


class OutOfRangeError(Exception):
    """A staged function asked an exhausted `sf.data` iterator for its next element (the
    eager ``next`` raises StopIteration instead)."""


class CallbackError(Exception):
    """Carries what a Python callback (`py_func`) raised through the kernels' error
    handling, which re-raises the original (`located_error`)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


# What an eager kernel raises on bad values; re-raised by `located_error`, never swallowed.
KERNEL_ERRORS = (ValueError, TypeError, IndexError, OverflowError, CallbackError)


def located_error(name: str, location: Any, error: Exception) -> Exception:
    """`error` again, naming the op and the user's line it was traced from; a callback's
    own exception unchanged, with the line as a note."""
    where = f"\n  at {location}" if location is not None else ""
    if any(note.startswith("raised in sf.") for note in getattr(error, "__notes__", ())):
        return error  # a callback's, already located (a region op's step re-raising it)
    if isinstance(error, CallbackError):
        error.error.add_note(f"raised in sf.{name}" + (f" at {location}" if location else ""))
        return error.error
    message = str(error)  # NumPy's ufuncs name themselves already: "matmul: Input operand..."
    return type(error)(f"{message if message.startswith(f'{name}:') else f'{name}: {message}'}"
                       f"{where}")
