"""Random programs run ahead of time: compiled by `sf.aot.compile` into a shared library,
loaded with ctypes and called through its C entry points as a C program would call them.

Each program becomes a ``freeze=False`` library (its variables and random generators are
the library's state, so their updates are compared too), with known input dims or with the
program's unknown dims passed through the ``dims`` argument. Outputs are allocated from
``NAME_output_dims``; after a call, the state's variables are copied back into the
program's `sf.Variable`s, so a library is compared with eager exactly like the other ways.
A program the compiler refuses on purpose (`NotImplementedError`, whose reasons the library
documents) raises `Unsupported`, which a campaign counts apart from errors.
"""

from __future__ import annotations

import ctypes
import itertools
import os
from collections.abc import Callable
from typing import Any

import numpy as np

import stageflow as sf
from stageflow.aot import CPUArtefact
from stageflow.core.primitive import ResourceType
from stageflow.testing.random_ops import Program, eager

_P, _I32, _I64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64
# Library names, never reused in a process: the dynamic loader hands back the library
# already loaded from a path, even after the file there was replaced.
_NUMBERS = itertools.count()


class Unsupported(Exception):
    """`sf.aot.compile` refused the program on purpose; the message is its reason."""


class LibraryError(RuntimeError):
    """A library call returned an error code where eager computed a result."""


def _buffer(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A C-contiguous array of `shape`, whose memory is never NULL (the library refuses a
    NULL buffer, and NumPy may give one to an empty array)."""
    count = int(np.prod(shape, dtype=np.int64))
    return np.empty(max(count, 1), dtype)[:count].reshape(shape)


class Library:
    """One loaded library and the state it was compiled with: a callable taking the
    program's arguments, returning its results as tensors and writing the state's
    variables back into `variables` (the program's own). A program without variables
    makes a library without state (its entry takes none, as its header says)."""

    def __init__(self, path: str, name: str, artefact: CPUArtefact, state_sources: list[Any],
                 unknown: list[tuple[bool, ...]] | None) -> None:
        self.library = ctypes.CDLL(path)
        self.signature, self.state_sources, self.unknown = (artefact.signature, state_sources,
                                                            unknown)
        self.stateful = f"{name}_state_new(" in artefact.header
        self.call = self._entry(name, _I32, [_P] * (4 if self.stateful else 3))
        self.output_dims = self._entry(f"{name}_output_dims", _I32, [_P, _P])
        self.state = None
        if self.stateful:
            self.state_variable = self._entry(f"{name}_state_variable", _P, [_P, _I32])
            self.state_free = self._entry(f"{name}_state_free", None, [_P])
            self.state = self._entry(f"{name}_state_new", _P, [])()
            if not self.state:
                raise MemoryError(f"{name}_state_new returned NULL")

    def _entry(self, symbol: str, result: Any, params: list[Any]) -> Any:
        function = getattr(self.library, symbol)
        function.restype, function.argtypes = result, params
        return function

    def __del__(self) -> None:
        state = getattr(self, "state", None)
        if state:
            self.state_free(state)

    def __call__(self, *args: Any) -> list[Any]:
        arrays = [np.asarray(a.numpy()) for a in args]
        given = given_dims(arrays, self.unknown)
        dims = (_I64 * max(len(given), 1))(*given)
        ranks = [len(ty.shape) for ty in self.signature.outputs]
        out_dims = (_I64 * max(sum(ranks), 1))()
        code = self.output_dims(dims, out_dims)
        if code:
            raise LibraryError(f"output_dims returned {code}")
        outputs, position = [], 0
        for ty, rank in zip(self.signature.outputs, ranks, strict=True):
            outputs.append(_buffer(tuple(out_dims[position:position + rank]), ty.dtype))
            position += rank
        inputs = []
        for x in arrays:
            copy = _buffer(x.shape, x.dtype)
            copy[...] = x
            inputs.append(copy)
        code = self.call(*([self.state] if self.stateful else []),
                         (_P * max(len(inputs), 1))(*(x.ctypes.data for x in inputs)),
                         dims, (_P * max(len(outputs), 1))(*(y.ctypes.data for y in outputs)))
        if code:
            raise LibraryError(f"the call returned {code}")
        write_state(self.state_sources, [
            ctypes.string_at(self.state_variable(self.state, index), source.numpy().nbytes)
            for index, source in enumerate(self.state_sources)])
        return [sf.constant(y) for y in outputs]


def given_dims(arrays: list[np.ndarray], unknown: list[tuple[bool, ...]] | None) -> list[int]:
    """The dims a caller passes in a library's ``dims`` argument: the inputs' dims the
    library was compiled without (`unknown`, per input; None: every dim known)."""
    masks = unknown or [(False,) * x.ndim for x in arrays]
    return [d for x, mask in zip(arrays, masks, strict=True)
            for d, u in zip(x.shape, mask, strict=True) if u]


def write_state(sources: list[Any], values: list[bytes]) -> None:
    """Copy a library's state variables after a call (their bytes, in the state's order)
    into the program's `sf.Variable`s they were compiled from."""
    for source, data in zip(sources, values, strict=True):
        old = source.numpy()
        source.assign(np.frombuffer(data, old.dtype).reshape(old.shape).copy())


def compile_program(program: Program, variables: list[sf.Variable], generator: Any,
                    unknown_dims: bool, **options: Any) -> tuple[CPUArtefact, list[Any]]:
    """`program` compiled ahead of time as a ``freeze=False`` library (for the inputs' dims,
    or for its unknown dims), with `options` for `sf.aot.compile` (a `target`); and the
    variables its state was made from, in the state's order. `Unsupported` where the
    compiler refuses it on purpose."""
    specs = program.signature() if unknown_dims else [
        sf.TensorSpec(x.shape, x.dtype) for x in program.inputs]
    concrete = sf.function(eager(program, variables, generator)).get_concrete_function(*specs)
    try:
        artefact = sf.aot.compile(concrete, name=f"program{next(_NUMBERS)}", freeze=False,
                                  **options)
    except NotImplementedError as error:
        raise Unsupported(str(error)) from None
    return artefact, [c.source for c in concrete.graph.captures
                      if isinstance(c.value.type, ResourceType)]


class Libraries:
    """Where a campaign's libraries are written (one folder, so that the BLAS a library
    links to is copied beside them once), each under a name of its own."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def way(self, unknown_dims: bool) -> Callable[[Program, list[sf.Variable], Any], Library]:
        """A way of running programs (see `random_programs.execute`): as a library compiled
        for the inputs' dims, or for the program's unknown dims."""
        def make(program: Program, variables: list[sf.Variable], generator: Any) -> Library:
            artefact, state = compile_program(program, variables, generator, unknown_dims)
            path = artefact.save(os.path.join(self.directory, f"lib{artefact.name}.so"))
            library = Library(path, artefact.name, artefact, state,
                              program.unknown if unknown_dims else None)
            os.remove(path)
            os.remove(os.path.splitext(path)[0] + ".h")
            return library
        return make
