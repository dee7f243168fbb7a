"""The README's performance figure, drawn from the JSON a benchmark run writes.

    python -m benchmarks --json docs/performance.json
    python -m benchmarks.plot [OUT.png] [--json PATH]      (default: docs/performance.png)

Absolute figures move by 10-30% between runs on a noisy machine, so each panel shows
stageflow's figure as a ratio to its reference measured in the same run (NumPy, the copy
bandwidth), next to the incumbents' same ratio from their own runs (ANCHORS below); only the
cache-hit call panel compares microseconds directly, as no reference shares its scale. The
ResNet panel (and `draw_resnet`'s figure, ``python -m benchmarks.resnet --plot OUT.png``)
shows examples/s against the batch size, every contender measured in the same run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

DOCS = Path(__file__).resolve().parent.parent / "docs"

# The incumbents' figures on this machine, copied from ANCHORS.md (medians of the anchors'
# scripts; TensorFlow 2.21, JAX 0.10.2, PyTorch 2.13.0, NumPy 2.4.6 on 2 cores).
ANCHORS: dict[str, Any] = {
    "eager_us_per_op": {"NumPy": 0.45, "PyTorch eager": 1.76, "JAX op-by-op": 15.6,
                        "TF eager": 33.5},
    "call_us": {"jax.jit": 8.9, "torch.compile": 46.0, "tf.function": 295.0},
    "fused_gbs": {  # by log2 of the element count
        "NumPy copy": {22: 20.6, 24: 16.6}, "NumPy": {22: 1.2, 24: 1.3},
        "tf.function + XLA": {22: 16.5, 24: 22.6}, "jax.jit": {22: 24.5, 24: 8.0},
        "torch.compile": {22: 8.2, 24: 4.6}},
    "mlp_steps_per_s": {  # by batch
        "NumPy": {64: 753, 512: 172}, "tf.function + XLA": {64: 493, 512: 155},
        "jax.jit": {64: 869, 512: 178}, "torch.compile": {64: 1061, 512: 209}},
    "hmc_samples_per_s": {  # by number of chains
        "NumPy": {1: 8670, 16: 143288, 256: 2174353, 4096: 5343199},
        "tf.function + XLA": {1: 3358, 16: 41817, 256: 808705, 4096: 3168755},
        "jax.jit": {1: 42638, 16: 284994, 256: 2101869, 4096: 4293804},
        "torch.compile": {1: 9864, 16: 105347, 256: 771170, 4096: 2869020}},
}

# One colour per library, so a framework reads the same in every panel.
COLOURS = {"stageflow": "#d62728", "jax": "#1f77b4", "torch": "#ff7f0e", "tf": "#2ca02c",
           "numpy": "#7f7f7f"}


def colour(series: str) -> str:
    """The colour of a series label's library (its first word: "jax.jit", "PyTorch eager");
    stageflow's eager mode is drawn lighter than its staged one."""
    library = series.split()[0].split(".")[0].lower().removeprefix("py")
    value = COLOURS.get(library, COLOURS["numpy"])
    return value + "80" if series == "stageflow eager" else value


def bars(ax: Axes, groups: list[str], series: dict[str, list[float]], title: str,
         ylabel: str, log: bool = False, reference: float | None = 1.0) -> None:
    """Grouped bars, one group per workload size, one bar per framework, values printed on
    the bars so the figure reads without its scale."""
    width = 0.8 / len(series)
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        drawn = ax.bar(xs, values, width, label=name, color=colour(name))
        ax.bar_label(drawn, fmt="%.3g", fontsize=6, padding=1)
    if reference is not None:
        ax.axhline(reference, color="black", linewidth=0.8)
    top = max(max(values) for values in series.values())
    if log:
        ax.set_yscale("log")
        ax.set_ylim(top=top * 30)  # headroom in log space for the legend above the bars
    else:
        ax.set_ylim(0, top * 1.45)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_title(title, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=6, loc="upper center", ncols=3)


def ratios(anchors: dict[str, dict[int, float]], reference: str, keys: list[int]
           ) -> dict[str, list[float]]:
    """Each incumbent's figure over the anchors' reference at the same size."""
    return {name: [figures[k] / anchors[reference][k] for k in keys]
            for name, figures in anchors.items() if name != reference}


