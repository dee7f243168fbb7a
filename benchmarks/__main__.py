"""Run every benchmark and print one summary table: ``python -m benchmarks``.

Each script also runs on its own (``python -m benchmarks.NAME``) with more options; here
each runs once with its default workload, and the table repeats the headline figures and
ratios (all measured in this one run, against NumPy in the same process).

    python -m benchmarks [--json PATH]

``--json`` also writes every script's returned figures to PATH, so that a plot
(``python -m benchmarks.plot``) can be redrawn from a run without rerunning it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks import (
    call_overhead,
    checkpoint,
    compile_latency,
    devices,
    eager_overhead,
    eager_raw_ops,
    fit,
    fused_elementwise,
    fused_reduction,
    hmc,
    import_time,
    loop,
    matmul,
    matmul_bf16,
    memory,
    mlp_train,
    peak,
    remat,
    resnet,
    transformer,
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    rows: list[tuple[str, str, str]] = []
    eager = eager_overhead.main()
    rows.append(("eager dispatch, (4, 4) f32", f"{eager['stageflow_us']:.2f} us/op",
                 f"{eager['ratio']:.2f}x NumPy (goal <= 2x)"))
    imports = import_time.main(["--rounds", "7"])
    rows.append(("import stageflow", f"{imports['stageflow'] * 1e3:.0f} ms",
                 f"{imports['stageflow'] / imports['numpy']:.2f}x NumPy's import "
                 "(goal <= 300 ms)"))
    calls = call_overhead.main()
    rows.append(("cache-hit call, compiled", f"{calls['staged']:.2f} us",
                 "goal <= 5 us (jax.jit 8.9)"))
    fused = fused_elementwise.main([])
    for result in fused:
        gbs = result["sf.function GB/s"]
        rows.append((f"fused elementwise 2^{result['log2n']}", f"{gbs:.1f} GB/s",
                     f"{gbs / result['numpy copyto GB/s']:.2f}x copy bandwidth"))
    reductions = fused_reduction.main([])
    for name, seconds in reductions.items():
        rows.append((f"fused {name.split('(')[0]}, 4096x1024", f"{seconds['fused'] * 1e3:.2f} ms",
                     f"{seconds['numpy'] / seconds['fused']:.2f}x NumPy, "
                     f"{seconds['unfused'] / seconds['fused']:.2f}x unfused"))
    products = matmul.main([256, 512, 1024, 2048])
    for threads, by_size in products.items():
        ratios = " / ".join(f"{r['staged'] / r['numpy']:.2f}" for r in by_size.values())
        rows.append((f"matmul n = 256..2048, {threads} thread(s)", "",
                     f"{ratios} x NumPy (goal >= 0.9)"))
    limits = peak.main([])
    rows.append(("arithmetic peak, 1 core / all cores",
                 "; ".join(f"{name} {r[1]:.0f} / {r[max(r)]:.0f}" for name, r in limits.items())
                 + " GFLOP/s", "the limit the matmul figures are read against"))
    bf16 = matmul_bf16.main([512, 1024, 2048])
    rows.append(("matmul bfloat16 n = 512 / 1024 / 2048, staged",
                 " / ".join(f"{r['staged bfloat16']:.0f}" for r in bf16.values()) + " GFLOP/s",
                 " / ".join(f"{r['staged bfloat16'] / r['torch bfloat16']:.2f}"
                            for r in bf16.values()) + " x PyTorch (goal >= 0.8)"
                 if all("torch bfloat16" in r for r in bf16.values()) else ""))
    mlp = mlp_train.main([64, 512])
    for batch, rates in mlp.items():
        rows.append((f"MLP SGD step, batch {batch}", f"{rates['staged']:.0f} steps/s",
                     f"{rates['staged'] / rates['numpy']:.2f}x NumPy (goal 1.41 / 1.22)"))
    peaks = memory.main([64, 512])
    for batch, plan in peaks.items():
        rows.append((f"MLP step temporaries, batch {batch}", f"{plan['runtime'] / 1024:.0f} KiB",
                     f"{plan['ratio']:.2f}x lower bound (goal <= 1.25), whole call "
                     f"{plan['compiled'] / plan['eager']:.2f}x eager's"))
    convnet_peaks = memory.main_resnet(memory.RESNET_BATCHES)
    rows.append(("small ResNet staged step temporaries, batch "
                 + " / ".join(str(b) for b in convnet_peaks),
                 " / ".join(f"{p['runtime'] / 2**20:.1f}" for p in convnet_peaks.values())
                 + " MiB",
                 " / ".join(f"{p['ratio']:.2f}" for p in convnet_peaks.values())
                 + "x lower bound, with conv scratch (goal <= 1.25)"))
    chains = hmc.main([1, 16, 4096])
    for n, rates in chains.items():
        rows.append((f"HMC, N = {n}", f"{rates['staged']:,.0f} samples/s",
                     f"{rates['staged'] / rates['eager']:.1f}x eager (goal 10x)"))
    saved = remat.main([])
    rows.append(("remat, 16-layer stack", f"{saved['remat_mib']:.1f} MiB saved",
                 f"{saved['saving']:.0%} less, step {saved['slowdown']:+.0%} "
                 "(goal >= 40%, <= +10%)"))
    convnet = resnet.main(resnet.BATCHES)
    for batch in (1, 8, 32):
        rates = convnet[batch]
        others = ", ".join(f"{name} {rate:.0f}" for name, rate in rates.items()
                           if not name.startswith("stageflow"))
        rows.append((f"small ResNet step, batch {batch}",
                     f"{rates['stageflow staged']:.0f} examples/s",
                     f"{rates['stageflow staged'] / rates['stageflow eager']:.2f}x eager"
                     + (f"; {others}" if others else "")))
    raw = eager_raw_ops.main(eager_raw_ops.BATCHES)
    rows.append(("small ResNet eager step in raw ops, batch "
                 + " / ".join(str(b) for b in raw),
                 " / ".join(f"{r['stageflow raw ops']:.0f}" for r in raw.values())
                 + " examples/s",
                 " / ".join(f"{r['stageflow raw ops'] / r['stageflow layers']:.2f}"
                            for r in raw.values()) + "x the layers' eager step (goal >= 0.83)"))
    recurrence = loop.main()
    jax_rate = recurrence.get("jax.jit it/s")
    rows.append(("staged loop, 1000 x tanh(h @ W + x)",
                 f"{recurrence['stageflow staged it/s'] / 1e6:.2f} M it/s",
                 f"{recurrence['stageflow staged it/s'] / recurrence['numpy loop it/s']:.1f}x "
                 "NumPy's loop" + (f", {recurrence['stageflow staged it/s'] / jax_rate:.2f}x "
                                   "jax.jit" if jax_rate else "")))
    attention = transformer.main([])
    if "torch.compile" in attention:
        rows.append(("transformer training step, batch 32",
                     f"{attention['stageflow staged']:.0f} steps/s",
                     f"{attention['stageflow staged'] / attention['torch.compile']:.2f}x "
                     f"torch.compile (goal >= 1), PyTorch eager {attention['PyTorch eager']:.0f}"))
    else:
        rows.append(("transformer training step, batch 32",
                     f"{attention['stageflow staged']:.0f} steps/s", "no incumbent installed"))
    saving = checkpoint.main([])
    rows.append(("checkpoint write (durable), 256 MiB",
                 f"{saving['checkpoint write GB/s']:.2f} GB/s",
                 f"{saving['save ratio']:.2f}x numpy.save (goal >= 0.8), "
                 f"{saving['save ratio fsync']:.2f}x numpy.save + fsync; restore "
                 f"{saving['restore ratio']:.2f}x numpy.load"))
    latency = compile_latency.main()
    same_run = "".join(f", {name} {latency[f'{name}_first_ms']:.0f} ms in this run"
                       for name in ("jax", "torch", "tensorflow")
                       if f"{name}_first_ms" in latency)
    rows.append(("first call of a fresh MLP step", f"{latency['cold_ms']:.0f} ms cold",
                 f"{latency['warm_ms']:.0f} ms warm cache (goal: at most jax.jit's"
                 f"{same_run})"))
    fitting = fit.main([])
    for workload, rates in fitting.items():
        rows.append((f"Model.fit, {workload}", f"{rates['fit']:.0f} examples/s",
                     f"{rates['fit'] / rates['hand-written']:.2f}x the hand-written staged "
                     f"step (goal >= 0.9)"))
    placement = devices.main()
    rows.append(("eager op / staged call on a logical CPU device",
                 f"+{placement['eager placed'] - placement['eager host']:.1f} us",
                 f"+{placement['staged placed'] - placement['staged host']:.1f} us staged; "
                 f"copy {placement['copy GB/s'] / placement['numpy copy GB/s']:.2f}x "
                 "numpy copyto"))
    width = max(len(r[0]) for r in rows)
    print("\nsummary")
    for name, figure, ratio in rows:
        print(f"  {name:{width}}  {figure:>20}  {ratio}")
    if args.json:
        figures = {"eager_overhead": eager, "call_overhead": calls, "fused_elementwise": fused,
                   "fused_reduction": reductions, "matmul": products, "mlp_train": mlp,
                   "memory": peaks, "resnet_memory": convnet_peaks, "hmc": chains,
                   "remat": saved, "resnet": convnet, "eager_raw_ops": raw,
                   "loop": recurrence, "checkpoint": saving, "transformer": attention,
                   "compile_latency": latency, "devices": placement, "fit": fitting}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=1, default=float) + "\n")
        print(f"figures written to {args.json}")


if __name__ == "__main__":
    main()
