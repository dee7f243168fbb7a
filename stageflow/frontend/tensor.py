"""Eager tensors: immutable handles to NumPy arrays on a device.

A `Tensor` holds one NumPy array (or NumPy scalar for 0-d results) and never mutates it,
so results may share memory with their inputs (reshape, slicing) safely. Python operators
and indexing are installed by `stageflow.frontend.ops.operators`.

A plain `Tensor` lives on the host's default device, ``/device:CPU:0``; the eager fast
paths take only those (``type(x) is Tensor``). A tensor on any other device is a
`PlacedTensor`, which goes through `Primitive.bind`, where the eager executor runs the op
on a device and copies inputs from other devices (`stageflow.runtime.eager`). Copies
of a tensor to other devices are kept on it (``_mirrors``, TensorFlow's "mirrors"), so a
tensor used on another device many times is copied there once: tensors never change.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core import devices, dtypes
from stageflow.core.source import describe_location
from stageflow.core.tensor_shape import TensorShape
from stageflow.primitives.functional import device_copy_p

DLPACK_CPU = 1  # DLPack's kDLCPU device type

# `allocate(Tensor)`: a tensor without running `__init__`, for the eager fast paths that set
# its value themselves.
allocate = object.__new__


def array_for_numpy(held: Any, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
    """`held` (a tensor's or a variable's value) as ``__array__`` gives it: a copy where
    asked, else read-only wherever it shares `held`'s memory, which NumPy must not change
    in place (tensors never change; a variable's writes replace its array)."""
    value = np.asarray(held, dtype=dtype)
    if copy:
        return value.copy()
    if value is held or value.base is not None:
        value = value.view()
        value.flags.writeable = False
    return value


class Tensor:
    """A concrete, immutable, typed multi-dimensional array.

    Made by `sf.constant` and every op; `.shape` is a tuple, `.dtype` a NumPy dtype, `.numpy()`
    the values.

    >>> t = sf.Tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> t
    sf.Tensor([[1., 2.],
               [3., 4.]], shape=(2, 2), dtype=float32)
    >>> t.shape, t.dtype
    ((2, 2), dtype('float32'))
    >>> (t + 1.0)[1]
    sf.Tensor([4., 5.], shape=(2,), dtype=float32)
    >>> float(t.numpy().sum())
    10.0
    """

    __slots__ = ("_value", "_mirrors", "__weakref__")
    __array_priority__ = 100  # NumPy defers `ndarray * Tensor` to Tensor.__rmul__
    __hash__ = None  # `==` is elementwise, as in NumPy; use `id()` or `.ref()` as a key

    _value: np.ndarray

    def __init__(self, value: Any, dtype: Any = None) -> None:
        self._value = to_array(value, dtype)

    @property
    def shape(self) -> TensorShape:
        return TensorShape(self._value.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._value.dtype

    @property
    def ndim(self) -> int:
        return self._value.ndim

    @property
    def size(self) -> int:
        return self._value.size

    @property
    def device(self) -> str:
        """The full name of the device holding the value, e.g. ``"/device:CPU:0"``."""
        return devices.HOST

    def to(self, device: str) -> Tensor:
        """This tensor on `device` (any form of its name: ``"cpu:1"``, ``"/gpu:0"``): a copy
        made once and kept, or the tensor itself when it is there already. Differentiable:
        the gradient is copied back."""
        return device_copy_p.bind(self, device=devices.resolve(device))

    def cpu(self, i: int = 0) -> Tensor:
        """This tensor on ``/device:CPU:{i}`` (see `to`)."""
        return self.to(f"/device:CPU:{i}")

    def gpu(self, i: int = 0) -> Tensor:
        """This tensor on ``/device:GPU:{i}`` (see `to`); without such a GPU an error says
        why (no CUDA driver, no package, no device)."""
        return self.to(f"/device:GPU:{i}")

    def numpy(self) -> np.ndarray:
        """A NumPy copy of the value (writable; the tensor itself stays unchanged); a string
        scalar's is its `bytes`, as in TensorFlow."""
        value = np.array(self._value)
        return value[()] if value.dtype.kind == "O" and not value.ndim else value

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return array_for_numpy(self._value, dtype, copy)

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """A DLPack capsule of the value, for ``np.from_dlpack(t)``, ``torch.from_dlpack(t)``
        and ``jax.dlpack.from_dlpack(t)``: the consumer's array shares this tensor's memory
        (a 0-d tensor's, held as a NumPy scalar, is copied). A consumer of DLPack 1.0 or
        later is told the memory is read-only (NumPy then makes a read-only array); older
        ones cannot be told, and must not write to it: tensors never change. A tensor in a
        GPU's memory is exported only as a host copy, with ``copy=True`` (`DeviceTensor`).
        """
        value = self._value
        if not isinstance(value, np.ndarray) or (max_version is not None
                                                 and max_version >= (1, 0)):
            value = np.asarray(value).view()
            value.flags.writeable = False
        try:
            return value.__dlpack__(stream=stream, max_version=max_version,
                                    dl_device=dl_device, copy=copy)
        except (BufferError, TypeError, ValueError) as error:
            raise BufferError(f"Tensor.__dlpack__: cannot export a {self.dtype.name} tensor "
                              f"of shape {self.shape}: {error}") from None

    def __dlpack_device__(self) -> tuple[int, int]:
        """DLPack's ``(device type, index)`` of the memory `__dlpack__` exports: the host's,
        ``(1, 0)`` (kDLCPU)."""
        return (DLPACK_CPU, 0)

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def __complex__(self) -> complex:
        return complex(self._scalar("complex"))

    def __index__(self) -> int:
        if not dtypes.is_integer(self.dtype):
            raise TypeError(f"only integer tensors can be used as an index, not {self.dtype}")
        return int(self._scalar("index"))

    def __bool__(self) -> bool:
        return bool(self._scalar("bool"))

    def _scalar(self, what: str) -> Any:
        if self._value.size != 1:
            raise TypeError(
                f"{what}() needs a tensor with one element, got shape {self.shape}"
                f"{describe_location()}"
            )
        return self._value.reshape(()).item() if self._value.ndim else self._value.item()

    def __len__(self) -> int:
        if self._value.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._value.shape[0]

    def __iter__(self):
        if self._value.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._value.shape[0]))

    def __repr__(self) -> str:
        body = np.array2string(np.asarray(self._value), separator=", ", prefix="sf.Tensor(")
        return f"sf.Tensor({body}, shape={self.shape}, dtype={dtypes.dtype_name(self.dtype)})"

    def __str__(self) -> str:
        return repr(self)

    def __format__(self, spec: str) -> str:
        """As TensorFlow's: ``f"{t}"`` is the value as NumPy prints it (``[1 2]``, where
        ``str(t)`` shows the tensor); ``f"{t:.2f}"`` formats a one-element tensor's value.

        >>> f"{sf.constant([1, 2])}", f"{sf.constant(1.5):.2f}"
        ('[1 2]', '1.50')
        """
        return format(self._scalar("format"), spec) if spec else str(self.numpy())

    def ref(self) -> TensorRef:
        """A hashable reference to this tensor (by identity), for sets and dict keys."""
        return TensorRef(self)


