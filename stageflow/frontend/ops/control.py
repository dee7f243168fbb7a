"""Data-dependent control flow and escapes to Python: `cond`, `switch_case`, `while_loop`,
`fori_loop`, `py_func` (and `py_function`), `numpy_function`.

Eagerly each is what it says in Python (an ``if``, a ``while``, a call); while a function
is traced with a traced predicate or in a loop, each region is traced once into a graph and
one `cond`/`while` op holds them (`stageflow.primitives.control`), so the predicate's value
never causes a retrace and a loop's IR holds its body once, whatever the trip count.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from stageflow.core import context, dtypes, nest
from stageflow.core.primitive import ShapedType
from stageflow.core.source import describe_location
from stageflow.frontend.graph import Graph
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.elementwise import add, less, logical_and
from stageflow.frontend.regions import Region, emit, share_captures, trace_regions
from stageflow.frontend.spec import TensorSpec
from stageflow.frontend.tensor import Tensor, wrap
from stageflow.frontend.tracer import GraphTrace, SymbolicTensor
from stageflow.primitives.control import (
    CallbackKey,
    accepts,
    cond_p,
    declared_result,
    fits,
    join_types,
    py_func_p,
    while_p,
)


def _staging() -> GraphTrace | None:
    trace = context.current_trace()
    return trace if isinstance(trace, GraphTrace) else None


def _describe(structure: Any) -> str:
    """A nest of tensors as text: ``(f32[4], [i32[]])``."""
    leaves, treedef = nest.flatten(structure)
    shown = [_Shown(str(ShapedType(tuple(leaf.shape), leaf.dtype)) if isinstance(leaf, Tensor)
                    else repr(leaf)) for leaf in leaves]
    return repr(nest.unflatten(treedef, shown))


class _Shown(str):
    def __repr__(self) -> str:
        return str(self)


# -- cond and switch_case -------------------------------------------------------------------


def cond(pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any],
         name: str | None = None) -> Any:
    """``true_fn()`` if `pred` else ``false_fn()``.

    Eagerly (or with a Python or eager predicate) only the chosen function runs. With a
    traced predicate both are traced into the branches of one op: they must return the
    same structure of tensors with the same dtypes (dims that differ become unknown), and
    only the taken branch's effects happen when the graph runs.

    >>> sf.cond(sf.constant(True), lambda: sf.constant(1.0), lambda: sf.constant(0.0))
    sf.Tensor(1., shape=(), dtype=float32)
    >>> @sf.function
    ... def relu_sum(x):
    ...     return sf.cond(sf.reduce_sum(x) > 0, lambda: sf.reduce_sum(x), lambda: sf.constant(0.0))
    >>> relu_sum(sf.constant([1.0, -3.0]))
    sf.Tensor(0., shape=(), dtype=float32)
    """
    if not isinstance(pred, SymbolicTensor):
        return true_fn() if bool(pred) else false_fn()
    if pred.dtype != np.bool_ or pred.shape != ():
        raise TypeError(f"cond: the predicate must be a bool scalar, got "
                        f"{ShapedType(tuple(pred.shape), pred.dtype)}{describe_location()}")
    return _branches(pred, [true_fn, false_fn], name or "cond", ["true_fn", "false_fn"])


def switch_case(branch_index: Any, branch_fns: Sequence[Callable[[], Any]]
                | Mapping[int, Callable[[], Any]], default: Callable[[], Any] | None = None,
                name: str | None = None) -> Any:
    """``branch_fns[branch_index]()``; an index out of range runs `default`, or the last
    branch when there is none (TensorFlow's rule). `branch_fns` may be a dict from 0..n-1.

    >>> sf.switch_case(sf.constant(1), [lambda: sf.constant(10), lambda: sf.constant(20)])
    sf.Tensor(20, shape=(), dtype=int32)
    """
    if isinstance(branch_fns, Mapping):
        if sorted(branch_fns) != list(range(len(branch_fns))):
            raise ValueError(f"switch_case: the keys of branch_fns must be 0..n-1, got "
                             f"{sorted(branch_fns)}{describe_location()}")
        branch_fns = [branch_fns[i] for i in range(len(branch_fns))]
    fns = list(branch_fns) + ([default] if default is not None else [])
    if not fns:
        raise ValueError(f"switch_case: no branches{describe_location()}")
    if not isinstance(branch_index, SymbolicTensor):
        index = int(np.asarray(branch_index._value if isinstance(branch_index, Tensor)
                               else branch_index))
        return fns[index]() if 0 <= index < len(branch_fns) else fns[-1]()
    if not dtypes.is_integer(branch_index.dtype) or branch_index.shape != ():
        raise TypeError(f"switch_case: the branch index must be an integer scalar, got "
                        f"{ShapedType(tuple(branch_index.shape), branch_index.dtype)}"
                        f"{describe_location()}")
    names = [f"branch {i}" for i in range(len(branch_fns))] + ["default"] * (default is not None)
    return _branches(branch_index, fns, name or "switch_case", names)


def _branches(index: SymbolicTensor, fns: list, name: str, labels: list[str]) -> Any:
    trace = _staging()
    assert trace is not None
    regions = trace_regions(fns, [], None, [f"{name}_{i}" for i in range(len(fns))], name)
    first = regions[0]
    for label, region in zip(labels[1:], regions[1:], strict=True):
        if region.treedef != first.treedef or len(region.graph.outputs) != len(
                first.graph.outputs) or any(
                join_types(a.type, b.type) is None
                for a, b in zip(first.graph.outputs, region.graph.outputs, strict=True)):
            raise TypeError(f"{name}: {labels[0]} returns {_result_text(first)} but {label} "
                            f"returns {_result_text(region)}; the branches must return the "
                            f"same structure and dtypes{describe_location()}")
    sources = share_captures([r.graph for r in regions])
    params = {"branches": tuple(r.graph for r in regions)}
    results = emit(trace, cond_p, [index, *sources], params)
    return first.structure(results)


def _result_text(region: Region) -> str:
    shown = [_Shown(str(v.type)) for v in region.graph.outputs]
    return repr(region.structure(shown))


# -- while_loop and fori_loop ---------------------------------------------------------------


def while_loop(cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Any,
               maximum_iterations: int | None = None, name: str | None = None) -> Any:
    """Repeat ``loop_vars = body(*loop_vars)`` while ``cond(*loop_vars)``; the final values.

    `loop_vars` is a tuple or list (of any nest of tensors), passed to `cond` and `body`
    as positional arguments; `body` returns the same structure. Traced, the loop is one op
    whose body is traced once, whatever the trip count; a loop variable whose dims change
    between iterations gets unknown dims there (no shape invariants to declare). At most
    `maximum_iterations` iterations run when it is given. A loop variable may be an
    `sf.TensorArray`: eagerly it is passed along as it is, traced the loop carries its
    elements as one tensor (its element shape, if nothing fixed it yet, learned by tracing
    the body once aside).

    >>> cond = lambda i, total: i < 4
    >>> body = lambda i, total: (i + 1, total * 2)
    >>> sf.while_loop(cond, body, (sf.constant(0), sf.constant(1)))
    (sf.Tensor(4, shape=(), dtype=int32), sf.Tensor(16, shape=(), dtype=int32))
    """
    if not isinstance(loop_vars, list | tuple):
        raise TypeError(f"while_loop: loop_vars must be a tuple or list, got "
                        f"{type(loop_vars).__name__}{describe_location()}")
    single = len(loop_vars) == 1
    trace = _staging()
    staged = trace is not None  # a staged loop carries the tensors of composites
    if staged:
        loop_vars = _settled(body, loop_vars, single)
    leaves, treedef = nest.flatten(loop_vars, expand_composites=staged)

    def unpacked(fn: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *flat: fn(*nest.unflatten(treedef, list(flat)))

    def body_leaves(*flat: Any) -> list:
        result = unpacked(body)(*flat)
        if single and not isinstance(result, list | tuple):
            result = (result,)
        if type(result) in (list, tuple):  # a list for a tuple of loop_vars is fine
            result = type(loop_vars)(result)
        result_leaves, structure = nest.flatten(result, expand_composites=staged)
        if structure != treedef:
            raise TypeError(f"while_loop: body returns {_describe(result)} but loop_vars are "
                            f"{_describe(loop_vars)}{describe_location()}")
        return result_leaves

    cond_leaves, step = unpacked(cond), body_leaves
    values = [_loop_value(leaf) for leaf in leaves]
    if maximum_iterations is not None:
        bound = maximum_iterations
        inner_cond, inner_step = cond_leaves, step

        def cond_leaves(count: Any, *flat: Any) -> Any:
            return logical_and(less(count, bound), inner_cond(*flat))

        def step(count: Any, *flat: Any) -> list:
            return [add(count, 1), *inner_step(*flat)]

        values = [convert_to_tensor(np.int64(0)), *values]
    if trace is None:
        results = _eager_loop(cond_leaves, step, values)
    else:
        bound = maximum_iterations if isinstance(maximum_iterations, int) else None
        results = _staged_loop(trace, cond_leaves, step, values, name or "while", bound)
    if maximum_iterations is not None:
        results = results[1:]
    return nest.unflatten(treedef, results)


def _loop_value(leaf: Any) -> Any:
    """A loop variable's leaf as the loop carries it: a tensor, or (eagerly) a composite
    such as a `TensorArray`, which an eager loop passes along as it is."""
    return leaf if nest.is_composite(leaf) else convert_to_tensor(leaf)


def _eager_loop(cond: Callable[..., Any], step: Callable[..., list], values: list) -> list:
    while bool(cond(*values)):
        values = [_loop_value(v) for v in step(*values)]
    return values


def _settled(body: Callable[..., Any], loop_vars: Any, single: bool) -> Any:
    """`loop_vars` with each composite that cannot yet say what tensors it is carried as
    (a `TensorArray` with nothing written and no element shape) completed from what the
    body makes of it: the body is traced once aside to learn that, as TensorFlow infers a
    loop-carried array's element shape from its first write."""
    leaves, treedef = nest.flatten(loop_vars)
    if not any(_unsettled(leaf) for leaf in leaves):
        return loop_vars
    scratch = GraphTrace(Graph("probe"), context.current_trace(), allow_variable_creation=False)
    with context.push_trace(scratch):
        result = body(*loop_vars)
    if single and not isinstance(result, list | tuple):
        result = (result,)
    returned, structure = nest.flatten(type(loop_vars)(result) if type(result) in (list, tuple)
                                       else result)
    if structure != treedef:
        return loop_vars  # the loop itself reports the mismatch
    settled = [leaf._learned(after) if _unsettled(leaf) and type(after) is type(leaf) else leaf
               for leaf, after in zip(leaves, returned, strict=True)]
    return nest.unflatten(treedef, settled)


def _unsettled(leaf: Any) -> bool:
    """Whether `leaf` is a composite that needs to see the loop body before it can be
    carried (its `_needs_element_shape`, for composites that define it); its
    `_learned(after)` completes it from the value the body returned in its place."""
    return nest.is_composite(leaf) and hasattr(leaf, "_needs_element_shape") and (
        leaf._needs_element_shape())


def _staged_loop(trace: GraphTrace, cond: Callable[..., Any], step: Callable[..., list],
                 values: list, name: str, maximum_iterations: int | None) -> list:
    types = [ShapedType(tuple(v.shape), v.dtype) for v in values]
    flat_args = nest.flatten([None] * len(types))[1]
    for _ in range(sum(len(t.shape) for t in types) + 1):  # each retrace relaxes a dim
        regions = trace_regions([cond, step], types, flat_args, [f"{name}_cond", f"{name}_body"],
                                name)
        outputs = [v.type for v in regions[1].graph.outputs]
        relaxed = []
        for position, (have, got) in enumerate(zip(types, outputs, strict=True)):
            joined = join_types(have, got)
            if joined is None:
                raise TypeError(f"{name}: loop variable {position} enters as {have} and the "
                                f"body returns {got}; the dtype and rank must stay the same"
                                f"{describe_location()}")
            relaxed.append(joined)
        if relaxed == types:
            break
        types = relaxed
    predicate = regions[0].graph.outputs
    if len(predicate) != 1 or predicate[0].type != ShapedType((), np.dtype(np.bool_)):
        raise TypeError(f"{name}: the condition must return one bool scalar, got "
                        f"{[str(v.type) for v in predicate]}{describe_location()}")
    for have, value in zip(types, values, strict=True):
        assert accepts(have, ShapedType(tuple(value.shape), value.dtype))
    sources = share_captures([r.graph for r in regions])
    params = {"cond": regions[0].graph, "body": regions[1].graph,
              "maximum_iterations": maximum_iterations}
    return emit(trace, while_p, [*values, *sources], params)


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any],
              init_val: Any) -> Any:
    """``val = body_fun(i, val)`` for i in range(lower, upper) (JAX's `fori_loop`), one
    `while` op when traced.

    >>> sf.fori_loop(0, 5, lambda i, total: total + i, sf.constant(0))
    sf.Tensor(10, shape=(), dtype=int32)
    """
    start = convert_to_tensor(lower)
    end = convert_to_tensor(upper, start.dtype)

    def body(i: Any, val: Any) -> tuple:
        return add(i, 1), body_fun(i, val)

    return while_loop(lambda i, _: less(i, end), body, (start, init_val))[1]


