"""The fused gelu chain of `fused_elementwise` on the first GPU, against that GPU's own
device-to-device copy bandwidth; float32 matrix products, sums and a small MLP there,
against PyTorch and jax on the same GPU; measured in one run.

    python -m benchmarks.gpu [LOG2_N ...] [--matmul N ...] [--mlp BATCH ...]
                                           (default: 24; 4096 1024; 64)
    python -m benchmarks.gpu --emulated [LOG2_N ...]   (defaults: matmul 64, MLP batch 4)

x, w and b are copied to the GPU once; the staged function runs there as one launch of its
fused kernel, its result left on the GPU; each timed round ends by waiting for the GPU.
GB/s counts 16 bytes per element for the chain (three reads, one write) and 8 for the copy
(a read and a write), as `fused_elementwise` does on the CPU. The goal on a GPU: at least
80% of the copy bandwidth. Where jax or torch sees a CUDA GPU, the same chain under
jax.jit (XLA fuses it into one kernel) and in PyTorch eager (a kernel per op) is timed in
the same rounds.

The matrix products are ``sf.matmul`` of two N x N float32 tensors on the GPU (one cuBLAS
gemm, plain FP32: no TF32), in TFLOP/s counting 2 N^3 operations, against torch.matmul on
the same GPU where torch sees one (with TF32 off too), each round again ending by waiting
for the GPU. Without a GPU, ``--emulated`` runs both on an emulated GPU, whose figures
measure the emulation (every GPU thread in turn on one core; NumPy's matmul), not a GPU.

The sums are eager ``reduce_sum`` of 2^LOG2_N float32 values to one (a tree of reduction
passes) in GB/s, against torch.sum on the same GPU.

The MLP is a small forward pass, ``softmax(tanh(x @ w1 + b1) @ w2 + b2)`` at 784-256-10,
staged on the GPU: nine launches (two gemms, fused elementwise kernels, the
softmax's reductions and broadcasts), each far shorter than the Python that issues it. It is
timed in microseconds per call as its plan of launches (``sf.config.launch_graphs =
False``) and replayed as one launch graph, against PyTorch eager and jax.jit on the same GPU
where they see one.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

import numpy as np

import stageflow as sf
from benchmarks.fused_elementwise import C, fused
from benchmarks.timing import interleaved_medians
from stageflow.runtime import devices
from stageflow.runtime.gpu import GPUDevice

GPU = "/device:GPU:0"


def _torch() -> Any:
    """torch where it imports and sees a CUDA GPU, else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _jax_gpu() -> Any:
    """jax's first CUDA GPU where jax imports and sees one, else None (jax shares the GPU
    rather than preallocating it)."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    try:
        import jax

        return jax.devices("gpu")[0]
    except Exception:  # noqa: BLE001 - no jax, or no GPU for it
        return None


def _incumbents(arrays: list[np.ndarray]) -> dict[str, tuple[Callable[[], object],
                                                             Callable[[], object]]]:
    """The chain under jax.jit and in PyTorch eager, on their first CUDA GPU, where they
    import and see one: name -> (one call, wait for the GPU)."""
    found = {}
    gpu = _jax_gpu()
    if gpu is not None:
        import jax
        import jax.numpy as jnp

        jx, jw, jb = (jax.device_put(a, gpu) for a in arrays)

        @jax.jit
        def chain(x, w, b):
            z = x * w + b
            return 0.5 * z * (1.0 + jnp.tanh(C * (z + 0.044715 * z * z * z))) * 0.5 + x

        chain(jx, jw, jb).block_until_ready()
        found["jax.jit"] = (lambda: chain(jx, jw, jb), lambda: chain(jx, jw, jb)
                            .block_until_ready())
    torch = _torch()
    if torch is not None:
        tx, tw, tb = (torch.from_numpy(a).cuda() for a in arrays)

        def eager():
            z = tx * tw + tb
            return 0.5 * z * (1.0 + torch.tanh(C * (z + 0.044715 * z * z * z))) * 0.5 + tx

        found["PyTorch eager"] = (eager, torch.cuda.synchronize)
    return found


def _loop(work: Callable[[], object], wait: Callable[[], object]) -> Callable[[int], None]:
    """`count` calls of `work`, then a wait for the GPU (a round of `interleaved_medians`)."""
    def run(count: int) -> None:
        for _ in range(count):
            work()
        wait()
    return run


def _torch_matmul(a: np.ndarray, b: np.ndarray) -> tuple[Callable[[], object],
                                                          Callable[[], object]] | None:
    """torch.matmul of `a` and `b` on torch's first CUDA GPU in plain FP32 (one call, wait
    for the GPU), or None where torch does not import or sees no GPU."""
    torch = _torch()
    if torch is None:
        return None
    torch.backends.cuda.matmul.allow_tf32 = False  # as cuBLAS's default math mode
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    return (lambda: torch.matmul(ta, tb)), torch.cuda.synchronize


def matmul_figures(device: GPUDevice, n: int) -> dict[str, float]:
    """TFLOP/s of an n x n x n float32 product on the GPU, by contender: stageflow
    (sf.matmul), torch.matmul."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    x, y = sf.constant(a).gpu(), sf.constant(b).gpu()
    got = sf.matmul(x, y)
    assert got.device == GPU
    np.testing.assert_allclose(got.numpy(), a @ b, rtol=1e-4, atol=1e-4 * np.sqrt(n))
    runs = {"stageflow": _loop(lambda: sf.matmul(x, y), device.synchronize)}
    incumbent = _torch_matmul(a, b)
    if incumbent is not None:
        runs["torch.matmul"] = _loop(*incumbent)
    medians = interleaved_medians(runs)
    return {name: 2 * n**3 / seconds / 1e12 for name, seconds in medians.items()}


