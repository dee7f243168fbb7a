"""Where in the user's program an op was called: the first frame outside stageflow.

Errors and IR locations name the user's line, never a line inside stageflow, so that a
shape error or a `loc(...)` in a dump points at code the user wrote.
"""

from __future__ import annotations

import linecache
import os
import sys
from dataclasses import dataclass

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


@dataclass(frozen=True)
class SourceLocation:
    """A file, line and column in the user's code."""

    filename: str
    line: int
    column: int = 0

    def source_text(self) -> str:
        return linecache.getline(self.filename, self.line).strip()

    def __str__(self) -> str:
        text = self.source_text()
        where = f"{self.filename}:{self.line}"
        return f"{where}: {text}" if text else where


def _is_internal(frame) -> bool:
    """stageflow's own frames, Python's frozen modules, and frames of modules that declare
    themselves part of the machinery with a global `_stageflow_internal = True`."""
    filename = frame.f_code.co_filename
    return (filename.startswith(PACKAGE_DIR) or filename.startswith("<frozen")
            or frame.f_globals.get("_stageflow_internal", False))


def user_location() -> SourceLocation | None:
    """The innermost frame of the call stack that is not stageflow's own code."""
    frame = sys._getframe(1)
    while frame is not None:
        if not _is_internal(frame):
            return SourceLocation(frame.f_code.co_filename, frame.f_lineno, _column(frame))
        frame = frame.f_back
    return None


def _column(frame) -> int:
    """The 1-based column of the instruction a frame is executing, 0 when unknown."""
    positions = list(frame.f_code.co_positions())
    index = frame.f_lasti // 2
    if index < len(positions) and positions[index][2] is not None:
        return positions[index][2] + 1
    return 0


def describe_location() -> str:
    """' (at file.py:12: code)' for error messages, or '' when no user frame exists."""
    location = user_location()
    return f"\n  at {location}" if location is not None else ""
