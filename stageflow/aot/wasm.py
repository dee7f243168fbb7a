"""WebAssembly libraries: the object code of a ``wasm32`` artefact linked into a module.

The generated code declares C's allocation functions with 64-bit sizes, as they are on the
64-bit machines it was written for; on wasm32 ``size_t`` is 32 bits, and a call through
the wrong signature traps. `adapt` points the module's calls at small functions of its
own that take the 64-bit size, refuse what 32 bits cannot hold (NULL, as an allocation
that fails: the program returns its out-of-memory code) and call the C library's.
"""

from __future__ import annotations

import llvmlite.binding as llvm

# The C functions the generated code declares with 64-bit sizes: name -> (the result and
# parameters as declared, the indices of the size parameters).
_SIZED = {
    "malloc": ("ptr", ["i64"], [0]),
    "calloc": ("ptr", ["i64", "i64"], [0, 1]),
    "aligned_alloc": ("ptr", ["i64", "i64"], [0, 1]),
}
_PREFIX = "sf.wasm."


def adapt(module: llvm.ModuleRef) -> None:
    """Make `module`'s declarations of `_SIZED` functions call them with wasm32's sizes."""
    declared = [f for f in module.functions if f.name in _SIZED and f.is_declaration]
    if not declared:
        return
    for function in declared:
        function.name = _PREFIX + function.name
    shims = llvm.parse_assembly("\n".join(_shim(f.name[len(_PREFIX):]) for f in declared))
    shims.triple, shims.data_layout = module.triple, module.data_layout
    module.link_in(shims)


def _shim(name: str) -> str:
    """``ptr sf.wasm.NAME(i64...)``: NULL where a size is over 32 bits, else ``NAME(i32...)``."""
    result, params, _ = _SIZED[name]
    arguments = ", ".join(f"i64 %a{i}" for i in range(len(params)))
    checks, narrowed = [], []
    fits = "true"
    for i in range(len(params)):
        checks.append(f"  %f{i} = icmp ule i64 %a{i}, 4294967295\n"
                      f"  %t{i} = trunc i64 %a{i} to i32\n"
                      f"  %ok{i} = and i1 {fits}, %f{i}")
        fits = f"%ok{i}"
        narrowed.append(f"i32 %t{i}")
    return (f"declare {result} @{name}({', '.join('i32' for _ in params)})\n"
            f"define internal {result} @{_PREFIX}{name}({arguments}) {{\n"
            + "\n".join(checks) +
            f"\n  br i1 {fits}, label %call, label %refuse\n"
            f"call:\n  %r = call {result} @{name}({', '.join(narrowed)})\n  ret {result} %r\n"
            f"refuse:\n  ret {result} null\n}}\n")


def save(artefact: object, path: str) -> str:
    """Link `artefact` into a WebAssembly module at `path` (with its ES module beside it)."""
    raise NotImplementedError("sf.aot: writing a .wasm module is not available yet; save a .o")
