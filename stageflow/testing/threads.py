"""Threads against shared state: random scenarios whose final values are known exactly.

Compiled code runs without the GIL, so two threads calling functions that update the same
variables would lose updates unless each call holds the variables it assigns
(`stageflow.runtime.locks`). A scenario starts N threads (2-16) at once on one of the
`KINDS` below: `assign_add` and `assign` on shared scalars and 2^21-element variables, SGD
steps on a shared model, two functions sharing variables, many threads calling a fresh
`sf.function` for the first time (one that creates its variable then, one holding a
`numpy_function`), retraces with different shapes from different threads, eager updates
beside staged ones, a gradient tape per thread, logical devices. Increments are integers or
exactly representable floats, so the final values are known exactly and any lost or
doubled update shows. A watchdog bounds each scenario: threads still running
after it are counted as a deadlock (they are left behind as daemon threads).

    python -m stageflow.testing.threads --count 200 [--seed N]

The test suite runs a slice (``tests/testing/test_threads.py``).
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import stageflow as sf
from stageflow.testing.campaign import add_seed, seed_of
from stageflow.testing.campaign import progress as report_progress

LARGE = 1 << 21  # a variable whose kernels split over the cores
LOGICAL_CPUS = 4
OUTCOMES = ["exact", "lost update", "error", "deadlock"]
SWITCH_INTERVAL = 1e-5  # seconds between the GIL's hand-overs while a scenario runs


@dataclass(frozen=True)
class Scenario:
    """One random scenario: `threads` threads making `calls` calls each of `kind`."""

    kind: str
    threads: int
    calls: int
    seed: int

    def __repr__(self) -> str:
        return f"{self.kind}(threads={self.threads}, calls={self.calls}, seed={self.seed})"


# What a scenario runs: `work(thread_index)` on every thread at once, then `check()`: None
# when every final value is exact, else what differs.
Work = tuple[Callable[[int], None], Callable[[], str | None]]


def _differs(name: str, got: np.ndarray, want: np.ndarray) -> str | None:
    if got.shape == want.shape and np.array_equal(got, want):
        return None
    flat_got, flat_want = np.ravel(got), np.ravel(np.broadcast_to(want, got.shape))
    wrong = np.flatnonzero(flat_got != flat_want)
    return (f"{name}: {wrong.size} of {flat_got.size} elements differ, e.g. "
            f"{flat_got[wrong[0]]} instead of {flat_want[wrong[0]]}")


def assign_add(s: Scenario, rng: random.Random) -> Work:
    """`v.assign_add(delta)` from every thread on one scalar or 2^21-element variable."""
    size = rng.choice([(), (3,), (LARGE,)])
    dtype = rng.choice([np.float32, np.float64, np.int32, np.int64])
    delta = rng.choice([1, 2, 3]) if np.dtype(dtype).kind == "i" else rng.choice([0.5, 1.0, 2.0])
    v = sf.Variable(np.zeros(size, dtype))
    step = sf.constant(np.full(size, delta, dtype))

    @sf.function
    def increment() -> None:
        v.assign_add(step)

    return (lambda _: [increment() for _ in range(s.calls)],
            lambda: _differs("v", v.numpy(), np.full(size, delta * s.threads * s.calls, dtype)))


def assign(s: Scenario, rng: random.Random) -> Work:
    """Every thread assigns its own value to one variable and counts its calls in another:
    the final value is one thread's whole value (never a mix), the count exact."""
    size = rng.choice([(4,), (LARGE,)])
    v, count = sf.Variable(np.zeros(size, np.float32)), sf.Variable(0, dtype=sf.int64)

    @sf.function
    def put(x: sf.Tensor) -> None:
        v.assign(x)
        count.assign_add(1)

    def work(index: int) -> None:
        x = sf.constant(np.full(size, index + 1, np.float32))
        for _ in range(s.calls):
            put(x)

    def check() -> str | None:
        value = v.numpy()
        if not (value == value.flat[0]).all() or not 1 <= value.flat[0] <= s.threads:
            return f"v is a mix of values: {np.unique(value)[:8]}"
        return _differs("count", count.numpy(), np.int64(s.threads * s.calls))

    return work, check


