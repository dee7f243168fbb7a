"""Control flow and escapes: `cond` (and `switch_case`), `while`, `py_func`.

`cond` and `while` hold graph functions as params: a graph per branch, a graph for the loop
condition and one for its body, each traced once by the frontend (`frontend.ops.control`);
a `while` built with a Python-int `maximum_iterations` records it (its condition already
enforces it), so that its gradient can size the stacks it saves iterations on.
Every such graph takes the same trailing operands, the values it uses from the enclosing
function (its captures), so the op's operands are what its regions read. In the IR they
become regions of one op, reading values from above (`stageflow.ir.control`), MLIR's
``scf.if``/``scf.while`` shape. Their kernels run the graphs (`Graph.run`), so eager
interpretation and the interpreter need nothing else.

`py_func` holds a Python callable and calls it on NumPy values when the op runs.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from stageflow.core import dtypes
from stageflow.core.errors import CallbackError
from stageflow.core.op_facts import Cost, Effect, Family, HostOnly, LoweredBy
from stageflow.core.primitive import Primitive, ResourceType, ShapedType

Type = ShapedType | ResourceType


def join_types(a: ShapedType, b: ShapedType) -> ShapedType | None:
    """The most specific type both `a` and `b` have (a dim that differs is unknown), or
    None where they differ in dtype or rank."""
    if a.dtype != b.dtype or len(a.shape) != len(b.shape):
        return None
    return ShapedType(tuple(x if x == y else None for x, y in zip(a.shape, b.shape, strict=True)),
                      a.dtype)


def accepts(expected: Type, given: Type) -> bool:
    """Whether a value of type `given` may stand where `expected` is declared: the same
    type, or a shaped one whose dims are known where `expected`'s are unknown."""
    if expected == given:
        return True
    if not (isinstance(expected, ShapedType) and isinstance(given, ShapedType)):
        return False
    return (expected.dtype == given.dtype and len(expected.shape) == len(given.shape)
            and all(e is None or e == g for e, g in zip(expected.shape, given.shape, strict=True)))


def _check_operands(graph: Any, types: Sequence[Type], what: str) -> None:
    expected = [v.type for v in graph.all_inputs]
    if len(types) != len(expected) or not all(
            accepts(e, t) for e, t in zip(expected, types, strict=True)):
        raise TypeError(f"the {what} takes {[str(t) for t in expected]}, "
                        f"got {[str(t) for t in types]}")


def branch_index(index: Any, count: int) -> int:
    """The branch an index selects: a predicate picks the first (true) or second branch;
    an integer out of range picks the last one (the default, as TensorFlow's switch_case)."""
    value = np.asarray(index)
    if value.dtype == np.bool_:
        return 0 if bool(value) else 1
    position = int(value)
    return position if 0 <= position < count else count - 1


def _cond_rule(index: ShapedType, *operands: Type, branches: tuple) -> tuple:
    if not isinstance(index, ShapedType) or index.shape != ():
        raise TypeError(f"the predicate or branch index must be a scalar, got {index}")
    if index.dtype == np.bool_:
        if len(branches) != 2:
            raise TypeError(f"a boolean predicate selects between 2 branches, not "
                            f"{len(branches)}")
    elif not dtypes.is_integer(index.dtype):
        raise TypeError(f"the branch index must be a bool or an integer, got {index}")
    if not branches:
        raise TypeError("there must be at least one branch")
    results: list[ShapedType] | None = None
    for position, branch in enumerate(branches):
        _check_operands(branch, operands, f"branch {position}")
        types = [v.type for v in branch.outputs]
        if results is None:
            results = types
            continue
        if len(types) != len(results):
            raise TypeError(f"branch 0 returns {len(results)} values, branch {position} "
                            f"{len(types)}")
        joined = [join_types(a, b) for a, b in zip(results, types, strict=True)]
        if None in joined:
            raise TypeError(f"branch 0 returns {[str(t) for t in results]}, branch {position} "
                            f"{[str(t) for t in types]}")
        results = joined  # type: ignore[assignment]
    return tuple(results or ())


def _cond(index: Any, *operands: Any, branches: tuple) -> list:
    return branches[branch_index(index, len(branches))].run(list(operands))


cond_p = Primitive(
    "cond",
    shape_rule=_cond_rule,
    kernel=_cond,
    summary="run one of several graphs, chosen by a predicate or an index (scf.if shape)",
    multiple_results=True,
    effects=Effect.CALLS,  # its branches', which the IR's region op reads (`ir.control`)
    family=Family.CONTROL, cost=Cost.STATE,
    lowered_by=HostOnly("its branches run from Python"),
)


def _while_rule(*operands: Type, cond: Any, body: Any,
                maximum_iterations: int | None = None) -> tuple:
    carried = [v.type for v in body.inputs]
    _check_operands(cond, operands, "loop condition")
    _check_operands(body, operands, "loop body")
    predicate = cond.outputs[0].type if len(cond.outputs) == 1 else None
    if predicate is None or predicate != ShapedType((), np.dtype(np.bool_)):
        raise TypeError(f"the loop condition must return one bool scalar, got "
                        f"{[str(v.type) for v in cond.outputs]}")
    outputs = [v.type for v in body.outputs]
    if len(outputs) != len(carried) or not all(
            accepts(c, o) for c, o in zip(carried, outputs, strict=True)):
        raise TypeError(f"the loop body takes {[str(t) for t in carried]} and returns "
                        f"{[str(t) for t in outputs]}")
    return tuple(carried)