# -- py_func --------------------------------------------------------------------------------


def _result_types(Tout: Any) -> tuple[list[ShapedType | np.dtype], bool]:
    """Tout's entries (specs as their types, dtypes as dtypes) and whether it is one."""
    single = not isinstance(Tout, list | tuple)
    entries = [Tout] if single else list(Tout)
    types = [entry.shaped_type if isinstance(entry, TensorSpec) else dtypes.as_dtype(entry)
             for entry in entries]
    return types, single


def _probed_types(callback: _Callback, inputs: list, types: list[ShapedType | np.dtype]
                  ) -> list[ShapedType]:
    """Each result's type where Tout gives only its dtype, inside a trace: the IR's types
    have a rank, TensorFlow's Tout none, so the function is called once, now, on zeros of
    the inputs' traced shapes (1 for unknown dims), and each such result is taken to have
    the rank it returned there and unknown dims."""
    if all(isinstance(t, ShapedType) for t in types):
        return types
    zeros = [np.zeros(tuple(1 if d is None else d for d in x.shape), x.dtype) for x in inputs]
    try:
        with np.errstate(all="ignore"):
            returned = callback(*zeros)
    except Exception as error:
        raise TypeError(
            f"py_func: Tout gives the dtype of a result of {callback.__qualname__} but not "
            f"its shape, so it was called once while tracing, on zeros of its inputs' shapes, "
            f"to learn the result's rank, and raised {type(error).__name__}: {error}; pass "
            f"sf.TensorSpec(shape, dtype) (None for unknown dims) in Tout instead"
            f"{describe_location()}") from error
    items = returned if isinstance(returned, list | tuple) else [returned]
    if len(items) != len(types):
        raise ValueError(f"py_func: {callback.__qualname__} returned {len(items)} values, "
                         f"Tout declares {len(types)}{describe_location()}")
    return [t if isinstance(t, ShapedType) else ShapedType((None,) * np.ndim(item), t)
            for t, item in zip(types, items, strict=True)]


