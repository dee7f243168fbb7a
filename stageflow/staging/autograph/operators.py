"""What converted code calls (as ``ag__.NAME``): Python control flow that becomes `sf.cond`
and `sf.while_loop` where its condition is a traced tensor, and stays Python otherwise.

Every statement's variables travel through two closures the converter writes beside it:
``get_state()`` gives the current values of the names the statement assigns (`Undefined`
for one not bound yet), ``set_state(values)`` binds them. A Python condition runs the
branch or the loop as Python would, so converted code traces exactly the graphs it
traced before; a traced one traces every branch (each from the same starting state) or
the loop body once, through the region ops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from stageflow.core import context, nest
from stageflow.core.source import SourceLocation, describe_location, user_location
from stageflow.frontend.graph import Graph
from stageflow.frontend.ops.control import cond, numpy_function, while_loop
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ops.creation import zeros
from stageflow.frontend.ops.elementwise import add, less, logical_and, logical_not, logical_or
from stageflow.frontend.tensor import Tensor
from stageflow.frontend.tracer import GraphTrace, SymbolicTensor
from stageflow.staging.autograph.transformer import RETURN

State = tuple[Any, ...]


class Undefined:
    """The value of a name not bound yet where a converted statement starts; using it is an
    error that names it."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def _fail(self, *_: Any) -> Any:
        raise NameError(f"{self.name!r} is used before it is assigned (converted control "
                        f"flow assigns it in only some paths){describe_location()}")

    __bool__ = __getattr__ = __call__ = __add__ = __radd__ = __mul__ = __rmul__ = _fail
    __sub__ = __rsub__ = __truediv__ = __getitem__ = __iter__ = __len__ = _fail


def ld(read: Callable[[], Any], name: str) -> Any:
    """The value of a name (or attribute), or `Undefined` where it is not bound yet."""
    try:
        return read()
    except (NameError, AttributeError):
        return Undefined(name)


def store(target: Any, attr: str, value: Any) -> None:
    """``target.attr = value``, unless `value` is `Undefined` (a path that did not set it)."""
    if not isinstance(value, Undefined):
        setattr(target, attr, value)


def _traced(value: Any) -> bool:
    return isinstance(value, SymbolicTensor)


def _tensor_like(value: Any) -> bool:
    """Whether staged control flow carries `value`: a tensor, a number, or a composite of
    tensors (an `sf.TensorArray`)."""
    return isinstance(value, Tensor | bool | int | float | np.number | np.bool_) or \
        nest.is_composite(value)


def _carried(value: Any) -> Any:
    return value if nest.is_composite(value) else convert_to_tensor(value)


# -- if -----------------------------------------------------------------------------------


def if_stmt(test: Any, body: Callable[[], None], orelse: Callable[[], None],
            get_state: Callable[[], State], set_state: Callable[[State], None],
            names: Sequence[str], live: Sequence[bool]) -> State:
    """``if test: body() else: orelse()``; the names' values after it. Names that are not
    `live` (read nowhere outside the if) are not results of a traced one: they are
    `Undefined` after it."""
    if not _traced(test):
        (body if test else orelse)()
        return get_state()
    start = _first_values([body, orelse], get_state, set_state,
                          lambda i: names[i] == RETURN)
    wanted = [n for n, keep in zip(names, live, strict=True) if keep]
    kept: dict[str, dict[str, Any]] = {}  # per branch: its non-tensor values

    def branch(fn: Callable[[], None], label: str) -> Callable[[], dict]:
        def run() -> dict:
            set_state(start)
            fn()
            values = {k: v for k, v in zip(names, get_state(), strict=True) if k in wanted}
            kept[label] = {k: v for k, v in values.items() if not _tensor_like(v)}
            return {k: v for k, v in values.items() if _tensor_like(v)}
        return run

    try:
        results = cond(test, branch(body, "if"), branch(orelse, "else"))
    except TypeError:
        _explain_branches(kept, wanted)
        raise
    _explain_branches(kept, wanted)
    return tuple(results[n] if n in results else kept["if"][n] if n in wanted
                 else Undefined(n) for n in names)


