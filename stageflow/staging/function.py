"""`sf.function`: the tracing JIT with its trace cache (the paper, section 4.6).

A `Function` maps input signatures to `ConcreteFunction`s. The key of a call is, per
argument leaf: dtype and shape for tensors (and for variables, which are passed by
reference), the value for hashable Python objects, the identity otherwise — plus the nest
structure and the device scope. A composite argument (`sf.RaggedTensor`, `sf.SparseTensor`,
`sf.TensorArray`) is passed as its tensors, keyed on the shapes its `_nest_shapes` leaves
open, as TensorFlow keys on a TypeSpec. A miss traces the Python function in a
`GraphTrace`.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import threading
import time
import warnings
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

import numpy as np

from stageflow.core import config, context, devices, nest, profiling
from stageflow.core.devices import HOST
from stageflow.core.primitive import ShapedType
from stageflow.core.source import describe_location
from stageflow.core.tensor_shape import TensorShape
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.summary import trace as summary_trace
from stageflow.frontend.tensor import PlacedTensor, Tensor
from stageflow.frontend.tracer import GraphTrace, SymbolicTensor, refuse_strings
from stageflow.frontend.variables import Variable
from stageflow.staging.autograph import convert
from stageflow.staging.concrete import ConcreteFunction, trace_function

CACHE_SIZE = 64
RETRACE_WINDOW, RETRACE_LIMIT = 10, 5


class RetracingWarning(UserWarning):
    """A staged function is traced again and again; its inputs keep changing signature.

    >>> issubclass(sf.RetracingWarning, UserWarning)
    True
    """


class _Identity:
    """A cache-key leaf for unhashable objects: equal only to the very same object."""

    __slots__ = ("ref", "strong")

    def __init__(self, obj: Any) -> None:
        try:
            self.ref, self.strong = weakref.ref(obj), None
        except TypeError:
            self.ref, self.strong = None, obj

    def get(self) -> Any:
        return self.strong if self.ref is None else self.ref()

    def __hash__(self) -> int:
        return id(self.get())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.get() is self.get() is not None


def _call_key(leaves: list, treedef: Any, shapes: list | None) -> tuple:
    """The trace cache's key of a call's flat arguments: their tree, each leaf's key (its
    dtype and shape, or the Python value) and the device the call runs on."""
    shapes = shapes or [None] * len(leaves)
    return (treedef, tuple(_leaf_key(leaf, shape) for leaf, shape in zip(leaves, shapes,
                                                                         strict=True)),
            _call_device(leaves))


def _leaf_key(leaf: Any, shape: tuple | None = None) -> Any:
    if isinstance(leaf, Tensor):
        return ("tensor", leaf.dtype, tuple(leaf.shape) if shape is None else shape)
    if isinstance(leaf, TensorSpec):
        return ("tensor", leaf.dtype, leaf.shape)
    if isinstance(leaf, Variable):
        # By identity: a graph may read the same variable through an argument and a
        # closure, or through two arguments, and must not mistake one for another later.
        return ("variable", _Identity(leaf))
    try:
        hash(leaf)
    except TypeError:
        return ("id", _Identity(leaf))
    if isinstance(leaf, type) or callable(leaf) and not isinstance(leaf, int | float):
        return ("id", _Identity(leaf))
    return ("value", type(leaf), leaf)


def _describe_change(old: Any, new: Any) -> str:
    if old[0] == new[0] == "variable":
        return "a different variable object was passed"
    if old[0] == new[0] == "tensor":
        if old[1] != new[1]:
            return f"dtype changed from {old[1].name} to {new[1].name}"
        return f"shape changed from {old[2]} to {new[2]}"
    if old[0] == new[0] == "value":
        return f"Python value changed from {old[2]!r} to {new[2]!r}"
    return f"changed from {old[0]} to {new[0]}"


class Function:
    """A polymorphic staged function: one graph function per input signature.

    Made by `sf.function`; calling it traces once per input signature and runs the graph.

    >>> @sf.function
    ... def scale(x):
    ...     return x * 3.0
    >>> scale(sf.constant([1.0, 2.0]))
    sf.Tensor([3., 6.], shape=(2,), dtype=float32)
    >>> scale(sf.constant([4.0, 5.0]))
    sf.Tensor([12., 15.], shape=(2,), dtype=float32)
    >>> scale
    <sf.function scale (1 traces)>
    """

    def __init__(
        self,
        python_function: Callable,
        input_signature: list[TensorSpec] | tuple | None = None,
        jit: bool = True,
        reduce_retracing: bool = False,
        name: str | None = None,
        instance: Any = None,
        autograph: bool = True,
    ) -> None:
        self.python_function = python_function
        self.autograph = autograph
        self._converted: Any = None
        self._instance = None if instance is None else weakref.ref(instance)
        self.input_signature = None if input_signature is None else tuple(input_signature)
        self.jit = jit
        self.reduce_retracing = reduce_retracing
        # The name becomes IR and LLVM symbols, quoted: control characters, quotes and
        # backslashes would end them (a newline once ended the LLVM module's text early),
        # and LLVM's symbol lookup and PTX take ASCII only (Python names need not be).
        self.name = re.sub(r'[^\x20-\x7e]', lambda m: f"_u{ord(m[0]):04x}",
                           re.sub(r'[\x00-\x1f\x7f"\\]', "_",
                                  name or getattr(python_function, "__name__", "function")))
        self.tracing_count = 0
        self._signature = inspect.signature(python_function)
        self._positional = [
            p.name for p in self._signature.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        self._simple = all(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            for p in self._signature.parameters.values()
        )
        self._cache: OrderedDict[Any, ConcreteFunction] = OrderedDict()
        self._flat_cache: dict[tuple, ConcreteFunction] = {}
        self._traced_once = False
        self._calls: deque[bool] = deque(maxlen=RETRACE_WINDOW)
        self._last_key: tuple | None = None
        self._warned = False
        # (signature, why it was traced) per trace, for `stageflow report`.
        self.trace_history: list[tuple[str, str]] = []
        self._bound: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        # Held while tracing: concurrent first calls wait for the one trace that creates the
        # variables, then find its function cached. Reentrant: tracing may call the function
        # again (recursion through Python), which then traces within the same thread.
        self._tracing = threading.RLock()
        self._traces_running: set[tuple] = set()
        functools.update_wrapper(self, python_function)

    # -- calling ------------------------------------------------------------------------

    def _canonical(self, args: tuple, kwargs: dict) -> tuple:
        """Arguments in parameter order (defaults applied), as one tuple."""
        if self._instance is not None:
            args = (self._instance(), *args)
        if not kwargs and self._simple and len(args) == len(self._positional):
            return args
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as error:  # Python's message names neither the function nor what it takes
            raise TypeError(f"{self.name}{self._signature}: {error}") from None
        bound.apply_defaults()
        return tuple(bound.arguments.values())

    def arguments(self, canonical: tuple) -> dict[str, Any]:
        """Arguments in canonical order by parameter name, a method's instance left out."""
        names = list(self._signature.parameters)
        skip = 0 if self._instance is None else 1
        return dict(zip(names[skip:], canonical[skip:], strict=False))

    def _names(self, canonical: tuple) -> list[str]:
        names = list(self._signature.parameters)
        paths = []
        for name, value in zip(names, canonical, strict=False):
            paths.extend(name + path for path in nest.leaf_paths(value, expand_composites=True))
        return paths

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if config.functions_eager and not isinstance(context.current_trace(), GraphTrace):
            if self._instance is not None:
                args = (self._instance(), *args)
            return self.python_function(*args, **kwargs)
        if not kwargs and context.state.eager_fast:
            key = self._flat_key(args)
            concrete = self._flat_cache.get(key) if key is not None else None
            if concrete is not None:
                self._calls.append(False)
                return concrete.call_on_host(args)
        if profiling.state.session is not None and not isinstance(context.current_trace(),
                                                                   GraphTrace):
            traces = self.tracing_count
            with profiling.span(self.name, "function") as recorded:
                result = self._call(args, kwargs)
                recorded["traced"] = self.tracing_count > traces
            return result
        return self._call(args, kwargs)

    def _call(self, args: tuple, kwargs: dict) -> Any:
        """A call off the fast path: arguments of any structure, a cache miss, a trace
        under way, a tape or the profiler."""
        canonical = self._canonical(args, kwargs)
        if self.input_signature is not None:
            canonical = self._conform(canonical)
        leaves, treedef, shapes = _flatten_arguments(canonical)
        leaves = self._tensor_leaves(leaves, canonical)
        concrete = self._concrete_for(leaves, treedef, canonical, shapes=shapes)
        tensors = [leaf for leaf in leaves if isinstance(leaf, Tensor | Variable)]
        if isinstance(context.current_trace(), GraphTrace):
            return concrete.emit_call(tensors)
        key = None if kwargs or not concrete.on_host else self._flat_key(args)
        if key is not None:
            if len(self._flat_cache) >= CACHE_SIZE:
                self._flat_cache.clear()
            self._flat_cache[key] = concrete
        return concrete.call_flat(tensors)

    def _tensor_leaves(self, leaves: list, canonical: tuple) -> list:
        """NumPy leaves made tensors; one that cannot be (a dtype with no tensors, an array
        too big to copy) is an error naming its argument, not only the array's dtype."""
        converted = []
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, np.ndarray):
                try:
                    leaf = Tensor(leaf)
                except (TypeError, ValueError, MemoryError) as error:
                    name = self._names(canonical)[i]
                    raise _kind(error)(f"{self.name}: argument {name!r}: {error}") from None
            if isinstance(leaf, Tensor) and leaf.dtype.kind == "O":
                refuse_strings(ShapedType(leaf.shape, leaf.dtype),
                               f"{self.name}: argument {self._names(canonical)[i]!r}")
            converted.append(leaf)
        return converted

    def _flat_key(self, args: tuple) -> tuple | None:
        """The cache key of a call whose arguments are all eager tensors (the common case,
        looked up without flattening), or None."""
        if self._instance is not None or not self._simple or len(args) != len(self._positional):
            return None
        key = []
        for arg in args:
            if type(arg) is not Tensor:
                return None
            value = arg._value
            key.append((value.dtype, value.shape))
        return tuple(key)

    def call_python(self, canonical: tuple) -> Any:
        """Call the Python function with arguments in canonical (parameter) order."""
        args: list = []
        kwargs: dict = {}
        for parameter, value in zip(self._signature.parameters.values(), canonical,
                                    strict=True):
            if parameter.kind == parameter.VAR_POSITIONAL:
                args.extend(value)
            elif parameter.kind == parameter.KEYWORD_ONLY:
                kwargs[parameter.name] = value
            elif parameter.kind == parameter.VAR_KEYWORD:
                kwargs.update(value)
            else:
                args.append(value)
        return self._traced_function()(*args, **kwargs)

    def _traced_function(self) -> Callable:
        """What tracing runs: the converted function (AutoGraph) or the Python one."""
        if not self.autograph:
            return self.python_function
        if self._converted is None:
            converted = convert(self.python_function)
            self._converted = (converted.function if converted is not None
                               else self.python_function)
        return self._converted

    def converted_source(self) -> str:
        """The source AutoGraph generated for this function (what tracing runs)."""
        converted = convert(self.python_function) if self.autograph else None
        if converted is None:
            raise ValueError(f"{self.name}: no converted source (autograph=False, or the "
                             "source is unavailable)")
        return converted.source

    def _concrete_for(self, leaves: list, treedef: Any, canonical: tuple,
                      relaxed: bool = True, shapes: list | None = None) -> ConcreteFunction:
        """The function for this key: cached, else one traced with unknown dims that
        accepts it (a call), else traced. Asked for by specs (`get_concrete_function`), the
        function of exactly those specs: a relaxed one would not have their shapes."""
        if self.input_signature is not None:
            return self._signature_function(leaves, canonical)
        key = _call_key(leaves, treedef, shapes)
        concrete = self._cache.get(key)
        if concrete is not None:
            with contextlib.suppress(KeyError):  # evicted meanwhile by another thread's trace
                self._cache.move_to_end(key)
            self._calls.append(False)
            return concrete
        with self._tracing:
            concrete = self._cache.get(key)  # traced by another thread while this one waited
            if concrete is not None:
                return concrete
            concrete = self._relaxed_match(key) if relaxed else None
            if concrete is None:
                specs = self._specs(key, leaves, relax=relaxed)
                concrete = self._trace_once(key, specs, treedef, _relaxed_key(key, specs),
                                            key[2])
                self._note_retrace(key, canonical)
            self._cache[key] = concrete
            if len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return concrete

    def _specs(self, key: tuple, leaves: list, relax: bool = True) -> list:
        """The leaves to trace with: specs for tensors, relaxed when reduce_retracing asks."""
        specs = [TensorSpec(k[2], k[1]) if k[0] == "tensor" else leaf
                 for k, leaf in zip(key[1], leaves, strict=True)]
        if not self.reduce_retracing or not relax:
            return specs
        for old_key in reversed(self._cache):
            if old_key[0] != key[0] or old_key[2] != key[2]:
                continue
            pairs = list(zip(old_key[1], key[1], strict=True))
            if all(_same_but_dims(a, b) for a, b in pairs):
                return [TensorSpec(_relax(a[2], b[2]), b[1]) if b[0] == "tensor" else leaf
                        for (a, b), leaf in zip(pairs, leaves, strict=True)]
        return specs

    def _relaxed_match(self, key: tuple) -> ConcreteFunction | None:
        """A cached function traced with unknown dims that accepts this call too."""
        for concrete in reversed(self._cache.values()):
            if concrete.accepts(key):
                return concrete
        return None

    def _conform(self, canonical: tuple) -> tuple:
        """Arguments where the signature has a `TensorSpec` made tensors: NumPy values as
        they are (their dtype is then checked), lists, numbers and objects with
        ``__array__`` of the spec's dtype, as TensorFlow converts them."""
        specs = self._canonical(tuple(self.input_signature), {})
        conformed = []
        for name, value, spec in zip(self._signature.parameters, canonical, specs,
                                     strict=False):
            try:
                if isinstance(value, np.ndarray | np.generic):
                    value = Tensor(np.asarray(value))  # its dtype is checked, not cast
                elif isinstance(spec, TensorSpec) and not isinstance(
                        value, Tensor | Variable | TensorSpec):
                    value = convert_to_tensor(value, spec.dtype)
            except (TypeError, ValueError, MemoryError) as error:
                kind = MemoryError if isinstance(error, MemoryError) else TypeError
                raise kind(f"{self.name}: argument {name!r} (for {spec}) cannot be "
                           f"converted to a tensor: {error}") from None
            conformed.append(value)
        return (*conformed, *canonical[len(conformed):])

    def _signature_function(self, leaves: list, canonical: tuple) -> ConcreteFunction:
        device = _call_device(leaves)
        spec_args = self._canonical(tuple(self.input_signature), {})
        self._check_fixed(canonical, spec_args)
        kinds = Tensor | Variable | TensorSpec
        names = [n for n, leaf in zip(self._names(canonical), leaves, strict=False)
                 if isinstance(leaf, kinds)]
        tensors = [leaf for leaf in leaves if isinstance(leaf, kinds)]
        spec_leaves, treedef = nest.flatten(spec_args, expand_composites=True)
        spec_leaves, ranks = self._ranked(spec_leaves, tensors, names)
        key = ("signature", device, *ranks)
        concrete = self._cache.get(key)
        if concrete is None:
            with self._tracing:
                concrete = self._cache.get(key)
                if concrete is None:
                    concrete = self._trace_once(key, spec_leaves, treedef, None, device)
                    self._cache[key] = concrete
        concrete.check_arguments(tensors, names)
        return concrete

    def _ranked(self, spec_leaves: list, tensors: list, names: list[str]
                ) -> tuple[list, tuple[int, ...]]:
        """The signature's leaves with each spec of unknown rank (``TensorSpec(None)``)
        given the rank of the tensor passed for it, all its dims unknown, and those ranks:
        a function's IR has ranked types, so each rank gets its own trace (TensorFlow's
        one graph for every rank, as far as staging goes)."""
        if all(not isinstance(s, TensorSpec) or s.shape.rank is not None for s in spec_leaves):
            return spec_leaves, ()
        positions = [i for i, spec in enumerate(spec_leaves) if isinstance(spec, TensorSpec)]
        if len(positions) != len(tensors):
            raise TypeError(f"{self.name}: expected {len(positions)} tensor arguments, "
                            f"got {len(tensors)}")
        ranked, ranks = list(spec_leaves), []
        for position, tensor, name in zip(positions, tensors, names, strict=False):
            spec = spec_leaves[position]
            if spec.shape.rank is not None:
                continue
            rank = TensorShape(tensor.shape).rank
            if rank is None:
                raise ValueError(
                    f"{self.name}: argument {name!r} is {spec}, of unknown rank, and "
                    f"stageflow traces one function per rank: pass a tensor, or a spec of "
                    f"the rank wanted (sf.TensorSpec([None, None], {spec.dtype.name})), "
                    f"to get_concrete_function")
            ranked[position] = TensorSpec([None] * rank, spec.dtype, spec.name)
            ranks.append(rank)
        return ranked, tuple(ranks)

    def _check_fixed(self, canonical: tuple, spec_args: tuple) -> None:
        """Arguments the input_signature leaves out are traced once, with their defaults: a
        call passing another value (a different number, a tensor) would silently get the
        traced one, so it is an error naming the argument."""
        kinds = Tensor | Variable | TensorSpec
        for name, value, traced in zip(self._signature.parameters, canonical, spec_args,
                                       strict=False):
            if isinstance(traced, TensorSpec) or nest.is_composite(traced):
                continue  # tensor arguments: check_arguments checks them against their specs
            got, got_tree = nest.flatten(value)
            want, want_tree = nest.flatten(traced)
            if got_tree == want_tree and all(
                    isinstance(w, TensorSpec) or nest.is_composite(w)
                    or (not isinstance(g, kinds) and _same_value(g, w))
                    for g, w in zip(got, want, strict=True)):
                continue
            raise TypeError(f"{self.name}: argument {name!r} is {_describe_value(value)}, but "
                            f"the input_signature has no TensorSpec for it, so the function "
                            f"was traced with {traced!r} and cannot take another value")

    def _note_retrace(self, key: tuple, canonical: tuple) -> None:
        self._calls.append(True)
        previous, self._last_key = self._last_key, key
        reason = ("the first call" if previous is None
                  else self._change_reason(previous, key, canonical))
        self.trace_history.append((_describe_key(key), reason))
        if previous is not None and config.logging("retraces"):
            config.emit("retraces", f"{self.name}: {self._change_reason(previous, key, canonical)}")
        if self._warned or sum(self._calls) < RETRACE_LIMIT or previous is None:
            return
        reason = self._change_reason(previous, key, canonical)
        self._warned = True
        warnings.warn(
            f"sf.function {self.name!r} was traced {sum(self._calls)} times in its last "
            f"{len(self._calls)} calls; latest cause: {reason}. Pass input_signature="
            "[sf.TensorSpec(shape with None dims, dtype), ...] or reduce_retracing=True, and "
            "pass changing Python numbers as tensors.",
            RetracingWarning,
            stacklevel=4,
        )

    def _change_reason(self, previous: tuple, key: tuple, canonical: tuple) -> str:
        """What differs between two cache keys, naming the argument."""
        if previous[0] == key[0] and len(previous[1]) == len(key[1]):
            for name, old, new in zip(self._names(canonical), previous[1], key[1],
                                      strict=False):
                if old != new:
                    return f"argument {name!r}: {_describe_change(old, new)}"
        return "the nest structure of the arguments changed"

    def _trace_once(self, key: tuple, leaves: list, treedef: Any, trace_key: tuple | None,
                    device: str) -> ConcreteFunction:
        """`_trace`, with `key` marked as being traced (the lock held): a call for the same
        key meanwhile is the function calling itself with the arguments it is traced for, a
        recursion no trace can end (Python would only stop it at its recursion limit)."""
        if key in self._traces_running:
            what = "its input_signature" if key[0] == "signature" else _describe_key(key)
            raise RecursionError(
                f"{self.name} calls itself with the arguments it is being traced for, "
                f"{what}: the recursion would depend on tensor values, which a trace does "
                f"not have; loop with sf.while_loop, or recurse on Python values"
                f"{describe_location()}")
        self._traces_running.add(key)
        try:
            return self._trace(leaves, treedef, trace_key, device)
        finally:
            self._traces_running.discard(key)

    def _trace(self, leaves: list, treedef: Any, key: tuple | None,
               device: str) -> ConcreteFunction:
        """Trace for `device`; a first trace that creates variables is followed by one
        more, which is the one kept (the paper's state-creation rule)."""
        first = not self._traced_once
        self._traced_once = True
        self.tracing_count += 1
        start = time.perf_counter()
        concrete = trace_function(self, leaves, treedef, first, key, device)
        config.emit("compiles", f"{self.name}: traced {len(concrete.graph.equations)} ops in "
                    f"{(time.perf_counter() - start) * 1e3:.1f} ms")
        if first and concrete.created_variables:
            self.tracing_count += 1
            concrete = trace_function(self, leaves, treedef, False, key, device)
        summary_trace.collect(concrete.name, concrete.graph)
        concrete.trace_number = self.tracing_count
        return concrete

    # -- inspection ---------------------------------------------------------------------

    def get_concrete_function(self, *args: Any, **kwargs: Any) -> ConcreteFunction:
        """The graph function for these arguments (tensors or `TensorSpec`s), traced if new."""
        leaves, treedef, shapes, canonical = self._leaves(args, kwargs)
        return self._concrete_for(leaves, treedef, canonical,
                                  relaxed=not any(isinstance(x, TensorSpec) for x in leaves),
                                  shapes=shapes)

    def freeze(self, *args: Any, **kwargs: Any) -> ConcreteFunction:
        """A graph function for these arguments in which every variable the function reads
        is a constant holding the variable's value now (TensorFlow's
        ``convert_variables_to_constants_v2``, for inference): the compiler then treats a
        model's weights as it treats an imported model's, packing its filters once and
        folding what depends on them only (a batch norm's scale and shift). Later writes to
        the variables do not reach it: freeze again after training. A function that writes
        a variable cannot be frozen. Reads inside another `sf.function` it calls stay reads.

        >>> scale = sf.Variable(2.0)
        >>> f = sf.function(lambda x: x * scale)
        >>> frozen = f.freeze(sf.TensorSpec([None]))
        >>> _ = scale.assign(3.0)
        >>> frozen(sf.constant([1.0])).numpy(), f(sf.constant([1.0])).numpy()
        (array([2.], dtype=float32), array([3.], dtype=float32))
        """
        self.get_concrete_function(*args, **kwargs)  # the variables a first trace creates
        leaves, treedef, shapes, _ = self._leaves(args, kwargs)
        key = _call_key(leaves, treedef, shapes)
        return trace_function(self, self._specs(key, leaves, relax=False), treedef, False,
                              None, key[2], frozen=True)

    def _leaves(self, args: tuple, kwargs: dict) -> tuple[list, Any, list, tuple]:
        """The arguments of a call or a trace, canonical (conformed to the input
        signature, if any) and flat: leaves, tree, shapes and the canonical arguments."""
        if self.input_signature is not None and not args and not kwargs:
            args = tuple(self.input_signature)
        canonical = self._canonical(args, kwargs)
        if self.input_signature is not None:
            canonical = self._conform(canonical)
        leaves, treedef, shapes = _flatten_arguments(canonical)
        return self._tensor_leaves(leaves, canonical), treedef, shapes, canonical

    def experimental_get_tracing_count(self) -> int:
        """How many times the Python function was traced (TensorFlow's name for
        `tracing_count`).

        >>> double = sf.function(lambda x: x * 2.0)
        >>> _ = double(sf.constant(1.0)), double(sf.constant(2.0)), double(sf.constant([1.0]))
        >>> double.experimental_get_tracing_count()
        2
        """
        return self.tracing_count

    def pretty_printed_concrete_signatures(self, verbose: bool = True) -> str:
        """The signatures of the concrete functions traced so far, in tracing order, in
        TensorFlow's format (`stageflow.staging.signatures`), blank lines between them.

        >>> affine = sf.function(lambda x, scale=2.0: x * scale)
        >>> print(affine.get_concrete_function(sf.TensorSpec([None]))
        ...       .pretty_printed_signature(verbose=False))
        <lambda>(x, scale=2.0)
        >>> print(affine.pretty_printed_concrete_signatures())
        <lambda>(x, scale=2.0)
          Args:
            x: float32 Tensor, shape=(None,)
          Returns:
            float32 Tensor, shape=(None,)
        """
        traced = sorted({id(c): c for c in self._cache.values()}.values(),
                        key=lambda c: c.trace_number)
        return "\n\n".join(c.pretty_printed_signature(verbose) for c in traced)

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """As a method: `self` is bound and keyed by identity, one Function per instance."""
        if instance is None:
            return self
        bound = self._bound.get(instance)
        if bound is None:
            with self._tracing:  # one Function per instance, even when threads race here
                bound = self._bound.get(instance)
                if bound is None:
                    bound = Function(self.python_function, self.input_signature, self.jit,
                                     self.reduce_retracing, name=self.name, instance=instance,
                                     autograph=self.autograph)
                    self._bound[instance] = bound
        return bound

    def python_callable(self) -> Callable:
        """The Python function this stages, bound to its instance for a method: what a
        caller that stages it some other way (a strategy's replicas) calls instead.

        >>> double = sf.function(lambda x: x * 2.0)
        >>> double.python_callable()(sf.constant(1.0))
        sf.Tensor(2., shape=(), dtype=float32)
        """
        instance = self._instance() if self._instance is not None else None
        if instance is None:
            return self.python_function
        return functools.partial(self.python_function, instance)

    def __repr__(self) -> str:
        return f"<sf.function {self.name} ({self.tracing_count} traces)>"


