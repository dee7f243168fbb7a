"""Checkpoints under damage, kills and races, and the campaign that restores them.

`sf.train` reads files a user may have edited or damaged, in directories other threads and
processes save into: every case must restore the state saved, or refuse a damaged file with
an error naming it and what is wrong; never crash, hang, restore wrong values or leave files
behind. Each case runs in a child process (`stageflow.testing.isolated`), in a directory of
its own, of one kind of `KINDS`, taken in turn from a random start so that each kind has its
share of a campaign:

- the latest checkpoint file, or the pointer file, replaced by a FIFO, a directory or a
  symlink to /dev/zero;
- one field of the metadata (the safetensors header, the object graph or the checksums in
  it) deleted, retyped, made a huge number or a deep nest; bits of the data or of the header
  flipped; the checksums removed (a file as written before them: it must restore);
- a saver killed (SIGKILL) in the middle of its saves, one to three times, then a fresh
  manager resuming from the latest checkpoint and saving: no temporary or unnamed file may
  remain, and what it keeps restores;
- managers in several threads (one shared manager, or one each) or processes saving into one
  directory: the pointer names the newest `max_to_keep`, each restores, no other file
  remains;
- `latest_checkpoint` read for up to a second while a process saves (`max_to_keep` 1 or 2):
  never None once a checkpoint exists, and each checkpoint it names restores (once) a
  consistent state, unless a newer save deleted it before the restore opened it.

Outcomes, the first that applies:

- **crash**: the child died (a signal, an abort, an exit); **hang**: no result in time;
- **leftovers**: a file no pointer names remains after the next save (a killed save's
  temporaries, racing saves' checkpoints);
- **wrong**: a restored value differs from the saved one, a read found no latest checkpoint
  where one was saved, or an intact checkpoint (unchanged, or saved in a race) was refused;
- **restored correctly**: every value restored equals the saved one (same dtypes and shapes);
- **clear error**: a damaged checkpoint refused with an exception not of a raw type (`RAW`:
  KeyError, TypeError, OSError, ... that internals raise, or another library's) whose
  message names the case's directory (a file in it) and says what is wrong (`_SAYS_WHAT`);
- **unclear error**: any other exception.

The test suite runs a slice (``tests/testing/test_checkpoints_campaign.py``); a campaign runs
many, with a seed never used before::

    python -m stageflow.testing.checkpoints --count 300 [--seed N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import struct
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import stageflow as sf
from stageflow.models.train import storage
from stageflow.models.train.restore import serialize
from stageflow.testing.campaign import add_seed, json_parent, json_paths, print_counts, seed_of
from stageflow.testing.campaign import progress as report_progress
from stageflow.testing.isolated import Died, Hung, run_isolated

OUTCOMES = ["restored correctly", "clear error", "unclear error", "wrong", "leftovers",
            "crash", "hang"]
BAD = ("unclear error", "wrong", "leftovers", "crash", "hang")
RAW = (KeyError, AttributeError, IndexError, TypeError, AssertionError, NameError,
       UnboundLocalError, RecursionError, StopIteration, ZeroDivisionError, OSError,
       MemoryError, OverflowError, UnicodeError, EOFError, struct.error)
_SAYS_WHAT = re.compile(
    r"must|missing|cannot|not a|is not|invalid|unknown|does not match|changed|too |nests"
    r"|truncated|complete|overlap|does not hold|spans",
    re.IGNORECASE)
Outcome = tuple[str, str]


# -- what the cases save ----------------------------------------------------------------------

def _objects(step: int) -> dict[str, Any]:
    """What a damage case saves (and, of step 0, restores into): variables of four dtypes
    at the top, in a list and in a dict, an optimizer's step and slots, Python state with an
    array and nested JSON; every value a function of `step`."""
    w = sf.Variable(np.arange(12, dtype=np.float32).reshape(3, 4) * (step + 1), name="w")
    optimizer = sf.optimizers.Adam(0.1)
    optimizer.apply_gradients([(sf.constant(np.full((3, 4), 0.5, np.float32)), w)])
    stats = sf.train.NumpyState()
    stats.mean = np.full(3, step, np.float64)
    stats.meta = {"step": step, "names": ["a", "b"], "nested": {"x": [1, [2, step]]}}
    return {"w": w, "optimizer": optimizer, "stats": stats,
            "layers": [sf.Variable(np.float64(step) / 3),
                       sf.Variable(np.arange(5, dtype=np.int32) * step)],
            "flags": {"on": sf.Variable(np.array([step % 2 == 0, True]))}}


def _snapshot(ckpt: sf.train.Checkpoint) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Everything `ckpt` would save: its tensors (copied) and its object graph."""
    tensors, graph = serialize(ckpt)
    return {key: np.array(value, copy=True) for key, value in tensors.items()}, graph


