"""The picture of docs/guides/profiler.md: a trace of the MLP training step, drawn as timelines.

    python -m benchmarks.profile_timeline [OUT.png] [--logdir DIR] [--batch N]
                                          (default docs/profiler.png, a temporary logdir, 64)

Records with `sf.profiler` (``host_tracer_level=3``, so that the staged step's kernels are
timed one by one) two eager and three staged training steps of `benchmarks.mlp_train`, each
inside ``sf.profiler.experimental.Trace("train", step_num=N)``, prints the trace's path,
and draws three of its spans as flame charts, time across and nesting down: the first
staged step (tracing, the passes, LLVM, then the call), an eager step (one span per op) and
a later staged step (the program's steps and fused kernels). The same file opens in
https://ui.perfetto.dev or ``chrome://tracing``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

import stageflow as sf
from benchmarks.mlp_train import init_params, make_data, make_train_step

DOCS = Path(__file__).resolve().parent.parent / "docs"
COLOURS = {"user": "#9e9e9e", "function": "#4a7fd0", "program": "#2e5fa8",
           "compile": "#e39b3b", "kernel": "#3aa55d", "step": "#5fb3b3", "op": "#8e63c9",
           "interpreter": "#c95f63", "copy": "#d4c341"}


def record(logdir: str, batch: int) -> str:
    """Trace two eager and three staged training steps; the trace file's path."""
    x, y = (sf.constant(a) for a in make_data(batch))
    eager = make_train_step([sf.Variable(p) for p in init_params()], staged=False)
    staged = make_train_step([sf.Variable(p) for p in init_params()], staged=True)
    options = sf.profiler.experimental.ProfilerOptions(host_tracer_level=3)
    with sf.profiler.trace(logdir, options) as profile:
        for step in range(2):
            with sf.profiler.experimental.Trace("train", step_num=step, mode="eager"):
                eager(x, y)
        for step in range(3):
            with sf.profiler.experimental.Trace("train", step_num=step, mode="staged"):
                staged(x, y)
    return str(profile.path)


def spans(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as file:
        return [e for e in json.load(file)["traceEvents"] if e["ph"] == "X"]


def nested(events: list[dict[str, Any]], root: dict[str, Any]) -> list[tuple[dict, int]]:
    """`root` and the events of its thread inside it, each with its depth below `root`."""
    end = root["ts"] + root["dur"]
    inner = [e for e in events if e["tid"] == root["tid"] and root["ts"] <= e["ts"]
             and e["ts"] + e["dur"] <= end]
    found, open_ends = [], []
    for event in inner:  # in the order they began, an enclosing span first
        while open_ends and open_ends[-1] <= event["ts"]:
            open_ends.pop()
        found.append((event, len(open_ends)))
        open_ends.append(event["ts"] + event["dur"])
    return found


def draw_span(ax: Axes, events: list[dict[str, Any]], root: dict[str, Any], title: str) -> None:
    """One flame chart: milliseconds from the root's start across, depth down."""
    rows = nested(events, root)
    scale = 1e-3  # microseconds to milliseconds
    width = root["dur"] * scale
    depth = max(d for _, d in rows) + 1
    for event, level in rows:
        left, span = (event["ts"] - root["ts"]) * scale, event["dur"] * scale
        ax.barh(-level, span, left=left, height=0.9, color=COLOURS.get(event["cat"], "#bbb"),
                edgecolor="white", linewidth=0.3)
        if span > width * 0.06:
            ax.text(left + span / 2, -level, event["name"][:28], ha="center", va="center",
                    fontsize=6.5, color="white", clip_on=True)
    ax.set_xlim(0, width)
    ax.set_ylim(-depth + 0.4, 0.6)
    ax.set_yticks([])
    ax.set_xlabel("ms")
    ax.set_title(f"{title} ({width:.1f} ms)", fontsize=9, loc="left")


def draw(path: str, out: Path) -> None:
    events = spans(path)
    steps = [e for e in events if e["name"] == "train"]
    eager = [e for e in steps if e["args"]["mode"] == "eager"]
    staged = [e for e in steps if e["args"]["mode"] == "staged"]
    fig, axes = plt.subplots(3, 1, figsize=(11, 8.5), gridspec_kw={"hspace": 0.55})
    draw_span(axes[0], events, staged[0], "first staged step: trace, passes, LLVM, then the "
                                          "call")
    draw_span(axes[1], events, eager[-1], "an eager step: one span per op")
    draw_span(axes[2], events, staged[-1], "a later staged step (host_tracer_level=3): the "
                                           "program's steps and fused kernels")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    fig.legend(handles, list(COLOURS), loc="lower center", ncol=len(COLOURS), fontsize=7,
               frameon=False)
    fig.suptitle("sf.profiler: MLP 784-256-256-10 SGD step, batch 64", fontsize=11)
    fig.savefig(out, dpi=130, bbox_inches="tight")
    print(f"wrote {out}")


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile_timeline",
                                     description=__doc__)
    parser.add_argument("out", nargs="?", type=Path, default=DOCS / "profiler.png")
    parser.add_argument("--logdir", default=None, help="where the trace goes (default: a "
                                                       "temporary directory)")
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args(argv)
    path = record(args.logdir or tempfile.mkdtemp(prefix="stageflow-trace-"), args.batch)
    print(f"trace: {path}")
    draw(path, args.out)
    return path


if __name__ == "__main__":
    main()
