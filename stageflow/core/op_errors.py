"""TensorFlow's `tf.errors` hierarchy: `OpError`, the base of the errors an op raises, and
one subclass per status code, so that code written against TensorFlow catches and raises
them by the same names (`sf.errors` exports them)."""

from __future__ import annotations

from typing import Any

__all__ = [
    "AbortedError", "AlreadyExistsError", "CancelledError", "DataLossError",
    "DeadlineExceededError", "FailedPreconditionError", "InternalError", "NotFoundError",
    "OpError", "PermissionDeniedError", "ResourceExhaustedError", "UnauthenticatedError",
    "UnavailableError", "UnimplementedError", "UnknownError",
    "ABORTED", "ALREADY_EXISTS", "CANCELLED", "DATA_LOSS", "DEADLINE_EXCEEDED",
    "FAILED_PRECONDITION", "INTERNAL", "INVALID_ARGUMENT", "NOT_FOUND", "OK", "OUT_OF_RANGE",
    "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "UNAUTHENTICATED", "UNAVAILABLE",
    "UNIMPLEMENTED", "UNKNOWN",
]

# TensorFlow's status codes (`tf.errors.NOT_FOUND`...), each class's `error_code`.
OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED, NOT_FOUND = range(6)
ALREADY_EXISTS, PERMISSION_DENIED, RESOURCE_EXHAUSTED, FAILED_PRECONDITION = range(6, 10)
ABORTED, OUT_OF_RANGE, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS = range(10, 16)
UNAUTHENTICATED = 16


class OpError(Exception):
    """The base of the errors an op raises, as TensorFlow's ``tf.errors.OpError``: catching
    it catches every status error (`InvalidArgumentError`, `OutOfRangeError`, ...).

    Built either from a message alone, or with TensorFlow's arguments
    ``(node_def, op, message)``; `message`, `op`, `node_def` and `error_code` are read back.

    >>> try:
    ...     raise sf.errors.NotFoundError(None, None, "no such checkpoint")
    ... except sf.errors.OpError as error:
    ...     print(error.message, error.error_code == sf.errors.NOT_FOUND)
    no such checkpoint True
    """

    error_code = UNKNOWN

    def __init__(self, *args: Any) -> None:
        if len(args) >= 3:  # TensorFlow's (node_def, op, message[, error_code])
            node_def, op, message = args[:3]
            if len(args) > 3 and type(self) is OpError:
                self.error_code = args[3]
        else:
            node_def, op, message = None, None, args[0] if args else ""
        super().__init__(message)
        self.node_def, self.op, self.message = node_def, op, message

    def __str__(self) -> str:
        return str(self.message)


class CancelledError(OpError):
    """An operation or step was cancelled (TensorFlow's ``tf.errors.CancelledError``).

    >>> issubclass(sf.errors.CancelledError, sf.errors.OpError)
    True
    """

    error_code = CANCELLED


class UnknownError(OpError):
    """An error of no other kind (TensorFlow's ``tf.errors.UnknownError``).

    >>> str(sf.errors.UnknownError("something failed"))
    'something failed'
    """

    error_code = UNKNOWN


class DeadlineExceededError(OpError):
    """A deadline passed before the operation finished (``tf.errors.DeadlineExceededError``).

    >>> sf.errors.DeadlineExceededError.error_code == sf.errors.DEADLINE_EXCEEDED
    True
    """

    error_code = DEADLINE_EXCEEDED


class NotFoundError(OpError):
    """A requested entity, such as a file, was not found (``tf.errors.NotFoundError``).

    >>> issubclass(sf.errors.NotFoundError, sf.errors.OpError)
    True
    """

    error_code = NOT_FOUND


class AlreadyExistsError(OpError):
    """An entity to be created exists already (``tf.errors.AlreadyExistsError``).

    >>> issubclass(sf.errors.AlreadyExistsError, sf.errors.OpError)
    True
    """

    error_code = ALREADY_EXISTS


class PermissionDeniedError(OpError):
    """The caller may not run the operation (``tf.errors.PermissionDeniedError``).

    >>> issubclass(sf.errors.PermissionDeniedError, sf.errors.OpError)
    True
    """

    error_code = PERMISSION_DENIED


class UnauthenticatedError(OpError):
    """The request has no valid credentials (``tf.errors.UnauthenticatedError``).

    >>> issubclass(sf.errors.UnauthenticatedError, sf.errors.OpError)
    True
    """

    error_code = UNAUTHENTICATED


class ResourceExhaustedError(OpError):
    """A resource, such as memory, ran out (``tf.errors.ResourceExhaustedError``).

    >>> issubclass(sf.errors.ResourceExhaustedError, sf.errors.OpError)
    True
    """

    error_code = RESOURCE_EXHAUSTED


class FailedPreconditionError(OpError):
    """The system is not in the state the operation needs, e.g. a variable read before it
    was initialised (``tf.errors.FailedPreconditionError``).

    >>> issubclass(sf.errors.FailedPreconditionError, sf.errors.OpError)
    True
    """

    error_code = FAILED_PRECONDITION


class AbortedError(OpError):
    """The operation was aborted, e.g. by a concurrent action (``tf.errors.AbortedError``).

    >>> issubclass(sf.errors.AbortedError, sf.errors.OpError)
    True
    """

    error_code = ABORTED


class UnimplementedError(OpError):
    """The operation is not implemented or not supported (``tf.errors.UnimplementedError``).

    >>> issubclass(sf.errors.UnimplementedError, sf.errors.OpError)
    True
    """

    error_code = UNIMPLEMENTED


class InternalError(OpError):
    """An invariant of the system broke (``tf.errors.InternalError``).

    >>> issubclass(sf.errors.InternalError, sf.errors.OpError)
    True
    """

    error_code = INTERNAL


class UnavailableError(OpError):
    """A service is unavailable for now; retrying may help (``tf.errors.UnavailableError``).

    >>> issubclass(sf.errors.UnavailableError, sf.errors.OpError)
    True
    """

    error_code = UNAVAILABLE


class DataLossError(OpError):
    """Data was lost or corrupted beyond recovery (``tf.errors.DataLossError``).

    >>> issubclass(sf.errors.DataLossError, sf.errors.OpError)
    True
    """

    error_code = DATA_LOSS
