"""Where in the user's program an op was called: the first frame outside stageflow.

Errors and IR locations name the user's line, never a line inside stageflow, so that a
shape error or a `loc(...)` in a dump points at code the user wrote.
"""

from __future__ import annotations

import functools
import linecache
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


@dataclass(frozen=True)
class SourceLocation:
    """A file, line and column in the user's code; `name` names what stands there when the
    file is not Python source (an ONNX model's node), printed in place of the line's text."""

    filename: str
    line: int
    column: int = 0
    name: str = ""

    def source_text(self) -> str:
        return self.name or linecache.getline(self.filename, self.line).strip()

    def __str__(self) -> str:
        text = self.source_text()
        where = f"{self.filename}:{self.line}"
        return f"{where}: {text}" if text else where


# The location ops are attributed to while a program that is not Python is traced (the
# node of an imported model), in place of the Python frame that traces it.
_FIXED: ContextVar[SourceLocation | None] = ContextVar("stageflow_fixed_location", default=None)


@contextmanager
def located_at(location: SourceLocation) -> Iterator[None]:
    """Attribute the ops traced in the block, and the errors they raise, to `location`."""
    token = _FIXED.set(location)
    try:
        yield
    finally:
        _FIXED.reset(token)


def _is_internal(frame) -> bool:
    """stageflow's own frames, Python's frozen modules, and frames of modules that declare
    themselves part of the machinery with a global `_stageflow_internal = True`."""
    filename = frame.f_code.co_filename
    return (filename.startswith(PACKAGE_DIR) or filename.startswith("<frozen")
            or frame.f_globals.get("_stageflow_internal", False))


def user_location() -> SourceLocation | None:
    """The innermost frame of the call stack that is not stageflow's own code, or the
    location `located_at` fixed."""
    if (fixed := _FIXED.get()) is not None:
        return fixed
    frame = sys._getframe(1)
    while frame is not None:
        if not _is_internal(frame):
            return SourceLocation(frame.f_code.co_filename, frame.f_lineno, _column(frame))
        frame = frame.f_back
    return None


def _column(frame) -> int:
    """The 1-based column of the instruction a frame is executing, 0 when unknown."""
    columns = _columns(frame.f_code)
    index = frame.f_lasti // 2
    if index < len(columns) and columns[index] is not None:
        return columns[index] + 1
    return 0


@functools.lru_cache(maxsize=256)
def _columns(code) -> tuple[int | None, ...]:
    """The start column of each of `code`'s instructions, read once per code object: a
    traced function's ops are all attributed to its frames, and listing a long function's
    positions again for each of its ops made up much of tracing it."""
    return tuple(position[2] for position in code.co_positions())


def describe_location() -> str:
    """' (at file.py:12: code)' for error messages, or '' when no user frame exists."""
    location = user_location()
    return f"\n  at {location}" if location is not None else ""