def sgd(s: Scenario, rng: random.Random) -> Work:
    """SGD steps on a shared model; the loss is linear in the weights, so every step
    subtracts the same gradient times a power-of-two learning rate: exact."""
    inner = rng.choice([1, 8, 64])
    w = sf.Variable(np.zeros((inner, 4), np.float32))
    x = sf.constant(np.ones((2, inner), np.float32))
    opt = sf.optimizers.SGD(2.0 ** -rng.choice([4, 8]))

    @sf.function
    def step() -> None:
        with sf.GradientTape() as tape:
            loss = sf.reduce_sum(sf.matmul(x, w))
        opt.apply_gradients([(tape.gradient(loss, w), w)])

    def check() -> str | None:
        steps = s.threads * s.calls
        want = np.full((inner, 4), -opt.learning_rate * 2 * steps, np.float32)
        return (_differs("iterations", opt.iterations.numpy(), np.int64(steps))
                or _differs("w", w.numpy(), want))

    return lambda _: [step() for _ in range(s.calls)], check


def two_functions(s: Scenario, rng: random.Random) -> Work:
    """Two functions assigning the same two variables in opposite orders: no lost update,
    no deadlock."""
    a, b = sf.Variable(0.0), sf.Variable(0.0)

    @sf.function
    def forwards() -> None:
        a.assign_add(1.0)
        b.assign_add(2.0)

    @sf.function
    def backwards() -> None:
        b.assign_add(1.0)
        a.assign_add(2.0)

    functions = (forwards, backwards)
    calls = [0, 0]

    def work(index: int) -> None:
        for _ in range(s.calls):
            functions[index % 2]()

    def check() -> str | None:
        calls[0], calls[1] = (s.threads + 1) // 2 * s.calls, s.threads // 2 * s.calls
        return (_differs("a", a.numpy(), np.float32(calls[0] + 2 * calls[1]))
                or _differs("b", b.numpy(), np.float32(2 * calls[0] + calls[1])))

    return work, check


def first_call(s: Scenario, rng: random.Random) -> Work:
    """Every thread calls a fresh `sf.function` at the same moment: each result right, and
    one concrete function in its cache afterwards however many traces raced."""
    v = sf.Variable(0.0)
    x = sf.constant(np.arange(6, dtype=np.float32))
    wrong: list[str] = []

    @sf.function
    def fresh(y: sf.Tensor) -> sf.Tensor:
        v.assign_add(1.0)
        return y * 2.0 + 1.0

    def work(_: int) -> None:
        for _ in range(s.calls):
            got = fresh(x).numpy()
            if not np.array_equal(got, np.arange(6) * 2.0 + 1.0):
                wrong.append(f"result {got}")

    def check() -> str | None:
        concrete = len({id(c) for c in fresh._cache.values()})
        if concrete != 1:
            return f"{concrete} concrete functions cached for one signature"
        return wrong[0] if wrong else _differs("v", v.numpy(),
                                               np.float32(s.threads * s.calls))

    return work, check


