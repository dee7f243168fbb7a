"""Eager execution: run a primitive's NumPy kernel at once, one op at a time.

No IR object is built here. The shape rule runs first so that bad input fails with the
op's own message (naming the shapes and the user's line) instead of a NumPy error.
Convolutions, and large elementwise ops where it is faster, run compiled code once it is
compiled (`eager_kernels`).

Placement: an op runs on the device of the innermost `sf.device` scope, else on the device
of its first input not on ``/device:CPU:0`` (tensors moved to a device draw their ops
there), else on the host; `device_copy` runs on the device it names. Inputs on other
devices are copied there transparently, once per tensor (`Device.mirror`).

While the profiler records, `RecordingTrace` stands in for the eager trace and times each
op; the eager trace itself has no check for it.
"""

from __future__ import annotations

import time
from typing import Any

from stageflow.core import config, context, devices, profiling
from stageflow.core.errors import KERNEL_ERRORS, kernel_error_type
from stageflow.core.primitive import Primitive, ShapedType
from stageflow.core.source import describe_location, user_location
from stageflow.frontend.tensor import PlacedTensor, Tensor, wrap
from stageflow.primitives.functional import device_copy_p
from stageflow.runtime import devices as runtime_devices
from stageflow.runtime.eager_kernels import KERNELS

CHECKED_LIMIT = 4096


class EagerTrace:
    """The bottom of every thread's trace stack: concrete tensors in, concrete tensors out.

    An op's signature (the primitive, each operand's dtype and shape, the params) is built
    once per call; the first call of a signature runs the shape rule and asks
    `KERNELS.route` what runs it, later ones find that in `_routes` (one dict lookup instead
    of a few microseconds of Python): None for the primitive's NumPy kernel, or compiled
    code (`eager_kernels`).
    """

    def __init__(self) -> None:
        self._routes: dict[tuple, Any] = {}
        self._checked: set[tuple] = set()  # signatures of ops placed on devices

    def process(self, primitive: Primitive, args: tuple, params: dict[str, Any]) -> Any:
        values = []
        signature: list = [primitive]
        on_host = True
        for arg in args:
            if type(arg) is Tensor:
                value = arg._value
                values.append(value)
                signature.append((value.dtype, value.shape))
            elif isinstance(arg, PlacedTensor):
                on_host = False  # (a tensor in a GPU's memory is not fetched here)
            else:
                raise TypeError(
                    f"{primitive.name}: expected a tensor, got {type(arg).__name__}"
                    f"{describe_location()}"
                )
        scope = devices.current()
        if not on_host or scope not in (None, devices.HOST) or primitive is device_copy_p:
            return self._placed(primitive, args, params, scope)
        key = (*signature, *params.items())
        try:
            run = self._routes[key]
        except KeyError:
            run = self._first_call(primitive, values, params, key)
        except TypeError:  # an unhashable param: checked every time, NumPy's kernel
            self._check(primitive, values, params)
            run = None
        try:
            result = (primitive.kernel(*values, **params)
                      if run is None or not config.eager_compile else run(*values))
        except KERNEL_ERRORS as error:
            raise kernel_error_type(error)(
                f"{primitive.name}: {error}{describe_location()}") from None
        if primitive.multiple_results:
            return tuple(wrap(r) for r in result)
        return wrap(result)

    def _first_call(self, primitive: Primitive, values: list, params: dict[str, Any],
                    key: tuple) -> Any:
        """The shape rule, then the signature's route, kept."""
        primitive.abstract_eval(*(ShapedType(v.shape, v.dtype) for v in values), **params)
        run = KERNELS.route(primitive, values, params, key, self._routes)
        if len(self._routes) >= CHECKED_LIMIT:
            self._routes.clear()
        self._routes[key] = run
        return run

    def _placed(self, primitive: Primitive, args: tuple, params: dict[str, Any],
                scope: str | None) -> Any:
        """Run the op on its device, its inputs copied there where they live elsewhere."""
        if primitive is device_copy_p:
            name = params["device"]
        elif any(arg.dtype.kind == "O" for arg in args):
            name = devices.HOST  # string tensors live in host memory, as TensorFlow's do
        else:
            name = scope or next((a.device for a in args if type(a) is not Tensor),
                                 devices.HOST)
        self._check(primitive, args, params)  # before a copy: it may be refused
        device = runtime_devices.get(name)
        values = [device.mirror(arg) for arg in args]
        if primitive is device_copy_p:  # the copy is made: `mirror` made it
            return device.wrap(values[0])
        try:
            result = device.execute(primitive, values, params)
        except KERNEL_ERRORS as error:
            raise kernel_error_type(error)(
                f"{primitive.name}: {error}{describe_location()}") from None
        if primitive.multiple_results:
            return tuple(device.wrap(r) for r in result)
        return device.wrap(result)

    def _check(self, primitive: Primitive, values: list, params: dict[str, Any]) -> None:
        """Run the shape rule unless this signature passed it before (every time where a
        param is unhashable)."""
        key = (primitive, *[(v.dtype, v.shape) for v in values], *params.items())
        try:
            if key in self._checked:
                return
        except TypeError:
            key = None
        primitive.abstract_eval(*(ShapedType(v.shape, v.dtype) for v in values), **params)
        if key is not None:
            if len(self._checked) >= CHECKED_LIMIT:
                self._checked.clear()
            self._checked.add(key)

    def constant(self, array: Any, device: str | None = None) -> Tensor:
        device = device or devices.current()
        if device is None or device == devices.HOST or array.dtype.kind == "O":
            return wrap(array)  # (string tensors live in host memory, whatever the scope)
        return runtime_devices.get(device).wrap(array)

    def read_variable(self, variable: Any) -> Tensor:
        if variable._device == devices.HOST:
            return wrap(variable._value)
        return runtime_devices.get(variable._device).read_variable(variable)

    def assign_variable(self, variable: Any, value: Tensor) -> None:
        if type(value) is Tensor and variable._device == devices.HOST:
            variable._store(value._value)
        else:
            runtime_devices.get(variable._device).assign_variable(variable, value)

    def lift(self, value: Any) -> Any:
        """Values are already concrete here."""
        return value

    def variable_created(self, variable: Any) -> None:
        """Eagerly, variables may be created at any time."""


class RecordingTrace:
    """The eager trace with each op recorded as a profiler span: its name, its operands'
    shapes and dtypes, the device of its result and the user's line that called it.
    Installed as the bottom of the trace stack while a trace is recorded (with the eager
    fast path off, so that every op comes here); the rest is the eager trace's."""

    def __init__(self, inner: EagerTrace) -> None:
        self.inner = inner

    def process(self, primitive: Primitive, args: tuple, params: dict[str, Any]) -> Any:
        start = time.perf_counter()
        result = self.inner.process(primitive, args, params)
        end = time.perf_counter()
        first = result[0] if primitive.multiple_results and result else result
        profiling.complete(primitive.name, "op", start, end, {
            "shapes": [a.shape for a in args], "dtypes": [a.dtype for a in args],
            "device": getattr(first, "device", devices.HOST), "source": user_location()})
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


EAGER = EagerTrace()
context.set_eager_trace(EAGER)
