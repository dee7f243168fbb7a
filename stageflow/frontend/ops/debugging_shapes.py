"""`sf.debugging`'s checks of shapes, ranks and kinds of values (TensorFlow's
``tf.debugging``): `assert_shapes`, `assert_scalar`, `assert_rank_at_least`,
`assert_integer`, `is_numeric_tensor`, `assert_proper_iterable`, and
`set_log_device_placement`.

What tracing knows (ranks, dtypes, dims known when traced) is checked when the call is
made, raising ValueError or TypeError as TensorFlow's static checks do; `assert_shapes`
checks dims unknown when traced each time the staged function runs, raising
`sf.errors.InvalidArgumentError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.debugging import _check
from stageflow.frontend.tensor import Tensor

__all__ = ["assert_integer", "assert_proper_iterable", "assert_rank_at_least",
           "assert_scalar", "assert_shapes", "is_numeric_tensor", "set_log_device_placement"]


def _prefix(message: str | None) -> str:
    return f"{message}: " if message else ""


def assert_integer(x: Any, message: str | None = None, name: str | None = None) -> None:
    """Raise TypeError unless `x` has an integer dtype.

    >>> sf.debugging.assert_integer(sf.constant([1, 2]))
    """
    del name
    x = convert_to_tensor(x)
    if not dtypes.is_integer(x.dtype):
        raise TypeError(f"assert_integer: {_prefix(message)}expected an integer tensor, got "
                        f"{x.dtype.name}{describe_location()}")


def assert_scalar(tensor: Any, message: str | None = None, name: str | None = None) -> Tensor:
    """`tensor`, or ValueError unless it is a scalar (rank 0).

    >>> sf.debugging.assert_scalar(sf.constant(3.0))
    sf.Tensor(3., shape=(), dtype=float32)
    """
    del name
    tensor = convert_to_tensor(tensor)
    if tensor.ndim != 0:
        raise ValueError(f"assert_scalar: {_prefix(message)}expected a scalar, got shape "
                         f"{tuple(tensor.shape)}{describe_location()}")
    return tensor


def assert_rank_at_least(x: Any, rank: int, message: str | None = None,
                         name: str | None = None) -> None:
    """Raise ValueError unless `x` has at least `rank` dims.

    >>> sf.debugging.assert_rank_at_least(sf.zeros((2, 3)), 1)
    """
    del name
    x = convert_to_tensor(x)
    if x.ndim < int(rank):
        raise ValueError(f"assert_rank_at_least: {_prefix(message)}the tensor has rank "
                         f"{x.ndim}, not at least {rank}{describe_location()}")


def is_numeric_tensor(tensor: Any) -> bool:
    """Whether `tensor` is an `sf.Tensor` of numbers (integers, floats or complex; not
    bool or string).

    >>> sf.debugging.is_numeric_tensor(sf.constant([1.0])), sf.debugging.is_numeric_tensor(1.0)
    (True, False)
    """
    return isinstance(tensor, Tensor) and (dtypes.is_integer(tensor.dtype) or dtypes.is_inexact(
        tensor.dtype))


def assert_proper_iterable(values: Any) -> None:
    """Raise TypeError unless `values` is an iterable that is not a tensor, array or
    string (a list or tuple of tensors, say).

    >>> sf.debugging.assert_proper_iterable([sf.constant(1), sf.constant(2)])
    """
    if isinstance(values, Tensor | np.ndarray | str | bytes) or not isinstance(values,
                                                                                 Iterable):
        raise TypeError(f"assert_proper_iterable: expected a non-string, non-tensor "
                        f"iterable, got {type(values).__name__}{describe_location()}")


def set_log_device_placement(enabled: bool) -> None:
    """Accepted for TensorFlow's programs and does nothing else: stageflow places every
    op of a call on the one device that runs it (the host, or the accelerator a compiled
    function targets), so there is no per-op placement to log.

    >>> sf.debugging.set_log_device_placement(True)
    """
    del enabled


def _is_any(symbol: Any) -> bool:
    return symbol is None or (isinstance(symbol, str) and symbol == ".")


def _parse(spec: Any) -> tuple[bool, tuple]:
    symbols = tuple(spec)
    for index, symbol in enumerate(symbols):
        if symbol is Ellipsis or (isinstance(symbol, str) and symbol == "*"):
            if index != 0:
                raise ValueError(f"assert_shapes: `...` or `*` is only allowed as the first "
                                 f"entry of a shape, got {spec!r}{describe_location()}")
    if symbols and (symbols[0] is Ellipsis or symbols[0] == "*"):
        return True, symbols[1:]
    return False, symbols


def _verify(shapes: Sequence[tuple], specs: Sequence[tuple[bool, tuple]]) -> str | None:
    """Why `shapes` (None: a dim not known yet) break `specs`, or None."""
    bound: dict[Any, tuple[int, int]] = {}
    for which, (shape, (open_start, symbols)) in enumerate(zip(shapes, specs, strict=True)):
        sizes = shape if shape else (1,)
        rank = len(symbols)
        if open_start and len(sizes) < rank:
            return f"tensor {which} has rank {len(shape)}, not at least {rank}"
        if not open_start and rank in (0, 1):
            if len(shape) > 1:
                return f"tensor {which} has rank {len(shape)}, not 0 or 1"
        elif not open_start and len(shape) != rank:
            return f"tensor {which} has rank {len(shape)}, not {rank}"
        for index, symbol in enumerate(symbols):
            if _is_any(symbol):
                continue
            size = sizes[index - rank if open_start else index]
            if size is None:
                continue
            if isinstance(symbol, int | np.integer):
                if size != int(symbol):
                    return f"tensor {which} has size {size} in dim {index}, not {int(symbol)}"
            elif symbol in bound and bound[symbol][0] != size:
                return (f"tensor {which} has size {size} in dim {index} for {symbol!r}, which "
                        f"tensor {bound[symbol][1]} sets to {bound[symbol][0]}")
            else:
                bound.setdefault(symbol, (size, which))
    return None


def assert_shapes(shapes: Any, data: Any = None, summarize: int | None = None,
                  message: str | None = None, name: str | None = None) -> None:
    """Check that tensors have the shapes `shapes` names: pairs ``(tensor, shape)`` (or a
    dict), each shape a sequence of sizes (ints), symbols (strings: the same symbol, the
    same size in every tensor) and ``None`` or ``"."`` (any size), optionally starting
    with ``...`` or ``"*"`` (any leading dims). A scalar counts as shape ``(1,)``.
    Sizes known when traced are checked then (ValueError); others each time the staged
    function runs (`sf.errors.InvalidArgumentError`).

    >>> x, y = sf.zeros((2, 3)), sf.zeros((3,))
    >>> sf.debugging.assert_shapes([(x, ("N", "Q")), (y, ("Q",))])
    >>> sf.debugging.assert_shapes([(x, ("N", "Q")), (y, ("N",))])
    Traceback (most recent call last):
    ...
    ValueError: assert_shapes: tensor 1 has size 3 in dim 0 for 'N', which tensor 0 sets to 2...
    """
    del data, summarize, name
    pairs = list(shapes.items() if isinstance(shapes, dict) else shapes)
    tensors, specs = [], []
    for tensor, spec in pairs:
        if spec is None:
            continue
        if not isinstance(spec, Iterable):
            raise ValueError(f"assert_shapes: {_prefix(message)}a shape must be an iterable, "
                             f"got {spec!r}{describe_location()}")
        tensors.append(convert_to_tensor(tensor))
        specs.append(_parse(spec))
    static = [tuple(t.shape) for t in tensors]
    failure = _verify(static, specs)
    if failure is not None:
        raise ValueError(f"assert_shapes: {_prefix(message)}{failure}{describe_location()}")
    if any(d is None for shape in static for d in shape):
        _check("assert_shapes",
               lambda *values: _verify([np.shape(v) for v in values], specs) is None,
               tensors,
               lambda *values: str(_verify([np.shape(v) for v in values], specs)), message)