def sum_figures(device: GPUDevice, n: int) -> dict[str, float]:
    """GB/s of a sum of n float32 values on the GPU to one, by contender: stageflow's
    eager reduce_sum (a tree of reduction passes), torch.sum where torch sees a GPU."""
    values = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    x = sf.constant(values).gpu()
    np.testing.assert_allclose(float(sf.reduce_sum(x)), values.sum(dtype=np.float64),
                               rtol=1e-4, atol=1e-2)
    runs = {"stageflow": _loop(lambda: sf.reduce_sum(x), device.synchronize)}
    torch = _torch()
    if torch is not None:
        t = torch.from_numpy(values).cuda()
        runs["torch.sum"] = _loop(lambda: torch.sum(t), torch.cuda.synchronize)
    return {name: 4 * n / seconds / 1e9 for name, seconds in interleaved_medians(runs).items()}


def mlp(x, w1, b1, w2, b2):
    """The MLP's forward pass, written once for stageflow, torch and jax (`ops`)."""
    return sf.nn.softmax(sf.matmul(sf.tanh(sf.matmul(x, w1) + b1), w2) + b2)


def _mlp_incumbents(arrays: list[np.ndarray]) -> dict[str, tuple[Callable[[], object],
                                                                 Callable[[], object]]]:
    """The MLP in PyTorch eager and under jax.jit on their first CUDA GPU, where they see
    one: name -> (one call, wait for the GPU)."""
    found = {}
    torch = _torch()
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False
        tx, tw1, tb1, tw2, tb2 = (torch.from_numpy(a).cuda() for a in arrays)
        found["PyTorch eager"] = (
            lambda: torch.softmax(torch.tanh(tx @ tw1 + tb1) @ tw2 + tb2, dim=-1),
            torch.cuda.synchronize)
    gpu = _jax_gpu()
    if gpu is not None:
        import jax

        values = [jax.device_put(a, gpu) for a in arrays]

        @jax.jit
        def forward(x, w1, b1, w2, b2):
            h = jax.numpy.tanh(jax.numpy.matmul(x, w1, precision="highest") + b1)
            return jax.nn.softmax(jax.numpy.matmul(h, w2, precision="highest") + b2)

        forward(*values).block_until_ready()
        found["jax.jit"] = (lambda: forward(*values),
                            lambda: forward(*values).block_until_ready())
    return found


