"""Textual IR: parse, print and verify modules, with errors that name a file and line.

`module_to_text` and `parse_module` are inverses on the text they produce: printing a
parsed module gives back the same text (with ``debuginfo=True`` the ``loc(...)`` of every
op and block argument is printed and parsed back too). Errors from xDSL arrive as
multi-line reports with carets; `IRError` condenses them to one line,
``file.mlir:3:8: 'sf.add' op shapes (3,) and (4,) are incompatible for broadcasting``,
remembering where each op was parsed so that verifier errors point at the source line too.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from typing import Any, NamedTuple
from weakref import WeakKeyDictionary

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import (
    AnyFloat,
    Builtin,
    FileLineColLoc,
    ModuleOp,
    NameLoc,
)
from xdsl.dialects.func import Func
from xdsl.ir import Dialect, Operation
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError
from xdsl.utils.lexer import Input, Span

from stageflow.ir.dialect import sf_dialect
from stageflow.ir.types import dtype_of, is_element_type


class SourcePosition(NamedTuple):
    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class IRError(Exception):
    """A parse or verification error, as one line: ``where: message``."""

    def __init__(
        self, message: str, where: SourcePosition | None = None, op: Operation | None = None
    ) -> None:
        self.message = " ".join(line.strip() for line in message.strip().splitlines())
        self.where = where
        self.op = op
        super().__init__(f"{where}: {self.message}" if where else self.message)


def make_context(extra_dialects: tuple[Dialect, ...] = ()) -> Context:
    """A context that knows builtin, func and sf (and `extra_dialects`)."""
    context = Context()
    for dialect in (Builtin, Func, sf_dialect(), *extra_dialects):
        context.load_dialect(dialect)
    return context


_COMMENT = re.compile(r"//[^\n]*")
# A string literal as xDSL's lexer reads it, written without nested repetition: xDSL's own
# pattern backtracks exponentially on a string left open at the end of a long line.
_STRING = re.compile(r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"')
_COMMENT_OR_QUOTE = re.compile(r'//[^\n]*|"')


def _unterminated_string(text: str) -> int | None:
    """The offset of the first string literal not closed on its line, if any (linear)."""
    position = 0
    while (found := _COMMENT_OR_QUOTE.search(text, position)) is not None:
        if found.group() != '"':
            position = found.end()
        elif (literal := _STRING.match(text, found.start())) is not None:
            position = literal.end()
        else:
            return found.start()
    return None


# Where each parsed op starts in its source text (kept lazily: input and offset).
_PARSED_AT: WeakKeyDictionary[Operation, tuple[Input[str], int]] = WeakKeyDictionary()


@dataclass
class _BitPattern(Parser._TensorLiteralElement):
    """A hexadecimal element of a dense literal: for a float element type, MLIR reads it
    as the value's bit pattern (``0x7FC00000`` is a float32 NaN, how NaN and infinities
    print), not as the integer it spells."""

    def to_type(self, parser: Any, type: Any) -> Any:
        if isinstance(type, AnyFloat) and is_element_type(type):
            float_type = dtype_of(type)
            bits = np.array([self.value], dtype=np.dtype(f"u{float_type.itemsize}"))
            return float(bits.view(float_type)[0])
        return super().to_type(parser, type)


# The most elements a splat dense literal (``dense<1.0> : tensor<...>``) may expand to: the
# parser writes every element out, so 337 bytes of IR could ask for gigabytes, and 2^24
# elements took the parser most of a minute (traced IR broadcasts scalars instead of
# splatting).
MAX_SPLAT_ELEMENTS = 1 << 20


class _RecordingParser(Parser):
    """xDSL's parser, also noting the start offset of every op it parses, reading
    hexadecimal dense elements of float type as bit patterns (as MLIR does), refusing
    splat literals of more than `MAX_SPLAT_ELEMENTS` elements before they are expanded, and
    dims that are not int64s (MLIR's dims are)."""

    _splat = False

    def parse_shape_dimension(self, allow_dynamic: bool = True) -> int:
        start = self.pos
        dim = super().parse_shape_dimension(allow_dynamic)
        if dim >= 1 << 63:
            self.raise_error(f"a dim of {dim}: dims are int64s, at most {(1 << 63) - 1}",
                             start, self.pos)
        return dim

    def parse_operation(self) -> Operation:
        start = self.pos
        op = super().parse_operation()
        _PARSED_AT[op] = (self.lexer.input, start)
        return op

    def _parse_tensor_literal(self) -> tuple[list, list[int]]:
        elements, shape = super()._parse_tensor_literal()
        self._splat = not shape
        return elements, shape

    def _parse_dense_literal_type(self) -> Any:
        start = self.pos
        type = super()._parse_dense_literal_type()
        count = math.prod(type.get_shape())
        if self._splat and count > MAX_SPLAT_ELEMENTS:
            self.raise_error(f"a splat dense literal of {count:,} elements: at most "
                             f"{MAX_SPLAT_ELEMENTS:,} are held in IR (broadcast a scalar in "
                             "the function instead: sf.fill, sf.broadcast_to)",
                             start, self.pos)
        self._splat = False
        return type

    def _parse_tensor_literal_element(self) -> Parser._TensorLiteralElement:
        element = super()._parse_tensor_literal_element()
        if isinstance(element.value, int) and not isinstance(element.value, bool) and \
                element.span.text.lower().startswith("0x"):
            return _BitPattern(element.is_negative, element.value, element.span)
        return element


def source_position(op: Operation) -> SourcePosition | None:
    """Where `op` came from: its ``loc("f.py":3:1)`` if it has one (as MLIR reports
    diagnostics), else where it was parsed from, else ``None``."""
    location = op.location
    if isinstance(location, NameLoc):
        location = location.location
    if isinstance(location, FileLineColLoc):
        return SourcePosition(location.filename.data, location.line.data, location.column.data)
    if (parsed := _PARSED_AT.get(op)) is not None:
        source, offset = parsed
        where = Span(offset, offset, source).get_location()
        return SourcePosition(where.file, where.line, where.col)
    return None


def parse_module(
    text: str, name: str = "<input>", *, verify: bool = True, context: Context | None = None
) -> ModuleOp:
    """Parse textual IR (a ``builtin.module`` or bare top-level ops) into a module."""
    if not _COMMENT.sub("", text).strip():  # no ops at all: MLIR's empty module
        return ModuleOp([])
    source = Input(text, name)

    def position(offset: int) -> SourcePosition:
        where = Span(offset, offset, source).get_location()
        return SourcePosition(where.file, where.line, where.col)

    if (offset := _unterminated_string(text)) is not None:
        raise IRError("unterminated string literal", position(offset))
    parser: _RecordingParser | None = None
    try:
        parser = _RecordingParser(context or make_context(), text, name)
        module = parser.parse_module()
    except ParseError as error:
        where = error.span.get_location()
        raise IRError(error.msg, SourcePosition(where.file, where.line, where.col)) from None
    except Exception as error:  # e.g. a value out of range for its type, found mid-parse
        where = position(parser.pos) if parser is not None else None
        raise IRError(f"{error}", where) from None
    if verify:
        verify_module(module)
    return module


def _op_error(op: Operation, error: Exception) -> IRError:
    message = str(error)
    if op.name not in message:
        message = f"'{op.name}' op {message}"
    return IRError(message, source_position(op), op)


def verify_module(module: Operation) -> None:
    """Verify the whole module; raise `IRError` naming the first op that fails."""
    try:
        module.verify()
    except Exception as error:  # VerifyException, or whatever a malformed op trips over
        for op in module.walk():
            try:
                op.verify(verify_nested_ops=False)
            except Exception as op_error:
                raise _op_error(op, op_error) from None
        raise IRError(str(error)) from None


def module_to_text(
    module: Operation, *, debuginfo: bool = False, generic: bool = False
) -> str:
    """The module's text; ``debuginfo`` adds ``loc(...)``, ``generic`` MLIR's generic form."""
    stream = io.StringIO()
    printer = Printer(stream=stream, print_debuginfo=debuginfo, print_generic_format=generic)
    printer.print_op(module)
    return stream.getvalue().rstrip("\n") + "\n"
