"""The fused gelu chain of `fused_elementwise` on the first GPU, against that GPU's own
device-to-device copy bandwidth, measured in one run.

    python -m benchmarks.gpu [LOG2_N ...]          (default: 24)
    python -m benchmarks.gpu --emulated [LOG2_N ...]

x, w and b are copied to the GPU once; the staged function runs there as one launch of its
fused kernel, its result left on the GPU; each timed round ends by waiting for the GPU.
GB/s counts 16 bytes per element for the chain (three reads, one write) and 8 for the copy
(a read and a write), as `fused_elementwise` does on the CPU. The goal on a GPU: at least
80% of the copy bandwidth. Where jax or torch sees a CUDA GPU, the same chain under
jax.jit (XLA fuses it into one kernel) and in PyTorch eager (a kernel per op) is timed in
the same rounds. Without a GPU, ``--emulated`` runs it on an emulated GPU, whose figures
measure the emulation (every GPU thread in turn on one core), not a GPU.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import numpy as np

import stageflow as sf
from benchmarks.fused_elementwise import C, fused
from benchmarks.timing import interleaved_medians
from stageflow.runtime import devices

GPU = "/device:GPU:0"


def _incumbents(arrays: list[np.ndarray]) -> dict[str, tuple[Callable[[], object],
                                                             Callable[[], object]]]:
    """The chain under jax.jit and in PyTorch eager, on their first CUDA GPU, where they
    import and see one: name -> (one call, wait for the GPU)."""
    found = {}
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # share the GPU
    try:
        import jax
        import jax.numpy as jnp

        gpus = jax.devices("gpu")
    except Exception:  # noqa: BLE001 - no jax, or no GPU for it
        gpus = []
    if gpus:
        jx, jw, jb = (jax.device_put(a, gpus[0]) for a in arrays)

        @jax.jit
        def chain(x, w, b):
            z = x * w + b
            return 0.5 * z * (1.0 + jnp.tanh(C * (z + 0.044715 * z * z * z))) * 0.5 + x

        chain(jx, jw, jb).block_until_ready()
        found["jax.jit"] = (lambda: chain(jx, jw, jb), lambda: chain(jx, jw, jb)
                            .block_until_ready())
    try:
        import torch

        usable = torch.cuda.is_available()
    except ImportError:
        usable = False
    if usable:
        tx, tw, tb = (torch.from_numpy(a).cuda() for a in arrays)

        def eager():
            z = tx * tw + tb
            return 0.5 * z * (1.0 + torch.tanh(C * (z + 0.044715 * z * z * z))) * 0.5 + tx

        found["PyTorch eager"] = (eager, torch.cuda.synchronize)
    return found


def main(argv: list[str] | None = None) -> dict[int, dict[str, float]]:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__)
    parser.add_argument("log2n", type=int, nargs="*", default=[24])
    parser.add_argument("--emulated", action="store_true",
                        help="without a GPU, measure an emulated one")
    args = parser.parse_args(argv)
    if args.emulated and sf.config.emulated_gpu_count() == 0:
        sf.config.set_emulated_gpu_count(1)
    if GPU not in sf.list_devices():
        print(f"no GPU: {devices.gpu_unavailable_reason()}")
        return {}
    device = devices.get(GPU)
    staged = sf.function(fused)
    results = {}
    for log2n in args.log2n:
        n = 1 << log2n
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal(n).astype(np.float32) for _ in range(3)]
        x, w, b = (sf.constant(a).gpu() for a in arrays)
        want = fused(*arrays)
        got = staged(x, w, b)
        assert got.device == GPU
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)

        def loop(work: Callable[[], object], wait: Callable[[], object]):
            def run(count: int) -> None:
                for _ in range(count):
                    work()
                wait()
            return run

        runs = {
            "chain": loop(lambda: staged(x, w, b), device.synchronize),  # noqa: B023
            "copy": loop(lambda: device.duplicate(x._buffer), device.synchronize),  # noqa: B023
        }
        runs.update({name: loop(*pair) for name, pair in _incumbents(arrays).items()})
        medians = interleaved_medians(runs)
        copy = 8 * n / medians["copy"] / 1e9
        figures = {name: 16 * n / seconds / 1e9 for name, seconds in medians.items()
                   if name != "copy"}
        chain = figures.pop("chain")
        results[log2n] = {"chain GB/s": chain, "copy GB/s": copy, "ratio": chain / copy,
                          **{f"{name} GB/s": value for name, value in figures.items()}}
        print(f"fused gelu chain on {device.describe()}, 2^{log2n} float32: "
              f"{chain:.1f} GB/s, device copy {copy:.1f} GB/s, {chain / copy:.2f}x "
              "(goal >= 0.8)")
        for name, value in figures.items():
            print(f"  {name}: {value:.1f} GB/s, {value / copy:.2f}x the copy; stageflow "
                  f"{chain / value:.2f}x it")
    return results


if __name__ == "__main__":
    main()
