"""`sf.TensorArray`: a list of same-dtype tensors that loops over tensors can write one
element per iteration (TensorFlow's ``tf.TensorArray``).

It has two representations, one meaning:

- a Python list of tensors (None where nothing was written): eagerly, and in a staged
  function while every index is a Python int. Eagerly `write` stores into the list and
  returns the same array, as TensorFlow's eager arrays do; staged it returns a new one.
- one buffer tensor ``[size, *element_shape]``: when the array is carried through a staged
  `sf.while_loop` or `sf.cond`, or returned from an `sf.function` (it is a composite that
  `nest.flatten(..., expand_composites=True)` expands to that buffer; a returned array is
  a list again), or indexed with a traced index. A write is `update_index` (in
  place in a compiled loop), a read a `gather`, so gradients flow through both and through
  the loop. Unwritten elements read as zeros, as in TensorFlow's staged arrays.

A `dynamic_size` array grows past its end: eagerly the list grows; a buffer grows by
zero rows up to the index written (a copy, so its leading dim is unknown in a loop).
`clear_after_read` is accepted and, as in TensorFlow's staged arrays, has no effect.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from stageflow.core import context, dtypes
from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location, user_location
from stageflow.frontend.ops.control import while_loop
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import zeros, zeros_like
from stageflow.frontend.ops.elementwise import add, cast, less, maximum
from stageflow.frontend.ops.reductions import reduce_max
from stageflow.frontend.ops.shape import (
    concat,
    dynamic_update_index,
    expand_dims,
    gather,
    reshape,
    reshape_to,
    stack,
)
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import GraphTrace, SymbolicTensor
from stageflow.primitives.nd_indexing import scatter_nd_update_p
from stageflow.primitives.structural import dim_size_p

__all__ = ["TensorArray"]

Shape = tuple[int | None, ...]


def _staged() -> bool:
    return isinstance(context.current_trace(), GraphTrace)


def _known(shape: Shape | None) -> bool:
    return shape is not None and None not in shape


def _merged(have: Shape | None, got: Shape) -> Shape | None:
    """The shape both describe (None dims filled from the other), or None if they differ."""
    if have is None:
        return got
    if len(have) != len(got) or any(a is not None and b is not None and a != b
                                    for a, b in zip(have, got, strict=True)):
        return None
    return tuple(a if a is not None else b for a, b in zip(have, got, strict=True))


def _static_size(size: Any) -> int:
    if size is None:  # TensorFlow's default: an array that starts empty
        return 0
    if isinstance(size, SymbolicTensor):
        raise ValueError(f"TensorArray: size must be known when the function is traced (a "
                         f"Python int, or x.shape[0]), got a traced tensor{describe_location()}")
    value = np.asarray(size._value if isinstance(size, Tensor) else size)
    if value.shape != () or value.dtype.kind not in "iu" or int(value) < 0:
        raise ValueError(f"TensorArray: size must be a non-negative integer, got {size!r}"
                         f"{describe_location()}")
    return int(value)


class TensorArray:
    """A list of `size` tensors of `dtype` and one element shape, written and read by index
    eagerly, in staged code and in loops over tensors (TensorFlow's ``tf.TensorArray``).

    `write(i, value)` returns the array to use afterwards (``ta = ta.write(i, x)``); in a
    loop over tensors that line carries the array through the loop.

    >>> ta = sf.TensorArray(sf.float32, size=3)
    >>> for i in range(3):
    ...     ta = ta.write(i, sf.constant([1.0, 2.0]) * i)
    >>> ta.stack()
    sf.Tensor([[0., 0.],
               [1., 2.],
               [2., 4.]], shape=(3, 2), dtype=float32)
    """

    def __init__(self, dtype: Any, size: Any = 0, dynamic_size: bool = False,
                 clear_after_read: bool = True, element_shape: Sequence[int | None] | None = None,
                 infer_shape: bool = True, name: str | None = None) -> None:
        shape = None if element_shape is None else tuple(
            None if d is None else operator.index(d) for d in element_shape)
        self._meta = (dtypes.as_dtype(dtype), bool(dynamic_size), shape, bool(infer_shape),
                      bool(clear_after_read))
        self._items: list[Tensor | None] | None = [None] * _static_size(size)
        self._buffer: Tensor | None = None
        self.name = name
        self._writes, self._write_site = 0, None

    @classmethod
    def _make(cls, meta: tuple, items: list | None = None, buffer: Tensor | None = None
              ) -> TensorArray:
        array = cls.__new__(cls)
        array._meta, array._items, array._buffer, array.name = meta, items, buffer, None
        array._writes, array._write_site = 0, None
        return array

    def _note_write(self) -> None:
        """Count a staged write made from this array, and remember the user's line: a loop
        over tensors that writes an array it does not carry (``ta.write(i, x)`` not assigned
        back) reports that line."""
        if _staged():
            self._writes += 1
            self._write_site = user_location()

    # -- what it is ---------------------------------------------------------------------

    @property
    def dtype(self) -> np.dtype:
        return self._meta[0]

    @property
    def dynamic_size(self) -> bool:
        return self._meta[1]

    @property
    def element_shape(self) -> Shape | None:
        """The elements' shape (None dims unknown), or None before anything fixes it."""
        return self._meta[2]

    def __repr__(self) -> str:
        shape = "unknown" if self.element_shape is None else format_shape(self.element_shape)
        return (f"<sf.TensorArray dtype={self.dtype.name} element_shape={shape} "
                f"dynamic_size={self.dynamic_size}>")

    def _with_shape(self, shape: Shape | None) -> tuple:
        return (self._meta[0], self._meta[1], shape, *self._meta[3:])

    def size(self, name: str | None = None) -> Tensor:
        """The number of elements, an int32 scalar."""
        if self._items is not None:
            return convert_to_tensor(np.int32(len(self._items)))
        known = self._buffer.shape[0]
        if known is not None:
            return convert_to_tensor(np.int32(known))
        return cast(dim_size_p.bind(self._buffer, axis=0), dtypes.int32)

    # -- checks ---------------------------------------------------------------------------

    def _index(self, index: Any, op: str) -> int | Tensor:
        """A Python int, or a traced integer scalar."""
        tensor = index if isinstance(index, Tensor) else None
        if tensor is None:
            try:
                return operator.index(index)
            except TypeError:
                tensor = convert_to_tensor(index)
        if tensor.shape != () or not dtypes.is_integer(tensor.dtype):
            raise TypeError(f"TensorArray.{op}: the index must be an integer scalar, got "
                            f"{tensor.dtype.name}{format_shape(tensor.shape)}"
                            f"{describe_location()}")
        return tensor if isinstance(tensor, SymbolicTensor) else int(tensor._value)

    def _typed(self, value: Any, op: str) -> Tensor:
        """`value` as a tensor of the array's dtype (a tensor of another dtype is refused)."""
        if isinstance(value, Tensor) and value.dtype != self.dtype:
            raise TypeError(f"TensorArray.{op}: the array holds {self.dtype.name}, the value is "
                            f"{value.dtype.name}; use sf.cast{describe_location()}")
        return convert_to_tensor(value, self.dtype)

    def _fixed(self, shape: Shape, op: str) -> tuple:
        """The array's description once an element of `shape` is stored; an element shape
        that differs is refused (kept as it was where elements may differ)."""
        merged = _merged(self.element_shape, shape)
        free = self._items is not None and not self._meta[3]  # infer_shape=False, a list
        if merged is None and not free:
            raise ValueError(f"TensorArray.{op}: the value has shape {format_shape(shape)} but "
                             f"the elements have shape {format_shape(self.element_shape)}"
                             f"{describe_location()}")
        return self._meta if free or self._items is None else self._with_shape(merged)

    def _out_of_range(self, op: str, index: int, size: int) -> IndexError:
        return IndexError(f"TensorArray.{op}: index {index} is out of range for a TensorArray "
                          f"of size {size}{describe_location()}")

    # -- the two representations ----------------------------------------------------------

    def _as_buffer(self, what: str) -> Tensor:
        """The elements as one tensor [size, *element_shape] (zeros where unwritten)."""
        if self._buffer is not None:
            return self._buffer
        written = next((t for t in self._items if t is not None), None)
        shape = self.element_shape
        if not self._items:  # unknown dims are 0 (TensorFlow's eager arrays: shape (0,))
            return zeros((0, *(d or 0 for d in shape or ())), self.dtype)
        if written is None and not _known(shape):
            raise ValueError(f"{what}: the element shape is unknown (nothing was "
                             f"written yet); pass element_shape= to sf.TensorArray"
                             f"{describe_location()}")
        blank = zeros(shape, self.dtype) if written is None else zeros_like(written)
        return stack([blank if t is None else t for t in self._items])

    def _nest_components(self) -> tuple[list[Tensor], tuple]:
        return [self._as_buffer("TensorArray (carried through control flow)")], self._meta

    @classmethod
    def _nest_rebuild(cls, meta: tuple, components: list[Tensor]) -> TensorArray:
        buffer = components[0]
        if _staged():
            return cls._make(meta, buffer=buffer)
        return cls._make(meta, items=[buffer[i] for i in range(buffer.shape[0])])  # returned

    def _needs_element_shape(self) -> bool:
        """Whether a loop must trace its body once to learn the element shape (nothing
        written and no full `element_shape`) before carrying the array."""
        return self._buffer is None and not _known(self.element_shape) and all(
            t is None for t in self._items)

    def _learned(self, written: TensorArray) -> TensorArray:
        """This array with the element shape the same array got in a loop body."""
        shape = written.element_shape
        return self._make(self._with_shape(shape), items=list(self._items)) if _known(
            shape) else self

    # -- writing ----------------------------------------------------------------------------

    def write(self, index: Any, value: Any, name: str | None = None) -> TensorArray:
        """The array with element `index` set to `value` (eagerly: this array, changed)."""
        self._note_write()
        position = self._index(index, "write")
        value = self._typed(value, "write")
        meta = self._fixed(tuple(value.shape), "write")
        if self._items is not None and isinstance(position, int):
            return self._write_item(position, value, meta)
        buffer = self._make(meta, self._items, self._buffer)._as_buffer("TensorArray.write")
        if self.dynamic_size:
            end = position + 1 if isinstance(position, int) else add(position, 1)
            buffer = _grown(buffer, end, value)
        self._check_static("write", position, buffer)
        return self._make(meta, buffer=dynamic_update_index(buffer, value, position))

    def _check_static(self, op: str, position: int | Tensor, buffer: Tensor) -> None:
        """Refuse an index that tracing already knows is out of range."""
        if isinstance(position, int) and (position < 0 or buffer.shape[0] is not None
                                          and position >= buffer.shape[0]):
            raise self._out_of_range(op, position, buffer.shape[0])

    def _write_item(self, position: int, value: Tensor, meta: tuple) -> TensorArray:
        items = self._items
        if position < 0 or (position >= len(items) and not self.dynamic_size):
            raise self._out_of_range("write", position, len(items))
        if _staged():
            items = list(items)  # staged arrays are values: branches start from the same one
        items.extend([None] * (position + 1 - len(items)))
        items[position] = value
        if items is self._items:
            self._meta = meta
            return self
        return self._make(meta, items=items)

    def unstack(self, value: Any, name: str | None = None) -> TensorArray:
        """An array whose elements are the rows of `value` (its first dim)."""
        self._note_write()
        value = self._typed(value, "unstack")
        if value.ndim == 0:
            raise ValueError(f"TensorArray.unstack: the value must have a first dim to split, "
                             f"got a scalar{describe_location()}")
        rows, meta = value.shape[0], self._fixed(tuple(value.shape[1:]), "unstack")
        size = None if self._items is None else len(self._items)
        if rows is not None and size is not None and rows > size and not self.dynamic_size:
            raise ValueError(f"TensorArray.unstack: cannot unstack {rows} elements into a "
                             f"TensorArray of size {size}{describe_location()}")
        if _staged():
            return self._make(meta, buffer=value)
        return self._make(meta, items=[value[i] for i in range(rows)])

    def scatter(self, indices: Any, value: Any, name: str | None = None) -> TensorArray:
        """The array with element ``indices[k]`` set to row k of `value`."""
        self._note_write()
        value = self._typed(value, "scatter")
        if value.ndim == 0:
            raise ValueError(f"TensorArray.scatter: the value must have a first dim to split, "
                             f"got a scalar{describe_location()}")
        if isinstance(indices, SymbolicTensor) or self._items is None:
            indices = convert_to_tensor(indices)
            if indices.ndim != 1 or not dtypes.is_integer(indices.dtype):
                raise TypeError(f"TensorArray.scatter: indices must be a 1-d integer tensor, "
                                f"got {indices.dtype.name}{format_shape(indices.shape)}"
                                f"{describe_location()}")
            meta = self._fixed(tuple(value.shape[1:]), "scatter")
            buffer = self._make(meta, self._items, self._buffer)._as_buffer("TensorArray.scatter")
            if self.dynamic_size:
                buffer = _grown(buffer, add(reduce_max(indices), 1), value[0])
            updated = scatter_nd_update_p.bind(buffer, reshape(indices, (-1, 1)), value, width=1)
            return self._make(meta, buffer=updated)
        array = self
        for k, index in enumerate(np.asarray(indices._value if isinstance(indices, Tensor)
                                             else indices).reshape(-1)):
            array = array.write(int(index), value[k])
        return array

    # -- reading ----------------------------------------------------------------------------

    def read(self, index: Any, name: str | None = None) -> Tensor:
        """Element `index` (zeros if it was never written and its shape is known)."""
        position = self._index(index, "read")
        if self._items is not None and isinstance(position, int):
            if not 0 <= position < len(self._items):
                raise self._out_of_range("read", position, len(self._items))
            item = self._items[position]
            if item is not None:
                return item
            if not _known(self.element_shape):
                raise ValueError(f"TensorArray.read: element {position} was never written and "
                                 f"the element shape is unknown{describe_location()}")
            return zeros(self.element_shape, self.dtype)
        buffer = self._as_buffer("TensorArray.read")
        self._check_static("read", position, buffer)
        return gather(buffer, position, axis=0)

    def stack(self, name: str | None = None) -> Tensor:
        """The elements stacked along a new first dim: [size, *element_shape]."""
        return self._as_buffer("TensorArray.stack")

    def gather(self, indices: Any, name: str | None = None) -> Tensor:
        """The elements at `indices`, stacked."""
        return gather(self.stack(), convert_to_tensor(indices), axis=0)

    def concat(self, name: str | None = None) -> Tensor:
        """The elements joined along their first dim (they may differ in it when
        `infer_shape` is False)."""
        if self._items is not None and self._items and all(t is not None for t in self._items):
            return concat(self._items, 0)
        buffer = self._as_buffer("TensorArray.concat")
        if buffer.ndim < 2:
            raise ValueError(f"TensorArray.concat: the elements must have a first dim, got "
                             f"scalars{describe_location()}")
        return reshape_to(buffer, (None, *buffer.shape[2:]))

    def identity(self) -> TensorArray:
        """An array with the same elements."""
        return self._make(self._meta, items=None if self._items is None else list(self._items),
                          buffer=self._buffer)

    def close(self, name: str | None = None) -> None:
        """Nothing to release: elements are tensors, freed when no longer used."""


def _grown(buffer: Tensor, length: Any, value: Tensor) -> Tensor:
    """`buffer` with zero rows appended until it has at least `length` rows."""
    row = zeros_like(expand_dims(value, 0))
    if isinstance(length, int) and buffer.shape[0] is not None:
        missing = length - buffer.shape[0]
        return concat([buffer, *[row] * missing], 0) if missing > 0 else buffer
    wanted = cast(maximum(length, 0), dtypes.int64)

    def short(rows: Tensor) -> Tensor:
        return less(dim_size_p.bind(rows, axis=0), wanted)

    (grown,) = while_loop(short, lambda rows: (concat([rows, row], 0),), (buffer,),
                          name="tensor_array_grow")
    return grown