def first_call_creating(s: Scenario, rng: random.Random) -> Work:
    """Every thread makes the first call of a method that creates its variable on the first
    call (the paper's state-creation rule): one variable is created, every call adds to it,
    and no call is told it created a variable on a call other than the first."""
    start = float(rng.randint(1, 9))

    class Counter(sf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.total: sf.Variable | None = None

        @sf.function
        def __call__(self, y: sf.Tensor) -> sf.Tensor:
            if self.total is None:
                self.total = sf.Variable(start)
            self.total.assign_add(1.0)
            return y + self.total

    counter = Counter()
    x = sf.constant(np.zeros(3, np.float32))

    def work(_: int) -> None:
        for _ in range(s.calls):
            counter(x)

    def check() -> str | None:
        if counter.total is None:
            return "no variable was created"
        return _differs("total", counter.total.numpy(),
                        np.float32(start + s.threads * s.calls))

    return work, check


def first_call_callback(s: Scenario, rng: random.Random) -> Work:
    """Every thread makes the first call of a fresh function holding a `numpy_function`:
    each compiles its program at once, and every call must run this function's callback
    (programs once shared a symbol bound to an entry another thread's program freed)."""
    tag = rng.randint(1, 1000)
    wrong: list[str] = []

    def adding(tag: int) -> sf.Function:
        def constant(k: np.ndarray) -> np.ndarray:
            return np.int64(tag)

        return sf.function(lambda x: x + sf.numpy_function(constant, [x],
                                                           sf.TensorSpec((), sf.int64)))

    fresh = adding(tag)

    def work(index: int) -> None:
        for call in range(s.calls):
            got = int(fresh(sf.constant(np.int64(index + call))))
            if got != index + call + tag:
                wrong.append(f"thread {index}: {got} for {index + call} + {tag}")

    def check() -> str | None:
        # The programs that lost the race are gone: entries made since may take their
        # memory, where a program kept could still be calling.
        gc.collect()
        others = [adding(-1) for _ in range(3)]
        for other in others:
            other(sf.constant(np.int64(0)))
        got = int(fresh(sf.constant(np.int64(7))))
        if got != 7 + tag:
            wrong.append(f"after the race: {got} for 7 + {tag}")
        return wrong[0] if wrong else None

    return work, check


def retraces(s: Scenario, rng: random.Random) -> Work:
    """Each thread calls one function with a shape of its own (a retrace per shape, racing
    with the others' calls): every result right, every update counted."""
    v = sf.Variable(0.0)
    wrong: list[str] = []

    @sf.function
    def scaled(y: sf.Tensor) -> sf.Tensor:
        v.assign_add(sf.reduce_sum(sf.ones_like(y)))
        return y * 3.0 - 1.0

    def work(index: int) -> None:
        y = np.arange(index % 5 + 1, dtype=np.float32)
        for _ in range(s.calls):
            got = scaled(sf.constant(y)).numpy()
            if not np.array_equal(got, y * 3.0 - 1.0):
                wrong.append(f"thread {index}: {got}")

    def check() -> str | None:
        total = sum(index % 5 + 1 for index in range(s.threads)) * s.calls
        return wrong[0] if wrong else _differs("v", v.numpy(), np.float32(total))

    return work, check


def eager_and_staged(s: Scenario, rng: random.Random) -> Work:
    """Half the threads update a variable eagerly, half through a compiled function."""
    size = rng.choice([(), (LARGE,)])
    v = sf.Variable(np.zeros(size, np.float32))
    one = sf.constant(np.ones(size, np.float32))

    @sf.function
    def staged() -> None:
        v.assign_add(one)

    def work(index: int) -> None:
        for _ in range(s.calls):
            if index % 2:
                staged()
            else:
                v.assign_add(one)

    return work, lambda: _differs("v", v.numpy(), np.full(size, s.threads * s.calls,
                                                          np.float32))


def eager_only(s: Scenario, rng: random.Random) -> Work:
    """Every thread updates one variable eagerly (`assign_add`, `assign_sub`)."""
    v = sf.Variable(np.zeros(rng.choice([(), (LARGE,)]), np.float32))

    def work(index: int) -> None:
        for _ in range(s.calls):
            v.assign_add(3.0)
            v.assign_sub(1.0)

    return work, lambda: _differs("v", v.numpy(), np.full(v.shape, 2.0 * s.threads * s.calls,
                                                          np.float32))


def interpreted(s: Scenario, rng: random.Random) -> Work:
    """`assign_add` through the interpreter (``jit=False``) from every thread."""
    v = sf.Variable(np.zeros(rng.choice([(), (5,), (LARGE,)]), np.float32))

    @sf.function(jit=False)
    def increment() -> None:
        v.assign_add(1.0)

    return (lambda _: [increment() for _ in range(s.calls)],
            lambda: _differs("v", v.numpy(), np.full(v.shape, s.threads * s.calls,
                                                     np.float32)))


def variable_arguments(s: Scenario, rng: random.Random) -> Work:
    """One function given different variables as arguments by different threads."""
    variables = [sf.Variable(0.0) for _ in range(rng.choice([2, 3]))]

    @sf.function
    def increment(w: sf.Variable) -> None:
        w.assign_add(1.0)

    def work(index: int) -> None:
        for call in range(s.calls):
            increment(variables[(index + call) % len(variables)])

    def check() -> str | None:
        total = sum(float(w.numpy()) for w in variables)
        return None if total == s.threads * s.calls else (
            f"{total:.0f} updates counted of {s.threads * s.calls}")

    return work, check


def tapes(s: Scenario, rng: random.Random) -> Work:
    """A gradient tape per thread, eager and through a staged function: exact gradients
    of a polynomial at each thread's own point."""
    c = sf.Variable(3.0)

    @sf.function
    def cubic(x: sf.Tensor) -> sf.Tensor:
        return c * x * x * x + x * x

    wrong: list[str] = []

    def work(index: int) -> None:
        x = sf.constant(float(index % 4 + 1))
        want = 9.0 * float(x.numpy()) ** 2 + 2.0 * float(x.numpy())
        for call in range(s.calls):
            with sf.GradientTape() as tape:
                tape.watch(x)
                y = cubic(x) if call % 2 else c * x * x * x + x * x
            got = float(tape.gradient(y, x).numpy())
            if got != want:
                wrong.append(f"thread {index}: gradient {got} instead of {want}")

    return work, lambda: wrong[0] if wrong else None


def devices(s: Scenario, rng: random.Random) -> Work:
    """Each thread places its calls on a logical CPU of its own (their worker threads run
    at once) and updates a variable living on one of them."""
    home = f"/cpu:{rng.randrange(LOGICAL_CPUS)}"
    with sf.device(home):
        v = sf.Variable(np.zeros(4, np.float32))
    wrong: list[str] = []

    @sf.function
    def step(x: sf.Tensor) -> sf.Tensor:
        v.assign_add(sf.ones((4,)))
        return x * 2.0

    def work(index: int) -> None:
        with sf.device(f"/cpu:{index % LOGICAL_CPUS}"):
            x = sf.constant(np.full(4, index, np.float32))
            for _ in range(s.calls):
                got = step(x).numpy()
                if not np.array_equal(got, np.full(4, 2.0 * index)):
                    wrong.append(f"thread {index}: {got}")

    return work, lambda: wrong[0] if wrong else _differs(
        "v", v.numpy(), np.full(4, s.threads * s.calls, np.float32))


KINDS: dict[str, Callable[[Scenario, random.Random], Work]] = {
    "assign_add": assign_add,
    "assign": assign,
    "sgd": sgd,
    "two functions": two_functions,
    "first call": first_call,
    "first call creating": first_call_creating,
    "first call callback": first_call_callback,
    "retraces": retraces,
    "eager and staged": eager_and_staged,
    "eager only": eager_only,
    "interpreted": interpreted,
    "variable arguments": variable_arguments,
    "tapes": tapes,
    "devices": devices,
}


@dataclass
class Tally:
    """What the scenarios of one kind did."""

    scenarios: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    seconds: float = 0.0
    first: list[str] = field(default_factory=list)


def run_scenario(scenario: Scenario, build: Callable[[Scenario, random.Random], Work],
                 timeout: float) -> tuple[str, str]:
    """Run one scenario: its outcome (one of `OUTCOMES`) and what went wrong, if anything."""
    try:
        work, check = build(scenario, random.Random(scenario.seed))
    except Exception as error:  # noqa: BLE001 - an outcome of the campaign
        return "error", f"setup: {type(error).__name__}: {error}"
    start = threading.Barrier(scenario.threads)
    errors: list[str] = []

    def run(index: int) -> None:
        try:
            start.wait(timeout)
            work(index)
        except Exception as error:  # noqa: BLE001 - an outcome of the campaign
            errors.append(f"thread {index}: {type(error).__name__}: {str(error)[:300]}")

    threads = [threading.Thread(target=run, args=(i,), daemon=True)
               for i in range(scenario.threads)]
    interval = sys.getswitchinterval()
    # Python hands the GIL over at its default switch interval, far longer than a race
    # between two Python steps (the first trace setting up before it creates a variable):
    # such a race would almost never show.
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0.0))
    finally:
        sys.setswitchinterval(interval)
    stuck = sum(thread.is_alive() for thread in threads)
    if stuck:
        return "deadlock", f"{stuck} of {scenario.threads} threads still running after {timeout} s"
    if errors:
        return "error", errors[0]
    try:
        wrong = check()
    except Exception as error:  # noqa: BLE001 - an outcome of the campaign
        return "error", f"check: {type(error).__name__}: {error}"
    return ("exact", "") if wrong is None else ("lost update", wrong)


