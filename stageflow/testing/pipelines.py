"""Random `sf.data` pipelines with failing elements, and the campaign that checks them.

Prefetching and parallel calls change when an element is computed, never what the consumer
sees: a pipeline with them must give the same elements, and the same errors at the same
positions (iteration going on after each), as the plain sequential pipeline; an iterator
saved at any position and restored must go on with the same elements and errors; and a
position saved by one pipeline must be refused by another with an error saying which stage
differs. The campaign draws pipelines (`Case`): a source (``range``, or
``from_tensor_slices`` of keys alone or of keys and float values) and three to seven stages
among ``map`` (staged, or a function that cannot be staged and runs eagerly, each raising
on the keys of one residue class), ``filter``, ``batch``, seeded ``shuffle``, ``repeat`` and
``take``. The plain pipeline runs it as drawn; the tuned one gives each map 1 to 4
parallel calls and inserts prefetches. Each pipeline is checked three ways (`CHECKS`), each
check in a child process (`stageflow.testing.isolated`), so that a crash or hang is counted:

- **prefetched and parallel**: the tuned pipeline's outcomes against the plain one's;
- **save and restore**: the tuned iterator is written by `sf.train.Checkpoint` at a random
  position; it must go on as the plain pipeline does, and so must a fresh iterator of the
  pipeline with other parallel calls and prefetch sizes (which change no element)
  restored from that checkpoint;
- **restore into another pipeline**: the position is restored into a pipeline that differs
  in one stage (`MUTATIONS`: a batch size, a shuffle buffer, a repeat count, a stage added
  or removed, a map that changes the dtype).

Outcomes, per check:

- **same**: the outcomes are the plain pipeline's;
- **clear refusal**: another pipeline's position refused by a ValueError that says the
  position does not fit the pipeline and names the stage, or the count of stages, that
  differs;
- **wrong**: other elements or errors, or another pipeline's position restored;
- **unclear error**: an error from building, saving or restoring where there should be
  none, or another pipeline's position refused without saying what differs;
- **crash**: the child died; **hang**: no result within the timeout.

The test suite runs a slice (``tests/testing/test_pipelines_campaign.py``); a campaign
runs many, with a seed never used before::

    python -m stageflow.testing.pipelines --count 300 [--seed N]
"""

from __future__ import annotations

import argparse
import random
import re
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

import stageflow as sf
from stageflow.testing.campaign import add_seed, print_counts, seed_of
from stageflow.testing.campaign import progress as report_progress
from stageflow.testing.isolated import Died, Hung, run_isolated

OUTCOMES = ["same", "clear refusal", "wrong", "unclear error", "crash", "hang"]
CHECKS = ["prefetched and parallel", "save and restore", "restore into another pipeline"]
MUTATIONS = ["batch size", "shuffle buffer", "repeat count", "stage added", "stage removed",
             "dtype changed"]
MOST_OUTCOMES = 2000  # a pipeline gives far fewer: more means it never ends
_NAMES_THE_DIFFERENCE = re.compile(r"stage \d+ is `[^`]+` in the checkpoint, `[^`]+` here"
                                   r"|it has \d+ stages, this one \d+")

Stage = tuple[Any, ...]  # ("map", eager, modulus, residue), ("batch", size, drop), ...


