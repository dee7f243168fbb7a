"""Large constants of JIT-compiled programs as host memory the code names by symbol.

A program's constants are LLVM globals. Written into the module as initializers, their
bytes go through llvmlite's IR text, a few characters a byte, and through LLVM's parser:
for a model's weights (hundreds of megabytes) that is most of the first call. In the
process that runs the code there is no need: a large constant is an aligned host array,
kept for the life of the process, and the module declares an external global that the
JIT's linker resolves to it (`llvm.add_symbol`). The symbol is the bytes' digest, so equal
constants share one array and the IR text, the disk cache's key, still says what the code
reads. Ahead-of-time libraries, which must carry their constants, embed them
(`placement.constant_bytes`).
"""

from __future__ import annotations

import hashlib

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from stageflow.codegen.llvm.emitter import I8
from stageflow.codegen.program.placement import constant_bytes
from stageflow.codegen.program.workspace import ALIGNMENT

# Constants of at most this many bytes are embedded in the module as before: their text is
# short, and the optimiser may read their values.
EMBED_LIMIT = 1 << 16

_KEPT: dict[str, np.ndarray] = {}  # symbol -> the aligned bytes the code reads, never freed


def program_constant(module: ir.Module, name: str, array: np.ndarray) -> ir.GlobalVariable:
    """The global a JIT program reads `array` through: embedded under `name` when small,
    else declared external under its digest and bound to host memory."""
    data = np.ascontiguousarray(array)
    if data.nbytes <= EMBED_LIMIT:
        return constant_bytes(module, name, data)
    raw = data.reshape(-1).view(np.uint8)
    symbol = f"sf.const.{hashlib.blake2b(raw, digest_size=16).hexdigest()}"
    if symbol not in _KEPT:
        block = np.empty(raw.size + ALIGNMENT, np.uint8)
        start = -block.ctypes.data % ALIGNMENT
        aligned = block[start:start + raw.size]
        aligned[:] = raw
        _KEPT[symbol] = block
        llvm.add_symbol(symbol, aligned.ctypes.data)
    try:
        return module.get_global(symbol)
    except KeyError:
        variable = ir.GlobalVariable(module, ir.ArrayType(I8, raw.size), symbol)
        variable.global_constant = True
        variable.align = ALIGNMENT
        return variable
