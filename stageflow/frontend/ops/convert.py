"""Turning user arguments into tensors: `convert_to_tensor`, `constant`, weak scalars.

Python scalars are "weakly typed": in `x * 2.0` the 2.0 takes x's dtype, as in JAX and
NumPy 2, and so do lists of Python numbers beside a tensor (``x + [1, 2]``), as TensorFlow
converts them with the tensor's dtype; one rule for every op with several operands of one
dtype (`binary_operands`, `matching_tensors`). Anything else with a different dtype is an
error, never a silent promotion.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from stageflow.core import context, dtypes, nest
from stageflow.core.source import describe_location
from stageflow.frontend.tensor import Tensor, to_array

_PYTHON_SCALARS = (bool, int, float, complex)


def is_tensor(x: Any) -> bool:
    """True for eager and symbolic tensors (and anything that converts like one).

    >>> sf.is_tensor(sf.constant(1.0)), sf.is_tensor(1.0)
    (True, False)
    """
    return isinstance(x, Tensor) or hasattr(x, "_as_tensor")


def convert_to_tensor(value: Any, dtype: Any = None) -> Tensor:
    """A tensor for `value`; tensors pass through (a different `dtype` is a ``TypeError``).

    >>> sf.convert_to_tensor([1.0, 2.0])
    sf.Tensor([1., 2.], shape=(2,), dtype=float32)
    >>> sf.convert_to_tensor(np.arange(3))
    sf.Tensor([0, 1, 2], shape=(3,), dtype=int64)
    """
    if isinstance(value, Tensor):
        if dtype is not None and value.dtype != dtypes.as_dtype(dtype):
            raise TypeError(
                f"expected a {dtypes.dtype_name(dtypes.as_dtype(dtype))} tensor, got "
                f"{dtypes.dtype_name(value.dtype)}"
                f"{describe_location()}"
            )
        return value
    as_tensor = getattr(value, "_as_tensor", None)
    if as_tensor is not None:
        return convert_to_tensor(as_tensor(), dtype)
    try:
        array = to_array(value, dtype)
    except (TypeError, ValueError) as error:  # an op's operand: say which line passed it
        if nest.is_composite(value):  # a ragged or sparse tensor, a TensorArray
            dense = getattr(value, "_dense_hint", "")
            raise TypeError(f"this op takes tensors, not an sf.{type(value).__name__}"
                            f"{f' ({dense} gives a dense tensor)' if dense else ''}"
                            f"{describe_location()}") from None
        raise type(error)(f"{error}{describe_location()}") from None
    return context.current_trace().constant(array)


def constant(value: Any, dtype: Any = None, shape: Any = None, name: str | None = None
             ) -> Tensor:
    """A tensor from Python or NumPy data; `shape` fills a scalar or reshapes same-size data.

    value: a Python number, nested list or NumPy array; Python floats become float32, ints
    int32, complex numbers complex64 (TensorFlow makes complex128: ask with `dtype`),
    unless `dtype` says otherwise. `name` is taken for TensorFlow's signature; tensors have
    no names (as TensorFlow's eager ones).

    >>> sf.constant([1.0, 2.0])
    sf.Tensor([1., 2.], shape=(2,), dtype=float32)
    >>> sf.constant(3)
    sf.Tensor(3, shape=(), dtype=int32)
    >>> sf.constant(0.0, shape=[2, 2])
    sf.Tensor([[0., 0.],
               [0., 0.]], shape=(2, 2), dtype=float32)
    >>> sf.constant([1, 2], dtype=sf.float64)
    sf.Tensor([1., 2.], shape=(2,), dtype=float64)
    >>> sf.constant([1 + 2j, 3])
    sf.Tensor([1.+2.j, 3.+0.j], shape=(2,), dtype=complex64)
    """
    del name
    array = to_array(value, dtype)
    if shape is not None:
        shape = tuple(int(d) for d in shape)
        if array.size == 1:
            array = np.full(shape, array.reshape(()), dtype=array.dtype)
        elif array.size != int(np.prod(shape)):
            raise ValueError(
                f"constant: cannot reshape {array.size} values into shape {shape}"
                f"{describe_location()}"
            )
        array = array.reshape(shape)
    return context.current_trace().constant(array)


def weak_operand(value: Any, like: Any) -> Tensor:
    """Convert `value` for an op whose other operand is `like`.

    Python scalars take `like`'s dtype when that is lossless in kind (a float scalar with an
    integer tensor is a ``TypeError``, as in TensorFlow, and so is a complex scalar with a
    real tensor).
    """
    if isinstance(value, list | tuple) and is_tensor(like):
        return _weak_nest(value, convert_to_tensor(like))
    if isinstance(value, _PYTHON_SCALARS) and is_tensor(like):
        target = convert_to_tensor(like).dtype
        if isinstance(value, complex) and not dtypes.is_complex(target):
            raise TypeError(
                f"cannot combine the Python complex {value!r} with a {target.name} tensor; "
                f"use sf.cast or sf.complex{describe_location()}"
            )
        if isinstance(value, float) and not dtypes.is_inexact(target):
            raise TypeError(
                f"cannot combine the Python float {value!r} with a {target.name} tensor; "
                f"use sf.cast{describe_location()}"
            )
        if isinstance(value, int) and not isinstance(value, bool) and target == dtypes.bool_:
            raise TypeError(
                f"cannot combine the Python int {value!r} with a bool tensor"
                f"{describe_location()}"
            )
        # Made where `like` is, so that `placed_tensor + 1.0` copies nothing.
        device = like.device if type(like) is not Tensor else None
        return context.current_trace().constant(_weak_array(value, target), device)
    return convert_to_tensor(value)


def _weak_nest(value: list | tuple, like: Tensor) -> Tensor:
    """A list of Python numbers beside a tensor takes its dtype, as each number would (as
    TensorFlow converts it, with the tensor's dtype as the hint): ``v.assign_add([1, 1])``
    on a float variable. A list holding anything else converts as it is."""
    leaves = list(_python_leaves(value))
    if not all(isinstance(leaf, _PYTHON_SCALARS) for leaf in leaves):
        return convert_to_tensor(value)
    target = like.dtype
    for kind, allowed in ((complex, dtypes.is_complex(target)),
                          (float, dtypes.is_inexact(target)), (int, target != dtypes.bool_)):
        found = next((leaf for leaf in leaves if type(leaf) is kind), None)
        if found is not None and not allowed:
            raise TypeError(f"cannot combine a list holding the Python {kind.__name__} "
                            f"{found!r} with a {target.name} tensor; use sf.cast"
                            f"{describe_location()}")
    return convert_to_tensor(value, target)


def _python_leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, list | tuple):
        for item in value:
            yield from _python_leaves(item)
    else:
        yield value


def _weak_array(value: Any, target: np.dtype) -> np.ndarray:
    """`to_array(value, target)` for a weak scalar already checked against `target`. An int
    or float of a floating or complex `target` is `np.array(value, target)`, all that
    `to_array`'s checks would come to, at a fraction of their cost (the relu gradient's
    ``out > 0`` makes one each, under a tape); where NumPy refuses it (an int past the
    float range), `to_array` converts it, to raise its own message."""
    if type(value) in (int, float) and target in dtypes.INEXACT:
        try:
            return np.array(value, target)
        except (OverflowError, TypeError, ValueError):
            pass
    return to_array(value, target)


def binary_operands(x: Any, y: Any) -> tuple[Tensor, Tensor]:
    """Both operands of a binary op as tensors, Python data weakly typed (`matching_tensors`
    of two, without its list)."""
    if is_tensor(x):
        return convert_to_tensor(x), weak_operand(y, x)
    if is_tensor(y):
        return weak_operand(x, y), convert_to_tensor(y)
    first = convert_to_tensor(x)  # then `y` as beside a tensor (TensorFlow's order)
    return first, weak_operand(y, first)


def matching_tensors(values: Sequence[Any]) -> list[Tensor]:
    """The operands of an op that takes several of one dtype (`concat`, `stack`, `einsum`,
    `bias_add`; ops of two use `binary_operands`, `conv2d` its filters `weak_operand`) as
    tensors: Python numbers and lists of them take the dtype of the first tensor among
    `values`, or, where there is none, of the first value, as TensorFlow converts such
    operands (``sf.concat([x_float32, [1, 2]], 0)`` is float32). Tensors keep theirs."""
    like = next((v for v in values if is_tensor(v)), None)
    if like is None:
        if not values:
            return []
        like = convert_to_tensor(values[0])
    return [convert_to_tensor(v) if is_tensor(v) else weak_operand(v, like) for v in values]
