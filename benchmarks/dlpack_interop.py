"""Zero-copy DLPack exchange with the incumbents installed beside stageflow (PyTorch, JAX),
which are not its dependencies, so the test suite checks the protocol with NumPy only.

    python -m benchmarks.dlpack_interop

For each framework: whether its array made from an `sf.Tensor` shares the tensor's memory,
whether a tensor made from its array shares the array's memory, and the time of each
hand-off of a 64 MiB float32 array (a copy of which would take milliseconds).
"""

from __future__ import annotations

import importlib.util
import time

import numpy as np

import stageflow as sf

MIB = 64


def _address(t: sf.Tensor) -> int:
    return np.asarray(t).__array_interface__["data"][0]


def _timed(function, *args) -> tuple[object, float]:
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def torch_exchange(t: sf.Tensor) -> dict[str, object]:
    import torch

    shared, there = _timed(torch.from_dlpack, t)
    source = torch.arange(t.shape[0], dtype=torch.float32)
    back, here = _timed(sf.from_dlpack, source)
    return {"to": shared.data_ptr() == _address(t), "to_us": there * 1e6,
            "from": _address(back) == source.data_ptr(), "from_us": here * 1e6}


def jax_exchange(t: sf.Tensor) -> dict[str, object]:
    import jax

    shared, there = _timed(jax.dlpack.from_dlpack, t)
    source = jax.numpy.arange(t.shape[0], dtype=jax.numpy.float32)
    back, here = _timed(sf.from_dlpack, source)
    pointer = source.unsafe_buffer_pointer()
    return {"to": shared.unsafe_buffer_pointer() == _address(t), "to_us": there * 1e6,
            "from": _address(back) == pointer, "from_us": here * 1e6}


def main() -> dict[str, dict[str, object]]:
    t = sf.constant(np.arange(MIB * 2**20 // 4, dtype=np.float32))
    results = {}
    print(f"DLPack hand-off of {MIB} MiB of float32 (shares memory?, microseconds)")
    for name, exchange in (("torch", torch_exchange), ("jax", jax_exchange)):
        if importlib.util.find_spec(name) is None:
            print(f"  {name:6s} not installed")
            continue
        result = exchange(t)
        results[name] = result
        print(f"  {name:6s} sf -> {name}: shared {result['to']!s:5s} {result['to_us']:8.1f} us"
              f"   {name} -> sf: shared {result['from']!s:5s} {result['from_us']:8.1f} us")
    return results


if __name__ == "__main__":
    main()
