"""A C program that calls an ahead-of-time library, as its users would: the inputs read from
files, the outputs written to files, the return code printed.

The AOT tests and the ONNX campaign's ``--aot`` mode check a library this way, through a
real C caller linked against it, rather than through ctypes in this process. Needs a C
compiler (``cc``, ``gcc`` or ``clang``). A library for aarch64 is linked with
``aarch64-linux-gnu-gcc`` and its program run under ``qemu-aarch64`` with the target's
system root (Debian's ``gcc-aarch64-linux-gnu`` and ``qemu-user``).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stageflow.aot.library import c_compiler

CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
# Per target that is not this machine: how its programs run here (the emulator, with the
# system root its dynamic loader and C library are found in). Each target's C compiler is
# the library's (`library.C_COMPILERS`).
EMULATORS = {"aarch64-linux-gnu": ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]}
_ELF_MACHINES = {0xB7: "aarch64-linux-gnu"}  # e_machine of an ELF header

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include "NAME.h"

static void *read_file(const char *path, size_t bytes) {
    void *data = malloc(bytes ? bytes : 1);
    FILE *file = fopen(path, "rb");
    if (!file || fread(data, 1, bytes, file) != bytes) {
        fprintf(stderr, "read %s\n", path);
        exit(2);
    }
    fclose(file);
    return data;
}

int main(int argc, char **argv) {
    /* argv: the unknown dims, then one file per input */
    int64_t dims[UNKNOWN + 1];
    for (int i = 0; i < UNKNOWN; i++) dims[i] = atoll(argv[1 + i]);
    int64_t out_dims[OUT_RANKS + 1];
    int rc = NAME_output_dims(dims, out_dims);
    if (rc) { printf("output_dims %d\n", rc); return 0; }
    const void *inputs[INPUTS + 1];
    INPUT_READS
    void *outputs[OUTPUTS + 1];
    int64_t sizes[OUTPUTS + 1];
    OUTPUT_ALLOCS
    STATE_NEW
    for (int step = 0; step < STEPS; step++) {
        rc = CALL;
        printf("rc %d\n", rc);
        if (rc) return 0;
    }
    for (int i = 0; i < OUTPUTS; i++) {
        char path[64];
        snprintf(path, sizeof path, "out%d.bin", i);
        FILE *file = fopen(path, "wb");
        fwrite(outputs[i], 1, sizes[i], file);
        fclose(file);
    }
    STATE_DUMP
    printf("out_dims");
    for (int i = 0; i < OUT_RANKS; i++) printf(" %lld", (long long)out_dims[i]);
    printf("\n");
    return 0;
}
"""


def user_inputs(library: Any) -> list[Any]:
    """The types of the inputs a caller passes (not the state a library keeps)."""
    return [ty for ty, is_resource in zip(library.signature.inputs, library.signature.resources,
                                          strict=True) if not is_resource]


def state_types(library: Any) -> list[Any]:
    """The types of a ``freeze=False`` library's variables, in the state's order."""
    return [ty for ty, is_resource in zip(library.signature.inputs, library.signature.resources,
                                          strict=True) if is_resource]


