"""`sf.autograph.to_code`, `to_graph` and `experimental.do_not_convert`: TensorFlow's
``tf.autograph`` names for the conversion `sf.function` applies."""

from __future__ import annotations

import numpy as np
import pytest

import stageflow as sf
from stageflow.core.errors import StagingError

MODES = [False, True]  # jit


def absolute(x):
    if x > 0:
        y = x
    else:
        y = -x
    return y


def test_to_code_is_the_converted_source_of_a_function_or_an_sf_function():
    code = sf.autograph.to_code(absolute)
    assert code.startswith("def absolute(x):")
    assert "ag__.if_stmt(" in code and "if x > 0:" not in code
    assert sf.autograph.to_code(sf.function(absolute)) == code
    assert code == sf.function(absolute).converted_source()


@pytest.mark.parametrize("entity", [lambda x: x, np.sum])
def test_to_code_refuses_what_is_not_converted(entity):
    with pytest.raises(ValueError, match="sf.autograph.to_code: .* is not converted"):
        sf.autograph.to_code(entity)


@pytest.mark.parametrize("jit", MODES)
def test_to_graph_stages_control_flow_inside_a_function_traced_without_autograph(jit):
    converted = sf.autograph.to_graph(absolute)
    assert converted is not absolute
    np.testing.assert_array_equal(converted(sf.constant(-3.0)).numpy(), 3.0)  # eagerly
    f = sf.function(converted, autograph=False, jit=jit)
    assert float(f(sf.constant(-2.0))) == 2.0
    assert float(f(sf.constant(5.0))) == 5.0
    assert f.experimental_get_tracing_count() == 1  # one graph with a cond, both branches
    with pytest.raises(StagingError):  # unconverted, the Python if needs a value
        sf.function(absolute, autograph=False, jit=jit)(sf.constant(1.0))


def test_do_not_convert_leaves_the_function_as_written():
    def sign(x):
        if x > 0:
            return 1.0
        return -1.0

    marked = sf.autograph.experimental.do_not_convert(sign)
    assert marked is sign
    with pytest.raises(ValueError, match="not converted"):
        sf.autograph.to_code(sign)
    with pytest.raises(StagingError):
        sf.function(sign)(sf.constant(2.0))
    # Called from converted code, it is called as it is too (its Python values work).
    @sf.function
    def outer(x):
        return x * sign(3)

    assert float(outer(sf.constant(2.0))) == 2.0


def test_do_not_convert_as_a_called_decorator_on_a_nested_function():
    seen = []

    @sf.function
    def outer(x):
        @sf.autograph.experimental.do_not_convert()
        def inner(v):
            if isinstance(v, sf.Tensor):  # Python's if on a Python value, kept as written
                seen.append(type(v).__name__)
            return v + 1.0

        return inner(x)

    assert float(outer(sf.constant(1.0))) == 2.0
    assert len(seen) == 1
    assert "def inner(v):\n        if isinstance(v, sf.Tensor):" in sf.autograph.to_code(outer)


def test_the_namespaces():
    assert sf.autograph.experimental.do_not_convert() is sf.autograph.experimental.do_not_convert
    assert sorted(sf.autograph.__all__) == ["experimental", "to_code", "to_graph"]