def scenarios(count: int, campaign_seed: int, kinds: list[str]) -> list[Scenario]:
    """`count` scenarios drawn from `campaign_seed`: kinds in turn (so a small count still
    covers them), random thread and call counts."""
    rng = random.Random(campaign_seed)
    return [Scenario(kinds[i % len(kinds)], rng.randint(2, 16), rng.randint(5, 40),
                     rng.getrandbits(32)) for i in range(count)]


def run_campaign(count: int, campaign_seed: int, kinds: list[str] | None = None,
                 timeout: float = 60.0, builders: dict[str, Callable] | None = None,
                 progress: Callable[[int], None] | None = None) -> dict[str, Tally]:
    """`count` scenarios over `kinds` (default: all of `KINDS`; `builders` adds or replaces
    kinds); per kind, how many ended exact, lost an update, raised or hung."""
    builders = {**KINDS, **(builders or {})}
    kinds = kinds or list(KINDS)
    tallies = {kind: Tally() for kind in kinds}
    for done, scenario in enumerate(scenarios(count, campaign_seed, kinds), 1):
        tally = tallies[scenario.kind]
        began = time.perf_counter()
        outcome, detail = run_scenario(scenario, builders[scenario.kind], timeout)
        tally.seconds += time.perf_counter() - began
        tally.scenarios += 1
        tally.outcomes[outcome] += 1
        if outcome != "exact" and len(tally.first) < 3:
            tally.first.append(f"{scenario!r}: {outcome}: {detail}")
        if progress is not None:
            progress(done)
    return tallies