def _explain_branches(kept: dict[str, dict[str, Any]], names: Sequence[str]) -> None:
    """Raise a clear error for a name the branches leave in different Python states."""
    if len(kept) < 2:
        return
    for name in names:
        one, other = kept["if"].get(name, _TENSOR), kept["else"].get(name, _TENSOR)
        undefined = [isinstance(v, Undefined) for v in (one, other)]
        if any(undefined) and not all(undefined):
            raise ValueError(f"{name!r} is assigned in only one branch of an if on a tensor; "
                             f"assign it before the if{describe_location()}")
        if not any(undefined) and _TENSOR not in (one, other) and one is not other:
            raise ValueError(f"{name!r} takes different Python values ({one!r} and "
                             f"{other!r}) in the branches of an if on a tensor; make it a "
                             f"tensor{describe_location()}")
        if (one is _TENSOR) != (other is _TENSOR) and not any(undefined):
            raise ValueError(f"{name!r} is a tensor in one branch of an if on a tensor and "
                             f"{one if other is _TENSOR else other!r} in the other"
                             f"{describe_location()}")


_TENSOR = object()


# -- loops --------------------------------------------------------------------------------


def while_stmt(test: Callable[[], Any], body: Callable[[], None],
               get_state: Callable[[], State], set_state: Callable[[State], None],
               names: Sequence[str]) -> State:
    """``while test(): body()``; a Python loop until the test is a traced tensor, a
    `while_loop` from there."""
    while True:
        condition = test()
        if _traced(condition):
            return _staged_loop(test, body, get_state, set_state, names)
        if not condition:
            return get_state()
        body()


def _staged_loop(test: Callable[[], Any], body: Callable[[], None],
                 get_state: Callable[[], State], set_state: Callable[[State], None],
                 names: Sequence[str]) -> State:
    """The loop as one `while_loop` over the names bound to tensors or numbers when it
    starts; the others must keep their values, and names the loop binds first stay local
    to it."""
    start = _first_values([body], get_state, set_state)
    carried = [i for i, v in enumerate(start) if _tensor_like(v)]
    carried_names = {names[i] for i in carried}
    outer = _outer_values(body)

    def with_carried(values: Sequence[Any]) -> State:
        state = list(start)
        for i, v in zip(carried, values, strict=True):
            state[i] = v
        return tuple(state)

    def loop_test(*values: Any) -> Any:
        set_state(with_carried(values))
        return convert_to_tensor(test())

    def loop_body(*values: Any) -> list:
        set_state(with_carried(values))
        marks = {name: _mark(value) for name, value in outer.items()}
        appends: dict[int, SourceLocation | None] = {}
        _LIST_CALLS.append(appends)
        try:
            body()
        finally:
            _LIST_CALLS.pop()
        for name, value in outer.items():
            if _mark(value) == marks[name]:
                continue
            if isinstance(value, list):
                raise _grown_list(name, appends.get(id(value)))
            if name not in carried_names:
                raise ValueError(
                    f"{name!r} is written in a loop over tensors that does not assign it: "
                    f"write returns the array to use, so assign it, `{name} = "
                    f"{name}.write(i, x)`, and the loop carries it"
                    f"{_at(value._write_site)}")
        state = get_state()
        for i, (before, after) in enumerate(zip(start, state, strict=True)):
            if i not in carried and not isinstance(before, Undefined) and after is not before:
                if isinstance(before, list):
                    raise _grown_list(names[i], None)
                raise ValueError(f"{names[i]!r} ({before!r}) is changed by a loop on a "
                                 f"tensor; make it a tensor before the loop"
                                 f"{describe_location()}")
        return [state[i] for i in carried]

    final = while_loop(loop_test, loop_body, [_carried(start[i]) for i in carried])
    state = with_carried(final)
    set_state(state)
    return state


# Per staged loop body being traced (innermost last): where converted code changed each
# Python list (by id), so that the error for a list grown in the loop names that line.
_LIST_CALLS: list[dict[int, SourceLocation | None]] = []
_LIST_METHODS = frozenset({"append", "extend", "insert"})


def note_list_call(function: Any) -> None:
    """Remember the user's line when converted code calls `append`/`extend`/`insert` of a
    Python list inside a staged loop body."""
    owner = getattr(function, "__self__", None)
    if _LIST_CALLS and type(owner) is list and function.__name__ in _LIST_METHODS:
        _LIST_CALLS[-1].setdefault(id(owner), user_location())


