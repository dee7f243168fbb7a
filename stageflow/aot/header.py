"""The C header of an ahead-of-time library: declarations, and the ABI in its comments.

Everything a C programmer needs is in the header itself (the issue's rule: no separate
document): the order, dtypes and shapes of inputs and outputs, which dims the caller passes,
the error codes, the state functions of a ``freeze=False`` library, and the libraries it
loads.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from stageflow.codegen.program.abi import (
    NO_MEMORY,
    NULL_POINTER,
    OP_FAILED,
    TOO_LARGE,
    ProgramSignature,
)
from stageflow.core.primitive import ShapedType

_C_TYPES = {
    "float32": "float", "float64": "double", "int8": "int8_t", "int16": "int16_t",
    "int32": "int32_t", "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t",
    "uint32": "uint32_t", "uint64": "uint64_t", "bool": "bool (one byte)",
    "float16": "IEEE half (uint16_t bits)", "bfloat16": "bfloat16 (uint16_t bits)",
    "complex64": "float _Complex", "complex128": "double _Complex",
    **{name: f"{name} (uint8_t bits)" for name in ("float8_e4m3fn", "float8_e4m3fnuz",
                                                    "float8_e5m2", "float8_e5m2fnuz",
                                                    "float8_e8m0fnu")},
    "float4_e2m1fn": "float4_e2m1fn (uint8_t, the low 4 bits)",
    "int4": "int4 (uint8_t, the low 4 bits)", "uint4": "uint4 (uint8_t, the low 4 bits)",
    "int2": "int2 (uint8_t, the low 2 bits)", "uint2": "uint2 (uint8_t, the low 2 bits)",
}


def _describe(ty: ShapedType) -> str:
    dims = ", ".join("?" if d is None else str(d) for d in ty.shape)
    dtype = np.dtype(ty.dtype).name
    return f"{_C_TYPES.get(dtype, dtype)} [{dims}]"


def header_text(symbol: str, signature: ProgramSignature, variables: list[Any],
                libraries: list[str]) -> str:
    """The header of library `symbol` with program `signature` (``variables``: the state of
    a ``freeze=False`` library, in order)."""
    guard = f"STAGEFLOW_{symbol.upper()}_H"
    user = [(i, ty) for i, (ty, is_resource) in enumerate(
        zip(signature.inputs, signature.resources, strict=True)) if not is_resource]
    unknown = [f"input {n} dim {axis}" for n, (_, ty) in enumerate(user)
               for axis, d in enumerate(ty.shape) if d is None]
    lines = [
        f"/* {symbol}: compiled ahead of time by stageflow. */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        "#include <stdint.h>",
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
        "/*",
        " * Inputs (`inputs[i]`: a pointer to C-contiguous, aligned data):",
    ]
    lines += [f" *   {n}: {_describe(ty)}" for n, (_, ty) in enumerate(user)] or [" *   none"]
    lines += [" * Outputs (`outputs[i]`: C-contiguous memory the caller allocates, overlapping",
              " * nothing; its dims from " + f"{symbol}_output_dims):"]
    lines += [f" *   {n}: {_describe(ty)}" for n, ty in enumerate(signature.outputs)] or [
        " *   none"]
    lines += [
        " * dims: the unknown (?) input dims, in order: "
        + (", ".join(unknown) if unknown else "none (pass NULL)") + ".",
        " *",
        " * Returns 0 on success. Otherwise nothing was written outside the outputs and the",
        " * outputs hold nothing meaningful:",
        " *   1 + i          input i has dims that do not fit its type",
        f" *   {OP_FAILED} + k       op k of the function refused its operands (unknown dims "
        "that do",
        " *                  not agree with each other, an index out of range)",
        f" *   {NO_MEMORY}            out of memory",
        f" *   {TOO_LARGE}            a result or temporary the input dims imply would take more",
        " *                  than 2^62 bytes",
        f" *   {NULL_POINTER}            a NULL pointer where memory is needed (inputs, outputs,",
        " *                  each buffer, dims when there are unknown dims, the state)",
    ]
    if libraries:
        lines += [" *", " * The library calls the CBLAS of NumPy's bundled OpenBLAS: a saved .so"
                        " finds", " * these files beside it (copied there; keep them together):"]
        lines += [f" *   {os.path.basename(path)}" for path in libraries]
        lines += [" * An .o must be linked with them (they are in NumPy's numpy.libs)."]
    lines += [" */", ""]
    if variables:
        lines += [
            "/*",
            " * Variables (the state): created with their values at compile time; every call",
            " * reads them and replaces those it assigns (only when the call succeeds).",
        ]
        lines += [f" *   {n}: {getattr(v, 'name', '?')}  {_describe(ShapedType(v.shape, v.dtype))}"
                  for n, v in enumerate(variables)]
        lines += [
            " */",
            f"typedef struct {symbol}_state {symbol}_state;",
            f"{symbol}_state *{symbol}_state_new(void);  /* NULL when out of memory */",
            f"void {symbol}_state_free({symbol}_state *state);  /* NULL: nothing */",
            "/* The current value of variable `index` (C-contiguous; NULL for a bad index",
            " * or a NULL state).",
            " * A call that assigns the variable replaces its memory: the pointer is valid",
            " * until the next successful call (or state_free); ask again after a call. */",
            f"void *{symbol}_state_variable({symbol}_state *state, int32_t index);",
            "",
            f"int32_t {symbol}({symbol}_state *state, const void *const *inputs, "
            "const int64_t *dims, void *const *outputs);",
        ]
    else:
        lines.append(f"int32_t {symbol}(const void *const *inputs, const int64_t *dims, "
                     "void *const *outputs);")
    lines += [
        "",
        "/* Writes every dim of every output, output after output, for the given unknown",
        " * input dims; returns 0, or 1 + i for input i's dims. */",
        f"int32_t {symbol}_output_dims(const int64_t *dims, int64_t *out_dims);",
        "",
        "/* Frees the temporaries' memory the library keeps from one call to the next (the",
        " * next call allocates it again); safe at any time, a running call keeps its own. */",
        f"void {symbol}_release(void);",
        "",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        "",
        f"#endif /* {guard} */",
        "",
    ]
    return "\n".join(lines)
