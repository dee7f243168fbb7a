"""The on-disk compilation cache: a second process loads the object code of kernels a first
one compiled, different IR misses, corrupt entries are ignored and rewritten, a read-only
cache hits and is left as it was, and the cache can be turned off."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stageflow as sf
from stageflow.codegen import CPUTarget
from stageflow.codegen.targets import cache
from stageflow.codegen.targets.cpu import JIT
from stageflow.core import config
from stageflow.ir import parse_module
from stageflow.testing.cache_faults import Cache, make_read_only, read_only_site

CHILD = """
import json, sys, numpy as np, stageflow as sf
from stageflow.codegen.targets import cache

@sf.function
def f(x):
    return sf.tanh(x * float(sys.argv[1])) + sf.exp(-x)

cf = f.get_concrete_function(sf.TensorSpec((None, 8), sf.float32))
y = cf(np.linspace(0, 1, 32, dtype=np.float32).reshape(4, 8))
print(json.dumps({"hits": cache.stats.hits, "misses": cache.stats.misses,
                  "corrupt": cache.stats.corrupt, "sum": float(sf.reduce_sum(y)),
                  "llvm": cf.stats()["compile_seconds"]["llvm"]}))
"""


def _child(directory, scale: float, **env: str) -> dict:
    """What a fresh process computing `f` at `scale` with the cache in `directory` printed,
    and what it wrote on stderr (``"stderr"``)."""
    environment = {**os.environ, "STAGEFLOW_CACHE_DIR": str(directory), **env}
    result = subprocess.run([sys.executable, "-c", CHILD, str(scale)], env=environment,
                            check=True, capture_output=True, text=True)
    return {**json.loads(result.stdout.strip().splitlines()[-1]), "stderr": result.stderr}


def _entries(directory) -> list:
    return sorted(directory.glob("objects/*/*.o"))


# The tests share one first process's cache (each gets a copy to damage), so the process that
# fills it runs once, in one of the suite's processes.
pytestmark = pytest.mark.xdist_group("compile-cache")


@pytest.fixture(scope="module")
def first_process(tmp_path_factory) -> tuple[Path, dict]:
    """A cache a first process filled (scale 2.0), and that process's stats."""
    folder = tmp_path_factory.mktemp("first-process-cache")
    return folder, _child(folder, 2.0)


@pytest.fixture
def cold(first_process, tmp_path) -> dict:
    """`tmp_path` holds a copy of `first_process`'s cache; its stats (a cold start)."""
    folder, stats = first_process
    shutil.copytree(folder, tmp_path, dirs_exist_ok=True)
    return stats


def test_a_second_process_hits_and_different_ir_misses(tmp_path, cold):
    assert cold["hits"] == 0 and cold["misses"] > 0
    stored = _entries(tmp_path)
    assert len(stored) == cold["misses"]
    warm = _child(tmp_path, 2.0)
    assert warm["hits"] == cold["misses"] and warm["misses"] == 0
    assert warm["sum"] == cold["sum"]
    other = _child(tmp_path, 3.0)
    assert other["misses"] > 0 and other["sum"] != cold["sum"]
    assert len(_entries(tmp_path)) == len(stored) + other["misses"]