def _outer_values(body: Callable[[], None]) -> dict[str, Any]:
    """The Python lists and composites (`TensorArray`s) a loop body reaches through its
    closures (and those of the functions it closes over), by variable name: a staged loop
    can neither grow those lists nor write arrays it does not carry."""
    found: dict[str, Any] = {}
    pending, seen = [body], set()
    while pending:
        function = pending.pop()
        if id(function) in seen or not hasattr(function, "__code__"):
            continue
        seen.add(id(function))
        names = function.__code__.co_freevars
        for name, cell in zip(names, function.__closure__ or (), strict=True):
            try:
                value = cell.cell_contents
            except ValueError:  # a name not bound yet
                continue
            if type(value) is list or nest.is_composite(value):
                found.setdefault(name, value)
            elif callable(value):
                pending.append(value)
    return found


def _mark(value: Any) -> int:
    """What a loop body may not change of an outer value: a list's length, the number of
    staged writes made from an array (none for composites that are values, such as ragged
    and sparse tensors)."""
    return len(value) if isinstance(value, list) else getattr(value, "_writes", 0)


def _at(location: SourceLocation | None) -> str:
    return f"\n  at {location}" if location is not None else describe_location()


def _grown_list(name: str, location: SourceLocation | None) -> ValueError:
    return ValueError(
        f"{name!r} is a Python list grown in a loop over tensors: a staged loop's body is "
        f"traced once, so the list would hold one traced value, not one per iteration. Use "
        f"sf.TensorArray: `ta = sf.TensorArray(dtype, size=n)` before the loop, "
        f"`ta = ta.write(i, x)` in it and `ta.stack()` after it{_at(location)}")


def _first_values(parts: Sequence[Callable[[], None]], get_state: Callable[[], State],
                  set_state: Callable[[State], None],
                  wanted: Callable[[int], bool] = lambda i: True) -> State:
    """The state a staged statement starts from, where a `wanted` name not bound yet
    starts as zeros of the type the first of `parts` to bind it gives it (each traced once,
    aside). A loop on a tensor carries every value it produces, so each needs a value
    before the first iteration; a value the rewrite returns from inside a branch needs one
    in the branch that does not return."""
    start = get_state()
    missing = [i for i, v in enumerate(start) if isinstance(v, Undefined) and wanted(i)]
    if not missing:
        return start
    state = list(start)
    for part in parts:
        scratch = GraphTrace(Graph("probe"), context.current_trace(),
                             allow_variable_creation=False)
        set_state(start)
        with context.push_trace(scratch):
            part()
            probed = get_state()
        for i in missing:
            if isinstance(state[i], Undefined) and isinstance(probed[i], Tensor):
                shape = [d if d is not None else 0 for d in probed[i].shape]
                state[i] = zeros(shape, probed[i].dtype)
    set_state(tuple(state))
    return tuple(state)


class TensorRange:
    """``range`` over traced bounds (a step that is a Python int): what a converted ``for``
    loops over with a `while_loop`."""

    def __init__(self, start: Any, stop: Any, step: int) -> None:
        self.start, self.stop, self.step = start, stop, step

    @classmethod
    def of(cls, start: Any, stop: Any = None, step: Any = 1) -> TensorRange:
        if stop is None:
            start, stop = 0, start
        if _traced(step) or int(step) == 0:
            raise ValueError(f"range: a loop over traced bounds needs a nonzero Python int "
                             f"step{describe_location()}")
        return cls(start, stop, int(step))


def traced_bounds(bounds: Sequence[Any]) -> bool:
    """Whether any of a range's bounds is a traced tensor."""
    return any(_traced(b) for b in bounds)


def for_stmt(iterable: Any, body: Callable[[Any], None], extra_test: Callable[[], Any] | None,
             get_state: Callable[[], State], set_state: Callable[[State], None],
             names: Sequence[str]) -> State:
    """``for item in iterable: body(item)`` (stopping once `extra_test()` is false, where a
    ``break`` was lowered); over a traced tensor's rows or a traced `sf.range`, one
    `while_loop` counting an index."""
    if isinstance(iterable, TensorRange) or _traced(iterable):
        return _staged_for(iterable, body, extra_test, get_state, set_state, names)
    staged_iteration = getattr(iterable, "_staged_iteration", None)
    if staged_iteration is not None and isinstance(context.current_trace(), GraphTrace):
        return _staged_elements(staged_iteration(), body, extra_test, get_state, set_state,
                                names)
    for item in iterable:
        if extra_test is not None and not extra_test():
            break
        body(item)
    return get_state()


