"""TensorFlow's graph-building context managers and decorators, with stageflow's meaning:
`sf.name_scope` (a name prefix, returned as TensorFlow returns it), `sf.control_dependencies`
(staged functions already run their ops in program order, so it only accepts its inputs),
`sf.no_gradient`, `sf.recompute_grad`, `sf.case` and `sf.timestamp`."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from stageflow.core import dtypes
from stageflow.core.errors import InvalidArgumentError
from stageflow.core.source import describe_location
from stageflow.frontend.ops.control import cond, py_function
from stageflow.frontend.ops.static_value import get_static_value
from stageflow.frontend.tensor import Tensor

__all__ = ["case", "control_dependencies", "name_scope", "no_gradient", "recompute_grad",
           "timestamp"]

_state = threading.local()


def _scopes() -> list[str]:
    if not hasattr(_state, "scopes"):
        _state.scopes = []
    return _state.scopes


class name_scope:  # noqa: N801 - TensorFlow's name
    """A context manager naming what is built inside (TensorFlow's ``tf.name_scope``):
    entering returns the scope's full name, the enclosing scopes' names joined by ``/``
    and ending in ``/``; a name ending in ``/`` is taken as a full name.

    >>> with sf.name_scope("block"):
    ...     with sf.name_scope("dense") as scope:
    ...         print(scope)
    block/dense/
    """

    def __init__(self, name: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"name_scope: the name must be a string, got {name!r}"
                            f"{describe_location()}")
        self._name = name
        self._entered: str | None = None

    @property
    def name(self) -> str:
        """The name given."""
        return self._name

    def __enter__(self) -> str:
        scopes = _scopes()
        if not self._name or self._name.endswith("/"):
            full = self._name
        else:
            full = (scopes[-1] if scopes else "") + self._name + "/"
        scopes.append(full)
        self._entered = full
        return full

    def __exit__(self, *exc_info: Any) -> None:
        _scopes().pop()


@contextmanager
def control_dependencies(control_inputs: Sequence[Any] | None) -> Iterator[None]:
    """A context in which ops run after `control_inputs` (TensorFlow's
    ``tf.control_dependencies``). Eagerly every op runs when called, and a staged function
    keeps its ops' program order, so the ops given have run already: this only checks its
    argument and changes nothing.

    >>> v = sf.Variable(1.0)
    >>> with sf.control_dependencies([v.assign_add(1.0)]):
    ...     print(v.numpy())
    2.0
    """
    if control_inputs is not None and not isinstance(control_inputs, (list, tuple, set)):
        if isinstance(control_inputs, Tensor) or callable(control_inputs):
            raise TypeError(f"control_dependencies: expects a list of ops or tensors, got "
                            f"{type(control_inputs).__name__}{describe_location()}")
        control_inputs = list(control_inputs)
    yield None


def no_gradient(op_type: str) -> None:
    """Declare op type `op_type` not differentiable (TensorFlow's ``tf.no_gradient``).
    stageflow's ops declare their own gradients, and an op without one is not
    differentiable already, so this only checks the name.

    >>> sf.no_gradient("MyCustomOp")
    """
    if not isinstance(op_type, str):
        raise TypeError(f"no_gradient: op_type must be a string, got {op_type!r}"
                        f"{describe_location()}")


def recompute_grad(f: Callable[..., Any]) -> Callable[..., Any]:
    """`f` with the same values and gradients, whose activations TensorFlow recomputes in
    the backward pass to save memory (``tf.recompute_grad``); stageflow calls `f` through,
    the compiler deciding what to keep.

    >>> square = sf.recompute_grad(lambda x: x * x)
    >>> square(sf.constant(3.0))
    sf.Tensor(9., shape=(), dtype=float32)
    """
    @functools.wraps(f)
    def recomputed(*args: Any, **kwargs: Any) -> Any:
        return f(*args, **kwargs)
    return recomputed


def case(pred_fn_pairs: Any, default: Callable[[], Any] | None = None,
         exclusive: bool = False, strict: bool = False, name: str = "case") -> Any:
    """The result of the first ``fn`` whose ``pred`` is true, else of `default`
    (TensorFlow's ``tf.case``; without a default, the last pair's ``fn``): nested
    `sf.cond`, so it stages as a conditional. With `exclusive`, more than one true
    predicate is an error when the predicates are known.

    >>> x = sf.constant(5)
    >>> sf.case([(x < 0, lambda: -x), (x > 3, lambda: 2 * x)], default=lambda: x)
    sf.Tensor(10, shape=(), dtype=int32)
    """
    del strict, name
    pairs = list(pred_fn_pairs.items() if isinstance(pred_fn_pairs, dict) else pred_fn_pairs)
    if not pairs:
        raise ValueError(f"case: needs at least one (pred, fn) pair{describe_location()}")
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2 and callable(pair[1])):
            raise TypeError(f"case: each entry must be a (pred, callable) tuple, got {pair!r}"
                            f"{describe_location()}")
    if exclusive:
        _check_exclusive([pred for pred, _ in pairs])
    if default is None:
        pairs, default = pairs[:-1], pairs[-1][1]
    chosen = default
    for pred, fn in reversed(pairs):
        chosen = functools.partial(cond, pred, fn, chosen)
    return chosen()


def _check_exclusive(preds: list[Any]) -> None:
    known = [get_static_value(p) for p in preds]
    if all(k is not None for k in known) and sum(bool(k) for k in known) > 1:
        raise InvalidArgumentError(f"case: more than one predicate is true with "
                                   f"exclusive=True{describe_location()}")


def timestamp() -> Tensor:
    """The time now, in seconds since the Unix epoch, as a float64 scalar (TensorFlow's
    ``tf.timestamp``); in a staged function, the time each call runs it.

    >>> float(sf.timestamp()) > 0
    True
    """
    return py_function(time.time, [], dtypes.float64)
