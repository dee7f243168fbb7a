"""`Function.pretty_printed_concrete_signatures` prints TensorFlow's format (the call, then
``Args:`` and ``Returns:`` with ``float32 Tensor, shape=(None,)`` lines and numbered
markers for nests, dict keys sorted as TensorFlow's nest sorts them), and
`experimental_get_tracing_count` counts the traces."""

from __future__ import annotations

import stageflow as sf

EXPECTED = """\
step(x, pair, n=3)
  Args:
    x: float32 Tensor, shape=(None,)
    pair: (<1>, <2>)
      <1>: int32 Tensor, shape=()
      <2>: float64 Tensor, shape=(2, 1)
  Returns:
    {'rest': <1>, 'scaled': <2>}
      <1>: float64 Tensor, shape=(2, 1)
      <2>: float32 Tensor, shape=(None,)

step(x, pair, n=4)
  Args:
    x: float32 Tensor, shape=(None,)
    pair: (<1>, <2>)
      <1>: int32 Tensor, shape=()
      <2>: float64 Tensor, shape=(2, 1)
  Returns:
    {'rest': <1>, 'scaled': <2>}
      <1>: float64 Tensor, shape=(2, 1)
      <2>: float32 Tensor, shape=(None,)"""


def step(x, pair, n=3):
    return {"scaled": x * n, "rest": pair[1]}


def test_blocks_in_tracing_order_in_tensorflows_format():
    f = sf.function(step)
    pair = (sf.constant(1), sf.constant([[1.0], [2.0]], sf.float64))
    f.get_concrete_function(sf.TensorSpec([None]), pair)
    f.get_concrete_function(sf.TensorSpec([None]), pair, n=4)
    f.get_concrete_function(sf.TensorSpec([None]), pair)  # a cache hit: no third block
    assert f.pretty_printed_concrete_signatures() == EXPECTED
    assert f.pretty_printed_concrete_signatures(verbose=False) == (
        "step(x, pair, n=3)\n\nstep(x, pair, n=4)")


def test_a_single_result_a_variable_and_a_method():
    v = sf.Variable([1.0, 2.0])

    @sf.function
    def add(x, var):
        return x + var

    add(sf.constant([3.0, 4.0]), v)
    assert add.pretty_printed_concrete_signatures() == (
        "add(x, var)\n  Args:\n    x: float32 Tensor, shape=(2,)\n"
        "    var: float32 Variable, shape=(2,)\n  Returns:\n    float32 Tensor, shape=(2,)")

    class Model(sf.Module):
        @sf.function(input_signature=[sf.TensorSpec([None, 3], sf.int64)])
        def __call__(self, x):
            return x, None

    model = Model()
    model(sf.ones((2, 3), sf.int64))
    assert model.__call__.pretty_printed_concrete_signatures() == (
        "__call__(x)\n  Args:\n    x: int64 Tensor, shape=(None, 3)\n  Returns:\n"
        "    (<1>, <2>)\n      <1>: int64 Tensor, shape=(None, 3)\n      <2>: None")


def test_no_traces_print_nothing():
    assert sf.function(step).pretty_printed_concrete_signatures() == ""


def test_tracing_count_counts_new_signatures_only():
    f = sf.function(lambda x: x + 1.0)
    assert f.experimental_get_tracing_count() == 0
    f(sf.constant([1.0]))
    f(sf.constant([2.0]))
    assert f.experimental_get_tracing_count() == 1
    f(sf.constant([1.0, 2.0]))
    f(sf.constant(1.0, sf.float64))
    assert f.experimental_get_tracing_count() == 3
