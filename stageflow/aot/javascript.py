"""The ES module that loads a WebAssembly library and calls it from JavaScript.

A ``.wasm`` module speaks the C ABI (`header`): pointers into its memory, dims as 64-bit
integers, return codes. JavaScript callers want typed arrays in and typed arrays out, in
Node.js and in browsers alike, so `module_text` writes ``NAME.mjs`` for one library from
its signature: ``Model.load()`` compiles and instantiates the module (running its C
constructors, which fill the splat constants, exactly once), and ``model.call(...)`` checks
the inputs against the signature, copies them into the module's memory, asks for the
output dims, calls the library and copies the outputs out, freeing what it allocated.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from stageflow.codegen.program.abi import (
    NO_MEMORY,
    NULL_POINTER,
    OP_FAILED,
    TOO_LARGE,
    ProgramSignature,
)

# The typed array that holds each dtype's elements: the bits of the floats that JavaScript
# has no array for (IEEE half, bfloat16, the 8-bit floats) as unsigned integers.
ARRAY_TYPES = {
    "float32": "Float32Array", "float64": "Float64Array", "int8": "Int8Array",
    "int16": "Int16Array", "int32": "Int32Array", "int64": "BigInt64Array",
    "uint8": "Uint8Array", "uint16": "Uint16Array", "uint32": "Uint32Array",
    "uint64": "BigUint64Array", "bool": "Uint8Array", "float16": "Uint16Array",
    "bfloat16": "Uint16Array",
    **{name: "Uint8Array" for name in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                                       "float8_e5m2fnuz", "float8_e8m0fnu")},
}

TEMPLATE = r"""// @NAME@: a library compiled ahead of time by stageflow for WebAssembly (wasm32).
//
//   import { Model } from "./@NAME@.mjs";
//   const model = await Model.load();          // @NAME@.wasm beside this file
//   const [y] = model.call(new Float32Array(...));   // y.shape: its dims
//
// Inputs are typed arrays of their dtypes (or {data, shape}); an input with one unknown
// dim has it inferred from its length. Outputs are copies, each with a `shape` property.

const NAME = "@NAME@";
export const inputs = @INPUTS@;
export const outputs = @OUTPUTS@;
export const variables = @VARIABLES@;
const STATEFUL = @STATEFUL@;
const CODES = @CODES@;
const ARRAYS = {
  Float32Array, Float64Array, Int8Array, Int16Array, Int32Array, BigInt64Array,
  Uint8Array, Uint16Array, Uint32Array, BigUint64Array,
};

/** What a nonzero return code of @NAME@ means. */
export function explain(code) {
  if (code >= @OP_FAILED@) {
    return `op ${code - @OP_FAILED@} of the function refused its operands (unknown dims ` +
      "that do not agree with each other, an index out of range)";
  }
  if (CODES[code]) return CODES[code];
  if (code >= 1 && code <= inputs.length) {
    return `input ${code - 1} has dims that do not fit its type ${describe(inputs[code - 1])}`;
  }
  return "an unknown code";
}

function describe(spec) {
  return `${spec.dtype} [${spec.shape.map((d) => (d === null ? "?" : d)).join(", ")}]`;
}

function given(value) {
  if (value === null || value === undefined) return String(value);
  if (ArrayBuffer.isView(value)) return `a ${value.constructor.name} of ${value.length} elements`;
  if (Array.isArray(value)) return `an Array of ${value.length} elements`;
  return `a ${typeof value === "object" ? value.constructor?.name ?? "object" : typeof value}`;
}

function product(dims) {
  return dims.reduce((a, b) => a * b, 1);
}

/** The typed array and dims of input `index`: `value` checked against its spec. */
function checked(value, index) {
  const spec = inputs[index];
  const where = `${NAME}: input ${index} (${describe(spec)}, a ${spec.array})`;
  let data = value;
  let shape = value?.shape;
  if (value && !ArrayBuffer.isView(value) && typeof value === "object" && "data" in value) {
    data = value.data;
    shape = value.shape;
  }
  if (!(data instanceof ARRAYS[spec.array])) {
    throw new TypeError(`${where} must be a ${spec.array}, given ${given(data)}`);
  }
  if (shape !== undefined && shape !== null) {
    shape = Array.from(shape, Number);
    const fits = shape.length === spec.shape.length &&
      shape.every((d, a) => Number.isInteger(d) && d >= 0 &&
                            (spec.shape[a] === null || spec.shape[a] === d));
    if (!fits) throw new Error(`${where}: shape [${shape.join(", ")}] does not fit`);
    if (product(shape) !== data.length) {
      throw new Error(`${where}: shape [${shape.join(", ")}] holds ${product(shape)} ` +
                      `elements, given ${data.length}`);
    }
    return [data, shape];
  }
  const unknown = spec.shape.filter((d) => d === null).length;
  const known = product(spec.shape.filter((d) => d !== null));
  if (unknown === 0 && data.length !== known) {
    throw new Error(`${where}: expected ${known} elements, given ${data.length}`);
  }
  if (unknown > 1) {
    throw new Error(`${where} has ${unknown} unknown dims: pass {data, shape}`);
  }
  if (unknown === 1 && (known === 0 ? data.length !== 0 : data.length % known !== 0)) {
    throw new Error(`${where}: ${data.length} elements are not a whole number of ` +
                    `${known}-element rows`);
  }
  const inferred = known === 0 ? 0 : data.length / known;
  return [data, spec.shape.map((d) => (d === null ? inferred : d))];
}

