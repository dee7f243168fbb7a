"""The compilation cache under damage: every later process must still compute right.

The cache (`stageflow.codegen.targets.cache`) keeps object code between processes; an entry
is linked into the next process that compiles the same kernels, so a damaged entry must be
noticed, never crash or hang that process, and never give a wrong result. A campaign warms
a fresh cache directory (``STAGEFLOW_CACHE_DIR``) by compiling a few functions in a child
process, then applies one fault of `FAULTS` at random per round (truncated entries, garbage
under a recomputed SHA-256, as a writer other than the cache's own would leave (the cache
authenticates entries with a key of its directory), swapped entries, a FIFO, a directory or
a symlink to /dev/zero in an entry's place, entries or folders without read or write
permission, a tiny ``STAGEFLOW_CACHE_MAX_BYTES``, several processes compiling at once, the
warm cache made read-only) and runs a fresh child that must compile and give NumPy's
results, within a timeout. Permission faults bite only where the children do not run as
root (as root they are applied and counted, but a root process reads and writes past
them), except the read-only cache: a read-only cache is a normal deployment (a shared cache
warmed once), so there the child must also find every entry it looks up (`MUST_HIT`; a
child that misses or finds an entry corrupt counts as "missed"), and as root its writes are
refused as a read-only mount refuses them (`READ_ONLY`).

    python -m stageflow.testing.cache_faults --count 60 [--seed N]

The test suite runs a slice (``tests/testing/test_cache_faults.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from stageflow.codegen.targets.cache import DIGEST_BYTES, MAGIC
from stageflow.testing.campaign import add_seed, seed_of
from stageflow.testing.campaign import progress as report_progress

OUTCOMES = ["recovered", "missed", "wrong result", "error", "crash", "hang"]
WRONG = 3  # the child's exit status when a result differs from NumPy's

# What a child runs: a few functions compiled (or loaded from the cache) and checked.
CHILD = f"""
import json
import sys
import numpy as np
import stageflow as sf
from stageflow.codegen.targets import cache

rng = np.random.default_rng(0)
x = rng.normal(size=(7, 5)).astype(np.float32)
w = rng.normal(size=(5, 3)).astype(np.float32)
cases = [
    (sf.function(lambda a: sf.tanh(a) * 2.0 + 1.0), (x,), lambda a: np.tanh(a) * 2 + 1),
    (sf.function(lambda a, b: sf.nn.relu(sf.matmul(a, b))), (x, w),
     lambda a, b: np.maximum(a @ b, 0)),
    (sf.function(lambda a: sf.reduce_sum(sf.exp(a), axis=1)), (x,),
     lambda a: np.exp(a).sum(axis=1)),
    (sf.function(lambda a: sf.reduce_max(a * a, axis=0) - 3.0), (x,),
     lambda a: (a * a).max(axis=0) - 3),
]
for function, args, reference in cases:
    got = function(*map(sf.constant, args)).numpy()
    if not np.allclose(got, reference(*args), rtol=1e-5, atol=1e-5):
        print("wrong:", got, file=sys.stderr)
        sys.exit({WRONG})
print(json.dumps({{"hits": cache.stats.hits, "misses": cache.stats.misses,
                  "corrupt": cache.stats.corrupt}}))
"""

# A `sitecustomize` for a child whose cache directory is read-only to it although it runs
# as root (which writes past file modes): every write under ``STAGEFLOW_CACHE_DIR`` through
# the calls the cache makes (by a positional path) fails with EROFS, as on a read-only mount.
READ_ONLY = """
import builtins
import errno
import os

_ROOT = os.path.realpath(os.environ["STAGEFLOW_CACHE_DIR"])
_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _inside(path):
    try:
        path = os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):
        return False
    return path == _ROOT or path.startswith(_ROOT + os.sep)


def _refusing(function, positions, writes=lambda *args, **kwargs: True):
    def refused(*args, **kwargs):
        for position in positions:
            if position < len(args) and _inside(args[position]) and writes(*args, **kwargs):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS),
                              os.fsdecode(args[position]))
        return function(*args, **kwargs)
    return refused


os.open = _refusing(os.open, (0,), lambda path, flags, *args, **kwargs: flags & _WRITES)
builtins.open = _refusing(builtins.open, (0,), lambda file, mode="r", *args, **kwargs:
                          bool(set(mode) & set("wax+")))