def _differences(got: tuple[dict, dict], want: tuple[dict, dict]) -> str:
    """What differs between two snapshots ("" when nothing does)."""
    (tensors, graph), (want_tensors, want_graph) = got, want
    if sorted(tensors) != sorted(want_tensors):
        return f"tensors {sorted(tensors)}, saved {sorted(want_tensors)}"
    for key, value in want_tensors.items():
        if (tensors[key].dtype != value.dtype or tensors[key].shape != value.shape
                or not np.array_equal(tensors[key], value, equal_nan=True)):
            return f"{key}: {tensors[key]!r}, saved {value!r}"
    return "" if graph == want_graph else "the object graph differs"


def _saved(directory: str) -> tuple[str, tuple[dict, dict]]:
    """Two checkpoints saved into `directory` by a manager: the latest's path and what it
    holds."""
    ckpt = sf.train.Checkpoint(**_objects(1))
    manager = sf.train.CheckpointManager(ckpt, directory, max_to_keep=2)
    manager.save()
    ckpt.stats.meta["step"] = 2
    path = manager.save()
    return path, _snapshot(ckpt)


def unclear_because(error: BaseException, directory: str) -> str | None:
    """Why `error` is unclear, or None if it is clear (the rules in the module docstring)."""
    message = str(error)
    if isinstance(error, RAW) or not type(error).__module__.startswith(("builtins", "stageflow")):
        return f"raw {type(error).__module__}.{type(error).__name__}"
    if os.path.normpath(directory) not in message:
        return "does not name the checkpoint's directory"
    if not _SAYS_WHAT.search(message.replace(directory, "")):
        return "does not say what is wrong"
    return None


def judge_error(error: BaseException, directory: str) -> Outcome:
    why = unclear_because(error, directory)
    detail = f"{type(error).__name__}: {' '.join(str(error).split())[:400]}"
    return ("unclear error", f"{why}: {detail}") if why else ("clear error", detail)


def _restore_latest(directory: str, want: tuple[dict, dict]) -> Outcome:
    """Restore the directory's latest checkpoint into fresh objects, as a resuming program
    does, and compare with what was saved."""
    try:
        path = sf.train.latest_checkpoint(directory)
        if path is None:
            return "wrong", "latest_checkpoint found no checkpoint"
        ckpt = sf.train.Checkpoint(**_objects(0))
        ckpt.restore(path).assert_consumed()
    except Exception as error:  # noqa: BLE001 - judged here
        return judge_error(error, directory)
    differs = _differences(_snapshot(ckpt), want)
    return ("wrong", differs) if differs else ("restored correctly", "")


# -- files replaced ---------------------------------------------------------------------------

def _fifo(path: str) -> None:
    os.mkfifo(path)


def _directory(path: str) -> None:
    os.mkdir(path)


def _dev_zero(path: str) -> None:
    os.symlink("/dev/zero", path)


def _replaced(which: str, make: Callable[[str], None]) -> Callable[[str, random.Random], Outcome]:
    """The latest checkpoint's file (`which` "checkpoint") or the pointer file replaced by
    what `make(path)` makes."""
    def case(directory: str, rng: random.Random) -> Outcome:
        path, want = _saved(directory)
        target = storage.file_of(path) if which == "checkpoint" else os.path.join(
            directory, storage.POINTER)
        os.unlink(target)
        make(target)
        return _restore_latest(directory, want)
    return case


# -- metadata edited --------------------------------------------------------------------------

RAW_MARK = "@@raw text@@"  # a field's value replaced by raw JSON text once dumped
RETYPED: list[Any] = [0, 1, -1, 0.5, True, False, None, "", "x", "F32", [], [0], [None], {},
                      {"a": 1}, {"__tensor__": "w"}]
HUGE = ["1e400", "-1e400", "9223372036854775808", "18446744073709551617", "-" + "9" * 30,
        "1" + "0" * 30, "1" + "0" * 5000, "4294967296"]
