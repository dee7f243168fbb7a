"""HMC on a strongly correlated 2-D Gaussian (the paper's L2HMC benchmark without the learned
part), ported from the anchors' `hmc.py`: N chains, one sample = 10 leapfrog steps and a
Metropolis accept/reject; grad U from a GradientTape (`sf.grad`), never by hand.

    python -m benchmarks.hmc [N ...]        (default N = 1 16 256 4096)

Prints samples/s of stageflow eager, stageflow staged (`sf.function`) and NumPy with an
analytic gradient, measured in one run, and the staged/eager and staged/NumPy ratios; then
jax.jit, torch.compile and tf.function where installed (`benchmarks.incumbents`).
"""

from __future__ import annotations

import sys

import numpy as np

import stageflow as sf
from benchmarks import incumbents
from benchmarks.timing import interleaved_medians

EPS = 0.1
N_LEAPFROG = 10
SIGMA = np.array([[1.0, 0.95], [0.95, 1.0]])
A = np.linalg.inv(SIGMA).astype(np.float32)  # U(x) = 0.5 x^T A x


def make_sampler(staged: bool):
    A_t = sf.constant(A)

    def energy(x):
        return 0.5 * sf.reduce_sum((x @ A_t) * x, axis=1)

    def total_energy(x):
        return sf.reduce_sum(energy(x))

    grad_u = sf.grad(total_energy)

    def sample(x, generator):
        p0 = generator.normal(x.shape)
        u = generator.uniform((x.shape[0],))
        p = p0 - 0.5 * EPS * grad_u(x)
        x_new = x
        for i in range(N_LEAPFROG):
            x_new = x_new + EPS * p
            if i < N_LEAPFROG - 1:
                p = p - EPS * grad_u(x_new)
        p = p - 0.5 * EPS * grad_u(x_new)
        h0 = energy(x) + 0.5 * sf.reduce_sum(p0 * p0, axis=1)
        h1 = energy(x_new) + 0.5 * sf.reduce_sum(p * p, axis=1)
        accept = sf.log(u) < h0 - h1
        return sf.where(accept[:, None], x_new, x)

    return sf.function(sample) if staged else sample


def numpy_sampler():
    def energy(x):
        return 0.5 * np.sum((x @ A) * x, axis=1)

    def sample(x, rng):
        p0 = rng.standard_normal(x.shape, dtype=np.float32)
        u = rng.random(x.shape[0], dtype=np.float32)
        p = p0 - 0.5 * EPS * (x @ A)
        x_new = x
        for i in range(N_LEAPFROG):
            x_new = x_new + EPS * p
            if i < N_LEAPFROG - 1:
                p = p - EPS * (x_new @ A)
        p = p - 0.5 * EPS * (x_new @ A)
        h0 = energy(x) + 0.5 * np.sum(p0 * p0, axis=1)
        h1 = energy(x_new) + 0.5 * np.sum(p * p, axis=1)
        accept = np.log(u) < h0 - h1
        return np.where(accept[:, None], x_new, x)

    return sample


def chain_runner(sample, x, generator):
    state = {"x": x}

    def run(n: int) -> None:
        x = state["x"]
        for _ in range(n):
            x = sample(x, generator)
        state["x"] = x

    return run, state


def main(sizes: list[int]) -> dict[int, dict[str, float]]:
    results = {}
    print("HMC, 10 leapfrog steps per sample, 2-D correlated Gaussian (samples/s, medians)")
    for n in sizes:
        x0 = np.random.default_rng(0).standard_normal((n, 2)).astype(np.float32)
        eager_run, _ = chain_runner(make_sampler(False), sf.constant(x0),
                                    sf.random.Generator.from_seed(1))
        staged_run, staged_state = chain_runner(make_sampler(True), sf.constant(x0),
                                                sf.random.Generator.from_seed(1))
        numpy_run, _ = chain_runner(numpy_sampler(), x0, np.random.default_rng(1))
        medians = interleaved_medians(
            {"eager": eager_run, "staged": staged_run, "numpy": numpy_run},
            rounds=5, min_time=0.2)
        rates = {name: n / t for name, t in medians.items()}
        results[n] = rates
        cov = np.cov(staged_state["x"].numpy().T).round(2).tolist() if n >= 256 else ""
        print(f"  N={n:5d}  eager {rates['eager']:12,.0f}  staged {rates['staged']:12,.0f}  "
              f"numpy {rates['numpy']:12,.0f}   "
              f"staged/eager {rates['staged'] / rates['eager']:5.1f}x"
              f"  staged/numpy {rates['staged'] / rates['numpy']:5.2f}x  {cov}")
        for name, rate in incumbents.hmc(n).items():
            rates[name] = rate
            print(f"  N={n:5d}  {name:13s} {rate:12,.0f}   {name}/numpy "
                  f"{rate / rates['numpy']:5.2f}x  (timed after the above)")
    return results


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1, 16, 256, 4096])
