"""The graph-building context: symbolic tensors and the trace that records equations.

While `sf.function` traces a Python function, `GraphTrace` is the current trace: every
`Primitive.bind` runs the op's shape rule and appends an `Equation` (with the user's source
line) instead of computing, and returns a `SymbolicTensor`. Eager tensors closed over are
captured by value, variables by reference, values of an enclosing trace by a hidden input.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stageflow.core import devices
from stageflow.core.errors import StagingError
from stageflow.core.op_facts import Family
from stageflow.core.primitive import Primitive, ResourceType, ShapedType
from stageflow.core.shapes import format_shape
from stageflow.core.source import describe_location, user_location
from stageflow.core.tensor_shape import TensorShape
from stageflow.frontend.graph import Capture, Equation, Graph, Value, run_equation
from stageflow.frontend.tensor import Tensor, wrap
from stageflow.primitives import state
from stageflow.primitives.functional import device_copy_p
from stageflow.primitives.structural import constant_p

SMALL_CONSTANT = 16  # elements; constants up to this size are deduplicated while tracing
STATIC_DEPTH = 16  # equations `static_value` follows back from a value, at most
_STATIC_FAMILIES = frozenset({Family.ELEMENTWISE, Family.STRUCTURAL})

_VALUE_HINT = (
    "a traced tensor has no value until the graph function runs; use sf.cond / "
    "sf.while_loop for data-dependent control flow, or sf.py_func to run Python on values"
)


class SymbolicTensor(Tensor):
    """A tensor of a graph being traced: a typed SSA value with no concrete data."""

    __slots__ = ("_trace", "_node")

    def __init__(self, trace: GraphTrace, node: Value) -> None:
        self._trace = trace
        self._node = node

    @property
    def shape(self) -> TensorShape:
        return TensorShape(self._node.type.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._node.type.dtype

    @property
    def ndim(self) -> int:
        return len(self._node.type.shape)

    @property
    def size(self) -> int | None:
        total = 1
        for d in self.shape:
            if d is None:
                return None
            total *= d
        return total

    @property
    def device(self) -> str:
        """Where the op computing this value runs: the device of a `sf.device` scope
        opened inside the trace, else the graph function's."""
        return self._node.device or self._trace.graph.device

    def _staging_error(self, what: str) -> StagingError:
        return StagingError(f"{what} of a traced tensor {self._node.type}: {_VALUE_HINT}"
                            f"{describe_location()}")

    def numpy(self) -> np.ndarray:
        raise self._staging_error(".numpy()")

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        raise self._staging_error("the NumPy value")

    def _scalar(self, what: str) -> Any:
        raise self._staging_error(f"{what}()")

    def __dlpack__(self, **_: Any) -> Any:
        raise self._staging_error("a DLPack export (__dlpack__)")

    def __len__(self) -> int:
        if not self.shape or self.shape[0] is None:
            raise self._staging_error("len()")
        return self.shape[0]

    def __iter__(self):
        if not self.shape or self.shape[0] is None:
            raise self._staging_error("iteration over an unknown dim")
        return (self[i] for i in range(self.shape[0]))

    def __repr__(self) -> str:
        return (f"<sf.Tensor %{self._node.id} shape={format_shape(self.shape)} "
                f"dtype={self.dtype.name} (traced)>")