export class Model {
  static inputs = inputs;
  static outputs = outputs;
  static variables = variables;

  /** Compile and instantiate the module: `source` is a path or file: URL in Node.js, a URL
   * in a browser (fetched), bytes, or a WebAssembly.Module; by default @NAME@.wasm beside
   * this file. */
  static async load(source = new URL("./@NAME@.wasm", import.meta.url)) {
    return new Model(await instantiate(await compile(source)));
  }

  constructor(instance) {
    this.exports = instance.exports;
    this.exports._initialize();  // the C constructors (filling large splats), once
    this.state = 0;
    if (STATEFUL) {
      this.state = this.exports.@NAME@_state_new() >>> 0;
      if (!this.state) throw new Error(`${NAME}: out of memory creating the state`);
    }
  }

  get inputs() { return inputs; }
  get outputs() { return outputs; }
  get variables() { return variables; }

  /** Call @NAME@ on one typed array (or {data, shape}) per input; its outputs. */
  call(...values) {
    if (values.length !== inputs.length) {
      throw new Error(`${NAME}: expected ${inputs.length} inputs ` +
                      `(${inputs.map(describe).join("; ")}), given ${values.length}`);
    }
    const arrays = [];
    const dims = [];
    values.forEach((value, i) => {
      const [data, shape] = checked(value, i);
      arrays.push(data);
      shape.forEach((d, a) => { if (inputs[i].shape[a] === null) dims.push(d); });
    });
    const { code, outputs: results } = this.invoke(arrays, dims);
    if (code !== 0) {
      const error = new Error(`${NAME} returned ${code}: ${explain(code)}`);
      error.code = code;
      throw error;
    }
    return results;
  }

  /** The C call itself: `arrays` (typed arrays of the inputs' dtypes) and the unknown
   * input dims in order, unchecked; {code, outputs}, outputs empty on a nonzero code. */
  invoke(arrays, dims) {
    const e = this.exports;
    const owned = [];
    const alloc = (bytes) => {
      const pointer = e.malloc(Math.max(bytes, 1)) >>> 0;
      if (!pointer) throw new Error(`${NAME}: out of memory allocating ${bytes} bytes`);
      owned.push(pointer);
      return pointer;
    };
    try {
      const ranks = outputs.reduce((n, spec) => n + spec.shape.length, 0);
      const dimsAt = alloc(8 * dims.length);
      const outDimsAt = alloc(8 * ranks);
      const inputsAt = alloc(4 * arrays.length);
      const outputsAt = alloc(4 * outputs.length);
      const places = arrays.map((data) => alloc(data.byteLength));
      new BigInt64Array(e.memory.buffer, dimsAt, dims.length).set(dims.map(BigInt));
      let code = e.@NAME@_output_dims(dimsAt, outDimsAt);
      if (code !== 0) return { code, outputs: [] };
      const all = Array.from(new BigInt64Array(e.memory.buffer, outDimsAt, ranks), Number);
      let at = 0;
      const shapes = outputs.map((spec) => all.slice(at, (at += spec.shape.length)));
      const sizes = shapes.map((shape, i) =>
        product(shape) * ARRAYS[outputs[i].array].BYTES_PER_ELEMENT);
      const results = sizes.map(alloc);
      const memory = new Uint8Array(e.memory.buffer);
      arrays.forEach((data, i) =>
        memory.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), places[i]));
      new Uint32Array(e.memory.buffer, inputsAt, arrays.length).set(places);
      new Uint32Array(e.memory.buffer, outputsAt, outputs.length).set(results);
      code = STATEFUL ? e.@NAME@(this.state, inputsAt, dimsAt, outputsAt)
                      : e.@NAME@(inputsAt, dimsAt, outputsAt);
      if (code !== 0) return { code, outputs: [] };
      return {
        code,
        outputs: results.map((pointer, i) =>
          copy(e.memory.buffer, pointer, outputs[i].array, shapes[i])),
      };
    } finally {
      owned.forEach((pointer) => e.free(pointer));
    }
  }

  /** A copy of state variable `index` (a freeze=False library's training state). */
  variable(index) {
    if (!STATEFUL) throw new Error(`${NAME} keeps no state (it was compiled with freeze=True)`);
    const spec = variables[index];
    if (!spec) throw new RangeError(`${NAME}: no variable ${index}; there are ${variables.length}`);
    const pointer = this.exports.@NAME@_state_variable(this.state, index) >>> 0;
    return copy(this.exports.memory.buffer, pointer, spec.array, spec.shape);
  }

  /** Free the temporaries the library keeps from one call to the next. */
  release() {
    this.exports.@NAME@_release();
  }
}

