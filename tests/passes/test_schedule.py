"""The `schedule` pass on a traced training step: each bucket's all-reduce starts as soon as
its gradients are computed, while the backward pass goes on, and is waited for only where
the update needs it; the step computes the same numbers eagerly, interpreted and compiled.

The collective is an in-process stand-in registered under the names a worker's group
registers (`worker_collectives`): its start keeps twice the values (two replicas with the
same gradients) and its wait returns them, recording the calls."""

from __future__ import annotations

import re

import numpy as np
import pytest

import stageflow as sf
from stageflow.distribute import worker_collectives
from stageflow.primitives.control import register_named

GROUP = "schedule-test"
SIZES = (12, 16, 16, 4)
LR = 0.01


class StandIn:
    """A collective whose start doubles a copy of the bucket and whose wait returns it."""

    def __init__(self) -> None:
        self.kept: dict[int, np.ndarray] = {}
        self.calls: list[tuple[str, int]] = []

    def start(self, value: np.ndarray) -> np.ndarray:
        ticket = len(self.calls)
        self.kept[ticket] = np.array(value) * 2
        self.calls.append(("start", value.size))
        return np.asarray(ticket, np.int64)

    def wait(self, ticket: np.ndarray) -> np.ndarray:
        self.calls.append(("wait", int(ticket)))
        return self.kept.pop(int(ticket))


@pytest.fixture
def stand_in():
    collective = StandIn()
    register_named(worker_collectives.start_name(GROUP, "sum"), collective.start)
    register_named(worker_collectives.wait_name(GROUP), collective.wait)
    return collective


def weights() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [(rng.normal(size=(m, n)) / np.sqrt(m)).astype(np.float32)
            for m, n in zip(SIZES, SIZES[1:], strict=False)]


def make_step(variables: list[sf.Variable], bucket_bytes: int, **options):
    @sf.function(**options)
    def step(x):
        with sf.GradientTape() as tape:
            h = x
            for w in variables:
                h = sf.tanh(sf.matmul(h, w))
            loss = sf.reduce_sum(h * h)
        grads = tape.gradient(loss, variables)
        summed = worker_collectives.all_reduce_across_workers(GROUP, "sum", grads,
                                                              bucket_bytes)
        for w, g in zip(variables, summed, strict=True):
            w.assign_sub(LR * g)
        return loss

    return step


def expected(x: np.ndarray) -> list[np.ndarray]:
    """The weights after one step whose gradients two identical replicas summed."""
    variables = [sf.Variable(w) for w in weights()]
    with sf.GradientTape() as tape:
        h = sf.constant(x)
        for w in variables:
            h = sf.tanh(sf.matmul(h, w))
        loss = sf.reduce_sum(h * h)
    grads = tape.gradient(loss, variables)
    return [w.numpy() - LR * 2 * g.numpy() for w, g in zip(variables, grads, strict=True)]


@pytest.mark.parametrize("options", [{"jit": True}, {"jit": False}], ids=["compiled",
                                                                          "interpreted"])
def test_a_step_with_buckets_gives_the_numbers_of_one_all_reduce(stand_in, options):
    x = np.random.default_rng(1).normal(size=(8, SIZES[0])).astype(np.float32)
    variables = [sf.Variable(w) for w in weights()]
    make_step(variables, bucket_bytes=16 * 16 * 4, **options)(x)
    for got, want in zip([v.numpy() for v in variables], expected(x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # one bucket per weight (each fills a bucket), the last layer's first
    starts = [size for kind, size in stand_in.calls if kind == "start"]
    assert starts == [16 * 4, 16 * 16, 12 * 16]


def test_each_bucket_starts_before_the_backward_pass_goes_on(stand_in):
    variables = [sf.Variable(w) for w in weights()]
    step = make_step(variables, bucket_bytes=16 * 16 * 4)
    lines = step.get_concrete_function(sf.TensorSpec((8, SIZES[0]), sf.float32)).ir(
        "optimized").splitlines()

    def where(pattern: str) -> list[int]:
        return [i for i, line in enumerate(lines) if re.search(pattern, line)]

    starts, waits = where(r'schedule = "early"'), where(r'schedule = "late"')
    products, updates = where(r"sf\.matmul"), where(r"sf\.assign_variable")
    assert len(starts) == len(waits) == len(variables)
    # The last layer's bucket starts before the products of the earlier layers' gradients,
    # the second before the first layer's; every wait comes after every product, and
    # before the update that reads it.
    assert starts[0] < products[-2] and starts[1] < products[-1]
    assert min(waits) > max(products)
    assert max(waits) < max(updates)


def test_without_buckets_to_overlap_the_order_is_the_traced_one(stand_in):
    variables = [sf.Variable(w) for w in weights()]
    step = make_step(variables, bucket_bytes=1 << 20)
    text = step.get_concrete_function(sf.TensorSpec((8, SIZES[0]), sf.float32)).ir(
        "optimized")
    assert text.count('schedule = "early"') == 1
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if 'schedule = "early"' in line)
    assert all("sf.matmul" not in line for line in lines[start:])