class PlacedTensor(Tensor):
    """A tensor on a device other than ``/device:CPU:0``: its value in that device's memory
    (a host array for logical CPU devices) and the device's name."""

    __slots__ = ("_device",)

    @property
    def device(self) -> str:
        return self._device


class DeviceTensor(PlacedTensor):
    """A tensor in a device's own memory (a GPU's). `_buffer` holds it there (its shape,
    dtype and the device's handle); host code that reads ``_value`` (any NumPy kernel, an
    op of the frontend) gets a copy fetched from the device on first use, counted as one."""

    __slots__ = ("_buffer",)

    @property
    def shape(self) -> TensorShape:
        return TensorShape(self._buffer.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._buffer.dtype

    @property
    def ndim(self) -> int:
        return len(self._buffer.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self._buffer.shape))

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """A DLPack capsule of a host copy of the value, made only when asked for
        (``copy=True``, or ``dl_device`` the host's): stageflow shares no GPU memory
        through DLPack; ``t.cpu()`` moves the tensor to the host, whose tensors share."""
        if not copy and dl_device != (DLPACK_CPU, 0):
            raise BufferError(f"Tensor.__dlpack__: the tensor is on {self.device}, and "
                              "stageflow exports host memory only: t.cpu() copies it to "
                              "the host (or ask the consumer for a copy, copy=True)")
        return np.array(self._value).__dlpack__(stream=stream, max_version=max_version)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(1, 0)``, the host: what `__dlpack__` can give (a copy)."""
        return (DLPACK_CPU, 0)

    def __getattr__(self, name: str) -> Any:
        if name != "_value":
            raise AttributeError(name)
        value = self._value = self._buffer.fetch()
        return value


def placed(value: Any, device: str) -> Tensor:
    """Wrap a kernel's result computed on `device` (a plain `Tensor` on the default one)."""
    if device == devices.HOST:
        return wrap(value)
    tensor = allocate(PlacedTensor)
    tensor._value = value
    tensor._device = device
    return tensor


class TensorRef:
    """Hashable identity wrapper around a tensor, like `tf.Tensor.ref()`."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: Tensor) -> None:
        self.tensor = tensor

    def __hash__(self) -> int:
        return id(self.tensor)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorRef) and other.tensor is self.tensor

    def deref(self) -> Tensor:
        return self.tensor


def wrap(value: Any) -> Tensor:
    """Wrap a kernel's result (an array or NumPy scalar) without copying or checking."""
    tensor = allocate(Tensor)
    tensor._value = value
    return tensor


