"""The machine generated code will run on, as the code generators need to know it.

The JIT compiles for this process, so its code may use the host CPU's every feature, call
NumPy's OpenBLAS and LAPACK (loaded into the process) and start POSIX threads. An
ahead-of-time library may be built for another machine (`sf.aot.compile(target=...)`): an
aarch64 board, a WebAssembly runtime, or this machine without OpenBLAS beside it. The code
generators that would emit something only the host has (an x86 intrinsic, a BLAS call, a
worker thread) ask `current()` instead of the JIT; `building_for` sets it for the module
being built, on this thread only, so the JIT's compiles on other threads keep the host's.

Named targets (`TARGETS`): the LLVM triple and the CPU and features LLVM optimises for. The
host's is `host()`: the JIT's CPU and features, with OpenBLAS and threads.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import platform as _python_platform
from collections.abc import Iterator
from dataclasses import dataclass, replace

from stageflow.codegen.targets.cpu import process_jit


@dataclass(frozen=True)
class Platform:
    """What the code being generated may assume about the machine that runs it.

    `blas`: NumPy's OpenBLAS (its CBLAS gemm and gemv, and LAPACK) is linked in; without
    it, matmuls and convolutions call stageflow's own gemm and LAPACK-backed ops have no
    lowering. `threads`: POSIX threads and glibc are there (the worker pool, ops split
    over the cores); without them, an op's tasks run one after another on the caller's
    thread. `name` is what `sf.aot.compile(target=...)` was given.

    >>> from stageflow.codegen.targets import platform
    >>> board = platform.for_target("aarch64-linux-gnu")
    >>> board.triple, board.blas, board.threads, board.has("neon")
    ('aarch64-unknown-linux-gnu', False, True, True)
    """

    name: str
    triple: str
    cpu: str
    features: str
    blas: bool
    threads: bool

    def has(self, feature: str) -> bool:
        """Whether LLVM's feature list enables `feature` (``"avx512f"``, ``"neon"``)."""
        return f"+{feature}" in self.features.split(",")

    @property
    def arch(self) -> str:
        """The triple's architecture: ``x86_64``, ``aarch64``, ``wasm32``."""
        return self.triple.split("-", 1)[0]

    @property
    def wasm(self) -> bool:
        """Whether the code runs as WebAssembly."""
        return self.arch.startswith("wasm")

    def fma(self, suffix: str) -> str:
        """The intrinsic for ``a * b + c`` of LLVM type `suffix` (``v8f32``): ``llvm.fma``
        (one rounding), or ``llvm.fmuladd`` on WebAssembly, whose SIMD has no fused
        multiply-add: there ``llvm.fma`` is a call of libm's emulation per element, and
        ``fmuladd`` a multiply and an add."""
        return f"llvm.{'fmuladd' if self.wasm else 'fma'}.{suffix}"


# The ahead-of-time targets: (triple, default CPU, features, threads). x86-64-v3 (AVX2 and
# FMA: every x86 server CPU since 2013) where the host is not x86-64; aarch64's NEON is
# part of its baseline (SVE is asked for with a CPU that has it: cpu="neoverse-v1");
# WebAssembly's SIMD128 and bulk memory (memcpy/memset as instructions) run in every
# current browser and Node.js, and threads there need shared memory that a plain module
# does not have.
TARGETS: dict[str, tuple[str, str, str, bool]] = {
    "x86_64-linux-gnu": ("x86_64-unknown-linux-gnu", "x86-64-v3", "+avx2,+fma", True),
    "aarch64-linux-gnu": ("aarch64-unknown-linux-gnu", "generic", "+neon,+fp-armv8", True),
    "wasm32": ("wasm32-unknown-wasi", "generic",
               "+simd128,+bulk-memory,+nontrapping-fptoint,+sign-ext,+mutable-globals", False),
}

_current: contextvars.ContextVar[Platform | None] = contextvars.ContextVar(
    "stageflow_platform", default=None)


@functools.cache
def host() -> Platform:
    """This process's machine, as the JIT compiles for it."""
    jit = process_jit()
    return Platform(host_target(), jit.triple, jit.cpu_name, jit.features, True, True)


def host_target() -> str:
    """The `TARGETS` name of this machine (``x86_64-linux-gnu`` here)."""
    machine = _python_platform.machine().lower()
    return {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}.get(
        machine, f"{machine}-linux-gnu")


def for_target(name: str, cpu: str | None = None, self_contained: bool = False) -> Platform:
    """The platform of target `name` (one of `TARGETS`) for CPU `cpu` (LLVM's name; default:
    this machine's for the host's target, else the target's baseline). The host's target
    links OpenBLAS unless `self_contained`; every other target is self-contained."""
    if name not in TARGETS:
        raise ValueError(f"sf.aot.compile: target must be one of {sorted(TARGETS)} (or 'cpu' "
                         f"for this machine, 'ptx' for NVIDIA GPUs), got {name!r}")
    if name == host_target():
        native = host()
        if cpu is None or cpu == native.cpu:
            return replace(native, blas=not self_contained)
    triple, default_cpu, features, threads = TARGETS[name]
    return Platform(name, triple, cpu or default_cpu, features, False, threads)


def current() -> Platform:
    """The platform the code being built is for: `building_for`'s, else the host's."""
    chosen = _current.get()
    return chosen if chosen is not None else host()


@contextlib.contextmanager
def building_for(chosen: Platform) -> Iterator[Platform]:
    """Generate code for `chosen` inside the block (this thread only)."""
    token = _current.set(chosen)
    try:
        yield chosen
    finally:
        _current.reset(token)
