"""The on-disk compilation cache: object code of JIT-compiled kernel modules, kept between
processes so that a second process compiling the same function pays no LLVM time.

As JAX's persistent compilation cache and Inductor's FX graph cache do, an entry is keyed by
everything that decides the machine code: the LLVM IR text of the kernel module (generated
from the optimised `sf` IR), the optimisation level, the target (triple, CPU name and
features), the LLVM, llvmlite and stageflow versions. A hit loads the object file into the
process's engine in well under a millisecond; a miss optimises and emits it, then stores it.
A function that modules share (`cpu.shared_function`, our own gemm) is keyed instead by
the digest of stageflow's sources (`sources_digest`), so that a hit needs no IR built.

Where: ``STAGEFLOW_CACHE_DIR`` (or ``sf.config.cache_dir``), by default
``$XDG_CACHE_HOME/stageflow`` or ``~/.cache/stageflow``; ``STAGEFLOW_CACHE=0`` (or
``sf.config.cache = False``) turns it off. Entries are written to a temporary file and
renamed into place, so concurrent processes never read half an entry. Each carries an
HMAC-SHA-256 of its object code under a key kept in the cache directory (``key``, made at
first use): an entry that does not match it (truncated, overwritten, or written by anything
but this cache's writer, even with a correct plain checksum) is ignored and rewritten, never
handed to the linker. A process that can neither read the key nor make one uses no cache
at all (every lookup misses, nothing is written): it could not tell its directory's entries
from forgeries, and entries under a key of its own would be refused by every other process.
Object code LLVM's linker is given runs unchecked, so a damaged entry under a recomputed
checksum once crashed every later process; what passes the MAC is still checked before it
is linked (`usable`): a regular file (a FIFO in its place would block the read forever), a
well-formed ELF object (`elf_symbols`) defining the module's functions, every symbol it
needs resolvable here (a missing one aborts the process inside LLVM). An entry failing that
is moved aside (``.bad``) and compiled again.

A read-only cache directory (a shared cache warmed once, then mounted or made read-only)
is a normal deployment: its entries hit, a miss is compiled and not stored, and the writes
that fail (storing, moving a bad entry aside, refreshing a time of use) are skipped, as
compiling still succeeded. Readers that are not the directory's owner need the key
readable by them (it is made readable by its owner only).

The cache is bounded: past ``STAGEFLOW_CACHE_MAX_BYTES`` (default 2 GiB; units as
`max_bytes` reads them) the entries used longest ago are deleted (a hit refreshes an entry's
time) down to three quarters of it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import re
import shutil
import stat
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from stageflow.core import config

FORMAT = "stageflow-object-2"
MAGIC = b"SFOBJ2\n"
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


@functools.cache
def sources_digest() -> str:
    """A SHA-256 over stageflow's Python sources (their paths and bytes): whatever code
    they generate is the same while it is (read once a process)."""
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(f"{path.relative_to(root)}\0".encode())
        digest.update(path.read_bytes())
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
    key = _key()
    if key is None:  # no cache for this process: nothing here can be told from a forgery
        stats.misses += 1
        return None
    if (not data.startswith(MAGIC) or len(data) <= header
            or not hmac.compare_digest(_sealed(key, payload)[:header], data[:header])):
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


# ELF64 section types and special section indices read below.
_SYMTAB, _RELA, _NOBITS = 2, 4, 8
_ALLOC = 2  # SHF_ALLOC: the section is loaded
_SPECIAL_INDICES = (0xFFF1, 0xFFF2)  # SHN_ABS, SHN_COMMON
_X86_64, _X86_64_RELOCATIONS = 62, range(1, 43)  # R_X86_64_64 .. R_X86_64_REX_GOTPCRELX


def elf_symbols(data: bytes) -> tuple[set[str], set[str]] | None:
    """The global symbols a little-endian ELF64 object defines and those it leaves
    undefined; None where it is not one, or not well formed.

    Well formed means what LLVM's linker trusts without checking, which a damaged object
    under a valid checksum turned into crashes: section alignments that are powers of two
    and contents inside the file; symbols inside the loaded sections they name; relocations
    (of a known type, on x86-64) against an existing symbol, inside the loaded section they
    patch (a
    relocation section's size bytes flipped once patched code past its end, and the first
    call crashed)."""
    try:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            return None
        machine = struct.unpack_from("<H", data, 0x12)[0]
        section_offset = struct.unpack_from("<Q", data, 0x28)[0]
        entry_size, count = struct.unpack_from("<HH", data, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, section_offset + i * entry_size)
                    for i in range(count)]
        for section in sections:  # LLVM's linker aborts the process on either
            if section[8] & (section[8] - 1) or (
                    section[1] != _NOBITS and section[4] + section[5] > len(data)):
                return None
        defined: set[str] = set()
        undefined: set[str] = set()
        symbol_counts: dict[int, int] = {}
        for number, section in enumerate(sections):
            if section[1] != _SYMTAB:
                continue
            strings = sections[section[6]]
            offset, size, symbol_size = section[4], section[5], section[9]
            if symbol_size != 24 or size % 24:
                return None
            symbol_counts[number] = size // 24
            for at in range(offset, offset + size, symbol_size):
                name_at, info, _, index, value, extent = struct.unpack_from("<IBBHQQ", data, at)
                if 0 < index < 0xFF00 and (index >= count or not sections[index][2] & _ALLOC
                                           or value + extent > sections[index][5]):
                    return None
                if index >= 0xFF00 and index not in _SPECIAL_INDICES:
                    return None
                end = data.index(b"\0", strings[4] + name_at)
                name = data[strings[4] + name_at:end].decode()
                if not name or info >> 4 not in (1, 2):  # global or weak only
                    continue
                (undefined if index == 0 else defined).add(name)
        for section in sections:
            if section[1] != _RELA:
                continue
            offset, size, entry, symbols, target = (section[4], section[5], section[9],
                                                    section[6], section[7])
            if (entry != 24 or size % 24 or symbols not in symbol_counts or target >= count
                    or not sections[target][2] & _ALLOC):
                return None
            for at in range(offset, offset + size, 24):
                where, info = struct.unpack_from("<QQ", data, at)
                if (machine == _X86_64 and info & 0xFFFFFFFF not in _X86_64_RELOCATIONS
                        or info >> 32 >= symbol_counts[symbols]
                        or where + 4 > sections[target][5]):
                    return None
        return defined, undefined
    except (struct.error, IndexError, ValueError, UnicodeDecodeError, OverflowError):
        return None


def seal(payload: bytes) -> bytes | None:
    """An entry's bytes: the format's magic, the payload's MAC under this cache's key, the
    payload; None where this process has no key (`_key`)."""
    key = _key()
    return None if key is None else _sealed(key, payload)


def _sealed(key: bytes, payload: bytes) -> bytes:
    """`seal` under `key`, which the caller has (a lookup checks an entry with it)."""
    return MAGIC + hmac.digest(key, payload, "sha256") + payload


KEY_BYTES = 32
_keys: dict[str, bytes | None] = {}  # per cache directory


def _key() -> bytes | None:
    """The cache directory's key: read, else made (`KEY_BYTES` random bytes, readable by the
    owner only) by the first process to need it and read back; None where it can be neither
    read nor made (an unreadable or damaged key, a read-only directory without one), and
    then this process uses no cache. The existing key is read first: a read-only directory
    (a shared, pre-warmed cache) cannot take a new one, and its entries are under the old."""
    folder = str(config.cache_dir)
    if folder in _keys:
        return _keys[folder]
    path = os.path.join(folder, "key")
    key = _read_key(path)
    if key is None:
        _make_key(folder, path)
        key = _read_key(path)
        if key is None:
            config.emit("compiles", f"compilation cache: no usable key {path} (it cannot be "
                                    f"read or made), this process does not use {folder}")
    return _keys.setdefault(folder, key)


def _read_key(path: str) -> bytes | None:
    """The key at `path` if it is a regular file of `KEY_BYTES` bytes this process reads."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:  # a FIFO or a device in its place: never read from it
        key = (os.read(descriptor, KEY_BYTES + 1)
               if stat.S_ISREG(os.fstat(descriptor).st_mode) else b"")
    except OSError:
        key = b""
    finally:
        os.close(descriptor)
    return key if len(key) == KEY_BYTES else None