for _name, _positions in [("mkdir", (0,)), ("link", (1,)), ("symlink", (1,)),
                          ("replace", (0, 1)), ("rename", (0, 1)), ("unlink", (0,)),
                          ("remove", (0,)), ("rmdir", (0,)), ("utime", (0,)),
                          ("chmod", (0,)), ("truncate", (0,))]:
    setattr(os, _name, _refusing(getattr(os, _name), _positions))
"""


def read_only_site(folder: str) -> str:
    """`folder` (made) holding `READ_ONLY` as its `sitecustomize`: a child with it first on
    its ``PYTHONPATH`` cannot write its cache directory, even as root."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "sitecustomize.py"), "w", encoding="utf-8") as file:
        file.write(READ_ONLY)
    return folder


def make_read_only(root: str) -> None:
    """Every folder and file under `root`, and `root`, without write permission."""
    for folder, _, files in os.walk(root):
        os.chmod(folder, 0o555)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, 0o444)


@dataclass
class Cache:
    """A campaign's cache directory and how its children run."""

    root: str
    timeout: float

    @property
    def objects(self) -> str:
        return os.path.join(self.root, "objects")

    def entries(self) -> list[str]:
        """The stored entries' paths (sorted)."""
        found = []
        for folder, _, names in os.walk(self.objects):
            found += [os.path.join(folder, n) for n in names if n.endswith(".o")]
        return sorted(found)

    def child(self, extra: dict[str, str] | None = None) -> subprocess.Popen:
        env = {**os.environ, **(extra or {}), "STAGEFLOW_CACHE_DIR": self.root}
        env.pop("STAGEFLOW_CACHE", None)
        return subprocess.Popen([sys.executable, "-c", CHILD], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)

    def finish(self, process: subprocess.Popen, must_hit: bool = False) -> tuple[str, str]:
        """Wait for a child: its outcome and what it printed when it was not recovered.
        With `must_hit`, a child that computed right but missed an entry, or found one
        corrupt, has "missed" (its cache was warm, and unchanged since)."""
        try:
            out, err = process.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return "hang", f"no result after {self.timeout} s"
        code = process.returncode
        if code == 0 and must_hit:
            return _hits(out)
        if code == 0:
            return "recovered", ""
        if code == WRONG:
            return "wrong result", err[-400:]
        if code < 0:
            return "crash", f"signal {signal.Signals(-code).name}: {err[-400:]}"
        return "error", err.strip().splitlines()[-1] if err.strip() else f"status {code}"

    def run(self, extra: dict[str, str] | None = None, must_hit: bool = False
            ) -> tuple[str, str]:
        return self.finish(self.child(extra), must_hit)

    def repair(self) -> None:
        """Give every permission back (so the next round starts from a usable tree)."""
        os.chmod(self.root, 0o755)
        for folder, names, files in os.walk(self.root):
            for name in [folder, *(os.path.join(folder, n) for n in names + files)]:
                if os.path.islink(name):
                    continue
                mode = os.stat(name).st_mode
                if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
                    os.chmod(name, 0o755 if stat.S_ISDIR(mode) else 0o644)


def _hits(out: str) -> tuple[str, str]:
    """A recovered child's outcome from the cache statistics it printed last: "missed"
    unless it looked entries up and every one hit."""
    lines = out.strip().splitlines()
    try:
        found = json.loads(lines[-1])
        hits, misses, corrupt = found["hits"], found["misses"], found["corrupt"]
    except (IndexError, ValueError, TypeError, KeyError):
        return "error", f"no cache statistics printed: {out[-200:]!r}"
    if hits and not misses and not corrupt:
        return "recovered", ""
    return "missed", f"{hits} hits, {misses} misses, {corrupt} corrupt"


# -- the faults: each damages the cache and returns extra environment for the child -------


def _framed(payload: bytes) -> bytes:
    """An entry holding `payload` under a correct plain SHA-256 (not the cache's MAC)."""
    return MAGIC + hashlib.sha256(payload).digest() + payload