class _Callback:
    """The callable a `py_func` op holds: `func` on eager tensors (`py_func`) or NumPy
    arrays (`numpy_function`), run eagerly whatever trace is current."""

    def __init__(self, func: Callable[..., Any], tensors: bool) -> None:
        self.func = func
        self.tensors = tensors
        self.__qualname__ = getattr(func, "__qualname__", repr(func))

    def __call__(self, *arrays: Any) -> Any:
        args = [wrap(a) for a in arrays] if self.tensors else list(arrays)
        if context.state.eager_fast:  # nothing but eager execution anywhere: call it
            returned = self.func(*args)
        else:
            with context.init_scope():
                returned = self.func(*args)
        items = returned if isinstance(returned, list | tuple) else [returned]
        values = [None if r is None else np.asarray(r._value if isinstance(r, Tensor) else r)
                  for r in items]  # (None is refused by the op, not made a NaN)
        return values if isinstance(returned, list | tuple) else values[0]


def py_func(func: Callable[..., Any], inp: Sequence[Any], Tout: Any,
            stateful: bool = True, name: str | None = None) -> Any:
    """Run Python `func` on the values of `inp` (eager tensors), also inside a staged
    function, where it is a stateful op calling back into Python when the graph runs.

    `Tout` is a dtype or `sf.TensorSpec`, or a list of them (then a list of results).
    Eagerly this is ``func(*inp)``, differentiable as the ops `func` runs are; traced, its
    gradient runs `func` under a tape (the paper's py_func). A staged function's values
    have a rank: where `Tout` gives only a dtype (TensorFlow's form, whose results have an
    unknown shape), `func` is called once more while tracing, on zeros of its inputs'
    traced shapes, and the result has the rank returned there and unknown dims; give a
    `TensorSpec` to spare that call (or where `func` cannot take zeros).

    What `func` raises reaches the caller as it is, in every way a function runs (eager,
    interpreted, compiled). Effects run in program order: variables keep what the function
    assigned before the call that raised, and nothing after it runs (TensorFlow's order).
    Every call runs, in that order: `stateful` (TensorFlow's leave to drop or merge calls
    of a pure function) is accepted and changes nothing.

    >>> sf.py_func(lambda a: a * 2, [sf.constant([1.0, 2.0])], sf.float32)
    sf.Tensor([2., 4.], shape=(2,), dtype=float32)
    """
    return _py_func(_Callback(func, tensors=True), inp, Tout)


