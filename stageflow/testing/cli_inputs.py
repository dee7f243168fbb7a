"""Hostile inputs to the ``stageflow`` command and the IR parser, and the campaign that
feeds them.

A case is one input drawn from a family (`FAMILIES`): real IR (printed from a few staged
functions at their traced and optimised stages) cut short at a random length, with bytes
flipped, replaced by garbage, with numbers or dims made huge (beyond int64 too), splat
constants of billions of elements, malformed shapes, attributes of the wrong type, function
names with newlines, quotes or other scripts, bad pass pipelines; command lines with
missing files, directories for files, unwritable outputs, malformed ``--arg`` specs and
targets; and hostile function names (quotes, spaces, ``<``, ``&``, newlines, event-handler
attributes) rendered into the compile report. IR cases run in-process, as ``stageflow opt``
does (parse and verify, run the pipeline, print: `stageflow.ir.text`, `stageflow.passes`),
and so do report cases; command-line cases, and a sample of the IR cases too, run the
real command, ``python -m stageflow.cli``, in a subprocess. Every case runs in a child
process whose memory is capped at 2 GB (`stageflow.testing.isolated`). Outcomes:

- **ok**: accepted (exit status 0, output written);
- **clear error**: refused with the documented status (1, or argparse's 2 for a malformed
  command line) and one ``stageflow CMD: error: ...`` line on stderr, or `IRError`
  in-process, naming where: the file with ``:LINE:COL``, or the path, ``--arg`` text or
  pipeline at fault, and not in the words of Python's internals (`_INTERNAL_WORDS`);
- **unclear error**: refused, but not so;
- **internal error**: a traceback, an ``internal error`` line, or an exception other than
  `IRError` / `PassFailure` in-process;
- **injection**: a report whose page has a tag or attribute the page of a plain name lacks
  (the name left its quotes or its text);
- **memory**: a ``MemoryError`` (the input asked for more than the cap);
- **crash** (the process died of a signal) and **hang** (no result in the timeout).

The test suite runs a slice (``tests/testing/test_cli_inputs.py``); a campaign runs many,
with a seed never used before::

    python -m stageflow.testing.cli_inputs --count 2000 [--seed N]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import numpy as np

import stageflow as sf
from stageflow.ir.text import IRError, module_to_text, parse_module
from stageflow.passes import PassFailure, PassSpecError, Pipeline, available_passes
from stageflow.testing.campaign import add_seed, print_counts, seed_of
from stageflow.testing.campaign import progress as report_progress
from stageflow.testing.isolated import MEMORY_LIMIT, Died, Hung, run_isolated

OUTCOMES = ["ok", "clear error", "unclear error", "internal error", "injection", "memory",
            "crash", "hang"]
_INTERNAL_WORDS = re.compile(
    r"Traceback|internal error|object has no attribute|index out of range|NoneType"
    r"|not subscriptable|unhashable|positional argument|KeyError|AttributeError|IndexError"
    r"|AssertionError|UnboundLocalError|RecursionError")
_POSITION = re.compile(r":\d+:\d+")
SUBPROCESS_SAMPLE = 0.05
COMMAND_TIMEOUT = 60.0


# -- the real programs ----------------------------------------------------------------------

def _programs() -> list[str]:
    """IR text of a few staged functions (elementwise, matmul and reductions, control flow,
    a variable), traced and optimised."""
    def dense(x, w):
        return sf.nn.relu(sf.matmul(x, w, transpose_b=True)) * 2.0

    def norm(x):
        return x - sf.reduce_mean(x, axis=-1, keepdims=True) / sf.reduce_max(x)

    def loop(x):
        return sf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2.0), (0, x))[1]

    state = sf.Variable(np.ones((2,), np.float32))

    def update(x):
        state.assign_add(x)
        return sf.concat([state.read_value(), x], 0)

    cases = [(dense, [sf.TensorSpec([None, 4]), sf.TensorSpec([3, 4])]),
             (norm, [sf.TensorSpec([2, None], sf.float64)]),
             (loop, [sf.TensorSpec([3])]),
             (update, [sf.TensorSpec([2])])]
    texts = []
    for function, specs in cases:
        concrete = sf.function(function).get_concrete_function(*specs)
        texts += [concrete.ir("traced"), concrete.ir("optimized")]
    return texts


MODEL = """\
import stageflow as sf


