"""The coordinator's side of a remote device: handles to arrays in a worker's keeping.

A `RemoteDevice` is a device of the runtime's table whose work runs in a worker process
(a `Worker` Ray actor). An eager op placed there is one actor call, submitted without
waiting: its results are `RemoteArray`s, Ray object references with the shape and dtype
the op's shape rule gave, wrapped as tensors of that device (`DeviceTensor`). Host
tensors go to the object store once each (`ray.put`, kept as mirrors); a remote tensor
used on another worker is handed over by reference, so Ray moves it worker to worker and
the coordinator never sees its bytes. A graph function travels as its `sf` IR text, is
compiled on the worker once, and is called by fingerprint afterwards. Every wait has a
timeout (`TIMEOUT`); a worker that died makes every later use of its device raise
`RemoteDeviceError` naming it.
"""

from __future__ import annotations

import hashlib
import uuid
import weakref
from typing import Any

import numpy as np

from stageflow.core import devices
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location
from stageflow.frontend.tensor import DeviceTensor, Tensor, allocate
from stageflow.frontend.variables import Variable
from stageflow.ir.from_graph import module_text
from stageflow.runtime.cpu_devices import Device

TIMEOUT = 120.0  # seconds any wait for a worker may take
INLINE_BYTES = 64 * 1024  # host arrays up to this size go to workers inline, not put


class RemoteDeviceError(RuntimeError):
    """A device of another process cannot be used: its worker died or did not answer
    within `TIMEOUT` seconds. Every later use of a dead worker's device raises it too,
    until `connect` replaces the workers::

        try:
            y = step(x)                      # placed on a worker's device
        except sf.distribute.RemoteDeviceError:
            sf.distribute.connect(jobs={"worker": 2})

    It is a RuntimeError, so code catching the runtime's errors catches it too:

    >>> issubclass(sf.distribute.RemoteDeviceError, RuntimeError)
    True
    >>> sf.distribute.TIMEOUT                # seconds, every wait for a worker
    120.0
    """


class RemoteArray:
    """An array a worker keeps: a Ray object reference, its shape and dtype. A graph
    function's result with unknown dims has its shape read from the worker on first need
    (`shapes`: the reference to the call's list of shapes, and this result's index)."""

    __slots__ = ("_shape", "device", "dtype", "ref", "shapes")

    def __init__(self, device: RemoteDevice, ref: Any, shape: Any, dtype: Any,
                 shapes: tuple[Any, int] | None = None) -> None:
        self.device = device
        self.ref = ref
        self._shape = None if shape is None else tuple(shape)
        self.dtype = np.dtype(dtype)
        self.shapes = shapes

    @property
    def shape(self) -> tuple[int, ...]:
        if self._shape is None:
            assert self.shapes is not None
            reference, index = self.shapes
            self._shape = tuple(self.device.wait(reference)[index])
        return self._shape

    def fetch(self) -> np.ndarray:
        """The value, brought to the coordinator (counted as a copy)."""
        if isinstance(self.ref, np.ndarray):  # a small host array sent inline
            return self.ref.copy()
        value = np.asarray(self.device.wait(self.ref))
        devices.COUNTERS.copied(value.nbytes)
        return value


