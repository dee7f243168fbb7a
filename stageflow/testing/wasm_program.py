"""A Node.js program that calls a WebAssembly library through its ES module, as its users
would: the inputs read from files, ``Model.call`` run, the outputs and the state written to
files.

The counterpart of `c_program` for ``wasm32`` libraries: the AOT tests and the campaigns
check a ``.wasm`` this way, through the generated ``NAME.mjs`` under Node.js (Debian's
``nodejs``), rather than through anything of this process. Linking needs Debian's ``lld``
(wasm-ld) and ``wasi-libc``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stageflow.testing.c_program import user_inputs

SCRIPT = r"""
import { readFileSync, writeFileSync } from "node:fs";
import { Model, inputs as specs, variables } from "./NAME.mjs";

const dims = DIMS;
const model = await Model.load(new URL("./NAME.wasm", import.meta.url));
let next = 0;
const values = specs.map((spec, i) => {
  const bytes = new Uint8Array(readFileSync(`in${i}.bin`));  // a copy: aligned, its own
  const type = globalThis[spec.array];
  const data = new type(bytes.buffer, 0, bytes.byteLength / type.BYTES_PER_ELEMENT);
  return { data, shape: spec.shape.map((d) => (d === null ? dims[next++] : d)) };
});
let code = 0;
let results = [];
for (let step = 0; step < STEPS && code === 0; step++) {
  try {
    results = model.call(...values);
  } catch (error) {
    if (typeof error.code !== "number") throw error;
    code = error.code;
    results = [];
  }
}
results.forEach((r, i) => writeFileSync(`out${i}.bin`, new Uint8Array(r.buffer)));
variables.forEach((_, i) =>
  writeFileSync(`state${i}.bin`, new Uint8Array(model.variable(i).buffer)));
writeFileSync("result.json", JSON.stringify({ code, shapes: results.map((r) => r.shape) }));
"""


@dataclass
class Result:
    """What the program's calls gave."""

    code: int  # the last call's return code (or output_dims' code, nonzero)
    outputs: list[np.ndarray]  # the outputs of the last call (empty where code != 0)
    state: list[np.ndarray]  # a freeze=False library's variables after the calls


def run(folder: Path, library: Any, inputs: Sequence[np.ndarray], dims: Sequence[int] = (),
        steps: int = 1, timeout: float = 120) -> Result:
    """Save `library` (a ``wasm32`` `sf.aot.compile` artefact) in `folder` as ``NAME.wasm``
    and ``NAME.mjs``, and call it `steps` times from Node.js on `inputs` (one array per
    input the caller passes), the unknown input dims `dims` in order as the C ABI's dims
    array; the last call's code and outputs, and the state's variables after the calls.
    A JavaScript error that is not a return code (an input the module refuses) raises
    RuntimeError with Node's words.

    >>> import tempfile
    >>> import stageflow as sf
    >>> library = sf.aot.compile(lambda x: x * 2.0, sf.TensorSpec([None], sf.float32),
    ...                          target="wasm32", name="double")
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     result = run(Path(folder), library, [np.arange(3, dtype=np.float32)], dims=[3])
    >>> result.code, result.outputs
    (0, [array([0., 2., 4.], dtype=float32)])
    """
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("calling a WebAssembly library needs Node.js (node) on PATH: "
                           "Debian's nodejs package")
    expected = len(user_inputs(library))
    if len(inputs) != expected:
        raise ValueError(f"{library.name} takes {expected} inputs, given {len(inputs)}")
    folder = Path(folder)
    name = library.name
    library.save(folder / f"{name}.wasm")
    for i, array in enumerate(inputs):
        np.ascontiguousarray(array).tofile(folder / f"in{i}.bin")
    script = (SCRIPT.replace("NAME", name).replace("DIMS", json.dumps([int(d) for d in dims]))
              .replace("STEPS", str(int(steps))))
    (folder / "script.mjs").write_text(script)
    done = subprocess.run([node, "script.mjs"], cwd=folder, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"the Node.js call of {name} failed:\n{done.stderr.strip()}")
    result = json.loads((folder / "result.json").read_text())
    outputs = [np.fromfile(folder / f"out{i}.bin", dtype=ty.dtype).reshape(shape)
               for i, (ty, shape) in enumerate(zip(library.signature.outputs, result["shapes"],
                                                   strict=False))]
    state_types = [ty for ty, is_resource in zip(library.signature.inputs,
                                                 library.signature.resources, strict=True)
                   if is_resource]
    stateful = f"{name}_state_new(" in library.header
    state = [np.fromfile(folder / f"state{i}.bin", dtype=ty.dtype).reshape(ty.shape)
             for i, ty in enumerate(state_types)] if stateful else []
    return Result(result["code"], outputs, state)