def _payload(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()[len(MAGIC) + DIGEST_BYTES:]


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as file:
        file.write(data)


def truncate(cache: Cache, rng: random.Random) -> dict[str, str]:
    path = rng.choice(cache.entries())
    size = os.path.getsize(path)
    os.truncate(path, rng.choice([0, 3, len(MAGIC) + 5, size // 2, size - 1]))
    return {}


def truncate_checksummed(cache: Cache, rng: random.Random) -> dict[str, str]:
    """The object code cut short, under a checksum of what is left."""
    path = rng.choice(cache.entries())
    payload = _payload(path)
    _write(path, _framed(payload[:rng.randrange(1, len(payload))]))
    return {}


def garbage(cache: Cache, rng: random.Random) -> dict[str, str]:
    """Random bytes (an ELF header first, or not) under a recomputed plain checksum."""
    path = rng.choice(cache.entries())
    noise = rng.randbytes(rng.choice([1, 64, 4096]))
    head = _payload(path)[:rng.choice([0, 16, 64])]
    _write(path, _framed(head + noise))
    return {}


def corrupt_symbols(cache: Cache, rng: random.Random) -> dict[str, str]:
    """Bytes of the object's tail (its symbol and string tables, section headers)
    overwritten at random, under a recomputed plain checksum."""
    path = rng.choice(cache.entries())
    payload = bytearray(_payload(path))
    for _ in range(rng.randint(1, 16)):
        payload[rng.randrange(len(payload) // 2, len(payload))] = rng.randrange(256)
    _write(path, _framed(bytes(payload)))
    return {}


def swap(cache: Cache, rng: random.Random) -> dict[str, str]:
    """Two entries' files exchanged (each keeps its valid MAC)."""
    first, second = rng.sample(cache.entries(), 2)
    scratch = first + ".swap"
    os.replace(first, scratch)
    os.replace(second, first)
    os.replace(scratch, second)
    return {}


def fifo(cache: Cache, rng: random.Random) -> dict[str, str]:
    path = rng.choice(cache.entries())
    os.unlink(path)
    os.mkfifo(path)
    return {}


def directory(cache: Cache, rng: random.Random) -> dict[str, str]:
    path = rng.choice(cache.entries())
    os.unlink(path)
    os.makedirs(os.path.join(path, "inside"))
    return {}


def dev_zero(cache: Cache, rng: random.Random) -> dict[str, str]:
    path = rng.choice(cache.entries())
    os.unlink(path)
    os.symlink("/dev/zero", path)
    return {}


def unreadable(cache: Cache, rng: random.Random) -> dict[str, str]:
    for path in rng.sample(cache.entries(), 2):
        os.chmod(path, 0)
    return {}


def read_only_folders(cache: Cache, rng: random.Random) -> dict[str, str]:
    for folder, _, _ in os.walk(cache.objects):
        os.chmod(folder, 0o555)
    return {}


def no_cache_folder(cache: Cache, rng: random.Random) -> dict[str, str]:
    """The cache directory itself unreadable and unwritable."""
    os.chmod(cache.root, 0)
    return {}


def read_only_cache(cache: Cache, rng: random.Random) -> dict[str, str]:
    """The warm cache (warmed again first: the round before may have left entries out)
    made read-only, as a shared, pre-warmed cache is deployed; as root, whom modes do not
    stop, the child's writes are refused by `READ_ONLY`."""
    cache.run()
    make_read_only(cache.root)
    if os.geteuid() != 0:
        return {}
    site = read_only_site(os.path.join(os.path.dirname(cache.root), "read-only-site"))
    return {"PYTHONPATH": os.pathsep.join(filter(None, [site, os.environ.get("PYTHONPATH")]))}


def tiny_bound(cache: Cache, rng: random.Random) -> dict[str, str]:
    return {"STAGEFLOW_CACHE_MAX_BYTES": str(rng.choice([0, 1, 4096]))}


def emptied(cache: Cache, rng: random.Random) -> dict[str, str]:
    shutil.rmtree(cache.objects, ignore_errors=True)
    return {}


FAULTS: dict[str, Callable[[Cache, random.Random], dict[str, str]]] = {
    "truncated": truncate,
    "truncated+checksum": truncate_checksummed,
    "garbage+checksum": garbage,
    "symbols corrupted": corrupt_symbols,
    "swap two entries": swap,
    "fifo": fifo,
    "directory": directory,
    "symlink to /dev/zero": dev_zero,
    "unreadable entries": unreadable,
    "read-only folders": read_only_folders,
    "no access to the cache": no_cache_folder,
    "read-only cache": read_only_cache,
    "tiny size bound": tiny_bound,
    "concurrent writers": emptied,  # then several children at once
}
CONCURRENT = 4
# The faults after which a child must find every entry it looks up: the cache is warm and
# nothing in it is damaged.
MUST_HIT = frozenset({"read-only cache"})


@dataclass
class Tally:
    """What the rounds of one fault kind did."""

    rounds: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    first: list[str] = field(default_factory=list)


def run_round(cache: Cache, fault: str, rng: random.Random,
              faults: dict[str, Callable] | None = None) -> list[tuple[str, str]]:
    """Damage the (warm) cache with `fault` and run fresh children: their outcomes."""
    extra = (faults or FAULTS)[fault](cache, rng)
    if fault == "concurrent writers":
        children = [cache.child(extra) for _ in range(CONCURRENT)]
        return [cache.finish(child) for child in children]
    return [cache.run(extra, must_hit=fault in MUST_HIT)]


def run_campaign(count: int, campaign_seed: int, kinds: list[str] | None = None,
                 timeout: float = 120.0, faults: dict[str, Callable] | None = None,
                 progress: Callable[[int], None] | None = None) -> dict[str, Tally]:
    """`count` rounds of faults over `kinds` (default all of `FAULTS`; `faults` adds or
    replaces kinds) on one fresh cache directory, warmed first and repaired (permissions
    given back, warmed again) after each round."""
    rng = random.Random(campaign_seed)
    kinds = kinds or list(FAULTS)
    tallies = {kind: Tally() for kind in kinds}
    with tempfile.TemporaryDirectory(prefix="stageflow-cache-faults-") as scratch:
        cache = Cache(os.path.join(scratch, "cache"), timeout)
        outcome, detail = cache.run()
        if outcome != "recovered":
            raise RuntimeError(f"compiling into a fresh cache failed: {outcome}: {detail}")
        for done in range(1, count + 1):
            kind = kinds[(done - 1) % len(kinds)]
            tally = tallies[kind]
            results = []
            if len(cache.entries()) < 2:  # warm it again (the last round emptied it)
                outcome, detail = cache.run()
                if len(cache.entries()) < 2:
                    results = [(outcome if outcome != "recovered" else "error",
                                f"compiling again stored no entries ({detail})")]
            for outcome, detail in results or run_round(cache, kind, rng, faults):
                tally.rounds += 1
                tally.outcomes[outcome] += 1
                if outcome != "recovered" and len(tally.first) < 3:
                    tally.first.append(f"{outcome}: {detail}")
            cache.repair()
            if progress is not None:
                progress(done)
    return tallies


def print_table(title: str, tallies: dict[str, Tally]) -> None:
    print(title)
    print(f"  {'fault':24} {'children':>8} " + " ".join(f"{o:>12}" for o in OUTCOMES))
    for kind, tally in tallies.items():
        print(f"  {kind:24} {tally.rounds:8d} "
              + " ".join(f"{tally.outcomes[o]:12d}" for o in OUTCOMES))
    for kind, tally in tallies.items():
        for text in tally.first:
            print(f"\n{kind}: {text}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stageflow.testing.cache_faults",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=len(FAULTS) * 3)
    add_seed(parser)
    parser.add_argument("--faults", default=",".join(FAULTS),
                        help=f"comma-separated, of: {', '.join(FAULTS)}")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds a child may take before it counts as a hang")
    args = parser.parse_args(argv)
    campaign_seed = seed_of(args)
    kinds = [k.strip() for k in args.faults.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in FAULTS]
    if unknown:
        parser.error(f"unknown faults {unknown} (have: {', '.join(FAULTS)})")
    start = time.perf_counter()

    progress = report_progress("rounds", 10)

    tallies = run_campaign(args.count, campaign_seed, kinds, args.timeout, progress=progress)
    print_table(f"compilation cache faults, seed {campaign_seed}, "
                f"{time.perf_counter() - start:.0f} s", tallies)
    return 0 if all(t.outcomes["recovered"] == t.rounds for t in tallies.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