def _make_key(folder: str, path: str) -> None:
    """Write a new key whole, then link it into place: no process reads half a key, and of
    processes racing to make one, the first one's is everyone's. Fails quietly (a read-only
    directory, an existing key): the caller reads what is there."""
    temporary = None
    try:
        os.makedirs(folder, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, suffix=".key")
        with os.fdopen(handle, "wb") as file:
            file.write(os.urandom(KEY_BYTES))
        os.link(temporary, path)
    except OSError:
        pass
    finally:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def quarantine(entry: str) -> None:
    """Move a bad entry aside (``.bad``, in place of the one moved aside before), so that it
    is compiled and stored again. The one before is removed first: a directory in the
    entry's place could not replace an earlier one, stayed, and every later process missed
    the entry."""
    path = _path(entry)
    try:
        _remove(path + ".bad")
        os.replace(path, path + ".bad")
    except OSError:
        pass


def _remove(path: str) -> None:
    """Whatever is at `path` removed: a folder with what it holds, a symlink (not what it
    points to), a file; nothing there is no error."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def store(entry: str, payload: bytes) -> None:
    """Write the entry atomically; a cache that cannot be written is skipped silently,
    as compiling still succeeded."""
    path = _path(entry)
    sealed = seal(payload)
    if sealed is None:  # no key: this process uses no cache
        return
    temporary = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(handle, "wb") as file:
            file.write(sealed)
        os.replace(temporary, path)
    except OSError:
        config.emit("compiles", f"compilation cache: cannot write {path}")
        if temporary is not None and os.path.exists(temporary):
            os.unlink(temporary)
        return
    _bound(len(payload) + len(MAGIC) + DIGEST_BYTES)


_size: dict[str, int] = {}  # per cache directory: its bytes, as last counted plus stored


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)


def max_bytes() -> int:
    """``STAGEFLOW_CACHE_MAX_BYTES``: bytes, or a number with a binary unit (``2G``,
    ``512MiB``, ``1.5g``); a value of neither form is an error naming the variable."""
    text = os.environ.get("STAGEFLOW_CACHE_MAX_BYTES")
    if text is None:
        return 2 << 30
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError(f"STAGEFLOW_CACHE_MAX_BYTES={text!r} is not a size: give bytes "
                         f"(2147483648) or a number with K, M, G or T (2G, 512MiB)")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


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
