"""Large elementwise kernels run on blocks of rows on every core, with the same results."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf
from stageflow.runtime import row_parallel
from stageflow.runtime.row_parallel import RowParallelKernel


def _kernel_steps(function, *args):
    plan = function.get_concrete_function(*args).program.plan
    return [step.kernel for step in plan.steps if step.name == "kernel"]


@pytest.mark.parametrize("shape", [(1 << 18,), (513, 1031), (7, 64, 1024)])
def test_large_kernels_split_over_rows_give_the_eager_numbers(shape, monkeypatch):
    monkeypatch.setattr(row_parallel, "workers", lambda: 2)  # also on a one-core machine
    rng = np.random.default_rng(0)
    x, y = (sf.constant(rng.standard_normal(shape).astype(np.float32)) for _ in range(2))

    def f(a, b):
        return sf.tanh(a * b + 1.0) * 0.5 + a, sf.exp(-sf.abs(b))

    staged = sf.function(f)
    for got, expected in zip(staged(x, y), f(x, y), strict=True):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6, atol=1e-6)
    kernels = _kernel_steps(staged, x, y)
    assert kernels and all(isinstance(k, RowParallelKernel) for k in kernels)


def test_broadcasting_kernels_are_not_split():
    x = sf.ones((600, 300))
    bias = sf.ones((300,))
    staged = sf.function(lambda a, b: sf.tanh(a + b))
    np.testing.assert_allclose(staged(x, bias).numpy(), np.tanh(2.0) * np.ones((600, 300)),
                               rtol=1e-6)
    assert not any(isinstance(k, RowParallelKernel) for k in _kernel_steps(staged, x, bias))


def test_unknown_leading_dims_split_only_when_shapes_match(monkeypatch):
    monkeypatch.setattr(row_parallel, "workers", lambda: 2)
    spec = sf.TensorSpec([None, 512])
    staged = sf.function(lambda a, b: a * b + 1.0, input_signature=[spec, spec])
    big = np.full((1024, 512), 2.0, np.float32)
    one_row = np.full((1, 512), 3.0, np.float32)
    np.testing.assert_allclose(staged(big, big).numpy(), 5.0)
    np.testing.assert_allclose(staged(big, one_row).numpy(), 7.0)  # broadcasts: not split
    assert staged.tracing_count == 1
