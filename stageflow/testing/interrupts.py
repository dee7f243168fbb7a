"""Ctrl-C against compiled loops: random loop programs, each interrupted at a random moment.

A case is one random `sf.function` (`Case.draw`): a `while_loop` over a counter and a
float64 vector whose body is a random chain of bounded ops (affine maps that contract, sines)
with `cond`s and `switch_case`s on a counter and nested `while_loop`s of a few trips inside,
nested up to two deep. By `KINDS` it updates variables: ``program`` assigns them before
and after the loop (the function is one compiled program, its loops checking the interrupt
flag: `stageflow.runtime.interrupts`); ``callback`` does so too and calls a py_func in the
loop (Python code runs inside the loop, where the signal usually lands); ``steps`` assigns
one inside the loop (the function then runs as Python steps, rolled back when interrupted).
The loop is endless, or runs for a drawn time (a trip costs nanoseconds in a program and a
thousand times more as Python steps, so the child times a few runs to find the trip count).

Each case runs in a child process (`stageflow.testing.isolated`), which compiles the
function and checks three trips of it against ``jit=False``; runs a finite loop once
uninterrupted as the reference (its result, its variables, its duration) and puts the
variables back; then calls again while a timer thread sends the process SIGINT after a
random delay (up to one and a half times the reference's duration, or up to half a second
for an endless loop), as a Ctrl-C would. (A thread of the child sends it, and takes the GIL
to do so: harder on a py_func's callback, which then waits for the GIL with the signal
pending, than a Ctrl-C from a terminal.) Outcomes:

- **interrupted**: ``KeyboardInterrupt`` came out of the call, every variable as before it;
- **finished**: the call ended before the signal was handled, with the reference's result
  and variables (then ``KeyboardInterrupt`` came right after it, as it should);
- **state changed**: ``KeyboardInterrupt`` came out of the call, but the variables hold
  neither their values from before the call nor the reference's;
- **wrong result**: the call returned something else than the reference, three trips
  compiled differ from ``jit=False``, or the case raised an error;
- **lost**: the signal was sent and no ``KeyboardInterrupt`` ever came;
- **hang** (no result within the timeout: a loop that ignored the signal) and **crash**
  (the child died).

The test suite runs a slice (``tests/testing/test_interrupts_campaign.py``); a campaign
runs many, with a seed never used before::

    python -m stageflow.testing.interrupts --count 100 [--seed N]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import stageflow as sf
from stageflow.testing.campaign import add_seed, print_counts, seed_of
from stageflow.testing.campaign import progress as report_progress
from stageflow.testing.isolated import Died, Hung, run_isolated

KINDS = ["program", "callback", "steps"]
OUTCOMES = ["interrupted", "finished", "state changed", "wrong result", "lost", "hang",
            "crash"]
BAD = OUTCOMES[2:]
SECONDS = (0.02, 1.0)  # how long a finite loop runs, log-uniform
SHORT_TRIPS = 3  # the run checked against the interpreter
TIMED = 0.01  # seconds a run of the loop must take for its trip cost to be known
LATE = 1.0  # seconds a signal sent after the call ended has to surface as KeyboardInterrupt
TIMEOUT = 60.0  # seconds a child has for one case: compiling, three runs, the waits

Ops = tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class Case:
    """One case; drawn from (campaign seed, index) alone, so that a child and its parent
    agree on it. `delay` is seconds for an endless loop, else a fraction of the
    reference's duration; `seconds`, how long a finite loop runs."""

    kind: str
    endless: bool
    seconds: float
    width: int
    depth: int
    delay: float
    seed: int

    @staticmethod
    def draw(campaign_seed: int, index: int) -> Case:
        """The first cases go through every kind, endless and finite; then at random."""
        rng = random.Random(f"{campaign_seed}:{index}")
        if index < 2 * len(KINDS):
            kind, endless = KINDS[index % len(KINDS)], index < len(KINDS)
        else:
            kind, endless = rng.choice(KINDS), rng.random() < 0.4
        seconds = math.exp(rng.uniform(*map(math.log, SECONDS)))
        delay = rng.uniform(0.02, 0.5) if endless else rng.uniform(0.0, 1.5)
        return Case(kind, endless, round(seconds, 3), rng.choice([1, 3, 16, 256]),
                    rng.randint(0, 2), round(delay, 3), rng.getrandbits(32))

    def __str__(self) -> str:
        loop = "endless" if self.endless else f"{self.seconds} s"
        delay = f"{self.delay} s" if self.endless else f"{self.delay} of its duration"
        return (f"{self.kind}, {loop}, width {self.width}, nesting {self.depth}, "
                f"signal after {delay} (seed {self.seed})")

    @property
    def row(self) -> str:
        return f"{self.kind}, {'endless' if self.endless else 'finite'}"


