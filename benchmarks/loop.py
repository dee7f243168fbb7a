"""A staged loop: 1000 steps of ``h = tanh(h @ W + x)``, h (1, 64), W (64, 64), float32.

    python -m benchmarks.loop

The loop is one `sf.while_loop` (through `sf.fori_loop`) in an `sf.function`: traced once,
its body once in the IR, compiled with the rest of the function into one machine-code call.
Printed: iterations per second of the staged loop, of NumPy's Python loop over the same
steps, and of jax.jit's ``lax.fori_loop`` where jax is installed, the best of several
alternating rounds (the machine is noisy, and interference only slows a round down); then
the first call of each (trace and compile included), each in a fresh process.
Goal: at least jax.jit's iterations per second, first call no slower than its.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

import stageflow as sf
from benchmarks.timing import interleaved_best

STEPS = 1000
WIDTH = 64
FIRST_CALL_RUNS = 3


def make_data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((WIDTH, WIDTH)) * 0.1).astype(np.float32)
    x = rng.standard_normal((1, WIDTH)).astype(np.float32)
    return np.zeros((1, WIDTH), np.float32), w, x


def staged_loop() -> sf.Function:
    @sf.function
    def loop(h, w, x, steps):
        return sf.fori_loop(0, steps, lambda i, h: sf.tanh(sf.matmul(h, w) + x), h)

    return loop


def numpy_loop(h: np.ndarray, w: np.ndarray, x: np.ndarray, steps: int) -> np.ndarray:
    for _ in range(steps):
        h = np.tanh(h @ w + x)
    return h


def jax_loop():  # noqa: ANN201 - jax is optional
    import jax
    from jax import lax

    @jax.jit
    def loop(h, w, x, steps):
        return lax.fori_loop(0, steps, lambda i, h: jax.numpy.tanh(h @ w + x), h)

    return loop


def _repeat(call) -> object:  # noqa: ANN001
    def run(n: int) -> None:
        for _ in range(n):
            call()
    return run


CHILD = r"""
import json, sys, time
framework = sys.argv[1]
from benchmarks.loop import STEPS, jax_loop, make_data, staged_loop
h, w, x = make_data()
if framework == "stageflow":
    import stageflow as sf
    args = [sf.constant(a) for a in (h, w, x)] + [sf.constant(STEPS)]
    loop = staged_loop()
    start = time.perf_counter()
    loop(*args).numpy()
else:
    import jax
    loop = jax_loop()
    args = [jax.numpy.asarray(a) for a in (h, w, x)] + [STEPS]
    jax.block_until_ready(args[:3])
    start = time.perf_counter()
    loop(*args).block_until_ready()
print(json.dumps({"first_ms": (time.perf_counter() - start) * 1e3}))
"""


def first_call_ms(framework: str) -> float:
    """The loop's first call (trace, compile, run) in a fresh process with an empty
    compilation cache, the framework imported and the inputs made before the clock starts."""
    with tempfile.TemporaryDirectory() as empty:
        env = {**os.environ, "STAGEFLOW_CACHE_DIR": empty, "STAGEFLOW_CACHE": "1"}
        done = subprocess.run([sys.executable, "-c", CHILD, framework], capture_output=True,
                              text=True, check=True, env=env,
                              cwd=os.path.dirname(os.path.dirname(__file__)))
    return json.loads(done.stdout.strip().splitlines()[-1])["first_ms"]


def main() -> dict[str, float]:
    h, w, x = make_data()
    want = numpy_loop(h, w, x, STEPS)
    loop = staged_loop()
    args = [sf.constant(a) for a in (h, w, x)] + [sf.constant(STEPS)]
    np.testing.assert_allclose(loop(*args).numpy(), want, rtol=1e-4, atol=1e-5)
    reasons = loop.get_concrete_function(*args).stats()["steps_reasons"]
    runs = {"stageflow staged": _repeat(lambda: loop(*args)),
            "numpy loop": _repeat(lambda: numpy_loop(h, w, x, STEPS))}
    have_jax = importlib.util.find_spec("jax") is not None
    if have_jax:
        import jax

        jloop = jax_loop()
        jargs = [jax.numpy.asarray(a) for a in (h, w, x)]
        np.testing.assert_allclose(np.asarray(jloop(*jargs, STEPS)), want, rtol=1e-4,
                                   atol=1e-5)
        runs["jax.jit"] = _repeat(lambda: jloop(*jargs, STEPS).block_until_ready())
    best = interleaved_best(runs, rounds=7, min_time=0.2)
    rates = {name: STEPS / seconds for name, seconds in best.items()}
    print(f"{STEPS} steps of h = tanh(h @ W + x), h (1, {WIDTH}), best of 7 alternating rounds"
          f"{'' if not reasons else f' (runs as steps: {reasons})'}")
    for name, rate in rates.items():
        print(f"  {name:18s} {rate / 1e6:6.2f} M iterations/s")
    firsts = {"stageflow": statistics.median(first_call_ms("stageflow")
                                             for _ in range(FIRST_CALL_RUNS))}
    if have_jax:
        firsts["jax.jit"] = statistics.median(first_call_ms("jax")
                                              for _ in range(FIRST_CALL_RUNS))
    for name, ms in firsts.items():
        print(f"  first call, {name:9s} {ms:7.1f} ms (median of {FIRST_CALL_RUNS} fresh "
              "processes)")
    figures = {f"{name} it/s": rate for name, rate in rates.items()}
    figures.update({f"{name} first ms": ms for name, ms in firsts.items()})
    return figures


if __name__ == "__main__":
    main()
