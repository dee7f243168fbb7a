"""Optional incumbent columns: the benchmark workloads staged by jax.jit, torch.compile and
tf.function, timed in the same process as stageflow's when those frameworks are importable.

None of them is a dependency of stageflow or of its tests: each workload here returns
``{framework: figure}`` for the frameworks that import and ``{}`` when none does, and the
benchmark scripts print one extra line per entry. The workloads follow the definitions of the
anchors' scripts (``shared/anchors/``: the same shapes, data, leapfrog steps and loss), with the
anchors' staging choices (``torch.compile(fullgraph=True, dynamic=False)``, gradients from
``torch.func`` there and from a ``GradientTape`` in TensorFlow), so the figures compare with
ANCHORS.md and, being measured in the same run, with stageflow's.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.timing import interleaved_medians

Reduce = Callable[..., Any]  # (x, axis=None, keepdims=False) -> reduced tensor
GELU_C = float(np.sqrt(2.0 / np.pi))


@dataclass(frozen=True)
class Backend:
    """One framework's staging decorator and the few operations the workloads use, so that
    each workload is written once for all three frameworks."""

    name: str
    stage: Callable[[Callable], Callable]
    asarray: Callable[[np.ndarray], Any]
    sync: Callable[[Any], Any]
    sum: Reduce
    mean: Reduce
    max: Reduce
    tanh: Callable[[Any], Any]
    log: Callable[[Any], Any]
    exp: Callable[[Any], Any]
    relu: Callable[[Any], Any]
    where: Callable[[Any, Any, Any], Any]
    value_and_grad: Callable[[Callable], Callable]  # f(params, *args) -> (value, grads)
    new_key: Callable[[int], Any]
    normal: Callable[[Any, tuple[int, ...]], tuple[Any, Any]]  # (key, shape) -> (draw, key)
    uniform: Callable[[Any, tuple[int, ...]], tuple[Any, Any]]


def _jax() -> Backend:
    import jax
    import jax.numpy as jnp

    def draw(sampler: Callable) -> Callable:
        def sample(key: Any, shape: tuple[int, ...]) -> tuple[Any, Any]:
            key, sub = jax.random.split(key)
            return sampler(sub, shape), key
        return sample

    return Backend(
        name="jax.jit", stage=jax.jit, asarray=jnp.asarray, sync=jax.block_until_ready,
        sum=jnp.sum, mean=jnp.mean, max=jnp.max, tanh=jnp.tanh, log=jnp.log, exp=jnp.exp,
        relu=jax.nn.relu, where=jnp.where, value_and_grad=jax.value_and_grad,
        new_key=jax.random.key, normal=draw(jax.random.normal), uniform=draw(jax.random.uniform))


def _torch() -> Backend:
    import torch

    def reduction(op: Callable) -> Reduce:
        def reduce(x: Any, axis: int | None = None, keepdims: bool = False) -> Any:
            return op(x) if axis is None else op(x, dim=axis, keepdim=keepdims)
        return reduce

    def value_and_grad(f: Callable) -> Callable:
        # torch.autograd.grad breaks the graph under torch.compile; torch.func does not.
        grad_and_value = torch.func.grad_and_value(f)

        def both(params: Any, *args: Any) -> tuple[Any, Any]:
            grads, value = grad_and_value(params, *args)
            return value, grads
        return both

    def seed(value: int) -> None:
        torch.manual_seed(value)  # a global generator: the key stays None

    return Backend(
        name="torch.compile", stage=lambda f: torch.compile(f, fullgraph=True, dynamic=False),
        asarray=lambda a: torch.from_numpy(np.array(a, dtype=np.float32)), sync=lambda t: t,
        sum=reduction(torch.sum), mean=reduction(torch.mean), max=reduction(torch.amax),
        tanh=torch.tanh, log=torch.log, exp=torch.exp, relu=torch.relu, where=torch.where,
        value_and_grad=value_and_grad, new_key=seed,
        normal=lambda key, shape: (torch.randn(shape), key),
        uniform=lambda key, shape: (torch.rand(shape), key))


def _tensorflow() -> Backend:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    def reduction(op: Callable) -> Reduce:
        def reduce(x: Any, axis: int | None = None, keepdims: bool = False) -> Any:
            return op(x, axis=axis, keepdims=keepdims)
        return reduce

    def value_and_grad(f: Callable) -> Callable:
        def both(params: Any, *args: Any) -> tuple[Any, Any]:
            with tf.GradientTape() as tape:
                tape.watch(params)
                value = f(params, *args)
            return value, tape.gradient(value, params)
        return both

    def seed(value: int) -> None:
        tf.random.set_seed(value)  # a global generator: the key stays None

    return Backend(
        name="tf.function", stage=tf.function,
        asarray=lambda a: tf.constant(np.asarray(a, dtype=np.float32)), sync=lambda t: t,
        sum=reduction(tf.reduce_sum), mean=reduction(tf.reduce_mean),
        max=reduction(tf.reduce_max), tanh=tf.tanh, log=tf.math.log, exp=tf.exp,
        relu=tf.nn.relu, where=tf.where, value_and_grad=value_and_grad, new_key=seed,
        normal=lambda key, shape: (tf.random.normal(shape), key),
        uniform=lambda key, shape: (tf.random.uniform(shape), key))


FRAMEWORKS: dict[str, Callable[[], Backend]] = {
    "jax": _jax, "torch": _torch, "tensorflow": _tensorflow}


def backends() -> list[Backend]:
    """The backends whose framework is installed; the check does not import it, so a script
    run without them pays nothing."""
    return [make() for module, make in FRAMEWORKS.items() if importlib.util.find_spec(module)]


def _time(runs: dict[str, Callable[[int], object]], rounds: int = 5) -> dict[str, float]:
    """Median seconds per iteration, the frameworks interleaved round by round (fewer rounds
    than stageflow's own figures: these are a comparison, and torch.compile is slow to warm)."""
    return interleaved_medians(runs, rounds=rounds, min_time=0.1) if runs else {}


def call_overhead() -> dict[str, float]:
    """Microseconds per cache-hit call of a staged ``f(x) = x + 1`` on (4, 4) float32, waiting
    for each result (ANCHORS.md's figure: jax.jit dispatches asynchronously)."""
    x = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    runs = {}
    for backend in backends():
        staged = backend.stage(lambda t: t + 1.0)
        arg = backend.asarray(x)
        np.testing.assert_allclose(np.asarray(staged(arg)), x + 1.0)

        def run(n: int, staged: Callable = staged, arg: Any = arg,
                sync: Callable = backend.sync) -> None:
            for _ in range(n):
                sync(staged(arg))
        runs[backend.name] = run
    return {name: t * 1e6 for name, t in _time(runs).items()}


def fused_elementwise(log2: int) -> dict[str, float]:
    """GB/s (16 bytes per element) of ``gelu_tanh(x * w + b) * 0.5 + x`` staged, on 2**log2
    float32 elements, checked against a float64 NumPy evaluation."""
    n = 1 << log2
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    z = x.astype(np.float64) * w + b
    reference = 0.5 * z * (1 + np.tanh(GELU_C * (z + 0.044715 * z**3))) * 0.5 + x
    runs = {}
    for backend in backends():
        def fused(x: Any, w: Any, b: Any, tanh: Callable = backend.tanh) -> Any:
            z = x * w + b
            return 0.5 * z * (1.0 + tanh(GELU_C * (z + 0.044715 * z * z * z))) * 0.5 + x

        staged = backend.stage(fused)
        args = tuple(backend.asarray(a) for a in (x, w, b))
        np.testing.assert_allclose(np.asarray(staged(*args)), reference, atol=1e-3)

        def run(k: int, staged: Callable = staged, args: tuple = args,
                sync: Callable = backend.sync) -> None:
            for _ in range(k):
                sync(staged(*args))
        runs[backend.name] = run
    return {name: 16 * n / t / 1e9 for name, t in _time(runs).items()}


def _hmc_sampler(backend: Backend) -> Callable:
    """One HMC sample of every chain, the gradient of U by the framework's autodiff."""
    from benchmarks.hmc import EPS, N_LEAPFROG, A  # here: benchmarks.hmc imports this module

    F = backend
    a = F.asarray(A)

    def energy(x: Any) -> Any:
        return 0.5 * F.sum((x @ a) * x, axis=1)

    value_and_grad = F.value_and_grad(lambda x: F.sum(energy(x)))

    def grad_u(x: Any) -> Any:
        return value_and_grad(x)[1]

    def sample(x: Any, key: Any) -> tuple[Any, Any]:
        p0, key = F.normal(key, tuple(x.shape))
        u, key = F.uniform(key, (x.shape[0],))
        p = p0 - 0.5 * EPS * grad_u(x)
        x_new = x
        for i in range(N_LEAPFROG):
            x_new = x_new + EPS * p
            if i < N_LEAPFROG - 1:
                p = p - EPS * grad_u(x_new)
        p = p - 0.5 * EPS * grad_u(x_new)
        h0 = energy(x) + 0.5 * F.sum(p0 * p0, axis=1)
        h1 = energy(x_new) + 0.5 * F.sum(p * p, axis=1)
        accept = F.log(u) < h0 - h1
        return F.where(accept[:, None], x_new, x), key

    return F.stage(sample)


def hmc(n_chains: int) -> dict[str, float]:
    """Samples/s of HMC on the correlated 2-D Gaussian with `n_chains` chains."""
    x0 = np.random.default_rng(0).standard_normal((n_chains, 2)).astype(np.float32)
    runs = {}
    for backend in backends():
        sample = _hmc_sampler(backend)
        state = {"x": backend.asarray(x0), "key": backend.new_key(0)}

        def run(n: int, sample: Callable = sample, state: dict = state,
                sync: Callable = backend.sync) -> None:
            x, key = state["x"], state["key"]
            for _ in range(n):
                x, key = sample(x, key)
            state["x"], state["key"] = sync(x), key
        runs[backend.name] = run
    return {name: n_chains / t for name, t in _time(runs).items()}


def _mlp_step(backend: Backend, lr: float) -> Callable:
    """One SGD step of the 784-256-256-10 MLP: (params, x, y) -> (new params, loss)."""
    F = backend

    def loss_fn(params: list, x: Any, y: Any) -> Any:
        h = x
        for i in range(0, len(params) - 2, 2):
            h = F.relu(h @ params[i] + params[i + 1])
        logits = h @ params[-2] + params[-1]
        m = F.max(logits, axis=1, keepdims=True)
        lse = m + F.log(F.sum(F.exp(logits - m), axis=1, keepdims=True))
        return F.mean(F.sum((lse - logits) * y, axis=1))

    value_and_grad = F.value_and_grad(loss_fn)

    def train_step(params: list, x: Any, y: Any) -> tuple[list, Any]:
        loss, grads = value_and_grad(params, x, y)
        return [p - lr * g for p, g in zip(params, grads, strict=True)], loss

    return F.stage(train_step)


def mlp_train(batch: int) -> dict[str, float]:
    """Steps/s of the MLP's SGD training step at `batch`, the first loss checked against
    NumPy's hand-written forward pass."""
    from benchmarks.mlp_train import init_params, make_data, numpy_train_step  # see _hmc

    x, y = make_data(batch)
    expected = numpy_train_step(init_params(), x, y)
    runs = {}
    for backend in backends():
        run, first = mlp_steps(backend, x, y)
        np.testing.assert_allclose(first, expected, rtol=1e-4)
        runs[backend.name] = run
    return {name: 1.0 / t for name, t in _time(runs).items()}


def mlp_steps(backend: Backend, x: np.ndarray, y: np.ndarray) -> tuple[Callable[[int], None],
                                                                        float]:
    """`run(n)`, n of the MLP's SGD steps of `backend` on (x, y) from the benchmark's initial
    weights (kept between runs), and the first step's loss."""
    from benchmarks.mlp_train import LR, init_params  # see _hmc

    step = _mlp_step(backend, LR)
    data = (backend.asarray(x), backend.asarray(y))
    state = {"params": [backend.asarray(p) for p in init_params()]}
    first = float(np.asarray(step(state["params"], *data)[1]))

    def run(n: int) -> None:
        params = state["params"]
        for _ in range(n):
            params, loss = step(params, *data)
        backend.sync(loss)
        state["params"] = params

    return run, first


def first_call_child(framework: str) -> None:
    """In a fresh process: milliseconds from building the MLP step to its first result, the
    framework imported and the inputs made before the clock starts (as the anchors time it:
    the framework's one-time lazy initialisation counts, its import does not)."""
    from benchmarks.mlp_train import LR, init_params, make_data  # see _hmc

    backend = FRAMEWORKS[framework]()
    x, y = (backend.asarray(a) for a in make_data(64))
    params = [backend.asarray(p) for p in init_params()]
    backend.sync(params)
    start = time.perf_counter()
    new_params, loss = _mlp_step(backend, LR)(params, x, y)
    backend.sync(loss)
    print(json.dumps({"first_ms": (time.perf_counter() - start) * 1e3}))


def installed() -> list[str]:
    """The incumbent frameworks importable here (checked without importing them)."""
    return [name for name in FRAMEWORKS if importlib.util.find_spec(name)]


def first_call_ms(framework: str) -> float:
    """The MLP step's first call staged by `framework`, in a fresh process (see
    `first_call_child`; torch.compile takes tens of seconds here)."""
    code = f"from benchmarks.incumbents import first_call_child; first_call_child({framework!r})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    return json.loads(done.stdout.strip().splitlines()[-1])["first_ms"]