class GraphTrace:
    """Records the ops of one graph function while its Python function runs."""

    def __init__(self, graph: Graph, parent: Any, allow_variable_creation: bool,
                 frozen: bool = False) -> None:
        """`frozen`: each variable read is a constant of the variable's value now, and a
        write is refused (`Function.freeze`)."""
        self.graph = graph
        self.parent = parent
        self.allow_variable_creation = allow_variable_creation
        self.frozen = frozen
        self.created_variables: list[Any] = []
        self._captured: dict[int, Value] = {}
        self._lifted: dict[int, Any] = {}
        self._lifted_upto = 0
        self._constants: dict[tuple, SymbolicTensor] = {}
        self._producers: dict[int, Equation] = {}  # id of a value -> the equation making it
        self.op_lines: dict[tuple[str, int], int] = {}
        self._scope_depth = devices.depth()  # scopes opened deeper place the ops inside

    # -- inputs -------------------------------------------------------------------------

    def add_input(self, type_: ShapedType | ResourceType, source: Any = None) -> Value:
        """A new argument of the graph function (a variable argument binds its handle)."""
        refuse_strings(type_, "sf.function: an argument")
        value = Value(type_)
        self.graph.inputs.append(value)
        if source is not None:
            self._captured[id(source)] = value
        return value

    def symbolic(self, value: Value) -> SymbolicTensor:
        return SymbolicTensor(self, value)

    def _capture(self, source: Any, type_: ShapedType | ResourceType) -> Value:
        key = id(source)
        value = self._captured.get(key)
        if value is None:
            value = Value(type_)
            self.graph.captures.append(Capture(value, source))
            self._captured[key] = value
        return value

    def value_of(self, tensor: Any, op: str) -> Value:
        """The graph value for an operand, capturing it when it comes from outside."""
        if isinstance(tensor, SymbolicTensor):
            if tensor._trace is self:
                return tensor._node
            if self._encloses(tensor._trace):
                return self._capture(tensor, tensor._node.type)
            raise StagingError(
                f"{op}: a traced tensor of another function was used here (did it escape "
                f"from an sf.function, e.g. through a Python global or list?){describe_location()}"
            )
        if isinstance(tensor, Tensor):  # eager, on any device
            value = tensor._value
            type_ = ShapedType(value.shape, value.dtype)
            refuse_strings(type_, f"{op}: a tensor captured from outside the function")
            return self._capture(tensor, type_)
        raise TypeError(f"{op}: expected a tensor, got {type(tensor).__name__}"
                        f"{describe_location()}")

    def operand(self, source: Any, op: str) -> Value:
        """The graph value for a call operand: a variable's handle or a tensor's value."""
        if hasattr(source, "_store"):
            return self._handle(source)
        return self.value_of(source, op)

    def _encloses(self, trace: Any) -> bool:
        parent = self.parent
        while isinstance(parent, GraphTrace):
            if parent is trace:
                return True
            parent = parent.parent
        return False

    # -- the Trace protocol -------------------------------------------------------------

    def process(self, primitive: Primitive, args: tuple, params: dict[str, Any]) -> Any:
        inputs = [self.value_of(a, primitive.name) for a in args]
        symbols = self._emit(primitive, inputs, params)
        return tuple(symbols) if primitive.multiple_results else symbols[0]

    def _append(self, equation: Equation) -> None:
        self.graph.equations.append(equation)
        for output in equation.outputs:
            self._producers[id(output)] = equation
        if equation.location is not None:
            key = (equation.location.filename, equation.location.line)
            self.op_lines[key] = self.op_lines.get(key, 0) + 1

    def constant(self, array: Any, device: str | None = None) -> SymbolicTensor:
        """A constant op; small constants (Python scalars mostly) are made once per trace.
        (Its placement is its users': they follow their placed inputs.)"""
        array = np.asarray(array)
        refuse_strings(ShapedType(array.shape, array.dtype), "a constant made while tracing")
        if array.size > SMALL_CONSTANT:
            return self.process(constant_p, (), {"value": array})
        key = (array.dtype.str, array.shape, array.tobytes())
        symbol = self._constants.get(key)
        if symbol is None:
            symbol = self._constants[key] = self.process(constant_p, (), {"value": array})
        return symbol

    def read_variable(self, variable: Any) -> SymbolicTensor:
        if self.frozen:
            return self.constant(variable.numpy())
        handle = self._handle(variable)
        return self._emit(state.read_variable_p, [handle], {})[0]

    def assign_variable(self, variable: Any, value: Tensor) -> None:
        if self.frozen:
            raise StagingError(
                f"a frozen function cannot write variable {variable.name!r}: its variables "
                f"are constants; freeze a function that only reads them{describe_location()}")
        handle = self._handle(variable)
        self._emit(state.assign_variable_p, [handle, self.value_of(value, "assign")], {})

    def _handle(self, variable: Any) -> Value:
        return self._capture(variable, ResourceType(ShapedType(variable.shape, variable.dtype)))

    def _emit(self, primitive: Primitive, inputs: list[Value], params: dict) -> list:
        types = primitive.abstract_eval(*(v.type for v in inputs), **params)
        types = types if primitive.multiple_results else (types,)
        device = self._placement(primitive, inputs, params)
        outputs = [Value(t, device=device) for t in types]
        self._append(Equation(primitive, inputs, params, outputs, user_location(), device))
        return [SymbolicTensor(self, v) for v in outputs]

    def _placement(self, primitive: Primitive, inputs: list[Value], params: dict) -> str | None:
        """The device of an op, as eager execution would place it: a scope opened inside
        the trace, a copy's target, else the first input's placement; None for the
        function's own device (the caller's scope, fixed per trace)."""
        if devices.depth() > self._scope_depth:
            device = devices.current()
        elif primitive is device_copy_p:
            device = params["device"]
        else:
            device = next((v.device for v in inputs if v.device is not None), None)
        return None if device == self.graph.device else device

    def producer(self, tensor: SymbolicTensor) -> Equation | None:
        """The equation of this trace that computes `tensor` (None for an argument or a
        capture)."""
        return self._producers.get(id(tensor._node))

    def static_value(self, tensor: Any) -> np.ndarray | None:
        """The value of a traced tensor of this trace that elementwise and structural ops
        compute from constants alone (TensorFlow's `tf.get_static_value`), else None. Only
        those pure ops run, on small values, and nothing is recorded."""
        if not isinstance(tensor, SymbolicTensor) or tensor._trace is not self:
            return None
        return self._static(tensor._node, STATIC_DEPTH)

    def _static(self, node: Value, depth: int) -> np.ndarray | None:
        equation = self._producers.get(id(node))
        if equation is None or depth == 0 or equation.primitive.stateful:
            return None
        if equation.primitive is constant_p:
            return equation.params["value"]
        if equation.primitive.family not in _STATIC_FAMILIES or any(
                _size(v.type.shape) > SMALL_CONSTANT for v in equation.outputs):
            return None
        inputs = [self._static(v, depth - 1) for v in equation.inputs]
        if any(value is None or np.size(value) > SMALL_CONSTANT for value in inputs):
            return None
        results = run_equation(equation, inputs)
        return next(np.asarray(r) for v, r in zip(equation.outputs, results, strict=True)
                    if v is node)

    def variable_created(self, variable: Any) -> None:
        if not self.allow_variable_creation:
            raise ValueError(
                "sf.function: a variable was created on a call other than the first; "
                "create state only on the first call (e.g. `if self.v is None: self.v = "
                f"sf.Variable(...)`) or outside the function{describe_location()}"
            )
        self.created_variables.append(variable)

    def lift(self, value: Any) -> Any:
        """The concrete value of a traced tensor computed only from captures and constants.

        Used for initial values of variables created while tracing: every equation so far
        that does not depend on the function's arguments runs once, eagerly, in order
        (so random draws advance their generator as they would eagerly).
        """
        if not isinstance(value, SymbolicTensor) or value._trace is not self:
            return value

        env = self._lifted
        for capture in self.graph.captures:
            env.setdefault(id(capture.value), _capture_value(capture.source, self.parent))
        for eq in self.graph.equations[self._lifted_upto:]:
            if all(id(v) in env for v in eq.inputs):
                results = run_equation(eq, [env[id(v)] for v in eq.inputs])
                env.update((id(v), r) for v, r in zip(eq.outputs, results, strict=True))
        self._lifted_upto = len(self.graph.equations)
        if id(value._node) not in env:
            raise ValueError(
                "sf.Variable: the initial value depends on the function's arguments; "
                f"compute it from constants or create the variable outside{describe_location()}"
            )
        return wrap(env[id(value._node)])


