"""Exceptions that are stageflow's own (shape and dtype errors are ValueError/TypeError), and
how a kernel's error is re-raised naming the op and the user's line."""

from typing import Any

from stageflow.core import op_errors
from stageflow.core.exports import public_dir
from stageflow.core.op_errors import *  # noqa: F403 - TensorFlow's status errors
from stageflow.core.op_errors import INVALID_ARGUMENT, OUT_OF_RANGE, OpError

# `sf.errors`: the exceptions a user catches, and TensorFlow's status codes. `CallbackError`
# never reaches them (the kernels' error handling re-raises what it carries); it and the
# helpers stay out of `dir`.
__all__ = sorted(["InvalidArgumentError", "InvalidIndexError", "OutOfRangeError",
                  "StagingError", *op_errors.__all__])
__dir__ = public_dir(globals())


class StagingError(Exception):
    """A symbolic tensor was asked for a concrete value while a function was being traced.

    Tracing runs the Python function once on tensors without values, to record the graph:
    ``float(t)``, ``t.item()``, ``t.numpy()`` or a Python ``if`` on such a tensor cannot
    be answered then. The message names the user's line; computing with sf ops instead
    keeps the value in the graph:

    >>> @sf.function
    ... def halve_peak(x):
    ...     limit = float(sf.reduce_max(x))     # a Python float: the trace has none
    ...     return sf.minimum(x, limit / 2)
    >>> halve_peak(sf.constant([1.0, 4.0]))
    Traceback (most recent call last):
    ...
    stageflow.core.errors.StagingError: float() of a traced tensor float32[]: a traced ...
    >>> @sf.function
    ... def halve_peak(x):
    ...     return sf.minimum(x, sf.reduce_max(x) / 2)
    >>> halve_peak(sf.constant([1.0, 4.0]))
    sf.Tensor([1., 2.], shape=(2,), dtype=float32)
    """


class OutOfRangeError(OpError):
    """A staged function asked an exhausted `sf.data` iterator for its next element (the
    eager ``next`` raises StopIteration instead): a graph cannot stop a Python loop, so
    the call raises, as TensorFlow's ``tf.errors.OutOfRangeError``, and a training loop
    catches it at the end of the epoch.

    >>> batches = iter(sf.data.Dataset.range(4).batch(2))
    >>> @sf.function
    ... def total():
    ...     return sf.reduce_sum(next(batches))      # one batch per call
    >>> int(total()), int(total())
    (1, 5)
    >>> try:
    ...     total()
    ... except sf.errors.OutOfRangeError as error:
    ...     print(error)
    sf.data.Iterator: end of the dataset (the staged function asked for one more element)
    """

    error_code = OUT_OF_RANGE


class InvalidArgumentError(OpError, ValueError):
    """A check of tensor values failed (`sf.debugging`): eagerly at once, in a staged
    function when it runs; the message names the check, the values and the user's line
    (TensorFlow's ``tf.errors.InvalidArgumentError``).

    >>> try:
    ...     sf.debugging.assert_positive(sf.constant([1.0, -2.0]))
    ... except sf.errors.InvalidArgumentError as error:
    ...     print(str(error).splitlines()[0])
    assert_positive: condition x > 0 did not hold element-wise: x = [ 1. -2.]
    """

    error_code = INVALID_ARGUMENT


class InvalidIndexError(InvalidArgumentError, IndexError):
    """An index out of range in an op's values (`gather`, `scatter`...): TensorFlow's
    ``InvalidArgumentError`` for it, and an IndexError, as Python's own indexing raises.

    >>> try:
    ...     sf.gather(sf.constant([1.0]), [1])
    ... except sf.errors.InvalidArgumentError as error:
    ...     print(type(error).__name__, isinstance(error, IndexError))
    InvalidIndexError True
    """


class CallbackError(Exception):
    """Carries what a Python callback (`py_func`) raised through the kernels' error
    handling, which re-raises the original (`located_error`)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


# What an eager kernel raises on bad values; re-raised by `located_error`, never swallowed.
KERNEL_ERRORS = (ValueError, TypeError, IndexError, OverflowError, CallbackError)


def kernel_error_type(error: Exception) -> type[Exception]:
    """The class a kernel's `error` is re-raised as: its own, except that an index out of
    range (NumPy's IndexError) is TensorFlow's InvalidArgumentError too."""
    return InvalidIndexError if type(error) is IndexError else type(error)


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
    named = message if message.startswith(f"{name}:") else f"{name}: {message}"
    return kernel_error_type(error)(f"{named}{where}")
