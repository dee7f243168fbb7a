"""What the campaigns' command lines share: the summary table, the seed (a fresh one unless
given, so that a campaign explores cases no earlier run drew, and printed, so that one can
be replayed) and progress reports on stderr (stdout keeps only the summary table)."""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any


def add_seed(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=None,
                        help="the campaign's seed (default: a fresh one, printed)")


def seed_of(args: argparse.Namespace) -> int:
    """The seed given, else a fresh one."""
    return args.seed if args.seed is not None else random.SystemRandom().getrandbits(63)


def progress(unit: str, every: int = 1) -> Callable[[int], None]:
    """A report of how many `unit` are done and the seconds since, every `every` of them."""
    start = time.perf_counter()

    def report(done: int) -> None:
        if done % every == 0:
            print(f"  {done} {unit}, {time.perf_counter() - start:.0f} s", file=sys.stderr,
                  flush=True)

    return report


def print_counts(heading: str, rows: Iterable[str], counts: Mapping[str, Mapping[str, int]],
                 outcomes: Sequence[str], short: Mapping[str, str], width: int,
                 column: int = 8) -> None:
    """The summary table: a row per kind of case drawn (`rows`, those with counts), a
    column per outcome (`short` names), and the totals."""
    print(f"  {heading:{width}}" + "".join(f"{short.get(o, o):>{column}}" for o in outcomes))
    for row in rows:
        if row in counts:
            print(f"  {row:{width}}" + "".join(f"{counts[row][o]:{column}d}" for o in outcomes))
    print(f"  {'total':{width}}" + "".join(
        f"{sum(c[o] for c in counts.values()):{column}d}" for o in outcomes))


def read_counts(lines: Sequence[str], outcomes: int) -> dict[str, list[int]]:
    """The table `print_counts` printed, from its heading line to its totals, read back: a
    list of `outcomes` counts per row name ("total" included), for a test of the command."""
    rows: dict[str, list[int]] = {}
    for line in lines[1:]:
        words = line.split()
        rows[" ".join(words[:-outcomes])] = [int(n) for n in words[-outcomes:]]
        if words[0] == "total":
            break
    return rows


# A field's place in a JSON value: its keys and indices from the top.
JsonPath = tuple[str | int, ...]


def json_paths(value: Any, prefix: JsonPath = ()) -> list[JsonPath]:
    """Every field's path in a JSON value (not the value itself): what a tampering picks
    from."""
    children: list[tuple[str | int, Any]] = []
    if isinstance(value, dict):
        children = list(value.items())
    elif isinstance(value, list):
        children = list(enumerate(value))
    found = []
    for key, child in children:
        found.append((*prefix, key))
        found.extend(json_paths(child, (*prefix, key)))
    return found


def json_parent(value: Any, path: JsonPath) -> Any:
    """The dict or list holding the field at `path`."""
    for key in path[:-1]:
        value = value[key]
    return value
