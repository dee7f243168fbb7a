"""The small ResNet's largest activation, (32, 32, 32, 16) float32, through the ops its eager
step and its batch norms spend their memory traffic on: the ReLU, its gradient's select,
a residual add (eager: the route the executor keeps, compiled or NumPy's, against NumPy's
kernel) and batch norm's statistics, a sum over the leading axes (one staged call against
NumPy's ``sum``), timed round by round in one run.

    python -m benchmarks.eager_activations

(Run alone; `python -m benchmarks` measures their effect through `benchmarks.resnet`.)
"""

from __future__ import annotations

import numpy as np

import stageflow as sf
from benchmarks.timing import interleaved_medians
from stageflow.core.primitive import REGISTRY
from stageflow.runtime import eager_kernels
from stageflow.runtime.eager import EagerTrace

SHAPE = (32, 32, 32, 16)


def repeat(call, *args):
    def run(n: int) -> None:
        for _ in range(n):
            call(*args)

    return run


def eager_route(name: str, arrays: list[np.ndarray]):
    """The route a fresh eager executor keeps for this signature, after its compile and
    its trial (None: NumPy's kernel won or no program was built)."""
    trace = EagerTrace()
    tensors = tuple(sf.constant(a) for a in arrays)
    trace.process(REGISTRY[name], tensors, {})
    eager_kernels.settle()
    for _ in range(2 * eager_kernels.TRIAL_CALLS + 1):
        trace.process(REGISTRY[name], tensors, {})
    (route,) = trace._routes.values()
    return route


def main() -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    g = rng.standard_normal(SHAPE).astype(np.float32)
    cases = {"relu": [x], "select": [x > 0, g, np.asarray(np.float32(0))], "add": [x, g]}
    results = {}
    for name, arrays in cases.items():
        route = eager_route(name, arrays)
        kernel = REGISTRY[name].kernel
        runs = {"numpy": repeat(kernel, *arrays)}
        if route is not None:
            runs["kept route"] = repeat(route, *arrays)
        results[name] = times = interleaved_medians(runs, rounds=11)
        kept = times.get("kept route", times["numpy"])
        print(f"eager {name} {SHAPE}: kept {'compiled' if route else 'NumPy'} "
              f"{kept * 1e6:.0f} us, NumPy's kernel {times['numpy'] * 1e6:.0f} us "
              f"({times['numpy'] / kept:.2f}x)")
    statistics = sf.function(lambda v: sf.reduce_sum(v, axis=(0, 1, 2)))
    tx = sf.constant(x)
    exact = x.astype(np.float64).sum(axis=(0, 1, 2))  # float32 sums of 32,768 terms: ~1e-3
    np.testing.assert_allclose(statistics(tx).numpy(), exact, rtol=1e-5, atol=1e-2)
    results["batch norm sum"] = times = interleaved_medians(
        {"staged": repeat(statistics, tx), "numpy": repeat(x.sum, (0, 1, 2))}, rounds=11)
    print(f"reduce_sum over axes (0, 1, 2) of {SHAPE}: staged {times['staged'] * 1e6:.0f} us, "
          f"NumPy {times['numpy'] * 1e6:.0f} us ({times['numpy'] / times['staged']:.2f}x)")
    return results


if __name__ == "__main__":
    main()