def mlp_figures(device: GPUDevice, batch: int) -> dict[str, float]:
    """Microseconds per call of the MLP on the GPU, by contender: stageflow's plan of
    launches, its launch graph, and the incumbents."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape).astype(np.float32) * scale for shape, scale in
              [((batch, 784), 1.0), ((784, 256), 0.05), ((256,), 0.1), ((256, 10), 0.1),
               ((10,), 0.1)]]
    tensors = [sf.constant(a).gpu() for a in arrays]
    staged = sf.function(mlp)
    with sf.device(GPU):
        for _ in range(3):  # compiled, recorded, replayed
            got = staged(*tensors)
    want = mlp(*[sf.constant(a) for a in arrays]).numpy()
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-6)

    def call(graphs: bool) -> Callable[[], object]:
        def run() -> object:
            sf.config.launch_graphs = graphs
            with sf.device(GPU):
                return staged(*tensors)
        return run

    runs = {"plan": _loop(call(False), device.synchronize),
            "graph": _loop(call(True), device.synchronize)}
    runs.update({name: _loop(*pair) for name, pair in _mlp_incumbents(arrays).items()})
    try:
        medians = interleaved_medians(runs)
    finally:
        sf.config.launch_graphs = True
    return {name: seconds * 1e6 for name, seconds in medians.items()}


def main(argv: list[str] | None = None) -> dict[str, dict[int, dict[str, float]]]:
    """Figures of the gelu chain by log2 n, and of the matrix products (TFLOP/s by
    contender) by n."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__)
    parser.add_argument("log2n", type=int, nargs="*", default=[24])
    parser.add_argument("--matmul", type=int, nargs="*", metavar="N",
                        help="sizes of the float32 products (default 4096 1024; emulated 64)")
    parser.add_argument("--mlp", type=int, nargs="*", metavar="BATCH",
                        help="batch sizes of the MLP (default 64; emulated 4)")
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
    results: dict[str, dict[int, dict[str, float]]] = {"gelu chain": {}, "matmul": {},
                                                       "mlp": {}, "sum": {}}
    for log2n in args.log2n:
        n = 1 << log2n
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal(n).astype(np.float32) for _ in range(3)]
        x, w, b = (sf.constant(a).gpu() for a in arrays)
        want = fused(*arrays)
        got = staged(x, w, b)
        assert got.device == GPU
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)

        runs = {
            "chain": _loop(lambda: staged(x, w, b), device.synchronize),  # noqa: B023
            "copy": _loop(lambda: device.duplicate(x._buffer), device.synchronize),  # noqa: B023
        }
        runs.update({name: _loop(*pair) for name, pair in _incumbents(arrays).items()})
        medians = interleaved_medians(runs)
        copy = 8 * n / medians["copy"] / 1e9
        figures = {name: 16 * n / seconds / 1e9 for name, seconds in medians.items()
                   if name != "copy"}
        chain = figures.pop("chain")
        results["gelu chain"][log2n] = {
            "chain GB/s": chain, "copy GB/s": copy, "ratio": chain / copy,
            **{f"{name} GB/s": value for name, value in figures.items()}}
        print(f"fused gelu chain on {device.describe()}, 2^{log2n} float32: "
              f"{chain:.1f} GB/s, device copy {copy:.1f} GB/s, {chain / copy:.2f}x "
              "(goal >= 0.8)")
        for name, value in figures.items():
            print(f"  {name}: {value:.1f} GB/s, {value / copy:.2f}x the copy; stageflow "
                  f"{chain / value:.2f}x it")
    sizes = args.matmul if args.matmul is not None else [64] if args.emulated else [4096, 1024]
    for n in sizes:
        figures = results["matmul"][n] = matmul_figures(device, n)
        ours = figures["stageflow"]
        others = "".join(f"; {name} {value:.2f} (stageflow {ours / value:.2f}x it)"
                         for name, value in figures.items() if name != "stageflow")
        print(f"float32 matmul {n}x{n}x{n} on {device.describe()}: {ours:.2f} TFLOP/s{others}")
    for log2n in args.log2n:
        figures = results["sum"][log2n] = sum_figures(device, 1 << log2n)
        ours = figures["stageflow"]
        others = "".join(f"; {name} {value:.1f} GB/s (stageflow {ours / value:.2f}x it)"
                         for name, value in figures.items() if name != "stageflow")
        print(f"reduce_sum of 2^{log2n} float32 on {device.describe()}: {ours:.1f} GB/s"
              f"{others}")
    for batch in args.mlp if args.mlp is not None else [4] if args.emulated else [64]:
        figures = results["mlp"][batch] = mlp_figures(device, batch)
        graph = figures["graph"]
        others = "".join(f"; {name} {value:.1f} us ({value / graph:.2f}x the graph's time)"
                         for name, value in figures.items() if name != "graph")
        print(f"MLP 784-256-10 forward, batch {batch}, on {device.describe()}: launch graph "
              f"{graph:.1f} us per call{others}")
    return results


if __name__ == "__main__":
    main()