def _flatten_arguments(canonical: tuple) -> tuple[list, Any, list]:
    """The leaves of the arguments with composites expanded (a composite is passed as its
    tensors), their structure, and per leaf the shape its cache key holds: a composite's
    ``_nest_shapes()`` (None where values of one signature differ, as TensorFlow's
    TypeSpecs leave the number of a ragged tensor's values open), else None (the tensor's
    own shape)."""
    leaves, treedef = nest.flatten(canonical, expand_composites=True)
    shapes: list = []
    for leaf in nest.flatten(canonical)[0]:
        if nest.is_composite(leaf):
            count = len(nest.flatten(leaf._nest_components()[0], expand_composites=True)[0])
            declared = getattr(leaf, "_nest_shapes", None)
            shapes.extend(declared() if declared is not None else [None] * count)
        else:
            shapes.append(None)
    return leaves, treedef, shapes


def _describe_key(key: tuple) -> str:
    """A cache key in words: each argument's dtype and shape (or value), and the device."""
    parts = []
    for leaf in key[1]:
        if leaf[0] == "tensor":
            dims = ", ".join("?" if d is None else str(d) for d in leaf[2])
            parts.append(f"{np.dtype(leaf[1]).name}[{dims}]")
        else:
            parts.append(repr(leaf[-1]) if leaf[0] != "variable" else "a variable")
    return f"({', '.join(parts)}) on {key[2]}"


