"""`sf.Variable`: mutable state owned by a Python object (the paper, section 4.3).

Eagerly a variable holds a NumPy array that `assign*` replaces. While a function is traced,
the variable is captured by reference: reads and writes become `read_variable` /
`assign_variable` ops on its resource handle, so the graph function mutates the live object.
A variable lives on the device of the scope it is created in: reads give tensors there, and
values assigned from other devices are copied to it.

`variable_creator_scope` lets a distribution strategy (or any caller) decide what
``sf.Variable(...)`` makes inside a block, as TensorFlow's creator scopes do: a
`MirroredStrategy` makes one copy per replica there.
"""

from __future__ import annotations

import enum
import inspect
import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from stageflow.core import context, devices, dtypes, precision
from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location
from stageflow.core.tensor_shape import TensorShape
from stageflow.frontend import tape
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.elementwise import cast
from stageflow.frontend.tensor import Tensor, array_for_numpy

_unique = itertools.count()


class VariableAggregation(enum.Enum):
    """How a variable mirrored over the replicas of a distribution strategy combines what
    the replicas write to it inside a step (TensorFlow's ``tf.VariableAggregation``):
    ``NONE`` each replica writes its own copy (the writes are the same on every replica,
    as an optimizer's after its all-reduce), ``SUM`` and ``MEAN`` every copy takes the sum
    or mean of the replicas' values (a batch norm's moving statistics take the mean).

    >>> sf.Variable(0.0, aggregation=sf.VariableAggregation.MEAN).aggregation
    <VariableAggregation.MEAN: 'mean'>
    """

    NONE = "none"
    SUM = "sum"
    MEAN = "mean"


class _Creators(threading.local):
    def __init__(self) -> None:
        self.stack: list[Callable[..., Any]] = []


_creators = _Creators()
context.inherit_list_in_threads(_creators, "stack")


@contextmanager
def variable_creator_scope(creator: Callable[..., Any]) -> Iterator[None]:
    """Inside the block, ``sf.Variable(...)`` returns ``creator(next_creator, **kwargs)``,
    where `kwargs` are the constructor's arguments by name (`initial_value`, `trainable`,
    `name`, `dtype`) and `next_creator(**kwargs)` makes the variable the enclosing scopes
    would (TensorFlow's ``tf.variable_creator_scope``).

    >>> def frozen(next_creator, **kwargs):
    ...     kwargs["trainable"] = False
    ...     return next_creator(**kwargs)
    >>> with sf.variable_creator_scope(frozen):
    ...     v = sf.Variable(1.0)
    >>> v.trainable
    False
    """
    _creators.stack.append(creator)
    try:
        yield
    finally:
        _creators.stack.pop()


