"""The on-disk compilation cache: object code of JIT-compiled kernel modules, kept between
processes so that a second process compiling the same function pays no LLVM time.

As JAX's persistent compilation cache and Inductor's FX graph cache do, an entry is keyed by
everything that decides the machine code: the LLVM IR text of the kernel module (generated
from the optimised `sf` IR), the optimisation level, the target (triple, CPU name and
features), the LLVM, llvmlite and stageflow versions. A hit loads the object file into the
process's engine in well under a millisecond; a miss optimises and emits it, then stores it.

Where: ``STAGEFLOW_CACHE_DIR`` (or ``sf.config.cache_dir``), by default
``$XDG_CACHE_HOME/stageflow`` or ``~/.cache/stageflow``; ``STAGEFLOW_CACHE=0`` (or
``sf.config.cache = False``) turns it off. Entries are written to a temporary file and
renamed into place, so concurrent processes never read half an entry; each carries a
checksum, and an entry that does not match it (truncated, overwritten) is ignored and
rewritten, never handed to the linker.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass

import llvmlite
import llvmlite.binding as llvm

from stageflow.core import config

FORMAT = "stageflow-object-1"
MAGIC = b"SFOBJ1\n"
DIGEST_BYTES = 32
# Stands for the cache key in symbol names while the key is computed over the text; the
# same kernels then get the same symbols in every process, so cached object code links.
PLACEHOLDER = "z" * 16


@dataclass
class CacheStats:
    """What this process's lookups found (tests and benchmarks read it)."""

    hits: int = 0
    misses: int = 0
    corrupt: int = 0


stats = CacheStats()


def key(text: str, level: int, target: str, codegen: int = 3) -> str:
    """The entry's name: a SHA-256 over the IR text and everything else the code depends on
    (`level` of LLVM's optimisation, `codegen` of its machine-code generation)."""

    digest = hashlib.sha256()
    versions = (FORMAT, config.VERSION, llvmlite.__version__,
                ".".join(map(str, llvm.llvm_version_info)))
    for part in (*versions, target, str(level), str(codegen), text):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def enabled() -> bool:
    return bool(config.cache and config.cache_dir)


def _path(entry: str) -> str:
    return os.path.join(str(config.cache_dir), "objects", entry[:2], f"{entry}.o")


def load(entry: str) -> bytes | None:
    """The object code stored under `entry`, or None (absent, unreadable or corrupt)."""
    try:
        with open(_path(entry), "rb") as file:
            data = file.read()
    except OSError:
        stats.misses += 1
        return None
    header = len(MAGIC) + DIGEST_BYTES
    payload = data[header:]
    if (not data.startswith(MAGIC) or len(data) <= header
            or hashlib.sha256(payload).digest() != data[len(MAGIC):header]):
        stats.corrupt += 1
        stats.misses += 1
        return None
    stats.hits += 1
    return payload


def store(entry: str, payload: bytes) -> None:
    """Write the entry atomically; a cache that cannot be written is skipped silently,
    as compiling still succeeded."""
    path = _path(entry)
    temporary = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(handle, "wb") as file:
            file.write(MAGIC + hashlib.sha256(payload).digest() + payload)
        os.replace(temporary, path)
    except OSError:
        config.emit("compiles", f"compilation cache: cannot write {path}")
        if temporary is not None and os.path.exists(temporary):
            os.unlink(temporary)
