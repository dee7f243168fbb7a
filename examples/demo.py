"""What stageflow does today, in one run: `python examples/demo.py`.

Runs the paper's first listing eagerly, a few ops with NumPy semantics, the error a shape
mismatch gives, and the eager dispatch cost against NumPy.
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
