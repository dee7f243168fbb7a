"""The fused gelu chain of `fused_elementwise` on the first GPU, against that GPU's own
device-to-device copy bandwidth, measured in one run.

    python -m benchmarks.gpu [LOG2_N ...]          (default: 24)
    python -m benchmarks.gpu --emulated [LOG2_N ...]

x, w and b are copied to the GPU once; the staged function runs there as one launch of its
fused kernel, its result left on the GPU. GB/s counts 16 bytes per element for the chain
(three reads, one write) and 8 for the copy (a read and a write), as `fused_elementwise`
does on the CPU. The goal on a GPU: at least 80% of the copy bandwidth. Without a GPU,
``--emulated`` runs it on an emulated GPU, whose figures measure the emulation (every GPU
thread in turn on one core), not a GPU.
"""

from __future__ import annotations

import argparse

import numpy as np

import stageflow as sf
from benchmarks.fused_elementwise import fused
from benchmarks.timing import interleaved_medians
from stageflow.runtime import devices

GPU = "/device:GPU:0"


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
        x, w, b = (sf.constant(rng.standard_normal(n).astype(np.float32)).gpu()
                   for _ in range(3))
        want = fused(*(t.cpu() for t in (x, w, b))).numpy()
        got = staged(x, w, b)
        assert got.device == GPU
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)

        def loop(work):
            def run(count: int) -> None:
                for _ in range(count):
                    work()
            return run

        medians = interleaved_medians({
            "chain": loop(lambda: staged(x, w, b)),  # noqa: B023 - timed in this iteration
            "copy": loop(lambda: device.duplicate(x._buffer)),  # noqa: B023
        })
        chain = 16 * n / medians["chain"] / 1e9
        copy = 8 * n / medians["copy"] / 1e9
        results[log2n] = {"chain GB/s": chain, "copy GB/s": copy, "ratio": chain / copy}
        print(f"fused gelu chain on {device.describe()}, 2^{log2n} float32: "
              f"{chain:.1f} GB/s, device copy {copy:.1f} GB/s, {chain / copy:.2f}x "
              "(goal >= 0.8)")
    return results


if __name__ == "__main__":
    main()
