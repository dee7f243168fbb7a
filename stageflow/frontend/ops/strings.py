"""`sf.strings`: TensorFlow's ``tf.strings`` ops on string tensors, run eagerly on the host.

String tensors hold NumPy object arrays of `bytes` (`stageflow.core.dtypes.string`); these
ops are Python over their elements, never primitives: strings are host-only values, which
`sf.function` never stages, so calling one of them while a function is traced raises,
naming the op and the user's line. `split` of more than a scalar returns an
`sf.RaggedTensor` of strings, as TensorFlow's does, and the ops that work string by string
take ragged tensors of strings too.
Regular expressions are Python's `re`, where TensorFlow's are RE2: the common syntax is
shared, RE2's Unicode classes and Python's lookarounds are not.
"""

from __future__ import annotations

import builtins
import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from stageflow.core import context, dtypes
from stageflow.core.errors import InvalidArgumentError
from stageflow.core.source import describe_location
from stageflow.frontend.ops.convert import convert_to_tensor
from stageflow.frontend.ragged_operators import check_same_rows
from stageflow.frontend.ragged_tensor import RaggedTensor
from stageflow.frontend.tensor import Tensor, wrap
from stageflow.frontend.tracer import GraphTrace
from stageflow.primitives.state import shown

__all__ = ["as_string", "bytes_split", "format", "join", "length", "lower", "regex_full_match",
           "split", "strip", "substr", "to_number", "unicode_decode", "unicode_split", "upper"]

_NUMBER_TYPES = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64)
_UNITS = ("BYTE", "UTF8_CHAR")