def print_table(title: str, tallies: dict[str, Tally]) -> None:
    print(title)
    print(f"  {'kind':20} {'scenarios':>9} " + " ".join(f"{o:>11}" for o in OUTCOMES)
          + f" {'seconds':>8}")
    for kind, tally in tallies.items():
        print(f"  {kind:20} {tally.scenarios:9d} "
              + " ".join(f"{tally.outcomes[o]:11d}" for o in OUTCOMES)
              + f" {tally.seconds:8.1f}")
    for kind, tally in tallies.items():
        for text in tally.first:
            print(f"\n{kind}: {text}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stageflow.testing.threads",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=120)
    add_seed(parser)
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"comma-separated, of: {', '.join(KINDS)}")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a scenario may take before it counts as a deadlock")
    args = parser.parse_args(argv)
    campaign_seed = seed_of(args)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"unknown kinds {unknown} (have: {', '.join(KINDS)})")
    if sf.config.logical_device_count("CPU") < LOGICAL_CPUS:
        sf.config.set_logical_device_count("CPU", LOGICAL_CPUS)
    start = time.perf_counter()

    progress = report_progress("scenarios", 20)

    tallies = run_campaign(args.count, campaign_seed, kinds, args.timeout, progress=progress)
    print_table(f"threads against shared state, seed {campaign_seed}, "
                f"{time.perf_counter() - start:.0f} s", tallies)
    return 0 if all(t.outcomes["exact"] == t.scenarios for t in tallies.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