function copy(buffer, pointer, array, shape) {
  const type = ARRAYS[array];
  const bytes = product(shape) * type.BYTES_PER_ELEMENT;
  const result = new type(buffer.slice(pointer, pointer + bytes));
  result.shape = shape;
  return result;
}

async function compile(source) {
  if (source instanceof WebAssembly.Module) return source;
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    return WebAssembly.compile(source);
  }
  const url = source instanceof URL ? source : null;
  const node = typeof process !== "undefined" && process.versions?.node !== undefined;
  if (node && (url === null ? !/^https?:/.test(String(source)) : url.protocol === "file:")) {
    const { readFile } = await import("node:fs/promises");
    const path = url ?? (String(source).startsWith("file:") ? new URL(source) : source);
    return WebAssembly.compile(await readFile(path));
  }
  const response = await fetch(source);
  if (!response.ok) throw new Error(`${NAME}: fetching ${source} failed: ${response.status}`);
  return WebAssembly.compile(await response.arrayBuffer());
}

async function instantiate(module) {
  return WebAssembly.instantiate(module, {});  // the module imports nothing
}
"""


def spec(ty: Any, name: str) -> dict[str, Any]:
    """A JSON description of one value: name, dtype, dims (null where unknown), array."""
    dtype = np.dtype(ty.dtype).name
    if dtype not in ARRAY_TYPES:
        raise NotImplementedError(
            f"sf.aot: a WebAssembly library's {name} is {dtype}, which its JavaScript "
            "module has no typed array for: pass or return it as real parts (sf.complex of "
            "two float inputs, sf.math.real and sf.math.imag of an output) or in a wider "
            "dtype cast inside the function; or save a .o to call it from C")
    return {"name": name, "dtype": dtype, "shape": list(ty.shape), "array": ARRAY_TYPES[dtype]}


def module_text(name: str, signature: ProgramSignature, stateful: bool) -> str:
    """``NAME.mjs`` for library `name` of `signature` (`stateful`: it keeps a state object).

    >>> from stageflow.core.primitive import ShapedType
    >>> signature = ProgramSignature("f", (ShapedType((None, 3), np.dtype("float32")),),
    ...                              (False,), (ShapedType((None,), np.dtype("int64")),), ())
    >>> text = module_text("f", signature, stateful=False)
    >>> 'export const inputs = [{"name": "input 0", "dtype": "float32", "shape": [null, 3]' \\
    ...     in text
    True
    >>> "e.f(inputsAt, dimsAt, outputsAt)" in text
    True
    """
    user = [ty for ty, is_resource in zip(signature.inputs, signature.resources, strict=True)
            if not is_resource]
    state = [ty for ty, is_resource in zip(signature.inputs, signature.resources, strict=True)
             if is_resource]
    codes = {NO_MEMORY: "out of memory",
             TOO_LARGE: "a result or temporary the input dims imply would take more than "
                        "2^62 bytes",
             NULL_POINTER: "a NULL pointer where memory is needed"}
    replacements = {
        "@INPUTS@": json.dumps([spec(ty, f"input {i}") for i, ty in enumerate(user)]),
        "@OUTPUTS@": json.dumps([spec(ty, f"output {i}")
                                 for i, ty in enumerate(signature.outputs)]),
        "@VARIABLES@": json.dumps([spec(ty, f"variable {i}") for i, ty in enumerate(state)]),
        "@STATEFUL@": json.dumps(stateful),
        "@CODES@": json.dumps({str(code): text for code, text in codes.items()}),
        "@OP_FAILED@": str(OP_FAILED),
        "@NAME@": name,
    }
    text = TEMPLATE
    for key, value in replacements.items():
        text = text.replace(key, value)
    return text