def _per_value(op: Callable[..., Any]) -> Callable[..., Any]:
    """`op`, which works string by string, also on a ragged tensor of strings: on its flat
    values, keeping its rows (TensorFlow's ragged dispatch of its elementwise string ops)."""

    @functools.wraps(op)
    def per_value(input: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002 - TF's name
        if isinstance(input, RaggedTensor):
            return input.with_flat_values(op(input.flat_values, *args, **kwargs))
        return op(input, *args, **kwargs)

    return per_value


def _host(op: str, value: Any, strings: bool = True) -> np.ndarray:
    """The value of an operand of `op` (a string tensor's unless not `strings`); a
    ``TypeError`` naming the op while a function is traced, or for a tensor of numbers."""
    if isinstance(context.current_trace(), GraphTrace):
        raise TypeError(f"sf.strings.{op} works on string tensors, host-only values that "
                        "sf.function cannot stage: call it outside the function, where it "
                        "runs eagerly, and pass the function numbers (or call it in the "
                        f"Python function of an sf.py_func, returning numbers)"
                        f"{describe_location()}")
    tensor = convert_to_tensor(value)
    if strings and not dtypes.is_string(tensor.dtype):
        raise TypeError(f"sf.strings.{op}: expected a string tensor, got "
                        f"{tensor.dtype.name}{tensor.shape} (sf.strings.as_string formats "
                        f"numbers){describe_location()}")
    return np.asarray(tensor._value)


def _each(array: np.ndarray, func: Callable[[Any], Any], dtype: Any = object) -> np.ndarray:
    """`func` of each element, in an array of `array`'s shape."""
    out = np.empty(array.shape, dtype=dtype)
    flat = out.reshape(-1)
    for index, item in enumerate(array.reshape(-1)):
        flat[index] = func(item)
    return out


def _unit(op: str, unit: str) -> bool:
    """Whether `unit` counts characters (``"UTF8_CHAR"``) rather than bytes."""
    if unit not in _UNITS:
        raise ValueError(f"sf.strings.{op}: unit must be one of {_UNITS}, got {unit!r}"
                         f"{describe_location()}")
    return unit == "UTF8_CHAR"


def _text(op: str, item: bytes) -> str:
    try:
        return item.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidArgumentError(f"sf.strings.{op}: {item!r} is not valid UTF-8 ({error})"
                                   f"{describe_location()}") from None


def split(input: Any, sep: str | bytes | None = None, maxsplit: int = -1  # noqa: A002
          ) -> Tensor | RaggedTensor:
    """Split each string at `sep` (None or ``""``: runs of whitespace, leading and trailing
    ones dropped, as Python's ``str.split()`` and TensorFlow's).

    A scalar gives a 1-D string tensor of its parts; more dims give an `sf.RaggedTensor`
    with one more, ragged, dim of parts (each dim of the input a ragged dim of uniform
    rows), as in TensorFlow. `maxsplit` splits at most that many times (-1: no limit).

    >>> sf.strings.split("hello big world")
    sf.Tensor([b'hello', b'big', b'world'], shape=(3,), dtype=string)
    >>> sf.strings.split(["a,b", "c"], sep=",")
    <sf.RaggedTensor [[b'a', b'b'], [b'c']]>
    """
    separator = sep.encode("utf-8") if isinstance(sep, str) else sep
    separator = separator or None
    return _per_string("split", input,
                       lambda item: _objects(item.split(separator, maxsplit)), object)


def join(inputs: Sequence[Any], separator: str = "") -> Tensor:
    """Join strings elementwise: each result is the strings at its position in `inputs`
    (string tensors of one shape, or scalars, which broadcast) with `separator` between.

    >>> sf.strings.join([["a", "b"], "x"], separator="-")
    sf.Tensor([b'a-x', b'b-x'], shape=(2,), dtype=string)

    Ragged inputs of the same rows join value by value (scalars broadcast):

    >>> words = sf.ragged.constant([["a", "b"], ["c"]])
    >>> sf.strings.join([words, words], separator="+")
    <sf.RaggedTensor [[b'a+a', b'b+b'], [b'c+c']]>
    """
    if not inputs:
        raise ValueError(f"sf.strings.join: inputs is empty{describe_location()}")
    ragged = [value for value in inputs if isinstance(value, RaggedTensor)]
    if ragged:
        for other in ragged[1:]:
            check_same_rows(ragged[0], other, "strings.join")
        return ragged[0].with_flat_values(join(
            [value.flat_values if isinstance(value, RaggedTensor) else value
             for value in inputs], separator))
    arrays = [_host("join", value) for value in inputs]
    try:
        arrays = np.broadcast_arrays(*arrays)
    except ValueError:
        shapes = ", ".join(str(a.shape) for a in arrays)
        raise ValueError(f"sf.strings.join: the inputs' shapes {shapes} do not broadcast"
                         f"{describe_location()}") from None
    glue = separator.encode("utf-8") if isinstance(separator, str) else separator
    out = np.empty(arrays[0].shape, dtype=object)
    for index in np.ndindex(out.shape):
        out[index] = glue.join(a[index] for a in arrays)
    return wrap(out)


@_per_value
def length(input: Any, unit: str = "BYTE") -> Tensor:  # noqa: A002 - TF's name
    """The length of each string as int32: its bytes, or its characters with
    ``unit="UTF8_CHAR"``.

    >>> sf.strings.length(["abc", "é"])
    sf.Tensor([3, 2], shape=(2,), dtype=int32)
    >>> sf.strings.length("é", unit="UTF8_CHAR")
    sf.Tensor(1, shape=(), dtype=int32)
    """
    array = _host("length", input)
    chars = _unit("length", unit)
    return wrap(_each(array, lambda b: len(_text("length", b)) if chars else len(b),
                      np.int32))


def _case(op: str, input: Any, encoding: str, change: Callable[[Any], Any]) -> Tensor:
    array = _host(op, input)
    if encoding not in ("", "utf-8"):
        raise ValueError(f"sf.strings.{op}: encoding must be '' (ASCII letters only, as "
                         f"TensorFlow's default) or 'utf-8', got {encoding!r}"
                         f"{describe_location()}")
    if encoding:
        return wrap(_each(array, lambda b: change(_text(op, b)).encode("utf-8")))
    return wrap(_each(array, change))


@_per_value
def lower(input: Any, encoding: str = "") -> Tensor:  # noqa: A002 - TF's name
    """Each string in lower case: ASCII letters only, or every letter with
    ``encoding="utf-8"``.

    >>> sf.strings.lower(["AbC", "ÉA"])
    sf.Tensor([b'abc', b'\\xc3\\x89a'], shape=(2,), dtype=string)
    """
    return _case("lower", input, encoding, lambda s: s.lower())


@_per_value
def upper(input: Any, encoding: str = "") -> Tensor:  # noqa: A002 - TF's name
    """Each string in upper case: ASCII letters only, or every letter with
    ``encoding="utf-8"``.

    >>> sf.strings.upper("abc")
    sf.Tensor(b'ABC', shape=(), dtype=string)
    """
    return _case("upper", input, encoding, lambda s: s.upper())


@_per_value
def strip(input: Any) -> Tensor:  # noqa: A002 - TF's name
    """Each string without its leading and trailing ASCII whitespace.

    >>> sf.strings.strip(["  a b ", "\\tc\\n"])
    sf.Tensor([b'a b', b'c'], shape=(2,), dtype=string)
    """
    return wrap(_each(_host("strip", input), lambda b: b.strip()))


@_per_value
def to_number(string_tensor: Any, out_type: Any = dtypes.float32) -> Tensor:
    """Each string parsed as a number of `out_type` (float32, float64, int32 or int64);
    `sf.errors.InvalidArgumentError` names a string that is not one (``"1.5"`` is no int).

    >>> sf.strings.to_number(["1.5", "-2", "1e3"])
    sf.Tensor([   1.5,   -2. , 1000. ], shape=(3,), dtype=float32)
    >>> sf.strings.to_number("42", out_type=sf.int64)
    sf.Tensor(42, shape=(), dtype=int64)
    """
    array = _host("to_number", string_tensor)
    wanted = dtypes.as_dtype(out_type)
    if wanted not in _NUMBER_TYPES:
        raise TypeError(f"sf.strings.to_number: out_type must be one of "
                        f"{', '.join(d.name for d in _NUMBER_TYPES)}, got {wanted.name}"
                        f"{describe_location()}")
    integer = dtypes.is_integer(wanted)
    limits = np.iinfo(wanted) if integer else None

    def parse(item: bytes) -> Any:
        try:
            number = int(item) if integer else float(item)
        except ValueError:
            number = None
        if number is None or (integer and not limits.min <= number <= limits.max):
            raise InvalidArgumentError(f"sf.strings.to_number: cannot convert {item!r} to "
                                       f"{wanted.name}{describe_location()}")
        return number

    return wrap(_each(array, parse, wanted))


@_per_value
def as_string(input: Any, precision: int = -1, scientific: bool = False,  # noqa: A002
              shortest: bool = False, width: int = -1, fill: str = "") -> Tensor:
    """Each number formatted as a string, as TensorFlow's C ``printf`` formats: ``%f`` for
    floats (``%e`` when `scientific`, ``%g`` when `shortest`) with `precision` digits,
    ``%d`` for integers, ``true``/``false`` for bools, ``(re,im)`` for complex numbers;
    `width` pads to that many characters with `fill` (``""``: spaces, or one of
    ``"0" "+" "-" "#" " "``, printf's flags). Strings pass through.

    >>> sf.strings.as_string([3.5, -1.0])
    sf.Tensor([b'3.500000', b'-1.000000'], shape=(2,), dtype=string)
    >>> sf.strings.as_string(7, width=3, fill="0")
    sf.Tensor(b'007', shape=(), dtype=string)
    """
    array = _host("as_string", input, strings=False)
    if array.dtype.kind == "O":
        return wrap(array)
    if fill not in ("", "0", "+", "-", "#", " "):
        raise ValueError(f"sf.strings.as_string: fill must be '' or one of '0', '+', '-', "
                         f"'#', ' ', got {fill!r}{describe_location()}")
    if scientific and shortest:
        raise ValueError(f"sf.strings.as_string: scientific and shortest cannot both be "
                         f"set{describe_location()}")
    if array.dtype == dtypes.bool_:
        return wrap(_each(array, lambda b: b"true" if b else b"false"))
    spec = "%" + fill + (str(width) if width > -1 else "")
    if dtypes.is_integer(array.dtype):
        if precision > -1 or scientific or shortest:
            raise ValueError(f"sf.strings.as_string: precision, scientific and shortest are "
                             f"for floats, not {array.dtype.name}{describe_location()}")
        spec += "d"
        return wrap(_each(array, lambda n: (spec % int(n)).encode()))
    if not (dtypes.is_floating(array.dtype) or dtypes.is_complex(array.dtype)):
        raise TypeError(f"sf.strings.as_string: cannot format {array.dtype.name}"
                        f"{describe_location()}")
    spec += ("." + str(precision) if precision > -1 else "")
    spec += "e" if scientific else "g" if shortest else "f"
    if dtypes.is_complex(array.dtype):
        return wrap(_each(array, lambda z: f"({spec % z.real},{spec % z.imag})".encode()))
    return wrap(_each(array, lambda x: (spec % float(x)).encode()))


@_per_value
def regex_full_match(input: Any, pattern: str) -> Tensor:  # noqa: A002 - TF's name
    """Whether each whole string matches the regular expression `pattern` (Python's `re`
    syntax; TensorFlow's is RE2, which shares the common part), as a bool tensor.

    >>> sf.strings.regex_full_match(["abc", "abd", "xabc"], "ab[c-z]")
    sf.Tensor([ True,  True, False], shape=(3,), dtype=bool)
    """
    array = _host("regex_full_match", input)
    source = pattern.encode("utf-8") if isinstance(pattern, str) else pattern
    try:
        compiled = re.compile(source)
    except re.error as error:
        raise InvalidArgumentError(f"sf.strings.regex_full_match: invalid pattern "
                                   f"{pattern!r}: {error}{describe_location()}") from None
    return wrap(_each(array, lambda b: compiled.fullmatch(b) is not None, np.bool_))


@_per_value
def substr(input: Any, pos: Any, len: Any, unit: str = "BYTE") -> Tensor:  # noqa: A002
    """The substring of each string from `pos` (negative: from the end) of `len` bytes (or
    characters, ``unit="UTF8_CHAR"``), as many as there are where `len` runs past the end
    or is negative. `pos` and `len` are ints or int tensors that broadcast with `input`.
    A `pos` outside a string is an `sf.errors.InvalidArgumentError`, as in TensorFlow.

    >>> sf.strings.substr(["hello", "world"], 1, 3)
    sf.Tensor([b'ell', b'orl'], shape=(2,), dtype=string)
    >>> sf.strings.substr("hello", -3, 2)
    sf.Tensor(b'll', shape=(), dtype=string)
    """
    array = _host("substr", input)
    chars = _unit("substr", unit)
    starts, counts = (_host("substr", v, strings=False) for v in (pos, len))
    if not (dtypes.is_integer(starts.dtype) and dtypes.is_integer(counts.dtype)):
        raise TypeError(f"sf.strings.substr: pos and len must be integers, got "
                        f"{starts.dtype.name} and {counts.dtype.name}{describe_location()}")
    try:
        array, starts, counts = np.broadcast_arrays(array, starts, counts)
    except ValueError:
        raise ValueError(f"sf.strings.substr: shapes {array.shape}, {starts.shape} and "
                         f"{counts.shape} do not broadcast{describe_location()}") from None
    out = np.empty(array.shape, dtype=object)
    for index in np.ndindex(out.shape):
        item = array[index]
        text = _text("substr", item) if chars else item
        start, count = int(starts[index]), int(counts[index])
        size = builtins.len(text)  # (`len` is TensorFlow's argument here)
        if not -size <= start <= size:
            raise InvalidArgumentError(f"sf.strings.substr: pos {start} is out of range for "
                                       f"{item!r} at index {index}{describe_location()}")
        if start < 0:
            start += size
        piece = text[start:] if count < 0 else text[start:start + count]
        out[index] = piece.encode("utf-8") if chars else piece
    return wrap(out)


def format(template: str, inputs: Any, placeholder: str = "{}",  # noqa: A001 - TF's name
           summarize: int = 3) -> Tensor:
    """A scalar string: `template` with each `placeholder` replaced, in order, by one of
    `inputs` (a tensor or a list of them and Python values), tensors shown as `sf.print`
    shows them, `summarize` elements at each end of a longer dim (-1: all). NumPy writes
    the elements at one width (``[ 0 10]``), where TensorFlow writes ``[0 10]``.

    >>> sf.strings.format("x = {}, n = {}", [sf.range(10), 3])
    sf.Tensor(b'x = [0 1 2 ... 7 8 9], n = 3', shape=(), dtype=string)
    """
    values = list(inputs) if isinstance(inputs, list | tuple) else [inputs]
    pieces = template.split(placeholder)
    if len(pieces) - 1 != len(values):
        raise ValueError(f"sf.strings.format: the template has {len(pieces) - 1} "
                         f"placeholders {placeholder!r} for {len(values)} inputs"
                         f"{describe_location()}")
    texts = [shown(_host("format", v, strings=False), summarize)
             if isinstance(v, Tensor | np.ndarray) else str(v) for v in values]
    out = pieces[0] + "".join(t + p for t, p in zip(texts, pieces[1:], strict=True))
    return wrap(np.array(out.encode("utf-8"), dtype=object))


def _per_string(op: str, input: Any, pieces: Callable[[bytes], np.ndarray],  # noqa: A002
                dtype: Any) -> Tensor | RaggedTensor:
    """`pieces` (a 1-D array of `dtype`) of each string: a 1-D tensor for a scalar; for
    more dims an `sf.RaggedTensor` with one more, ragged, dim of pieces (each dim of the
    input a ragged dim of uniform rows), as TensorFlow returns."""
    array = _host(op, input)
    parts = [pieces(item) for item in array.reshape(-1)]
    if not array.ndim:
        return wrap(parts[0])
    values = np.concatenate(parts) if parts else np.empty((0,), dtype)
    result: Any = RaggedTensor.from_row_lengths(wrap(values), [len(p) for p in parts])
    for dim in reversed(array.shape[1:]):  # the input's dims, as uniform rows
        rows = result.nrows().numpy() // max(dim, 1) if dim else 0
        result = RaggedTensor.from_row_splits(result, np.arange(rows + 1, dtype=np.int64) * dim)
    return result


def _objects(items: list) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def bytes_split(input: Any) -> Tensor | RaggedTensor:  # noqa: A002 - TF's name
    """Each string's bytes, one per element (a ragged tensor for more than a scalar).

    >>> sf.strings.bytes_split(sf.constant("Duck"))
    sf.Tensor([b'D', b'u', b'c', b'k'], shape=(4,), dtype=string)
    """
    return _per_string("bytes_split", input,
                       lambda item: _objects([item[i:i + 1] for i in range(len(item))]), object)


def unicode_split(input: Any, input_encoding: str = "UTF-8"  # noqa: A002
                  ) -> Tensor | RaggedTensor:
    """Each string's characters, each as its UTF-8 bytes (ragged for more than a scalar).

    >>> sf.strings.unicode_split(sf.constant("añb"), "UTF-8")
    sf.Tensor([b'a', b'\\xc3\\xb1', b'b'], shape=(3,), dtype=string)
    """
    _encoding("unicode_split", input_encoding)
    return _per_string("unicode_split", input, lambda item: _objects(
        [char.encode("utf-8") for char in _text("unicode_split", item)]), object)


def unicode_decode(input: Any, input_encoding: str = "UTF-8"  # noqa: A002
                   ) -> Tensor | RaggedTensor:
    """Each string's code points, int32 (ragged for more than a scalar).

    >>> sf.strings.unicode_decode(sf.constant("añb"), "UTF-8")
    sf.Tensor([ 97, 241,  98], shape=(3,), dtype=int32)
    """
    _encoding("unicode_decode", input_encoding)
    return _per_string("unicode_decode", input, lambda item: np.array(
        [ord(char) for char in _text("unicode_decode", item)], dtype=np.int32), np.int32)


def _encoding(op: str, encoding: str) -> None:
    if encoding.upper().replace("-", "") != "UTF8":
        raise ValueError(f"sf.strings.{op}: only UTF-8 is supported, got {encoding!r}"
                         f"{describe_location()}")