ROWS = [f"{kind}, {loop}" for kind in KINDS for loop in ("endless", "finite")]


# -- the programs ---------------------------------------------------------------------------

def draw_ops(rng: random.Random, depth: int) -> Ops:
    """1-3 ops on a vector; with `depth`, branches and loops holding ops in turn."""
    ops: list[tuple[Any, ...]] = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["affine", "sine"] + (["branch", "switch", "loop"] if depth else []))
        if kind == "affine":  # contracting: the values stay bounded over any trip count
            ops.append(("affine", round(rng.uniform(-0.9, 0.9), 3),
                        round(rng.uniform(-1.0, 1.0), 3)))
        elif kind == "sine":
            ops.append(("sine",))
        elif kind == "branch":
            ops.append(("branch", rng.randint(2, 5), rng.randint(0, 1),
                        draw_ops(rng, depth - 1), draw_ops(rng, depth - 1)))
        elif kind == "switch":
            ops.append(("switch", tuple(draw_ops(rng, depth - 1)
                                        for _ in range(rng.randint(2, 4)))))
        else:
            ops.append(("loop", rng.randint(1, 4), draw_ops(rng, depth - 1)))
    return tuple(ops)


def apply_ops(ops: Ops, y: Any, counter: Any) -> Any:
    """`ops` traced on `y`; branches select on `counter` (the enclosing loop's)."""
    for op in ops:
        name = op[0]
        if name == "affine":
            y = y * op[1] + op[2]
        elif name == "sine":
            y = sf.sin(y)
        elif name == "branch":
            _, modulus, residue, then, otherwise = op
            y = sf.cond(counter % modulus == residue,
                        lambda y=y, then=then: apply_ops(then, y, counter),
                        lambda y=y, otherwise=otherwise: apply_ops(otherwise, y, counter))
        elif name == "switch":
            branches = op[1]
            y = sf.switch_case(sf.cast(counter % len(branches), sf.int32),
                               [lambda y=y, b=b: apply_ops(b, y, counter) for b in branches])
        else:
            _, trips, body = op
            y = sf.while_loop(lambda j, z, trips=trips: j < trips,
                              lambda j, z, body=body: (j + 1, apply_ops(body, z, j)),
                              (sf.constant(np.int64(0)), y))[1]
    return y


@dataclass
class Built:
    """A case's function (of the trip count; a negative one loops forever) and the
    variables it assigns."""

    function: Callable[[Any], Any]
    variables: list[sf.Variable]


def build(case: Case) -> Built:
    rng = random.Random(case.seed)
    ops = draw_ops(rng, case.depth)
    start = np.array([rng.uniform(-1.0, 1.0) for _ in range(case.width)])
    v = sf.Variable(np.zeros(case.width), name="v")
    w = sf.Variable(np.int64(-1), name="w")
    u = sf.Variable(np.float64(0.0), name="u")
    spec = sf.TensorSpec([case.width], sf.float64)

    def loop(n: Any) -> Any:
        if case.kind != "steps":
            v.assign_add(start)

        def body(i: Any, y: Any) -> tuple[Any, Any]:
            y = apply_ops(ops, y, i)
            if case.kind == "callback":
                y = sf.py_func(np.tanh, [y], spec)
            if case.kind == "steps":
                v.assign_add(y)
            return i + 1, y

        i, y = sf.while_loop(lambda i, y: (i < n) | (n < 0), body,
                             (sf.constant(np.int64(0)), sf.constant(start)))
        w.assign(i)
        if case.kind != "steps":
            u.assign(sf.reduce_sum(y))
        return y

    return Built(loop, [v, w, u])


