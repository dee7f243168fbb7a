"""Machine code calling Python: the entry a compiled program calls for a `py_func` op.

A program calls each `py_func` through a symbol (`codegen.program.abi.callback_symbol`)
with the same ABI as a kernel: an array of data pointers (operands, then results) and one
of their dims. Here each such symbol is bound, before the program is linked, to a ctypes
function (which takes the GIL, as every ctypes callback does) that views the operands as
NumPy arrays, runs the op's kernel (the user's function), and copies its results into
the program's buffers. What the function raises cannot cross machine code: the callback
keeps it and returns 1, the program stops with an error code, and `take_error` hands the
exception to the Python caller, which raises it unchanged (with the op's line as a note)
instead of running the function again as Python steps.
"""

from __future__ import annotations

import ctypes
import math
import threading
import weakref

import llvmlite.binding as llvm
import numpy as np
from xdsl.ir import Operation

from stageflow.codegen.program.abi import callback_symbol, value_type
from stageflow.core.errors import located_error
from stageflow.ir.builder import source_location
from stageflow.ir.dialect import SfOp
from stageflow.primitives.control import py_func_p

_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)


class _Pending(threading.local):
    def __init__(self) -> None:
        self.error: BaseException | None = None


_pending = _Pending()


def take_error() -> BaseException | None:
    """What a callback of this thread raised during the last program call, once."""
    error, _pending.error = _pending.error, None
    return error


class Callback:
    """The C entry of one `py_func` op of a program; alive as long as the program is."""

    def __init__(self, op: SfOp) -> None:
        self.params = op.params()
        self.location = source_location(op)
        self.types = [value_type(v) for v in (*op.operands, *op.results)]
        self.inputs = len(op.operands)
        self.rank = sum(len(t.shape) for t in self.types)
        self.entry = _ENTRY(self._call)
        self.symbol = callback_symbol(op)
        llvm.add_symbol(self.symbol, ctypes.cast(self.entry, ctypes.c_void_p).value)

    def _call(self, data: int, dims: int) -> int:
        # All of it inside the try: what escapes a ctypes callback is printed and dropped,
        # and a Ctrl-C's KeyboardInterrupt, raised wherever this Python code is when the
        # signal arrives, must reach the caller (`runtime.interrupts`).
        try:
            arrays = self._arrays(data, dims)
            results = py_func_p.kernel(*arrays[: self.inputs], **self.params)
            for target, result in zip(arrays[self.inputs:], results, strict=True):
                target[...] = result
        except BaseException as error:  # noqa: BLE001 - handed to the caller, unchanged
            _pending.error = located_error(py_func_p.name, self.location, error) if isinstance(
                error, Exception) else error
            return 1
        return 0

    def _arrays(self, data: int, dims: int) -> list[np.ndarray]:
        """The operands and results as NumPy arrays over the program's buffers."""
        types = self.types
        pointers = (ctypes.c_void_p * len(types)).from_address(data)
        sizes = (ctypes.c_int64 * max(self.rank, 1)).from_address(dims)
        arrays = []
        position = 0
        for pointer, ty in zip(pointers, types, strict=True):
            rank = len(ty.shape)
            shape = tuple(sizes[position:position + rank])
            position += rank
            nbytes = math.prod(shape) * ty.dtype.itemsize
            buffer = (ctypes.c_char * nbytes).from_address(pointer or 0) if nbytes else b""
            arrays.append(np.frombuffer(buffer, ty.dtype).reshape(shape))
        return arrays


def bind_callbacks(ops: list[Operation]) -> list[Callback]:
    """The bound entry of each `py_func` op among `ops` (to be kept alive by the caller).

    A symbol names one op (`callback_symbol`), so every program calling it can share one
    entry: the one bound already while a program holding it lives, else a new one. Threads
    compiling the same function at once each made their own before, binding the symbol in
    turn: a program linked against another thread's entry called freed code once that
    thread's program was dropped."""
    callbacks = []
    with _BINDING:
        for op in ops:
            if isinstance(op, SfOp) and op.primitive is py_func_p:
                symbol = callback_symbol(op)
                callback = _BOUND.get(symbol)
                if callback is None:
                    callback = _BOUND[symbol] = Callback(op)
                callbacks.append(callback)
    return callbacks


# The entry each symbol is bound to, while a program holds it.
_BOUND: weakref.WeakValueDictionary[str, Callback] = weakref.WeakValueDictionary()
_BINDING = threading.Lock()
