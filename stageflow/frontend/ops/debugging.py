"""`sf.debugging`: checks of tensor values (TensorFlow's ``tf.debugging``).

Each check is a `numpy_function` without results: it runs at once eagerly and, in a staged
function, each time the function runs (compiled code calls it back), raising
`sf.errors.InvalidArgumentError` naming the check, the values and the user's line. Checks
of what tracing already knows (ranks, dtypes) are made when the call is traced, as
TensorFlow makes them, and raise ValueError or TypeError there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.core import context, dtypes
from stageflow.core.errors import InvalidArgumentError
from stageflow.core.source import describe_location
from stageflow.frontend.ops.control import numpy_function
from stageflow.frontend.ops.convert import binary_operands, convert_to_tensor
from stageflow.frontend.ops.shape import identity
from stageflow.frontend.tensor import Tensor

__all__ = ["Assert", "assert_all_finite", "assert_equal", "assert_greater",
           "assert_greater_equal", "assert_less", "assert_less_equal", "assert_near",
           "assert_negative", "assert_non_negative", "assert_non_positive", "assert_none_equal",
           "assert_positive", "assert_rank", "assert_type", "check_numerics",
           "disable_check_numerics", "enable_check_numerics"]


def _check(name: str, holds: Callable[..., bool], tensors: list[Tensor],
           failure: Callable[..., str], message: str | None) -> None:
    """Run `holds` on the tensors' values (now, or when the graph runs); raise naming
    `name`, `failure`'s words on the values, the user's message and line if it fails."""
    where = describe_location()
    prefix = f"{message}: " if message else ""

    def check(*values: np.ndarray) -> list:
        if not holds(*values):
            raise InvalidArgumentError(f"{name}: {prefix}{failure(*values)}{where}")
        return []

    numpy_function(check, tensors, [])


def _shown(value: np.ndarray) -> str:
    return np.array2string(np.asarray(value), threshold=16, edgeitems=3)


def _compare(name: str, relation: Callable[[Any, Any], Any], symbol: str, x: Any, y: Any,
             message: str | None) -> None:
    a, b = binary_operands(x, y)
    if a.dtype != b.dtype:
        raise TypeError(f"{name}: x is {a.dtype.name}, y is {b.dtype.name}; use sf.cast"
                        f"{describe_location()}")
    _check(name, lambda u, v: bool(np.all(relation(u, v))), [a, b],
           lambda u, v: (f"condition x {symbol} y did not hold element-wise: x = {_shown(u)}, "
                         f"y = {_shown(v)}"), message)


def assert_equal(x: Any, y: Any, message: str | None = None, summarize: int | None = None,
                 name: str | None = None) -> None:
    """Raise `sf.errors.InvalidArgumentError` unless ``x == y`` everywhere (broadcast).

    >>> sf.debugging.assert_equal(sf.constant([1, 2]), [1, 2])
    >>> sf.debugging.assert_equal(sf.constant([1, 2]), [1, 3])
    Traceback (most recent call last):
    ...
    stageflow.core.errors.InvalidArgumentError: assert_equal: condition x == y did not ...
    """
    del summarize, name
    _compare("assert_equal", np.equal, "==", x, y, message)


def assert_none_equal(x: Any, y: Any, message: str | None = None,
                      summarize: int | None = None, name: str | None = None) -> None:
    """Raise unless ``x != y`` everywhere.

    >>> sf.debugging.assert_none_equal(sf.constant([1, 2]), [3, 4])
    """
    del summarize, name
    _compare("assert_none_equal", np.not_equal, "!=", x, y, message)


def assert_less(x: Any, y: Any, message: str | None = None, summarize: int | None = None,
                name: str | None = None) -> None:
    """Raise unless ``x < y`` everywhere.

    >>> sf.debugging.assert_less(sf.constant([1.0, 2.0]), 3.0)
    """
    del summarize, name
    _compare("assert_less", np.less, "<", x, y, message)


def assert_less_equal(x: Any, y: Any, message: str | None = None,
                      summarize: int | None = None, name: str | None = None) -> None:
    """Raise unless ``x <= y`` everywhere.

    >>> sf.debugging.assert_less_equal(sf.constant([1.0, 3.0]), 3.0)
    """
    del summarize, name
    _compare("assert_less_equal", np.less_equal, "<=", x, y, message)


def assert_greater(x: Any, y: Any, message: str | None = None, summarize: int | None = None,
                   name: str | None = None) -> None:
    """Raise unless ``x > y`` everywhere.

    >>> sf.debugging.assert_greater(sf.constant([1.0, 2.0]), 0.0)
    """
    del summarize, name
    _compare("assert_greater", np.greater, ">", x, y, message)


def assert_greater_equal(x: Any, y: Any, message: str | None = None,
                         summarize: int | None = None, name: str | None = None) -> None:
    """Raise unless ``x >= y`` everywhere.

    >>> sf.debugging.assert_greater_equal(sf.constant([0.0, 2.0]), 0.0)
    """
    del summarize, name
    _compare("assert_greater_equal", np.greater_equal, ">=", x, y, message)


def _sign(name: str, relation: Callable[[Any, Any], Any], symbol: str, x: Any,
          message: str | None) -> None:
    x = convert_to_tensor(x)
    _check(name, lambda u: bool(np.all(relation(u, 0))), [x],
           lambda u: f"condition x {symbol} 0 did not hold element-wise: x = {_shown(u)}",
           message)


def assert_positive(x: Any, message: str | None = None, summarize: int | None = None,
                    name: str | None = None) -> None:
    """Raise unless ``x > 0`` everywhere.

    >>> sf.debugging.assert_positive(sf.constant([1.0, 2.0]))
    """
    del summarize, name
    _sign("assert_positive", np.greater, ">", x, message)


def assert_negative(x: Any, message: str | None = None, summarize: int | None = None,
                    name: str | None = None) -> None:
    """Raise unless ``x < 0`` everywhere.

    >>> sf.debugging.assert_negative(sf.constant([-1.0]))
    """
    del summarize, name
    _sign("assert_negative", np.less, "<", x, message)


def assert_non_negative(x: Any, message: str | None = None, summarize: int | None = None,
                        name: str | None = None) -> None:
    """Raise unless ``x >= 0`` everywhere.

    >>> sf.debugging.assert_non_negative(sf.constant([0.0, 1.0]))
    """
    del summarize, name
    _sign("assert_non_negative", np.greater_equal, ">=", x, message)


def assert_non_positive(x: Any, message: str | None = None, summarize: int | None = None,
                        name: str | None = None) -> None:
    """Raise unless ``x <= 0`` everywhere.

    >>> sf.debugging.assert_non_positive(sf.constant([0.0, -1.0]))
    """
    del summarize, name
    _sign("assert_non_positive", np.less_equal, "<=", x, message)


def assert_near(x: Any, y: Any, rtol: float | None = None, atol: float | None = None,
                message: str | None = None, summarize: int | None = None,
                name: str | None = None) -> None:
    """Raise unless ``|x - y| <= atol + rtol * |y|`` everywhere; by default `rtol` and
    `atol` are 10 times the dtype's epsilon (TensorFlow's defaults).

    >>> sf.debugging.assert_near(sf.constant([1.0, 2.0]), [1.0, 2.0000001])
    """
    del summarize, name
    a, b = binary_operands(x, y)
    eps = float(np.finfo(a.dtype).eps) if dtypes.is_inexact(a.dtype) else 0.0
    rtol = 10 * eps if rtol is None else float(rtol)
    atol = 10 * eps if atol is None else float(atol)
    _check("assert_near", lambda u, v: bool(np.all(np.abs(u - v) <= atol + rtol * np.abs(v))),
           [a, b], lambda u, v: (f"x and y not equal to tolerance rtol = {rtol}, atol = {atol}: "
                                 f"x = {_shown(u)}, y = {_shown(v)}"), message)


def assert_all_finite(t: Any, message: str) -> Tensor:
    """`t` itself, after raising if it holds an infinity or a NaN (TensorFlow's
    ``assert_all_finite``, which is `check_numerics`).

    >>> sf.debugging.assert_all_finite(sf.constant([1.0]), "weights")
    sf.Tensor([1.], shape=(1,), dtype=float32)
    """
    return check_numerics(t, message)


def check_numerics(tensor: Any, message: str, name: str | None = None) -> Tensor:
    """`tensor` itself, after raising if it holds an infinity or a NaN.

    >>> sf.debugging.check_numerics(sf.constant([1.0, 2.0]), "activations")
    sf.Tensor([1., 2.], shape=(2,), dtype=float32)
    """
    del name
    tensor = convert_to_tensor(tensor)
    if not dtypes.is_inexact(tensor.dtype):
        raise TypeError(f"check_numerics: needs a float or complex tensor, got "
                        f"{tensor.dtype.name}{describe_location()}")

    def finding(value: np.ndarray) -> str:
        kinds = [kind for kind, test in (("NaN", np.isnan), ("Inf", np.isinf))
                 if np.any(test(value))]
        return f"{message}: Tensor had {' and '.join(kinds)} values"

    _check("check_numerics", lambda u: bool(np.all(np.isfinite(u))), [tensor],
           finding, None)
    return identity(tensor)


def enable_check_numerics(stack_height_limit: int = 30,
                          path_length_limit: int = 50) -> None:
    """From now on, the first op whose output holds a NaN or an infinity raises
    `sf.errors.InvalidArgumentError` naming the op, the output's shape and dtype, and the
    user's line that made it: eager ops at once, and ops of `sf.function`s traced from now
    on each time the function runs (a check follows each floating op of the program, so
    compiled code calls back into Python once per op: a debugging mode, slow). TensorFlow's
    function; its two limits, on the stack trace it prints, are accepted and unused.

    >>> sf.debugging.enable_check_numerics()
    >>> try:
    ...     sf.math.log(sf.constant([1.0, -1.0]))
    ... except sf.errors.InvalidArgumentError as error:
    ...     print(str(error).splitlines()[0])
    check_numerics: the op 'log' made NaN in its output 0 (shape (2,), float32)
    >>> sf.debugging.disable_check_numerics()
    """
    del stack_height_limit, path_length_limit
    context.set_op_observer(_check_outputs)


def disable_check_numerics() -> None:
    """Stop checking ops' outputs (functions traced while checking keep their checks).

    >>> sf.debugging.enable_check_numerics()
    >>> sf.debugging.disable_check_numerics()
    >>> sf.math.sqrt(sf.constant(-1.0)).numpy()      # doctest: +SKIP
    nan
    """
    context.set_op_observer(None)


_checking = threading.local()  # a check's own ops are not checked


def _check_outputs(primitive: Any, result: Any) -> None:
    if getattr(_checking, "active", False):
        return
    outputs = result if isinstance(result, tuple | list) else (result,)
    _checking.active = True
    try:
        for index, output in enumerate(outputs):
            if isinstance(output, Tensor) and dtypes.is_inexact(output.dtype):
                _check("check_numerics", lambda u: bool(np.all(np.isfinite(u))), [output],
                       _finding(primitive.name, index, output), None)
    finally:
        _checking.active = False


def _finding(op: str, index: int, output: Tensor) -> Callable[[np.ndarray], str]:
    shape = "(" + ", ".join("?" if d is None else str(d) for d in output.shape) + (
        ",)" if len(output.shape) == 1 else ")")

    def describe(value: np.ndarray) -> str:
        kinds = [kind for kind, test in (("NaN", np.isnan), ("Inf", np.isinf))
                 if np.any(test(value))]
        return (f"the op {op!r} made {' and '.join(kinds)} in its output {index} "
                f"(shape {shape}, {output.dtype.name})")
    return describe


def Assert(condition: Any, data: list[Any], summarize: int | None = None,  # noqa: N802
           name: str | None = None) -> None:
    """Raise unless the bool `condition` holds (everywhere), showing `data` (TensorFlow's
    ``tf.debugging.Assert``).

    >>> sf.debugging.Assert(sf.constant(True), ["never shown"])
    """
    del summarize, name
    condition = convert_to_tensor(condition)
    if condition.dtype != dtypes.bool_:
        raise TypeError(f"Assert: the condition must be bool, got {condition.dtype.name}"
                        f"{describe_location()}")
    tensors = [convert_to_tensor(d) for d in data if not isinstance(d, str)]
    pieces = [d if isinstance(d, str) else None for d in data]

    def failure(_: np.ndarray, *values: np.ndarray) -> str:
        shown = iter(values)
        return "assertion failed: " + " ".join(
            piece if piece is not None else _shown(next(shown)) for piece in pieces)

    _check("Assert", lambda u, *_: bool(np.all(u)), [condition, *tensors], failure, None)


def assert_rank(x: Any, rank: int, message: str | None = None, name: str | None = None
                ) -> None:
    """Raise ValueError unless `x` has `rank` dims (known when tracing).

    >>> sf.debugging.assert_rank(sf.zeros((2, 3)), 2)
    """
    del name
    x = convert_to_tensor(x)
    if x.ndim != int(rank):
        prefix = f"{message}: " if message else ""
        raise ValueError(f"assert_rank: {prefix}the tensor has rank {x.ndim}, not {rank}"
                         f"{describe_location()}")


def assert_type(tensor: Any, tf_type: Any, message: str | None = None,
                name: str | None = None) -> None:
    """Raise TypeError unless `tensor` is of dtype `tf_type` (known when tracing).

    >>> sf.debugging.assert_type(sf.constant([1.0]), sf.float32)
    """
    del name
    tensor = convert_to_tensor(tensor)
    want = dtypes.as_dtype(tf_type)
    if tensor.dtype != want:
        prefix = f"{message}: " if message else ""
        raise TypeError(f"assert_type: {prefix}the tensor is {tensor.dtype.name}, not "
                        f"{want.name}{describe_location()}")