class RemoteDevice(Device):
    """A device of a worker process, reached through its Ray actor."""

    remote = True

    def __init__(self, name: str, actor: Any, ray: Any) -> None:
        super().__init__(name, 0, 1)
        self.actor = actor
        self.ray = ray
        self.dead: str | None = None
        # The functions loaded on the worker: their IR's fingerprint, by function.
        self._fingerprints: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._methods: dict[int, Any] = {}

    def describe(self) -> str:
        return f"{self.name}  {self.kind}  a worker process (Ray actor)"

    def wait(self, ref: Any) -> Any:
        """A result of this device's worker, within `TIMEOUT`; errors name the device."""
        self._alive()
        ray = self.ray
        try:
            return ray.get(ref, timeout=TIMEOUT)
        except ray.exceptions.GetTimeoutError:
            raise RemoteDeviceError(f"{self.name} did not answer within {TIMEOUT:.0f} s") \
                from None
        except ray.exceptions.RayActorError as error:
            self.dead = f"its worker died ({type(error).__name__})"
            raise RemoteDeviceError(f"{self.name} cannot be used: {self.dead}; "
                                    "sf.distribute.connect() again replaces it") from None
        except ray.exceptions.RayTaskError as error:
            cause = error.cause
            raise type(cause)(*cause.args) from None

    def _alive(self) -> None:
        if self.dead is not None:
            raise RemoteDeviceError(f"{self.name} cannot be used: {self.dead}; "
                                    "sf.distribute.connect() again replaces it")

    # -- values ------------------------------------------------------------------------

    def own(self, tensor: Any) -> RemoteArray:
        return tensor._buffer

    def mirror(self, tensor: Any) -> Any:
        """A remote tensor by reference (Ray moves it between workers); a tensor of this
        process put in the object store once (kept as its mirror)."""
        buffer = getattr(tensor, "_buffer", None)
        if isinstance(buffer, RemoteArray):
            return buffer
        mirrors = getattr(tensor, "_mirrors", None)
        if mirrors is None:
            mirrors = tensor._mirrors = {}
        value = mirrors.get(self.name)
        if value is None:
            value = mirrors[self.name] = self.copy_in(tensor._value)
        return value

    def copy_in(self, value: Any) -> RemoteArray:
        """`value` for the worker: in the object store, or for a small array the array
        itself, sent inline with each call that uses it (Ray inlines small arguments; a
        reference to a small object costs the worker one more round trip to fetch it)."""
        self._alive()
        array = np.asarray(value)
        devices.COUNTERS.copied(array.nbytes)
        handle = array if array.nbytes <= INLINE_BYTES else self.ray.put(array)
        return RemoteArray(self, handle, array.shape, array.dtype)

    def wrap(self, value: Any) -> Tensor:
        tensor = allocate(DeviceTensor)
        tensor._buffer = value if isinstance(value, RemoteArray) else self.copy_in(value)
        tensor._device = self.name
        return tensor

    # -- variables: kept by the worker, under a key of their own ---------------------------

    def adopt(self, variable: Any) -> None:
        """Create the variable on the worker; reads of its value fetch from there."""
        key = uuid.uuid4().hex
        self.wait(self.actor.create_variable.remote(key, variable._value, variable.trainable,
                                                    variable.name))
        variable._remote_key = key
        variable._fetch = lambda: np.asarray(self.wait(self.actor.read_variable.remote(key)))

    def read_variable(self, variable: Any) -> Tensor:
        self._alive()
        ref = self.actor.read_variable.remote(variable._remote_key)
        return self.wrap(RemoteArray(self, ref, variable.shape, variable.dtype))

    def assign_variable(self, variable: Any, tensor: Any) -> None:
        if tuple(tensor.shape) != variable.shape or tensor.dtype != variable.dtype:
            raise ValueError(
                f"assign: variable {variable.name!r} is {variable.dtype.name}"
                f"{format_shape(variable.shape)}, the value is {tensor.dtype.name}"
                f"{format_shape(tuple(tensor.shape))}{describe_location()}")
        self.wait(self.actor.assign_variable.remote(variable._remote_key,
                                                    self.mirror(tensor).ref))

    # -- work ----------------------------------------------------------------------------

    def execute(self, primitive: Primitive, values: list[Any], params: dict[str, Any]) -> Any:
        """One actor call; its results are references, not waited for."""
        self._alive()
        types = primitive.abstract_eval(*(ShapedType(v.shape, v.dtype) for v in values),
                                        **params)
        types = types if primitive.multiple_results else (types,)
        refs = self.actor.execute.options(num_returns=len(types)).remote(
            primitive.name, params, describe_location(), *[v.ref for v in values])
        refs = refs if len(types) > 1 else [refs]
        results = [RemoteArray(self, ref, t.shape, t.dtype) for ref, t in zip(refs, types,
                                                                               strict=True)]
        return tuple(results) if primitive.multiple_results else results[0]

    def call_function(self, concrete: Any, tensors: list[Any]) -> list[Tensor]:
        """Run a graph function on the worker: its IR sent once, then called by
        fingerprint; results on this device."""
        self._alive()
        fingerprint = self._fingerprints.get(concrete)
        if fingerprint is None:
            callback = concrete.graph.python_callback(named_ok=True)
            if callback is not None:
                raise NotImplementedError(
                    f"{concrete.name}: its {callback.primitive.name} at {callback.location} "
                    f"calls a Python function of this process, which {self.name} cannot "
                    "run (graph functions travel as IR text)")
            text = module_text(concrete, debuginfo=True)
            fingerprint = hashlib.sha256(text.encode()).hexdigest()
            self.wait(self.actor.load.remote(fingerprint, text, concrete.name))
            self._fingerprints[concrete] = fingerprint
        values = [*tensors, *(c.source for c in concrete.graph.captures)]
        # A variable goes as its key, in a list of plain values, which Ray packs with
        # msgpack (an object of a class of ours it would pickle, on every call).
        keys = [self._key(value, concrete.name) if isinstance(value, Variable) else None
                for value in values]
        arguments = [None if key is not None else self.mirror(value).ref
                     for key, value in zip(keys, values, strict=True)]
        specs = concrete.outputs
        unknown = any(None in spec.shape for spec in specs)
        count = len(specs) + unknown  # the shapes come last where some are unknown
        refs = self._call_method(count).remote(fingerprint, unknown, keys, *arguments)
        refs = list(refs) if count > 1 else [refs]
        results = []
        for index, (ref, spec) in enumerate(zip(refs, specs, strict=False)):
            known = None if None in spec.shape else spec.shape
            results.append(self.wrap(RemoteArray(self, ref, known, spec.dtype,
                                                 (refs[-1], index) if unknown else None)))
        return results

    def _call_method(self, count: int) -> Any:
        """The worker's `call` returning `count` objects (kept per count)."""
        method = self._methods.get(count)
        if method is None:
            method = self._methods[count] = self.actor.call.options(num_returns=count)
        return method

    def _key(self, value: Variable, name: str) -> str:
        """The key under which this device's worker keeps a variable of the call's."""
        key = getattr(value, "_remote_key", None)
        if key is None or value.device != self.name:
            raise NotImplementedError(
                f"{name}: variable {value.name!r} lives on {value.device}; a graph function "
                f"on {self.name} reads only variables created there{describe_location()}")
        return key