def mlp(x, w):
    return sf.nn.relu(sf.matmul(x, w))
"""


# -- the hostile inputs ---------------------------------------------------------------------

HUGE_NUMBERS = ["9223372036854775807", "9223372036854775808", "18446744073709551616",
                "1" + "0" * 40, "-1", "0", "1e309", "-0", "4294967296"]
BAD_DIMS = ["15000x15000", "4294967296x4294967296", "9223372036854775807",
            "99999999999999999999999", "1xx4", "?x-1", "0x0x0x0x0x0x0x0x0x0", "x"]
BAD_ATTRIBUTES = ["7", "\"no\"", "[1, 2]", "dense<1.0> : tensor<2xf32>", "unit", "-1",
                  "9223372036854775808", "{a = 1}", "@sym"]
ODD_NAMES = ['@"a\\nb"', '@"q\\"uote"', '@"ünïcødé"', '@""', '@"a b"', "@\u00e9t\u00e9",
             '@"\\00"', "@" + "n" * 5000]
BAD_SPECS = ["f32[1,,4]", "f32[", "f32[-1]", "f32[99999999999999999999]", "f33[2]", "[2,3]",
             "f32[2,3", "f32[4294967296,4294967296]", "f32[?,?,?,?,?,?,?,?,?]", "",
             "f32[2]\n", "bool[2,3]"]
BAD_PIPELINES = ["nope", "fold{", "fold{max-elements=abc}", "fold{max-elements=-1}",
                 "fold{max-elements=99999999999999999999999}", ",,", "cse,,prune",
                 "fold{unknown=1}", "fuse{", "}", "prune{x}"]

# What hostile function names are made of: markup, quotes, whitespace that ends an unquoted
# attribute, event handlers, entities, and characters HTML treats specially.
NAME_PIECES = ['"', "'", " ", "<", ">", "&", "\n", "\t", "=", "/", "`", "onmouseover=alert(1)",
               "<script>", "</h2>", "&amp;", "&#34;", "\u2028", "\u00e9", "x", "f"]
IR_FAMILIES = ["prefix", "byte flips", "garbage", "huge numbers", "huge splat", "bad dims",
               "wrong attribute", "odd names", "pipelines", "report names"]
COMMAND_FAMILIES = ["missing file", "directory for a file", "unwritable output", "bad --arg",
                    "bad target", "bad options"]
FAMILIES = IR_FAMILIES + COMMAND_FAMILIES


@dataclass(frozen=True)
class Case:
    """One hostile input: for IR families the text (and the pass pipeline) `opt` gets; for
    command families, the command line (``{dir}`` stands for the case's folder). `names`
    are what a clear error names (besides a ``:LINE:COL`` position)."""

    family: str
    text: bytes = b""
    pipeline: str = ""
    argv: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    subprocess: bool = False

    def __str__(self) -> str:
        shown = self.text[:160] if self.text else " ".join(self.argv)
        return f"{self.family}: {shown!r}" + (f" -p {self.pipeline!r}" if self.pipeline else "")


def _swap(text: str, pattern: str, choices: list[str], rng: random.Random) -> str:
    """`text` with one random match of `pattern` replaced by one of `choices`."""
    found = list(re.finditer(pattern, text))
    if not found:
        return text
    match = rng.choice(found)
    return text[:match.start()] + rng.choice(choices) + text[match.end():]


def _ir_case(family: str, program: str, rng: random.Random) -> Case:
    data = program.encode()
    pipeline = rng.choice(["", "", "prune,fold,cse", ",".join(sorted(available_passes()))])
    if family == "prefix":
        data = data[:rng.randrange(len(data))]
    elif family == "byte flips":
        flipped = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            flipped[rng.randrange(len(flipped))] = rng.randrange(256)
        data = bytes(flipped)
    elif family == "garbage":
        tokens = re.findall(r"\S+", program)
        data = (bytes(rng.randrange(256) for _ in range(rng.randint(1, 400)))
                if rng.random() < 0.3 else
                " ".join(rng.choice(tokens) for _ in range(rng.randint(1, 60))).encode())
    elif family == "huge numbers":
        data = _swap(program, r"(?<![%\w])\d+(\.\d+)?(e[+-]?\d+)?", HUGE_NUMBERS, rng).encode()
    elif family == "huge splat":
        shape = rng.choice(["15000x15000", "100000x100000x100", "4294967297", "1x?"])
        data = (f"func.func @big() -> tensor<{shape}xf32> {{\n  %0 = sf.constant dense<1.0> : "
                f"tensor<{shape}xf32>\n  func.return %0 : tensor<{shape}xf32>\n}}\n").encode()
    elif family == "bad dims":
        data = _swap(program, r"(?<=tensor<)[0-9?x]+(?=x[fiub])", BAD_DIMS, rng).encode()
    elif family == "wrong attribute":
        data = _swap(program, r"(?<= = )(true|false|-?\d+|\[[^\]]*\])(?=[,}])",
                     BAD_ATTRIBUTES, rng).encode()
    elif family == "odd names":
        data = _swap(program, r"@\w+", ODD_NAMES, rng).encode()
    elif family == "pipelines":
        pipeline = rng.choice(BAD_PIPELINES)
    elif family == "report names":
        data = "".join(rng.choice(NAME_PIECES) for _ in range(rng.randint(1, 8))).encode()
        return Case(family, data)
    names = ("<input>", pipeline, *re.findall(r"[\w-]+", pipeline))
    return Case(family, data, pipeline, names=names, subprocess=rng.random() < SUBPROCESS_SAMPLE)


def _command_case(family: str, rng: random.Random) -> Case:
    specs = ["--arg", "f32[2,3]", "--arg", "f32[3,4]"]
    model = "{dir}/model.py:mlp"
    if family == "missing file":
        command = rng.choice([["opt", "{dir}/missing.mlir"],
                              ["dump", "{dir}/missing.py:mlp", *specs]])
        return Case(family, argv=tuple(command), names=("missing",))
    if family == "directory for a file":
        command = rng.choice([["opt", "{dir}"], ["dump", "{dir}:mlp", *specs],
                              ["opt", "{dir}/input.mlir", "-o", "{dir}"],
                              ["dump", model, *specs, "-o", "{dir}"]])
        return Case(family, argv=tuple(command), names=("{dir}",))
    if family == "unwritable output":
        out = rng.choice(["/proc/stageflow/out", "{dir}/model.py/out", "{dir}/no/such/out"])
        if rng.random() < 0.2:  # a device that takes no bytes
            out = "/dev/full"
            command = rng.choice([["opt", "{dir}/input.mlir", "-o", out],
                                  ["dump", model, *specs, "-o", out]])
            return Case(family, argv=tuple(command), names=(out,))
        command = rng.choice([["opt", "{dir}/input.mlir", "-o", out],
                              ["dump", model, *specs, "-o", out],
                              ["graph", model, *specs, "-o", out + ".dot"],
                              ["compile", model, *specs, "-o", out + ".so"],
                              ["report", model, *specs, "-o", out + ".html"]])
        return Case(family, argv=tuple(command), names=(out,))
    if family == "bad --arg":
        spec = rng.choice(BAD_SPECS)
        command = [rng.choice(["dump", "graph", "report"]), model, "--arg", spec,
                   "--arg", "f32[3,4]"]
        if command[0] != "dump":
            command += ["-o", "{dir}/out." + {"graph": "dot", "report": "html"}[command[0]]]
        return Case(family, argv=tuple(command), names=(spec, "--arg"))
    if family == "bad target":
        target = rng.choice(["{dir}/model.py", "{dir}/model.py:", "{dir}/model.py:nope",
                             "{dir}/model.py:mlp.x", ":mlp", "{dir}/model.py:MODEL",
                             "{dir}/input.mlir:mlp", "{dir}/model.py:sf"])
        return Case(family, argv=("dump", target, *specs), names=(target.split(":")[0],
                                                                 target, "target"))
    option = rng.choice([["devices", "--logical-cpus", rng.choice(["0", "-1", "x", "100000"])],
                         ["dump", model, *specs, "--stage", rng.choice(["nope", "", "asm "])],
                         ["dump", model, *specs, "--device", rng.choice(["gpu:9", "x", ""])],
                         ["compile", model, *specs, "-o", "{dir}/out.txt"],
                         ["compile", model, *specs, "-o", "{dir}/out.ptx", "--arch", "sm_1"],
                         ["opt", "{dir}/input.mlir", "--passes", rng.choice(BAD_PIPELINES)]])
    words = tuple(w for text in option[1:] for w in re.findall(r"\w[\w-]*", text))
    return Case(family, argv=tuple(option), names=(*option[1:], *words, "devices"))


def draw_case(campaign_seed: int, index: int, programs: list[str]) -> Case:
    rng = random.Random(f"{campaign_seed}:{index}")
    family = rng.choice(FAMILIES)
    if family in IR_FAMILIES:
        return _ir_case(family, rng.choice(programs), rng)
    return _command_case(family, rng)


# -- running and judging one case -----------------------------------------------------------

def judge_command(status: int | None, stderr: str, names: tuple[str, ...]) -> tuple[str, str]:
    """The outcome of one run of the command, from its exit status and stderr."""
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    if status is not None and status < 0:
        return "crash", f"signal {-status}: {last}"
    if "MemoryError" in stderr:
        return "memory", last
    if "Traceback" in stderr or "internal error" in stderr:
        return "internal error", " ".join(stderr.split())[-400:]
    if status == 0:
        return "ok", ""
    return judge_message(last, names, documented=status in (1, 2)
                         and re.match(r"(stageflow|usage: stageflow)[ \w-]*: error: ", last)
                         is not None)


def judge_message(message: str, names: tuple[str, ...], documented: bool = True
                  ) -> tuple[str, str]:
    """'clear error' if a refusal's message names where and is not in internals' words."""
    if not documented:
        return "unclear error", f"not the documented form: {message[:300]}"
    if _INTERNAL_WORDS.search(message):
        return "unclear error", f"internals' words: {message[:300]}"
    if not (_POSITION.search(message) or any(n and n in message for n in names)):
        return "unclear error", f"names no position, path or argument: {message[:300]}"
    return "clear error", message[:300]


class PageMarkup(HTMLParser):
    """The tags and the attribute names of a page's markup."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.update(name for name, _ in attrs)


def report_of(name: str) -> str:
    """The compile report of a small function named `name`."""
    def function(x: sf.Tensor) -> sf.Tensor:
        return sf.exp(x) * 2.0 + sf.tanh(x)

    function.__name__ = function.__qualname__ = name
    return sf.function(function).get_concrete_function(sf.TensorSpec([3])).report()


def _report_names(name: str) -> tuple[str, str]:
    """Whether the report of a function named `name` has only the markup of a plain
    name's: anything more is the name read as markup."""
    try:
        page, plain = PageMarkup(report_of(name)), PageMarkup(report_of("f"))
    except Exception as error:  # noqa: BLE001 - what the campaign is looking for
        return "internal error", f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"
    extra = (page.tags - plain.tags) | (page.attributes - plain.attributes)
    if extra:
        return "injection", f"the name {name!r} added {sorted(extra)}"
    return "ok", ""


def _in_process(case: Case) -> tuple[str, str]:
    """What ``stageflow opt -p PIPELINE`` does with the text, here; a report's markup
    for the names of the report family."""
    if case.family == "report names":
        return _report_names(case.text.decode())
    try:
        pipeline = Pipeline.parse(case.pipeline)
        module = parse_module(case.text.decode(), "<input>")
        pipeline.run(module)
        module_to_text(module)
    except UnicodeDecodeError:
        return "clear error", "not UTF-8 (the command reads text)"
    except (IRError, PassFailure, PassSpecError) as error:
        return judge_message(str(error), case.names)
    except MemoryError as error:
        return "memory", str(error)[:300]
    except Exception as error:  # noqa: BLE001 - what the campaign is looking for
        return "internal error", f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"
    return "ok", ""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _run_command(case: Case, folder: str) -> tuple[str, str]:
    """The real command in a subprocess, memory capped, killed after `COMMAND_TIMEOUT`."""
    argv = [a.replace("{dir}", folder) for a in case.argv] or ["opt", f"{folder}/input.mlir"] + (
        ["--passes", case.pipeline] if case.pipeline else [])
    names = tuple(n.replace("{dir}", folder) for n in case.names)
    names += (f"{folder}/input.mlir",) if not case.argv else ("model.py:",)  # the user's line
    try:
        result = subprocess.run([sys.executable, "-m", "stageflow.cli", *argv],
                                capture_output=True, text=True, timeout=COMMAND_TIMEOUT,
                                preexec_fn=_limit_memory, cwd=folder,
                                env={**os.environ, "PYTHONPATH": _package_root()})
    except subprocess.TimeoutExpired:
        return "hang", f"no exit in {COMMAND_TIMEOUT:.0f} s"
    return judge_command(result.returncode, result.stderr, names)


def _package_root() -> str:
    return str(Path(sf.__file__).resolve().parent.parent)


WORSE = {outcome: rank for rank, outcome in enumerate(OUTCOMES)}


def run_case(case: Case) -> tuple[str, str]:
    """(outcome, detail) of one case: in-process, through the command, or both (the worse
    of the two outcomes)."""
    results = []
    if not case.argv:
        results.append(_in_process(case))
    if case.argv or case.subprocess:
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "input.mlir").write_bytes(case.text or b"func.func @f() {\n}\n")
            Path(folder, "model.py").write_text(MODEL)
            results.append(_run_command(case, folder))
    return max(results, key=lambda r: WORSE[r[0]])