def draw(results: dict[str, Any], out: Path) -> None:
    """The 2x3 figure: eager dispatch, cache-hit call, fused elementwise, MLP, HMC and,
    when the run has it, the small ResNet's examples/s against the batch size."""
    plt.switch_backend("Agg")  # a file only: no display is needed or assumed
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5))
    eager, calls = results["eager_overhead"], results["call_overhead"]
    anchor_eager = ANCHORS["eager_us_per_op"]
    bars(axes[0, 0], ["x = x * a + b, (4, 4) f32"],
         {"stageflow eager": [eager["ratio"]],
          **{name: [us / anchor_eager["NumPy"]] for name, us in anchor_eager.items()
             if name != "NumPy"}},
         "eager dispatch: us per op / NumPy's (lower is better)", "x NumPy", log=True)
    bars(axes[0, 1], ["f(x) = x + 1, (4, 4) f32"],
         {"stageflow compiled": [calls["staged"]],
          **{name: [us] for name, us in ANCHORS["call_us"].items()}},
         "cache-hit call of a staged function (lower is better)", "us per call", log=True,
         reference=calls["numpy"])

    fused = {int(r["log2n"]): r for r in results["fused_elementwise"]}
    log2s = sorted(fused)
    anchor_fused = {name: figures for name, figures in ANCHORS["fused_gbs"].items()
                    if all(k in figures for k in log2s)}
    bars(axes[0, 2], [f"2^{k}" for k in log2s],
         {"stageflow": [fused[k]["sf.function GB/s"] / fused[k]["numpy copyto GB/s"]
                        for k in log2s],
          **ratios(anchor_fused, "NumPy copy", log2s)},
         "fused gelu chain: GB/s / copy bandwidth", "x np.copyto GB/s")

    mlp = {int(batch): rates for batch, rates in results["mlp_train"].items()}
    batches = sorted(mlp)
    bars(axes[1, 0], [f"batch {b}" for b in batches],
         {"stageflow staged": [mlp[b]["staged"] / mlp[b]["numpy"] for b in batches],
          "stageflow eager": [mlp[b]["eager"] / mlp[b]["numpy"] for b in batches],
          **ratios(ANCHORS["mlp_steps_per_s"], "NumPy", batches)},
         "MLP 784-256-256-10 SGD step: steps/s / NumPy's", "x NumPy (manual backward)")

    hmc = {int(n): rates for n, rates in results["hmc"].items()}
    chains = sorted(hmc)
    bars(axes[1, 1], [f"N = {n}" for n in chains],
         {"stageflow staged": [hmc[n]["staged"] / hmc[n]["numpy"] for n in chains],
          "stageflow eager": [hmc[n]["eager"] / hmc[n]["numpy"] for n in chains],
          **ratios(ANCHORS["hmc_samples_per_s"], "NumPy", chains)},
         "HMC, 10 leapfrog steps: samples/s / NumPy's", "x NumPy (analytic gradient)",
         log=True)

    note = ("stageflow: one run of python -m benchmarks, each figure over its reference "
            "measured in that run. Incumbents: ANCHORS.md (their own runs on this machine), "
            "the same ratio to their own NumPy run; in the ResNet panel, measured in the same "
            "run.\nBlack line: the reference (1x), or NumPy's x + 1 in the cache-hit panel. "
            "Higher is better except in the top-left and top-middle panels.")
    if "resnet" in results:
        examples_per_second(axes[1, 2], results["resnet"])
    else:
        axes[1, 2].axis("off")
    fig.text(0.01, 0.005, note, fontsize=7, va="bottom")
    fig.suptitle("stageflow against NumPy and the incumbents, 2-core CPU", fontsize=11)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def by_contender(figures: dict) -> tuple[list[int], dict[str, list[float]]]:
    """``{batch: {contender: examples/s}}`` (JSON keys are strings) as the batches and
    each contender's figures over them."""
    rates = {int(batch): values for batch, values in figures.items()}
    batches = sorted(rates)
    names = list(rates[batches[0]])
    return batches, {name: [rates[b][name] for b in batches] for name in names}


def line_style(series: str) -> dict[str, str]:
    """The library's colour; eager modes dashed, so PyTorch's two lines differ."""
    return {"color": colour(series), "linestyle": "--" if "eager" in series else "-"}


def examples_per_second(ax: Axes, figures: dict) -> None:
    """Examples/s against the batch size, one line per contender (the paper's Figure 3)."""
    batches, series = by_contender(figures)
    for name, values in series.items():
        ax.plot(batches, values, marker="o", label=name, **line_style(name))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.set_title("small ResNet training step: examples/s", fontsize=9)
    ax.set_xlabel("batch size", fontsize=8)
    ax.set_ylabel("examples/s", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=6)


def draw_resnet(figures: dict, out: Path) -> None:
    """The paper's Figure 3 for the small ResNet: examples/s (top) and the improvement
    over stageflow eager in percent (bottom), against the batch size."""
    plt.switch_backend("Agg")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.5, 7), sharex=True)
    examples_per_second(top, figures)
    batches, series = by_contender(figures)
    eager = series["stageflow eager"]
    for name, values in series.items():
        if name != "stageflow eager":
            bottom.plot(batches, [100 * (v / e - 1) for v, e in zip(values, eager, strict=True)],
                        marker="o", label=name, **line_style(name))
    bottom.axhline(0, color="black", linewidth=0.8)
    bottom.set_title("improvement over stageflow eager (%)", fontsize=9)
    bottom.set_xlabel("batch size", fontsize=8)
    bottom.set_yscale("symlog", linthresh=100)
    bottom.tick_params(labelsize=7)
    bottom.legend(fontsize=6)
    fig.suptitle("Training the small CIFAR ResNet, 2-core CPU (same run)", fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.plot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", type=Path, default=DOCS / "performance.png")
    parser.add_argument("--json", type=Path, default=DOCS / "performance.json",
                        help="figures written by python -m benchmarks --json")
    args = parser.parse_args(argv)
    draw(json.loads(args.json.read_text()), args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
