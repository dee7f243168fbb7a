"""Passes by name: the registry `stageflow opt --passes` and the compiler look passes up in.

Each pass module decorates its `ModulePass` with `register_pass`; the package imports every
module of it, so a new pass is registered by being a file of the package (and the test that
every pass has a lit test covers it at once). Pipeline text is xDSL's syntax, parsed by
xDSL's own `parse_pipeline`: passes separated by commas, options in braces with ``-`` or
``_`` in their names and spaces between options::

    prune,fold{max-elements=64},cse,simplify{no-signed-zeros=true},inline{max-ops=16}
"""

from __future__ import annotations

import dataclasses
import typing

from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec
from xdsl.utils.arg_spec import parse_pipeline as parse_pass_specs
from xdsl.utils.exceptions import ArgSpecParseError

_PASSES: dict[str, type[ModulePass]] = {}
_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


class PassSpecError(ValueError):
    """A pipeline string names an unknown pass, a bad option or is malformed (one line)."""


def register_pass(cls: type[ModulePass]) -> type[ModulePass]:
    """Class decorator: make `cls` available under its ``name``."""
    existing = _PASSES.get(cls.name)
    if existing is not None and existing.__qualname__ != cls.__qualname__:
        raise ValueError(f"two passes are named {cls.name!r}: {existing} and {cls}")
    _PASSES[cls.name] = cls
    return cls


def available_passes() -> dict[str, type[ModulePass]]:
    """Every registered pass class by name, sorted by name."""
    return dict(sorted(_PASSES.items()))


def get_pass(name: str) -> type[ModulePass]:
    """The pass class named `name`; `PassSpecError` listing the known names otherwise."""
    passes = available_passes()
    if name not in passes:
        raise PassSpecError(f"unknown pass '{name}' (available: {', '.join(passes)})")
    return passes[name]


def parse_pipeline(text: str) -> tuple[ModulePass, ...]:
    """The pass instances of a pipeline string such as ``prune,fold{max-elements=64}``."""
    try:
        specs = list(parse_pass_specs(text))
    except ArgSpecParseError as error:  # a multi-line report with a caret: keep its gist
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        where = lines[1].rsplit(":", 1)[-1] if len(lines) > 1 else "?"
        message = lines[-1][0].lower() + lines[-1][1:] if lines else "malformed"
        raise PassSpecError(f"bad pass pipeline '{text}' at column {where}: {message}") from None
    return tuple(_instantiate(spec) for spec in specs)


def _instantiate(spec: ArgSpec) -> ModulePass:
    """The pass of one parsed spec, its options checked with messages naming them."""
    cls = get_pass(spec.name)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    known = ", ".join(name.replace("_", "-") for name in fields) or "none"
    hints = typing.get_type_hints(cls)
    for option, values in spec.normalize_parameter_names().parameters.items():
        shown = option.replace("_", "-")
        if option not in fields:
            raise PassSpecError(f"pass '{spec.name}' has no option '{shown}' (options: {known})")
        want = hints.get(option)
        if want in (bool, int, float, str) and not (
            len(values) == 1 and _fits(values[0], want)
        ):
            given = ",".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values)
            raise PassSpecError(
                f"option '{shown}' of pass '{spec.name}' takes {_KINDS[want]}, "
                f"got '{given}'"
            )
    try:
        return cls.from_spec(spec)
    except (ValueError, TypeError) as error:
        raise PassSpecError(f"pass '{spec.name}': {error}") from None


def _fits(value: object, want: type) -> bool:
    if want is bool or isinstance(value, bool):  # xDSL reads `true` as a bool, 1 as an int
        return type(value) is want
    return isinstance(value, want) or (want is float and isinstance(value, int))
