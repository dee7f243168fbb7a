"""Random programs run ahead of time on other machines: compiled by `sf.aot.compile` for
aarch64 or WebAssembly and called out of this process, as those machines' users would.

An aarch64 library is called by a C program (`stageflow.testing.c_program`) cross-compiled
and run under qemu; a WebAssembly one by Node.js (`stageflow.testing.wasm_program`). As
in `stageflow.testing.aot_calls`, each program becomes a ``freeze=False`` library, for its
inputs' dims or for its unknown dims; its outputs and, after the call, its state's
variables are read back (the state copied into the program's `sf.Variable`s), so that a
library for another machine is compared with eager exactly like the host's library. The
kernels promise NumPy-on-x86 results on every target (`stageflow.codegen.kernels.rules`),
so the same tolerances hold.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import stageflow as sf
from stageflow.aot import CPUArtefact
from stageflow.testing import c_program, wasm_program
from stageflow.testing.aot_calls import LibraryError, compile_program, given_dims, write_state
from stageflow.testing.random_ops import Program
from stageflow.testing.wasm_program import Result


def on_aarch64(folder: Path, library: CPUArtefact, inputs: Sequence[np.ndarray],
               dims: Sequence[int] = (), timeout: float = 120) -> Result:
    """`library` (for ``aarch64-linux-gnu``) called once on `inputs` and `dims` by a C
    program under qemu, as `wasm_program.run` calls a WebAssembly one."""
    types = c_program.state_types(library)
    executable = c_program.build(folder, library, inputs, state_sizes=[
        int(np.prod(ty.shape, dtype=np.int64)) * np.dtype(ty.dtype).itemsize for ty in types])
    lines = c_program.run(executable, *dims, timeout=timeout)
    code = int(lines[0].split()[-1])  # "rc N", or "output_dims N"
    if code:
        return Result(code, [], [])
    shapes = c_program.output_shapes(lines, library)
    return Result(0, [c_program.read_output(folder, i, ty.dtype, shape) for i, (ty, shape)
                      in enumerate(zip(library.signature.outputs, shapes, strict=True))],
                  [np.fromfile(folder / f"state{i}.bin", ty.dtype).reshape(ty.shape)
                   for i, ty in enumerate(types)])


# How a library of each target is called here.
RUNNERS: dict[str, Callable[..., Result]] = {"aarch64-linux-gnu": on_aarch64,
                                             "wasm32": wasm_program.run}


class TargetLibraries:
    """Where a campaign's libraries for other machines are built and run: a folder each,
    removed once the library ran."""

    def __init__(self, directory: str) -> None:
        self.directory = Path(directory)

    def way(self, target: str, unknown_dims: bool
            ) -> Callable[[Program, list[sf.Variable], Any], Callable[..., list[Any]]]:
        """A way of running programs (see `random_programs.execute`): as a library for
        `target` (one of `RUNNERS`), compiled for the inputs' dims or for the program's
        unknown dims."""
        def make(program: Program, variables: list[sf.Variable], generator: Any
                 ) -> Callable[..., list[Any]]:
            library, sources = compile_program(program, variables, generator, unknown_dims,
                                               target=target)

            def call(*args: Any) -> list[Any]:
                arrays = [np.asarray(a.numpy()) for a in args]
                folder = self.directory / library.name
                folder.mkdir()
                try:
                    result = RUNNERS[target](folder, library, arrays, given_dims(
                        arrays, program.unknown if unknown_dims else None))
                finally:
                    shutil.rmtree(folder)
                if result.code:
                    raise LibraryError(f"the {target} library returned {result.code}")
                write_state(sources, [x.tobytes() for x in result.state])
                return [sf.constant(y) for y in result.outputs]

            return call
        return make