def _kind(error: Exception) -> type[Exception]:
    """The built-in type to re-raise a conversion error as, with a message naming the
    argument (NumPy's own subclasses take other constructor arguments)."""
    return next(kind for kind in (MemoryError, TypeError, ValueError) if isinstance(error, kind))


def _same_value(got: Any, want: Any) -> bool:
    """Whether a Python argument is the value a signature's trace used (the same object,
    or an equal one of the same type)."""
    if got is want:
        return True
    try:
        return type(got) is type(want) and bool(got == want)
    except (TypeError, ValueError):  # e.g. an array's ambiguous truth value
        return False


def _describe_value(value: Any) -> str:
    if isinstance(value, Tensor | Variable):
        return f"a {type(value).__name__.lower()} {np.dtype(value.dtype).name}{list(value.shape)}"
    return repr(value)[:80]


def _call_device(leaves: list) -> str:
    """Where a call runs (part of the cache key): the innermost `sf.device` scope's device,
    else that of the first tensor argument on a device other than the host's, else the
    host (as an eager op is placed)."""
    scope = devices.current()
    if scope is not None:
        return scope
    return next((leaf.device for leaf in leaves if isinstance(leaf, PlacedTensor)), HOST)


def _same_but_dims(old: Any, new: Any) -> bool:
    if old == new:
        return True
    return (old[0] == new[0] == "tensor" and old[1] == new[1]
            and len(old[2]) == len(new[2]))