class _CreatedThroughScopes(type):
    """Sends ``sf.Variable(...)`` through the creator scopes of this thread, if any."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        creators = _creators.stack
        if cls is not Variable or not creators:
            return super().__call__(*args, **kwargs)
        arguments = _SIGNATURE.bind(None, *args, **kwargs).arguments
        del arguments["self"]

        def creator_at(level: int) -> Callable[..., Any]:
            if level < 0:
                return lambda **named: type.__call__(cls, **named)
            return lambda **named: creators[level](creator_at(level - 1), **named)

        return creator_at(len(creators) - 1)(**arguments)


class Variable(metaclass=_CreatedThroughScopes):
    """A named, typed, mutable tensor; usable wherever a tensor is.

    >>> v = sf.Variable([1.0, 2.0], name="v")
    >>> v
    sf.Variable([1., 2.], name='v', shape=(2,), dtype=float32)
    >>> _ = v.assign_add([1.0, 1.0])
    >>> v * 2.0
    sf.Tensor([4., 6.], shape=(2,), dtype=float32)
    """

    __hash__ = object.__hash__  # variables are objects with identity (unlike tensors)
    __array_priority__ = 100  # NumPy defers `ndarray * variable` to the variable's operators

    def __init__(
        self,
        initial_value: Any,
        trainable: bool = True,
        name: str | None = None,
        dtype: Any = None,
        aggregation: VariableAggregation | str | None = None,
    ) -> None:

        trace = context.current_trace()
        trace.variable_created(self)
        # State is created eagerly, even inside a trace (the paper's state-creation rule).
        with context.init_scope():
            if callable(initial_value):
                initial_value = initial_value()
            value = convert_to_tensor(trace.lift(initial_value), dtype)._value
        self._value = value
        self._device = devices.current() or devices.HOST
        # Held by a compiled call assigning the variable (its machine code runs without the
        # GIL); reentrant, as such a call may fall back to steps calling other programs.
        self._lock = threading.RLock()
        self.trainable = bool(trainable)
        self.aggregation = VariableAggregation(
            "none" if aggregation is None else getattr(aggregation, "value", aggregation))
        self.name = name if name is not None else f"Variable:{next(_unique)}"
        # Where the value lives when a device of another process keeps it (`fetch`).
        self._fetch: Any = None
        if self._device != devices.HOST:
            devices.variable_placed(self)

    @property
    def dtype(self) -> np.dtype:
        return self._value.dtype

    @property
    def shape(self) -> TensorShape:
        return TensorShape(self._value.shape)

    @property
    def ndim(self) -> int:
        return self._value.ndim

    @property
    def device(self) -> str:
        return self._device

    def read_value(self) -> Tensor:
        """The current value (a read op on the handle while tracing); active tapes watch
        it when the variable is trainable or watched."""
        value = context.current_trace().read_variable(self)
        if context.state.tape_count:
            tape.variable_read(self, value)
        return value

    value = read_value

    def _as_tensor(self) -> Tensor:
        """The value as an op's operand: inside the call of a layer whose precision policy
        computes in another floating dtype (``mixed_bfloat16``), a floating variable reads
        as a cast to that dtype, whose gradient reaches the variable in its own dtype
        (Keras' autocast variables). `read_value` always gives the stored dtype: layers
        that compute in float32 (batch norm) and optimizers read with it."""
        value = self.read_value()
        target = precision.autocast_dtype()
        if target is None or value.dtype == target or not dtypes.is_floating(value.dtype):
            return value
        return cast(value, target)

    def _current(self) -> np.ndarray:
        """The value now: this process's, or fetched from the device that keeps it."""
        return self._value if self._fetch is None else self._fetch()

    def numpy(self) -> np.ndarray:
        return np.array(self._current())

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return array_for_numpy(self._current(), dtype, copy)

    def assign(self, value: Any) -> Variable:
        """Replace the value (same dtype and shape)."""
        tensor = convert_to_tensor(value, self.dtype)
        with self._lock:  # never between a compiled call's read and its write
            context.current_trace().assign_variable(self, tensor)
        return self

    def assign_add(self, delta: Any) -> Variable:
        return self._update(lambda value: value + delta)

    def assign_sub(self, delta: Any) -> Variable:
        return self._update(lambda value: value - delta)

    def _update(self, change: Callable[[Tensor], Any]) -> Variable:
        """``assign(change(value))`` losing no update made meanwhile by another thread (a
        compiled call replaces the value under the lock, without the GIL): the new value is
        written only if the value is still the one it was computed from, else computed
        again. The lock is not held while computing, as the change may wait for a logical
        device whose queued call waits for the lock."""
        while True:
            seen = self._value
            # Converted before taking the lock, and written under it once (not through
            # `assign`, which would convert again and take the lock a second time).
            value = convert_to_tensor(change(self.read_value()), self.dtype)
            with self._lock:
                if self._value is seen:
                    context.current_trace().assign_variable(self, value)
                    return self

    def _store(self, array: Any) -> None:
        """Write a new value after checking dtype and shape (eager and interpreted writes)."""
        array = np.asarray(array)
        self.check_value(array)
        self._value = array

    def check_value(self, value: Any) -> None:
        """Raise ValueError unless `value` (an array, of the host or a device) has the
        variable's dtype and shape."""
        if value.dtype != self.dtype or tuple(value.shape) != self.shape:
            raise ValueError(
                f"assign: variable {self.name!r} is {self.dtype.name}{format_shape(self.shape)}"
                f", the value is {value.dtype.name}{format_shape(tuple(value.shape))}"
                f"{describe_location()}"
            )

    def __float__(self) -> float:
        return float(self.read_value())

    def __int__(self) -> int:
        return int(self.read_value())

    def __bool__(self) -> bool:
        return bool(self.read_value())

    def __len__(self) -> int:
        return len(self._value)

    def __repr__(self) -> str:
        body = np.array2string(np.asarray(self._current()), separator=", ",
                               prefix="sf.Variable(")
        return (f"sf.Variable({body}, name={self.name!r}, shape={self.shape}, "
                f"dtype={self.dtype.name})")



_SIGNATURE = inspect.signature(Variable.__init__)
