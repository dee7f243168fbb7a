"""What placement costs on logical CPU devices: an eager op, a graph-function call and a
copy on ``/device:CPU:1`` against the same on the host, measured in one run.

    python -m benchmarks.devices

An op on a logical device runs on that device's worker thread (work on one device runs in
order; two devices run at once), so each costs a hand-off between threads on top of the
host's figure; a copy to a device is one ``np.array`` copy, against ``np.copyto`` of the
same bytes.
"""

from __future__ import annotations

import numpy as np

import stageflow as sf
from benchmarks.timing import interleaved_medians
from stageflow.frontend.tensor import wrap

DEVICE = "/device:CPU:1"


def main() -> dict[str, float]:
    if sf.config.logical_device_count("CPU") < 2:  # before the devices are first used
        sf.config.set_logical_device_count("CPU", 2)
    x_np = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    host = sf.constant(x_np)
    placed = host.to(DEVICE)
    staged = sf.function(lambda x: x * 2.0 + 1.0)
    big = np.random.default_rng(1).standard_normal(1 << 18).astype(np.float32)  # 1 MiB
    target = np.empty_like(big)

    def loop(work):
        def run(n: int) -> None:
            for _ in range(n):
                work()
        return run

    def copy_to_device() -> None:
        wrap(big).to(DEVICE)  # a fresh tensor of the same array: a real copy each time

    medians = interleaved_medians({
        "eager host": loop(lambda: host + host),
        "eager placed": loop(lambda: placed + placed),
        "staged host": loop(lambda: staged(host)),
        "staged placed": loop(lambda: staged(placed)),
        "copy to device": loop(copy_to_device),
        "numpy copyto": loop(lambda: np.copyto(target, big)),
    })
    us = {name: t * 1e6 for name, t in medians.items()}
    us["copy GB/s"] = big.nbytes / medians["copy to device"] / 1e9
    us["numpy copy GB/s"] = big.nbytes / medians["numpy copyto"] / 1e9
    print(f"placement on {DEVICE} (a logical CPU device), median us")
    print(f"  eager x + x, (4, 4) f32     host {us['eager host']:7.2f}   placed "
          f"{us['eager placed']:7.2f}   (+{us['eager placed'] - us['eager host']:.1f} us)")
    print(f"  staged call, (4, 4) f32     host {us['staged host']:7.2f}   placed "
          f"{us['staged placed']:7.2f}   (+{us['staged placed'] - us['staged host']:.1f} us)")
    print(f"  copy of 1 MiB to the device {us['copy GB/s']:6.2f} GB/s   numpy copyto "
          f"{us['numpy copy GB/s']:6.2f} GB/s   "
          f"({us['copy GB/s'] / us['numpy copy GB/s']:.2f}x)")
    return us


if __name__ == "__main__":
    main()
