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
rewritten, never handed to the linker. What passes the checksum is still checked before it
is linked (`usable`): a regular file (a FIFO in its place would block the read forever), an
ELF object defining the module's functions, every symbol it needs resolvable here (a
missing one aborts the process inside LLVM). An entry failing that is moved aside
(``.bad``) and compiled again.

The cache is bounded: past ``STAGEFLOW_CACHE_MAX_BYTES`` (default 2 GiB) the entries used
longest ago are deleted (a hit refreshes an entry's time) down to three quarters of it.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import tempfile
from collections.abc import Callable
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
    path = _path(entry)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        stats.misses += 1
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            data = b""  # a FIFO or a device: never read from it
        else:
            with os.fdopen(descriptor, "rb", closefd=False) as file:
                data = file.read()
    except OSError:
        data = b""
    finally:
        os.close(descriptor)
    header = len(MAGIC) + DIGEST_BYTES
    payload = data[header:]
    if (not data.startswith(MAGIC) or len(data) <= header
            or hashlib.sha256(payload).digest() != data[len(MAGIC):header]):
        stats.corrupt += 1
        stats.misses += 1
        quarantine(entry)
        return None
    stats.hits += 1
    try:
        os.utime(path)  # last used now: the least recently used go first
    except OSError:
        pass
    return payload


def usable(payload: bytes, defines: set[str], resolve: Callable[[str], int]) -> bool:
    """Whether object code may be linked: an ELF object defining `defines` whose undefined
    symbols `resolve` finds (an address, 0 where missing)."""
    symbols = elf_symbols(payload)
    if symbols is None:
        return False
    defined, undefined = symbols
    return defines <= defined and all(resolve(name) for name in undefined)


def elf_symbols(data: bytes) -> tuple[set[str], set[str]] | None:
    """The global symbols a little-endian ELF64 object defines and those it leaves
    undefined; None where it is not one (or not well formed)."""
    try:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            return None
        section_offset = struct.unpack_from("<Q", data, 0x28)[0]
        entry_size, count = struct.unpack_from("<HH", data, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, section_offset + i * entry_size)
                    for i in range(count)]
        for section in sections:  # LLVM's linker aborts the process on either
            if section[8] & (section[8] - 1) or (
                    section[1] != 8 and section[4] + section[5] > len(data)):  # not NOBITS
                return None
        defined: set[str] = set()
        undefined: set[str] = set()
        for section in sections:
            if section[1] != 2:  # SHT_SYMTAB
                continue
            strings = sections[section[6]]
            offset, size, symbol_size = section[4], section[5], section[9] or 24
            for at in range(offset, offset + size, symbol_size):
                name_at, info, _, index = struct.unpack_from("<IBBH", data, at)
                end = data.index(b"\0", strings[4] + name_at)
                name = data[strings[4] + name_at:end].decode()
                if not name or info >> 4 not in (1, 2):  # global or weak only
                    continue
                (undefined if index == 0 else defined).add(name)
        return defined, undefined
    except (struct.error, IndexError, ValueError, UnicodeDecodeError, OverflowError):
        return None


def quarantine(entry: str) -> None:
    """Move a bad entry aside (``.bad``), so that it is compiled and stored again."""
    path = _path(entry)
    try:
        os.replace(path, path + ".bad")
    except OSError:
        pass


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
        return
    _bound(len(payload) + len(MAGIC) + DIGEST_BYTES)


_size: dict[str, int] = {}  # per cache directory: its bytes, as last counted plus stored


def max_bytes() -> int:
    return int(os.environ.get("STAGEFLOW_CACHE_MAX_BYTES", 2 << 30))


def _bound(added: int) -> None:
    """Keep the cache under `max_bytes`: counted once per process, then tracked; past the
    bound, the entries used longest ago are deleted down to three quarters of it."""
    root = os.path.join(str(config.cache_dir), "objects")
    limit = max_bytes()
    if root not in _size:
        _size[root] = sum(size for _, size, _ in _entries(root))
    else:
        _size[root] += added
    if _size[root] <= limit:
        return
    entries = sorted(_entries(root))
    total = sum(size for _, size, _ in entries)
    for _, size, path in entries:
        if total <= limit * 3 // 4:
            break
        try:
            os.unlink(path)
            total -= size
        except OSError:
            pass
    _size[root] = total


def _entries(root: str) -> list[tuple[float, int, str]]:
    """(last use, bytes, path) of every stored entry under `root`."""
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            try:
                info = os.stat(path)
            except OSError:
                continue
            found.append((info.st_mtime, info.st_size, path))
    return found