def build(folder: Path, library: Any, inputs: Sequence[np.ndarray], steps: int = 1,
          state_sizes: Sequence[int] = (), static: bool = False) -> Path:
    """Save `library` (an `sf.aot.compile` artefact) in `folder` with `inputs` beside it, and
    compile a C program calling it `steps` times (dumping `state_sizes` bytes of each state
    variable of a ``freeze=False`` library); the executable. The program loads the shared
    library, or with `static` has the library's object code linked into it."""
    compiler = c_compiler(library.target)
    name = library.name
    library.save(folder / (f"{name}.o" if static else f"lib{name}.so"),
                 header=folder / f"{name}.h")
    unknown = sum(d is None for ty in user_inputs(library) for d in ty.shape)
    reads = []
    for i, array in enumerate(inputs):
        np.ascontiguousarray(array).tofile(folder / f"in{i}.bin")
        reads.append(f'inputs[{i}] = read_file("in{i}.bin", {array.nbytes});')
    allocs, position = [], 0
    for i, ty in enumerate(library.signature.outputs):
        count = " * ".join(f"out_dims[{position + a}]" for a in range(len(ty.shape))) or "1"
        position += len(ty.shape)
        allocs.append(f"sizes[{i}] = ({count}) * {np.dtype(ty.dtype).itemsize}; "
                      f"outputs[{i}] = malloc(sizes[{i}] ? sizes[{i}] : 1);")
    dump = "".join(
        f'{{ FILE *f = fopen("state{i}.bin", "wb"); '
        f"fwrite({name}_state_variable(state, {i}), 1, {size}, f); fclose(f); }}"
        for i, size in enumerate(state_sizes))
    stateful = f"{name}_state_new(" in library.header  # freeze=False, with variables
    source = (HARNESS.replace("NAME", name).replace("UNKNOWN", str(unknown))
              .replace("OUT_RANKS", str(position)).replace("INPUTS", str(len(inputs)))
              .replace("INPUT_READS", "\n    ".join(reads))
              .replace("OUTPUTS", str(len(library.signature.outputs)))
              .replace("OUTPUT_ALLOCS", "\n    ".join(allocs))
              .replace("STATE_NEW", f"{name}_state *state = {name}_state_new();"
                       if stateful else "")
              .replace("CALL", f"{name}(state, inputs, dims, outputs)" if stateful
                       else f"{name}(inputs, dims, outputs)")
              .replace("STEPS", str(steps)).replace("STATE_DUMP", dump))
    (folder / "main.c").write_text(source)
    linked = ([str(folder / f"{name}.o"), *library.libraries, "-lm", "-lpthread",
               *(f"-Wl,-rpath,{Path(p).parent}" for p in library.libraries[:1])] if static
              else [f"-L{folder}", f"-l{name}", f"-Wl,-rpath,{folder}"])
    subprocess.run([compiler, "-O1", "-o", str(folder / "main"), str(folder / "main.c"),
                    *linked], check=True, cwd=folder)
    return folder / "main"


def run(executable: Path, *dims: int, timeout: float = 120) -> list[str]:
    """Run the program with the unknown dims `dims`: its lines (``rc N`` per call, then
    ``out_dims`` and the outputs' dims where the calls succeeded); under
    its target's emulator where it was built for another machine."""
    result = subprocess.run([*_emulator(executable), str(executable), *map(str, dims)],
                            cwd=executable.parent,
                            capture_output=True, text=True, check=True, timeout=timeout)
    return result.stdout.split("\n")


def _emulator(executable: Path) -> list[str]:
    """The command that runs `executable` here: nothing for this machine's programs."""
    with open(executable, "rb") as file:
        header = file.read(20)
    target = _ELF_MACHINES.get(int.from_bytes(header[18:20], "little"))
    if target is None:
        return []
    command = EMULATORS[target]
    if shutil.which(command[0]) is None:
        raise RuntimeError(f"running a program for {target} here needs {command[0]} on PATH")
    return command


def output_shapes(lines: Sequence[str], library: Any) -> list[tuple[int, ...]]:
    """The outputs' shapes of a run whose calls succeeded, from its last line (the dims
    ``NAME_output_dims`` gave), for outputs of unknown dims."""
    dims = [int(d) for d in next(line for line in lines if line.startswith("out_dims"))
            .split()[1:]]
    shapes, position = [], 0
    for ty in library.signature.outputs:
        shapes.append(tuple(dims[position:position + len(ty.shape)]))
        position += len(ty.shape)
    return shapes


def read_output(folder: Path, index: int, dtype: Any, shape: Sequence[int]) -> np.ndarray:
    """Output `index` of the program's last run."""
    return np.fromfile(folder / f"out{index}.bin", dtype=dtype).reshape(shape)


def call(folder: Path, library: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The outputs of `library` (whose dims are all known) called once from C on `inputs`;
    a RuntimeError names the return code when the call fails."""
    shapes = [ty.shape for ty in library.signature.outputs]
    if any(d is None for shape in shapes for d in shape):
        raise ValueError(f"{library.name} has outputs of unknown dims {shapes}: compile it "
                         "for inputs of known shapes, or use build, run and read_output")
    lines = run(build(folder, library, inputs))
    if lines[0] != "rc 0":
        raise RuntimeError(f"the C call of {library.name} returned {lines[0]!r}")
    return [read_output(folder, i, ty.dtype, shape)
            for i, (ty, shape) in enumerate(zip(library.signature.outputs, shapes, strict=True))]
