"""`sf.py_func` and `sf.numpy_function`: Python called from eager code, from the
interpreter and from compiled programs (machine code calling back into Python), with the
callback's exceptions reaching the caller unchanged and the function healthy after."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

import stageflow as sf

MODES = ["eager", "interpreted", "compiled"]


def staged(mode: str, fn):
    return fn if mode == "eager" else sf.function(fn, jit=mode == "compiled")


@pytest.mark.parametrize("mode", MODES)
def test_numpy_function_gets_arrays_and_py_func_gets_tensors(mode):
    seen = []

    def with_numpy(a):
        seen.append(type(a))
        return np.sort(a)

    def with_tensors(a):
        seen.append(type(a))
        return sf.reduce_sum(a, axis=0, keepdims=True) * a

    def f(x):
        return (sf.numpy_function(with_numpy, [x * 2.0], sf.TensorSpec([4])) + 1.0,
                sf.py_func(with_tensors, [x], sf.TensorSpec([4])))

    x = sf.constant([3.0, 1.0, 2.0, 0.0])
    sorted_, scaled = staged(mode, f)(x)
    np.testing.assert_array_equal(sorted_.numpy(), [1.0, 3.0, 5.0, 7.0])
    np.testing.assert_array_equal(scaled.numpy(), x.numpy() * 6.0)
    assert seen == [np.ndarray, sf.Tensor]


def test_compiled_programs_call_back_without_python_steps():
    count = []

    def step(a):
        count.append(1)
        return a + 1

    @sf.function
    def loop(x, n):
        return sf.fori_loop(0, n, lambda i, v: sf.numpy_function(step, [v],
                                                                  sf.TensorSpec([2])), x)

    x = sf.constant([1.0, 2.0])
    np.testing.assert_array_equal(loop(x, sf.constant(7)).numpy(), [8.0, 9.0])
    assert len(count) == 7
    concrete = loop.get_concrete_function(x, sf.constant(7))
    assert concrete.stats()["steps_reasons"] == {}
    assert concrete.program.program is not None


@pytest.mark.parametrize("mode", MODES)
def test_several_results_and_unknown_dims(mode):
    def split(a):
        return a[a > 0], np.int32(a.size)

    def f(x):
        return sf.numpy_function(split, [x], [sf.TensorSpec([None]), sf.TensorSpec([], sf.int32)])

    positive, size = staged(mode, f)(sf.constant([1.0, -2.0, 3.0]))
    np.testing.assert_array_equal(positive.numpy(), [1.0, 3.0])
    assert int(size) == 3


class Boom(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(f"boom {code}")
        self.code = code


@pytest.mark.parametrize("mode", ["interpreted", "compiled"])
@pytest.mark.parametrize("where", ["top", "cond", "loop"])
def test_the_callback_exception_reaches_the_caller_unchanged(mode, where):
    def explode(a):
        if float(a.sum()) > 100:
            raise Boom(7)
        return a

    def call(v):
        return sf.numpy_function(explode, [v], sf.TensorSpec([2]))

    def f(x):
        if where == "top":
            return call(x)
        if where == "cond":
            return sf.cond(sf.reduce_sum(x) > 0, lambda: call(x), lambda: x)
        return sf.fori_loop(0, 2, lambda i, v: call(v), x)

    fn = staged(mode, f)
    with pytest.raises(Boom, match="boom 7") as caught:
        fn(sf.constant([100.0, 1.0]))
    assert caught.value.code == 7
    assert any("test_py_func.py" in note for note in caught.value.__notes__)
    np.testing.assert_array_equal(fn(sf.constant([1.0, 2.0])).numpy(), [1.0, 2.0])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("where", ["top", "cond", "loop"])
def test_assignments_before_a_raising_py_func_stay_and_later_ones_never_run(mode, where):
    """Effects run in program order in every way, as in TensorFlow: what the function
    assigned before the py_func that raised is kept, what comes after it never runs.
    (Compiled programs once dropped every assignment of the call.)"""
    v, w = sf.Variable(np.zeros(3, np.float32)), sf.Variable(5.0)

    def explode(a):
        if float(a.sum()) > 100:
            raise Boom(3)
        return a

    def f(x):
        v.assign_add(x)
        w.assign(w * 2.0)
        if where == "top":
            y = sf.numpy_function(explode, [v], sf.TensorSpec([3]))
        elif where == "cond":
            y = sf.cond(sf.reduce_sum(x) > 0,
                        lambda: sf.numpy_function(explode, [v], sf.TensorSpec([3])),
                        lambda: x)
        else:
            y = sf.fori_loop(0, 2, lambda i, a: sf.numpy_function(explode, [a],
                                                                    sf.TensorSpec([3])), v)
        w.assign_add(1.0)  # after the py_func: runs only when it returns
        return y

    fn = staged(mode, f)
    np.testing.assert_array_equal(fn(sf.constant([1.0, 2.0, 3.0])).numpy(), [1.0, 2.0, 3.0])
    assert float(w.numpy()) == 11.0
    with pytest.raises(Boom):
        fn(sf.constant([100.0, 0.0, 0.0]))
    np.testing.assert_array_equal(v.numpy(), [101.0, 2.0, 3.0])
    assert float(w.numpy()) == 22.0


def test_results_that_do_not_fit_tout_are_errors():
    @sf.function
    def wrong_shape(x):
        return sf.numpy_function(lambda a: np.concatenate([a, a]), [x], sf.TensorSpec([2]))

    with pytest.raises(ValueError, match="has shape \\(4,\\), Tout declares float32\\[2\\]"):
        wrong_shape(sf.constant([1.0, 2.0]))

    @sf.function
    def wrong_count(x):
        return sf.numpy_function(lambda a: (a, a), [x], sf.TensorSpec([2]))

    with pytest.raises(ValueError, match="returned 2 values, Tout declares 1"):
        wrong_count(sf.constant([1.0, 2.0]))


def test_a_traced_py_func_takes_a_bare_dtype_as_tensorflow_does():
    @sf.function
    def bare(x):
        return sf.numpy_function(np.sort, [x], sf.float32)

    np.testing.assert_array_equal(bare(sf.constant([2.0, 1.0])).numpy(), [1.0, 2.0])
    assert bare.get_concrete_function(sf.constant([1.0])).outputs[0].shape == (None,)


def test_bound_methods_and_printing_inside_regions(capsys):
    class Counter:
        def __init__(self) -> None:
            self.total = 0.0

        def add(self, a):
            self.total += float(a.sum())
            return a

    counter = Counter()

    @sf.function
    def f(x, n):
        def body(i, v):
            sf.print("i =", i)
            return sf.numpy_function(counter.add, [v], sf.TensorSpec([2]))
        return sf.fori_loop(0, n, body, x)

    f(sf.constant([1.0, 2.0]), sf.constant(3))
    assert counter.total == 9.0
    assert capsys.readouterr().out.splitlines() == ["i = 0", "i = 1", "i = 2"]


@pytest.mark.parametrize("jit", [None, False, True], ids=["eager", "interpreted", "compiled"])
@pytest.mark.parametrize("result, message", [
    (lambda a: None, r"result 0 of .* is None, Tout declares float32\[2\]"),
    (lambda a: np.ones(3, np.float32), r"result 0 of .* has shape \(3,\), Tout declares "
                                       r"float32\[2\]"),
])
def test_a_result_tout_does_not_declare_is_refused_every_way(jit, result, message):
    """None (which NumPy would make a NaN) or another shape than Tout's: a ValueError,
    eagerly as staged."""
    def f(v):
        return sf.numpy_function(result, [v], sf.TensorSpec([2], sf.float32))

    x = sf.constant([1.0, 2.0])
    with pytest.raises(ValueError, match=message):
        f(x) if jit is None else sf.function(f, jit=jit)(x)


def test_threads_compiling_one_function_share_its_callbacks():
    """Threads making the first call of a function with a py_func at once each compiled a
    program and bound the callback's symbol to their own entry: the program kept could
    call an entry freed with another thread's program (crashes, or another function's
    callback running). Entries are now shared per symbol while a program holds them."""
    def make(tag):
        def constant(k):
            return np.int64(tag)

        return sf.function(lambda x: x + sf.numpy_function(constant, [x],
                                                           sf.TensorSpec((), sf.int64)))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for _ in range(15):
            functions = [make(tag * 100) for tag in range(3)]
            for tag, f in enumerate(functions):
                barrier = threading.Barrier(4)
                results = []

                def call(k, f=f, barrier=barrier, results=results):
                    barrier.wait()
                    results.append(int(f(sf.constant(np.int64(k)))) - k)

                threads = [threading.Thread(target=call, args=(k,)) for k in range(4)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                assert results == [tag * 100] * 4
            for tag, f in enumerate(functions):
                assert int(f(sf.constant(np.int64(5)))) == 5 + tag * 100
    finally:
        sys.setswitchinterval(interval)
