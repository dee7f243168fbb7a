"""A Node.js program that calls a WebAssembly library through its ES module, as its users
would: the inputs read from files, ``Model.call`` run, the outputs and the state written to
files.

The counterpart of `c_program` for ``wasm32`` libraries: the AOT tests and the campaigns
check a ``.wasm`` this way, through the generated ``NAME.mjs`` under Node.js (Debian's
``nodejs``), rather than through anything of this process. Linking needs Debian's ``lld``
(wasm-ld) and ``wasi-libc``.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stageflow.testing.c_program import state_types, user_inputs

# The calls, the same in Node.js and in a page: `read(path)` gives a file's bytes (a copy:
# aligned, its own), `write(path, bytes)` stores them, `finish(error)` reports the end.
BODY = r"""
const dims = DIMS;
try {
  const model = await Model.load(new URL("./NAME.wasm", import.meta.url));
  let next = 0;
  const values = [];
  for (const [i, spec] of specs.entries()) {
    const bytes = await read(`in${i}.bin`);
    const type = globalThis[spec.array];
    const data = new type(bytes.buffer, 0, bytes.byteLength / type.BYTES_PER_ELEMENT);
    values.push({ data, shape: spec.shape.map((d) => (d === null ? dims[next++] : d)) });
  }
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
  for (const [i, r] of results.entries()) await write(`out${i}.bin`, new Uint8Array(r.buffer));
  for (const i of variables.keys()) {
    await write(`state${i}.bin`, new Uint8Array(model.variable(i).buffer));
  }
  await write("result.json", JSON.stringify({ code, shapes: results.map((r) => r.shape) }));
  finish(null);
} catch (error) {
  finish(error);
}
"""
NODE = r"""
import { readFileSync, writeFileSync } from "node:fs";
import { Model, inputs as specs, variables } from "./NAME.mjs";
const read = async (path) => new Uint8Array(readFileSync(path));
const write = async (path, bytes) => writeFileSync(path, bytes);
const finish = (error) => { if (error) throw error; };
"""
# A page served from the folder: files are fetched, and stored by PUT requests the
# server writes into the folder (`_Folder`); the end is a PUT of "finished".
PAGE = r"""<!doctype html><html><body><script type="module">
import { Model, inputs as specs, variables } from "./NAME.mjs";
const read = async (path) => new Uint8Array(await (await fetch(path)).arrayBuffer());
const write = async (path, bytes) => { await fetch(path, { method: "PUT", body: bytes }); };
const finish = (error) => write("finished", error ? String(error.stack || error) : "");
BODY
</script></body></html>
"""


@dataclass
class Result:
    """What the program's calls gave."""

    code: int  # the last call's return code (or output_dims' code, nonzero)
    outputs: list[np.ndarray]  # the outputs of the last call (empty where code != 0)
    state: list[np.ndarray]  # a freeze=False library's variables after the calls


def run(folder: Path, library: Any, inputs: Sequence[np.ndarray], dims: Sequence[int] = (),
        steps: int = 1, timeout: float = 120, browser: str | None = None) -> Result:
    """Save `library` (a ``wasm32`` `sf.aot.compile` artefact) in `folder` as ``NAME.wasm``
    and ``NAME.mjs``, and call it `steps` times from Node.js on `inputs` (one array per
    input the caller passes), the unknown input dims `dims` in order as the C ABI's dims
    array; the last call's code and outputs, and the state's variables after the calls.
    A JavaScript error that is not a return code (an input the module refuses) raises
    RuntimeError with its words. With `browser` (Chromium's path), the calls run in a page
    of headless Chromium served from `folder` on 127.0.0.1 instead.

    >>> import tempfile
    >>> import stageflow as sf
    >>> library = sf.aot.compile(lambda x: x * 2.0, sf.TensorSpec([None], sf.float32),
    ...                          target="wasm32", name="double")
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     result = run(Path(folder), library, [np.arange(3, dtype=np.float32)], dims=[3])
    >>> result.code, result.outputs
    (0, [array([0., 2., 4.], dtype=float32)])
    """
    expected = len(user_inputs(library))
    if len(inputs) != expected:
        raise ValueError(f"{library.name} takes {expected} inputs, given {len(inputs)}")
    folder = Path(folder)
    name = library.name
    library.save(folder / f"{name}.wasm")
    for i, array in enumerate(inputs):
        np.ascontiguousarray(array).tofile(folder / f"in{i}.bin")
    body = (BODY.replace("NAME", name).replace("DIMS", json.dumps([int(d) for d in dims]))
            .replace("STEPS", str(int(steps))))
    if browser is None:
        _in_node(folder, (NODE + body).replace("NAME", name), timeout)
    else:
        _in_browser(folder, PAGE.replace("BODY", body).replace("NAME", name), browser, timeout)
    result = json.loads((folder / "result.json").read_text())
    outputs = [np.fromfile(folder / f"out{i}.bin", dtype=ty.dtype).reshape(shape)
               for i, (ty, shape) in enumerate(zip(library.signature.outputs, result["shapes"],
                                                   strict=False))]
    stateful = f"{name}_state_new(" in library.header
    state = [np.fromfile(folder / f"state{i}.bin", dtype=ty.dtype).reshape(ty.shape)
             for i, ty in enumerate(state_types(library))] if stateful else []
    return Result(result["code"], outputs, state)


def _in_node(folder: Path, script: str, timeout: float) -> None:
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("calling a WebAssembly library needs Node.js (node) on PATH: "
                           "Debian's nodejs package")
    (folder / "script.mjs").write_text(script)
    done = subprocess.run([node, "script.mjs"], cwd=folder, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"the Node.js call failed:\n{done.stderr.strip()}")


class _Folder(http.server.SimpleHTTPRequestHandler):
    """Serves the folder (ES modules as JavaScript, WebAssembly as such) and writes what a
    page PUTs into it."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".mjs": "text/javascript", ".wasm": "application/wasm"}

    def do_PUT(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Path(self.directory, Path(self.path).name).write_bytes(body)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


# Headless Chromium on a closed machine: no connections of its own (they are refused, many
# at a time), no first-run pages, a profile of its own.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--disable-quic"]


def _in_browser(folder: Path, page: str, browser: str, timeout: float) -> None:
    (folder / "index.html").write_text(page)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Folder, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
    finished = folder / "finished"
    with tempfile.TemporaryDirectory() as profile:
        process = subprocess.Popen([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", url],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   env={**os.environ, "HOME": profile, "TMPDIR": profile})
        try:
            deadline = time.monotonic() + timeout
            while not finished.exists() and process.poll() is None:
                if time.monotonic() > deadline:
                    raise subprocess.TimeoutExpired(browser, timeout)
                time.sleep(0.05)
        finally:
            process.kill()
            _, errors = process.communicate()
            server.shutdown()
            server.server_close()
    if not finished.exists():
        raise RuntimeError(f"Chromium stopped before the page finished:\n{errors[-2000:]}")
    error = finished.read_text()
    if error:
        raise RuntimeError(f"the call in Chromium failed:\n{error}")