DEPTHS = [50, 100, 101, 150, 1000, 100_000]


def _delete(parent: Any, key: str | int, rng: random.Random) -> tuple[str, str | None]:
    del parent[key]
    return "deleted", None


def _retype(parent: Any, key: str | int, rng: random.Random) -> tuple[str, str | None]:
    parent[key] = rng.choice(RETYPED)
    return f"now {parent[key]!r}", None


def _huge(parent: Any, key: str | int, rng: random.Random) -> tuple[str, str | None]:
    parent[key] = RAW_MARK
    number = rng.choice(HUGE)
    return f"now {number[:24]}{'...' if len(number) > 24 else ''}", number


def _deep(parent: Any, key: str | int, rng: random.Random) -> tuple[str, str | None]:
    parent[key] = RAW_MARK
    depth = rng.choice(DEPTHS)
    if rng.random() < 0.5:
        return f"a list nested {depth} deep", "[" * depth + "]" * depth
    return f"a dict nested {depth} deep", '{"a":' * depth + "1" + "}" * depth


def _edit(value: Any, change: Callable[[Any, str | int, random.Random], tuple[str, str | None]],
          rng: random.Random) -> tuple[str, str]:
    """`value` with one field drawn at random changed, as JSON text; and what changed."""
    where = rng.choice(json_paths(value))
    how, raw = change(json_parent(value, where), where[-1], rng)
    text = json.dumps(value)
    if raw is not None:
        text = text.replace(json.dumps(RAW_MARK), raw, 1)
    return text, f"{'.'.join(map(str, where))}: {how}"


def _read_file(file: str) -> tuple[dict[str, Any], bytes]:
    with open(file, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(length)), f.read()


