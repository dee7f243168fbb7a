"""`sf.GradientTape`: tape-based reverse-mode differentiation (the paper, section 4.2).

A tape records an op only while it is active and only when the op touches a value the tape
watches; the results of a recorded op are watched in turn. `gradient` walks the records
backwards applying each primitive's gradient rule. The rules are written with the op
functions, so an outer tape records the gradient computation of an inner one (higher
order), and inside `sf.function` the whole backward pass becomes IR.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from stageflow.core import config, context, dtypes, nest
from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import ones_like, zeros, zeros_like
from stageflow.frontend.ops.elementwise import add
from stageflow.frontend.ops.shape import broadcast_to, one_hot, reshape, stack
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import GraphTrace
from stageflow.primitives.autodiff import NEEDED
from stageflow.primitives.functional import stop_gradient_p


@dataclass(eq=False, slots=True)
class Record:
    """One recorded op: `outputs = rule-owner(*inputs, **params)`."""

    primitive: Any  # a Primitive, or anything with `name`, `vjp`, `differentiable`
    inputs: list[Any]
    params: dict[str, Any]
    outputs: list[Any]


class _Tapes(threading.local):
    def __init__(self) -> None:
        self.active: list[GradientTape] = []


_tapes = _Tapes()
context.inherit_list_in_threads(_tapes, "active")


class UnconnectedGradients(enum.Enum):
    """What `GradientTape.gradient` gives for a source the target does not depend on:
    ``NONE`` (the default) gives None, ``ZERO`` zeros of the source's shape and dtype
    (TensorFlow's ``tf.UnconnectedGradients``; the strings ``"none"`` and ``"zero"`` are
    taken too).

    >>> x, y = sf.constant(2.0), sf.constant([1.0, 2.0])
    >>> with sf.GradientTape() as tape:
    ...     tape.watch([x, y])
    ...     z = x * x
    >>> tape.gradient(z, [x, y], unconnected_gradients=sf.UnconnectedGradients.ZERO)
    [sf.Tensor(4., shape=(), dtype=float32), sf.Tensor([0., 0.], shape=(2,), dtype=float32)]
    """

    NONE = "none"
    ZERO = "zero"


class GradientTape:
    """Records ops on watched values while active; `gradient` differentiates them.

    >>> x = sf.Variable(3.0)
    >>> with sf.GradientTape() as tape:
    ...     y = x * x
    >>> tape.gradient(y, x)
    sf.Tensor(6., shape=(), dtype=float32)
    """

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True) -> None:
        self.persistent = persistent
        self.watch_accessed_variables = watch_accessed_variables
        self._records: list[Record] = []
        self._watched: dict[int, Any] = {}  # id -> the watched tensor (kept alive)
        self._watched_variables: dict[int, Any] = {}
        self._variable_reads: dict[int, list[Any]] = {}
        self._recording = False
        self._used = False
        self._trace: Any = None
        self._slow_path: Any = None

    # -- activity -----------------------------------------------------------------------

    def __enter__(self) -> GradientTape:
        self._trace = context.current_trace()
        self._recording = True
        _tapes.active.append(self)
        self._slow_path = context.slow_path(tapes=1)
        self._slow_path.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._recording = False
        _tapes.active.remove(self)
        self._slow_path.__exit__(*exc)

    @contextmanager
    def stop_recording(self) -> Iterator[None]:
        """Run the block without recording on this tape."""
        previous, self._recording = self._recording, False
        try:
            yield
        finally:
            self._recording = previous

    # -- watching and recording ---------------------------------------------------------

    def watch(self, tensor: Any) -> None:
        """Watch a tensor, a variable, or any nest of them."""
        for leaf in nest.flatten(tensor)[0]:
            if hasattr(leaf, "_store"):  # a variable
                self._watched_variables[id(leaf)] = leaf
            elif isinstance(leaf, Tensor):
                self._watched[id(leaf)] = leaf
            else:
                raise TypeError(f"GradientTape.watch: cannot watch {type(leaf).__name__}"
                                f"{describe_location()}")

    def watched_variables(self) -> list[Any]:
        return list(self._watched_variables.values())

    def _record(self, primitive: Any, inputs: list, params: dict, outputs: list) -> None:
        watched = self._watched
        for x in inputs:  # (a loop, not any(): no generator per op)
            if id(x) in watched:
                break
        else:
            return
        self._records.append(Record(primitive, inputs, params, outputs))
        for y in outputs:
            if isinstance(y, Tensor) and y.dtype in dtypes.INEXACT:
                watched[id(y)] = y

    def _variable_read(self, variable: Any, tensor: Any) -> None:
        if id(variable) not in self._watched_variables:
            if not (self.watch_accessed_variables and variable.trainable):
                return
            self._watched_variables[id(variable)] = variable
        self._watched[id(tensor)] = tensor
        self._variable_reads.setdefault(id(variable), []).append(tensor)

    # -- differentiation ----------------------------------------------------------------

    def gradient(self, target: Any, sources: Any, output_gradients: Any = None,
                 unconnected_gradients: UnconnectedGradients | str = UnconnectedGradients.NONE
                 ) -> Any:
        """d(sum of targets)/d(sources), with the nest of `sources`; a source the targets
        do not depend on gets None, or zeros with `unconnected_gradients` ``ZERO``
        (`UnconnectedGradients`). `output_gradients` seed the targets (ones by default)."""
        try:
            unconnected = UnconnectedGradients(unconnected_gradients)
        except ValueError:
            raise ValueError(f"GradientTape.gradient: unconnected_gradients must be "
                             f"sf.UnconnectedGradients.NONE or .ZERO, got "
                             f"{unconnected_gradients!r}{describe_location()}") from None
        if self._used and not self.persistent:
            raise RuntimeError("GradientTape.gradient can only be called once on a "
                               "non-persistent tape; create it with persistent=True"
                               f"{describe_location()}")
        self._used = True
        targets = [self._read_target(t) for t in nest.flatten(target)[0]]
        seeds = (None,) * len(targets) if output_gradients is None else nest.flatten(
            output_gradients)[0]
        source_leaves, source_tree = nest.flatten(sources)
        with self.stop_recording():
            results = self._compiled_gradients(targets, seeds, source_leaves)
            if results is None:
                cotangents = backpropagate(self._records, targets, seeds, self._watched)
                results = [self._source_gradient(s, cotangents) for s in source_leaves]
            if unconnected is UnconnectedGradients.ZERO:
                results = [_zeros_for(s) if g is None else g
                           for s, g in zip(source_leaves, results, strict=True)]
        return nest.unflatten(source_tree, results)

    def _compiled_gradients(self, targets: list, seeds: Any, sources: list) -> list | None:
        """The sources' gradients by the compiled backward pass of a recurring tape
        (`models.backward_runner`), or None: not compiled (yet), or not here, where the
        rules' ops must go on an outer recording tape (higher orders) or into a trace, or
        be seen one by one (`sf.debugging.enable_check_numerics`' op observer)."""
        if (_backward_runner is None or not config.eager_compile
                or isinstance(self._trace, GraphTrace) or recording_tapes()
                or context.state.op_observer is not None):
            return None
        return _backward_runner(self, targets, seeds, sources)

    def _read_target(self, target: Any) -> Any:
        """A variable as a target is read as if on the tape (TensorFlow reads it so): the
        gradient of a variable with respect to itself is one."""
        if not hasattr(target, "_store"):
            return target
        with self.stop_recording():
            tensor = target.read_value()
        self._variable_read(target, tensor)
        return tensor

    def _source_gradient(self, source: Any, cotangents: dict[int, Any]) -> Any:
        if hasattr(source, "_store"):
            reads = [cotangents.get(id(t)) for t in self._variable_reads.get(id(source), [])]
            return sum_all([g for g in reads if g is not None])
        if not isinstance(source, Tensor):
            raise TypeError(f"GradientTape.gradient: sources must be tensors or variables, "
                            f"got {type(source).__name__}{describe_location()}")
        if id(source) not in self._watched:  # an unwatched tensor is a constant here
            return None
        return cotangents.get(id(source))

    def reset(self) -> None:
        """Forget everything recorded and watched, as a new tape would (TensorFlow's
        ``reset``): inside the ``with`` block, recording goes on from here."""
        self._records.clear()
        self._watched.clear()
        self._watched_variables.clear()
        self._variable_reads.clear()
        self._used = False

    def batch_jacobian(self, target: Any, source: Any) -> Any:
        """d target[b, i...] / d source[b, j...] for each row b, shaped ``target.shape +
        source.shape[1:]``, where row b of the target depends on row b of the source only
        (TensorFlow's ``batch_jacobian``): one backward pass per element of a target row,
        seeded in every row at once, not one per element of the whole target.

        >>> x = sf.constant([[1.0, 2.0], [3.0, 4.0]])
        >>> with sf.GradientTape() as tape:
        ...     tape.watch(x)
        ...     y = x * x
        >>> tape.batch_jacobian(y, x)[1]
        sf.Tensor([[6., 0.],
                   [0., 8.]], shape=(2, 2), dtype=float32)
        """
        if not self.persistent and self._used:
            raise RuntimeError("GradientTape.batch_jacobian: the tape was already used "
                               f"(create it with persistent=True){describe_location()}")
        self._used = True
        target, values = convert_to_tensor(target), convert_to_tensor(source)
        if target.ndim < 1 or values.ndim < 1 or target.shape[0] != values.shape[0]:
            raise ValueError(f"GradientTape.batch_jacobian: the target {target.shape} and the "
                             f"source {values.shape} need the same first (batch) dim"
                             f"{describe_location()}")
        batch, row = target.shape[0], 1
        for d in target.shape[1:]:
            row *= d
        columns = []
        with self.stop_recording():
            for i in range(row):
                seed = reshape(broadcast_to(one_hot(i, row, dtype=target.dtype), (batch, row)),
                               target.shape)
                cotangents = backpropagate(self._records, [target], [seed], self._watched)
                grad = self._source_gradient(source, cotangents)
                columns.append(zeros_like(values) if grad is None else grad)
        shape = tuple(target.shape) + tuple(values.shape[1:])
        if not columns:
            return zeros(shape, target.dtype)
        return reshape(stack(columns, axis=1), shape)

    def jacobian(self, target: Any, source: Any) -> Any:
        """d target[i...] / d source[j...], shaped target.shape + source.shape."""
        if not self.persistent and self._used:
            raise RuntimeError("GradientTape.jacobian: the tape was already used")
        self._used = True
        target = convert_to_tensor(target)
        size = 1
        for d in target.shape:
            size *= d
        rows = []
        with self.stop_recording():
            for i in range(size):
                seed = reshape(one_hot(i, size, dtype=target.dtype), target.shape)
                cotangents = backpropagate(self._records, [target], [seed], self._watched)
                grad = self._source_gradient(source, cotangents)
                rows.append(zeros_like(source) if grad is None else grad)
        source_shape = tuple(convert_to_tensor(source).shape)
        if not rows:
            return zeros(tuple(target.shape) + source_shape, target.dtype)
        return reshape(stack(rows), tuple(target.shape) + source_shape)


def backpropagate(records: list[Record], targets: list, seeds: list | tuple,
                  watched: dict[int, Any]) -> dict[int, Any]:
    """Cotangents (by tensor id) of everything recorded, from `targets` seeded by `seeds`.

    Each rule is told which operands are `watched` (sources, or computed from them): only
    their cotangents can reach a source, so only those are computed (`autodiff.NEEDED`)."""
    cotangents: dict[int, Any] = {}
    for target, seed in zip(targets, seeds, strict=True):
        target = convert_to_tensor(target)
        if not dtypes.is_inexact(target.dtype):
            continue
        seed = ones_like(target) if seed is None else convert_to_tensor(seed, target.dtype)
        _accumulate(cotangents, target, seed)
    get = cotangents.get
    needed = NEEDED
    previous = needed.mask
    try:
        for record in reversed(records):
            outputs = record.outputs
            outgoing = [get(id(y)) for y in outputs]
            primitive = record.primitive
            for g in outgoing:
                if g is not None:
                    break
            else:
                continue
            if not primitive.differentiable:
                continue
            rule = primitive.vjp
            if rule is None:
                raise LookupError(f"differentiation rule for '{primitive.name}' is "
                                  "not implemented")
            inputs = record.inputs
            needed.mask = [id(x) in watched for x in inputs]
            incoming = rule(outgoing, inputs, outputs, **record.params)
            for x, g in zip(inputs, incoming, strict=True):
                if g is not None and isinstance(x, Tensor) and x.dtype in dtypes.INEXACT:
                    _accumulate(cotangents, x, g)
    finally:
        needed.mask = previous
        needed.last = None  # (it holds the last rule's operands alive)
    return cotangents


def _zeros_for(source: Any) -> Any:
    """The gradient of an unconnected source under ``UnconnectedGradients.ZERO``: zeros
    shaped as the source (a variable's without reading it)."""
    if hasattr(source, "_store"):
        return zeros(source.shape, source.dtype)
    return zeros_like(source)


def _accumulate(cotangents: dict[int, Any], tensor: Any, gradient: Any) -> None:
    previous = cotangents.get(id(tensor))
    cotangents[id(tensor)] = gradient if previous is None else add(previous, gradient)


def sum_all(gradients: list) -> Any:
    if not gradients:
        return None
    total = gradients[0]
    for g in gradients[1:]:
        total = add(total, g)
    return total


_backward_runner: Callable[[GradientTape, list, Any, list], list | None] | None = None


def set_backward_runner(runner: Callable[[GradientTape, list, Any, list], list | None]
                        ) -> None:
    """Install the runner of compiled backward passes (`models.backward_runner`, above
    the compiler: this layer cannot import it)."""
    global _backward_runner
    _backward_runner = runner


def record(primitive: Any, inputs: tuple | list, params: dict, result: Any) -> None:
    """Offer an applied op to the active tapes of the current trace (called by `bind`)."""
    tapes = _tapes.active
    if not tapes:
        return
    trace = context.current_trace()
    outputs = list(result) if isinstance(result, tuple) else [result]
    for tape in tapes:
        if tape._recording and tape._trace is trace:
            tape._record(primitive, list(inputs), params, outputs)


def variable_read(variable: Any, tensor: Any) -> None:
    """Tell the active tapes of the current trace that `variable` was read as `tensor`."""
    tapes = _tapes.active
    if not tapes:
        return
    trace = context.current_trace()
    for tape in tapes:
        if tape._recording and tape._trace is trace:
            tape._variable_read(variable, tensor)


def recording_tapes() -> int:
    """How many tapes record ops of the current trace right now."""
    trace = context.current_trace()
    return sum(1 for t in _tapes.active if t._recording and t._trace is trace)


def would_watch(variable: Any) -> bool:
    """Whether reading `variable` now would be watched by an active tape of this trace."""
    trace = context.current_trace()
    return any(t._recording and t._trace is trace and (
        id(variable) in t._watched_variables
        or (t.watch_accessed_variables and variable.trainable)) for t in _tapes.active)


def any_watching(inputs: list) -> bool:
    """Whether an active tape of the current trace watches one of `inputs`."""
    trace = context.current_trace()
    for tape in _tapes.active:
        if tape._recording and tape._trace is trace:
            watched = tape._watched
            for x in inputs:
                if id(x) in watched:
                    return True
    return False


class _CustomGradient:
    """The rule owner for one `custom_gradient` call: its vjp calls the user's grad fn."""

    differentiable = True

    def __init__(self, name: str, grad_fn: Callable, n_outputs: int) -> None:
        self.name = f"custom_gradient({name})"
        self._grad_fn = grad_fn
        self._n_outputs = n_outputs

    def vjp(self, cotangents: list, inputs: list, outputs: list) -> list:
        filled = [zeros_like(y) if g is None else g for g, y in zip(cotangents, outputs,
                                                                  strict=True)]
        grads = self._grad_fn(*filled)
        grads = list(grads) if isinstance(grads, list | tuple) else [grads]
        if len(grads) != len(inputs):
            raise ValueError(f"{self.name}: the gradient function returned {len(grads)} "
                             f"gradients for {len(inputs)} inputs")
        return grads


def custom_gradient(f: Callable) -> Callable:
    """Decorate `f(*x) -> (y, grad_fn)` so that tapes use `grad_fn(dy) -> dx` for it.

    >>> @sf.custom_gradient
    ... def clipped_identity(x):
    ...     return sf.identity(x), lambda dy: sf.clip_by_value(dy, -1.0, 1.0)
    >>> sf.grad(lambda x: 5.0 * clipped_identity(x))(sf.constant(2.0))
    sf.Tensor(1., shape=(), dtype=float32)
    """

    def wrapped(*args: Any) -> Any:
        inputs = [convert_to_tensor(a) for a in args]
        tapes = [t for t in _tapes.active if t._recording]
        for tape in tapes:
            tape._recording = False
        try:
            result, grad_fn = f(*inputs)
            leaves, tree = nest.flatten(result)
            # An output that is an input object (sf.identity) needs its own identity.
            leaves = [stop_gradient(y) if any(y is x for x in inputs) else y
                      for y in leaves]
            result = nest.unflatten(tree, leaves)
        finally:
            for tape in tapes:
                tape._recording = True
        outputs = leaves
        rule_owner = _CustomGradient(getattr(f, "__name__", "f"), grad_fn, len(outputs))
        record(rule_owner, inputs, {}, tuple(outputs))
        return result

    wrapped.__name__ = getattr(f, "__name__", "custom_gradient")
    wrapped.__doc__ = f.__doc__
    return wrapped


def grad(f: Callable, argnums: int | tuple[int, ...] = 0) -> Callable:
    """The function computing df/dx with respect to argument(s) `argnums` of `f`.

    f takes and returns float tensors (f's result a scalar); the gradient has the argument's
    shape and dtype.

    >>> df = sf.grad(lambda x: sf.reduce_sum(x * x))
    >>> df(sf.constant([1.0, 2.0]))
    sf.Tensor([2., 4.], shape=(2,), dtype=float32)
    >>> sf.grad(lambda x, y: x * y, argnums=(0, 1))(sf.constant(2.0), sf.constant(3.0))
    (sf.Tensor(3., shape=(), dtype=float32), sf.Tensor(2., shape=(), dtype=float32))
    """
    value_and_grad_f = value_and_grad(f, argnums)

    def gradient_function(*args: Any, **kwargs: Any) -> Any:
        return value_and_grad_f(*args, **kwargs)[1]

    return gradient_function


def value_and_grad(f: Callable, argnums: int | tuple[int, ...] = 0) -> Callable:
    """The function computing (f(x), df/dx) with respect to argument(s) `argnums`.

    >>> sf.value_and_grad(lambda x: x ** 3.0)(sf.constant(2.0))
    (sf.Tensor(8., shape=(), dtype=float32), sf.Tensor(12., shape=(), dtype=float32))
    """
    def value_and_gradient(*args: Any, **kwargs: Any) -> Any:
        positions = (argnums,) if isinstance(argnums, int) else tuple(argnums)
        args = [convert_to_tensor(a) if i in positions and not hasattr(a, "_store") else a
                for i, a in enumerate(args)]
        with GradientTape() as tape:
            tape.watch([args[i] for i in positions])
            value = f(*args, **kwargs)
        grads = tape.gradient(value, [args[i] for i in positions])
        return value, grads[0] if isinstance(argnums, int) else tuple(grads)

    return value_and_gradient


def stop_gradient(x: Any) -> Any:
    """`x` with no gradient flowing through it (tapes treat it as a constant).

    >>> sf.grad(lambda x: x * sf.stop_gradient(x))(sf.constant(3.0))
    sf.Tensor(3., shape=(), dtype=float32)
    """
    return stop_gradient_p.bind(convert_to_tensor(x))


context.set_tape_recorder(record)