# -- running and judging one case -----------------------------------------------------------

def _values(variables: list[sf.Variable]) -> list[np.ndarray]:
    return [variable.numpy() for variable in variables]


def _restore(variables: list[sf.Variable], values: list[np.ndarray]) -> None:
    for variable, value in zip(variables, values, strict=True):
        variable.assign(value)


def _same(got: list[np.ndarray], want: list[np.ndarray]) -> bool:
    return all(np.array_equal(g, w, equal_nan=True) for g, w in zip(got, want, strict=True))


def _close(got: list[np.ndarray], want: list[np.ndarray]) -> bool:
    return all(np.allclose(g, w, rtol=1e-9, atol=1e-12, equal_nan=True)
               for g, w in zip(got, want, strict=True))


@dataclass(frozen=True)
class Interrupted:
    """How the interrupted call went: whether it returned (and what), whether
    ``KeyboardInterrupt`` came (out of it, or after it returned), and whether the signal was
    sent at all (not where the call ended first)."""

    returned: bool
    raised: bool
    sent: bool
    result: np.ndarray | None


def interrupted_call(call: Callable[[], np.ndarray], delay: float) -> Interrupted:
    """`call()` while a timer thread sends this process SIGINT after `delay` seconds (unless
    the call has ended by then); waits `LATE` seconds for the ``KeyboardInterrupt`` of a
    signal sent as the call ended."""
    sent = threading.Event()

    def send() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        sent.set()

    timer = threading.Timer(delay, send)
    returned, result = False, None
    try:
        timer.start()
        result = call()
        returned = True
        timer.cancel()
        timer.join()
        if sent.is_set():
            for _ in range(int(LATE / 0.01)):  # short sleeps: the signal ends one of them
                time.sleep(0.01)
    except KeyboardInterrupt:
        return Interrupted(returned, True, True, result)
    return Interrupted(returned, False, sent.is_set(), result)


def run_case(case: Case) -> tuple[str, str]:
    """The outcome of one case and what went wrong (empty when nothing did)."""
    try:
        return _run(case)
    except Exception as error:  # noqa: BLE001 - a case that raised is a case that failed
        return "wrong result", f"raised {type(error).__name__}: {error}"


def _run(case: Case) -> tuple[str, str]:
    """Check, time, then interrupt the case's function (see the module's docstring)."""
    built = build(case)
    compiled, interpreted = sf.function(built.function), sf.function(built.function,
                                                                     jit=False)
    variables = built.variables
    initial = _values(variables)
    short = sf.constant(np.int64(SHORT_TRIPS))
    got = [compiled(short).numpy(), *_values(variables)]
    _restore(variables, initial)
    want = [interpreted(short).numpy(), *_values(variables)]
    _restore(variables, initial)
    if not _close(got, want):
        return "wrong result", f"{SHORT_TRIPS} trips compiled differ from jit=False"
    steps = compiled.get_concrete_function(short).stats()["steps_reasons"]
    if bool(steps) != (case.kind == "steps"):
        return "wrong result", f"ran as {'steps' if steps else 'a program'}"
    reference: list[np.ndarray] | None = None
    delay = case.delay
    if case.endless:
        n = sf.constant(np.int64(-1))
    else:
        n = sf.constant(np.int64(_trips(compiled, case.seconds)))
        _restore(variables, initial)
        start = time.perf_counter()
        reference = [compiled(n).numpy(), *_values(variables)]
        delay *= time.perf_counter() - start
        _restore(variables, initial)
    run = interrupted_call(lambda: compiled(n).numpy(), delay)
    state = _values(variables)
    return judge(run, state, initial, reference)


def _trips(compiled: Callable[[Any], Any], seconds: float) -> int:
    """The trip count for which the loop runs about `seconds`, from a run of at least
    `TIMED` seconds (trip counts growing sixteenfold until one takes that long)."""
    trips = 16
    while True:
        start = time.perf_counter()
        compiled(sf.constant(np.int64(trips)))
        elapsed = time.perf_counter() - start
        if elapsed >= TIMED:
            return max(1, round(trips * seconds / elapsed))
        trips *= 16


