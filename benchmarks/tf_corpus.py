"""How much TensorFlow 2 code written elsewhere runs on stageflow with TensorFlow's numbers.

    python -m benchmarks.tf_corpus --site DIR [--tf-python PYTHON] [--only NAME ...]
                                   [--tf-cache DIR] [--json PATH] [--failures]

The corpus is TensorFlow's own guides and tutorials (the notebooks under ``site/en`` of a
checkout of github.com/tensorflow/docs, not shipped here; those that download data cannot
run here and count for nothing): each notebook's code cells run in order, in
one namespace, as a notebook runs them: once under TensorFlow (`--tf-python`, an
interpreter that has it: TensorFlow is not a dependency of stageflow) and once under
stageflow with the module name swapped (``import tensorflow as tf`` -> ``import stageflow
as tf``, ``keras`` -> ``stageflow.keras``). A cell's output is what it prints and the repr
of its last expression, as a notebook shows it.

A cell **agrees** when TensorFlow ran it, stageflow ran it too, and the numbers in their
outputs agree (the same numbers in any order, each within rtol 1e-3, after dropping dtype
names and TensorFlow's ``:0`` tensor-name suffixes, which are not values). Cells whose
numbers differ between two TensorFlow runs (unseeded random draws, timings) are compared
on running only.
Cells TensorFlow cannot run here (downloads, GPUs, missing packages) are left out of the
count. The figure is agreeing cells over the cells TensorFlow ran, per notebook and in all;
`--failures` lists each disagreeing cell's first line and what went wrong. TensorFlow's two
runs of a notebook are kept in `--tf-cache` (keyed by the notebook's cells), so that a later
measurement of a changed stageflow runs only stageflow.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# The guides of the eager API, functions, modules, training and data: what the paper's
# users write daily. Guides about other products (TPUs, estimators, TF1 migration, JAX
# interop, distribution, mixed precision) are left out.
NOTEBOOKS = [f"guide/{name}" for name in (
    "basics", "tensor", "variable", "autodiff", "advanced_autodiff", "intro_to_graphs",
    "function", "intro_to_modules", "basic_training_loops", "tensor_slicing",
    "random_numbers", "ragged_tensor", "sparse_tensor", "checkpoint", "data",
    "effective_tf2", "core/matrix_core",
    "core/optimizers_core", "core/quickstart_core")] + [
    f"tutorials/{name}" for name in ("customization/basics", "customization/custom_layers",
                                      "quickstart/beginner", "quickstart/advanced")]

CELL_SECONDS = 120
NOTEBOOK_SECONDS = 900

# Runs a notebook's cells in one namespace, in a process of its own: argv = cells.json,
# results.json. Written for either interpreter (TensorFlow's or stageflow's).
DRIVER = r'''
import ast, contextlib, io, json, signal, sys
cells = json.load(open(sys.argv[1]))
namespace = {"__name__": "__main__"}
results = []

def alarm(signum, frame):
    raise TimeoutError("cell timed out")

signal.signal(signal.SIGALRM, alarm)
for source in cells:
    out = io.StringIO()
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        results.append({"status": "SyntaxError: " + str(error), "out": ""})
        continue
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    signal.alarm(int(sys.argv[3]))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            exec(compile(tree, "<cell>", "exec"), namespace)
            if last is not None:
                value = eval(compile(last, "<cell>", "eval"), namespace)
                if value is not None:
                    print(repr(value))
        status = "ok"
    except BaseException as error:  # a cell's SystemExit or KeyboardInterrupt is its result
        text = str(error).strip().splitlines()
        status = type(error).__name__ + (": " + text[0][:300] if text else "")
    finally:
        signal.alarm(0)
    results.append({"status": status, "out": out.getvalue()[-20000:]})
    with open(sys.argv[2], "w") as saved:  # after every cell: a killed run keeps its cells
        json.dump(results, saved)
'''

_SWAPS = [(re.compile(r"^(\s*)import tensorflow as tf\b", re.M), r"\1import stageflow as tf"),
          (re.compile(r"^(\s*)import tensorflow\b", re.M), r"\1import stageflow as tensorflow"),
          (re.compile(r"^(\s*)from tensorflow import keras\b", re.M),
           r"\1from stageflow import keras"),
          (re.compile(r"^(\s*)from tensorflow(\.\w+)* import", re.M),
           lambda m: m.group(0).replace("tensorflow", "stageflow")),
          (re.compile(r"^(\s*)import keras\b", re.M), r"\1from stageflow import keras"),
          (re.compile(r"^(\s*)from keras(\.\w+)* import", re.M),
           lambda m: m.group(0).replace("keras", "stageflow.keras", 1))]
_DTYPE_WORDS = re.compile(r"\b(?:b?float|u?int|complex|bfloat)\d+\b|:\d+\b")
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf")


def cells_of(path: Path) -> list[str]:
    """The code cells of a notebook, shell and magic lines (``!pip``, ``%timeit``) dropped,
    the licence cell left out."""
    notebook = json.loads(path.read_text())
    cells = []
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        if source.lstrip().startswith("#@title Licensed"):
            continue
        lines = [line for line in source.splitlines() if not line.lstrip().startswith(("!", "%"))]
        cells.append("\n".join(lines))
    return cells


def swapped(source: str) -> str:
    for pattern, replacement in _SWAPS:
        source = pattern.sub(replacement, source)
    return source


def run(python: str, cells: list[str], workdir: str) -> list[dict]:
    with tempfile.TemporaryDirectory() as folder:
        driver, given, taken = (os.path.join(folder, n) for n in ("driver.py", "cells.json",
                                                                  "results.json"))
        Path(driver).write_text(DRIVER)
        Path(given).write_text(json.dumps(cells))
        env = {**os.environ, "MPLBACKEND": "Agg", "TF_CPP_MIN_LOG_LEVEL": "3",
               "PYTHONPATH": os.getcwd()}
        try:
            process = subprocess.run([python, driver, given, taken, str(CELL_SECONDS)],
                                     cwd=workdir, env=env, capture_output=True, text=True,
                                     timeout=NOTEBOOK_SECONDS, check=False)
            ending = (process.stderr.strip().splitlines()[-1:] or ["no output"])[0]
        except subprocess.TimeoutExpired:  # a cell stuck in native code, past its alarm
            ending = f"the notebook ran past {NOTEBOOK_SECONDS} s"
        done = json.loads(Path(taken).read_text()) if os.path.exists(taken) else []
        return done + [{"status": f"not run: {ending}", "out": ""}] * (len(cells) - len(done))


def tensorflow_runs(python: str, cells: list[str], cache: Path | None
                    ) -> tuple[list[dict], list[dict]]:
    """TensorFlow's two runs of a notebook's cells, from `cache` where it has them."""
    stored = None
    if cache is not None:
        digest = hashlib.sha256(json.dumps(cells).encode()).hexdigest()[:16]
        stored = cache / f"{digest}.json"
        if stored.exists():
            first, second = json.loads(stored.read_text())
            return first, second
    runs = []
    for _ in range(2):
        with tempfile.TemporaryDirectory() as workdir:
            runs.append(run(python, cells, workdir))
    if stored is not None:
        cache.mkdir(parents=True, exist_ok=True)
        stored.write_text(json.dumps(runs))
    return runs[0], runs[1]


def numbers(text: str) -> list[float]:
    return [float(n) for n in _NUMBER.findall(_DTYPE_WORDS.sub(" ", text))]


def same_numbers(a: list[float], b: list[float]) -> bool:
    """The same numbers, in any order: TensorFlow's repr shows a tensor's shape before its
    values, stageflow's (TensorFlow's str form) after them."""
    a, b = sorted(a, key=_order), sorted(b, key=_order)
    return len(a) == len(b) and all(
        (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-3, abs_tol=1e-5)
        for x, y in zip(a, b, strict=True))


def _order(value: float) -> tuple[bool, float]:
    return (math.isnan(value), 0.0 if math.isnan(value) else value)


def judge(tf_runs: list[dict], tf_again: list[dict], ours: list[dict]) -> list[str]:
    """Each cell's verdict: ``agrees``, ``differs``, ``fails`` (stageflow raised) or
    ``excluded`` (TensorFlow could not run it)."""
    verdicts = []
    for first, second, mine in zip(tf_runs, tf_again, ours, strict=True):
        if first["status"] != "ok":
            verdicts.append("excluded")
        elif mine["status"] != "ok":
            verdicts.append("fails")
        else:
            expected = numbers(first["out"])
            deterministic = same_numbers(expected, numbers(second["out"]))
            verdicts.append("agrees" if not deterministic or same_numbers(
                expected, numbers(mine["out"])) else "differs")
    return verdicts


def main() -> dict[str, dict[str, int]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", required=True, type=Path,
                        help="the site/en folder of a tensorflow/docs checkout")
    parser.add_argument("--tf-python", default=sys.executable,
                        help="a Python with tensorflow installed (default: this one)")
    parser.add_argument("--only", nargs="*", help="notebook names (default: the list above)")
    parser.add_argument("--tf-cache", type=Path, help="keep TensorFlow's runs here")
    parser.add_argument("--json", type=Path, help="write every cell's outcome here")
    parser.add_argument("--failures", action="store_true", help="list each cell that fails")
    args = parser.parse_args()
    totals: dict[str, dict[str, int]] = {}
    details = {}
    for name in args.only or NOTEBOOKS:
        path = args.site / f"{name}.ipynb"
        if not path.exists():
            print(f"{name}: not in {args.site}")
            continue
        cells = cells_of(path)
        tf_runs, tf_again = tensorflow_runs(args.tf_python, cells, args.tf_cache)
        with tempfile.TemporaryDirectory() as workdir:
            ours = run(sys.executable, [swapped(c) for c in cells], workdir)
        verdicts = judge(tf_runs, tf_again, ours)
        counts = {k: verdicts.count(k) for k in ("agrees", "differs", "fails", "excluded")}
        totals[name] = counts
        ran = len(cells) - counts["excluded"]
        print(f"{name:45s} {counts['agrees']:3d}/{ran:3d} agree  ({counts['differs']} differ, "
              f"{counts['fails']} fail, {counts['excluded']} excluded)", flush=True)
        details[name] = [{"cell": c, "verdict": v, "tf": t, "stageflow": o}
                         for c, v, t, o in zip(cells, verdicts, tf_runs, ours, strict=True)]
        if args.failures:
            for entry in details[name]:
                if entry["verdict"] in ("fails", "differs"):
                    first = entry["cell"].strip().splitlines()[0][:70]
                    why = (entry["stageflow"]["status"] if entry["verdict"] == "fails"
                           else "numbers differ")
                    print(f"    {entry['verdict']:7s} {first!r}: {why[:160]}")
    agree = sum(c["agrees"] for c in totals.values())
    ran = sum(sum(c.values()) - c["excluded"] for c in totals.values())
    print(f"all: {agree}/{ran} cells TensorFlow runs agree on stageflow "
          f"({100 * agree / max(ran, 1):.0f}%)")
    if args.json:
        args.json.write_text(json.dumps(details, indent=1))
    return totals


if __name__ == "__main__":
    main()