def _size(shape: tuple[int | None, ...]) -> float:
    """The element count of a traced shape (infinite where a dim is unknown)."""
    return float("inf") if None in shape else float(np.prod(shape))


def refuse_strings(type_: ShapedType | ResourceType, what: str) -> None:
    """Raise naming `what` and the user's line if `type_` is a string tensor's: strings are
    host-only values, never staged (TensorFlow compiles no string op either, under XLA)."""
    if isinstance(type_, ShapedType) and type_.dtype.kind == "O":
        raise TypeError(
            f"{what} is a string tensor ({type_}), and sf.function cannot stage string "
            "tensors (host-only values): work on strings outside the function "
            "and pass it numbers (sf.strings.to_number, sf.strings.length), or pass a "
            "Python str, which the trace keeps as a constant of its own"
            f"{describe_location()}")


def _capture_value(source: Any, parent: Any) -> Any:
    """The run-time value of a capture: an array, a variable object, or an outer value."""
    if isinstance(source, SymbolicTensor):
        return np.asarray(parent.lift(source)._value)
    if isinstance(source, Tensor):
        return source._value
    return source


def constant_value(tensor: SymbolicTensor) -> np.ndarray | None:
    """The value of a traced tensor that a constant op made (an ``sf.constant`` inside the
    function), else None: what an op whose result shape depends on an argument's value
    (a resize's size) can read while tracing, as TensorFlow's static values."""
    node = tensor._node
    for equation in reversed(tensor._trace.graph.equations):
        if any(output is node for output in equation.outputs):
            return equation.params["value"] if equation.primitive is constant_p else None
    return None
