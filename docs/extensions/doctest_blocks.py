"""A griffe extension for the API reference: the docstrings' doctest examples as code.

The docstrings are plain prose with ``>>>`` examples, in no section style; Markdown would
read a ``>>>`` line as three nested quotes and ``[1, 2]`` in an output as a link. Each run of
lines from a ``>>>`` prompt to the next blank line becomes a fenced ``pycon`` block, at the
prompt's indentation.
"""

from __future__ import annotations

from typing import Any

import griffe


def fence_doctests(text: str) -> str:
    """`text` with every doctest block (``>>>`` up to a blank line) inside a code fence."""
    out: list[str] = []
    indent: str | None = None  # the open block's indentation; None outside a block
    for line in text.splitlines():
        stripped = line.lstrip()
        if indent is None and stripped.startswith(">>>"):
            indent = line[: len(line) - len(stripped)]
            out.append(f"{indent}```pycon")
        elif indent is not None and not stripped:
            out.append(f"{indent}```")
            indent = None
        out.append(line)
    if indent is not None:
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    """Fences the doctest examples of every docstring once the object tree is complete."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader,
                  **kwargs: Any) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
