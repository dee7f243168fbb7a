"""What every sub-command shares: its user-facing error and reading and writing its files."""

from __future__ import annotations

import sys

# Between two modules of one input file (``stageflow opt --split-input-file``), as in MLIR.
SPLIT_MARKER = "// -----"


class CommandError(Exception):
    """A user-facing failure: printed as ``stageflow <command>: error: <message>``."""


def read_input(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError as error:
        raise CommandError(f"cannot read {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise CommandError(f"cannot read {path}: not UTF-8 text") from None


def write_output(path: str | None, text: str) -> None:
    if path is None or path == "-":
        sys.stdout.write(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as error:
        raise CommandError(f"cannot write {path}: {error.strerror}") from None