def _while(*operands: Any, cond: Any, body: Any, maximum_iterations: int | None = None) -> list:
    count = len(body.inputs)
    carried, invariant = list(operands[:count]), list(operands[count:])
    while bool(cond.run(carried + invariant)[0]):
        carried = body.run(carried + invariant)
    return carried


while_p = Primitive(
    "while",
    shape_rule=_while_rule,
    kernel=_while,
    summary="repeat a body graph while a condition graph holds (scf.while shape)",
    multiple_results=True,
    effects=Effect.CALLS,
    family=Family.CONTROL, cost=Cost.STATE,
    lowered_by=HostOnly("its regions run from Python"),
)


class CallbackKey(str):
    """A `py_func`'s Python callable as a param: the name the IR prints (``"sort#3"``),
    holding the callable. IR parsed from text in the same process finds the callable by
    that name for as long as it lives; graphs holding a py_func are not portable."""

    callback: Callable[..., Any]

    def __new__(cls, callback: Callable[..., Any]) -> CallbackKey:
        key = super().__new__(cls, f"{_name(callback)}#{next(_callback_ids)}")
        key.callback = callback
        _CALLBACKS[str(key)] = callback
        return key


_callback_ids = itertools.count()
_CALLBACKS: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()


# Callbacks every process that uses them registers under one name (`register_named`), so a
# graph holding one still runs after travelling to another process as IR text.
_NAMED: dict[str, Callable[..., Any]] = {}


def register_named(name: str, callback: Callable[..., Any]) -> None:
    """Make `name` (or ``name#N``, one op's own, as each op binds its own program symbol)
    a `py_func` param that calls `callback` in this process: a process that registers the
    same name runs graphs naming it (a worker's collective calls)."""
    _NAMED[name] = callback


def is_named(func: str) -> bool:
    """Whether `func` names a callback registered by name (`register_named`)."""
    return str(func).partition("#")[0] in _NAMED


def callback_of(func: str) -> Callable[..., Any]:
    """The callable a `py_func` param names."""
    callback = (getattr(func, "callback", None) or _NAMED.get(str(func).partition("#")[0])
                or _CALLBACKS.get(func))
    if callback is None:
        raise RuntimeError(f"py_func: the Python function {func!r} no longer exists")
    return callback


SCHEDULES = ("early", "late")  # a py_func's `schedule`: when, among its block's ops, it runs


def _py_func_rule(*inputs: ShapedType, func: str, shapes: tuple, dtypes: tuple,
                  schedule: str = "") -> tuple:
    del inputs, func
    if schedule and schedule not in SCHEDULES:
        raise ValueError(f"py_func: schedule must be one of {', '.join(SCHEDULES)}, "
                         f"got {schedule!r}")
    if len(shapes) != len(dtypes):
        raise TypeError(f"{len(shapes)} result shapes but {len(dtypes)} result dtypes")
    return tuple(ShapedType(tuple(shape), np.dtype(dtype))
                 for shape, dtype in zip(shapes, dtypes, strict=True))


def _py_func(*inputs: Any, func: str, shapes: tuple, dtypes: tuple, schedule: str = "") -> list:
    """Call the function on the inputs' arrays; its results converted to the declared
    dtypes and checked against the declared shapes. Whatever the function raises reaches
    the caller as it was raised (`CallbackError` carries it past the kernels' error
    handling, which adds the op's line as a note). `schedule` only places the call among
    its block's ops (the `schedule` pass): "early" for a call that starts work running in
    the background (as soon as its operands are ready), "late" for one that waits for
    such work (as late as its users allow)."""
    del schedule
    callback = callback_of(func)
    try:
        returned = callback(*inputs)
    except Exception as error:
        raise CallbackError(error) from None
    if not isinstance(returned, list | tuple):
        returned = [returned]
    if len(returned) != len(shapes):
        raise ValueError(f"{func} returned {len(returned)} values, Tout declares {len(shapes)}")
    return [declared_result(func, position, value, tuple(shape), np.dtype(dtype))
            for position, (value, shape, dtype) in enumerate(zip(returned, shapes, dtypes,
                                                                   strict=True))]


def declared_result(func: str, position: int, value: Any, shape: tuple | None,
                    dtype: np.dtype) -> np.ndarray:
    """Result `position` of callback `func` as `dtype`, checked against the shape Tout
    declares (None: any shape): None or another shape is a ValueError, where NumPy would
    make None a NaN. Eager calls and the op check their results alike."""
    declared = dtype.name if shape is None else str(ShapedType(shape, dtype))
    if value is None:
        raise ValueError(f"result {position} of {func} is None, Tout declares {declared}")
    array = np.asarray(value, dtype=dtype)
    if not fits(shape, array.shape):
        raise ValueError(f"result {position} of {func} has shape {array.shape}, Tout "
                         f"declares {declared}")
    return array


def fits(shape: tuple | None, actual: tuple) -> bool:
    """Whether a result of shape `actual` is one of the declared `shape` (None dims and a
    None shape take any)."""
    return shape is None or (len(actual) == len(shape) and all(
        w is None or w == g for w, g in zip(shape, actual, strict=True)))


def _name(func: Callable[..., Any]) -> str:
    return getattr(func, "__qualname__", None) or type(func).__name__


py_func_p = Primitive(
    "py_func",
    shape_rule=_py_func_rule,
    kernel=_py_func,
    summary="call a Python function on the operands' NumPy values",
    multiple_results=True,
    effects=Effect.CALLBACK,
    family=Family.STATE, cost=Cost.STATE,
    lowered_by=LoweredBy.PROGRAM,  # a call back into Python (`runtime.callbacks`)
)
