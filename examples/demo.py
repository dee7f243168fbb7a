"""What stageflow does today, in one run: `python examples/demo.py`.

Runs the paper's first listing eagerly and staged, a few ops with NumPy semantics, the error
a shape mismatch gives, a staged training step's IR before and after optimisation (fused
kernels), its speed-up over eager, and the eager dispatch cost against NumPy.
"""

from __future__ import annotations

import timeit

import numpy as np

import stageflow as sf


def select(vector):
    A = sf.constant([[1.0, 0.0]])
    return sf.matmul(A, vector)


def main() -> None:
    print("== The paper's listing (section 4.1), eagerly ==")
    x = sf.constant([[2.0], [-2.0]])
    print(select(x))
    print("staged:", sf.function(select)(x))

    print("\n== NumPy semantics: broadcasting, indexing, dtypes ==")
    a = sf.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    print("a            =", a)
    print("a * 2 + 1    =", a * 2 + 1)
    print("a[:, ::-1]   =", a[:, ::-1])
    print("a - a.mean   =", a - sf.reduce_mean(a, axis=1, keepdims=True))
    print("softmax rows =", sf.exp(a - sf.reduce_logsumexp(a, axis=1, keepdims=True)))
    print("np.asarray   =", repr(np.asarray(a @ sf.transpose(a))))

    print("\n== Clear errors at the user's line ==")
    try:
        a + sf.constant([1.0, 2.0])
    except ValueError as error:
        print("ValueError:", error)
    try:
        a + sf.constant([1, 2, 3])
    except TypeError as error:
        print("TypeError:", error)

    print("\n== Staging: a training step traced, optimised and compiled ==")
    rng = np.random.default_rng(0)
    w = sf.Variable(rng.standard_normal((8, 4)).astype(np.float32) * 0.3)
    b = sf.Variable(np.zeros(4, np.float32))

    def train_step(x, y):
        with sf.GradientTape() as tape:
            logits = sf.nn.gelu(x @ w + b, approximate=True)
            loss = sf.reduce_mean(sf.nn.softmax_cross_entropy_with_logits(y, logits))
        dw, db = tape.gradient(loss, [w, b])
        w.assign_sub(0.1 * dw)
        b.assign_sub(0.1 * db)
        return loss

    staged = sf.function(train_step)
    x = sf.constant(rng.standard_normal((256, 8)).astype(np.float32))
    y = sf.one_hot(sf.constant(rng.integers(0, 4, 256)), 4)
    concrete = staged.get_concrete_function(x, y)
    traced = concrete.ir("traced")
    optimized = concrete.ir("optimized")
    print(f"traced: {traced.count(' = sf.')} ops; optimized: "
          f"{optimized.count(' = sf.')} ops, {optimized.count('attributes {sf.kernel}')} "
          "fused kernels. The first lines of the optimized IR:")
    print("\n".join(optimized.splitlines()[:8]))
    losses = [float(staged(x, y)) for _ in range(5)]
    print("loss over 5 staged steps:", " ".join(f"{v:.4f}" for v in losses))
    eager_s = min(timeit.repeat(lambda: train_step(x, y), number=20, repeat=3)) / 20
    staged_s = min(timeit.repeat(lambda: staged(x, y), number=20, repeat=3)) / 20
    print(f"eager {eager_s * 1e6:.0f} us/step, staged {staged_s * 1e6:.0f} us/step: "
          f"{eager_s / staged_s:.1f}x faster staged ({concrete.stats()['kernels']} kernels)")

    print("\n== Eager dispatch cost (x = x * a + b, (4, 4) float32) ==")
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((4, 4)).astype(np.float32) * s for s in (1.0, 0.5, 0.1)]
    tensors = [sf.constant(v) for v in arrays]
    numpy_us = _us_per_op(*arrays)
    stageflow_us = _us_per_op(*tensors)
    print(f"numpy {numpy_us:.2f} us/op, stageflow {stageflow_us:.2f} us/op "
          f"({stageflow_us / numpy_us:.2f}x; benchmarks/eager_overhead.py measures it properly)")


def _us_per_op(x, a, b, ops: int = 20_000) -> float:
    def loop():
        y = x
        for _ in range(ops // 2):
            y = y * a + b

    return min(timeit.repeat(loop, number=1, repeat=5)) / ops * 1e6


if __name__ == "__main__":
    main()
