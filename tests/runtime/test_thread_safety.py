"""Compiled functions updating variables from several threads lose no update: a call holds
the locks of the variables it assigns (its machine code runs without the GIL)."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

import stageflow as sf
from stageflow.runtime.compiled_program import PROGRAM_MAX_KERNEL_ELEMENTS

# Races between threads, with the cores to themselves.
pytestmark = pytest.mark.exclusive

THREADS, CALLS = 6, 150
# A variable this large is updated by a compiled call as kernel steps split over the cores.
# Each update takes long enough that, without the locks, these threads lose most of their
# updates within a few dozen calls each.
LARGE, LARGE_CALLS = PROGRAM_MAX_KERNEL_ELEMENTS, CALLS // 3


def calls_for(size: int) -> int:
    return LARGE_CALLS if size >= LARGE else CALLS


def hammer(fn, calls: int = CALLS) -> None:
    def work() -> None:
        for _ in range(calls):
            fn()

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


@pytest.mark.parametrize("size", [1, LARGE], ids=["program", "split-kernel-steps"])
def test_concurrent_assign_add_loses_nothing(size):
    v = sf.Variable(np.zeros(size, np.float32))
    ones = sf.ones((size,))

    @sf.function
    def increment():
        v.assign_add(ones)

    hammer(increment, calls_for(size))
    np.testing.assert_array_equal(v.numpy()[:4],
                                  np.full(min(size, 4), THREADS * calls_for(size)))


def test_two_functions_sharing_variables_neither_lose_updates_nor_deadlock():
    a, b = sf.Variable(0.0), sf.Variable(0.0)

    @sf.function
    def forwards():
        a.assign_add(1.0)
        b.assign_add(2.0)

    @sf.function
    def backwards():
        b.assign_add(1.0)
        a.assign_add(2.0)

    threads = [threading.Thread(target=lambda f=f: [f() for _ in range(CALLS)])
               for f in (forwards, backwards) * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert float(a.numpy()) == float(b.numpy()) == 3 * 3 * CALLS


def test_a_training_step_from_threads_counts_every_step():
    w = sf.Variable(np.ones((8, 8), np.float32))
    opt = sf.optimizers.SGD(1e-3)
    x = sf.ones((4, 8))

    @sf.function
    def step():
        with sf.GradientTape() as tape:
            loss = sf.reduce_sum(sf.matmul(x, w))
        opt.apply_gradients([(tape.gradient(loss, w), w)])

    hammer(step)
    assert int(opt.iterations.numpy()) == THREADS * CALLS
    np.testing.assert_allclose(w.numpy(), 1.0 - 1e-3 * 4 * THREADS * CALLS, rtol=1e-4)


# Found by the threads campaign (`python -m stageflow.testing.threads`).

@pytest.mark.parametrize("size", [1, LARGE], ids=["scalar", "large"])
def test_eager_updates_beside_compiled_ones_lose_nothing(size):
    """Eager `assign_add` read the value, added (NumPy releases the GIL on large arrays)
    and stored: an update made meanwhile by another thread, eager or compiled, was lost."""
    v = sf.Variable(np.zeros(size, np.float32))
    ones = sf.ones((size,))

    @sf.function
    def increment():
        v.assign_add(ones)

    def eager():
        v.assign_add(ones)
        v.assign_sub(ones)
        v.assign_add(ones)

    calls = calls_for(size)
    threads = [threading.Thread(target=lambda f=f: [f() for _ in range(calls)])
               for f in (increment, eager) * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    np.testing.assert_array_equal(v.numpy()[:4], np.full(min(size, 4), 2 * 3 * calls))


def test_interpreted_assign_add_loses_nothing():
    """The interpreter (`jit=False`) ran a variable's read and write without its lock."""
    v = sf.Variable(np.zeros(LARGE, np.float32))

    @sf.function(jit=False)
    def increment():
        v.assign_add(1.0)

    hammer(increment, LARGE_CALLS)
    np.testing.assert_array_equal(v.numpy()[:4], np.full(4, THREADS * LARGE_CALLS))



@pytest.mark.parametrize("jit", [True, False])
def test_concurrent_first_calls_create_the_variable_once(jit):
    """Threads making the first call of a method that creates its variable then: the one
    first trace creates it while the others wait, and every call adds to it. (Before, a
    thread could start a trace after the first had begun, before it created the variable,
    and was refused for creating one on a call other than the first.)"""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # hand the GIL over often, so that the threads interleave
    try:
        for trial in range(20):
            class Counter(sf.Module):
                def __init__(self, start: float) -> None:
                    super().__init__()
                    self.start, self.total = start, None

                @sf.function(jit=jit)
                def __call__(self, y):
                    if self.total is None:
                        self.total = sf.Variable(self.start)
                    self.total.assign_add(1.0)
                    return y + self.total

            counter = Counter(float(trial))
            errors: list[Exception] = []

            def call(counter=counter, errors=errors) -> None:
                try:
                    counter(sf.constant([0.0]))
                except Exception as error:  # noqa: BLE001 - what the test looks for
                    errors.append(error)

            threads = [threading.Thread(target=call) for _ in range(THREADS)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert not errors, errors[0]
            assert float(counter.total.numpy()) == trial + THREADS
    finally:
        sys.setswitchinterval(old)