_PROGRAMS: list[str] = []


def _setup() -> None:
    _PROGRAMS.extend(_programs())


def _run_indexed(item: tuple[int, int]) -> tuple[str, str, str]:
    case = draw_case(*item, _PROGRAMS)
    return (case.family, str(case), *run_case(case))


# -- the campaign ---------------------------------------------------------------------------

@dataclass
class Tally:
    """Outcomes per family, and the first few cases of each bad outcome."""

    counts: dict[str, Counter] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def add(self, family: str, case: str, outcome: str, detail: str) -> None:
        self.counts.setdefault(family, Counter())[outcome] += 1
        if outcome not in ("ok", "clear error") and len(self.examples) < 20:
            self.examples.append(f"{outcome}: {case}\n  {detail}")

    def total(self, outcome: str) -> int:
        return sum(c[outcome] for c in self.counts.values())


def run_campaign(count: int, campaign_seed: int, *, batch: int = 200,
                 progress: Callable[[int], None] | None = None) -> Tally:
    """`count` cases drawn from `campaign_seed`, run in child processes, tallied."""
    items = [(campaign_seed, i) for i in range(count)]
    results = run_isolated(_run_indexed, items, batch=batch, setup=_setup, progress=progress,
                           timeout=3 * COMMAND_TIMEOUT)
    tally = Tally()
    for (_, index), result in zip(items, results, strict=True):
        if isinstance(result, Died | Hung):
            family = random.Random(f"{campaign_seed}:{index}").choice(FAMILIES)
            outcome = "crash" if isinstance(result, Died) else "hang"
            tally.add(family, f"case {index}", outcome, str(result))
        else:
            tally.add(*result)
    return tally


def print_table(tally: Tally) -> None:
    short = {"clear error": "clear", "unclear error": "unclear", "internal error": "internal"}
    print_counts("family", FAMILIES, tally.counts, OUTCOMES, short, 22, 10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stageflow.testing.cli_inputs",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000)
    add_seed(parser)
    args = parser.parse_args(argv)
    campaign_seed = seed_of(args)
    start = time.perf_counter()

    progress = report_progress("inputs")

    tally = run_campaign(args.count, campaign_seed, progress=progress)
    print(f"hostile inputs to the stageflow command and IR parser, seed {campaign_seed}, "
          f"{args.count} inputs, {time.perf_counter() - start:.0f} s")
    print_table(tally)
    for text in tally.examples:
        print(f"\n{text}")
    bad = sum(tally.total(o) for o in OUTCOMES[3:]) + tally.total("unclear error")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