def py_function(func: Callable[..., Any] | None = None, inp: Sequence[Any] | None = None,
                Tout: Any = None, name: str | None = None) -> Any:
    """TensorFlow 2's name for `py_func`: `func` receives eager tensors (`sf.Tensor`), may
    return tensors or NumPy values, and is differentiable (eagerly as the ops it runs are,
    staged through its gradient op), interpreted or compiled.

    >>> @sf.function
    ... def cube(x):
    ...     return sf.py_function(lambda a: a ** 3, [x], sf.float32)
    >>> x = sf.constant([1.0, 2.0])
    >>> with sf.GradientTape() as tape:
    ...     tape.watch(x)
    ...     y = cube(x)
    >>> y
    sf.Tensor([1., 8.], shape=(2,), dtype=float32)
    >>> tape.gradient(y, x)
    sf.Tensor([ 3., 12.], shape=(2,), dtype=float32)

    Without `inp` it decorates, as TensorFlow's does: the function's arguments are the
    inputs (and without `func`, ``@sf.py_function(Tout=...)`` makes such a decorator).

    >>> @sf.py_function(Tout=sf.float32)
    ... def halve(x):
    ...     return x / 2
    >>> halve(sf.constant([2.0, 4.0]))
    sf.Tensor([1., 2.], shape=(2,), dtype=float32)
    """
    if func is None:
        return functools.partial(py_function, inp=inp, Tout=Tout, name=name)
    if inp is None:
        @functools.wraps(func)
        def decorated(*args: Any) -> Any:
            return py_func(func, list(args), Tout, name=name)
        return decorated
    return py_func(func, inp, Tout, name=name)