def to_array(value: Any, dtype: Any = None) -> np.ndarray:
    """Convert Python/NumPy data to an array with stageflow's default dtypes.

    Python floats become float32, ints int32 (int64 when they do not fit), bools bool,
    complex numbers complex64 (a pair of the default float32, as in JAX; TensorFlow makes
    complex128 of them, which ``dtype=sf.complex128`` asks for); str and bytes make a string
    tensor (`_string_array`); NumPy arrays and scalars keep their dtype. The result is a
    fresh array.
    """
    want = None if dtype is None else dtypes.as_dtype(dtype)
    if want is not None and dtypes.is_string(want):
        return _string_array(value)
    if want is not None and _has_text(value):
        raise TypeError(f"cannot convert strings in {value!r} to {want.name}; "
                        "sf.strings.to_number parses them")
    if want is not None and not dtypes.is_inexact(want) and _has_python_float(value):
        raise TypeError(f"cannot convert Python floats in {value!r} to {want.name} exactly; "
                        "round them first or use sf.cast")
    if want is not None and _has_none(value):  # NumPy would make None a NaN
        raise TypeError(f"cannot convert {value!r} to a {want.name} tensor: it holds None")
    if want is not None and not dtypes.is_complex(want) and _is_complex(value):
        # NumPy would drop the imaginary parts: sf.cast or sf.math.real say so
        raise TypeError(f"cannot convert complex values to a {want.name} tensor; "
                        "use sf.cast or sf.math.real")
    if isinstance(value, Tensor):
        value = value._value
        source_is_numpy = True
    else:
        source_is_numpy = isinstance(value, np.ndarray | np.generic)
    try:
        array = np.array(value, dtype=want) if want is not None else np.array(value)
    except (ValueError, TypeError, OverflowError) as error:
        if isinstance(error, ValueError) and "inhomogeneous" in str(error):
            raise ValueError("cannot convert a non-rectangular Python sequence to a tensor "
                             "(rows of different lengths: sf.ragged.constant takes them)"
                             ) from None
        raise type(error)(f"cannot convert {type(value).__name__} to a tensor: {error}") from None
    if want is None and array.dtype.kind in "USO" and _is_text(array):
        return _string_array(value)
    if want is None and not source_is_numpy:
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        elif array.dtype == np.complex128:
            array = array.astype(np.complex64)
        elif array.dtype == np.int64:
            info = np.iinfo(np.int32)
            if array.size == 0 or (array.min() >= info.min and array.max() <= info.max):
                array = array.astype(np.int32)
    if not array.dtype.isnative:  # the same numbers in the machine's byte order
        array = array.astype(array.dtype.newbyteorder("="))
    if array.dtype not in dtypes.ALL:
        raise TypeError(f"cannot make a tensor of dtype {array.dtype}")
    return array


def _is_text(array: np.ndarray) -> bool:
    """Whether NumPy made `array` of string data (`_string_array` checks each element): str
    or bytes, or objects the first of which is one (other objects are no string data)."""
    return array.dtype.kind in "US" or (array.size > 0 and isinstance(array.flat[0], str | bytes))


def _has_text(value: Any) -> bool:
    """Whether Python or NumPy data holds a string anywhere."""
    if isinstance(value, list | tuple):
        return any(_has_text(v) for v in value)
    if isinstance(value, Tensor | np.ndarray):
        return value.dtype.kind in "USO"
    return isinstance(value, str | bytes)


def _string_array(value: Any) -> np.ndarray:
    """A string tensor's array of `value`: an object array of `bytes` (str encoded as
    UTF-8, as TensorFlow stores it); ``TypeError`` where an element is not a string."""
    if isinstance(value, Tensor):
        value = value._value
    try:
        array = np.array(value, dtype=object)
    except ValueError as error:
        raise ValueError(f"cannot make a string tensor of {value!r}: {error}") from None
    out = np.empty(array.shape, dtype=object)
    flat = out.reshape(-1)
    for index, item in enumerate(array.reshape(-1)):
        if isinstance(item, str):
            item = item.encode("utf-8")
        elif not isinstance(item, bytes):
            raise TypeError(f"cannot make a string tensor of {value!r}: it holds "
                            f"{item!r}, not a str or bytes (sf.strings.as_string formats "
                            "numbers)")
        flat[index] = bytes(item)
    return out


def _is_complex(value: Any) -> bool:
    """Whether `value` is a complex number, a NumPy array of them or Python data holding
    one."""
    if isinstance(value, np.ndarray | np.generic):
        return value.dtype.kind == "c"
    if isinstance(value, list | tuple):
        return any(_is_complex(v) for v in value)
    return isinstance(value, complex)


def _has_none(value: Any) -> bool:
    """Whether Python data holds None."""
    if value is None:
        return True
    if isinstance(value, list | tuple):
        return any(_has_none(v) for v in value)
    return False


def _has_python_float(value: Any) -> bool:
    """Whether Python data (not NumPy data) holds a non-integral float."""
    if isinstance(value, float):
        return not value.is_integer()
    if isinstance(value, list | tuple):
        return any(_has_python_float(v) for v in value)
    return False
