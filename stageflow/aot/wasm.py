"""WebAssembly libraries: the object code of a ``wasm32`` artefact linked into a module.

The generated code declares C's allocation functions with 64-bit sizes, as they are on the
64-bit machines it was written for; on wasm32 ``size_t`` is 32 bits, and a call through
the wrong signature traps. `adapt` points the module's calls at small functions of its
own that take the 64-bit size, refuse what 32 bits cannot hold (NULL, as an allocation
that fails: the program returns its out-of-memory code) and call the C library's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from typing import Any

import llvmlite.binding as llvm

from stageflow.aot import javascript

# Where the WASI C library (Debian's wasi-libc) is found: its libc.a, libm.a, crt1-reactor.o.
LIBC_DIRS = ("/usr/lib/wasm32-wasi", "/usr/share/wasi-sysroot/lib/wasm32-wasi")
# The stack at the bottom of memory (--stack-first: an overflow runs below address 0 and
# traps, instead of overwriting data). 1 MiB: the generated code keeps only buffers of
# fixed size on the stack (no alloca sized at run time), the largest the own gemm's 16 KiB
# packed panel, and an op's tasks run in turn on this one stack, not on worker threads;
# more would only add to the module's initial memory.
STACK_BYTES = 1 << 20
MAX_MEMORY = 1 << 32  # wasm32's whole address space; memory grows as malloc asks

# The C functions the generated code declares with 64-bit sizes: name -> (the result and
# parameters as declared, the indices of the size parameters).
_SIZED = {
    "malloc": ("ptr", ["i64"], [0]),
    "calloc": ("ptr", ["i64", "i64"], [0, 1]),
    "aligned_alloc": ("ptr", ["i64", "i64"], [0, 1]),
}
_PREFIX = "sf.wasm."

# IEEE half <-> float, which LLVM lowers to calls of these routines on wasm32 (it has no
# instructions for half) and which the WASI C library does not define: exact, rounding to
# nearest even, with infinities, NaNs (made quiet) and subnormals. Weak, so that a
# compiler runtime linked with a saved .o wins; external, so that they outlive the
# optimiser until the code generator emits their calls.
HALF_ROUTINES = r"""
define weak float @__extendhfsf2(i16 %h) {
  %w = zext i16 %h to i32
  %sign = and i32 %w, 32768
  %signbit = shl i32 %sign, 16
  %exp = and i32 %w, 31744
  %mant = and i32 %w, 1023
  %magnitude = and i32 %w, 32767
  %shifted = shl i32 %magnitude, 13
  %rebiased = add i32 %shifted, 939524096
  %normal = or i32 %rebiased, %signbit
  %payload = shl i32 %mant, 13
  %special0 = or i32 %payload, 2139095040
  %special = or i32 %special0, %signbit
  %small = uitofp i32 %mant to float
  %scaled = fmul float %small, 0x3E70000000000000
  %scaledbits = bitcast float %scaled to i32
  %subnormal = or i32 %scaledbits, %signbit
  %isspecial = icmp eq i32 %exp, 31744
  %issmall = icmp eq i32 %exp, 0
  %a = select i1 %isspecial, i32 %special, i32 %normal
  %b = select i1 %issmall, i32 %subnormal, i32 %a
  %r = bitcast i32 %b to float
  ret float %r
}

define weak i16 @__truncsfhf2(float %f) {
  %bits = bitcast float %f to i32
  %high = lshr i32 %bits, 16
  %sign = and i32 %high, 32768
  %abs = and i32 %bits, 2147483647
  %m = sub i32 %abs, 939524096
  %lsb0 = lshr i32 %m, 13
  %lsb = and i32 %lsb0, 1
  %bias = add i32 %lsb, 4095
  %rounded = add i32 %m, %bias
  %normal = lshr i32 %rounded, 13
  %absf = bitcast i32 %abs to float
  %scaled = fmul float %absf, 0x4170000000000000
  %even = call float @llvm.roundeven.f32(float %scaled)
  %subnormal = fptoui float %even to i32
  %nanpayload = lshr i32 %abs, 13
  %nanbits0 = and i32 %nanpayload, 1023
  %nan = or i32 %nanbits0, 32256
  %isnan = icmp ugt i32 %abs, 2139095040
  %isinf = icmp uge i32 %abs, 1199566848
  %isnormal = icmp uge i32 %abs, 947912704
  %a = select i1 %isnormal, i32 %normal, i32 %subnormal
  %b = select i1 %isinf, i32 31744, i32 %a
  %c = select i1 %isnan, i32 %nan, i32 %b
  %d = or i32 %c, %sign
  %r = trunc i32 %d to i16
  ret i16 %r
}