def _staged_for(iterable: Any, body: Callable[[Any], None],
                extra_test: Callable[[], Any] | None, get_state: Callable[[], State],
                set_state: Callable[[State], None], names: Sequence[str]) -> State:
    if isinstance(iterable, TensorRange):
        start, stop, step = iterable.start, iterable.stop, iterable.step
        position = convert_to_tensor(start)
        stop = convert_to_tensor(stop, position.dtype)

        def more(p: Any) -> Any:
            return less(p, stop) if step > 0 else less(stop, p)

        def item(p: Any) -> Any:
            return p
    else:
        rows = iterable
        count = rows.shape[0]
        if count is None:
            raise ValueError(f"for over a traced tensor needs its leading dim known"
                             f"{describe_location()}")
        position, step = convert_to_tensor(np.int32(0)), 1

        def more(p: Any) -> Any:
            return less(p, count)

        def item(p: Any) -> Any:
            return rows[p]

    index_name = "ag__for_index"
    state_names = [*names, index_name]
    holder = {"index": position}

    def get_all() -> State:
        return (*get_state(), holder["index"])

    def set_all(values: State) -> None:
        set_state(tuple(values[:-1]))
        holder["index"] = values[-1]

    def test() -> Any:
        keep_going = more(holder["index"])
        if extra_test is not None:
            keep_going = and_(lambda: keep_going, extra_test)
        return keep_going

    def step_body() -> None:
        current = holder["index"]
        body(item(current))
        holder["index"] = add(current, step)

    state = _staged_loop(test, step_body, get_all, set_all, state_names)
    return state[:-1]


def _staged_elements(fetch: Callable[[], tuple[Any, Any]], body: Callable[[Any], None],
                     extra_test: Callable[[], Any] | None, get_state: Callable[[], State],
                     set_state: Callable[[State], None], names: Sequence[str]) -> State:
    """``for element in source`` over a source that fetches inside the graph (an `sf.data`
    dataset or iterator: `fetch` emits the op taking the next element and whether there is
    one): a `while_loop` carrying the fetched element, fetching the next at the end of each
    step."""
    has_element, element = fetch()
    leaves, treedef = nest.flatten(element)
    holder = {"has": has_element, "leaves": leaves}
    count = len(names)

    def get_all() -> State:
        return (*get_state(), holder["has"], *holder["leaves"])

    def set_all(values: State) -> None:
        set_state(tuple(values[:count]))
        holder["has"], holder["leaves"] = values[count], list(values[count + 1:])

    def test() -> Any:
        if extra_test is None:
            return holder["has"]
        return and_(lambda: holder["has"], extra_test)

    def step_body() -> None:
        body(nest.unflatten(treedef, holder["leaves"]))
        has_next, following = fetch()
        holder["has"], holder["leaves"] = has_next, nest.flatten(following)[0]

    element_names = [f"ag__element{i}" for i in range(len(leaves))]
    state = _staged_loop(test, step_body, get_all, set_all,
                         [*names, "ag__has_element", *element_names])
    return state[:count]


# -- expressions --------------------------------------------------------------------------


def and_(left: Callable[[], Any], right: Callable[[], Any]) -> Any:
    """``a and b``: `logical_and` where `a` is a traced tensor, Python's otherwise."""
    value = left()
    if _traced(value):
        return logical_and(value, right())
    return value and right()


def or_(left: Callable[[], Any], right: Callable[[], Any]) -> Any:
    """``a or b``: `logical_or` where `a` is a traced tensor, Python's otherwise."""
    value = left()
    if _traced(value):
        return logical_or(value, right())
    return value or right()


def not_(value: Any) -> Any:
    """``not a``: `logical_not` of a traced tensor, Python's otherwise."""
    return logical_not(value) if _traced(value) else not value


def assert_(test: Any, message: Callable[[], Any] | None = None) -> None:
    """``assert test, message``: a check when the graph runs where `test` is traced."""
    if not _traced(test):
        assert test, message() if message is not None else None  # noqa: S101 - the user's
        return
    text = str(message()) if message is not None else "assertion failed"

    def check(value: np.ndarray) -> list:
        if not np.all(value):
            raise AssertionError(text)
        return []

    numpy_function(check, [test], [])