def _relaxed_key(key: tuple, specs: list) -> tuple:
    """The cache key of the traced signature (unknown dims where specs were relaxed)."""
    leaf_keys = tuple(("tensor", spec.dtype, spec.shape) if isinstance(spec, TensorSpec) else k
                      for k, spec in zip(key[1], specs, strict=True))
    return (key[0], leaf_keys, key[2])


def _relax(old: tuple, new: tuple) -> tuple:
    return tuple(a if a == b else None for a, b in zip(old, new, strict=True))


def function(
    func: Callable | None = None,
    input_signature: list[TensorSpec] | tuple | None = None,
    jit: bool = True,
    reduce_retracing: bool = False,
    autograph: bool = True,
    *,
    jit_compile: bool | None = None,
    experimental_relax_shapes: bool | None = None,
) -> Any:
    """Stage `func` as a polymorphic graph function (usable as `@sf.function(...)` too);
    with `autograph`, Python ``if``/``while``/``for`` on tensors become control-flow ops.

    `jit` compiles the staged graph to machine code (``jit=False`` interprets it op by op).
    TensorFlow's spellings are taken too: ``jit_compile`` (when given, it is `jit`) and
    ``experimental_relax_shapes`` (the older name of `reduce_retracing`).

    >>> @sf.function
    ... def affine(x, w):
    ...     return x @ w + 1.0
    >>> affine(sf.ones((1, 2)), sf.ones((2, 3)))
    sf.Tensor([[3., 3., 3.]], shape=(1, 3), dtype=float32)
    >>> affine
    <sf.function affine (1 traces)>
    """
    jit = jit if jit_compile is None else bool(jit_compile)
    if experimental_relax_shapes is not None:
        reduce_retracing = bool(experimental_relax_shapes)
    if func is None:
        return functools.partial(function, input_signature=input_signature, jit=jit,
                                 reduce_retracing=reduce_retracing, autograph=autograph)
    return Function(func, input_signature, jit, reduce_retracing, autograph=autograph)


__all__ = ["Function", "RetracingWarning", "SymbolicTensor", "function"]