def numpy_function(func: Callable[..., Any], inp: Sequence[Any], Tout: Any,
                   stateful: bool = True, name: str | None = None) -> Any:
    """`py_func` whose `func` receives NumPy arrays (TensorFlow's ``numpy_function``).

    >>> sf.numpy_function(lambda a: np.sort(a), [sf.constant([3.0, 1.0])], sf.float32)
    sf.Tensor([1., 3.], shape=(2,), dtype=float32)
    """
    return _py_func(_Callback(func, tensors=False), inp, Tout)


def _eager_result(func: str, position: int, value: Any, declared: ShapedType | np.dtype
                  ) -> Tensor:
    """An eager call's result checked as the op checks its results (`declared_result`): a
    tensor kept as it is (the tapes saw the ops that made it), its shape checked."""
    shape, dtype = ((declared.shape, declared.dtype) if isinstance(declared, ShapedType)
                    else (None, declared))
    try:
        if isinstance(value, Tensor):
            if not fits(shape, value.shape):
                raise ValueError(f"result {position} of {func} has shape {value.shape}, Tout "
                                 f"declares {declared}")
            return convert_to_tensor(value, dtype)
        return convert_to_tensor(declared_result(func, position, value, shape, dtype), dtype)
    except ValueError as error:
        raise ValueError(f"py_func: {error}{describe_location()}") from None


def _py_func(callback: _Callback, inp: Sequence[Any], Tout: Any) -> Any:
    trace = _staging()
    inputs = [convert_to_tensor(x) for x in inp]
    types, single = _result_types(Tout)
    if trace is None:  # eagerly: the call itself, seen by tapes as the ops it runs
        returned = callback.func(*(inputs if callback.tensors else [t._value for t in inputs]))
        items = returned if isinstance(returned, list | tuple) else [returned]
        if len(items) != len(types):
            raise ValueError(f"py_func: {callback.__qualname__} returned {len(items)} values, "
                             f"Tout declares {len(types)}{describe_location()}")
        results = [_eager_result(callback.__qualname__, position, r, t)
                   for position, (r, t) in enumerate(zip(items, types, strict=True))]
        return results[0] if single else results
    types = _probed_types(callback, inputs, types)
    params = {"func": CallbackKey(callback), "shapes": tuple(t.shape for t in types),
              "dtypes": tuple(t.dtype for t in types)}
    results = emit(trace, py_func_p, inputs, params)
    return results[0] if single else list(results)
