"""Converting a function: its source, the rewrite, a new function over the same globals and
closure, and which functions a converted call converts in turn.

The converted function is compiled from the rewritten source with the original file name,
line numbers and columns, so its frames (in tracebacks, and the source lines the IR's locations
record) are the user's. It shares the original's globals and closure cells, so it sees
later changes to them; the operators reach it through one more closure cell, ``ag__``.
Conversions are cached per function object. Only user code is converted: not stageflow's,
not the standard library's, not installed packages', not builtins; a function whose
source cannot be read is traced as it is, with one warning.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import sysconfig
import textwrap
import types
import warnings
import weakref
from collections.abc import Callable
from typing import Any

from stageflow.core.source import PACKAGE_DIR
from stageflow.frontend.ops import creation
from stageflow.staging.autograph import operators
from stageflow.staging.autograph.transformer import AG, Converter

_LIBRARY_DIRS = tuple({sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib",
                                                              "purelib", "platlib")})


class AutographWarning(UserWarning):
    """A function is traced without conversion (its source is unavailable)."""


class Converted:
    """A converted function and the source it was compiled from."""

    def __init__(self, function: Callable[..., Any], source: str) -> None:
        self.function = function
        self.source = source


_cache: weakref.WeakKeyDictionary[Any, Converted | None] = weakref.WeakKeyDictionary()


def _converted(entity: Any, api: str) -> Converted:
    """`entity`'s conversion (an `sf.function`'s: of its Python function), or ValueError
    saying why there is none."""
    function = getattr(entity, "python_function", entity)
    if isinstance(function, types.MethodType):
        function = function.__func__
    converted = convert(function)
    if converted is None:
        raise ValueError(
            f"sf.autograph.{api}: {getattr(function, '__qualname__', function)!r} is not "
            "converted: only Python functions defined with def in the user's files are "
            "(not lambdas, library code, functions whose source is unavailable, or those "
            "marked do_not_convert)")
    return converted


def to_code(entity: Any) -> str:
    """The source AutoGraph makes of `entity` (a Python function or an `sf.function`):
    what tracing runs, its ``if``/``while``/``for`` rewritten to calls of ``ag__``
    (TensorFlow's ``tf.autograph.to_code``).

    >>> def relu(x):
    ...     if x > 0:
    ...         x = x
    ...     else:
    ...         x = 0.0
    ...     return x
    >>> "ag__.if_stmt(" in sf.autograph.to_code(relu)
    True
    """
    return _converted(entity, "to_code").source


def to_graph(entity: Any) -> Callable[..., Any]:
    """The converted Python function of `entity` (TensorFlow's ``tf.autograph.to_graph``):
    called on eager tensors it runs as the original does; called while an `sf.function` is
    traced, its control flow on tensors is staged.

    >>> def halve_until_small(x):
    ...     while x > 1.0:
    ...         x = x / 2.0
    ...     return x
    >>> sf.function(sf.autograph.to_graph(halve_until_small), autograph=False)(
    ...     sf.constant(10.0))
    sf.Tensor(0.625, shape=(), dtype=float32)
    """
    return _converted(entity, "to_graph").function


def do_not_convert(func: Callable[..., Any] | None = None) -> Any:
    """Leave `func` unconverted (TensorFlow's ``tf.autograph.experimental.do_not_convert``):
    traced by an `sf.function` or called from one, it runs as written, so Python's ``if``
    and ``while`` on a traced tensor raise rather than become `sf.cond` and
    `sf.while_loop`. Usable as ``@do_not_convert`` and ``@do_not_convert()``; returns
    `func` itself.

    >>> @sf.autograph.experimental.do_not_convert
    ... def clip(x):
    ...     return sf.minimum(x, 1.0)
    >>> sf.function(clip)(sf.constant([0.5, 2.0]))
    sf.Tensor([0.5, 1. ], shape=(2,), dtype=float32)
    """
    if func is None:
        return do_not_convert
    target = func.__func__ if isinstance(func, types.MethodType) else func
    if isinstance(target, types.FunctionType):
        _cache[target] = None  # "not converted", as convert reads its cache
    return func


def is_user_code(function: Any) -> bool:
    """Whether `function` is a Python function of the user's (not a library's)."""
    if not isinstance(function, types.FunctionType) or function.__name__ == "<lambda>":
        return False
    filename = function.__code__.co_filename
    return not filename.startswith(("<frozen", PACKAGE_DIR, *_LIBRARY_DIRS))


def convert(function: Callable[..., Any]) -> Converted | None:
    """The converted form of a user function (cached), or None where it is not converted
    (library code, and lambdas: an expression has no statements to convert)."""
    if not is_user_code(function):
        return None
    try:
        return _cache[function]
    except KeyError:
        pass
    converted = _convert(function)
    _cache[function] = converted
    return converted


def _convert(function: types.FunctionType) -> Converted | None:
    if AG in function.__code__.co_freevars:
        return None  # defined inside converted code: converted with it already
    try:
        lines, first = inspect.getsourcelines(function)
    except (OSError, TypeError):
        warnings.warn(f"sf.function: {function.__qualname__} is traced without AutoGraph "
                      "conversion: its source is unavailable", AutographWarning, stacklevel=4)
        return None
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:  # a definition that is not a whole statement by itself
        return None
    definition = tree.body[0]
    if not isinstance(definition, ast.FunctionDef):
        return None
    ast.increment_lineno(tree, first - 1)
    indent = len(lines[0]) - len(lines[0].lstrip())
    for node in ast.walk(tree):  # columns as in the file, before the dedent
        if hasattr(node, "col_offset"):
            node.col_offset += indent
            if getattr(node, "end_col_offset", None) is not None:
                node.end_col_offset += indent
    definition = Converter().visit(definition)
    # Defined under another name in the factory: under its own, the factory would bind it,
    # and a recursive call would read that binding (a closure cell the original never had)
    # instead of the global or enclosing name it calls.
    name, definition.name = definition.name, f"{AG}converted"
    freevars = function.__code__.co_freevars
    factory = ast.FunctionDef(
        name=f"{AG}factory",
        args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in (AG, *freevars)],
                           kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=[definition, ast.Return(ast.Name(id=definition.name, ctx=ast.Load()))],
        decorator_list=[], returns=None)
    module = ast.fix_missing_locations(ast.Module(body=[factory], type_ignores=[]))
    code = compile(module, function.__code__.co_filename, "exec")
    factory_code = _constant_code(code, factory.name)
    inner = _constant_code(factory_code, definition.name).replace(
        co_name=function.__code__.co_name, co_qualname=function.__code__.co_qualname)
    cells = dict(zip(freevars, function.__closure__ or (), strict=True))
    cells[AG] = types.CellType(_NAMESPACE)
    converted = types.FunctionType(inner, function.__globals__, function.__name__,
                                   function.__defaults__,
                                   tuple(cells[name] for name in inner.co_freevars))
    converted.__kwdefaults__ = function.__kwdefaults__
    functools.update_wrapper(converted, function)
    definition.name = name
    return Converted(converted, ast.unparse(definition))


def _constant_code(code: types.CodeType, name: str) -> types.CodeType:
    return next(c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == name)


def converted_call(function: Any, *args: Any, **kwargs: Any) -> Any:
    """Call `function`, converted first where it is user code (a method: its function);
    Python's `range` and `sf.range` of traced bounds give a range a converted ``for``
    loops over with a `while_loop`."""
    if function in _RANGES and not kwargs and operators.traced_bounds(args):
        return operators.TensorRange.of(*args)
    operators.note_list_call(function)
    if isinstance(function, types.MethodType) and is_user_code(function.__func__):
        converted = convert(function.__func__)
        if converted is not None:
            return converted.function(function.__self__, *args, **kwargs)
    elif is_user_code(function):
        converted = convert(function)
        if converted is not None:
            return converted.function(*args, **kwargs)
    return function(*args, **kwargs)


def _namespace() -> types.SimpleNamespace:
    """What ``ag__`` is in converted code: the operators and `converted_call`."""
    names = ["ld", "store", "if_stmt", "while_stmt", "for_stmt", "and_", "or_", "not_",
             "assert_"]
    return types.SimpleNamespace(converted_call=converted_call,
                                 **{name: getattr(operators, name) for name in names})


_NAMESPACE = _namespace()
_RANGES = (builtins.range, creation.range)