def _write_file(file: str, header_text: str, data: bytes) -> None:
    """A checkpoint file of this header and data (the length and padding follow it)."""
    text = header_text.encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(file, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def _edited(change: Callable[[Any, str | int, random.Random], tuple[str, str | None]]
            ) -> Callable[[str, random.Random], Outcome]:
    """One field of the header, the object graph or the checksums changed by `change`."""
    def case(directory: str, rng: random.Random) -> Outcome:
        path, want = _saved(directory)
        file = storage.file_of(path)
        header, data = _read_file(file)
        target = rng.choice(["header", storage.GRAPH_KEY, storage.CHECKSUMS_KEY])
        if target == "header":
            text, how = _edit(header, change, rng)
        else:
            header["__metadata__"][target], how = _edit(
                json.loads(header["__metadata__"][target]), change, rng)
            text = json.dumps(header)
        _write_file(file, text, data)
        outcome, detail = _restore_latest(directory, want)
        return outcome, f"{target} {how}; {detail}"
    return case


def _flipped(region: str) -> Callable[[str, random.Random], Outcome]:
    """One to eight bits flipped in the latest checkpoint's data, or in its header."""
    def case(directory: str, rng: random.Random) -> Outcome:
        path, want = _saved(directory)
        file = storage.file_of(path)
        with open(file, "rb") as f:
            data = bytearray(f.read())
        start = 8 + struct.unpack("<Q", data[:8])[0]
        low, high = (start, len(data)) if region == "data" else (0, start)
        at = sorted(rng.randrange(low, high) for _ in range(rng.randint(1, 8)))
        for position in at:
            data[position] ^= 1 << rng.randrange(8)
        with open(file, "wb") as f:
            f.write(data)
        outcome, detail = _restore_latest(directory, want)
        return outcome, f"bits flipped at {at}; {detail}"
    return case


def _checksums_removed(directory: str, rng: random.Random) -> Outcome:
    """A file as written before the checksums: it must restore."""
    path, want = _saved(directory)
    header, data = _read_file(storage.file_of(path))
    del header["__metadata__"][storage.CHECKSUMS_KEY]
    _write_file(storage.file_of(path), json.dumps(header), data)
    outcome, detail = _restore_latest(directory, want)
    return ("wrong", f"an intact file refused: {detail}") if outcome.endswith("error") else (
        outcome, detail)


# -- kills and races --------------------------------------------------------------------------

def _counter(megabytes: float) -> tuple[sf.train.Checkpoint, sf.train.NumpyState]:
    """A checkpoint of Python state whose array holds the number of the save writing it."""
    state = sf.train.NumpyState()
    state.step = 0
    state.data = np.zeros(int(megabytes * 2**18), np.float32)
    return sf.train.Checkpoint(state=state), state


def _advance(ckpt: sf.train.Checkpoint, state: sf.train.NumpyState, size: int) -> None:
    """Make `state` that of the next save of `ckpt`."""
    state.step = int(ckpt.save_counter.numpy()) + 1
    state.data = np.full(size, state.step, np.float32)


def _inconsistent(path: str) -> str | None:
    """Why the checkpoint at `path` does not restore a state of one save, None if it does."""
    ckpt, state = _counter(0)
    try:
        ckpt.restore(path).assert_consumed()
    except Exception as error:  # noqa: BLE001 - reported
        return f"{path} refused: {type(error).__name__}: {error}"
    number = int(ckpt.save_counter.numpy())
    if not path.endswith(f"-{number}") or not np.all(state.data == state.step):
        return f"{path}: save {number}, step {state.step}, data {state.data[:3]}..."
    return None


def _save_forever(directory: str, megabytes: float, keep: int) -> None:
    """A training program: resume from the latest checkpoint, then save again and again."""
    ckpt, state = _counter(megabytes)
    manager = sf.train.CheckpointManager(ckpt, directory, max_to_keep=keep)
    if manager.latest_checkpoint is not None:
        ckpt.restore(manager.latest_checkpoint)
    while True:
        _advance(ckpt, state, state.data.size)
        manager.save()


def _fork(work: Callable[[], None]) -> tuple[int, int]:
    """`work()` in a forked process (a copy of this one: it starts at once, stageflow
    imported): its pid and the read end of a pipe carrying the error it raised, if any."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        code = 0
        try:
            work()
        except BaseException as error:  # noqa: BLE001 - sent to the parent
            os.write(write, f"{type(error).__name__}: {error}".encode()[:4000])
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    return pid, read


def _reap(pid: int, read: int, kill: bool = False) -> str:
    """Wait for a forked process (killed first if `kill`): the error it sent, or ""."""
    if kill:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as pipe:
        return pipe.read().decode(errors="replace")


def _unnamed(directory: str) -> list[str]:
    """The files in `directory` its pointer does not name (the pointer aside)."""
    pointer = storage.read_pointer(directory)
    named = {storage.file_of(name) for name in pointer.get("all", [])}
    return sorted(n for n in os.listdir(directory) if n != storage.POINTER and n not in named)


def _kept(directory: str, keep: int, distinct: int) -> Outcome:
    """After saves of `distinct` checkpoint names with `max_to_keep` `keep`: the pointer
    names the newest `keep`, each restores one save's state, no other file remains."""
    left = _unnamed(directory)
    if left:
        return "leftovers", f"{len(left)} files no pointer names: {left[:4]}"
    names = storage.read_pointer(directory).get("all", [])
    if len(names) != min(keep, distinct):
        return "wrong", f"the pointer names {names}, max_to_keep {keep}, {distinct} saved"
    for name in names:
        why = _inconsistent(os.path.join(directory, name))
        if why:
            return "wrong", why
    return "restored correctly", f"{len(names)} kept of {distinct}"


def _killed(directory: str, rng: random.Random) -> Outcome:
    """A saver killed in the middle of its saves, one to three times, then a fresh manager
    resuming and saving once."""
    megabytes, keep, kills = rng.choice([1, 4, 16]), rng.randint(1, 3), rng.randint(1, 3)
    os.makedirs(directory)
    for _ in range(kills):
        pid, read = _fork(lambda: _save_forever(directory, megabytes, keep))
        time.sleep(rng.uniform(0.0, 0.4))
        _reap(pid, read, kill=True)
    how = f"{megabytes} MB, max_to_keep {keep}, {kills} kills"
    ckpt, state = _counter(megabytes)
    try:
        manager = sf.train.CheckpointManager(ckpt, directory, max_to_keep=keep)
        if manager.latest_checkpoint is not None:
            ckpt.restore(manager.latest_checkpoint).assert_consumed()
        _advance(ckpt, state, state.data.size)
        manager.save()
    except Exception as error:  # noqa: BLE001 - judged here
        return "wrong", f"{how}: resuming failed: {type(error).__name__}: {error}"
    # Each saver resumed the numbering: saves 1 to the last, each named once.
    outcome, detail = _kept(directory, keep, int(ckpt.save_counter.numpy()))
    return outcome, f"{how}: {detail}"


def _racing_threads(directory: str, rng: random.Random) -> Outcome:
    """Two to four threads saving into one directory through one shared manager, or a
    manager each (named alike or apart)."""
    count, saves, keep = rng.randint(2, 4), rng.randint(2, 5), rng.randint(1, 3)
    sharing = rng.choice(["one manager", "a manager each, one name", "a manager each"])
    shared = sf.train.CheckpointManager(_counter(0.01)[0], directory, max_to_keep=keep) \
        if sharing == "one manager" else None
    errors: list[str] = []
    barrier = threading.Barrier(count)

    def save(index: int) -> None:
        try:
            ckpt, state = _counter(0.01)
            name = f"t{index}" if sharing == "a manager each" else "ckpt"
            manager = shared or sf.train.CheckpointManager(ckpt, directory, max_to_keep=keep,
                                                           checkpoint_name=name)
            barrier.wait()
            for _ in range(saves):
                if shared is None:  # the shared one's state is left as it is
                    _advance(ckpt, state, state.data.size)
                manager.save()
        except Exception as error:  # noqa: BLE001 - reported
            errors.append(f"{type(error).__name__}: {error}")

    threads = [threading.Thread(target=save, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    how = f"{count} threads, {saves} saves each, {sharing}, max_to_keep {keep}"
    if errors:
        return "wrong", f"{how}: a save failed: {errors[0]}"
    distinct = saves if sharing == "a manager each, one name" else count * saves
    outcome, detail = _kept(directory, keep, distinct)
    return outcome, f"{how}: {detail}"


def _racing_processes(directory: str, rng: random.Random) -> Outcome:
    """Two or three processes, a manager each (named alike or apart), saving into one
    directory."""
    count, saves, keep = rng.randint(2, 3), rng.randint(2, 5), rng.randint(1, 3)
    apart = rng.random() < 0.5
    os.makedirs(directory)

    def save(index: int) -> None:
        ckpt, state = _counter(0.01)
        manager = sf.train.CheckpointManager(ckpt, directory, max_to_keep=keep,
                                             checkpoint_name=f"p{index}" if apart else "ckpt")
        for _ in range(saves):
            _advance(ckpt, state, state.data.size)
            manager.save()

    forked = [_fork(lambda index=index: save(index)) for index in range(count)]
    errors = [error for error in (_reap(pid, read) for pid, read in forked) if error]
    how = f"{count} processes, {saves} saves each, {'named apart' if apart else 'one name'}, " \
          f"max_to_keep {keep}"
    if errors:
        return "wrong", f"{how}: a save failed: {errors[0]}"
    outcome, detail = _kept(directory, keep, count * saves if apart else saves)
    return outcome, f"{how}: {detail}"


def _readers(directory: str, rng: random.Random) -> Outcome:
    """`latest_checkpoint` read, and what it names restored, while a process saves."""
    keep, seconds, megabytes = rng.choice([1, 2]), rng.uniform(0.3, 1.0), rng.choice(
        [0.001, 0.1, 1])
    os.makedirs(directory)
    pid, read = _fork(lambda: _save_forever(directory, megabytes, keep))
    reads = overtaken = 0
    how = f"max_to_keep {keep}, {megabytes} MB"
    try:
        deadline = time.monotonic() + 30
        while sf.train.latest_checkpoint(directory) is None:
            if time.monotonic() > deadline:
                return "wrong", f"{how}: the saver saved nothing in 30 s"
            time.sleep(0.001)
        end = time.monotonic() + seconds
        restored = None
        while time.monotonic() < end:
            path = sf.train.latest_checkpoint(directory)
            reads += 1
            if path is None:
                return "wrong", f"{how}: read {reads} found no latest checkpoint"
            if path == restored:
                continue  # each checkpoint restored once: the reads come faster
            restored = path
            why = _inconsistent(path)
            if why is None:
                continue
            if os.path.exists(storage.file_of(path)) \
                    or sf.train.latest_checkpoint(directory) == path:
                return "wrong", f"{how}: read {reads}: {why}"
            overtaken += 1  # a newer save deleted it between its naming and its restore
    except Exception as error:  # noqa: BLE001 - judged here
        return "wrong", f"{how}: read {reads}: {type(error).__name__}: {error}"
    finally:
        failure = _reap(pid, read, kill=True)
    if failure:
        return "wrong", f"{how}: the saver failed: {failure}"
    return "restored correctly", f"{how}: {reads} reads, {overtaken} overtaken"


KINDS: dict[str, Callable[[str, random.Random], Outcome]] = {
    "checkpoint a FIFO": _replaced("checkpoint", _fifo),
    "checkpoint a directory": _replaced("checkpoint", _directory),
    "checkpoint to /dev/zero": _replaced("checkpoint", _dev_zero),
    "pointer a FIFO": _replaced("pointer", _fifo),
    "pointer a directory": _replaced("pointer", _directory),
    "pointer to /dev/zero": _replaced("pointer", _dev_zero),
    "metadata field deleted": _edited(_delete),
    "metadata field retyped": _edited(_retype),
    "metadata huge number": _edited(_huge),
    "metadata deep nesting": _edited(_deep),
    "data bits flipped": _flipped("data"),
    "header bits flipped": _flipped("header"),
    "checksums removed": _checksums_removed,
    "killed during saves": _killed,
    "racing threads": _racing_threads,
    "racing processes": _racing_processes,
    "readers during saves": _readers,
}


# -- one case ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """One case: its kind and its seed, drawn from (campaign seed, index) alone."""

    kind: str
    seed: int

    @staticmethod
    def draw(campaign_seed: int, index: int) -> Case:
        """The kinds in turn from a start drawn by the campaign's seed, so that a campaign
        of N cases draws each kind N / len(KINDS) times, give or take one."""
        start = random.Random(campaign_seed).randrange(len(KINDS))
        kind = list(KINDS)[(start + index) % len(KINDS)]
        return Case(kind, random.Random(f"{campaign_seed}:{index}").getrandbits(32))

    def __str__(self) -> str:
        return f"{self.kind} (seed {self.seed})"


def _run_item(item: tuple[str, int, str]) -> Outcome:
    """A child's work on one case: (kind, seed, the case's directory, not made yet)."""
    kind, seed, directory = item
    return KINDS[kind](directory, random.Random(seed))


# -- the campaign -----------------------------------------------------------------------------

@dataclass
class Tally:
    """Outcomes per kind, and the first few cases of each bad outcome."""

    counts: dict[str, Counter] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def add(self, case: Case, outcome: str, detail: str) -> None:
        self.counts.setdefault(case.kind, Counter())[outcome] += 1
        if outcome in BAD and len(self.examples) < 30:
            self.examples.append(f"{outcome}: {case}\n  {detail}")

    def total(self, outcome: str) -> int:
        return sum(c[outcome] for c in self.counts.values())


def run_campaign(count: int, campaign_seed: int, *, batch: int = 50, timeout: float = 60.0,
                 worker: Callable[[tuple[str, int, str]], Outcome] = _run_item,
                 progress: Callable[[int], None] | None = None) -> Tally:
    """`count` cases drawn from `campaign_seed`, each run in a child process, tallied."""
    cases = [Case.draw(campaign_seed, i) for i in range(count)]
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="checkpoints-") as root:
        items = [(case.kind, case.seed, os.path.join(root, f"case{index}"))
                 for index, case in enumerate(cases)]
        results = run_isolated(worker, items, batch=batch, timeout=timeout, progress=progress)
        for case, result in zip(cases, results, strict=True):
            if isinstance(result, Died):
                result = ("crash", f"{result.how}{'' if result.alone else ' (after others)'}")
            elif isinstance(result, Hung):
                result = ("hang", f"no result in {result.seconds:.0f} s")
            tally.add(case, *result)
    return tally


def print_table(tally: Tally) -> None:
    short = {"restored correctly": "correct", "clear error": "clear",
             "unclear error": "unclear", "leftovers": "leftover"}
    print_counts("kind", KINDS, tally.counts, OUTCOMES, short, 24, column=9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stageflow.testing.checkpoints",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=300)
    add_seed(parser)
    args = parser.parse_args(argv)
    campaign_seed = seed_of(args)
    start = time.perf_counter()
    tally = run_campaign(args.count, campaign_seed, progress=report_progress("cases"))
    print(f"checkpoints under damage and races, seed {campaign_seed}, {args.count} cases, "
          f"{time.perf_counter() - start:.0f} s")
    print_table(tally)
    for text in tally.examples:
        print(f"\n{text}")
    return 0 if sum(tally.total(o) for o in BAD) == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