def test_corrupt_entries_are_ignored_and_rewritten(tmp_path, cold):
    for entry in _entries(tmp_path):
        data = entry.read_bytes()
        entry.write_bytes(data[: len(data) // 2] + b"\xff" * 64)
    damaged = _child(tmp_path, 2.0)
    assert damaged["corrupt"] == cold["misses"] and damaged["hits"] == 0
    assert damaged["sum"] == cold["sum"]
    assert _child(tmp_path, 2.0)["hits"] == cold["misses"]


def _expected_sum(scale: float) -> float:
    x = np.linspace(0, 1, 32, dtype=np.float32).reshape(4, 8)
    return float(np.sum(np.tanh(x * np.float32(scale)) + np.exp(-x)))


def _snapshot(folder) -> dict:
    """Every path under `folder` with its bytes (None for a folder); not the times (the
    owner of a file may set its time of use however it is protected, as a hit does)."""
    return {path: None if path.is_dir() else path.read_bytes()
            for path in sorted(folder.rglob("*"))}


def _read_only_hits(folder, cold: dict, **env: str) -> None:
    """`folder`, a copy of `cold`'s cache, made read-only: a fresh process finds every
    entry (none corrupt) and computes as the first one did, one with other IR misses and
    still computes right, neither says a word about the cache on stderr, and the cache is
    left as it was."""
    before = _snapshot(folder)
    make_read_only(folder)
    try:
        warm = _child(folder, 2.0, **env)
        other = _child(folder, 3.0, **env)
    finally:
        Cache(str(folder), 0.0).repair()
    assert (warm["hits"], warm["misses"], warm["corrupt"]) == (cold["misses"], 0, 0), warm
    assert warm["sum"] == cold["sum"] and "cache" not in warm["stderr"]
    assert other["misses"] > 0 and other["corrupt"] == 0 and "cache" not in other["stderr"]
    np.testing.assert_allclose(other["sum"], _expected_sum(3.0), rtol=1e-5)
    assert _snapshot(folder) == before


def test_a_read_only_cache_hits_and_is_left_as_it_was(tmp_path, tmp_path_factory, cold):
    """A shared cache warmed once and mounted read-only: every entry was marked corrupt
    (the process could not make the temporary file of a new key, and fell back to a key
    of its own) and none ever hit. The mount is played by refusing every write under the
    cache with EROFS in the child (`READ_ONLY`), which stops root too, where file modes do
    not."""
    site = read_only_site(str(tmp_path_factory.mktemp("read-only-site")))
    path = os.pathsep.join(filter(None, [site, os.environ.get("PYTHONPATH")]))
    _read_only_hits(tmp_path, cold, PYTHONPATH=path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes past file modes; the EROFS "
                                              "test above makes the same cache read-only")
def test_a_cache_read_only_by_its_modes_hits_and_is_left_as_it_was(tmp_path, cold):
    _read_only_hits(tmp_path, cold)


def test_a_damaged_key_leaves_the_cache_unused_and_its_entries_alone(tmp_path, cold):
    """A key that cannot be read (here: not 32 bytes) once left a key of the process's own,
    under which every entry was corrupt, moved aside and rewritten for no other process to
    read; now the process compiles without the cache and leaves it as it was."""
    (tmp_path / "key").write_bytes(b"short")
    before = _snapshot(tmp_path)
    keyless = _child(tmp_path, 2.0)
    assert keyless["hits"] == keyless["corrupt"] == 0 and keyless["misses"] == cold["misses"]
    assert keyless["sum"] == cold["sum"]
    assert _snapshot(tmp_path) == before


def test_opting_out_writes_nothing(tmp_path):
    off = _child(tmp_path, 2.0, STAGEFLOW_CACHE="0")
    assert off["hits"] == off["misses"] == 0
    assert not tmp_path.exists() or not _entries(tmp_path)


def test_opting_out_from_python(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(config, "cache", False)

    @sf.function
    def g(x):
        return sf.sqrt(x * 1.25 + 7.5)

    np.testing.assert_allclose(g(np.full(5, 2.0, np.float32)).numpy(), np.full(5, 10 ** 0.5),
                               rtol=1e-6)
    assert not _entries(tmp_path)


def test_key_covers_level_and_target():
    assert cache.key("ir", 3, "cpu a") != cache.key("ir", 1, "cpu a")
    assert cache.key("ir", 3, "cpu a") != cache.key("ir", 3, "cpu b")
    assert cache.key("ir", 3, "cpu a") == cache.key("ir", 3, "cpu a")


def _sealed(folder, payload: bytes) -> bytes:
    """An entry of the cache in `folder` holding `payload` under a valid MAC: what its own
    writer would write (the linker's checks are all that stand between it and the JIT)."""
    return cache.MAGIC + hmac.digest((folder / "key").read_bytes(), payload, "sha256") + payload


def test_entries_under_a_plain_checksum_are_refused(tmp_path, cold):
    """An entry whose plain SHA-256 is right but whose MAC is not (written by anything but
    this cache's writer) never reaches the linker, whatever it holds."""
    entries = _entries(tmp_path)
    header = len(cache.MAGIC) + cache.DIGEST_BYTES
    for entry in entries:
        payload = entry.read_bytes()[header:]
        entry.write_bytes(cache.MAGIC + hashlib.sha256(payload).digest() + payload)
    again = _child(tmp_path, 2.0)
    assert again["sum"] == cold["sum"] and again["corrupt"] == len(entries)


def test_entries_with_a_valid_checksum_but_bad_code_are_moved_aside(tmp_path, cold):
    """Once: every later process crashed (garbage) or aborted ('Symbol not found')."""
    entries = _entries(tmp_path)
    garbage, foreign = entries[0], entries[1:]
    garbage.write_bytes(_sealed(tmp_path, b"\x7fELF" + b"\0" * 60))
    for entry in foreign:  # well-formed objects defining other symbols than their module's
        data = entry.read_bytes()
        header = len(cache.MAGIC) + cache.DIGEST_BYTES
        renamed = data[header:].replace(entry.stem[:16].encode(), b"0" * 16)
        entry.write_bytes(_sealed(tmp_path, renamed))
    again = _child(tmp_path, 2.0)
    assert again["sum"] == cold["sum"] and again["corrupt"] == len(entries)
    assert len(list(tmp_path.glob("objects/*/*.bad"))) == len(entries)
    assert _child(tmp_path, 2.0)["hits"] == len(entries)  # recompiled and stored again


def test_a_fifo_in_place_of_an_entry_is_skipped(tmp_path, cold):
    """Once: the read blocked forever."""
    entry = _entries(tmp_path)[0]
    entry.unlink()
    os.mkfifo(entry)
    environment = {**os.environ, "STAGEFLOW_CACHE_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", CHILD, "2.0"], env=environment,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["sum"] == cold["sum"]


def test_a_directory_in_an_entrys_place_is_moved_aside_every_time(tmp_path, cold):
    """Found by the cache-faults campaign once it asked a read-only cache to hit: the
    second directory in an entry's place could not replace the first one moved aside, so
    it stayed, and every later process missed that entry and called it corrupt."""
    entry = _entries(tmp_path)[0]
    for _ in range(2):
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()
        (entry / "inside").mkdir(parents=True)
        damaged = _child(tmp_path, 2.0)
        assert damaged["corrupt"] == 1 and damaged["sum"] == cold["sum"]
        again = _child(tmp_path, 2.0)
        assert (again["hits"], again["corrupt"]) == (cold["misses"], 0), again


@pytest.mark.usefixtures("cold")
def test_the_cache_is_bounded_least_recently_used_first(tmp_path):
    first = _entries(tmp_path)
    os.utime(first[0], (1, 1))  # the oldest use
    size = sum(p.stat().st_size for p in first)
    _child(tmp_path, 3.0, STAGEFLOW_CACHE_MAX_BYTES=str(size + 1))
    remaining = _entries(tmp_path)
    assert first[0] not in remaining
    assert sum(p.stat().st_size for p in remaining) <= size + 1


def test_an_entry_with_a_bad_section_alignment_is_moved_aside(tmp_path, cold):
    """Found by the cache-faults campaign: an object whose section headers were damaged
    (under a valid checksum) still defined its symbols, and LLVM's linker aborted the
    process on an alignment that is not a power of two."""
    entries = _entries(tmp_path)
    header = len(cache.MAGIC) + cache.DIGEST_BYTES
    for entry in entries:
        payload = bytearray(entry.read_bytes()[header:])
        sections = struct.unpack_from("<Q", payload, 0x28)[0]
        size, count = struct.unpack_from("<HH", payload, 0x3A)
        for index in range(count):  # every section aligned to 3 bytes
            struct.pack_into("<Q", payload, sections + index * size + 0x30, 3)
        entry.write_bytes(_sealed(tmp_path, bytes(payload)))
    again = _child(tmp_path, 2.0)
    assert again["sum"] == cold["sum"] and again["corrupt"] == len(entries)


def test_an_elf_header_pointing_past_any_int_is_not_an_object():
    """Found by the cache-faults campaign: an entry whose (damaged) header put the section
    table at an offset past what an index holds raised OverflowError into the compile
    instead of being moved aside."""
    data = bytearray(b"\x7fELF\x02\x01" + b"\0" * 58)
    struct.pack_into("<Q", data, 0x28, 2**63 + 5)
    struct.pack_into("<HH", data, 0x3A, 64, 1)
    assert cache.elf_symbols(bytes(data)) is None


def test_a_fresh_jit_links_the_stored_object_code(tmp_path, monkeypatch):
    """What a later process does, in this one: a JIT with no engines of its own loads a
    module's object code from the cache, checks it (its symbols and what they need) and
    links it (sin is libm's: a symbol the object code leaves to the process), and it
    computes what the code compiled here does."""
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(config, "parallel_compile", False)  # no compile server to start
    text = """func.func @stored_kernel(%x: tensor<?xf32>) -> tensor<?xf32> {
      %c = sf.constant dense<1.5> : tensor<f32>
      %0 = sf.multiply %x, %c : (tensor<?xf32>, tensor<f32>) -> tensor<?xf32>
      %1 = sf.sin %0 : (tensor<?xf32>) -> tensor<?xf32>
      func.return %1 : tensor<?xf32>
    }"""
    prepared = CPUTarget().prepare_many([parse_module(text).ops.first])
    compiled_here = prepared.finish()[0]
    assert len(_entries(tmp_path)) == len(prepared.jobs)
    hits = cache.stats.hits
    loaded = prepared.make(JIT().link(prepared.jobs, prepared.symbols))[0]
    assert cache.stats.hits == hits + len(prepared.jobs)
    x = np.linspace(-3, 3, 37, dtype=np.float32)
    np.testing.assert_array_equal(loaded(x)[0], compiled_here(x)[0])


@pytest.mark.parametrize("text, size", [("4096", 4096), ("2G", 2 << 30), ("512MiB", 512 << 20),
                                        ("1.5g", 3 << 29), ("10 KB", 10240)])
def test_the_size_bound_takes_bytes_or_binary_units(monkeypatch, text, size):
    monkeypatch.setenv("STAGEFLOW_CACHE_MAX_BYTES", text)
    assert cache.max_bytes() == size


def test_a_size_bound_of_another_form_is_an_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv("STAGEFLOW_CACHE_MAX_BYTES", "two gigs")
    with pytest.raises(ValueError, match=r"STAGEFLOW_CACHE_MAX_BYTES='two gigs' is not a "
                                         r"size.*\(2G, 512MiB\)"):
        cache.max_bytes()