# -- the pipelines ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """One drawn pipeline, drawn from (campaign seed, index) alone: its source, its stages
    (prefetches included: the plain pipeline leaves them out), each map's parallel calls,
    where its position is saved and the stage the other pipeline changes."""

    source: tuple[str, int, str]  # (kind, length, dtype of the keys)
    stages: tuple[Stage, ...]
    parallel: tuple[int, ...]  # per map, in order
    save_at: float  # where the position is saved, as a fraction of the outcomes
    mutation: str
    seed: int

    @staticmethod
    def draw(campaign_seed: int, index: int) -> Case:
        rng = random.Random(f"{campaign_seed}:{index}")
        kind = rng.choice(["range", "keys", "pairs"])
        source = (kind, rng.randint(3, 24),
                  "int64" if kind == "range" else rng.choice(["int32", "int64"]))
        stages: list[Stage] = []
        batched = False
        for _ in range(rng.randint(3, 7)):
            kind = rng.choice(["map", "map", "filter", "batch", "shuffle", "repeat", "take",
                               "prefetch"])
            if kind == "filter" and batched:
                kind = "map"  # a batch's predicate would not be a scalar
            stages.append(_draw_stage(kind, rng))
            batched = batched or kind == "batch"
        parallel = tuple(rng.randint(1, 4) for s in stages if s[0] == "map")
        return Case(source, tuple(stages), parallel, rng.random(), rng.choice(MUTATIONS),
                    rng.getrandbits(32))

    def __str__(self) -> str:
        stages = " | ".join(" ".join(map(str, s)) for s in self.stages)
        return (f"{' '.join(map(str, self.source))} | {stages} (parallel {self.parallel}, "
                f"save at {self.save_at:.2f}, other pipeline: {self.mutation})")


def _draw_stage(kind: str, rng: random.Random) -> Stage:
    if kind == "map":
        return ("map", rng.random() < 0.3, rng.randint(3, 9), rng.randint(0, 2))
    if kind == "filter":
        return ("filter", rng.randint(2, 5), rng.randint(0, 1))
    if kind == "batch":
        return ("batch", rng.randint(1, 4), rng.random() < 0.3)
    if kind == "shuffle":
        return ("shuffle", rng.randint(1, 8), rng.getrandbits(16), rng.random() < 0.7)
    if kind == "repeat":
        return ("repeat", rng.randint(1, 3))
    if kind == "take":
        return ("take", rng.randint(1, 30))
    return ("prefetch", rng.randint(1, 4))


def _refuse(modulus: int, residue: int) -> Callable[[np.ndarray], np.ndarray]:
    """The check of a map: its keys of one residue class raise, by value, so that an
    error belongs to an element whichever thread computes it."""
    def check(keys: np.ndarray) -> np.ndarray:
        hits = np.asarray(keys) % modulus == residue
        if np.any(hits):
            raise ValueError(f"key {int(np.asarray(keys)[hits].flat[0])} is refused "
                             f"(keys = {residue} mod {modulus})")
        return np.bool_(True)
    return check


def _map_function(eager: bool, modulus: int, residue: int) -> Callable[..., Any]:
    """A map of (key[, value]) elements raising on some keys: staged (the check a
    `numpy_function` the key depends on), or one that cannot be staged (it reads the
    key's value in Python)."""
    check = _refuse(modulus, residue)

    def staged(key: Any, *rest: Any) -> Any:
        passed = sf.numpy_function(check, [key], sf.TensorSpec((), sf.bool))
        key = key + sf.cast(passed, key.dtype)
        return (key, *(value * 2.0 for value in rest)) if rest else key

    def unstageable(key: Any, *rest: Any) -> Any:
        check(key.numpy())
        key = key + 1
        return (key, *(value * 2.0 for value in rest)) if rest else key

    return unstageable if eager else staged


def build(case: Case, *, tuned: bool, parallel: tuple[int, ...] | None = None,
          sizes: int = 0) -> sf.data.Dataset:
    """The case's pipeline: plain (sequential maps, no prefetch), or tuned (the drawn
    parallel calls, or `parallel`; prefetch sizes as drawn, plus `sizes`)."""
    kind, length, dtype = case.source
    keys = np.arange(length, dtype=dtype)
    if kind == "range":
        dataset = sf.data.Dataset.range(length)
    elif kind == "keys":
        dataset = sf.data.Dataset.from_tensor_slices(keys)
    else:
        dataset = sf.data.Dataset.from_tensor_slices((keys, keys.astype(np.float32) / 4))
    calls = iter(parallel or case.parallel)
    for stage in case.stages:
        name, *args = stage
        if name == "map":
            width = next(calls)
            dataset = dataset.map(_map_function(*args), num_parallel_calls=width if tuned
                                  else None)
        elif name == "to float":
            dataset = dataset.map(lambda key, *rest: (sf.cast(key, sf.float32), *rest)
                                  if rest else sf.cast(key, sf.float32))
        elif name == "filter":
            modulus, residue = args
            dataset = dataset.filter(lambda key, *rest, m=modulus, r=residue: key % m != r)
        elif name == "batch":
            dataset = dataset.batch(args[0], drop_remainder=args[1])
        elif name == "shuffle":
            dataset = dataset.shuffle(args[0], seed=args[1], reshuffle_each_iteration=args[2])
        elif name == "repeat":
            dataset = dataset.repeat(args[0])
        elif name == "take":
            dataset = dataset.take(args[0])
        elif tuned:
            dataset = dataset.prefetch(args[0] + sizes)
    return dataset


def mutated(case: Case) -> Case:
    """The case with one stage changed as its mutation says (another pipeline: the saved
    position must not fit it)."""
    rng = random.Random(case.seed)
    stages = list(case.stages)
    where = {"batch size": "batch", "shuffle buffer": "shuffle", "repeat count": "repeat"}
    positions = [i for i, s in enumerate(stages) if s[0] == where.get(case.mutation)]
    parallel = case.parallel
    if positions:
        i = rng.choice(positions)
        stages[i] = (*stages[i][:1], stages[i][1] + rng.randint(1, 3), *stages[i][2:])
    elif case.mutation == "stage removed" and len(stages) > 1:
        i = rng.randrange(len(stages))
        if stages[i][0] == "map":
            maps = sum(1 for s in stages[:i] if s[0] == "map")
            parallel = parallel[:maps] + parallel[maps + 1:]
        del stages[i]
    elif case.mutation == "dtype changed":
        stages.insert(rng.randint(0, len(stages)), ("to float",))
    else:  # a stage added, also where the mutation has no stage to change
        stages.insert(rng.randint(0, len(stages)), ("repeat", 2))
    return replace(case, stages=tuple(stages), parallel=parallel)


# -- the checks -------------------------------------------------------------------------------

Outcome = Any  # an element as nested lists of (dtype, shape, values), or an error's text


def _plain(element: Any) -> Outcome:
    if isinstance(element, tuple | list):
        return tuple(_plain(e) for e in element)
    value = np.asarray(element.numpy())
    return (value.dtype.name, value.shape, value.tolist())


def outcomes_of(iterator: Any, count: int | None = None) -> list[Outcome]:
    """The next `count` outcomes of `iterator` (all, when None): each element, or the
    error the element raised (type and message), `next` called again after it."""
    seen: list[Outcome] = []
    while count is None or len(seen) < count:
        if len(seen) > MOST_OUTCOMES:
            raise AssertionError(f"more than {MOST_OUTCOMES} outcomes: no end")
        try:
            seen.append(_plain(next(iterator)))
        except StopIteration:
            break
        except Exception as error:  # noqa: BLE001 - an element's error, in its place
            seen.append(f"{type(error).__name__}: {error}")
    return seen


def _differs(got: list[Outcome], want: list[Outcome]) -> str:
    at = next((i for i, (g, w) in enumerate(zip(got, want, strict=False)) if g != w),
              min(len(got), len(want)))
    if at == min(len(got), len(want)):
        return f"{len(got)} outcomes instead of {len(want)}"
    return f"outcome {at} is {got[at]!r} instead of {want[at]!r}"


def refusal_unclear(error: BaseException) -> str | None:
    """Why refusing another pipeline's position with `error` is unclear, or None if it is
    clear: a ValueError saying the position does not fit, naming what differs."""
    message = str(error)
    if not isinstance(error, ValueError):
        return f"a {type(error).__name__}, not a ValueError"
    if "does not fit this dataset's pipeline" not in message:
        return "does not say the position does not fit the pipeline"
    if not _NAMES_THE_DIFFERENCE.search(message):
        return "does not name the stage that differs"
    return None


def check(item: tuple[Case, str]) -> tuple[str, str]:
    """(outcome, detail) of one check of one case, in this process."""
    case, name = item
    with tempfile.TemporaryDirectory(prefix="pipelines-") as directory:
        try:
            want = outcomes_of(iter(build(case, tuned=False)))
            if name == "prefetched and parallel":
                got = outcomes_of(iter(build(case, tuned=True)))
                return ("same", "") if got == want else ("wrong", _differs(got, want))
            position = round(case.save_at * len(want))
            original = iter(build(case, tuned=True))
            before = outcomes_of(original, position)
            path = sf.train.Checkpoint(it=original).write(f"{directory}/position")
            if name == "save and restore":
                return _restored(case, path, before, outcomes_of(original), want)
            foreign = iter(build(mutated(case), tuned=True))
        except Exception as error:  # noqa: BLE001 - judged: none was due
            return "unclear error", f"{type(error).__name__}: {error}"[:600]
        try:
            sf.train.Checkpoint(it=foreign).restore(path)
        except Exception as error:  # noqa: BLE001 - judged here
            why = refusal_unclear(error)
            detail = f"{type(error).__name__}: {error}"[:600]
            return ("unclear error", f"{why}: {detail}") if why else ("clear refusal", "")
        return "wrong", f"restored into {mutated(case)}"


def _restored(case: Case, path: str, before: list[Outcome], after: list[Outcome],
              want: list[Outcome]) -> tuple[str, str]:
    """The save-and-restore check: the saved iterator went on as the plain pipeline did,
    and so does a restore into the pipeline with other parallel calls and prefetch sizes."""
    if before + after != want:
        return "wrong", f"the saved iterator: {_differs(before + after, want)}"
    retuned = tuple(1 + p % 4 for p in case.parallel)
    restored = iter(build(case, tuned=True, parallel=retuned, sizes=1))
    sf.train.Checkpoint(it=restored).restore(path).assert_consumed()
    again = before + outcomes_of(restored)
    if again != want:
        return "wrong", f"the restored iterator: {_differs(again, want)}"
    return "same", ""


def _quiet() -> None:
    """A child's setup: the warnings of maps that cannot be staged are expected."""
    warnings.simplefilter("ignore")


# -- the campaign -----------------------------------------------------------------------------

@dataclass
class Tally:
    """Outcomes per check, and the first few cases of each bad outcome."""

    counts: dict[str, Counter] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def add(self, case: Case, name: str, outcome: str, detail: str) -> None:
        self.counts.setdefault(name, Counter())[outcome] += 1
        if outcome not in ("same", "clear refusal") and len(self.examples) < 30:
            self.examples.append(f"{outcome}: {name}: {case}\n  {detail}")

    def total(self, outcome: str) -> int:
        return sum(c[outcome] for c in self.counts.values())


def run_campaign(count: int, campaign_seed: int, *, batch: int = 150, timeout: float = 60.0,
                 worker: Callable[[tuple[Case, str]], tuple[str, str]] = check,
                 progress: Callable[[int], None] | None = None) -> Tally:
    """`count` pipelines drawn from `campaign_seed`, each checked every way of `CHECKS` in
    a child process, tallied."""
    items = [(Case.draw(campaign_seed, i), name) for i in range(count) for name in CHECKS]
    results = run_isolated(worker, items, batch=batch, timeout=timeout, setup=_quiet,
                           progress=progress)
    tally = Tally()
    for (case, name), result in zip(items, results, strict=True):
        if isinstance(result, Died):
            result = ("crash", f"{result.how}{'' if result.alone else ' (after others)'}")
        elif isinstance(result, Hung):
            result = ("hang", f"no result in {result.seconds:.0f} s")
        tally.add(case, name, *result)
    return tally


def print_table(tally: Tally) -> None:
    short = {"clear refusal": "refused", "unclear error": "unclear"}
    print_counts("check", CHECKS, tally.counts, OUTCOMES, short, 30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stageflow.testing.pipelines",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=300, help="pipelines to draw")
    add_seed(parser)
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a check may take before it counts as a hang")
    args = parser.parse_args(argv)
    campaign_seed = seed_of(args)
    start = time.perf_counter()
    tally = run_campaign(args.count, campaign_seed, timeout=args.timeout,
                         progress=report_progress("checks"))
    print(f"sf.data pipelines, seed {campaign_seed}, {args.count} pipelines, "
          f"{args.count * len(CHECKS)} checks, {time.perf_counter() - start:.0f} s")
    print_table(tally)
    for text in tally.examples:
        print(f"\n{text}")
    bad = sum(tally.total(o) for o in ("wrong", "unclear error", "crash", "hang"))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