def judge(run: Interrupted, state: list[np.ndarray], initial: list[np.ndarray],
          reference: list[np.ndarray] | None) -> tuple[str, str]:
    """The outcome of an interrupted call: its variables afterwards (`state`), before it
    (`initial`), and the reference's result and variables (None for an endless loop)."""
    ended = reference is not None and _same(state, reference[1:])
    if run.raised:
        if _same(state, initial):
            return "interrupted", ""
        if ended:  # the call had committed when the signal was handled, just after it
            return "finished", ""
        changed = [n for n, (a, b) in enumerate(zip(state, initial, strict=True))
                   if not np.array_equal(a, b, equal_nan=True)]
        return "state changed", (f"after KeyboardInterrupt, variables {changed} (v, w, u) "
                                 "hold neither their values before the call nor after it")
    if run.sent:
        return "lost", "the signal was sent, and no KeyboardInterrupt came"
    if reference is None:
        return "wrong result", "an endless loop returned"
    if run.result is None or not _same([run.result, *state], reference):
        return "wrong result", "the result or the variables differ from the reference's"
    return "finished", ""


def _setup() -> None:
    """In every child: this process compiles alone (no compile server to start), and
    SIGINT raises `KeyboardInterrupt` as in a terminal, even where the campaign was started
    in the background (a shell starts background jobs with SIGINT ignored, which every
    program, stageflow's included, then leaves ignored)."""
    sf.config.parallel_compile = False
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _run_indexed(item: tuple[int, int]) -> tuple[str, str]:
    return run_case(Case.draw(*item))


# -- the campaign ---------------------------------------------------------------------------

@dataclass
class Tally:
    """Outcomes per row (kind, endless or finite), and the first few bad cases."""

    counts: dict[str, Counter] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def add(self, case: Case, outcome: str, detail: str) -> None:
        self.counts.setdefault(case.row, Counter())[outcome] += 1
        if outcome in BAD and len(self.examples) < 20:
            self.examples.append(f"{outcome}: {case}\n  {detail}")

    def total(self, outcome: str) -> int:
        return sum(c[outcome] for c in self.counts.values())


def run_campaign(count: int, campaign_seed: int, *, batch: int = 20,
                 timeout: float = TIMEOUT,
                 worker: Callable[[tuple[int, int]], tuple[str, str]] = _run_indexed,
                 progress: Callable[[int], None] | None = None) -> Tally:
    """`count` cases drawn from `campaign_seed`, run in child processes by `worker` (a
    module-level function of (seed, index), for the ``spawn``ed children), tallied."""
    items = [(campaign_seed, i) for i in range(count)]
    results = run_isolated(worker, items, batch=batch, timeout=timeout, setup=_setup,
                           progress=progress)
    tally = Tally()
    for item, result in zip(items, results, strict=True):
        if isinstance(result, Died):
            result = ("crash", f"{result.how}{'' if result.alone else ' (after others)'}")
        elif isinstance(result, Hung):
            result = ("hang", f"no result in {result.seconds:.0f} s")
        tally.add(Case.draw(*item), *result)
    return tally


def print_table(tally: Tally) -> None:
    short = {"interrupted": "interr", "finished": "finish", "state changed": "state",
             "wrong result": "wrong"}
    print_counts("kind, loop", ROWS, tally.counts, OUTCOMES, short, 18)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stageflow.testing.interrupts",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100)
    add_seed(parser)
    args = parser.parse_args(argv)
    campaign_seed = seed_of(args)
    start = time.perf_counter()
    tally = run_campaign(args.count, campaign_seed, progress=report_progress("cases"))
    print(f"Ctrl-C against compiled loops, seed {campaign_seed}, {args.count} cases, "
          f"{time.perf_counter() - start:.0f} s")
    print_table(tally)
    for text in tally.examples:
        print(f"\n{text}")
    return 0 if sum(tally.total(o) for o in BAD) == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