declare float @llvm.roundeven.f32(float)
"""


def adapt(module: llvm.ModuleRef) -> None:
    """Make `module`'s declarations of `_SIZED` functions call them with wasm32's sizes,
    and give a module that computes with IEEE halves `HALF_ROUTINES`.

    >>> lines = ["declare ptr @malloc(i64)", "define ptr @f() {",
    ...          "  %p = call ptr @malloc(i64 8)", "  ret ptr %p", "}"]
    >>> module = llvm.parse_assembly(chr(10).join(lines))
    >>> adapt(module)
    >>> sorted((f.name, f.linkage.name) for f in module.functions)
    [('f', 'external'), ('malloc', 'external'), ('sf.wasm.malloc', 'internal')]
    >>> "declare ptr @malloc(i32)" in str(module)
    True
    """
    if re.search(r"\bhalf\b", str(module)):
        routines = llvm.parse_assembly(HALF_ROUTINES)
        routines.triple, routines.data_layout = module.triple, module.data_layout
        module.link_in(routines)
    declared = [f for f in module.functions if f.name in _SIZED and f.is_declaration]
    if not declared:
        return
    names = [f.name for f in declared]
    for function in declared:
        function.name = _PREFIX + function.name
    shims = llvm.parse_assembly("\n".join(map(_shim, names)))
    shims.triple, shims.data_layout = module.triple, module.data_layout
    module.link_in(shims)
    # Defined with external linkage so that linking resolves the renamed declarations
    # (an internal definition would be renamed apart from them), then made internal.
    for name in names:
        module.get_function(_PREFIX + name).linkage = llvm.Linkage.internal


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
            f"define {result} @\"{_PREFIX}{name}\"({arguments}) {{\n"
            + "\n".join(checks) +
            f"\n  br i1 {fits}, label %call, label %refuse\n"
            f"call:\n  %r = call {result} @{name}({', '.join(narrowed)})\n  ret {result} %r\n"
            f"refuse:\n  ret {result} null\n}}\n")


def save(artefact: Any, path: str) -> str:
    """Link `artefact` (a ``wasm32`` `CPUArtefact`) against the WASI C library into a
    self-contained module at `path`, and write its ES module ``NAME.mjs`` beside it; the
    module's path.

    The module imports nothing: it exports its C entry points, ``malloc`` and ``free`` (for
    the caller's buffers), its memory (growable to wasm32's 4 GiB) and ``_initialize``
    (the C constructors that fill the splat constants: ``Model.load`` calls it once).

    >>> import os, shutil, tempfile
    >>> import stageflow as sf
    >>> library = sf.aot.compile(lambda x: x + 1.0, sf.TensorSpec([None], sf.float32),
    ...                          target="wasm32", name="increment")
    >>> directory = tempfile.mkdtemp()
    >>> path = save(library, os.path.join(directory, "increment.wasm"))
    >>> sorted(os.listdir(directory)), imports(open(path, "rb").read())
    (['increment.mjs', 'increment.wasm'], [])
    >>> shutil.rmtree(directory)
    """
    linker = shutil.which("wasm-ld")
    if linker is None:
        raise RuntimeError("sf.aot: linking a .wasm needs LLVM's WebAssembly linker wasm-ld "
                           "on PATH (Debian's lld package: apt-get install lld); or save a "
                           ".o and link it yourself")
    libc = next((d for d in LIBC_DIRS if all(os.path.exists(os.path.join(d, f))
                                             for f in ("libc.a", "libm.a", "crt1-reactor.o"))),
                None)
    if libc is None:
        raise RuntimeError("sf.aot: linking a .wasm needs the WASI C library (libc.a, libm.a "
                           f"and crt1-reactor.o in one of {', '.join(LIBC_DIRS)}: Debian's "
                           "wasi-libc package, apt-get install wasi-libc); or save a .o and "
                           "link it yourself")
    name = artefact.name
    stateful = f"{name}_state_new(" in artefact.header
    script = javascript.module_text(name, artefact.signature, stateful)  # refuses first
    entries = [name, f"{name}_output_dims", f"{name}_release",
               *([f"{name}_state_new", f"{name}_state_free", f"{name}_state_variable"]
                 if stateful else []),
               "malloc", "free", "_initialize"]
    with tempfile.TemporaryDirectory() as scratch:
        obj = os.path.join(scratch, f"{name}.o")
        with open(obj, "wb") as file:
            file.write(artefact.object_code)
        command = [linker, "--no-entry", "--fatal-warnings", "-z",
                   f"stack-size={STACK_BYTES}", "--stack-first", f"--max-memory={MAX_MEMORY}",
                   *(f"--export={e}" for e in entries),
                   os.path.join(libc, "crt1-reactor.o"), obj, f"-L{libc}", "-lc", "-lm",
                   "-o", path]
        result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        undefined = sorted(set(re.findall(r"undefined symbol: (\S+)", result.stderr)))
        advice = (f"; the undefined symbols {', '.join(undefined)} are in neither the "
                  f"library nor the WASI C library: compile the function without the ops "
                  f"that call them, or save a .o and link it with a library that defines "
                  f"them" if undefined else "")
        said = "\n".join(dict.fromkeys(result.stderr.strip().splitlines()))  # once each
        raise RuntimeError(f"sf.aot: linking {path} with wasm-ld failed{advice}:\n{said}")
    with open(path, "rb") as file:
        needed = imports(file.read())
    if needed:
        os.remove(path)
        raise RuntimeError(f"sf.aot: the linked {path} imports "
                           f"{', '.join(f'{m}.{n}' for m, n in needed)} from its host, which "
                           "its JavaScript module does not provide; save a .o and link it "
                           "for a host that does")
    with open(os.path.join(os.path.dirname(os.path.abspath(path)), f"{name}.mjs"), "w",
              encoding="utf-8") as file:
        file.write(script)
    return path


def imports(module: bytes) -> list[tuple[str, str]]:
    """The (module, name) pairs a WebAssembly binary imports (its import section's).

    >>> header = b"\\0asm" + bytes([1, 0, 0, 0])
    >>> section = bytes([3]) + b"env" + bytes([1]) + b"f" + bytes([0, 0])
    >>> imports(header + bytes([2, len(section) + 1, 1]) + section)
    [('env', 'f')]
    """
    if module[:4] != b"\0asm":
        raise ValueError("not a WebAssembly module")
    at = 8
    while at < len(module):
        kind = module[at]
        size, at = _leb128(module, at + 1)
        if kind == 2:
            count, position = _leb128(module, at)
            found = []
            for _ in range(count):
                names = []
                for _ in range(2):
                    length, position = _leb128(module, position)
                    names.append(module[position:position + length].decode())
                    position += length
                found.append((names[0], names[1]))
                position = _skip_import(module, position)
            return found
        at += size
    return []


def _skip_import(module: bytes, at: int) -> int:
    """The position after an import's description (a function's type index, a table's,
    memory's, global's or tag's type) that starts at `at`."""
    kind = module[at]
    at += 1
    if kind in (0, 4):  # a function: its type index; a tag: attribute and type index
        at = at + 1 if kind == 4 else at
        return _leb128(module, at)[1]
    if kind == 1:  # a table: element type, then limits
        at += 1
    if kind in (1, 2):  # limits: flags, minimum, and a maximum where flagged
        flags = module[at]
        at = _leb128(module, at + 1)[1]
        return _leb128(module, at)[1] if flags & 1 else at
    return at + 2  # a global: value type and mutability


def _leb128(data: bytes, at: int) -> tuple[int, int]:
    """The unsigned LEB128 number at `at`, and the position after it."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at
